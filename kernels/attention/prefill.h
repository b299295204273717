// GQA prefill kernels (ADR-0060 rev2 TL;DR Kernel 2, §5.4, §5.5; DESIGN §4b): one instance per
// PE, request and KV head. An instance owns a list of query tiles and folds KV tiles into each
// tile's running (m, l, O) — flash attention with causal skip — step by step:
// - flash (§5.4, C = P = 1) and short context (§B long/short item 2): one step, the head's
//   whole KV; the G query heads of the KV head are M-folded (row t·G + g of a tile);
// - ring (§5.5, C = G): C steps; at step s the CUBE streams the KV slice that started s CUBEs
//   back along the ring. Each PE forwards its sub-block to the same PE of the next CUBE over the
//   NOC (receives posted before sends, messages chunked), stores the received sub-block to its
//   HBM and joins a CUBE barrier, so the next step's block is whole in the CUBE's HBM before any
//   PE streams it. One query head per CUBE (G = 1 in the tile); no (m, l, O) reduce.
//   Ring depth D (§9.4; RingPlan::depth): D TCM sub-block slots, the sub-block of step t in slot
//   t mod D. D >= 2: at step s the receives of steps up to s + D − 1 are posted (at step 0 all
//   of 1 .. D − 1, then one step a step), before step s's sends, which go out of the TCM slot
//   holding what arrived (step 0: loaded from the KV cache). D = 1: the one slot takes step
//   s + 1's receives, posted before the sends as above, so the held sub-block is streamed from
//   its HBM copy (the KV cache at step 0, else the HBM slot it was stored to) through a
//   message-sized TCM buffer, one message at a time. Either way every receive of a step is
//   posted before any PE's send of that step waits on it, so no send waits for a receive that
//   is posted only after a send — the ring cannot deadlock, whatever the endpoint queue.
//
// Per (query tile, KV tile) pair (§5.4): keys all in the past → unmasked; all in the future →
// never issued (a kernel `if`); overlapping → an additive triangular mask (bf16, 0 or -inf,
// placed in HBM by the launcher) in the Q·Kᵀ epilogue. Both GEMMs are composites; the Q·Kᵀ of
// the next `lookahead` pairs is issued before this pair's softmax (opt3's software pipeline,
// §5.6, §9.1: lookahead 1 is the ADR's form, 0 issues each Q·Kᵀ just before its softmax), so the
// GEMM engine works under the CPU's softmax; Q, Sj and the mask have lookahead + 1 buffers.
// `blocking_dot` (the baseline_dot comparison, ADR §1: what composites replace): both GEMMs are
// blocking `dot`s, scale and mask MATH ops on the CPU, no software pipeline (lookahead 0).
// Sj fp32, P bf16, m, l, O fp32, stored O bf16.
//
// K layouts (PrefillShape::k_layout, k_layout.h): every K block — a rank's KV cache, the ring's
// HBM slots and TCM sub-block buffers — is tile-major [ceil(B / tile)][d][tile] (the default),
// transposed [d, B] or row-major [B, d]; the ring forwards the valid keys of a sub-block in its
// layout (KParts). Row-major: each pair's K tile is loaded and transposed on the MATH engine
// into a persistent buffer (lookahead + 1 of them, like Sj's) before its Q·Kᵀ.
#ifndef AHBMSIM_KERNELS_ATTENTION_PREFILL_H_
#define AHBMSIM_KERNELS_ATTENTION_PREFILL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/attention/k_layout.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"

