#include "actors/units/pe_scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "actors/message_pool.h"
#include "actors/msg.h"
#include "actors/tensor_ref.h"
#include "base/check.h"

namespace ahbm::sim {
namespace {

std::span<const uint64_t> Ids(const google::protobuf::RepeatedField<uint64_t>& ids) {
  return {ids.data(), static_cast<size_t>(ids.size())};
}

TensorHome HomeOf(const pb::TensorRef& ref) {
  return ref.space() == pb::HBM ? TensorHome::kHbm : TensorHome::kTcm;
}

// Row stride (elements) of a rank-2 tensor: its first stride, or dense.
std::pair<uint64_t, uint64_t> Strides2(const pb::TensorRef& ref) {
  if (ref.strides_size() == 2) return {ref.strides(0), ref.strides(1)};
  return {ref.shape(1), 1};
}

GemmComposite CompositeOf(const pb::TensorRef& a, const pb::TensorRef& b, const pb::TensorRef& out) {
  GemmComposite c;
  c.m = a.shape(0);
  c.k = a.shape(1);
  c.n = b.shape(1);
  c.a_element_bytes = Bytes(DTypeBytes(a.dtype()));
  c.b_element_bytes = Bytes(DTypeBytes(b.dtype()));
  c.out_element_bytes = Bytes(DTypeBytes(out.dtype()));
  c.a_home = HomeOf(a);
  c.b_home = HomeOf(b);
  c.out_home = HomeOf(out);
  return c;
}

// The operands a command's tile loads are pieces of (null: it loads none of that side).
struct Operands {
  const pb::TensorRef* a = nullptr;
  const pb::TensorRef* b = nullptr;
};
Operands OperandsOf(const PeCommand& c) {
  switch (c.kind) {
    case CommandKind::kComposite:
      return {&c.composite().a(), &c.composite().b()};
    case CommandKind::kDot:
      return {&c.dot().a(), &c.dot().b()};
    case CommandKind::kSoftmaxPv:
      return {nullptr, &c.softmax_pv().v()};
    default:
      return {};
  }
}

bool IsHbmLoad(const TileOp& op) {
  return op.home == TensorHome::kHbm &&
         (op.kind == TileOpKind::kLoadA || op.kind == TileOpKind::kLoadB);
}

}  // namespace

PeScheduler::PeScheduler(UnitContext* ctx, UnitId self, uint32_t pe)
    : ctx_(ctx),
      config_(ctx->chip.sip().cube().pe()),
      checker_(ctx->chip, pe),
      planner_(*ClockDomain::FromMHz(config_.clock_mhz())),
      dmas_(pe),
      reporter_(*ClockDomain::FromMHz(config_.clock_mhz()),
                ReportOptions{.op_log = ctx->op_log != nullptr,
                              .per_tile_detail = ctx->per_tile_detail,
                              .data = ctx->data != nullptr},
                self, ctx->op_log != nullptr ? ctx->Name(self) : std::string()) {
  const topology::PeId id = ctx->index.PeOf(pe);
  const auto unit = [&](topology::UnitKind kind) { return ctx->index.PeUnit(kind, id).value(); };
  peers_ = Peers{.pe = pe,
                 .self = self,
                 .dma = unit(topology::UnitKind::kDma),
                 .gemm = unit(topology::UnitKind::kGemm),
                 .math = unit(topology::UnitKind::kMath),
                 .cpu = unit(topology::UnitKind::kPeCpu)};
}

// ---- intake ----

PeScheduler::Cmd* PeScheduler::Accept(Kind kind, uint64_t cmd_id,
                                      absl::FunctionRef<std::string()> op_name,
                                      absl::Status check, std::span<const uint64_t> depends_on) {
  const UnitId requester = ctx_->engine->current_src();
  if (!check.ok()) {
    Fail(requester, cmd_id, std::string(check.message()));
    return nullptr;
  }
  if (std::string refusal = table_.Refusal(cmd_id, depends_on); !refusal.empty()) {
    Fail(requester, cmd_id,
         absl::StrCat(checker_.pe_name(), ": ", op_name(), " cmd ", cmd_id, ": ", refusal));
    return nullptr;
  }
  return &table_.Accept(kind, cmd_id, requester, ctx_->engine->now(), depends_on);
}

void PeScheduler::OnComposite(std::shared_ptr<const pb::CompositeCmd> cmd) {
  EnterCommand();
  Cmd* c = Accept(Kind::kComposite, cmd->cmd_id(), [] { return std::string("composite_gemm"); },
                  checker_.Check(*cmd), Ids(cmd->depends_on()));
  if (c == nullptr) return;
  c->msg = std::move(cmd);
  AdmitOrWait(*c);
  Step();
}

void PeScheduler::OnSoftmaxPv(std::shared_ptr<const pb::SoftmaxPvCmd> cmd) {
  EnterCommand();
  Cmd* c = Accept(Kind::kSoftmaxPv, cmd->cmd_id(), [] { return std::string("softmax_pv"); },
                  checker_.Check(*cmd), Ids(cmd->depends_on()));
  if (c == nullptr) return;
  // The serial chain: the previous call on this accumulator, if it is still live.
  const std::optional<uint64_t> previous =
      table_.ChainOnAccumulator({cmd->acc_o().pe(), cmd->acc_o().addr()}, c->cmd_id);
  if (previous && std::find(c->depends_on.begin(), c->depends_on.end(), *previous) ==
                      c->depends_on.end()) {
    c->depends_on.push_back(*previous);
  }
  c->msg = std::move(cmd);
  AdmitOrWait(*c);
  Step();
}

// Admitted on arrival when nothing older waits and a slot is free — not at the next Step, which
// waits for this instant's DMA replies: a DMA the CPU issues after this command at the same
// instant would otherwise reach the DMA unit (and the channels, FIFO) before its operand loads.
void PeScheduler::AdmitOrWait(Cmd& c) {
  if (table_.AdmitOnArrival(c, config_.scheduler().max_inflight_composites())) Admit(c);
}

void PeScheduler::OnLseMerge(std::shared_ptr<const pb::LseMergeCmd> cmd) {
  EnterCommand();
  Cmd* c = Accept(Kind::kLseMerge, cmd->cmd_id(), [] { return std::string("lse_merge"); },
                  checker_.Check(*cmd), Ids(cmd->depends_on()));
  if (c == nullptr) return;
  c->msg = std::move(cmd);
  Admit(*c);
  Step();
}

void PeScheduler::OnDot(std::shared_ptr<const pb::GemmCmd> cmd) {
  EnterCommand();
  Cmd* c = Accept(Kind::kDot, cmd->cmd_id(), [] { return std::string("dot"); }, checker_.Check(*cmd),
                  {});
  if (c == nullptr) return;
  c->msg = std::move(cmd);
  Admit(*c);
  Step();
}

void PeScheduler::OnMath(std::shared_ptr<const pb::MathCmd> cmd) {
  EnterCommand();
  Cmd* c = Accept(
      Kind::kMath, cmd->cmd_id(), [&] { return absl::StrCat("math_", pb::MathOp_Name(cmd->op())); },
      checker_.Check(*cmd), {});
  if (c == nullptr) return;
  c->msg = std::move(cmd);
  Admit(*c);
  Step();
}

void PeScheduler::OnDma(std::shared_ptr<const pb::DmaCmd> cmd) {
  EnterCommand();
  const bool store = cmd->dst().space() == pb::HBM;
  const bool load = cmd->src().space() == pb::HBM;
  Cmd* c = Accept(
      Kind::kDma, cmd->cmd_id(),
      [&] { return std::string(store ? "dma_store" : load ? "dma_load" : "dma_copy"); },
      checker_.Check(*cmd), {});
  if (c == nullptr) return;
  c->admitted = true;
  c->msg = cmd;
  pb::DmaCmd dma = *cmd;
  const uint64_t bytes = ElementCount(cmd->src()) * DTypeBytes(cmd->src().dtype());
  if (load) c->hbm_read_bytes += bytes;
  if (store) c->hbm_write_bytes += bytes;
  SendDma(*c, std::move(dma), 0, /*whole_command=*/true);
  Step();
}

// ---- admission and planning ----

void PeScheduler::Admit(Cmd& c) {
  c.admitted = true;
  PlanTiles(c);
  AddDependencies(c);
  SendOperandLoads(c);
}

void PeScheduler::PlanTiles(Cmd& c) {
  const pb::Scheduler& sched = config_.scheduler();
  if (c.kind != Kind::kLseMerge && c.plan.capacity() == 0) {
    c.plan = table_.TakePlanBuffer();  // a finished command's buffer, if any
  }
  TilePlan& plan = scratch_.plan;  // planned here; only its ops are kept, in c.plan
  plan.ops = std::move(c.plan);
  const Operands operands = OperandsOf(c);
  switch (c.kind) {
    case Kind::kComposite: {
      GemmComposite g = CompositeOf(*operands.a, *operands.b, c.composite().out());
      for (const pb::EpilogueStage& s : c.composite().epilogue()) g.epilogue.push_back(s.op());
      PlanGemm(g, sched, config_.gemm(), config_.math(), plan);
      break;
    }
    case Kind::kDot:
      PlanGemm(CompositeOf(*operands.a, *operands.b, c.dot().out()), sched, config_.gemm(),
               config_.math(), plan);
      break;
    case Kind::kSoftmaxPv: {
      const pb::SoftmaxPvCmd& s = c.softmax_pv();
      SoftmaxPvShape shape;
      shape.rows = s.s().shape(0);
      shape.keys = s.s().shape(1);
      shape.d = s.v().shape(1);
      shape.v_element_bytes = Bytes(DTypeBytes(s.v().dtype()));
      shape.v_home = HomeOf(s.v());
      PlanSoftmaxPv(shape, sched, config_.gemm(), config_.math(), plan);
      break;
    }
    case Kind::kMath: {
      const pb::MathCmd& m = c.math();
      const uint64_t elements = IsMathReduction(m.op()) && m.inputs_size() > 0
                                    ? ElementCount(m.inputs(0))
                                    : ElementCount(m.out());
      TileOp op;
      op.kind = TileOpKind::kEpilogue;
      op.math_stages.push_back({.op = m.op(), .elements = elements});
      op.cycles = MathOpCycles(config_.math(), op.math_stages[0]);
      plan.ops.push_back(std::move(op));
      break;
    }
    case Kind::kLseMerge: {
      const pb::TensorRef& o = c.lse_merge().acc_o();
      plan = PlanLseMerge(o.shape(0), o.shape(1), config_.math());
      break;
    }
    case Kind::kDma:
      AHBM_CHECK(false) << "DMA commands are not planned";
  }
  c.plan = std::move(plan.ops);
}

// The planner ops of `c`, after those of its live dependencies and after their DMA parts.
void PeScheduler::AddDependencies(Cmd& c) {
  std::vector<OpId>& dep_ops = scratch_.dep_ops;
  dep_ops.clear();
  int unknown = 0;
  SimTime known;
  for (uint64_t dep : c.depends_on) {
    const Cmd* d = table_.Find(dep);
    if (d == nullptr) continue;  // completed: imposes nothing
    AHBM_CHECK(d->admitted) << "cmd " << c.cmd_id << " admitted before its dependency " << dep;
    dep_ops.insert(dep_ops.end(), d->ops.begin(), d->ops.end());
    if (d->DmaSettled()) {
      known = std::max(known, d->dma_end);
    } else {
      ++unknown;
    }
  }
  std::sort(dep_ops.begin(), dep_ops.end());
  dep_ops.erase(std::unique(dep_ops.begin(), dep_ops.end()), dep_ops.end());
  AddPlannerOps(c, dep_ops, unknown, known);
  if (unknown == 0) return;
  for (uint64_t dep : c.depends_on) {
    Cmd* d = table_.Find(dep);
    if (d == nullptr || d->DmaSettled()) continue;
    d->dma_waiters.insert(d->dma_waiters.end(), c.ops.begin(), c.ops.end());
  }
}

// Operand loads, all at once, in plan order, as one DmaBatch.
void PeScheduler::SendOperandLoads(Cmd& c) {
  const pb::Scheduler& sched = config_.scheduler();
  const Operands operands = OperandsOf(c);
  dmas_.BeginBatch(static_cast<int>(std::count_if(c.plan.begin(), c.plan.end(), IsHbmLoad)));
  for (const TileOp& op : c.plan) {
    if (op.home != TensorHome::kHbm) continue;
    if (op.kind == TileOpKind::kLoadB) {
      const uint64_t k0 = uint64_t{op.ki} * sched.tile_k();
      const uint64_t n0 = uint64_t{op.ni} * sched.tile_n();
      pb::DmaCmd& dma = dmas_.Slot(c.cmd_id, op.index);
      ++c.dmas_in_flight;
      Piece(*operands.b, k0, op.tile.k, n0, op.tile.n, *dma.mutable_src());
      Staging(*operands.b, op.tile.k, op.tile.n, *dma.mutable_dst());
      c.hbm_read_bytes += op.bytes.value();
    } else if (op.kind == TileOpKind::kLoadA) {
      const uint64_t m0 = uint64_t{op.mi} * sched.tile_m();
      const uint64_t k0 = uint64_t{op.ki} * sched.tile_k();
      pb::DmaCmd& dma = dmas_.Slot(c.cmd_id, op.index);
      ++c.dmas_in_flight;
      Piece(*operands.a, m0, op.tile.m, k0, op.tile.k, *dma.mutable_src());
      Staging(*operands.a, op.tile.m, op.tile.k, *dma.mutable_dst());
      c.hbm_read_bytes += op.bytes.value();
    } else if (op.kind == TileOpKind::kWriteOut) {
      c.pending_writes.push_back(op.index);
    }
  }
  if (std::shared_ptr<const pb::DmaBatch> batch = dmas_.EndBatch()) {
    ctx_->engine->Send(peers_.self, SimTime(0), peers_.dma, std::move(batch));
  }
}

void PeScheduler::AddPlannerOps(Cmd& c, const std::vector<OpId>& extra_deps, int extra_external,
                                SimTime external_ready) {
  const size_t n = c.plan.size();
  c.planner_op.assign(n, std::nullopt);
  c.piece_waiters.resize(n);
  for (std::vector<OpId>& waiters : c.piece_waiters) waiters.clear();
  const auto planned = [](const TileOp& op) {
    return op.kind == TileOpKind::kGemm || op.kind == TileOpKind::kEpilogue ||
           op.kind == TileOpKind::kSoftmaxMerge || op.kind == TileOpKind::kLseMerge;
  };
  // Exact sizes (no growth slack in commands that stay live for a while).
  const size_t count = std::count_if(c.plan.begin(), c.plan.end(), planned);
  c.ops.reserve(c.ops.size() + count);
  c.op_pos.reserve(c.op_pos.size() + count);
  const SimTime now = ctx_->engine->now();
  for (const TileOp& op : c.plan) {
    if (!planned(op)) continue;
    const bool gemm = op.kind == TileOpKind::kGemm;
    OpSpec spec;
    spec.engine = gemm ? EngineKind::kGemm : EngineKind::kMath;
    spec.key = PriorityKey{c.seq, op.index};
    spec.busy = op.cycles;
    spec.fill_if_idle = gemm ? Cycles(config_.gemm().fill_drain_cycles()) : Cycles(0);
    spec.deps.assign(extra_deps.begin(), extra_deps.end());
    int external = extra_external;
    absl::InlinedVector<uint32_t, 4> hbm_pieces;  // at most the op's own deps
    for (uint32_t dep : op.deps) {
      if (c.planner_op[dep]) {
        spec.deps.push_back(*c.planner_op[dep]);
      } else if (IsHbmLoad(c.plan[dep])) {
        hbm_pieces.push_back(dep);
        ++external;
      }
    }
    // Settled dependencies whose DMA parts end in the future make one input known at once.
    const bool known_only = external == 0 && external_ready > now;
    spec.waits_external = external > 0 || known_only;
    const OpId id = planner_.Add(std::move(spec));
    c.planner_op[op.index] = id;
    c.ops.push_back(id);
    c.op_pos.push_back(static_cast<uint32_t>(&op - c.plan.data()));
    for (uint32_t piece : hbm_pieces) c.piece_waiters[piece].push_back(id);
    if (external > 0) {
      external_.Add(id, external, std::max(now, external_ready));
    } else if (known_only) {
      planner_.SetExternalReady(id, external_ready);
    }
  }
}

void PeScheduler::Piece(const pb::TensorRef& ref, uint64_t r0, uint64_t rows, uint64_t c0,
                        uint64_t cols, pb::TensorRef& piece) {
  const auto [s0, s1] = Strides2(ref);
  piece.set_space(ref.space());
  piece.set_pe(ref.pe());
  piece.set_dtype(ref.dtype());
  piece.set_addr(ref.addr() + (r0 * s0 + c0 * s1) * DTypeBytes(ref.dtype()));
  piece.add_shape(rows);
  piece.add_shape(cols);
  piece.add_strides(s0);
  piece.add_strides(s1);
}

// The scheduler's own tile buffer for a piece: in this PE's TCM, dense. Its address is not
// modelled (composite tile buffers are the scheduler's, outside the kernel's arenas).
void PeScheduler::Staging(const pb::TensorRef& like, uint64_t rows, uint64_t cols,
                          pb::TensorRef& t) const {
  t.set_space(pb::TCM);
  t.set_pe(peers_.pe);
  t.set_dtype(like.dtype());
  t.add_shape(rows);
  t.add_shape(cols);
}

// ---- DMAs ----

void PeScheduler::SendDma(Cmd& c, pb::DmaCmd dma, uint32_t tile_index, bool whole_command) {
  dma.set_cmd_id(dmas_.SendOne(c.cmd_id, tile_index, whole_command));
  dma.set_parent_cmd_id(c.cmd_id);
  ++c.dmas_in_flight;
  ctx_->engine->Send(
      peers_.self, SimTime(0), peers_.dma,
      std::shared_ptr<const pb::DmaCmd>(std::make_shared<pb::DmaCmd>(std::move(dma))));
}

void PeScheduler::ResolveExternal(OpId op, SimTime ready) {
  if (const std::optional<SimTime> all_ready = external_.Resolve(op, ready)) {
    planner_.SetExternalReady(op, std::max(*all_ready, ctx_->engine->now()));
  }
}

void PeScheduler::NoteDmaEnd(Cmd& c, SimTime end) {
  c.dma_end = std::max(c.dma_end, end);
  if (!c.DmaSettled()) return;
  std::vector<OpId> waiters = std::move(c.dma_waiters);
  c.dma_waiters.clear();
  for (OpId op : waiters) ResolveExternal(op, c.dma_end);
}

void PeScheduler::OnDmaDone(const pb::Completion& done) {
  Enter();
  const bool last = dmas_.ReplyArrived();
  PieceDone(done);
  if (last) Step();
}

void PeScheduler::OnDmaBatchDone(const pb::DmaBatchDone& done) {
  Enter();
  const bool last = dmas_.ReplyArrived();
  for (const pb::Completion& piece : done.done()) PieceDone(piece);
  if (last) Step();
}

void PeScheduler::PieceDone(const pb::Completion& done) {
  const DmaPiece piece = dmas_.Take(done.cmd_id());
  Cmd& c = table_.At(piece.cmd_id);
  --c.dmas_in_flight;
  c.dma_start = std::min(c.dma_start, SimTime(done.start_ps()));
  const SimTime end(done.end_ps());
  if (!piece.whole_command) {
    for (OpId op : c.piece_waiters[piece.tile_index]) ResolveExternal(op, end);
  }
  NoteDmaEnd(c, end);
}

void PeScheduler::OnDmaError(const pb::DmaError& error) {
  Enter();
  const DmaPiece piece = dmas_.Take(error.cmd_id());
  const bool last = dmas_.ReplyArrived();
  // Checked commands plan cleanly; only a CPU load/store can still be refused here.
  AHBM_CHECK(piece.whole_command) << "DMA piece of checked cmd " << piece.cmd_id
                                  << " refused: " << error.message();
  Cmd& c = table_.At(piece.cmd_id);
  Fail(c.requester, c.cmd_id, error.message());
  table_.Remove(c);
  if (last) Step();
}

void PeScheduler::IssueWriteOuts(Cmd& c) {
  if (c.pending_writes.empty()) return;
  const SimTime now = ctx_->engine->now();
  const pb::Scheduler& sched = config_.scheduler();
  const pb::TensorRef& out = c.kind == Kind::kComposite ? c.composite().out() : c.dot().out();
  std::vector<uint32_t> still;
  for (uint32_t index : c.pending_writes) {
    const TileOp& w = c.plan[index];
    const OpId producer = *c.planner_op[w.deps[0]];
    const std::optional<OpTiming> t = planner_.timing(producer);
    if (!planner_.committed(producer) || !t || t->end > now) {
      still.push_back(index);
      continue;
    }
    pb::DmaCmd dma;
    Staging(out, w.tile.m, w.tile.n, *dma.mutable_src());
    Piece(out, uint64_t{w.mi} * sched.tile_m(), w.tile.m, uint64_t{w.ni} * sched.tile_n(), w.tile.n,
          *dma.mutable_dst());
    c.hbm_write_bytes += w.bytes.value();
    SendDma(c, std::move(dma), index, false);
  }
  c.pending_writes = std::move(still);
}

// ---- stepping ----

void PeScheduler::OnTimer(uint64_t version) {
  if (version != wake_.version) return;  // stale
  Enter();
  wake_.at.reset();
  Step();
}

void PeScheduler::Step() {
  if (dmas_.replies_pending()) return;  // the last reply of this instant steps
  const SimTime now = ctx_->engine->now();
  const uint32_t max_inflight = config_.scheduler().max_inflight_composites();
  bool again = true;
  while (again) {
    again = false;
    planner_.Replan(now);
    // Completions and write-outs, in issue order (cmd_ids ascend with issue on a PE CPU, but
    // order by seq to be independent of that): live() is in seq order.
    bool any_completed = false;
    for (Cmd*& c : table_.live()) {
      if (!c->admitted) continue;
      IssueWriteOuts(*c);
      if (TryComplete(*c)) {
        table_.Release(*c);
        c = nullptr;
        any_completed = true;
      }
    }
    if (any_completed) table_.DropFinished();
    // Admission in issue order.
    while (Cmd* c = table_.NextAdmitted(max_inflight)) {
      Admit(*c);
      again = true;
    }
    if (dmas_.replies_pending()) return;  // admission sent DMAs: their last reply steps
  }
  if (table_.live().size() == 1 && ReplyAhead(*table_.live().front())) return;
  PostWake();
}

// The command's end is final when nothing can reach this scheduler before it: it is the only
// live command (no wake-ups, write-outs or DMA replies of others), none waits, and the PE's
// CPU can send nothing before this command's Completion (CpuProbe::QuietUntil). Then the step
// its wake-up would run at the end does exactly this: the engine units' work, then the
// Completion, as the first (and only) events of this scheduler at that instant. So they are
// sent now with the delay (same order among themselves, same place among other units' events
// at that instant: only this unit's own wake-up is saved), and the op record rides on the
// first EngineWork, which its unit writes where this step would have. The bookkeeping (planner
// ops, command slot, admission count) waits for the next event of this scheduler (Enter),
// which comes at or after the end. Not in data mode (values are applied at the end instant)
// nor in per-tile stepping, nor with UnitContext::reply_ahead off (the message path it equals:
// tests/reply_ahead_test).
bool PeScheduler::ReplyAhead(Cmd& c) {
  if (!c.admitted || c.cmd_id == 0 || c.dmas_in_flight > 0 || !c.pending_writes.empty() ||
      table_.any_waiting() || dmas_.replies_pending() || !ctx_->reply_ahead ||
      ctx_->per_tile_events || ctx_->data != nullptr || c.requester != peers_.cpu) {
    return false;
  }
  SimTime ops_start = c.ops_start;
  SimTime ops_end = c.ops_end;
  for (size_t i = c.ops_final; i < c.ops.size(); ++i) {
    const std::optional<OpTiming> t = planner_.timing(c.ops[i]);
    if (!t) return false;
    ops_start = std::min(ops_start, t->start);
    ops_end = std::max(ops_end, t->end);
  }
  const auto [start, end] = Span(c, ops_start, ops_end);
  const SimTime now = ctx_->engine->now();
  if (end <= now) return false;
  const uint32_t pe = peers_.pe;
  if (pe >= ctx_->cpus.size() || ctx_->cpus[pe] == nullptr ||
      !ctx_->cpus[pe]->QuietUntil(c.cmd_id, commands_received_)) {
    return false;
  }
  // The record first: it rides on the first EngineWork, or on the Completion of a command that
  // ran no engine op (a DMA command).
  std::string record;
  std::string* carried = ctx_->op_log != nullptr ? &record : nullptr;
  Account(c, start, end, carried);
  if (c.op_pos.empty()) {
    Reply(c, start, end, carried);
  } else {
    SendEngineWork(c, end - now, carried);
    Reply(c, start, end);
  }
  replied_ = RepliedAhead{.cmd = &c, .end = end};
  // A wake-up posted before is stale now (the old step at the end would have found nothing).
  ++wake_.version;
  wake_.at.reset();
  return true;
}

void PeScheduler::RetireReplied() {
  Cmd& c = *replied_.cmd;
  replied_.cmd = nullptr;
  const SimTime now = ctx_->engine->now();
  AHBM_CHECK(now >= replied_.end) << "scheduler of pe " << peers_.pe << ": an event at " << now
                                  << " before the end " << replied_.end << " of cmd "
                                  << c.cmd_id << ", answered ahead";
  AHBM_CHECK(table_.live().size() == 1 && table_.live().front() == &c);
  // What the step at the end did after the replies (TryComplete's bookkeeping).
  planner_.Replan(now);
  table_.Complete(c);
  for (OpId op : c.ops) planner_.Release(op);
  table_.Remove(c);
}

// A command's start and end: the extremes of its ops' (given) and its DMAs' times; its issue
// when it has neither (a command with nothing to do).
std::pair<SimTime, SimTime> PeScheduler::Span(const Cmd& c, SimTime ops_start, SimTime ops_end) {
  SimTime start = std::min(c.dma_start, ops_start);
  if (start == SimTime::Max()) start = c.issue;
  return {start, std::max(c.dma_end, ops_end)};
}

bool PeScheduler::TryComplete(Cmd& c) {
  const SimTime now = ctx_->engine->now();
  if (c.dmas_in_flight > 0 || !c.pending_writes.empty() || c.dma_end > now) return false;
  // Committed ops that have ended stay so: resume after the ones already seen final.
  for (; c.ops_final < c.ops.size(); ++c.ops_final) {
    const OpId op = c.ops[c.ops_final];
    if (!planner_.committed(op)) return false;
    const std::optional<OpTiming> t = planner_.timing(op);
    if (t && t->end > now) return false;
    if (t) {
      c.ops_start = std::min(c.ops_start, t->start);
      c.ops_end = std::max(c.ops_end, t->end);
    }
  }
  const auto [start, end] = Span(c, c.ops_start, c.ops_end);
  if (std::shared_ptr<pb::DmaData> data = reporter_.DmaDataOf(c)) {
    ctx_->engine->Send(peers_.self, SimTime(0), peers_.dma,
                       std::shared_ptr<const pb::DmaData>(std::move(data)));
  }
  SendEngineWork(c);
  Reply(c, start, end);
  Account(c, start, end);
  table_.Complete(c);
  for (OpId op : c.ops) planner_.Release(op);
  return true;
}

void PeScheduler::PostWake() {
  const SimTime now = ctx_->engine->now();
  std::optional<SimTime> next;
  const auto consider = [&](SimTime t) {
    if (t > now) next = std::min(next.value_or(t), t);
  };
  for (Cmd* live : table_.live()) {
    Cmd& c = *live;
    if (!c.admitted) continue;
    if (c.dmas_in_flight == 0) consider(c.dma_end);
    if (c.planned_version != planner_.plan_version()) {  // else no timing has changed
      c.planned_version = planner_.plan_version();
      c.planned_end = c.ops_end;  // the final ops' (TryComplete folded them)
      for (size_t i = c.ops_final; i < c.ops.size() && c.planned_end; ++i) {
        const std::optional<OpTiming> t = planner_.timing(c.ops[i]);
        c.planned_end = t ? std::max(*c.planned_end, t->end) : std::optional<SimTime>();
      }
    }
    if (c.planned_end && c.dmas_in_flight == 0) consider(std::max(*c.planned_end, c.dma_end));
    for (uint32_t index : c.pending_writes) {
      const std::optional<OpTiming> t = planner_.timing(*c.planner_op[c.plan[index].deps[0]]);
      if (t) consider(t->end);
    }
  }
  if (ctx_->per_tile_events) {
    if (const std::optional<SimTime> b = planner_.NextBoundaryAfter(now)) consider(*b);
  }
  if (!next || (wake_.at && *wake_.at == *next)) return;
  wake_.at = next;
  ++wake_.version;
  ctx_->engine->SetTimer(peers_.self, *next - now, wake_.version);
}

// ---- outputs ----

void PeScheduler::SendEngineWork(const Cmd& c, SimTime delay, std::string* record) {
  EngineWorkPair work = reporter_.WorkOf(c, planner_, record);
  if (work.gemm != nullptr) {
    ctx_->engine->Send(peers_.self, delay, peers_.gemm,
                       std::shared_ptr<const pb::EngineWork>(std::move(work.gemm)));
  }
  if (work.math != nullptr) {
    ctx_->engine->Send(peers_.self, delay, peers_.math,
                       std::shared_ptr<const pb::EngineWork>(std::move(work.math)));
  }
}

void PeScheduler::Reply(const Cmd& c, SimTime start, SimTime end, std::string* record) {
  const SimTime now = ctx_->engine->now();
  std::shared_ptr<pb::Completion> done = MessagePool<pb::Completion>::Make();
  done->set_cmd_id(c.cmd_id);
  done->set_unit(peers_.self);
  done->set_start_ps(start.value());
  done->set_end_ps(end.value());
  if (record != nullptr) done->set_scheduler_record(std::move(*record));
  ctx_->engine->Send(peers_.self, end > now ? end - now : SimTime(0), c.requester,
                     std::shared_ptr<const pb::Completion>(std::move(done)));
}

void PeScheduler::Account(const Cmd& c, SimTime start, SimTime end, std::string* record) {
  std::optional<pb::OpRecord> rec = reporter_.Account(c, start, end, ctx_->stats.At(peers_.self));
  if (!rec) return;
  if (record != nullptr) {
    *record = rec->SerializeAsString();
    return;
  }
  ctx_->op_log->AddOp(std::move(*rec));
}

void PeScheduler::Fail(UnitId requester, uint64_t cmd_id, const std::string& message) {
  auto err = std::make_shared<pb::CommandError>();
  err->set_cmd_id(cmd_id);
  err->set_message(message);
  ctx_->engine->Send(peers_.self, SimTime(0), requester,
                     std::shared_ptr<const pb::CommandError>(std::move(err)));
}

// ---- the actor ----

caf::behavior PeSchedulerBehavior(PeSchedulerActor* self, UnitContext* ctx, UnitId self_id,
                                  uint32_t pe) {
  self->state.scheduler = std::make_unique<PeScheduler>(ctx, self_id, pe);
  PeScheduler* s = self->state.scheduler.get();
  ctx->engine->SetTimerHandler(self_id, s);
  // The handlers are tried in order (unit_actor.h): the most frequent messages first (MATH
  // commands, then composites and their DMA batches in decode).
  return self->Handlers(
      [s](const Msg<pb::MathCmd>& cmd) -> NoReply {
        s->OnMath(cmd.body);
        return {};
      },
      [s](const Msg<pb::CompositeCmd>& cmd) -> NoReply {
        s->OnComposite(cmd.body);
        return {};
      },
      [s](const Msg<pb::DmaBatchDone>& done) -> NoReply {
        s->OnDmaBatchDone(*done);
        return {};
      },
      [s](const Msg<pb::SoftmaxPvCmd>& cmd) -> NoReply {
        s->OnSoftmaxPv(cmd.body);
        return {};
      },
      [s](const Msg<pb::LseMergeCmd>& cmd) -> NoReply {
        s->OnLseMerge(cmd.body);
        return {};
      },
      [s](const Msg<pb::GemmCmd>& cmd) -> NoReply {
        s->OnDot(cmd.body);
        return {};
      },
      [s](const Msg<pb::DmaCmd>& cmd) -> NoReply {
        s->OnDma(cmd.body);
        return {};
      },
      [s](const Msg<pb::Completion>& done) -> NoReply {
        s->OnDmaDone(*done);
        return {};
      },
      [s](const Msg<pb::DmaError>& error) -> NoReply {
        s->OnDmaError(*error);
        return {};
      });
}

void StartPeSchedulerActor(UnitContext& ctx, uint32_t pe) {
  const UnitId id =
      ctx.index.PeUnit(topology::UnitKind::kPeScheduler, ctx.index.PeOf(pe)).value();
  ctx.engine->Register(id, ctx.engine->system().spawn(PeSchedulerBehavior, &ctx, id, pe));
}

}  // namespace ahbm::sim
