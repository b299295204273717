// Host side of the GQA prefill kernels (ADR-0060 rev2 §5.4, §5.5, §B; DESIGN §4b): places Q, K,
// V, O and the causal masks in HBM, splits each head's query tiles over the PEs and adds one
// PrefillRank instance per PE, request and head to a KernelRuntime.
//
// Contract:
// - Variants: kFlash (§5.4, C = P = 1: KV head h on PE 0 of CUBE group h, G query heads
//   M-folded, query tiles of q_tile / G tokens); kShortContext (kv_per_cube whole KV heads per
//   CUBE, C = 1, the head's KV over the CUBE's P PEs, its query tiles split over them, every PE
//   streaming the whole KV); kRing (§5.5, C = G: the group's CUBE holding KV slice i — ranks
//   [i·P, (i+1)·P) of topology::KvPlacement — owns query head h·G + i; query tiles of q_tile
//   tokens of that head split over its P PEs; the slices rotate along the snake cycle of the
//   group's CUBEs). The CUBE Groups are attention's (MakeAttentionGeometry). kBaselineFanout (the
//   pre-ADR baseline, ADR rev2 §A; prefill_baseline.h): query head hq on CUBE hq of SIP `sip`
//   (C = 1), its KV head copied there, contiguous KV blocks and query rows over the CUBE's P
//   PEs, a bidirectional K/V fan-out around the PE ring, blocking dots, no causal skip.
//   kBaselineDot (ADR §1's comparison): kRing's placement, rotation and causal skip with both
//   GEMMs as blocking dots and scale / mask as MATH ops (PrefillShape::blocking_dot).
// - lookahead (§9.1): Q·Kᵀ composites issued ahead (1: the ADR's software pipeline), refused
//   beyond the chip's max_inflight_composites − 1 and, other than 0, for the baselines.
//   ring_depth (§9.4; 1 .. 4) and ring_message_bytes (> 0, at most noc.endpoint_queue_bytes)
//   shape the ring (prefill.h).
// - Query token t of request u (T_q = t_q, or the whole prompt S_u when t_q = 0) sits at global
//   position S_u − T_q + t (DESIGN §6); causal.
// - query_split (ring, short context): tile k of n goes to PE node k·P / n (kContiguous),
//   k mod P (kStriped), or zig-zag: round k / P runs forward on even rounds, backward on odd
//   ones (kZigzag, the default: the balanced causal layout).
// - A step's KV spans are streamed from the instance's own sub-block on (StartAtOwn in the .cc),
//   so the PEs of a CUBE read different PEs' channels at a time.
// - Layouts in HBM: K in cfg.k_layout (k_layout.h: tile-major [ceil(B/tile)][d][tile] by
//   default, transposed [d, B], row-major [B, d]; the ring's slots and TCM buffers alike),
//   V [B, d] (the decode KV cache); per
//   instance Q and O [Σ rows, d] bf16 (its tiles back to back, row t·G + g in flash / short);
//   masks [rows, len] bf16, one per distinct (key offset, tokens, len); ring: two HBM slots of a
//   sub-block per PE.
// - TCM: every instance holds its buffers (Q, Sj, mask and a row-major K's transposed tile ×
//   (lookahead + 1), ring sub-block × ring_depth, depth 1's message buffer) and running
//   states in the persistent arena (instances on one PE share it evenly); the ring chunks T_q so
//   a chunk's states fit (tiles_per_chunk), the others keep two states. Errors name a field.
#ifndef AHBMSIM_KERNELS_ATTENTION_PREFILL_LAUNCH_H_
#define AHBMSIM_KERNELS_ATTENTION_PREFILL_LAUNCH_H_

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/attention_geometry.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/prefill.h"
#include "kernels/attention/qkv_inputs.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "proto/topology.pb.h"

