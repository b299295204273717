#include "actors/units/engine_unit_actor.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "actors/msg.h"
#include "base/check.h"
#include "proto/commands.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::sim {

void RecordEngineStats(UnitContext& ctx, UnitId unit, const EngineStats& work) {
  pb::UnitStats& stats = ctx.stats.At(unit);
  stats.set_work_ps(stats.work_ps() + work.work_ps);
  stats.set_ops(stats.ops() + work.ops);
  stats.set_busy_ps(stats.busy_ps() + work.busy_ps);
  stats.set_flops(stats.flops() + work.flops);
}

caf::behavior EngineUnitBehavior(caf::event_based_actor*, UnitContext* ctx, UnitId self_id) {
  return {
      [ctx, self_id](const Msg<pb::EngineWork>& work) {
        AHBM_CHECK(work->ops_size() > 0) << "empty EngineWork for cmd " << work->cmd_id();
        EngineStats sum;
        uint64_t start = UINT64_MAX, end = 0;
        for (const pb::EngineOp& op : work->ops()) {
          start = std::min(start, op.start_ps());
          end = std::max(end, op.end_ps());
          ++sum.ops;
          sum.flops += op.flops();
          sum.busy_ps += op.end_ps() - op.start_ps();
          sum.work_ps += op.work_ps();
        }
        RecordEngineStats(*ctx, self_id, sum);
        AHBM_CHECK(ctx->op_log != nullptr) << "EngineWork for cmd " << work->cmd_id()
                                           << " without an op log";
        if (!work->scheduler_record().empty()) {
          pb::OpRecord scheduler;
          AHBM_CHECK(scheduler.ParseFromString(work->scheduler_record()))
              << "EngineWork for cmd " << work->cmd_id() << ": bad scheduler record";
          ctx->op_log->AddOp(std::move(scheduler));
        }
        const std::string name = ctx->Name(self_id);
        pb::OpRecord rec;
        rec.set_unit(self_id);
        rec.set_unit_name(name);
        rec.set_op(work->op());
        rec.set_cmd_id(work->cmd_id());
        rec.set_issue_ps(work->issue_ps());
        rec.set_start_ps(start);
        rec.set_end_ps(end);
        rec.set_flops(sum.flops);
        rec.set_label(work->label().empty() ? absl::StrCat(work->ops_size(), " tiles")
                                            : work->label());
        ctx->op_log->AddOp(rec);
        if (!ctx->per_tile_detail) return;
        for (const pb::EngineOp& op : work->ops()) {
          pb::OpRecord tile;
          tile.set_unit(self_id);
          tile.set_unit_name(name);
          tile.set_op(absl::StrCat(work->op(), ":", op.what()));
          tile.set_cmd_id(work->cmd_id());
          tile.set_issue_ps(work->issue_ps());
          tile.set_start_ps(op.start_ps());
          tile.set_end_ps(op.end_ps());
          tile.set_flops(op.flops());
          ctx->op_log->AddOp(std::move(tile));
        }
      },
  };
}

void StartEngineUnitActor(UnitContext& ctx, topology::UnitKind kind, uint32_t pe) {
  AHBM_CHECK(kind == topology::UnitKind::kGemm || kind == topology::UnitKind::kMath)
      << "not an engine unit: " << topology::UnitKindName(kind);
  const UnitId id = ctx.index.PeUnit(kind, ctx.index.PeOf(pe)).value();
  ctx.engine->Register(id, ctx.engine->system().spawn(EngineUnitBehavior, &ctx, id));
}

}  // namespace ahbm::sim
