// The PE CPU actor (DESIGN §4): issues one PE's command stream to its PE scheduler, paying the
// ADR-0064 issue cost of each command, blocking where the command blocks and auto-waiting on
// pending handles. In this layer the stream is injected (CpuProgram: for tests, benchmarks and,
// later, replay); the kernel runtime drives the same actor from `tl` coroutines.
//
// Ports:
// - out DmaCmd / CompositeCmd / SoftmaxPvCmd / GemmCmd / MathCmd / LseMergeCmd to the PE's
//   scheduler.
// - in  Completion / CommandError from it.
//
// Contract (times in ps; `cpu` = when the CPU is next free, starting at 0):
// - Step i: if a handle in `wait_for` has not completed, the CPU stalls from max(cpu, now) until
//   its Completion arrives (a StallRecord "cmd <id>"), then pays resume_after_wait_cycles.
//   Then it pays the command's issue cost; the command leaves at issue = cpu + cost and cpu
//   becomes issue. Costs by command: DmaCmd load_cycles (store_cycles when the destination is
//   HBM), CompositeCmd composite_cycles, SoftmaxPvCmd and LseMergeCmd ex_composite_cycles,
//   GemmCmd dot_cycles, MathCmd primitive_cycles.
// - Blocking commands (MathCmd, GemmCmd, a DmaCmd to HBM = store): the CPU waits for the
//   Completion and pays resume_after_wait_cycles; `load`, composite, softmax_pv and lse_merge return at once.
// - Op log: an IssueRecord per command (pe, cmd_id, issue_ps, depends_on = wait_for plus the
//   command's own depends_on, blocking, the command) and a StallRecord per wait; the CPU unit's
//   stats count commands (ops) and issue time (busy_ps = Σ issue costs).
// - A CommandError stops this CPU's program: the message goes to UnitContext::errors.
#ifndef AHBMSIM_ACTORS_UNITS_PE_CPU_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_PE_CPU_ACTOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/units/unit_context.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

using CpuCommand =
    std::variant<std::shared_ptr<const pb::DmaCmd>, std::shared_ptr<const pb::CompositeCmd>,
                 std::shared_ptr<const pb::SoftmaxPvCmd>, std::shared_ptr<const pb::GemmCmd>,
                 std::shared_ptr<const pb::MathCmd>, std::shared_ptr<const pb::LseMergeCmd>>;

struct CpuStep {
  CpuCommand command;
  std::vector<uint64_t> wait_for;  // handles (cmd ids) this step needs complete first
};
using CpuProgram = std::vector<CpuStep>;

uint64_t CommandId(const CpuCommand& command);
bool IsBlocking(const CpuCommand& command);
// The issue cost of `command` under `profile`, in CPU cycles.
uint32_t IssueCycles(const pb::IssueCostProfile& profile, const CpuCommand& command);
// The profile named `name` of the chip's PE; null if there is none.
const pb::IssueCostProfile* FindIssueCostProfile(const pb::Chip& chip, const std::string& name);

struct PeCpuState {
  UnitContext* ctx = nullptr;
  UnitId self = 0;
  UnitId scheduler = 0;
  uint32_t pe = 0;
  pb::IssueCostProfile profile;
  std::optional<ClockDomain> clock;
  CpuProgram program;
  size_t pc = 0;
  SimTime cpu;                               // when the CPU is next free
  std::map<uint64_t, SimTime> completed;     // cmd_id -> end
  std::optional<uint64_t> blocked_on;        // a blocking command in flight
  std::optional<SimTime> stall_from;         // waiting on a handle since
  std::optional<uint64_t> stalled_on;
  bool failed = false;
  SimTime finished;                          // when the last step's wait ended
  bool done = false;
};
using PeCpuActor = caf::stateful_actor<PeCpuState>;

caf::behavior PeCpuBehavior(PeCpuActor* self, UnitContext* ctx, UnitId self_id, uint32_t pe,
                            CpuProgram program);

// Spawns and registers the CPU of global PE `pe` running `program` from time 0 (the first
// event is sent at once). ctx.issue_cost_profile must name a profile of the chip.
void StartPeCpuActor(UnitContext& ctx, uint32_t pe, CpuProgram program);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_PE_CPU_ACTOR_H_
