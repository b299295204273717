#include "actors/units/pe_engine_reporter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/message_pool.h"
#include "actors/units/engine_unit_actor.h"
#include "base/check.h"

namespace ahbm::sim {
namespace {

// The EngineWork.command field that carries a command of `kind` (none for DMA commands).
pb::EngineWork::CommandCase CommandCaseOf(CommandKind kind) {
  switch (kind) {
    case CommandKind::kComposite:
      return pb::EngineWork::kComposite;
    case CommandKind::kSoftmaxPv:
      return pb::EngineWork::kSoftmaxPv;
    case CommandKind::kDot:
      return pb::EngineWork::kDot;
    case CommandKind::kMath:
      return pb::EngineWork::kMath;
    case CommandKind::kLseMerge:
      return pb::EngineWork::kLseMerge;
    case CommandKind::kDma:
      break;
  }
  return pb::EngineWork::COMMAND_NOT_SET;
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

// One engine's share of a command's planner ops.
struct EngineSum {
  uint32_t ops = 0;
  uint64_t start = UINT64_MAX, end = 0, busy = 0, work = 0, flops = 0;
};

// The command itself into the message of the engine that computes its values (data mode).
void CarryCommand(const PeCommand& c, pb::EngineWork::CommandCase command, pb::EngineWork& w) {
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
      AHBM_CHECK(false) << "no engine computes a " << OpName(c);
  }
}

}  // namespace

EngineWorkPair EngineReporter::WorkOf(const PeCommand& c, const PePlanner& planner,
                                      std::string* record) const {
  // By engine: [0] GEMM, [1] MATH. A message is made for an engine that ran ops of `c` or
  // computes its values (data mode).
  EngineSum sum[2];
  std::shared_ptr<pb::EngineWork> work[2];
  const auto message = [&work](int e) -> pb::EngineWork& {
    if (work[e] == nullptr) work[e] = MessagePool<pb::EngineWork>::Make();
    return *work[e];
  };
  const bool detail = options_.op_log && options_.per_tile_detail;
  const bool data = options_.data && c.kind != CommandKind::kDma;
  // Names cost a string: only for op records and data-plane errors.
  const std::string op_name = options_.op_log || data ? OpName(c) : std::string();
  // The planner ops in plan order (op_pos ascends), not a walk over every tile op.
  for (uint32_t pos : c.op_pos) {
    const TileOp& op = c.plan[pos];
    const std::optional<OpTiming> t = planner.timing(*c.planner_op[op.index]);
    AHBM_CHECK(t.has_value()) << "completed op without timing";
    const int e = op.kind == TileOpKind::kGemm ? 0 : 1;
    EngineSum& s = sum[e];
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
    d->set_what(c.kind == CommandKind::kMath ? op_name : TileWhat(op));
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
    CarryCommand(c, command,
                 message(DataEngineOf(command) == topology::UnitKind::kGemm ? 0 : 1));
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
  return EngineWorkPair{std::move(work[0]), std::move(work[1])};
}

std::shared_ptr<pb::DmaData> EngineReporter::DmaDataOf(const PeCommand& c) const {
  if (!options_.data || c.kind != CommandKind::kDma) return nullptr;
  auto data = std::make_shared<pb::DmaData>();
  data->set_op(OpName(c));
  *data->mutable_cmd() = c.dma();
  return data;
}

std::optional<pb::OpRecord> EngineReporter::Account(const PeCommand& c, SimTime start,
                                                    SimTime end, pb::UnitStats& stats) const {
  uint64_t flops = 0;
  for (const TileOp& op : c.plan) flops += op.flops;
  stats.set_ops(stats.ops() + 1);
  stats.set_bytes_read(stats.bytes_read() + c.hbm_read_bytes);
  stats.set_bytes_written(stats.bytes_written() + c.hbm_write_bytes);
  stats.set_flops(stats.flops() + flops);
  if (!options_.op_log) return std::nullopt;
  pb::OpRecord rec;
  rec.set_unit(self_);
  rec.set_unit_name(unit_name_);
  rec.set_op(OpName(c));
  rec.set_cmd_id(c.cmd_id);
  rec.set_issue_ps(c.issue.value());
  rec.set_start_ps(start.value());
  rec.set_end_ps(end.value());
  rec.set_bytes_read(c.hbm_read_bytes);
  rec.set_bytes_written(c.hbm_write_bytes);
  rec.set_flops(flops);
  for (uint64_t dep : c.depends_on) rec.add_depends_on(dep);
  return rec;
}

}  // namespace ahbm::sim