namespace ahbm::kernels {

// How a KV tile of keys [kpos, kpos + len) meets a query tile of `tokens` tokens at positions
// [qpos, qpos + tokens) (causal: a query sees keys at or before its position).
enum class CausalPair : uint8_t { kSkip, kFull, kMasked };
inline CausalPair ClassifyPair(uint64_t qpos, uint64_t tokens, uint64_t kpos, uint64_t len) {
  if (kpos > qpos + tokens - 1) return CausalPair::kSkip;  // every key after every query
  if (kpos + len - 1 <= qpos) return CausalPair::kFull;    // every key visible to every query
  return CausalPair::kMasked;
}

// A run of KV positions in one PE's HBM: K a block of `block` keys' capacity in
// PrefillShape::k_layout (tile-major [ceil(block / tile)][d][tile]), V [len, d].
struct KvSpan {
  uint32_t owner = 0;   // global PE whose HBM holds it
  uint64_t k_addr = 0;
  uint64_t block = 0;   // B: the K block's capacity in keys (the row length of [d, B])
  uint64_t v_addr = 0;
  uint64_t pos = 0;     // global position of its first key
  uint64_t len = 0;     // keys (0: an empty rank)
};

// A query tile: `tokens` consecutive query tokens, G rows each (row t·G + g), in this PE's HBM.
struct QueryTile {
  uint64_t pos = 0;      // global position of its first token (S − T_q + t0)
  uint32_t tokens = 0;
  uint64_t q_addr = 0;   // [tokens·G, d] bf16
  uint64_t o_addr = 0;   // [tokens·G, d] bf16, written once the tile has seen every key
};

// A causal mask in this PE's HBM: [tokens·G, len] bf16 for keys at `offset` = kpos − qpos.
struct MaskSlot {
  int64_t offset = 0;
  uint32_t tokens = 0;
  uint32_t len = 0;
  uint64_t addr = 0;
  auto Key() const { return std::tuple(offset, tokens, len); }
};

// The ring (§5.5) as one PE of one CUBE sees it.
struct RingPlan {
  Peer next = Peer::Pe(0);  // the same PE of the next CUBE (NOC)
  Peer prev = Peer::Pe(0);
  // The sub-block this PE holds at step s (s = 0: its own, from its KV cache) — what it
  // forwards at step s < C − 1 — and where a received one is stored: HBM slot (s + 1) % 2.
  std::vector<uint64_t> held_len;  // [step]
  uint64_t own_k_addr = 0, own_v_addr = 0;
  uint64_t slot_k[2] = {0, 0}, slot_v[2] = {0, 0};
  uint32_t depth = 2;              // TCM sub-block slots (ring_depth, 1 .. 4)
  uint64_t block = 0;              // B: a sub-block's capacity (keys)
  uint64_t message_bytes = 0;      // chunk size of the ring's NOC messages
  bool send_first = false;         // tests: send before posting the receives (can deadlock)
  // The CUBE barrier after each step's store: a token up the tree to the root and back down.
  std::vector<Peer> barrier_children;
  std::optional<Peer> barrier_parent;
};

struct PrefillShape {
  uint32_t g = 8;          // query heads M-folded into a tile's rows (ring: 1)
  uint32_t d = 128;
  uint32_t tile = 128;     // keys per KV tile
  KLayout k_layout = KLayout::kTileMajor;
  uint32_t max_tokens = 16;  // the largest query tile (tokens); rows = tokens · g
  float scale = 0;         // 1 / sqrt(d)
  uint32_t lookahead = 1;  // Q·Kᵀ composites issued ahead of the pair being folded
  bool blocking_dot = false;  // baseline_dot: blocking dots, no pipeline (lookahead 0)
  bool scratch_scope = true;
};

struct PrefillPlan {
  std::vector<QueryTile> tiles;            // this instance's query tiles, in order
  // The ring's T_q chunking: `chunks` passes of the ring, pass c over tiles
  // [c·tiles_per_chunk, ...) (running states held at once); one pass without a ring.
  uint32_t tiles_per_chunk = 1;
  uint32_t chunks = 1;
  std::vector<std::vector<KvSpan>> steps;  // the KV streamed at each step
  std::vector<MaskSlot> masks;             // sorted by Key()
  std::optional<RingPlan> ring;
};

// The (query tile, KV tile) pairs of one step with a visible key, in issue order: query tile
// major, then span, then tile. `first` .. `first + count` are the step's query tiles.
struct PrefillPair {
  uint32_t q = 0;     // index into PrefillPlan::tiles
  uint32_t span = 0;  // index into the step's spans
  uint64_t tile = 0;  // KV tile within the span
  bool masked = false;
};
std::vector<PrefillPair> VisiblePairs(const PrefillShape& s, const PrefillPlan& plan,
                                      uint32_t step, uint32_t first, uint32_t count);

// The mask placed for (offset, tokens, len) in `masks` (sorted by Key()); KernelError naming
// the PE when there is none.
const MaskSlot& FindMask(const Tl& tl, const std::vector<MaskSlot>& masks, int64_t offset,
                         uint32_t tokens, uint32_t len);

// Messages of at most `bytes` (at least one row): the first `rows` rows of the bf16 TCM buffer
// `buf`, cut by rows (receiver and sender cut alike).
std::vector<Tensor> MessageChunks(const Tensor& buf, uint64_t rows, uint64_t bytes);

// Depth 1's message buffer (bf16 elements): a message of MessageChunks holds at most
// max(message_bytes, one row) bytes, and a row of the ring's parts is tile or d elements (a
// transposed K [d, len]: up to the sub-block's `block` keys).
uint64_t RingBounceElements(const PrefillShape& s, uint64_t block, uint64_t message_bytes);

// The kernel of one instance (parameters are copied into the coroutine frame).
Task<void> PrefillRank(Tl& tl, PrefillShape shape, PrefillPlan plan);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_PREFILL_H_
