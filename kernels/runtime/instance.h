// One kernel instance (DESIGN §4): a `tl` coroutine of one request on one PE, run by the PE's
// CPU (sim::PeCpu) as one of its instances. The kernel runtime creates and owns it. Its
// messages belong to its (request, stream) (runtime.h).
#ifndef AHBMSIM_KERNELS_RUNTIME_INSTANCE_H_
#define AHBMSIM_KERNELS_RUNTIME_INSTANCE_H_

#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/units/pe_cpu_actor.h"
#include "kernels/runtime/call.h"
#include "kernels/runtime/peer.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"

namespace ahbm::kernels {

using KernelFn = std::function<Task<void>(Tl&)>;

class Instance : public sim::CpuInstance {
 public:
  Instance(PeRuntime* runtime, uint32_t pe, uint32_t request_id, uint32_t stream, KernelFn fn);

  // Continues the coroutine: first the call it stalled in (if any), then up to its next wait.
  bool Run(sim::PeCpu& cpu) override;
  std::string WaitText() const override;

  // What it waits on, rendered only for StallRecords (op log) and deadlock reports.
  struct WaitWhat {
    enum class Kind : uint8_t { kNone, kAutoWait, kWait, kAll, kCmd, kSend, kRecv };
    Kind kind = Kind::kNone;
    uint64_t id = 0;      // the command / receive / first outstanding handle; NOC kSend: message
    uint64_t count = 0;   // kAll: pending handles; kSend: destination PE
    std::shared_ptr<const Invocation> call;  // kAutoWait, kCmd: the call
    Peer peer = Peer::Pe(0);  // kRecv: the source; kSend: its direction (IPCQ) / destination
    bool empty() const { return kind == Kind::kNone; }
  };

  const uint32_t pe;
  const uint32_t stream;  // its message stream within the request (runtime.h)
  PeRuntime* const runtime;  // its PE's
  std::unique_ptr<Tl> tl;
  KernelFn fn;  // kept alive: a lambda coroutine refers to its closure
  std::optional<Task<void>> task;
  bool started = false;
  std::coroutine_handle<> resume;       // where the coroutine continues
  std::shared_ptr<Invocation> pending;  // a call stalled before it issued
  WaitWhat waiting_what;
  bool waiting_send = false;            // an IPCQ send without credit, a NOC send without room
  uint64_t waiting_message = 0;
  std::string error;                    // set when it failed
  // Its share of the PE's scratch arena (several instances on one PE split it evenly, so
  // one's scope never releases another's temporaries): [scratch_base, scratch_limit).
  uint64_t scratch_base = 0;
  uint64_t scratch_limit = 0;
  uint64_t scratch_top = 0;
  // Recording a trace: its number (creation order), its calls so far, and by handle the
  // call (index + 1) that made it (handles are the PE's, dense; 0: not this instance's).
  uint32_t ordinal = 0;
  uint64_t calls = 0;
  std::vector<uint64_t> call_of_handle;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_INSTANCE_H_
