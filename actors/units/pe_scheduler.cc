#include "actors/units/pe_scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "actors/msg.h"
#include "actors/tensor_ref.h"
#include "actors/units/engine_unit_actor.h"
#include "base/check.h"
#include "google/protobuf/arena.h"

namespace ahbm::sim {
namespace {

// Admission's operand batches. One of at most kPooledBatchCmds commands comes from a pool: a
// returned batch keeps its commands, each cleared with its src and dst kept (cleared, their
// shape and strides keeping their capacity), so that the next admission's pieces allocate
// nothing; BatchSlot overwrites them in order and FlushBatch drops the ones left over. A larger
// batch (rare: a whole-context fan-out) is built on an arena of its own and freed at once.
constexpr int kPooledBatchCmds = 64;
struct ResetBatch {
  void operator()(pb::DmaBatch& batch) const {
    batch.set_batch_id(0);
    for (pb::DmaCmd& cmd : *batch.mutable_cmds()) {
      ClearKeeping(cmd, Kept<pb::DmaCmd, pb::TensorRef, &pb::DmaCmd::release_src,
                             &pb::DmaCmd::set_allocated_src>(),
                   Kept<pb::DmaCmd, pb::TensorRef, &pb::DmaCmd::release_dst,
                        &pb::DmaCmd::set_allocated_dst>());
    }
  }
};
struct KeepSmallBatch {
  bool operator()(const pb::DmaBatch& batch) const {
    return batch.cmds_size() <= kPooledBatchCmds;
  }
};
using BatchPool =
    MessagePool<pb::DmaBatch, ResetBatch, PoolAllocator<pb::DmaBatch>, KeepSmallBatch>;

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

std::string TileWhat(const TileOp& op) {
  switch (op.kind) {
    case TileOpKind::kGemm:
      return absl::StrCat("Gemm(", op.mi, ",", op.ki, ",", op.ni, ")");
    case TileOpKind::kEpilogue:
      return absl::StrCat("Epilogue(", op.mi, ",", op.ni, ")");
    default:
      return TileOpKindName(op.kind);
  }
}

}  // namespace

PeScheduler::PeScheduler(UnitContext* ctx, UnitId self, uint32_t pe)
    : ctx_(ctx),
      engine_(ctx->engine),
      self_(self),
      pe_(pe),
      config_(ctx->chip.sip().cube().pe()),
      checker_(ctx->chip, pe),
      clock_(*ClockDomain::FromMHz(ctx->chip.sip().cube().pe().clock_mhz())),
      planner_(clock_) {
  const topology::PeId id = ctx->index.PeOf(pe);
  dma_unit_ = ctx->index.PeUnit(topology::UnitKind::kDma, id).value();
  gemm_unit_ = ctx->index.PeUnit(topology::UnitKind::kGemm, id).value();
  math_unit_ = ctx->index.PeUnit(topology::UnitKind::kMath, id).value();
  cpu_unit_ = ctx->index.PeUnit(topology::UnitKind::kPeCpu, id).value();
}

// ---- intake ----

std::string PeScheduler::OpName(const Cmd& c) {
  switch (c.kind) {
    case Kind::kComposite:
      return "composite_gemm";
    case Kind::kSoftmaxPv:
      return "softmax_pv";
    case Kind::kDot:
      return "dot";
    case Kind::kMath:
      return absl::StrCat("math_", pb::MathOp_Name(c.math().op()));
    case Kind::kDma:
      return c.dma().dst().space() == pb::HBM   ? "dma_store"
             : c.dma().src().space() == pb::HBM ? "dma_load"
                                               : "dma_copy";
    case Kind::kLseMerge:
      return "lse_merge";
  }
  return "?";
}

pb::EngineWork::CommandCase PeScheduler::CommandCaseOf(Kind kind) {
  switch (kind) {
    case Kind::kComposite:
      return pb::EngineWork::kComposite;
    case Kind::kSoftmaxPv:
      return pb::EngineWork::kSoftmaxPv;
    case Kind::kDot:
      return pb::EngineWork::kDot;
    case Kind::kMath:
      return pb::EngineWork::kMath;
    case Kind::kLseMerge:
      return pb::EngineWork::kLseMerge;
    case Kind::kDma:
      break;
  }
  return pb::EngineWork::COMMAND_NOT_SET;
}

void PeScheduler::Cmd::Reset(std::vector<std::vector<TileOp>>& free_plans) {
  // Field by field (a fresh Cmd moved in costs more): the buffers keep their capacity.
  if (plan.capacity() > 0 && free_plans.size() < kMaxFreePlans) {
    plan.clear();
    free_plans.push_back(std::move(plan));
  }
  plan = {};  // frees a plan buffer the free list had no room for
  kind = Kind::kComposite;
  cmd_id = 0;
  seq = 0;
  requester = 0;
  issue = SimTime();
  depends_on.clear();
  msg.reset();
  admitted = false;
  planner_op.clear();
  // piece_waiters keeps its inner buffers: AddPlannerOps clears each one.
  ops.clear();
  op_pos.clear();
  ops_final = 0;
  ops_start = SimTime::Max();
  ops_end = SimTime();
  planned_end.reset();
  planned_version = UINT64_MAX;
  pending_writes.clear();
  dmas_in_flight = 0;
  dma_start = SimTime::Max();
  dma_end = SimTime();
  dma_waiters.clear();
  hbm_read_bytes = 0;
  hbm_write_bytes = 0;
}

PeScheduler::Cmd& PeScheduler::NewCmd(Kind kind, uint64_t cmd_id) {
  // ~16 commands per PE are live at once (opt2): keep them in jemalloc's 320-byte class.
  static_assert(sizeof(Cmd) <= 320, "PeScheduler::Cmd grew past 320 bytes");
  std::unique_ptr<Cmd> c;
  if (free_cmds_.empty()) {
    c = std::make_unique<Cmd>();
  } else {
    c = std::move(free_cmds_.back());
    free_cmds_.pop_back();
  }
  c->kind = kind;
  Cmd& live = *c;
  cmds_[cmd_id] = std::move(c);
  return live;
}

void PeScheduler::ReleaseCmd(Cmd& c) {
  auto it = cmds_.find(c.cmd_id);
  AHBM_CHECK(it != cmds_.end() && it->second.get() == &c) << "cmd " << c.cmd_id << " is not live";
  std::unique_ptr<Cmd> owned = std::move(it->second);
  cmds_.erase(it);
  owned->Reset(free_plan_ops_);
  if (free_cmds_.size() < kMaxFreeCmds) free_cmds_.push_back(std::move(owned));
}

PeScheduler::Cmd* PeScheduler::Accept(Kind kind, uint64_t cmd_id,
                                      absl::FunctionRef<std::string()> op_name,
                                      absl::Status check, std::span<const uint64_t> depends_on) {
  const UnitId requester = engine_->current_src();
  if (!check.ok()) {
    Fail(requester, cmd_id, std::string(check.message()));
    return nullptr;
  }
  if (cmds_.contains(cmd_id) || done_.contains(cmd_id)) {
    Fail(requester, cmd_id,
         absl::StrCat(checker_.pe_name(), ": ", op_name(), " cmd ", cmd_id,
                      ": cmd_id already used on this PE"));
    return nullptr;
  }
  for (uint64_t dep : depends_on) {
    if (!cmds_.contains(dep) && !done_.contains(dep)) {
      Fail(requester, cmd_id,
           absl::StrCat(checker_.pe_name(), ": ", op_name(), " cmd ", cmd_id,
                        ": depends_on: cmd ", dep, " was never issued on this PE"));
      return nullptr;
    }
  }
  Cmd& c = NewCmd(kind, cmd_id);
  c.cmd_id = cmd_id;
  c.seq = next_seq_++;
  c.requester = requester;
  c.issue = engine_->now();
  c.depends_on.assign(depends_on.begin(), depends_on.end());
  live_.push_back(&c);  // seq ascends: live_ stays in issue order
  return &c;
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
  const std::pair<uint32_t, uint64_t> acc(cmd->acc_o().pe(), cmd->acc_o().addr());
  // The serial chain: the previous call on this accumulator, if it is still live.
  if (auto it = last_on_acc_.find(acc); it != last_on_acc_.end() && cmds_.contains(it->second)) {
    if (std::find(c->depends_on.begin(), c->depends_on.end(), it->second) == c->depends_on.end()) {
      c->depends_on.push_back(it->second);
    }
  }
  last_on_acc_[acc] = c->cmd_id;
  c->msg = std::move(cmd);
  AdmitOrWait(*c);
  Step();
}

// Admitted on arrival when nothing older waits and a slot is free — not at the next Step, which
// waits for this instant's DMA replies: a DMA the CPU issues after this command at the same
// instant would otherwise reach the DMA unit (and the channels, FIFO) before its operand loads.
void PeScheduler::AdmitOrWait(Cmd& c) {
  if (waiting_.empty() && inflight_ < config_.scheduler().max_inflight_composites()) {
    ++inflight_;
    Admit(c);
  } else {
    waiting_.push_back(c.cmd_id);
  }
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
  const pb::Scheduler& sched = config_.scheduler();
  // The command's own operands (its loads are pieces of a and b).
  const pb::TensorRef* a = nullptr;
  const pb::TensorRef* b = nullptr;
  if (c.kind != Kind::kLseMerge && c.plan.capacity() == 0 && !free_plan_ops_.empty()) {
    c.plan = std::move(free_plan_ops_.back());  // a finished command's buffer
    free_plan_ops_.pop_back();
  }
  TilePlan& plan = plan_;  // planned here; only its ops are kept, in c.plan
  plan.ops = std::move(c.plan);
  switch (c.kind) {
    case Kind::kComposite: {
      a = &c.composite().a();
      b = &c.composite().b();
      GemmComposite g = CompositeOf(*a, *b, c.composite().out());
      for (const pb::EpilogueStage& s : c.composite().epilogue()) g.epilogue.push_back(s.op());
      PlanGemm(g, sched, config_.gemm(), config_.math(), plan);
      break;
    }
    case Kind::kDot:
      a = &c.dot().a();
      b = &c.dot().b();
      PlanGemm(CompositeOf(*a, *b, c.dot().out()), sched, config_.gemm(), config_.math(), plan);
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
      b = &s.v();
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

  // Dependencies on earlier commands.
  std::vector<OpId>& dep_ops = dep_ops_;
  dep_ops.clear();
  int unknown = 0;
  SimTime known;
  for (uint64_t dep : c.depends_on) {
    auto it = cmds_.find(dep);
    if (it == cmds_.end()) continue;  // completed: imposes nothing
    const Cmd& d = *it->second;
    AHBM_CHECK(d.admitted) << "cmd " << c.cmd_id << " admitted before its dependency " << dep;
    dep_ops.insert(dep_ops.end(), d.ops.begin(), d.ops.end());
    if (DmaSettled(d)) {
      known = std::max(known, d.dma_end);
    } else {
      ++unknown;
    }
  }
  std::sort(dep_ops.begin(), dep_ops.end());
  dep_ops.erase(std::unique(dep_ops.begin(), dep_ops.end()), dep_ops.end());
  AddPlannerOps(c, dep_ops, unknown, known);
  if (unknown > 0) {
    for (uint64_t dep : c.depends_on) {
      auto it = cmds_.find(dep);
      if (it == cmds_.end() || DmaSettled(*it->second)) continue;
      it->second->dma_waiters.insert(it->second->dma_waiters.end(), c.ops.begin(), c.ops.end());
    }
  }

  // Operand loads, all at once, in plan order, as one DmaBatch.
  batching_ = true;
  batch_cmds_ = static_cast<int>(std::count_if(c.plan.begin(), c.plan.end(), [](const TileOp& op) {
    return op.home == TensorHome::kHbm &&
           (op.kind == TileOpKind::kLoadA || op.kind == TileOpKind::kLoadB);
  }));
  for (const TileOp& op : c.plan) {
    if (op.home != TensorHome::kHbm) continue;
    if (op.kind == TileOpKind::kLoadB) {
      const uint64_t k0 = uint64_t{op.ki} * sched.tile_k();
      const uint64_t n0 = uint64_t{op.ni} * sched.tile_n();
      pb::DmaCmd& dma = BatchSlot(c, op.index);
      Piece(*b, k0, op.tile.k, n0, op.tile.n, *dma.mutable_src());
      Staging(*b, op.tile.k, op.tile.n, *dma.mutable_dst());
      c.hbm_read_bytes += op.bytes.value();
    } else if (op.kind == TileOpKind::kLoadA) {
      const uint64_t m0 = uint64_t{op.mi} * sched.tile_m();
      const uint64_t k0 = uint64_t{op.ki} * sched.tile_k();
      pb::DmaCmd& dma = BatchSlot(c, op.index);
      Piece(*a, m0, op.tile.m, k0, op.tile.k, *dma.mutable_src());
      Staging(*a, op.tile.m, op.tile.k, *dma.mutable_dst());
      c.hbm_read_bytes += op.bytes.value();
    } else if (op.kind == TileOpKind::kWriteOut) {
      c.pending_writes.push_back(op.index);
    }
  }
  FlushBatch();
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
      const TileOp& d = c.plan[dep];
      if (c.planner_op[dep]) {
        spec.deps.push_back(*c.planner_op[dep]);
      } else if ((d.kind == TileOpKind::kLoadA || d.kind == TileOpKind::kLoadB) &&
                 d.home == TensorHome::kHbm) {
        hbm_pieces.push_back(dep);
        ++external;
      }
    }
    const SimTime now = engine_->now();
    // Settled dependencies whose DMA parts end in the future make one input known at once.
    const bool known_only = external == 0 && external_ready > now;
    spec.waits_external = external > 0 || known_only;
    const OpId id = planner_.Add(std::move(spec));
    c.planner_op[op.index] = id;
    c.ops.push_back(id);
    c.op_pos.push_back(static_cast<uint32_t>(&op - c.plan.data()));
    for (uint32_t piece : hbm_pieces) c.piece_waiters[piece].push_back(id);
    if (external > 0) {
      AddExternal(id, ExternalInput{external, std::max(now, external_ready)});
    } else if (known_only) {
      planner_.SetExternalReady(id, external_ready);
    }
  }
}

