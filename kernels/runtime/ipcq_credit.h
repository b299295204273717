// The sender's IPCQ credit (runtime.h, "IPCQ send"): the one piece of state two PEs' runtimes
// share. Per queue: bytes sent minus bytes its receiver has popped or has issued a pop for
// (credit on its way back counts, as in sim::IpcqModel::WouldBlock). The sending PE counts each
// send and learns whether it lacks credit; the receiving PE counts each pop it issues. It
// stands for the queue's credit wire, read without latency; the queue actor checks every send's
// decision against its own model (IpcqSend.sender_blocks), so a drift fails the run
// (actors/README.md, declared shortcuts).
#ifndef AHBMSIM_KERNELS_RUNTIME_IPCQ_CREDIT_H_
#define AHBMSIM_KERNELS_RUNTIME_IPCQ_CREDIT_H_

#include <cstdint>
#include <map>

#include "actors/engine.h"

namespace ahbm::kernels {

class IpcqCredit {
 public:
  // Every queue holds `queue_bytes` (ipcq.queue_bytes).
  explicit IpcqCredit(uint64_t queue_bytes) : queue_bytes_(queue_bytes) {}

  // The sender: counts a message of `bytes` sent on `queue`; true if the queue lacks credit
  // for the whole of it (the sender then waits for the queue's IpcqAccepted).
  bool Send(sim::UnitId queue, uint64_t bytes);
  // The receiver: it has issued a pop of `bytes` from `queue` (never more than was sent).
  void Popped(sim::UnitId queue, uint64_t bytes);
  // Bytes sent on `queue` and not yet popped.
  uint64_t unpopped(sim::UnitId queue) const;

 private:
  uint64_t queue_bytes_;
  std::map<sim::UnitId, uint64_t> unpopped_;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_IPCQ_CREDIT_H_
