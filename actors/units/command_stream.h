// An injected command stream (CpuProgram) as a PE CPU instance: for tests, benchmarks and
// `ahbm stream`. The CPU (pe_cpu_actor.h) issues it. (A trace's replay re-issues the kernels'
// recorded calls through the kernel runtime instead: kernels/replay.)
//
// Contract, on top of the PE CPU's (pe_cpu_actor.h):
// - Step i: the CPU auto-waits on the first handle of `wait_for` not yet complete (a
//   StallRecord "cmd <id>" when the wait is real), then issues the command; a blocking
//   command waits for its Completion (no StallRecord). Then step i + 1.
// - The stream is request 0; command ids are the program's own.
// - UnitContext::cpu_waiting[pe] says what an unfinished stream waits on ("its start",
//   "cmd <id> (auto-wait)", "cmd <id> (blocking)"): ChipSim's deadlock report.
#ifndef AHBMSIM_ACTORS_UNITS_COMMAND_STREAM_H_
#define AHBMSIM_ACTORS_UNITS_COMMAND_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/units/pe_cpu_actor.h"
#include "actors/units/unit_context.h"

namespace ahbm::sim {

struct CpuStep {
  CpuCommand command;
  std::vector<uint64_t> wait_for;  // handles (cmd ids) this step needs complete first
};
using CpuProgram = std::vector<CpuStep>;

// The stream and the CPU of global PE `pe` running it. ctx.issue_cost_profile must name a
// profile of the chip; ctx outlives the stream, the stream the engine's events.
class CommandStream : public CpuInstance {
 public:
  CommandStream(UnitContext& ctx, uint32_t pe, CpuProgram program);
  // Spawns the CPU actor; it starts the stream at time 0.
  void Start() { cpu_.Start(); }

  bool Run(PeCpu& cpu) override;
  std::string WaitText() const override;

 private:
  UnitContext& ctx_;
  PeCpu cpu_;
  CpuProgram program_;
  size_t pc_ = 0;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_COMMAND_STREAM_H_