uint64_t PeScheduler::NewDma(Cmd& c, uint32_t tile_index, bool whole_command) {
  const uint64_t id = next_dma_id_++;
  if (dma_pieces_.empty()) dma_pieces_first_ = id;
  while (dma_pieces_first_ + dma_pieces_.size() < id) dma_pieces_.emplace_back();  // batch ids
  dma_pieces_.push_back(DmaPiece{c.cmd_id, tile_index, whole_command});
  ++c.dmas_in_flight;
  return id;
}

pb::DmaCmd& PeScheduler::BatchSlot(Cmd& c, uint32_t tile_index) {
  AHBM_CHECK(batching_) << "operand load outside an admission";
  if (batch_ == nullptr) {
    if (batch_cmds_ <= kPooledBatchCmds) {
      batch_ = BatchPool::Make();
    } else {
      // The batch and its pieces on one arena, owned by the message's shared_ptr (aliasing).
      auto arena = std::make_shared<google::protobuf::Arena>();
      pb::DmaBatch* batch = google::protobuf::Arena::CreateMessage<pb::DmaBatch>(arena.get());
      batch_ = std::shared_ptr<pb::DmaBatch>(std::move(arena), batch);
    }
    batch_used_ = 0;
  }
  // A reused batch's commands are cleared and kept (BatchPool): overwrite them in order.
  pb::DmaCmd& dma = batch_used_ < batch_->cmds_size() ? *batch_->mutable_cmds(batch_used_)
                                                      : *batch_->add_cmds();
  ++batch_used_;
  dma.set_cmd_id(NewDma(c, tile_index, /*whole_command=*/false));
  dma.set_parent_cmd_id(c.cmd_id);
  return dma;
}

