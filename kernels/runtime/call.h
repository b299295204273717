// One `tl` call on its way to the PE CPU (DESIGN §4): what the call asks for (Invocation) and
// the awaitable a kernel `co_await`s (Call). Submitting a Call hands its Invocation to the
// kernel runtime, which issues it on the instance's CPU or makes the instance wait.
#ifndef AHBMSIM_KERNELS_RUNTIME_CALL_H_
#define AHBMSIM_KERNELS_RUNTIME_CALL_H_

#include <coroutine>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "actors/units/pe_cpu_actor.h"
#include "kernels/runtime/peer.h"
#include "kernels/runtime/tensor.h"

namespace ahbm::kernels {

class PeRuntime;
class Instance;

// Command / receive handles of one call (a few at most).
using Handles = absl::InlinedVector<uint64_t, 4>;

// A group of a call's input producers as the dependency rules read them (tl.cc), kept for a
// recorded trace (pb::InputGroup): auto-wait (scheduler = false) or scheduler dependencies.
struct InputLog {
  bool scheduler = false;
  Handles producers;  // the tensors' producers, 0 for none, in the rule's order
};

// One call as the runtime sees it.
struct Invocation {
  enum class Kind : uint8_t { kCommand, kSend, kRecv, kWait, kWaitAll };
  Kind kind = Kind::kCommand;
  sim::CpuCommand command;       // kCommand
  uint64_t cmd_id = 0;           // kCommand: its id; kRecv: the receive's handle
  bool blocking = false;         // kRecv: recv (not recv_async)
  Handles wait_for;              // pending inputs: auto-wait (not for composites)
  // kCommand, non-blocking scheduler commands (composite, ex_composite, lse_merge): inputs
  // still pending in a posted receive. Issued at once; handed to the scheduler when they have
  // completed (runtime.h); never in the scheduler command's depends_on.
  Handles held_for_recv;
  Tensor result;
  std::optional<Peer> peer;      // kSend, kRecv
  Tensor payload;                // kSend
  uint64_t wait_id = 0;          // kWait
  uint64_t written_begin = 0;    // TCM bytes the call writes (scratch-scope check)
  uint64_t written_end = 0;
  std::vector<InputLog> inputs;  // only while recording a trace (PeRuntime::recording)
  uint64_t call = 0;             // while recording: the call's index + 1 (CallRecord.index)
};

// The call's name in wait texts: "load", "store", "composite", "dot", "ex_composite",
// "lse_merge", "math_EXP", "send", "recv", "recv_async", "wait", "wait_all".
std::string CallName(const Invocation& inv);

// The awaitable every hardware-reaching call returns.
class Call {
 public:
  Call(PeRuntime* runtime, Instance* instance, std::shared_ptr<Invocation> invocation);
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> handle);
  Tensor await_resume();

 private:
  PeRuntime* runtime_;
  Instance* instance_;
  std::shared_ptr<Invocation> invocation_;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_CALL_H_
