#include "kernels/attention/decode.h"

#include "kernels/attention/lse_merge.h"
#include "kernels/attention/reduce_tree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

namespace ahbm::kernels {
namespace {


// The running state (§3): m double-buffered so m2 never needs a copy. Packed
// (DecodeShape::packed_payload): l, O and the sweep's final m are views of `pack`.
struct Running {
  Tensor m[2];
  int cur = 0;
  Tensor l;
  Tensor o;
  Tensor pack;
};

// A packed (m, l, O): one fp32 buffer [rows·(d + 2), 1] = [m | l | O], its parts dense views.
struct Packed {
  Tensor all, m, l, o;
};

Packed PackedViews(const DecodeShape& s, const Tensor& buf) {
  Packed p;
  p.all = buf;
  p.m = buf.Rows(0, s.rows);
  p.l = buf.Rows(s.rows, s.rows);
  const std::vector<uint64_t> full = {s.rows, s.d};
  p.o = buf.Rows(2 * uint64_t{s.rows}, uint64_t{s.rows} * s.d).View(full);
  return p;
}

std::vector<uint64_t> PackedShape(const DecodeShape& s) {
  return {uint64_t{s.rows} * (s.d + 2), 1};
}

// opt2 and opt2_lookahead: the sweep's (m, l, O) is one ex_composite accumulator (m[0]).
bool Chained(const DecodeShape& s) {
  return s.variant == DecodeVariant::kOpt2 || s.variant == DecodeVariant::kOpt2Lookahead;
}

uint64_t TileLen(const RankPlan& p, const DecodeShape& s, uint64_t j) {
  return std::min<uint64_t>(s.tile, p.my_len - j * s.tile);
}

// Row-major K (k_layout.h): a TCM buffer for one transposed tile, [d·TILE, 1] bf16; none for
// the other layouts.
Tensor KtBuffer(Tl& tl, const DecodeShape& s, Arena arena) {
  if (s.k_layout != KLayout::kRowMajor) return Tensor();
  const std::vector<uint64_t> shape = {uint64_t{s.d} * s.tile, 1};
  return tl.Alloc(shape, pb::BF16, arena);
}

// K tile j's (d, len) operand (k_layout.h; row-major: loaded and transposed into `kt`).
Task<Tensor> KTile(Tl& tl, const DecodeShape& s, const RankPlan& p, uint64_t j,
                   const Tensor& kt) {
  const KBlock k{s.k_layout, p.k_addr, std::nullopt, s.d, s.tile, p.block};
  return KOperand(tl, k, j, TileLen(p, s, j), kt, s.scratch_scope);
}

// V tile j: rows [j·TILE, j·TILE + len) of the row-major block.
Tensor VTile(Tl& tl, const DecodeShape& s, const RankPlan& p, uint64_t j) {
  const std::vector<uint64_t> shape = {TileLen(p, s, j), s.d};
  return tl.Ref(p.v_addr + j * s.tile * s.d * 2, shape);
}

// Tile j's Q·Kᵀ epilogue: `scale` (opt1/opt3; opt2 scales inside softmax_pv) and, on a
// masked tile, the causal mask loaded from HBM (persistent: a masked tile's Sj outlives opt3's
// scratch scope; at most ceil((T_q - 1) / TILE) + 1 tiles per rank are masked).
Task<std::vector<Epilogue>> QkEpilogue(Tl& tl, const DecodeShape& s, const RankPlan& p,
                                       uint64_t j, bool scale) {
  std::vector<Epilogue> epi;
  if (scale) epi.push_back(Epilogue::Scale(s.scale));
  if (j >= p.first_masked_tile) {
    const std::vector<uint64_t> shape = {s.rows, TileLen(p, s, j)};
    const uint64_t offset = (j - p.first_masked_tile) * s.rows * s.tile * 2;
    Tensor mask = co_await tl.Load(tl.Ref(p.mask_addr + offset, shape), Arena::kPersistent);
    epi.push_back(Epilogue::With(pb::ADD, mask));
  }
  co_return epi;
}

// init_running (§3): m = kEmptyRowMax (the ADR's -inf, kept finite: lse_merge.h), l = 0,
// O = 0 in the persistent arena. Packed: the same three fills into views of one buffer; the
// m buffer the sweep ends on (opt2: m[0]; opt1/opt3 flip per tile: m[n_tiles % 2]) is the
// buffer's m, so the state is ready to send with no copy.
Task<Running> InitRunning(Tl& tl, const DecodeShape& s, const RankPlan& p) {
  const std::vector<uint64_t> col = {s.rows, 1};
  Running r;
  if (!s.packed_payload) {
    co_await FillEmptyRunning(tl, s.rows, s.d, r.m, r.l, r.o);
    co_return r;
  }
  r.pack = tl.Alloc(PackedShape(s), pb::FP32, Arena::kPersistent);
  const Packed v = PackedViews(s, r.pack);
  const uint64_t n = (p.my_len + s.tile - 1) / s.tile;
  const int last = Chained(s) ? 0 : static_cast<int>(n % 2);
  r.m[last] = v.m;
  r.m[1 - last] = tl.Alloc(col, pb::FP32, Arena::kPersistent);
  r.l = v.l;
  r.o = v.o;
  co_await tl.FillInto(r.m[0], kEmptyRowMax);
  co_await tl.FillInto(r.l, 0.0f);
  co_await tl.FillInto(r.o, 0.0f);
  co_return r;
}

// One tile's softmax merge and P·V (§3), given Sj (scaled, fp32):
//   m2 = maximum(m, max(Sj)); P = exp(Sj - m2); corr = exp(m - m2)
//   l = l*corr + sum(P);  O = O*corr + composite(P, V(j));  m = m2
// baseline_dot: V(j) loaded, then a blocking dot(P, V(j)) instead of the composite.
Task<void> SoftmaxAndPv(Tl& tl, const DecodeShape& s, const RankPlan& p, Running& r, Tensor sj,
                        uint64_t j) {
  const uint64_t len = TileLen(p, s, j);
  Tensor& m = r.m[r.cur];
  Tensor& m2 = r.m[1 - r.cur];
  Tensor mj = co_await tl.Max(sj);
  co_await tl.Maximum(m, mj, m2);
  Tensor centred = co_await tl.Sub(sj, m2);
  const std::vector<uint64_t> pshape = {s.rows, len};
  Tensor pj = tl.Alloc(pshape, pb::BF16);  // P rounded to bf16 before P·V
  co_await tl.Exp(centred, pj);
  Tensor dm = co_await tl.Sub(m, m2);
  Tensor corr = co_await tl.Exp(dm);
  co_await tl.Mul(r.l, corr, r.l);
  Tensor lj = co_await tl.Sum(pj);
  co_await tl.Add(r.l, lj, r.l);
  co_await tl.Mul(r.o, corr, r.o);
  Tensor pv;
  if (s.variant == DecodeVariant::kBaselineDot) {
    Tensor vj = co_await tl.Load(VTile(tl, s, p, j));
    pv = co_await tl.Dot(pj, vj);  // blocking (auto-waits on the load)
  } else {
    pv = co_await tl.Composite(pj, VTile(tl, s, p, j));
  }
  co_await tl.Add(r.o, pv, r.o);  // auto-waits on P·V(j)
  r.cur = 1 - r.cur;
}

// Option 1 (§5.6, TL;DR): Sj's composite, then the CPU auto-waits on it (the bubble).
Task<void> SweepOpt1(Tl& tl, const DecodeShape& s, const RankPlan& p, const Tensor& q,
                     Running& r) {
  const uint64_t n = (p.my_len + s.tile - 1) / s.tile;
  for (uint64_t j = 0; j < n; ++j) {
    std::optional<ScratchScope> scope;
    if (s.scratch_scope) scope.emplace(&tl);
    Tensor kj = co_await KTile(tl, s, p, j, KtBuffer(tl, s, Arena::kScratch));
    const std::vector<Epilogue> epi = co_await QkEpilogue(tl, s, p, j, /*scale=*/true);
    Tensor sj = co_await tl.Composite(q, kj, epi);
    co_await SoftmaxAndPv(tl, s, p, r, sj, j);
  }
}

// Option 3 (§5.6, TL;DR, the ship choice): Q·Kᵀ(j+L) issued before softmax(j), L =
// `lookahead` (the ADR's form: 1; 0: opt1's order), into L + 1 persistent Sj buffers outside
// the scratch scope (tile j's buffer is j mod (L + 1): the one softmax(j - 1) read, done; a
// row-major K's transposed tiles likewise).
Task<void> SweepOpt3(Tl& tl, const DecodeShape& s, const RankPlan& p, const Tensor& q,
                     Running& r) {
  const uint64_t n = (p.my_len + s.tile - 1) / s.tile;
  const std::vector<uint64_t> sshape = {s.rows, s.tile};
  std::vector<Tensor> sb, kb;
  for (uint32_t b = 0; b <= s.lookahead; ++b) sb.push_back(tl.Alloc(sshape, pb::FP32, Arena::kPersistent));
  for (uint32_t b = 0; b <= s.lookahead; ++b) kb.push_back(KtBuffer(tl, s, Arena::kPersistent));
  std::vector<Tensor> sj(n);
  const auto issue = [&](uint64_t i) -> Task<void> {
    Tensor ki = co_await KTile(tl, s, p, i, kb[i % kb.size()]);
    const std::vector<Epilogue> epi = co_await QkEpilogue(tl, s, p, i, /*scale=*/true);
    sj[i] = co_await tl.Composite(q, ki, epi, sb[i % sb.size()].Cols(0, TileLen(p, s, i)));
  };
  for (uint64_t i = 0; i < s.lookahead && i < n; ++i) co_await issue(i);  // prime
  for (uint64_t j = 0; j < n; ++j) {
    if (j + s.lookahead < n) co_await issue(j + s.lookahead);  // fills the GEMM under softmax(j)
    std::optional<ScratchScope> scope;
    if (s.scratch_scope) scope.emplace(&tl);
    co_await SoftmaxAndPv(tl, s, p, r, sj[j], j);
  }
}

// Option 2 (§5.6): composite Q·Kᵀ and ex_composite softmax_pv per tile, never waiting; an Sj
// buffer (and a row-major K's transposed tile beside it) is reused once the softmax_pv that
// read it has completed. `ahead` = 0 is the ADR's order (Q·Kᵀ(j), softmax_pv(j));
// opt2_lookahead issues Q·Kᵀ(j + ahead) before softmax_pv(j), so K(j + 1)'s DMA precedes V(j)'s
// and Q·Kᵀ(j + 1) is ready when the chain's merge(j) frees the GEMM engine. The buffers (at
// least ahead + 1) are each reused only after the softmax_pv issued `buffers` tiles earlier,
// which the CPU has issued by then.
struct Opt2Sweep {
  uint64_t n = 0;
  uint32_t ahead = 0;
  std::vector<Tensor> sbuf, kbuf;
  std::vector<Tensor> reader;  // the softmax_pv reading each buffer
  std::vector<Tensor> sj;      // tile j's Q·Kᵀ
  uint64_t issued = 0;         // Q·Kᵀ issued so far
};

Opt2Sweep MakeOpt2Sweep(Tl& tl, const DecodeShape& s, const RankPlan& p, uint32_t ahead) {
  Opt2Sweep w;
  w.n = (p.my_len + s.tile - 1) / s.tile;
  w.ahead = ahead;
  const std::vector<uint64_t> sshape = {s.rows, s.tile};
  const uint32_t buffers = std::max(s.opt2_s_buffers, ahead + 1);
  for (uint32_t b = 0; b < buffers && b < w.n; ++b) {
    w.sbuf.push_back(tl.Alloc(sshape, pb::FP32, Arena::kPersistent));
    w.kbuf.push_back(KtBuffer(tl, s, Arena::kPersistent));
  }
  w.reader.resize(w.sbuf.size());
  w.sj.resize(w.n);
  return w;
}

// #1: Q·Kᵀ of the next tile (reads K), into its buffer once that buffer's reader is done.
Task<void> IssueOpt2Qk(Tl& tl, const DecodeShape& s, const RankPlan& p, const Tensor& q,
                       Opt2Sweep& w) {
  const uint64_t i = w.issued++;
  const size_t slot = i % w.sbuf.size();
  if (i >= w.sbuf.size()) co_await tl.Wait(w.reader[slot]);
  Tensor out = w.sbuf[slot].Cols(0, TileLen(p, s, i));
  Tensor ki = co_await KTile(tl, s, p, i, w.kbuf[slot]);
  const std::vector<Epilogue> epi = co_await QkEpilogue(tl, s, p, i, /*scale=*/false);
  w.sj[i] = co_await tl.Composite(q, ki, epi, out);
}

// The first `ahead` Q·Kᵀ. opt2_lookahead issues them before init_running's fills (the fills
// feed only the chain), so K(0)'s DMA starts with Q's instead of after them.
Task<void> PrimeOpt2(Tl& tl, const DecodeShape& s, const RankPlan& p, const Tensor& q,
                     Opt2Sweep& w) {
  while (w.issued < w.ahead && w.issued < w.n) co_await IssueOpt2Qk(tl, s, p, q, w);
}

Task<void> SweepOpt2(Tl& tl, const DecodeShape& s, const RankPlan& p, const Tensor& q,
                     Running& r, Opt2Sweep& w) {
  co_await PrimeOpt2(tl, s, p, q, w);
  const Accumulator acc{r.m[0], r.l, r.o};
  for (uint64_t j = 0; j < w.n; ++j) {
    if (j + w.ahead < w.n) co_await IssueOpt2Qk(tl, s, p, q, w);
    w.reader[j % w.sbuf.size()] =
        co_await tl.ExComposite(w.sj[j], VTile(tl, s, p, j), acc, s.scale);  // #2: reads V
  }
  co_await tl.WaitAll();  // acc is updated asynchronously: drain before the reduce
}

// baseline_dot (ADR §1: what composites replace): per tile load K(j), a blocking dot for
// Sj, scale and (masked tiles) the causal mask on MATH, then the softmax and a blocking
// dot(P, V(j)) (SoftmaxAndPv). The CPU waits on every dot; nothing overlaps the next tile.
Task<void> SweepBaselineDot(Tl& tl, const DecodeShape& s, const RankPlan& p, const Tensor& q,
                            Running& r) {
  const uint64_t n = (p.my_len + s.tile - 1) / s.tile;
  for (uint64_t j = 0; j < n; ++j) {
    std::optional<ScratchScope> scope;
    if (s.scratch_scope) scope.emplace(&tl);
    // Row-major K arrives loaded and transposed; the other layouts are read from HBM here
    // (non-blocking; the dot auto-waits).
    Tensor kj = co_await KTile(tl, s, p, j, KtBuffer(tl, s, Arena::kScratch));
    if (s.k_layout != KLayout::kRowMajor) kj = co_await tl.Load(kj);
    Tensor sj = co_await tl.Dot(q, kj);                 // blocking
    co_await tl.Scale(sj, s.scale, sj);
    if (j >= p.first_masked_tile) {
      const std::vector<uint64_t> shape = {s.rows, TileLen(p, s, j)};
      const uint64_t offset = (j - p.first_masked_tile) * s.rows * s.tile * 2;
      Tensor mask = co_await tl.Load(tl.Ref(p.mask_addr + offset, shape));
      co_await tl.Add(sj, mask, sj);
    }
    co_await SoftmaxAndPv(tl, s, p, r, sj, j);
  }
}

// A rank's (m, l, O) during the reduce. Packed: views of `pack`; `spare` is the second buffer
// a primitive merge writes into (the maximum cannot be written over m while m is still read).
struct ReduceState {
  Tensor m, l, o;
  Tensor pack, spare;
};

// A receive: blocking, or posted (recv_async) for a fused merge to read while it is pending.
Call ReceiveFrom(Tl& tl, const Peer& child, ShapeArg shape, bool post) {
  if (post) return tl.RecvAsync(child, shape);
  return tl.Recv(child, shape);
}

// Receives a child's (m, l, O) — three messages in that order, or one packed message — and
// merges it (§4): 11 primitive ops (lse_merge.h) or one lse_merge command (fused). Fused: the
// receives are posted (recv_async) and the merge issued at once; the runtime hands it to the
// scheduler when the message has landed, so its issue cost overlaps the message. The receive
// buffers are scratch allocations outside any scratch scope: they stay allocated until the
// kernel ends, after the merge has read them.
Task<void> MergeFrom(Tl& tl, const DecodeShape& s, const Peer& child, ReduceState& st) {
  const std::vector<uint64_t> col = {s.rows, 1};
  const std::vector<uint64_t> full = {s.rows, s.d};
  const bool post = s.fused_merge;
  Tensor mb, lb, ob;
  if (s.packed_payload) {
    const std::vector<uint64_t> flat = PackedShape(s);
    Call recv = ReceiveFrom(tl, child, flat, post);
    const Tensor buf = co_await recv;
    const Packed in = PackedViews(s, buf);
    mb = in.m;
    lb = in.l;
    ob = in.o;
  } else {
    Call rm = ReceiveFrom(tl, child, col, post);
    mb = co_await rm;
    Call rl = ReceiveFrom(tl, child, col, post);
    lb = co_await rl;
    Call ro = ReceiveFrom(tl, child, full, post);
    ob = co_await ro;
  }
  if (s.fused_merge) {  // in place; non-blocking: the next receive overlaps it
    const Accumulator acc{st.m, st.l, st.o};
    const Accumulator in{mb, lb, ob};
    const Tensor done = co_await tl.LseMerge(acc, in, acc);
    st.m = st.m.WithProducer(done.producer());
    st.l = st.l.WithProducer(done.producer());
    st.o = done;
    if (s.packed_payload) st.pack = st.pack.WithProducer(done.producer());
  } else if (s.packed_payload) {
    if (st.spare.rank() == 0) st.spare = tl.Alloc(PackedShape(s), pb::FP32, Arena::kPersistent);
    const Packed out = PackedViews(s, st.spare);
    co_await LseMergeInto(tl, st.m, st.l, st.o, mb, lb, ob, out.m, out.l, out.o);
    std::swap(st.pack, st.spare);
    st.m = out.m;
    st.l = out.l;
    st.o = out.o;
  } else {
    co_await LseMerge(tl, st.m, st.l, st.o, mb, lb, ob);
  }
}

// send_triplet (§4), or the packed buffer as one message (auto-waits on a pending merge).
Task<void> SendState(Tl& tl, const DecodeShape& s, const Peer& to, const ReduceState& st) {
  if (s.packed_payload) {
    co_await tl.Send(to, st.pack);
    co_return;
  }
  co_await tl.Send(to, st.m);
  co_await tl.Send(to, st.l);
  co_await tl.Send(to, st.o);
}

// ---- The chunked ring (§4.4; the schedule in reduce_tree.h kRing) ----

// One chunk of (m, l, O) on the ring: O's columns of the chunk (RingChunk) with m and l.
// Packed: `pack` is the chunk's one message [m | l | O_c] ([rows·(2 + w), 1]; m, l, o are
// dense views of it); triplet: m, l, o travel as three messages (o may be a strided column
// view of the rank's O: a send reads a strided view as it is, so no copy).
struct RingChunkState {
  Tensor m, l, o, pack;
};

RingChunkState ChunkViews(const DecodeShape& s, const Tensor& buf, uint64_t w) {
  RingChunkState c;
  c.pack = buf;
  c.m = buf.Rows(0, s.rows);
  c.l = buf.Rows(s.rows, s.rows);
  const std::vector<uint64_t> shape = {s.rows, w};
  c.o = buf.Rows(2 * uint64_t{s.rows}, uint64_t{s.rows} * w).View(shape);
  return c;
}

std::vector<uint64_t> ChunkPackShape(const DecodeShape& s, uint64_t w) {
  return {uint64_t{s.rows} * (w + 2), 1};
}

// The rank's own columns `cols` as a chunk to send. Packed: its m, l (adjacent in the packed
// buffer) and the strided O columns copied on MATH into one contiguous message — the one
// copy a rank makes per ring (every later chunk it sends is a received, contiguous one).
Task<RingChunkState> OwnChunk(Tl& tl, const DecodeShape& s, const ReduceState& st,
                              ColumnRange cols) {
  RingChunkState own;
  own.m = st.m;
  own.l = st.l;
  own.o = st.o.Cols(cols.begin, cols.count);
  if (!s.packed_payload) co_return own;
  RingChunkState out = ChunkViews(s, tl.Alloc(ChunkPackShape(s, cols.count)), cols.count);
  co_await tl.Copy(st.pack.Rows(0, 2 * uint64_t{s.rows}), out.pack.Rows(0, 2 * uint64_t{s.rows}));
  co_await tl.Copy(own.o, out.o);
  co_return out;
}

// Posts the receive of a chunk of w columns from `from` (its m and l too when `with_ml`;
// packed: always, in the one message).
Task<RingChunkState> ReceiveChunk(Tl& tl, const DecodeShape& s, const Peer& from, uint64_t w,
                                  bool with_ml) {
  if (s.packed_payload) {
    Call recv = tl.RecvAsync(from, ChunkPackShape(s, w));
    const Tensor buf = co_await recv;
    co_return ChunkViews(s, buf, w);
  }
  const std::vector<uint64_t> col = {s.rows, 1};
  const std::vector<uint64_t> shape = {s.rows, w};
  RingChunkState in;
  if (with_ml) {
    Call rm = tl.RecvAsync(from, col);
    in.m = co_await rm;
    Call rl = tl.RecvAsync(from, col);
    in.l = co_await rl;
  }
  Call ro = tl.RecvAsync(from, shape);
  in.o = co_await ro;
  co_return in;
}

Task<void> SendChunk(Tl& tl, const DecodeShape& s, const Peer& to, const RingChunkState& c,
                     bool with_ml) {
  if (s.packed_payload) {
    co_await tl.Send(to, c.pack);
    co_return;
  }
  if (with_ml) {
    co_await tl.Send(to, c.m);
    co_await tl.Send(to, c.l);
  }
  co_await tl.Send(to, c.o);
}

// Merges the rank's own columns `cols` (with its m, l) into the received chunk `in` and
// returns the merged chunk (the next one to send): the LSE merge is symmetric, bit for bit,
// so merging own into received equals the tree's received into own. Fused: one lse_merge in
// place in the received buffers, issued on the pending receive. Primitive: the 11 ops, l and
// O in place in the received buffers and m into a new column (triplet) or everything into a
// new chunk buffer (packed: the merged chunk must stay one message).
Task<RingChunkState> MergeChunk(Tl& tl, const DecodeShape& s, const ReduceState& st,
                                ColumnRange cols, RingChunkState in) {
  const Tensor own_o = st.o.Cols(cols.begin, cols.count);
  if (s.fused_merge) {
    const Accumulator acc{in.m, in.l, in.o};
    const Accumulator own{st.m, st.l, own_o};
    const Tensor done = co_await tl.LseMerge(acc, own, acc);
    in.m = in.m.WithProducer(done.producer());
    in.l = in.l.WithProducer(done.producer());
    in.o = done;
    if (s.packed_payload) in.pack = in.pack.WithProducer(done.producer());
    co_return in;
  }
  if (s.packed_payload) {
    RingChunkState out = ChunkViews(s, tl.Alloc(ChunkPackShape(s, cols.count)), cols.count);
    co_await LseMergeInto(tl, in.m, in.l, in.o, st.m, st.l, own_o, out.m, out.l, out.o);
    co_return out;
  }
  const std::vector<uint64_t> col = {s.rows, 1};
  const Tensor m_out = tl.Alloc(col);
  co_await LseMergeInto(tl, in.m, in.l, in.o, st.m, st.l, own_o, m_out, in.l, in.o);
  in.m = m_out;
  co_return in;
}

// One level's chunked ring (§4.4): reduce-scatter, then the gather to the level's root
// (ring position nodes - 1), which assembles (m, l, O) into `st`. Every receive is posted
// before the step's send, so no chunk waits for room in a queue. Chunks without columns
// (d < nodes) are neither sent nor merged (both ends skip the same steps): the root keeps
// chunk 0's m and l, which is never empty, so an empty chunk's would be dropped anyway.
Task<void> RingReduce(Tl& tl, const DecodeShape& s, const RingPlace& ring, ReduceState& st) {
  const int64_t n = ring.nodes, k = ring.pos;
  const auto chunk = [&](int64_t c) {
    return RingChunk(s.d, ring.nodes, static_cast<uint32_t>((c % n + n) % n));
  };
  // Reduce-scatter: step t sends chunk k - t and merges chunk k - t - 1 (mod n).
  ColumnRange out_cols = chunk(k);
  RingChunkState out;
  if (out_cols.count > 0) out = co_await OwnChunk(tl, s, st, out_cols);
  for (int64_t t = 0; t + 1 < n; ++t) {
    const ColumnRange in_cols = chunk(k - t - 1);
    RingChunkState in;
    if (in_cols.count > 0) {
      in = co_await ReceiveChunk(tl, s, ring.prev, in_cols.count, /*with_ml=*/true);
    }
    if (out_cols.count > 0) co_await SendChunk(tl, s, ring.next, out, /*with_ml=*/true);
    if (in_cols.count > 0) in = co_await MergeChunk(tl, s, st, in_cols, in);
    out = in;
    out_cols = in_cols;
  }
  // Gather: this node now holds chunk k + 1 reduced. The chunks only move now: m and l stay
  // behind in the triplet form (the root uses its own chunk's); packed, they are in the one
  // message anyway.
  if (k + 1 < n) {
    for (int64_t i = 1; i <= k; ++i) {  // chunks k, k - 1, ..., 1 pass through
      const ColumnRange in_cols = chunk(k + 1 - i);
      RingChunkState in;
      if (in_cols.count > 0) {
        in = co_await ReceiveChunk(tl, s, ring.prev, in_cols.count, /*with_ml=*/false);
      }
      if (out_cols.count > 0) co_await SendChunk(tl, s, ring.next, out, /*with_ml=*/false);
      out = in;
      out_cols = in_cols;
    }
    if (out_cols.count > 0) co_await SendChunk(tl, s, ring.next, out, /*with_ml=*/false);
    co_return;
  }
  // The root holds chunk 0. m is the maximum over every rank, the same in every chunk
  // (exact in any order); l differs between chunks only by the rounding of their merge
  // orders: the root takes chunk 0's m and l for every column. The O columns are copied
  // into the rank's O (MATH), then the level goes on as after a tree.
  if (s.packed_payload) {
    co_await tl.Copy(out.pack.Rows(0, 2 * uint64_t{s.rows}), st.pack.Rows(0, 2 * uint64_t{s.rows}));
  } else {
    st.m = out.m;
    st.l = out.l;
  }
  co_await tl.Copy(out.o, st.o.Cols(out_cols.begin, out_cols.count));
  for (int64_t c = n - 1; c >= 1; --c) {  // from the predecessor: chunks n - 1, ..., 1
    const ColumnRange cols = chunk(c);
    if (cols.count == 0) continue;
    const RingChunkState in = co_await ReceiveChunk(tl, s, ring.prev, cols.count, /*with_ml=*/false);
    co_await tl.Copy(in.o, st.o.Cols(cols.begin, cols.count));
  }
}

// hierarchical_reduce_and_store (§4): Level-2 over the CUBE's PEs (IPCQ), then Level-1 over
// the group's CUBE roots (NOC), each a tree or the chunked ring; the group root normalises
// once and stores.
Task<void> ReduceAndStore(Tl& tl, const DecodeShape& s, const RankPlan& p, ReduceState st) {
  if (p.l2_ring) {
    co_await RingReduce(tl, s, *p.l2_ring, st);
    if (p.l2_ring->pos + 1 < p.l2_ring->nodes) co_return;
  }
  for (const Peer& child : p.l2_children) co_await MergeFrom(tl, s, child, st);
  if (p.l2_parent) {
    co_await SendState(tl, s, *p.l2_parent, st);
    co_return;
  }
  if (p.l1_ring) {
    co_await RingReduce(tl, s, *p.l1_ring, st);
    if (p.l1_ring->pos + 1 < p.l1_ring->nodes) co_return;
  }
  for (const Peer& child : p.l1_children) co_await MergeFrom(tl, s, child, st);
  if (p.l1_parent) {
    co_await SendState(tl, s, *p.l1_parent, st);
    co_return;
  }
  if (!p.store_output) co_return;
  const std::vector<uint64_t> full = {s.rows, s.d};
  Tensor out = tl.Alloc(full, pb::BF16);
  co_await tl.Div(st.o, st.l, out);  // normalise once, at the group root
  co_await tl.Store(tl.Ref(p.o_addr, full), out);
}

}  // namespace

// §5.1 decode skeleton.
Task<void> DecodeRank(Tl& tl, DecodeShape shape, RankPlan plan) {
  const std::vector<uint64_t> qshape = {shape.rows, shape.d};
  Tensor q = co_await tl.Load(tl.Ref(plan.q_addr, qshape), Arena::kPersistent);  // lazy
  Opt2Sweep ahead;
  if (shape.variant == DecodeVariant::kOpt2Lookahead && plan.my_len > 0) {
    ahead = MakeOpt2Sweep(tl, shape, plan, shape.lookahead);
    co_await PrimeOpt2(tl, shape, plan, q, ahead);
  }
  Running r = co_await InitRunning(tl, shape, plan);
  if (plan.my_len > 0) {
    switch (shape.variant) {
      case DecodeVariant::kOpt1:
        co_await SweepOpt1(tl, shape, plan, q, r);
        break;
      case DecodeVariant::kOpt3:
        co_await SweepOpt3(tl, shape, plan, q, r);
        break;
      case DecodeVariant::kOpt2: {
        Opt2Sweep w = MakeOpt2Sweep(tl, shape, plan, /*ahead=*/0);
        co_await SweepOpt2(tl, shape, plan, q, r, w);
        break;
      }
      case DecodeVariant::kOpt2Lookahead:
        co_await SweepOpt2(tl, shape, plan, q, r, ahead);
        break;
      case DecodeVariant::kBaselineDot:
        co_await SweepBaselineDot(tl, shape, plan, q, r);
        break;
    }
  }
  ReduceState st;
  st.m = Chained(shape) ? r.m[0] : r.m[r.cur];
  st.l = r.l;
  st.o = r.o;
  st.pack = r.pack;
  if (shape.packed_payload) {
    const Tensor packed_m = PackedViews(shape, r.pack).m;
    // InitRunning put the packed m in the slot the sweep ends on (n tiles: slot n % 2;
    // chained: 0), so this copy does not run for the sweeps we have; a sweep that ends in the
    // other slot would still send the packed buffer, one copy later.
    if (st.m.addr() != packed_m.addr()) {
      co_await tl.Copy(st.m, packed_m);
      st.m = packed_m;
    }
  }
  co_await ReduceAndStore(tl, shape, plan, st);
}

}  // namespace ahbm::kernels