void PeScheduler::SendDma(Cmd& c, pb::DmaCmd dma, uint32_t tile_index, bool whole_command) {
  dma.set_cmd_id(NewDma(c, tile_index, whole_command));
  dma.set_parent_cmd_id(c.cmd_id);
  ++dma_replies_pending_;
  engine_->Send(self_, SimTime(0), dma_unit_,
                std::shared_ptr<const pb::DmaCmd>(std::make_shared<pb::DmaCmd>(std::move(dma))));
}

void PeScheduler::FlushBatch() {
  batching_ = false;
  std::shared_ptr<pb::DmaBatch> batch = std::move(batch_);  // leaves batch_ null
  if (batch == nullptr) return;
  if (const int unused = batch->cmds_size() - batch_used_; unused > 0) {
    batch->mutable_cmds()->DeleteSubrange(batch_used_, unused);
  }
  batch->set_batch_id(next_dma_id_++);
  ++dma_replies_pending_;
  engine_->Send(self_, SimTime(0), dma_unit_, std::shared_ptr<const pb::DmaBatch>(std::move(batch)));
}

void PeScheduler::Piece(const pb::TensorRef& ref, uint64_t r0, uint64_t rows, uint64_t c0,
                        uint64_t cols, pb::TensorRef& piece) const {
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
  t.set_pe(pe_);
  t.set_dtype(like.dtype());
  t.add_shape(rows);
  t.add_shape(cols);
}

