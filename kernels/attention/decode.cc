#include "kernels/attention/decode.h"

#include "kernels/attention/lse_merge.h"

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

// K tile j as a (d, len) operand of the tile-major block (strided when len < TILE).
Tensor KTile(Tl& tl, const DecodeShape& s, const RankPlan& p, uint64_t j) {
  const std::vector<uint64_t> shape = {s.d, s.tile};
  const Tensor full = tl.Ref(p.k_addr + j * s.d * s.tile * 2, shape);
  return full.Cols(0, TileLen(p, s, j));
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
    Tensor kj = KTile(tl, s, p, j);
    const std::vector<Epilogue> epi = co_await QkEpilogue(tl, s, p, j, /*scale=*/true);
    Tensor sj = co_await tl.Composite(q, kj, epi);
    co_await SoftmaxAndPv(tl, s, p, r, sj, j);
  }
}

// Option 3 (§5.6, TL;DR, the ship choice): Q·Kᵀ(j+L) issued before softmax(j), L =
// `lookahead` (the ADR's form: 1; 0: opt1's order), into L + 1 persistent Sj buffers outside
// the scratch scope (tile j's buffer is j mod (L + 1): the one softmax(j - 1) read, done).
Task<void> SweepOpt3(Tl& tl, const DecodeShape& s, const RankPlan& p, const Tensor& q,
                     Running& r) {
  const uint64_t n = (p.my_len + s.tile - 1) / s.tile;
  const std::vector<uint64_t> sshape = {s.rows, s.tile};
  std::vector<Tensor> sb;
  for (uint32_t b = 0; b <= s.lookahead; ++b) {
    sb.push_back(tl.Alloc(sshape, pb::FP32, Arena::kPersistent));
  }
  std::vector<Tensor> sj(n);
  const auto issue = [&](uint64_t i) -> Task<void> {
    const std::vector<Epilogue> epi = co_await QkEpilogue(tl, s, p, i, /*scale=*/true);
    sj[i] = co_await tl.Composite(q, KTile(tl, s, p, i), epi,
                                  sb[i % sb.size()].Cols(0, TileLen(p, s, i)));
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
// buffer is reused once the softmax_pv that read it has completed. `ahead` = 0 is the ADR's
// order (Q·Kᵀ(j), softmax_pv(j)); opt2_lookahead issues Q·Kᵀ(j + ahead) before softmax_pv(j),
// so K(j + 1)'s DMA precedes V(j)'s and Q·Kᵀ(j + 1) is ready when the chain's merge(j) frees
// the GEMM engine. The buffers (at least ahead + 1) are each reused only after the
// softmax_pv issued `buffers` tiles earlier, which the CPU has issued by then.
struct Opt2Sweep {
  uint64_t n = 0;
  uint32_t ahead = 0;
  std::vector<Tensor> sbuf;
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
  const std::vector<Epilogue> epi = co_await QkEpilogue(tl, s, p, i, /*scale=*/false);
  w.sj[i] = co_await tl.Composite(q, KTile(tl, s, p, i), epi, out);
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
    Tensor kj = co_await tl.Load(KTile(tl, s, p, j));  // non-blocking; the dot auto-waits
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

// hierarchical_reduce_and_store (§4): Level-2 tree over the CUBE's PEs (IPCQ), then Level-1
// over the group's CUBE roots (NOC); the group root normalises once and stores.
Task<void> ReduceAndStore(Tl& tl, const DecodeShape& s, const RankPlan& p, ReduceState st) {
  for (const Peer& child : p.l2_children) co_await MergeFrom(tl, s, child, st);
  if (p.l2_parent) {
    co_await SendState(tl, s, *p.l2_parent, st);
    co_return;
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
    if (st.m.addr() != packed_m.addr()) {  // a sweep that swapped m an unexpected
      co_await tl.Copy(st.m, packed_m);                // number of times: one copy, still right
      st.m = packed_m;
    }
  }
  co_await ReduceAndStore(tl, shape, plan, st);
}

}  // namespace ahbm::kernels
