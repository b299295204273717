#include "actors/units/command_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ahbm::sim {

CommandStream::CommandStream(UnitContext& ctx, uint32_t pe, CpuProgram program)
    : CpuInstance(/*request_id=*/0),
      ctx_(ctx),
      cpu_(ctx, pe, /*runtime=*/nullptr),
      program_(std::move(program)) {
  cpu_.AddInstance(this);
  ctx_.cpu_waiting[pe] = "its start";
}

bool CommandStream::Run(PeCpu& cpu) {
  while (pc_ < program_.size()) {
    const CpuStep& step = program_[pc_];
    if (const uint64_t h = cpu.FirstPending(step.wait_for)) {
      ctx_.cpu_waiting[cpu.pe()] = absl::StrCat("cmd ", h, " (auto-wait)");
      cpu.Wait(*this, h, cpu.ready());
      return false;
    }
    const SimTime issue = cpu.IssueCommand(*this, step.command, step.wait_for);
    cpu.SendCommand(step.command, issue);
    ++pc_;
    if (IsBlocking(step.command)) {
      const uint64_t id = CommandId(step.command);
      ctx_.cpu_waiting[cpu.pe()] = absl::StrCat("cmd ", id, " (blocking)");
      cpu.Wait(*this, id, issue, /*logged=*/false);
      return false;
    }
  }
  ctx_.cpu_waiting.erase(cpu.pe());
  return true;
}

std::string CommandStream::WaitText() const { return absl::StrCat("cmd ", waiting_on()); }

}  // namespace ahbm::sim