// ---- external inputs ----

void PeScheduler::AddExternal(OpId op, ExternalInput input) {
  if (external_.empty()) external_first_ = op;
  AHBM_CHECK(op >= external_first_ + external_.size()) << "external input of op " << op
                                                       << " added out of order";
  while (external_first_ + external_.size() < op) external_.emplace_back();
  external_.push_back(input);
}

void PeScheduler::ResolveExternal(OpId op, SimTime ready) {
  const bool known = op >= external_first_ && op - external_first_ < external_.size() &&
                     external_[op - external_first_].has_value();
  AHBM_CHECK(known) << "op " << op << " has no pending external input";
  std::optional<ExternalInput>& slot = external_[op - external_first_];
  slot->ready = std::max(slot->ready, ready);
  if (--slot->unknown > 0) return;
  planner_.SetExternalReady(op, std::max(slot->ready, engine_->now()));
  slot.reset();
  while (!external_.empty() && !external_.front().has_value()) {
    external_.pop_front();
    ++external_first_;
  }
}

void PeScheduler::NoteDmaEnd(Cmd& c, SimTime end) {
  c.dma_end = std::max(c.dma_end, end);
  if (!DmaSettled(c)) return;
  std::vector<OpId> waiters = std::move(c.dma_waiters);
  c.dma_waiters.clear();
  for (OpId op : waiters) ResolveExternal(op, c.dma_end);
}

