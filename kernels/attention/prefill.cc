#include "kernels/attention/prefill.h"

#include <algorithm>
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
// row-major K's transposed tile, each double-buffered for the software pipeline (the pair two
// back has finished: its softmax waited on its Sj, i.e. on its Q·Kᵀ, the last reader of its Q,
// mask and K tile buffers).
struct Buffers {
  Tensor q[2];     // [max_rows, d] bf16
  Tensor s[2];     // [max_rows, tile] fp32
  Tensor mask[2];  // [max_rows · tile, 1] bf16 (a dense [rows, len] prefix)
  Tensor kt[2];    // row-major K: [d · tile, 1] bf16, a transposed tile (a dense [d, len] prefix)
  Tensor q_now;    // the loaded Q of the last issued pair (pending while it loads)
  int q_slot = 1;
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
Task<Tensor> IssueQk(Tl& tl, Pipeline& pl, const std::vector<KvSpan>& spans,
                     const PrefillPair& pair, uint64_t k) {
  const PrefillShape& s = pl.s;
  const QueryTile& qt = pl.plan.tiles[pair.q];
  const uint64_t rows = uint64_t{qt.tokens} * s.g;
  if (pl.b.q_tile != pair.q) {
    pl.b.q_slot ^= 1;
    pl.b.q_tile = pair.q;
    const Shape qshape = {rows, s.d};
    pl.b.q_now = co_await tl.LoadInto(tl.Ref(qt.q_addr, qshape), pl.b.q[pl.b.q_slot].Rows(0, rows));
  }
  const KvSpan& sp = spans[pair.span];
  const uint64_t len = TileLen(s, sp, pair.tile);
  std::vector<Epilogue> epi = {Epilogue::Scale(s.scale)};
  if (pair.masked) {
    const int64_t offset = static_cast<int64_t>(sp.pos + pair.tile * s.tile) -
                           static_cast<int64_t>(qt.pos);
    const MaskSlot& slot = FindMask(tl, pl.plan.masks, offset, qt.tokens, static_cast<uint32_t>(len));
    const Shape mshape = {rows, len};
    Tensor mask = co_await tl.LoadInto(tl.Ref(slot.addr, mshape),
                                       pl.b.mask[k % 2].Rows(0, rows * len).View(mshape));
    epi.push_back(Epilogue::With(pb::ADD, mask));
  }
  Tensor out = pl.b.s[k % 2].Rows(0, rows).Cols(0, len);
  Tensor kj = co_await KTile(tl, s, sp, pair.tile, pl.b.kt[k % 2]);
  co_return co_await tl.Composite(pl.b.q_now, kj, epi, out);
}

// One pair's online-softmax fold and P·V (§3), given Sj (scaled, masked, fp32):
//   m2 = maximum(m, max(Sj)); P = exp(Sj - m2); corr = exp(m - m2)
//   l = l*corr + sum(P);  O = O*corr + composite(P, V);  m = m2
Task<void> Fold(Tl& tl, State& st, uint64_t rows, Tensor sj, Tensor vj) {
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
  Tensor pv = co_await tl.Composite(pj, vj);
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

// The pairs of one step over query tiles [first, first + count), software-pipelined.
// one_pass: each tile's state is set up at its first pair and stored after its last (two
// states alternate); otherwise the chunk's states persist across steps.
Task<void> Sweep(Tl& tl, Pipeline& pl, uint32_t step, uint32_t first, uint32_t count,
                 bool one_pass) {
  const PrefillShape& s = pl.s;
  const std::vector<KvSpan>& spans = pl.plan.steps[step];
  const std::vector<PrefillPair> pairs = VisiblePairs(s, pl.plan, step, first, count);
  if (pairs.empty()) co_return;
  uint32_t seen = 0;  // one_pass: tiles started so far
  Tensor next = co_await IssueQk(tl, pl, spans, pairs[0], 0);
  for (uint64_t k = 0; k < pairs.size(); ++k) {
    const PrefillPair& pair = pairs[k];
    Tensor sj = next;
    if (k + 1 < pairs.size()) next = co_await IssueQk(tl, pl, spans, pairs[k + 1], k + 1);
    const QueryTile& qt = pl.plan.tiles[pair.q];
    const uint64_t rows = uint64_t{qt.tokens} * s.g;
    const bool starts = k == 0 || pairs[k - 1].q != pair.q;
    const bool ends = k + 1 == pairs.size() || pairs[k + 1].q != pair.q;
    State& st = pl.states[one_pass ? (starts ? seen++ : seen - 1) % 2 : pair.q - first];
    if (one_pass && starts) co_await InitState(tl, st, rows);
    {
      std::optional<ScratchScope> scope;
      if (s.scratch_scope) scope.emplace(&tl);
      co_await Fold(tl, st, rows, sj, VTile(tl, s, spans[pair.span], pair.tile));
    }
    if (one_pass && ends) co_await Finalize(tl, s, qt, st);
  }
}

// ---- the ring (§5.5, DESIGN §4b) ----

struct RingBuffers {
  Tensor k[2];  // KBlockShape(B) bf16: the sub-block held / being received
  Tensor v[2];  // [B, d] bf16
  Tensor token, token_in;  // the barrier's messages
  std::vector<Tensor> receiving;  // this step's posted chunks
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

Task<void> PostReceives(Tl& tl, const PrefillShape& s, const RingPlan& ring, RingBuffers& rb,
                        uint32_t step) {
  const uint64_t len = ring.held_len[step + 1];
  const int slot = (step + 1) % 2;
  rb.receiving.clear();
  if (len == 0) co_return;
  std::vector<Tensor> parts = KParts(s, rb.k[slot], len);
  parts.push_back(rb.v[slot].Rows(0, len));
  for (const Tensor& part : parts) {
    for (const Tensor& c : MessageChunks(part, part.dim(0), ring.message_bytes)) {
      rb.receiving.push_back(co_await tl.RecvAsyncInto(ring.prev, c));
    }
  }
}

Task<void> SendHeld(Tl& tl, const PrefillShape& s, const RingPlan& ring, RingBuffers& rb,
                    uint32_t step) {
  const uint64_t len = ring.held_len[step];
  if (len == 0) co_return;
  std::vector<Tensor> parts = KParts(s, rb.k[step % 2], len);
  parts.push_back(rb.v[step % 2].Rows(0, len));
  if (step == 0) {  // its own sub-block, from its KV cache
    std::vector<Tensor> from = KParts(s, HbmK(tl, s, ring.own_k_addr, ring.block), len);
    from.push_back(HbmV(tl, s, ring.own_v_addr, len));
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
  for (const Tensor& c : rb.receiving) co_await tl.Wait(c);
  const uint64_t len = ring.held_len[step + 1];
  if (len == 0) co_return;
  const int slot = (step + 1) % 2;
  std::vector<Tensor> parts = KParts(s, rb.k[slot], len);
  parts.push_back(rb.v[slot].Rows(0, len));
  std::vector<Tensor> to = KParts(s, HbmK(tl, s, ring.slot_k[slot], ring.block), len);
  to.push_back(HbmV(tl, s, ring.slot_v[slot], len));
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
  for (int i = 0; i < 2; ++i) {
    pl.b.q[i] = tl.Alloc(qshape, pb::BF16, Arena::kPersistent);
    pl.b.s[i] = tl.Alloc(sshape, pb::FP32, Arena::kPersistent);
    pl.b.mask[i] = tl.Alloc(mshape, pb::BF16, Arena::kPersistent);
    if (s.k_layout == KLayout::kRowMajor) {
      const Shape ktshape = {uint64_t{s.d} * s.tile, 1};
      pl.b.kt[i] = tl.Alloc(ktshape, pb::BF16, Arena::kPersistent);
    }
  }
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
  for (int i = 0; i < 2; ++i) {
    rb.k[i] = tl.Alloc(kbuf, pb::BF16, Arena::kPersistent);
    rb.v[i] = tl.Alloc(vbuf, pb::BF16, Arena::kPersistent);
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
    for (uint32_t step = 0; step < steps; ++step) {
      const bool forward = step + 1 < steps;
      if (forward && !ring.send_first) co_await PostReceives(tl, s, ring, rb, step);
      if (forward) co_await SendHeld(tl, s, ring, rb, step);
      if (forward && ring.send_first) co_await PostReceives(tl, s, ring, rb, step);
      co_await Sweep(tl, pl, step, first, count, false);
      if (forward) co_await StoreReceived(tl, s, ring, rb, step);
      if (forward || c + 1 < chunks) {  // the next step (or chunk) overwrites a slot
        co_await tl.WaitAll();
        co_await Barrier(tl, ring, rb);
      }
    }
    for (uint32_t q = 0; q < count; ++q) co_await Finalize(tl, s, plan.tiles[first + q], pl.states[q]);
  }
}

}  // namespace ahbm::kernels
