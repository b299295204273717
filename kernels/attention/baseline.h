// The decode baselines (DESIGN §4b "Decode baselines"; never the default). All decode T_q = 1,
// run multi-user (one instance per rank and request, rotated by request like decode_launch.h)
// and with per-request context lengths; a rank with no keys fans out / reduces the identity
// (m = kEmptyRowMax, l = 0, O = 0: lse_merge.h). The merge is the primitive MATH log-sum-exp.
//
// - kFanout (ADR rev2 §A, the pre-ADR kernel): query head hq on its own CUBE (the KV head's
//   K/V copied to each of its G query heads' CUBEs: no GQA reuse), the context split over the
//   CUBE's P PEs as contiguous blocks (KvPlacement with C = 1); each rank computes a one-shot
//   partial attention with blocking `dot`s straight from HBM (M = 1 row), then an all-to-all
//   (m, l, O) fan-out around the PE snake ring, P − 1 steps (rev1's "N−1"), so every rank
//   ends with the answer; the CUBE's Level-2 root PE stores it. Request id: u.
// - kFanoutGroup (ADR rev2 §11 gate 3's baseline): the ADR kernels' geometry and KV placement
//   (decode_launch.h: CUBE Groups of C CUBEs, C·P ranks, the same K/V cache, the block stored
//   transposed [d, B]); each of the G query heads of a KV head is its own instance on every
//   rank, reading the rank's whole K/V block (K/V read once per query head: H_q·S·d·2 bytes
//   each), one-shot blocking `dot`s, then a one-direction all-to-all of C·P − 1 steps around a
//   ring over all C·P ranks: the group's CUBEs in snake order, inside each CUBE its PEs in
//   snake order (IPCQ hops), NOC hops between CUBEs. The group root (the ADR kernels' storing
//   PE) stores row g of O. Request id of (request u, query head g): u·G + g — messages carry
//   the request id only, so the G instances sharing a PE need distinct ids.
// - kRev1Tree (ADR rev1 §0 "round-robin placement", §2.1, §3, §4): KV head h on CUBE h from
//   SIP `sip` (C = 1), its G query rows M-folded ([G, d]); token t of request u on PE
//   (start_pe + u + t) mod P (rectangle nodes), dense local slots (K tile-major
//   [tiles][d][TILE], V [slots, d], ⌈max_context / P⌉ slots); tiled blocking `dot`s with rev1
//   §3's online softmax (MATH primitives), then the Level-2 reduce tree over the P PEs
//   (reduce_tree.h; rev1's pairs 1↔3 are not one IPCQ hop on a 2x4 mesh, the row-then-column
//   tree is, with the same ⌈log₂P⌉ depth); the root stores. Request id: u.
#ifndef AHBMSIM_KERNELS_ATTENTION_BASELINE_H_
#define AHBMSIM_KERNELS_ATTENTION_BASELINE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"
#include "proto/topology.pb.h"

