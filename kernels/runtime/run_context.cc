#include "kernels/runtime/run_context.h"

#include "absl/strings/str_cat.h"
#include "topology/ids.h"

namespace ahbm::kernels {

RunContext::RunContext(sim::ChipSim* sim, MemoryStore* store)
    : sim_(sim),
      store_(store),
      ipcq_credit_(sim->context().chip.sip().cube().ipcq().queue_bytes()) {}

std::string RunContext::PeName(uint32_t pe) const {
  const std::string cpu =
      index().Name(index().PeUnit(topology::UnitKind::kPeCpu, index().PeOf(pe)));
  return absl::StrCat("pe ", pe, " (", cpu.substr(0, cpu.rfind('.')), ")");
}

void RunContext::AddKernelPe(uint32_t pe) {
  if (runs_kernel_.size() <= pe) runs_kernel_.resize(pe + 1, 0);
  runs_kernel_[pe] = 1;
}

void RunContext::NoteRequestDone(uint32_t request_id, sim::SimTime end) {
  sim::SimTime& done = request_done_[request_id];
  done = std::max(done, end);
}

void RunContext::AddRequestId(uint32_t request_id) {
  if (request_done_.size() <= request_id) request_done_.resize(request_id + 1);
}

}  // namespace ahbm::kernels
