// GQA decode kernels (ADR-0060 rev2 TL;DR Kernel 1, §3, §4, §5.1-5.3, §5.6): one instance per
// rank (PE) of a KV head's CUBE Group. Each rank sweeps its resident KV block tile by tile with
// the G query rows of the head group folded into M (`[G·T_q, d]`), keeps the running
// `(m, l, O)` in the persistent arena, then joins the static 2-level reduce-to-root (§4).
//
// Variants (§5.6):
// - kOpt1: composite Q·Kᵀ(j) -> the CPU auto-waits on Sj for the softmax -> composite P·V(j);
//          the GEMM engine idles while the CPU runs softmax (the bubble).
// - kOpt3: software pipelining: Q·Kᵀ(j+1) is issued before softmax(j), into a persistent
//          double buffer, so it fills the GEMM engine under softmax(j) (hidden, not removed).
// - kOpt2: composite Q·Kᵀ(j) then ex_composite("softmax_pv") per tile; the CPU never waits
//          inside the sweep; tl.WaitAll() drains before the reduce.
// - kOpt2Lookahead (past the ADR, DESIGN §4b): opt2's chain with Q·Kᵀ(j+L) issued before
//          softmax_pv(j) (L = `lookahead`, 1 by default), so the DMA and GEMM of the next tiles
//          are queued before the chain's merge of this one; same commands and numerics as opt2.
// - kBaselineDot (ADR §1: what composites replace): the ADR kernel's placement and reduce,
//          each tile with blocking tl.Dot: load K(j), Sj = dot(q, K(j)), scale (and mask) and
//          softmax on MATH, load V(j), dot(P, V(j)), accumulate; the CPU waits on every dot.
//
// Issue-ahead (ADR §9.1): opt3 keeps `lookahead` Q·Kᵀ composites issued ahead of the tile whose
// softmax runs (the ADR's form: 1; 0: opt1's order), in lookahead + 1 persistent Sj buffers.
// One-shot (ADR §5.2) is a launch with one tile of B keys (decode_launch.h): no kernel change.
//
// Layouts (DESIGN §4b): K as DecodeShape::k_layout says (k_layout.h; by default tile-major
// `[tiles][d][TILE]`: the (d, TILE) operand of tile j is contiguous, the ragged last tile a
// strided [d, len] view; transposed `[d, B]`; row-major `[B, d]`, each tile loaded and
// transposed on the MATH engine into a TCM buffer: opt1's in the tile's scratch scope, opt3's
// and opt2's persistent beside each Sj buffer; the transpose blocks, so the CPU waits for each
// tile's load, opt2's included), V row-major `[B, d]`, Q group `[G·T_q, d]` bf16
// replicated on every rank. Sj fp32; P rounded to bf16 before P·V; m, l, O
// fp32; the stored output `O / l` is bf16 `[G·T_q, d]` at the group root.
#ifndef AHBMSIM_KERNELS_ATTENTION_DECODE_H_
#define AHBMSIM_KERNELS_ATTENTION_DECODE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/attention/k_layout.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"

namespace ahbm::kernels {

enum class DecodeVariant : uint8_t { kOpt1, kOpt2, kOpt3, kOpt2Lookahead, kBaselineDot };

struct DecodeShape {
  uint32_t rows = 8;     // G · T_q (the M-fold)
  uint32_t d = 128;
  uint32_t tile = 256;   // keys per KV tile
  float scale = 0;       // 1 / sqrt(d)
  DecodeVariant variant = DecodeVariant::kOpt3;
  KLayout k_layout = KLayout::kTileMajor;
  uint32_t opt2_s_buffers = 8;  // opt2: Sj buffers in flight (reuse waits for the oldest);
                                // opt2_lookahead uses at least lookahead + 1
  uint32_t lookahead = 1;       // opt3 and opt2_lookahead: Q·Kᵀ composites issued ahead
  bool scratch_scope = true;    // per-tile temporaries in a scratch_scope (ADR-0063); tests only
                                // turn it off, to show the overflow it prevents
  // The reduce (ADR §4; the ADR's code is both false). packed_payload: the running (m, l, O)
  // live in one persistent fp32 buffer [m | l | O] ([rows·(d + 2), 1]; m, l, O are dense views
  // of it) and travel as ONE message. fused_merge: each merge is one lse_merge command on the
  // MATH engine (non-blocking, issued on the child's pending recv_async: the runtime starts it
  // when the message has landed) instead of 11 blocking primitive ops after a blocking recv.
  bool packed_payload = false;
  bool fused_merge = false;
};

// A rank's place on one level's chunked ring (ADR §4.4; reduce_tree.h kRing for the
// schedule): it sends to `next` and receives from `prev`; position nodes - 1 is the level's
// root.
struct RingPlace {
  Peer next;
  Peer prev;
  uint32_t pos = 0;
  uint32_t nodes = 0;
};

// One rank's part: where its data is and its place in the static reduce tree.
struct RankPlan {
  uint64_t q_addr = 0;   // this PE's HBM: Q group [rows, d] bf16
  uint64_t k_addr = 0;   // this PE's HBM: K block, in DecodeShape::k_layout
  uint64_t block = 0;    // B: the K block's capacity in keys (the row length of [d, B])
  uint64_t v_addr = 0;   // this PE's HBM: V block [B, d]
  uint64_t my_len = 0;   // valid tokens of this rank's block
  // Level-2 (IPCQ, inside the CUBE) and Level-1 (NOC, CUBE roots of the group).
  std::vector<Peer> l2_children;
  std::optional<Peer> l2_parent;
  std::vector<Peer> l1_children;
  std::optional<Peer> l1_parent;
  // A level reduced by the chunked ring (2+ nodes) has its place here instead of children
  // and a parent; a rank whose ring position is not the level's root stops after the ring.
  std::optional<RingPlace> l2_ring;
  std::optional<RingPlace> l1_ring;
  bool store_output = false;  // the group root
  uint64_t o_addr = 0;        // group root: O [rows, d] bf16 in its HBM
  // Causal T_q > 1 (DESIGN §6): query t sits at global position S - T_q + t. Tiles
  // j >= first_masked_tile hold keys some query must not see; each gets an additive mask
  // [rows, len] bf16 (0 visible, -inf hidden) in this PE's HBM, tile after tile from
  // mask_addr, added to Sj in the Q·Kᵀ epilogue. Every other tile is unmasked.
  uint64_t first_masked_tile = UINT64_MAX;
  uint64_t mask_addr = 0;
};

// The kernel of one rank (parameters are copied into the coroutine frame).
Task<void> DecodeRank(Tl& tl, DecodeShape shape, RankPlan plan);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_DECODE_H_
