#include "kernels/runtime/ipcq_credit.h"

#include "base/check.h"

namespace ahbm::kernels {

bool IpcqCredit::Send(sim::UnitId queue, uint64_t bytes) {
  uint64_t& unpopped = unpopped_[queue];
  unpopped += bytes;
  return unpopped > queue_bytes_;
}

void IpcqCredit::Popped(sim::UnitId queue, uint64_t bytes) {
  auto it = unpopped_.find(queue);
  AHBM_CHECK(it != unpopped_.end() && it->second >= bytes)
      << "IPCQ queue unit " << queue << ": a pop of " << bytes << " bytes, "
      << (it == unpopped_.end() ? 0 : it->second) << " bytes sent and not popped";
  it->second -= bytes;
}

uint64_t IpcqCredit::unpopped(sim::UnitId queue) const {
  auto it = unpopped_.find(queue);
  return it == unpopped_.end() ? 0 : it->second;
}

}  // namespace ahbm::kernels
