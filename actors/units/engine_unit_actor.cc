#include "actors/units/engine_unit_actor.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "actors/command_check.h"
#include "actors/msg.h"
#include "base/check.h"
#include "base/errors.h"
#include "proto/commands.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::sim {

namespace {

caf::behavior EngineUnitBehavior(EngineUnitActor* self, UnitContext* ctx, topology::UnitKind kind,
                                 UnitId self_id, uint32_t pe) {
  self->state.unit = std::make_unique<EngineUnit>(ctx, kind, self_id, pe);
  EngineUnit* unit = self->state.unit.get();
  return self->Handlers([unit](const Msg<pb::EngineWork>& work) { unit->OnWork(*work); });
}

}  // namespace

EngineUnit::EngineUnit(UnitContext* ctx, topology::UnitKind kind, UnitId self, uint32_t pe)
    : ctx_(ctx), kind_(kind), self_(self), pe_(pe) {}

void EngineUnit::OnWork(const pb::EngineWork& work) {
  if (work.tile_ops() > 0) {
    pb::UnitStats& stats = ctx_->stats.At(self_);
    stats.set_ops(stats.ops() + work.tile_ops());
    stats.set_busy_ps(stats.busy_ps() + work.busy_ps());
    stats.set_work_ps(stats.work_ps() + work.work_ps());
    stats.set_flops(stats.flops() + work.flops());
    if (ctx_->op_log != nullptr) Record(work);
  } else {
    AHBM_CHECK(work.command_case() != pb::EngineWork::COMMAND_NOT_SET)
        << "EngineWork for cmd " << work.cmd_id() << " with neither tile ops nor a command";
  }
  if (work.command_case() != pb::EngineWork::COMMAND_NOT_SET) Compute(work);
}

void EngineUnit::Record(const pb::EngineWork& work) {
  if (!work.scheduler_record().empty()) {
    pb::OpRecord scheduler;
    AHBM_CHECK(scheduler.ParseFromString(work.scheduler_record()))
        << "EngineWork for cmd " << work.cmd_id() << ": bad scheduler record";
    ctx_->op_log->AddOp(std::move(scheduler));
  }
  const std::string name = ctx_->Name(self_);
  // A record of this engine for the work's command: `op`, its span and FLOPs.
  const auto record = [&](std::string op, uint64_t start_ps, uint64_t end_ps, uint64_t flops) {
    pb::OpRecord rec;
    rec.set_unit(self_);
    rec.set_unit_name(name);
    rec.set_op(std::move(op));
    rec.set_cmd_id(work.cmd_id());
    rec.set_issue_ps(work.issue_ps());
    rec.set_start_ps(start_ps);
    rec.set_end_ps(end_ps);
    rec.set_flops(flops);
    return rec;
  };
  pb::OpRecord rec = record(work.op(), work.start_ps(), work.end_ps(), work.flops());
  rec.set_label(work.label().empty() ? absl::StrCat(work.tile_ops(), " tiles") : work.label());
  ctx_->op_log->AddOp(std::move(rec));
  if (!ctx_->per_tile_detail) return;
  AHBM_CHECK(work.ops_size() == static_cast<int>(work.tile_ops()))
      << "EngineWork for cmd " << work.cmd_id() << ": " << work.ops_size() << " tile ops of "
      << work.tile_ops() << " with per-tile detail";
  for (const pb::EngineOp& op : work.ops()) {
    ctx_->op_log->AddOp(
        record(absl::StrCat(work.op(), ":", op.what()), op.start_ps(), op.end_ps(), op.flops()));
  }
}

void EngineUnit::Compute(const pb::EngineWork& work) {
  AHBM_CHECK(ctx_->data != nullptr)
      << "EngineWork for cmd " << work.cmd_id() << " carries its command in timing mode";
  AHBM_CHECK(DataEngineOf(work.command_case()) == kind_)
      << "cmd " << work.cmd_id() << " computed on a " << topology::UnitKindName(kind_) << " engine";
  absl::Status status;
  switch (work.command_case()) {
    case pb::EngineWork::kComposite:
      status = ctx_->data->Apply(work.composite());
      break;
    case pb::EngineWork::kDot:
      status = ctx_->data->Apply(work.dot());
      break;
    case pb::EngineWork::kMath:
      status = ctx_->data->Apply(work.math());
      break;
    case pb::EngineWork::kSoftmaxPv:
      status = ctx_->data->Apply(work.softmax_pv());
      break;
    case pb::EngineWork::kLseMerge:
      status = ctx_->data->Apply(work.lse_merge());
      break;
    case pb::EngineWork::COMMAND_NOT_SET:
      return;
  }
  if (!status.ok()) {
    // The command passed the scheduler's checks: the data plane refusing it is our bug.
    ctx_->AddError(InvariantError(absl::StrCat(PeName(ctx_->index, pe_), ": ", work.op(), " cmd ",
                                               work.cmd_id(), ": data: ", status.message())));
  }
}

void StartEngineUnitActor(UnitContext& ctx, topology::UnitKind kind, uint32_t pe) {
  AHBM_CHECK(kind == topology::UnitKind::kGemm || kind == topology::UnitKind::kMath)
      << "not an engine unit: " << topology::UnitKindName(kind);
  const UnitId id = ctx.index.PeUnit(kind, ctx.index.PeOf(pe)).value();
  ctx.engine->Register(id, ctx.engine->system().spawn(EngineUnitBehavior, &ctx, kind, id, pe));
}

}  // namespace ahbm::sim
