// Host side of the GQA decode kernels (ADR-0060 rev2 §0, §2, §5.1-5.3): maps KV heads to CUBE
// Groups, places Q / K / V / O in HBM, builds every rank's RankPlan (block, valid length,
// static reduce tree) and adds one kernel instance per rank and request to a KernelRuntime.
//
// Contract:
// - KV head h runs on SIP `sip + h / groups_per_sip`, group `h % groups_per_sip` of the SIP's
//   CubeGroups partition for C (shape `group_rows x group_cols`, or the default). Short context
//   (kv_per_cube > 0, C must be 1): head h runs on CUBE group h / kv_per_cube, i.e. kv_per_cube
//   heads share each CUBE and every one of its P PEs sweeps 1/P of each; P PEs of each
//   CUBE: the first P of the CUBE's PE mesh in row-major order, which must form a rectangle (P
//   equal to the mesh, or P <= cols, or a multiple of cols).
// - Ranks follow topology::KvPlacement (B = ceil(max_context / (C·P)), rotation start_cube /
//   start_pe, request u adds u to both when rotate_by_request); rank r's valid length is
//   MyLen(r, S).
// - Level-2 reduce over the P PEs (root: the PE rectangle's centre, ties lowest), Level-1 over
//   the C CUBEs (root: the group's root CUBE); each level a kTree, kChain or the chunked kRing
//   (reduce_tree.h; RankPlan's RingPlace).
//   The group root's Level-2 root PE stores O / l.
// - Data layout per rank: Q group [G·T_q, d] bf16 (row g·T_q + t = query head h·G + g, token t),
//   K bf16 in cfg.k_layout (k_layout.h: tile-major [ceil(B/TILE)][d][TILE] by default,
//   transposed [d, B], row-major [B, d]), V [B, d] bf16, O [G·T_q, d] bf16 at the root.
// - MakeAttentionGeometry (attention_geometry.h), PlaceDecodeRequest and Level2Tree are this
//   placement's parts, shared
//   with baseline_fanout_group and the one-CUBE baselines (baseline.h).
// - Errors name the workload field: h_q not a multiple of h_kv, S = 0 or > max_context, C·P
//   not fitting, too many KV heads for the chip's groups, kv_per_cube not 1, 2, 4 or 8, KV
//   caches or instances that do not fit a PE's HBM / TCM (CheckDecodeCapacity), ...
#ifndef AHBMSIM_KERNELS_ATTENTION_DECODE_LAUNCH_H_
#define AHBMSIM_KERNELS_ATTENTION_DECODE_LAUNCH_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/attention_geometry.h"
#include "kernels/attention/decode.h"
#include "kernels/attention/qkv_inputs.h"
#include "kernels/attention/reduce_tree.h"
#include "kernels/host/placement.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "proto/topology.pb.h"
#include "topology/groups.h"
#include "topology/ids.h"

namespace ahbm::kernels {

struct DecodeConfig {
  uint32_t h_q = 64;
  uint32_t h_kv = 8;
  uint32_t d = 128;
  uint32_t t_q = 1;
  uint64_t s = 0;
  uint64_t max_context = 0;  // 0 = s
  uint32_t c = 8;
  uint32_t p = 8;
  uint32_t group_rows = 0;
  uint32_t group_cols = 0;
  uint32_t tile = 256;
  DecodeVariant variant = DecodeVariant::kOpt3;
  KLayout k_layout = KLayout::kTileMajor;  // the K cache layout (k_layout.h)
  ReduceShape level1 = ReduceShape::kTree;
  ReduceShape level2 = ReduceShape::kTree;
  uint32_t sip = 0;
  uint32_t users = 1;
  uint32_t start_cube = 0;
  uint32_t start_pe = 0;
  bool rotate_by_request = true;
  bool kv_bank_interleaved = false;  // kv_bank_layout INTERLEAVED (host::PadForBankInterleave)
  bool scratch_scope = true;  // tests only: without it long sweeps overflow the scratch arena
  // Short-context variant (ADR rev2 §B long/short item 2): > 0 puts `kv_per_cube` whole KV
  // heads on each CUBE (C = 1, PE-SP only, Level-2 reduce only); 0 = the long-context kernel.
  uint32_t kv_per_cube = 0;
  // One context length per request (users = its size); empty: every request has length `s`.
  std::vector<uint64_t> request_lengths;
  // The reduce's message payload and merge (ADR rev2 §4; the ADR's code is triplet + primitive).
  bool packed_payload = false;
  bool fused_merge = false;
  // Issue-ahead (ADR §9.1; decode.h): opt3's and opt2_lookahead's Q·Kᵀ composites issued ahead.
  uint32_t lookahead = 1;
  // One-shot (ADR §5.2): `tile` is OneShotTile(cfg), so every rank's block is one KV tile; a
  // TCM refusal names one_shot instead of tile.
  bool one_shot = false;

