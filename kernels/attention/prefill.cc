#include "kernels/attention/prefill.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/attention/lse_merge.h"

namespace ahbm::kernels {
namespace {

using Shape = std::vector<uint64_t>;

uint64_t TilesOf(const PrefillShape& s, uint64_t len) { return (len + s.tile - 1) / s.tile; }

uint64_t TileLen(const PrefillShape& s, const KvSpan& sp, uint64_t j) {
  return std::min<uint64_t>(s.tile, sp.len - j * s.tile);
}

// K tile j of a span as a (d, len) operand (k_layout.h; row-major: loaded and transposed
// into `kt`).
Task<Tensor> KTile(Tl& tl, const PrefillShape& s, const KvSpan& sp, uint64_t j, const Tensor& kt) {
  const KBlock k{s.k_layout, sp.k_addr, sp.owner, s.d, s.tile, sp.block};
  return KOperand(tl, k, j, TileLen(s, sp, j), kt, s.scratch_scope);
}

Tensor VTile(Tl& tl, const PrefillShape& s, const KvSpan& sp, uint64_t j) {
  const Shape shape = {TileLen(s, sp, j), s.d};
  return tl.Ref(sp.v_addr + j * s.tile * s.d * 2, shape, pb::BF16, sp.owner);
}

// One query tile's running (m, l, O) (§3): m double-buffered so m2 needs no copy. Buffers hold
// the largest tile; a tile uses their first rows.
struct State {
  Tensor m[2];
  int cur = 0;
  Tensor l, o;
};

// Buffers reused pair after pair: Q of the current query tile, Sj, the causal mask and a
// row-major K's transposed tile, each lookahead + 1 times for the software pipeline (pair k's
// Q·Kᵀ is issued after pair k − lookahead − 1's softmax, which waited on its Sj, i.e. on its
// Q·Kᵀ, the last reader of that pair's buffers; a Q buffer returns after lookahead + 1 tile
// changes, each tile at least one pair).
struct Buffers {
  std::vector<Tensor> q;     // [max_rows, d] bf16
  std::vector<Tensor> s;     // [max_rows, tile] fp32
  std::vector<Tensor> mask;  // [max_rows · tile, 1] bf16 (a dense [rows, len] prefix)
  std::vector<Tensor> kt;    // row-major K: [d · tile, 1] bf16, a transposed tile (a dense [d, len] prefix)
  Tensor q_now;    // the loaded Q of the last issued pair (pending while it loads)
  size_t q_slot = 0;
  int64_t q_tile = -1;
};

struct Pipeline {
  const PrefillShape& s;
  const PrefillPlan& plan;
  Buffers b;
  std::vector<State> states;
};

Task<void> InitState(Tl& tl, State& st, uint64_t rows) {
  st.cur = 0;
  co_await tl.FillInto(st.m[0].Rows(0, rows), kEmptyRowMax);
  co_await tl.FillInto(st.l.Rows(0, rows), 0.0f);
  co_await tl.FillInto(st.o.Rows(0, rows), 0.0f);
}

// Q·Kᵀ of pair k (non-blocking): scale, and on a masked pair the mask, in the epilogue.
// blocking_dot: a blocking dot, then scale and mask as MATH ops (Sj complete on return).
Task<Tensor> IssueQk(Tl& tl, Pipeline& pl, const std::vector<KvSpan>& spans,
                     const PrefillPair& pair, uint64_t k) {
  const PrefillShape& s = pl.s;
  const QueryTile& qt = pl.plan.tiles[pair.q];
  const uint64_t rows = uint64_t{qt.tokens} * s.g;
  const size_t buf = k % pl.b.s.size();
  if (pl.b.q_tile != pair.q) {
    pl.b.q_slot = (pl.b.q_slot + 1) % pl.b.q.size();
    pl.b.q_tile = pair.q;
    const Shape qshape = {rows, s.d};
    pl.b.q_now = co_await tl.LoadInto(tl.Ref(qt.q_addr, qshape), pl.b.q[pl.b.q_slot].Rows(0, rows));
  }
  const KvSpan& sp = spans[pair.span];
  const uint64_t len = TileLen(s, sp, pair.tile);
  std::optional<Tensor> mask;
  if (pair.masked) {
    const int64_t offset = static_cast<int64_t>(sp.pos + pair.tile * s.tile) -
                           static_cast<int64_t>(qt.pos);
    const MaskSlot& slot = FindMask(tl, pl.plan.masks, offset, qt.tokens, static_cast<uint32_t>(len));
    const Shape mshape = {rows, len};
    mask = co_await tl.LoadInto(tl.Ref(slot.addr, mshape), pl.b.mask[buf].Rows(0, rows * len).View(mshape));
  }
  Tensor out = pl.b.s[buf].Rows(0, rows).Cols(0, len);
  const Tensor kt = pl.b.kt.empty() ? Tensor() : pl.b.kt[buf];  // row-major's transposed tile
  Tensor kj = co_await KTile(tl, s, sp, pair.tile, kt);
  if (s.blocking_dot) {
    co_await tl.Dot(pl.b.q_now, kj, out);
    co_await tl.Scale(out, s.scale, out);
    if (mask) co_await tl.Add(out, *mask, out);
    co_return out;
  }
  std::vector<Epilogue> epi = {Epilogue::Scale(s.scale)};
  if (mask) epi.push_back(Epilogue::With(pb::ADD, *mask));
  co_return co_await tl.Composite(pl.b.q_now, kj, epi, out);
}

// One pair's online-softmax fold and P·V (§3), given Sj (scaled, masked, fp32):
//   m2 = maximum(m, max(Sj)); P = exp(Sj - m2); corr = exp(m - m2)
//   l = l*corr + sum(P);  O = O*corr + composite(P, V);  m = m2
Task<void> Fold(Tl& tl, const PrefillShape& s, State& st, uint64_t rows, Tensor sj, Tensor vj) {
  const uint64_t len = sj.dim(1);
  Tensor m = st.m[st.cur].Rows(0, rows);
  Tensor m2 = st.m[1 - st.cur].Rows(0, rows);
  Tensor l = st.l.Rows(0, rows);
  Tensor o = st.o.Rows(0, rows);
  Tensor mj = co_await tl.Max(sj);
  co_await tl.Maximum(m, mj, m2);
  Tensor centred = co_await tl.Sub(sj, m2);
  const Shape pshape = {rows, len};
  Tensor pj = tl.Alloc(pshape, pb::BF16);  // P rounded to bf16 before P·V
  co_await tl.Exp(centred, pj);
  Tensor dm = co_await tl.Sub(m, m2);
  Tensor corr = co_await tl.Exp(dm);
  co_await tl.Mul(l, corr, l);
  Tensor lj = co_await tl.Sum(pj);
  co_await tl.Add(l, lj, l);
  co_await tl.Mul(o, corr, o);
  Tensor pv;
  if (s.blocking_dot) {
    pv = co_await tl.Dot(pj, vj);
  } else {
    pv = co_await tl.Composite(pj, vj);
  }
  co_await tl.Add(o, pv, o);  // auto-waits on P·V
  st.cur = 1 - st.cur;
}

// O / l, stored once the tile has seen every key.
Task<void> Finalize(Tl& tl, const PrefillShape& s, const QueryTile& qt, State& st) {
  const uint64_t rows = uint64_t{qt.tokens} * s.g;
  const Shape full = {rows, s.d};
  ScratchScope scope(&tl);
  Tensor out = tl.Alloc(full, pb::BF16);
  co_await tl.Div(st.o.Rows(0, rows), st.l.Rows(0, rows), out);
  co_await tl.Store(tl.Ref(qt.o_addr, full), out);
}

// The pairs of one step over query tiles [first, first + count), software-pipelined: pair
// k + lookahead's Q·Kᵀ is issued before pair k's softmax.
// one_pass: each tile's state is set up at its first pair and stored after its last (two
// states alternate); otherwise the chunk's states persist across steps.
Task<void> Sweep(Tl& tl, Pipeline& pl, uint32_t step, uint32_t first, uint32_t count,
                 bool one_pass) {
  const PrefillShape& s = pl.s;
  const std::vector<KvSpan>& spans = pl.plan.steps[step];
  const std::vector<PrefillPair> pairs = VisiblePairs(s, pl.plan, step, first, count);
  if (pairs.empty()) co_return;
  uint32_t seen = 0;  // one_pass: tiles started so far
  std::deque<Tensor> issued;  // Sj of pairs k .. k + lookahead − 1, oldest first
  for (uint64_t k = 0; k < std::min<uint64_t>(s.lookahead, pairs.size()); ++k) {
    issued.push_back(co_await IssueQk(tl, pl, spans, pairs[k], k));
  }
  for (uint64_t k = 0; k < pairs.size(); ++k) {
    const PrefillPair& pair = pairs[k];
    const uint64_t ahead = k + s.lookahead;
    if (ahead < pairs.size()) issued.push_back(co_await IssueQk(tl, pl, spans, pairs[ahead], ahead));
    const Tensor sj = issued.front();
    issued.pop_front();
    const QueryTile& qt = pl.plan.tiles[pair.q];
    const uint64_t rows = uint64_t{qt.tokens} * s.g;
    const bool starts = k == 0 || pairs[k - 1].q != pair.q;
    const bool ends = k + 1 == pairs.size() || pairs[k + 1].q != pair.q;
    State& st = pl.states[one_pass ? (starts ? seen++ : seen - 1) % 2 : pair.q - first];
    if (one_pass && starts) co_await InitState(tl, st, rows);
    {
      std::optional<ScratchScope> scope;
      if (s.scratch_scope) scope.emplace(&tl);
      co_await Fold(tl, s, st, rows, sj, VTile(tl, s, spans[pair.span], pair.tile));
    }
    if (one_pass && ends) co_await Finalize(tl, s, qt, st);
  }
}

// ---- the ring (§5.5, DESIGN §4b) ----

struct RingBuffers {
  std::vector<Tensor> k;  // [depth]: KBlockShape(B) bf16, the sub-block of step t in t % depth
  std::vector<Tensor> v;  // [depth]: [B, d] bf16
  Tensor bounce;          // depth 1: [message elements, 1] bf16, a message on its way out
  Tensor token, token_in;  // the barrier's messages
  std::map<uint32_t, std::vector<Tensor>> receiving;  // posted chunks, by step
  uint32_t posted = 0;  // the last step whose receives are posted (this pass)
};

uint64_t KRows(const PrefillShape& s, uint64_t len) { return TilesOf(s, len) * s.d; }

// A K block of `block` keys' capacity as one 2-D tensor: tile-major [ceil(block / tile)·d,
// tile], transposed [d, block], row-major [block, d].
Shape KBlockShape(const PrefillShape& s, uint64_t block) {
  switch (s.k_layout) {
    case KLayout::kTileMajor:
      return {KRows(s, block), s.tile};
    case KLayout::kTransposed:
      return {s.d, block};
    case KLayout::kRowMajor:
      break;
  }
  return {block, s.d};
}

// The valid part of a K sub-block of `len` keys, as views of `k` (KBlockShape, a TCM buffer
// or an HBM slot) — so messages, loads and stores move the keys, not the padding. Tile-major:
// the whole tiles as one dense [full·d, tile], and a ragged last tile as a strided
// [d, len mod tile]; transposed: the strided [d, len]; row-major: the dense [len, d].
std::vector<Tensor> KParts(const PrefillShape& s, const Tensor& k, uint64_t len) {
  if (s.k_layout == KLayout::kTransposed) return {k.Cols(0, len)};
  if (s.k_layout == KLayout::kRowMajor) return {k.Rows(0, len)};
  std::vector<Tensor> parts;
  const uint64_t full = len / s.tile, rest = len % s.tile;
  if (full > 0) parts.push_back(k.Rows(0, full * s.d));
  if (rest > 0) parts.push_back(k.Rows(full * s.d, s.d).Cols(0, rest));
  return parts;
}

Tensor HbmK(Tl& tl, const PrefillShape& s, uint64_t addr, uint64_t block) {
  return tl.Ref(addr, KBlockShape(s, block));
}

Tensor HbmV(Tl& tl, const PrefillShape& s, uint64_t addr, uint64_t len) {
  const Shape shape = {len, s.d};
  return tl.Ref(addr, shape);
}

// The sub-block of step t (held_len[t] keys) as the K parts and V of TCM slot t % depth.
std::vector<Tensor> SlotParts(const PrefillShape& s, const RingPlan& ring, RingBuffers& rb,
                              uint32_t t) {
  const uint64_t len = ring.held_len[t];
  std::vector<Tensor> parts = KParts(s, rb.k[t % ring.depth], len);
  parts.push_back(rb.v[t % ring.depth].Rows(0, len));
  return parts;
}

// The same sub-block in HBM: the KV cache at step 0, else the HBM slot it was stored to.
std::vector<Tensor> HbmParts(Tl& tl, const PrefillShape& s, const RingPlan& ring, uint32_t t) {
  const uint64_t len = ring.held_len[t];
  const uint64_t k = t == 0 ? ring.own_k_addr : ring.slot_k[t % 2];
  const uint64_t v = t == 0 ? ring.own_v_addr : ring.slot_v[t % 2];
  std::vector<Tensor> parts = KParts(s, HbmK(tl, s, k, ring.block), len);
  parts.push_back(HbmV(tl, s, v, len));
  return parts;
}

// Posts the receives of steps posted + 1 .. through (their slots are free: slot t % depth last
// held step t − depth, sent at that step and stored at the one before).
Task<void> PostReceives(Tl& tl, const PrefillShape& s, const RingPlan& ring, RingBuffers& rb,
                        uint32_t through) {
  for (uint32_t t = rb.posted + 1; t <= through; ++t) {
    std::vector<Tensor>& receiving = rb.receiving[t];
    receiving.clear();
    if (ring.held_len[t] == 0) continue;
    for (const Tensor& part : SlotParts(s, ring, rb, t)) {
      for (const Tensor& c : MessageChunks(part, part.dim(0), ring.message_bytes)) {
        receiving.push_back(co_await tl.RecvAsyncInto(ring.prev, c));
      }
    }
  }
  rb.posted = std::max(rb.posted, through);
}

Task<void> SendHeld(Tl& tl, const PrefillShape& s, const RingPlan& ring, RingBuffers& rb,
                    uint32_t step) {
  if (ring.held_len[step] == 0) co_return;
  if (ring.depth == 1) {  // the one slot is receiving: each message through the bounce buffer
    for (const Tensor& part : HbmParts(tl, s, ring, step)) {
      for (const Tensor& c : MessageChunks(part, part.dim(0), ring.message_bytes)) {
        const Shape shape = {c.dim(0), c.dim(1)};
        Tensor out = co_await tl.LoadInto(c, rb.bounce.Rows(0, c.dim(0) * c.dim(1)).View(shape));
        co_await tl.Send(ring.next, out);
      }
    }
    co_return;
  }
  std::vector<Tensor> parts = SlotParts(s, ring, rb, step);
  if (step == 0) {  // its own sub-block, from its KV cache
    const std::vector<Tensor> from = HbmParts(tl, s, ring, step);
    for (size_t i = 0; i < parts.size(); ++i) parts[i] = co_await tl.LoadInto(from[i], parts[i]);
  }
  for (const Tensor& part : parts) {
    for (const Tensor& c : MessageChunks(part, part.dim(0), ring.message_bytes)) {
      co_await tl.Send(ring.next, c);
    }
  }
}

// The received sub-block, once whole, to this PE's HBM slot for the next step.
Task<void> StoreReceived(Tl& tl, const PrefillShape& s, const RingPlan& ring, RingBuffers& rb,
                         uint32_t step) {
  for (const Tensor& c : rb.receiving[step + 1]) co_await tl.Wait(c);
  rb.receiving.erase(step + 1);
  if (ring.held_len[step + 1] == 0) co_return;
  const std::vector<Tensor> parts = SlotParts(s, ring, rb, step + 1);
  const std::vector<Tensor> to = HbmParts(tl, s, ring, step + 1);
  for (size_t i = 0; i < parts.size(); ++i) co_await tl.Store(to[i], parts[i]);
}

// Every PE of the CUBE has stored its part (and finished reading the previous block): a token
// up the IPCQ tree to the root, and back down.
Task<void> Barrier(Tl& tl, const RingPlan& ring, RingBuffers& rb) {
  for (const Peer& child : ring.barrier_children) co_await tl.RecvInto(child, rb.token_in);
  if (ring.barrier_parent) {
    co_await tl.Send(*ring.barrier_parent, rb.token);
    co_await tl.RecvInto(*ring.barrier_parent, rb.token_in);
  }
  for (const Peer& child : ring.barrier_children) co_await tl.Send(child, rb.token);
}

}  // namespace

const MaskSlot& FindMask(const Tl& tl, const std::vector<MaskSlot>& masks, int64_t offset,
                         uint32_t tokens, uint32_t len) {
  const auto key = std::tuple(offset, tokens, len);
  const auto it = std::lower_bound(masks.begin(), masks.end(), key,
                                   [](const MaskSlot& m, const auto& k) { return m.Key() < k; });
  if (it == masks.end() || it->Key() != key) {
    throw KernelError(absl::StrCat("pe ", tl.pe(), ": no causal mask placed for keys at offset ",
                                   offset, " of a ", tokens, "-token query tile, ", len, " keys"));
  }
  return *it;
}

uint64_t RingBounceElements(const PrefillShape& s, uint64_t block, uint64_t message_bytes) {
  const uint64_t row = s.k_layout == KLayout::kTransposed ? block : 0;
  return std::max<uint64_t>({message_bytes / 2, s.tile, s.d, row});
}

std::vector<Tensor> MessageChunks(const Tensor& buf, uint64_t rows, uint64_t bytes) {
  const uint64_t row_bytes = buf.dim(1) * 2;
  const uint64_t per = std::max<uint64_t>(1, bytes / row_bytes);
  std::vector<Tensor> out;
  for (uint64_t r = 0; r < rows; r += per) out.push_back(buf.Rows(r, std::min(per, rows - r)));
  return out;
}

std::vector<PrefillPair> VisiblePairs(const PrefillShape& s, const PrefillPlan& plan,
                                      uint32_t step, uint32_t first, uint32_t count) {
  std::vector<PrefillPair> pairs;
  const std::vector<KvSpan>& spans = plan.steps.at(step);
  for (uint32_t q = first; q < first + count; ++q) {
    const QueryTile& qt = plan.tiles[q];
    for (uint32_t i = 0; i < spans.size(); ++i) {
      const KvSpan& sp = spans[i];
      for (uint64_t j = 0; j < TilesOf(s, sp.len); ++j) {
        const CausalPair c = ClassifyPair(qt.pos, qt.tokens, sp.pos + j * s.tile, TileLen(s, sp, j));
        if (c != CausalPair::kSkip) pairs.push_back({q, i, j, c == CausalPair::kMasked});
      }
    }
  }
  return pairs;
}

// §5.4 / §5.5: chunks of query tiles; per chunk, every step's KV (the ring rotating it).
Task<void> PrefillRank(Tl& tl, PrefillShape shape, PrefillPlan plan) {
  const PrefillShape& s = shape;
  const uint64_t max_rows = uint64_t{s.max_tokens} * s.g;
  const uint32_t steps = static_cast<uint32_t>(plan.steps.size());
  const bool one_pass = steps == 1;
  Pipeline pl{s, plan, {}, {}};
  const Shape qshape = {max_rows, s.d}, sshape = {max_rows, s.tile}, mshape = {max_rows * s.tile, 1};
  const Shape col = {max_rows, 1}, full = {max_rows, s.d};
  for (uint32_t i = 0; i <= s.lookahead; ++i) {
    pl.b.q.push_back(tl.Alloc(qshape, pb::BF16, Arena::kPersistent));
    pl.b.s.push_back(tl.Alloc(sshape, pb::FP32, Arena::kPersistent));
    pl.b.mask.push_back(tl.Alloc(mshape, pb::BF16, Arena::kPersistent));
    if (s.k_layout == KLayout::kRowMajor) {
      const Shape ktshape = {uint64_t{s.d} * s.tile, 1};
      pl.b.kt.push_back(tl.Alloc(ktshape, pb::BF16, Arena::kPersistent));
    }
  }
  pl.b.q_slot = s.lookahead;  // the first tile takes buffer 0
  pl.states.resize(one_pass ? 2 : plan.tiles_per_chunk);
  for (State& st : pl.states) {
    st.m[0] = tl.Alloc(col, pb::FP32, Arena::kPersistent);
    st.m[1] = tl.Alloc(col, pb::FP32, Arena::kPersistent);
    st.l = tl.Alloc(col, pb::FP32, Arena::kPersistent);
    st.o = tl.Alloc(full, pb::FP32, Arena::kPersistent);
  }
  if (one_pass) {
    co_await Sweep(tl, pl, 0, 0, static_cast<uint32_t>(plan.tiles.size()), true);
    co_return;
  }
  if (!plan.ring) throw KernelError(absl::StrCat("pe ", tl.pe(), ": several KV steps need a ring"));
  const RingPlan& ring = *plan.ring;
  RingBuffers rb;
  const Shape kbuf = KBlockShape(s, ring.block), vbuf = {ring.block, s.d}, tok = {1, 16};
  for (uint32_t i = 0; i < ring.depth; ++i) {
    rb.k.push_back(tl.Alloc(kbuf, pb::BF16, Arena::kPersistent));
    rb.v.push_back(tl.Alloc(vbuf, pb::BF16, Arena::kPersistent));
  }
  if (ring.depth == 1) {
    const Shape bshape = {RingBounceElements(s, ring.block, ring.message_bytes), 1};
    rb.bounce = tl.Alloc(bshape, pb::BF16, Arena::kPersistent);
  }
  rb.token = tl.Alloc(tok, pb::FP32, Arena::kPersistent);
  rb.token_in = tl.Alloc(tok, pb::FP32, Arena::kPersistent);
  co_await tl.FillInto(rb.token, 0.0f);
  const uint32_t n = static_cast<uint32_t>(plan.tiles.size());
  const uint32_t per = std::max<uint32_t>(1, plan.tiles_per_chunk);
  const uint32_t chunks = std::max<uint32_t>(1, plan.chunks);
  for (uint32_t c = 0; c < chunks; ++c) {
    const uint32_t first = std::min(n, c * per), count = std::min(n, first + per) - first;
    for (uint32_t q = 0; q < count; ++q) {
      co_await InitState(tl, pl.states[q], uint64_t{plan.tiles[first + q].tokens} * s.g);
    }
    rb.posted = 0;
    for (uint32_t step = 0; step < steps; ++step) {
      const bool forward = step + 1 < steps;
      const uint32_t through = std::min(step + std::max(1u, ring.depth - 1), steps - 1);
      if (forward && !ring.send_first) co_await PostReceives(tl, s, ring, rb, through);
      if (forward) co_await SendHeld(tl, s, ring, rb, step);
      if (forward && ring.send_first) co_await PostReceives(tl, s, ring, rb, through);
      co_await Sweep(tl, pl, step, first, count, false);
      if (forward) co_await StoreReceived(tl, s, ring, rb, step);
      if (forward || c + 1 < chunks) {  // the next step (or chunk) overwrites a slot
        // Every command of this step is complete here (each Fold waited on its Sj and P·V,
        // the stores block); what may still be outstanding is the receives of later steps
        // (depth > 2), which the predecessor sends only at those steps — waiting for them
        // would close a cycle around the ring.
        if (rb.posted <= step + 1) co_await tl.WaitAll();
        co_await Barrier(tl, ring, rb);
      }
    }
    for (uint32_t q = 0; q < count; ++q) co_await Finalize(tl, s, plan.tiles[first + q], pl.states[q]);
  }
}

}  // namespace ahbm::kernels