void PeScheduler::OnDmaDone(const pb::Completion& done) {
  Enter();
  --dma_replies_pending_;
  PieceDone(done);
  if (dma_replies_pending_ == 0) Step();
}

void PeScheduler::OnDmaBatchDone(const pb::DmaBatchDone& done) {
  Enter();
  --dma_replies_pending_;
  for (const pb::Completion& piece : done.done()) PieceDone(piece);
  if (dma_replies_pending_ == 0) Step();
}

PeScheduler::DmaPiece PeScheduler::TakePiece(uint64_t dma_id) {
  const bool known = dma_id >= dma_pieces_first_ && dma_id - dma_pieces_first_ < dma_pieces_.size() &&
                     dma_pieces_[dma_id - dma_pieces_first_].has_value();
  AHBM_CHECK(known) << "scheduler of pe " << pe_ << ": reply for unknown DMA " << dma_id;
  std::optional<DmaPiece>& slot = dma_pieces_[dma_id - dma_pieces_first_];
  const DmaPiece piece = *slot;
  slot.reset();
  while (!dma_pieces_.empty() && !dma_pieces_.front().has_value()) {
    dma_pieces_.pop_front();
    ++dma_pieces_first_;
  }
  return piece;
}

void PeScheduler::PieceDone(const pb::Completion& done) {
  const DmaPiece piece = TakePiece(done.cmd_id());
  Cmd& c = *cmds_.at(piece.cmd_id);
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
  const DmaPiece piece = TakePiece(error.cmd_id());
  --dma_replies_pending_;
  // Checked commands plan cleanly; only a CPU load/store can still be refused here.
  AHBM_CHECK(piece.whole_command) << "DMA piece of checked cmd " << piece.cmd_id
                                  << " refused: " << error.message();
  Cmd& c = *cmds_.at(piece.cmd_id);
  Fail(c.requester, c.cmd_id, error.message());
  std::erase(live_, &c);
  ReleaseCmd(c);
  if (dma_replies_pending_ == 0) Step();
}

