#include "actors/models/math_model.h"

#include <algorithm>

#include "base/check.h"

namespace ahbm::sim {
namespace {

void CheckConfig(const pb::MathEngine& config) {
  AHBM_CHECK(config.lanes_per_cycle() > 0 && config.transcendental_per_cycle() > 0)
      << "MATH engine lanes_per_cycle=" << config.lanes_per_cycle()
      << " transcendental_per_cycle=" << config.transcendental_per_cycle();
}

}  // namespace

uint64_t MathElementsPerCycle(const pb::MathEngine& config, pb::MathOp op) {
  CheckConfig(config);
  switch (op) {
    case pb::EXP:
    case pb::DIV:
      return config.transcendental_per_cycle();
    case pb::ADD:
    case pb::SUB:
    case pb::MUL:
    case pb::MAXIMUM:
    case pb::SCALE:
    case pb::REDUCE_MAX:
    case pb::REDUCE_SUM:
    case pb::COPY:
    case pb::TRANSPOSE:
    case pb::FILL:
      return config.lanes_per_cycle();
    default:
      break;
  }
  AHBM_CHECK(false) << "MATH op " << pb::MathOp_Name(op) << " (" << static_cast<int>(op)
                    << ") has no timing";
  return 0;
}

bool IsMathReduction(pb::MathOp op) { return op == pb::REDUCE_MAX || op == pb::REDUCE_SUM; }

Cycles MathOpCycles(const pb::MathEngine& config, const MathOpShape& op) {
  const uint64_t rate = MathElementsPerCycle(config, op.op);
  Cycles cycles(config.startup_cycles() + (op.elements + rate - 1) / rate);
  if (IsMathReduction(op.op)) cycles += Cycles(config.reduction_extra_cycles());
  return cycles;
}

Cycles MathFusedCycles(const pb::MathEngine& config, std::span<const MathOpShape> stages) {
  AHBM_CHECK(!stages.empty()) << "a MATH op needs at least one stage";
  Cycles total;
  for (const MathOpShape& stage : stages) total += MathOpCycles(config, stage);
  return total;
}

Cycles MathSingleStartupCycles(const pb::MathEngine& config, std::span<const MathOpShape> stages) {
  AHBM_CHECK(!stages.empty()) << "a MATH op needs at least one stage";
  Cycles total(config.startup_cycles());
  for (const MathOpShape& stage : stages) {
    total += MathOpCycles(config, stage) - Cycles(config.startup_cycles());
  }
  return total;
}

MathEngineModel::MathEngineModel(const pb::MathEngine& config, ClockDomain clock)
    : config_(config), clock_(clock) {
  CheckConfig(config_);
}

MathService MathEngineModel::Preview(SimTime ready, std::span<const MathOpShape> stages) const {
  MathService service;
  service.start = clock_.NextEdge(std::max(ready, free_at_));
  service.end = service.start + clock_.ToTime(MathFusedCycles(config_, stages));
  return service;
}

MathService MathEngineModel::Serve(SimTime ready, std::span<const MathOpShape> stages) {
  MathService service = Preview(ready, stages);
  free_at_ = service.end;
  stats_.busy_ps += service.end - service.start;
  ++stats_.ops;
  for (const MathOpShape& stage : stages) stats_.elements += stage.elements;
  return service;
}

}  // namespace ahbm::sim