namespace ahbm::kernels {

// kBaselineFanout: the pre-ADR prefill (ADR rev2 §A; prefill_baseline.h), for comparison only.
// kBaselineDot: the ring's placement with blocking dots (prefill.h, `blocking_dot`).
enum class PrefillVariant : uint8_t { kFlash, kShortContext, kRing, kBaselineFanout, kBaselineDot };
enum class QuerySplit : uint8_t { kContiguous, kStriped, kZigzag };

struct PrefillConfig {
  uint32_t h_q = 64;
  uint32_t h_kv = 8;
  uint32_t d = 128;
  uint64_t s = 0;
  uint32_t t_q = 0;            // 0: the whole prompt (T_q = S of each request)
  uint64_t max_context = 0;    // 0 = s
  uint32_t c = 0;              // ring: 0 = G; flash / short: 1
  uint32_t p = 8;              // flash: 1
  uint32_t group_rows = 0;
  uint32_t group_cols = 0;
  uint32_t tile = 128;         // keys per KV tile
  uint32_t q_tile = 128;       // GEMM rows per query tile
  KLayout k_layout = KLayout::kTileMajor;  // the K cache layout (k_layout.h)
  PrefillVariant variant = PrefillVariant::kRing;
  QuerySplit query_split = QuerySplit::kZigzag;
  uint32_t kv_per_cube = 1;    // kShortContext
  uint32_t sip = 0;
  uint32_t users = 1;
  uint32_t start_cube = 0;
  uint32_t start_pe = 0;
  bool rotate_by_request = true;
  bool kv_bank_interleaved = false;  // kv_bank_layout INTERLEAVED (host::PadForBankInterleave)
  std::vector<uint64_t> request_lengths;
  uint64_t ring_message_bytes = 16 << 10;  // NOC message chunk of the ring (<= endpoint queue)
  uint32_t ring_depth = 2;                 // the ring's TCM sub-block slots (1 .. 4; prefill.h)
  // Q·Kᵀ composites issued ahead of the pair being folded (0 .. max_inflight_composites − 1;
  // unset: 1, the ADR's pipeline; the baselines pipeline nothing and refuse it).
  std::optional<uint32_t> lookahead;
  // IPCQ message chunk of the baseline's K/V fan-out (0: the topology's IPCQ queue, 256 KiB).
  uint64_t fanout_message_bytes = 0;
  bool ring_send_first = false;            // tests: sends before receives (deadlocks)
  uint32_t max_tiles_per_chunk = 0;        // ring: cap on T_q chunk tiles (0: what fits TCM)
  bool scratch_scope = true;

