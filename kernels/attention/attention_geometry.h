// Where GQA attention runs on the chip, decode's and prefill's alike (ADR rev2 §0, §2):
// KV head h on a CUBE Group of C CUBEs, each CUBE's first P PEs as a rectangle with its
// Level-2 root at the centre. Decode (DecodeConfig::Geometry) and prefill
// (PrefillConfig::Geometry) each say what they need in a GeometrySpec; neither borrows the
// other's configuration.
//
// Contract:
// - KV head h runs on SIP `sip + slot / groups_per_sip`, group `slot % groups_per_sip` of the
//   SIP's CubeGroups partition for C (shape `group_rows x group_cols`, or the default), where
//   slot = h, or h / kv_per_cube when kv_per_cube > 0 (whole heads per CUBE; C must be 1).
// - The P PEs of each CUBE: the first P of the CUBE's PE mesh in row-major order, which must
//   form a rectangle (P equal to the mesh, or P <= cols, or a multiple of cols).
// - MakeAttentionGeometry validates the spec, each error one InvalidArgument naming the
//   workload field, in this order: kv_per_cube, h_kv, h_q, d, t_q, users, request_lengths,
//   s / request_lengths (every length > 0 and <= its max_context; t_q <= it), tile, p, the
//   CUBE Group shape (c, group_rows, group_cols), c (short context), sip, h_kv (heads that do
//   not fit, naming the largest C or smallest kv_per_cube that would), start_cube, start_pe.
#ifndef AHBMSIM_KERNELS_ATTENTION_ATTENTION_GEOMETRY_H_
#define AHBMSIM_KERNELS_ATTENTION_ATTENTION_GEOMETRY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/topology.pb.h"
#include "topology/groups.h"
#include "topology/ids.h"

namespace ahbm::kernels {

// What a kernel tells the geometry about itself.
struct GeometrySpec {
  uint32_t h_q = 0;
  uint32_t h_kv = 0;
  uint32_t d = 0;
  uint32_t t_q = 1;          // query tokens per request (checked against every context)
  uint32_t users = 1;
  uint64_t s = 0;
  uint64_t max_context = 0;  // 0 = each request's own length
  std::vector<uint64_t> request_lengths;  // one per request; empty: every request has s
  uint32_t c = 0;            // CUBEs per KV head's group
  uint32_t p = 0;            // PEs per CUBE
  uint32_t group_rows = 0;   // the CUBE Group's shape (0 x 0: the default for C)
  uint32_t group_cols = 0;
  uint32_t tile = 0;         // keys per KV tile
  uint32_t sip = 0;          // the first SIP used
  uint32_t start_cube = 0;   // rotation start (request u adds u when the kernel rotates)
  uint32_t start_pe = 0;
  uint32_t kv_per_cube = 0;  // > 0: whole heads per CUBE (C = 1)

  uint64_t ContextOf(uint32_t u) const { return request_lengths.empty() ? s : request_lengths.at(u); }
  uint64_t MaxContextOf(uint32_t u) const { return max_context != 0 ? max_context : ContextOf(u); }
};

struct AttentionGeometry {
  topology::ChipIndex index;
  topology::CubeGroups groups;
  uint32_t pe_rows = 0, pe_cols = 0;  // the P PEs' rectangle
  std::vector<uint32_t> pes;          // PE-in-CUBE of rectangle node k
  uint32_t pe_root = 0;               // rectangle node of the Level-2 root
  uint32_t groups_per_sip = 0;
  // From the spec: where heads go.
  uint32_t sip = 0, h_kv = 0, c = 0, kv_per_cube = 0;

  // Global CUBE of KV head h's cube_in_group ci.
  uint32_t CubeOf(uint32_t h, uint32_t ci) const;
  // [h][ci]: CubeOf for every KV head.
  std::vector<std::vector<uint32_t>> HeadCubes() const;
};

// Validates `spec` (the contract's order) and builds its geometry.
absl::StatusOr<AttentionGeometry> MakeAttentionGeometry(const pb::Chip& chip,
                                                        const GeometrySpec& spec);

// Whether `spec`'s CUBE Groups host its h_kv KV heads from SIP `sip` on: C divides a SIP's
// CUBEs, and (CUBEs per SIP / C) groups per SIP x the SIPs from `sip` x heads per group
// (kv_per_cube, else 1) >= h_kv. AUTO picks its C (and kv_per_cube) by it.
bool HostsKvHeads(const pb::Chip& chip, const GeometrySpec& spec);

// The CUBEs the geometry uses, ascending (to build only those in the ChipSim), and each KV
// head's CUBEs (its group: a head's instances message only each other).
absl::StatusOr<std::vector<uint32_t>> AttentionCubes(const pb::Chip& chip,
                                                     const GeometrySpec& spec);
absl::StatusOr<std::vector<std::vector<uint32_t>>> AttentionCubeSets(const pb::Chip& chip,
                                                                     const GeometrySpec& spec);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_ATTENTION_GEOMETRY_H_