// ---- stepping ----

void PeScheduler::OnTimer(uint64_t version) {
  if (version != wake_version_) return;  // stale
  Enter();
  wake_at_.reset();
  Step();
}

void PeScheduler::Step() {
  if (dma_replies_pending_ > 0) return;  // the last reply of this instant steps
  const SimTime now = engine_->now();
  bool again = true;
  while (again) {
    again = false;
    planner_.Replan(now);
    // Completions and write-outs, in issue order (cmd_ids ascend with issue on a PE CPU, but
    // order by seq to be independent of that).
    // live_ is in seq order already.
    bool any_completed = false;
    for (Cmd*& c : live_) {
      if (!c->admitted) continue;
      IssueWriteOuts(*c);
      if (TryComplete(*c)) {
        ReleaseCmd(*c);
        c = nullptr;
        any_completed = true;
      }
    }
    if (any_completed) std::erase(live_, nullptr);
    // Admission in issue order.
    while (!waiting_.empty() && inflight_ < config_.scheduler().max_inflight_composites()) {
      Cmd& c = *cmds_.at(waiting_.front());
      waiting_.pop_front();
      ++inflight_;
      Admit(c);
      again = true;
    }
    if (dma_replies_pending_ > 0) return;  // admission sent DMAs: their last reply steps
  }
  if (live_.size() == 1 && ReplyAhead(*live_.front())) return;
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
      !waiting_.empty() || dma_replies_pending_ > 0 || !ctx_->reply_ahead ||
      ctx_->per_tile_events || ctx_->data != nullptr || c.requester != cpu_unit_) {
    return false;
  }
  if (ctx_->op_log != nullptr && c.op_pos.empty()) return false;  // no EngineWork to carry it
  SimTime ops_start = c.ops_start;
  SimTime ops_end = c.ops_end;
  for (size_t i = c.ops_final; i < c.ops.size(); ++i) {
    const std::optional<OpTiming> t = planner_.timing(c.ops[i]);
    if (!t) return false;
    ops_start = std::min(ops_start, t->start);
    ops_end = std::max(ops_end, t->end);
  }
  const auto [start, end] = Span(c, ops_start, ops_end);
  const SimTime now = engine_->now();
  if (end <= now) return false;
  if (pe_ >= ctx_->cpus.size() || ctx_->cpus[pe_] == nullptr ||
      !ctx_->cpus[pe_]->QuietUntil(c.cmd_id, commands_received_)) {
    return false;
  }
  std::string record;
  std::string* carried = ctx_->op_log != nullptr ? &record : nullptr;
  Account(c, start, end, carried);  // the record first: it goes into the first EngineWork
  ReportEngineWork(c, end - now, carried);
  Reply(c, start, end);
  replied_ = &c;
  replied_end_ = end;
  // A wake-up posted before is stale now (the old step at the end would have found nothing).
  ++wake_version_;
  wake_at_.reset();
  return true;
}

void PeScheduler::RetireReplied() {
  Cmd& c = *replied_;
  replied_ = nullptr;
  const SimTime now = engine_->now();
  AHBM_CHECK(now >= replied_end_) << "scheduler of pe " << pe_ << ": an event at " << now
                                  << " before the end " << replied_end_ << " of cmd " << c.cmd_id
                                  << ", answered ahead";
  AHBM_CHECK(live_.size() == 1 && live_.front() == &c);
  // What the step at the end did after the replies (TryComplete's bookkeeping).
  planner_.Replan(now);
  if (c.kind == Kind::kComposite || c.kind == Kind::kSoftmaxPv) --inflight_;
  done_.insert(c.cmd_id);
  for (OpId op : c.ops) planner_.Release(op);
  live_.clear();
  ReleaseCmd(c);
}