  uint32_t G() const { return h_q / h_kv; }
  bool Baseline() const {
    return variant == PrefillVariant::kBaselineDot || variant == PrefillVariant::kBaselineFanout;
  }
  uint32_t Lookahead() const { return lookahead ? *lookahead : Baseline() ? 0 : 1; }
  uint64_t ContextOf(uint32_t u) const { return request_lengths.empty() ? s : request_lengths.at(u); }
  uint64_t MaxContextOf(uint32_t u) const { return max_context != 0 ? max_context : ContextOf(u); }
  uint64_t QueriesOf(uint32_t u) const { return t_q != 0 ? t_q : ContextOf(u); }
  // The ring's placement and rotation (kRing, kBaselineDot).
  bool Ring() const { return variant == PrefillVariant::kRing || variant == PrefillVariant::kBaselineDot; }
  // C and P as the variant uses them.
  uint32_t C() const { return Ring() ? (c != 0 ? c : G()) : 1; }
  // Rows per query token in a tile: the ring and the baselines hold one query head per tile.
  uint32_t RowsPerToken() const {
    return Ring() || variant == PrefillVariant::kBaselineFanout ? 1 : G();
  }
  uint32_t P() const { return variant == PrefillVariant::kFlash ? 1 : p; }
  // Where it runs (attention_geometry.h): C(), P(), one query token for the checks (Validate
  // checks T_q per request), kv_per_cube only for the short-context kernel.
  GeometrySpec Geometry() const;
};

struct PrefillLaunch {
  std::vector<uint32_t> cubes;  // global CUBEs used
  // Where each query tile's output went: request u, rows [tokens · g, d] bf16 at pe / addr, row
  // t·g + gi = query head `head + gi`, token t0 + t.
  struct Output {
    uint32_t pe = 0;
    uint64_t addr = 0;
    uint32_t head = 0;
    uint32_t g = 1;
    uint64_t t0 = 0;
    uint32_t tokens = 0;
  };
  std::vector<std::vector<Output>> outputs;  // [user]
  // What the kernels will issue (from VisiblePairs): GEMM composites (2 per visible pair) and
  // the full grid's count (every pair of every step), summed over instances. kBaselineFanout
  // issues no composites: both count its blocking `dot`s, 2 per (query tile, KV tile) pair of
  // every block (no causal skip: equal, the full grid), over every T_q chunk's pass.
  uint64_t composites = 0;
  uint64_t grid_composites = 0;
  // kBaselineFanout: the K/V fan-out's sequential rounds, ⌈(P − 1) / 2⌉ per KV tile and chunk.
  uint32_t fanout_rounds = 0;
  uint32_t tiles_per_chunk = 0;  // the ring's (the smallest over instances)
  uint32_t chunks = 1;           // the ring's query chunks (the largest)
  // Per instance (in AddKernel order): its global PE and query-tile rows (for balance tests).
  std::vector<uint32_t> instance_pes;
};

// Host pieces shared with the baseline's launcher (prefill_baseline.cc):
// The TCM each of `instances` kernel instances on one PE may use: the persistent arena (less the
// IPCQ demultiplexing staging when several share the PE) and the scratch arena (64 B alignment
// slack taken), split evenly.
struct TcmShare {
  uint64_t persistent = 0, scratch = 0;
};
TcmShare TcmShareOf(const pb::Chip& chip, uint64_t instances);
// Writes the causal mask `m` ([tokens·g, len] bf16: 0 where key offset + column <= token, else
// −inf; row t·g + gi) to PE `pe`'s HBM; a slot outside the region is an invariant error.
absl::Status WritePrefillMask(MemoryStore* store, uint32_t pe, const MaskSlot& m, uint32_t g);
uint64_t Align64(uint64_t v);

// Validates the configuration (errors name the field) and returns the CUBEs it uses.
absl::StatusOr<std::vector<uint32_t>> PrefillCubes(const pb::Chip& chip, const PrefillConfig& cfg);
// The CUBE sets whose instances message only each other (a KV head's CUBE Group; each CUBE
// alone for the baseline).
absl::StatusOr<std::vector<std::vector<uint32_t>>> PrefillCubeSets(const pb::Chip& chip,
                                                                   const PrefillConfig& cfg);

// Query tiles 0..n-1 split over `pes` PE nodes: the tiles of each node, ascending.
std::vector<std::vector<uint32_t>> SplitQueryTiles(uint32_t n, uint32_t pes, QuerySplit split);

// Places the tensors (writing inputs[u] when `store` is given) and adds the instances.
absl::StatusOr<PrefillLaunch> LaunchPrefill(const pb::Chip& chip, const PrefillConfig& cfg,
                                            KernelRuntime& runtime, MemoryStore* store,
                                            const std::vector<QkvInputs>& inputs);

// After the run: request u's output O [H_q, T_q, d].
absl::StatusOr<std::vector<float>> GatherPrefillOutput(const MemoryStore& store,
                                                       const PrefillConfig& cfg,
                                                       const PrefillLaunch& launch, uint32_t user);

// Request u's inputs: q [H_q, T_q, d], k and v [H_kv, S_u, d] (RandomDecodeInputs' draws).
QkvInputs RandomPrefillInputs(const PrefillConfig& cfg, uint32_t user, std::mt19937_64& rng);

// Float64 causal reference (ReferenceDecode) of request u.
std::vector<float> ReferencePrefill(const PrefillConfig& cfg, uint32_t user, const QkvInputs& in);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_PREFILL_LAUNCH_H_
