// The PE scheduler's reports (pe_scheduler.h "out EngineWork"): for a command whose timing is
// final, the EngineWork messages to the PE's GEMM and MATH units (per engine: op count, span,
// busy and work time, FLOPs; per-tile EngineOps with an op log and per-tile detail; the command
// itself, in data mode, to the engine that computes its values), a DMA command's DmaData in
// data mode, and the scheduler's own statistics and op record. It builds them; the scheduler
// sends them. A plain class (no CAF, no engine): pe_engine_reporter_test.
#ifndef AHBMSIM_ACTORS_UNITS_PE_ENGINE_REPORTER_H_
#define AHBMSIM_ACTORS_UNITS_PE_ENGINE_REPORTER_H_

#include <memory>
#include <optional>
#include <string>

#include "actors/pe_planner.h"
#include "actors/time.h"
#include "actors/units/pe_command_table.h"
#include "proto/commands.pb.h"
#include "proto/report.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::sim {

// What the scheduler reports, as its UnitContext says (unit_context.h).
struct ReportOptions {
  bool op_log = false;           // op records and op names are written
  bool per_tile_detail = false;  // with op_log: per-tile EngineOps
  bool data = false;             // data mode: commands go to the engines that compute them
};

struct EngineWorkPair {
  std::shared_ptr<pb::EngineWork> gemm;  // null: nothing for the GEMM unit
  std::shared_ptr<pb::EngineWork> math;
};

class EngineReporter {
 public:
  // `self` and `unit_name`: the scheduler's, for its op records.
  EngineReporter(ClockDomain clock, ReportOptions options, UnitId self, std::string unit_name)
      : clock_(clock), options_(options), self_(self), unit_name_(std::move(unit_name)) {}

  // What ran on the GEMM and MATH engines for `c` (its planner ops all timed in `planner`): a
  // message to each engine that ran ops of it and, in data mode, to the engine that computes
  // its values. `record`: the scheduler's op record (serialized), carried on the first message
  // with ops (ReplyAhead).
  EngineWorkPair WorkOf(const PeCommand& c, const PePlanner& planner,
                        std::string* record = nullptr) const;
  // Data mode: a DMA command's DmaData for the DMA unit, which moves its values; else null.
  std::shared_ptr<pb::DmaData> DmaDataOf(const PeCommand& c) const;
  // Adds `c` (run from `start` to `end`) to the scheduler's `stats`; returns its op record
  // when there is an op log.
  std::optional<pb::OpRecord> Account(const PeCommand& c, SimTime start, SimTime end,
                                      pb::UnitStats& stats) const;

 private:
  ClockDomain clock_;
  ReportOptions options_;
  UnitId self_;
  std::string unit_name_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_PE_ENGINE_REPORTER_H_