void PeScheduler::IssueWriteOuts(Cmd& c) {
  if (c.pending_writes.empty()) return;
  const SimTime now = engine_->now();
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

// A command's start and end: the extremes of its ops' (given) and its DMAs' times; its issue
// when it has neither (a command with nothing to do).
std::pair<SimTime, SimTime> PeScheduler::Span(const Cmd& c, SimTime ops_start, SimTime ops_end) {
  SimTime start = std::min(c.dma_start, ops_start);
  if (start == SimTime::Max()) start = c.issue;
  return {start, std::max(c.dma_end, ops_end)};
}

bool PeScheduler::TryComplete(Cmd& c) {
  const SimTime now = engine_->now();
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
  SendDmaData(c);
  ReportEngineWork(c);
  Reply(c, start, end);
  Account(c, start, end);
  if (c.kind == Kind::kComposite || c.kind == Kind::kSoftmaxPv) --inflight_;
  done_.insert(c.cmd_id);
  for (OpId op : c.ops) planner_.Release(op);
  return true;
}

void PeScheduler::SendDmaData(const Cmd& c) {
  if (ctx_->data == nullptr || c.kind != Kind::kDma) return;
  auto data = std::make_shared<pb::DmaData>();
  data->set_op(OpName(c));
  *data->mutable_cmd() = c.dma();
  engine_->Send(self_, SimTime(0), dma_unit_, std::shared_ptr<const pb::DmaData>(std::move(data)));
}

void PeScheduler::PostWake() {
  const SimTime now = engine_->now();
  std::optional<SimTime> next;
  const auto consider = [&](SimTime t) {
    if (t > now) next = std::min(next.value_or(t), t);
  };
  for (Cmd* live : live_) {
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
  if (!next || (wake_at_ && *wake_at_ == *next)) return;
  wake_at_ = next;
  ++wake_version_;
  engine_->SetTimer(self_, *next - now, wake_version_);
}

// ---- outputs ----

void PeScheduler::ReportEngineWork(const Cmd& c, SimTime delay, std::string* record) {
  // By engine: [0] GEMM, [1] MATH. A message is made for an engine that ran ops of `c` or
  // computes its values (data mode).
  struct Sum {
    uint32_t ops = 0;
    uint64_t start = UINT64_MAX, end = 0, busy = 0, work = 0, flops = 0;
  };
  Sum sum[2];
  std::shared_ptr<pb::EngineWork> work[2];
  const auto message = [&work](int e) -> pb::EngineWork& {
    if (work[e] == nullptr) work[e] = MessagePool<pb::EngineWork>::Make();
    return *work[e];
  };
  const bool detail = ctx_->op_log != nullptr && ctx_->per_tile_detail;
  const bool data = ctx_->data != nullptr && c.kind != Kind::kDma;
  // Names cost a string: only for op records and data-plane errors.
  const std::string op_name = ctx_->op_log != nullptr || data ? OpName(c) : std::string();
  // The planner ops in plan order (op_pos ascends), not a walk over every tile op.
  for (uint32_t pos : c.op_pos) {
    const TileOp& op = c.plan[pos];
    const std::optional<OpTiming> t = planner_.timing(*c.planner_op[op.index]);
    AHBM_CHECK(t.has_value()) << "completed op without timing";
    const int e = op.kind == TileOpKind::kGemm ? 0 : 1;
    Sum& s = sum[e];
    const uint64_t work_ps = clock_.ToTime(op.cycles).value();
    ++s.ops;
    s.start = std::min(s.start, t->start.value());
    s.end = std::max(s.end, t->end.value());
    s.busy += (t->end - t->start).value();
    s.work += work_ps;
    s.flops += op.flops;
    if (!detail) continue;
    pb::EngineOp* d = message(e).add_ops();
    d->set_tile_index(op.index);
    d->set_what(c.kind == Kind::kMath ? op_name : TileWhat(op));
    d->set_start_ps(t->start.value());
    d->set_end_ps(t->end.value());
    d->set_flops(op.flops);
    d->set_work_ps(work_ps);
    uint64_t elements = 0;
    for (const MathOpShape& m : op.math_stages) elements += m.elements;
    d->set_elements(elements);
  }
  if (data) {
    const pb::EngineWork::CommandCase command = CommandCaseOf(c.kind);
    pb::EngineWork& w = message(DataEngineOf(command) == topology::UnitKind::kGemm ? 0 : 1);
    switch (command) {
      case pb::EngineWork::kComposite:
        *w.mutable_composite() = c.composite();
        break;
      case pb::EngineWork::kDot:
        *w.mutable_dot() = c.dot();
        break;
      case pb::EngineWork::kMath:
        *w.mutable_math() = c.math();
        break;
      case pb::EngineWork::kSoftmaxPv:
        *w.mutable_softmax_pv() = c.softmax_pv();
        break;
      case pb::EngineWork::kLseMerge:
        *w.mutable_lse_merge() = c.lse_merge();
        break;
      case pb::EngineWork::COMMAND_NOT_SET:
        AHBM_CHECK(false) << "no engine computes a " << op_name;
    }
  }
  for (int e : {0, 1}) {
    if (sum[e].ops == 0 && work[e] == nullptr) continue;
    pb::EngineWork& w = message(e);
    w.set_cmd_id(c.cmd_id);
    if (!op_name.empty()) w.set_op(op_name);
    w.set_issue_ps(c.issue.value());
    w.set_tile_ops(sum[e].ops);
    if (sum[e].ops > 0) {
      w.set_start_ps(sum[e].start);
      w.set_end_ps(sum[e].end);
    }
    w.set_busy_ps(sum[e].busy);
    w.set_work_ps(sum[e].work);
    w.set_flops(sum[e].flops);
  }
  // The scheduler's record rides on the first work with ops (the one whose unit writes records).
  if (record != nullptr) message(sum[0].ops > 0 ? 0 : 1).set_scheduler_record(std::move(*record));
  if (work[0] != nullptr) {
    engine_->Send(self_, delay, gemm_unit_,
                  std::shared_ptr<const pb::EngineWork>(std::move(work[0])));
  }
  if (work[1] != nullptr) {
    engine_->Send(self_, delay, math_unit_,
                  std::shared_ptr<const pb::EngineWork>(std::move(work[1])));
  }
}

void PeScheduler::Reply(const Cmd& c, SimTime start, SimTime end) {
  const SimTime now = engine_->now();
  std::shared_ptr<pb::Completion> done = MessagePool<pb::Completion>::Make();
  done->set_cmd_id(c.cmd_id);
  done->set_unit(self_);
  done->set_start_ps(start.value());
  done->set_end_ps(end.value());
  engine_->Send(self_, end > now ? end - now : SimTime(0), c.requester,
                std::shared_ptr<const pb::Completion>(std::move(done)));
}

void PeScheduler::Account(const Cmd& c, SimTime start, SimTime end, std::string* record) {
  uint64_t flops = 0;
  for (const TileOp& op : c.plan) flops += op.flops;
  pb::UnitStats& stats = ctx_->stats.At(self_);
  stats.set_ops(stats.ops() + 1);
  stats.set_bytes_read(stats.bytes_read() + c.hbm_read_bytes);
  stats.set_bytes_written(stats.bytes_written() + c.hbm_write_bytes);
  stats.set_flops(stats.flops() + flops);
  if (ctx_->op_log == nullptr) return;
  pb::OpRecord rec;
  rec.set_unit(self_);
  rec.set_unit_name(ctx_->Name(self_));
  rec.set_op(OpName(c));
  rec.set_cmd_id(c.cmd_id);
  rec.set_issue_ps(c.issue.value());
  rec.set_start_ps(start.value());
  rec.set_end_ps(end.value());
  rec.set_bytes_read(c.hbm_read_bytes);
  rec.set_bytes_written(c.hbm_write_bytes);
  rec.set_flops(flops);
  for (uint64_t dep : c.depends_on) rec.add_depends_on(dep);
  if (record != nullptr) {
    *record = rec.SerializeAsString();
    return;
  }
  ctx_->op_log->AddOp(std::move(rec));
}

void PeScheduler::Fail(UnitId requester, uint64_t cmd_id, const std::string& message) {
  auto err = std::make_shared<pb::CommandError>();
  err->set_cmd_id(cmd_id);
  err->set_message(message);
  engine_->Send(self_, SimTime(0), requester, std::shared_ptr<const pb::CommandError>(std::move(err)));
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