namespace ahbm::kernels {

enum class BaselineKind : uint8_t { kFanout, kFanoutGroup, kRev1Tree };

// A fan-out rank (kFanout, kFanoutGroup): one query row.
struct BaselineRankPlan {
  uint32_t d = 128;
  float scale = 0;
  uint64_t q_addr = 0;   // [1, d] bf16
  uint64_t kt_addr = 0;  // [d, block] bf16 (the K block transposed)
  uint64_t block = 0;    // B
  uint64_t v_addr = 0;   // [block, d] bf16
  uint64_t len = 0;      // this rank's keys
  Peer next = Peer::Ipcq(topology::Dir::kEast);  // ring successor
  Peer prev = Peer::Ipcq(topology::Dir::kWest);  // ring predecessor
  uint32_t ranks = 1;                            // ring length: ranks − 1 steps
  bool store_output = false;
  uint64_t o_addr = 0;  // [1, d] bf16
};

Task<void> BaselineRank(Tl& tl, BaselineRankPlan plan);

// A rev1 rank (kRev1Tree): G rows M-folded, tiled sweep, tree reduce.
struct Rev1RankPlan {
  uint32_t rows = 8;  // G
  uint32_t d = 128;
  uint32_t tile = 256;
  float scale = 0;
  uint64_t q_addr = 0;  // [rows, d] bf16
  uint64_t k_addr = 0;  // tile-major [tiles][d][tile] bf16
  uint64_t v_addr = 0;  // [slots, d] bf16
  uint64_t len = 0;     // this PE's tokens
  std::vector<Peer> children;  // merge order
  std::optional<Peer> parent;
  bool store_output = false;
  uint64_t o_addr = 0;  // [rows, d] bf16
};

Task<void> Rev1Rank(Tl& tl, Rev1RankPlan plan);

// The running (m, l, O) of `rows` query rows in the persistent arena (so per-step scratch
// scopes may recycle everything else); m double-buffered so a fold or merge writes the new
// maximum into the other buffer and never copies it.
struct Running {
  Tensor m[2];
  int cur = 0;
  Tensor l, o;
  const Tensor& M() const { return m[cur]; }
};

// One KV tile folded into `r` with blocking dots and MATH primitives (rev1 §3; the pre-ADR
// kernels of ADR rev2 §A): Sj = scale·q·Kj [+ mask: an additive 0 / −inf tensor of Sj's shape];
// m2 = maximum(m, max(Sj)); P = exp(Sj − m2) rounded to bf16; corr = exp(m − m2);
// l = l·corr + sum(P); O = O·corr + P·Vj; m = m2. q [rows, d], kj (d, len), vj [len, d] in TCM
// or HBM; temporaries in the current scratch.
Task<void> FoldTileBlocking(Tl& tl, Running& r, const Tensor& q, const Tensor& kj,
                            const Tensor& vj, float scale, const Tensor* mask = nullptr);

// O / l, stored as bf16 [rows, d] at `o_addr` of this PE's HBM.
Task<void> NormaliseAndStore(Tl& tl, const Running& r, uint64_t o_addr, uint32_t rows,
                             uint32_t d);

// The fan-out ring: `cubes` in order, inside each its P PEs in snake order (SnakeOrder over the
// geometry's PE rectangle; IPCQ hops), NOC hops between CUBEs. Per global PE: its successor and
// predecessor. Errors (field p) when a link inside a CUBE is not one IPCQ hop.
struct RingLinks {
  Peer next = Peer::Ipcq(topology::Dir::kEast);
  Peer prev = Peer::Ipcq(topology::Dir::kWest);
};
absl::StatusOr<std::map<uint32_t, RingLinks>> FanoutRing(const AttentionGeometry& geo,
                                                         const std::vector<uint32_t>& cubes);

// The CUBEs the baseline uses (errors name the field: t_q, h_q, p, ...).
absl::StatusOr<std::vector<uint32_t>> BaselineCubes(const pb::Chip& chip, const DecodeConfig& cfg,
                                                    BaselineKind kind = BaselineKind::kFanout);
// The CUBE sets whose instances message only each other: a KV head's group
// (baseline_fanout_group), else each CUBE alone (one head per CUBE, IPCQ inside it).
absl::StatusOr<std::vector<std::vector<uint32_t>>> BaselineCubeSets(
    const pb::Chip& chip, const DecodeConfig& cfg, BaselineKind kind = BaselineKind::kFanout);
// kFanout's CUBEs for any kernel's spec (the prefill baseline's too): one per query head from
// SIP spec.sip, each CUBE's fan-out ring fitting its PE mesh (errors: the geometry's with
// C = 1, then p, then h_q); and those CUBEs as sets of one.
absl::StatusOr<std::vector<uint32_t>> FanoutCubes(const pb::Chip& chip, const GeometrySpec& spec);
absl::StatusOr<std::vector<std::vector<uint32_t>>> FanoutCubeSets(const pb::Chip& chip,
                                                                  const GeometrySpec& spec);

// Places the tensors (and the inputs in data mode) and adds every instance. The launch's
// level2_rounds / level1_rounds are the sequential message rounds on IPCQ / NOC links (their
// sum: the fan-out steps or tree depth); outputs are read with GatherDecodeOutput (kFanout:
// g = 1, one output per query head; the others: g = G, one per KV head).
absl::StatusOr<DecodeLaunch> LaunchBaseline(const pb::Chip& chip, const DecodeConfig& cfg,
                                            KernelRuntime& runtime, MemoryStore* store,
                                            const std::vector<QkvInputs>& inputs,
                                            BaselineKind kind = BaselineKind::kFanout);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_BASELINE_H_