  // Request u's context length (its KV tokens, the new one included).
  uint64_t ContextOf(uint32_t u) const { return request_lengths.empty() ? s : request_lengths.at(u); }
  // Request u's KV block sizing: B = ceil(MaxContextOf(u) / (C·P)).
  uint64_t MaxContextOf(uint32_t u) const { return max_context != 0 ? max_context : ContextOf(u); }
  // Where it runs (attention_geometry.h): MakeAttentionGeometry validates it. start_cube must
  // lie in 0 .. C-1 and start_pe in 0 .. P-1 (request r adds r to them, modulo C and P).
  GeometrySpec Geometry() const;
};

struct DecodeLaunch {
  uint32_t g = 0;
  uint32_t ranks_per_head = 0;
  uint32_t level1_rounds = 0;
  uint32_t level2_rounds = 0;
  // A level reduced by the chunked ring: its nodes (0: a tree, or a baseline's pattern).
  uint32_t level1_ring = 0;
  uint32_t level2_ring = 0;
  std::vector<uint32_t> cubes;  // global CUBEs used (for ChipSimOptions::cubes)
  // Per request and KV head: the PE that stores O and the address.
  struct Output {
    uint32_t pe = 0;
    uint64_t addr = 0;
  };
  std::vector<std::vector<Output>> outputs;  // [user][h_kv]
};

// The CUBEs a decode launch uses (to build only those in the ChipSim).
absl::StatusOr<std::vector<uint32_t>> DecodeCubes(const pb::Chip& chip, const DecodeConfig& cfg);
// The CUBEs of each KV head (its CUBE Group): a head's instances message only each other.
absl::StatusOr<std::vector<std::vector<uint32_t>>> DecodeCubeSets(const pb::Chip& chip,
                                                                  const DecodeConfig& cfg);

// Whether the launch fits the chip, checked before anything is placed (LaunchDecode calls it).
// Every PE of a KV head's group holds one rank of that head per request (kv_per_cube heads per
// PE in the short kernel); the group root also holds O. InvalidArgument, one line, naming the
// busiest PE, the need and the capacity:
// - HBM (field s / request_lengths / max_context): K, V, Q, O of every request, each
//   allocation 256 B aligned as host::HbmAllocator does.
// - TCM (instances per PE = users x heads per PE): the persistent arena holds each
//   instance's q, m (x2), l, O and Sj buffers (opt3 lookahead + 1, opt2 up to 8,
//   opt2_lookahead up to max(8, lookahead + 1), baseline_dot none; a row-major K's transposed
//   tile beside each); the scratch arena, split evenly, must hold an instance's larger of one
//   KV tile's temporaries (row-major K: the loaded tile, and opt1's or baseline_dot's
//   transposed one) and its reduce's receive buffers and merge temporaries (decode.cc,
//   lse_merge.cc; a chunked ring's counted at its root: R − 1 merged and R − 1 gathered
//   chunks) plus the stored O. Every
//   instance is counted as the busiest one (a full rank at the busiest reduce node), so a rank
//   left empty (S < C·P) is not credited. When one instance fits alone, the field is users
//   and the message says how many requests fit. When not even one does, the field is the
//   shape that made an instance too big (TcmCulprit in decode_launch.cc): of tile, d, t_q
//   and h_q (G = h_q / h_kv query rows per token), those above their default (256, 128, 1,
//   G 8), else all four; of these the one that fits alone with the least relative cut, and
//   the message gives its largest value that fits (as "at most tile = 9000 fits"). One-shot:
//   the field is one_shot and the message gives the most keys per rank that fit.
absl::Status CheckDecodeCapacity(const pb::Chip& chip, const DecodeConfig& cfg);

// One-shot's tile (ADR §5.2): the largest KV block B of any request rounded up to
// kOneShotTileKeys, so each rank holds one tile (a request with a smaller block pads its K
// slots up to it) and every row of K's [d, tile] block starts on a 256 B DMA chunk (a row
// of B keys at an unaligned stride would pay a partly wasted chunk per row, DESIGN §2).
constexpr uint64_t kOneShotTileKeys = 128;  // 256 B of bf16 keys
uint64_t OneShotTile(const DecodeConfig& cfg);


// One rank of one KV head of one request, placed.
struct PlacedRank {
  uint32_t pe = 0;             // global PE
  uint32_t cube_in_group = 0;
  uint32_t node = 0;           // PE rectangle node
  uint64_t len = 0;            // valid keys (KvPlacement::MyLen)
  uint64_t block_start = 0;    // global position of slot 0
  uint64_t q_addr = 0;         // Q group [G·T_q, d]
  uint64_t k_addr = 0;         // K block, in the layout PlaceDecodeRequest was given
  uint64_t v_addr = 0;         // V block [B, d]
};

// Request u placed on the geometry: KV placement with rotation, K / V / Q group written in
// data mode (`in` non-null), O [G·T_q, d] allocated at each group root.
struct PlacedRequest {
  uint64_t block = 0;                            // B
  std::vector<std::vector<uint32_t>> cubes;      // [h][cube_in_group] global CUBE
  std::vector<std::vector<PlacedRank>> ranks;    // [h][rank]
  std::vector<DecodeLaunch::Output> outputs;     // [h]
};

// head_cubes[h]: the global CUBEs of KV head h's cube_in_group 0..C-1 (HeadCubes, or a copy
// of the head elsewhere). k_layout: K's layout (HostKvLayout with cfg.tile; the baselines
// read the block transposed, [d, B]).
absl::StatusOr<PlacedRequest> PlaceDecodeRequest(
    const AttentionGeometry& geo, const DecodeConfig& cfg, uint32_t u,
    const std::vector<std::vector<uint32_t>>& head_cubes, KLayout k_layout,
    host::HbmAllocator& allocator, MemoryStore* store, const QkvInputs* in);

// The Level-2 reduce tree (kTree or kChain) over the geometry's PE rectangle (root pe_root);
// every edge is one IPCQ hop.
absl::StatusOr<std::vector<ReduceNode>> Level2Tree(const AttentionGeometry& geo,
                                                   ReduceShape shape);
// The Level-2 chunked ring over the PE rectangle (RingCycle: rectangle nodes, pe_root last);
// every link of the cycle must be one IPCQ hop (level2_reduce: ... otherwise).
absl::StatusOr<std::vector<uint32_t>> Level2Ring(const AttentionGeometry& geo);

// Places the tensors (writing `inputs[u]` into `store` when both are given) and adds the
// kernel instances of every rank and request to `runtime`.
absl::StatusOr<DecodeLaunch> LaunchDecode(const pb::Chip& chip, const DecodeConfig& cfg,
                                          KernelRuntime& runtime, MemoryStore* store,
                                          const std::vector<QkvInputs>& inputs);

// After the run: request u's output O [H_q, T_q, d].
absl::StatusOr<std::vector<float>> GatherDecodeOutput(const MemoryStore& store,
                                                      const DecodeConfig& cfg,
                                                      const DecodeLaunch& launch, uint32_t user);

// Random inputs of request u as ADR rev2 §11 draws them: Q, K ~ N(0, 1), V ~ U(-2, 2), drawn
// in that order, row-major; K and V hold ContextOf(u) positions.
QkvInputs RandomDecodeInputs(const DecodeConfig& cfg, uint32_t user, std::mt19937_64& rng);

// Float64 reference attention over bf16-rounded inputs: o [H_q, T_q, d] where query (h, t),
// at global position S - T_q + t (S = in.k.shape[1]), attends causally to the keys of head
// h / G at positions 0 .. S - T_q + t (DESIGN §6; T_q = 1: all S).
std::vector<float> ReferenceDecode(const DecodeConfig& cfg, const QkvInputs& in);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_DECODE_LAUNCH_H_
