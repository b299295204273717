#include "kernels/runtime/call.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/runtime/instance.h"
#include "kernels/runtime/pe_runtime.h"

namespace ahbm::kernels {

std::string CallName(const Invocation& inv) {
  switch (inv.kind) {
    case Invocation::Kind::kSend:
      return "send";
    case Invocation::Kind::kRecv:
      return inv.blocking ? "recv" : "recv_async";
    case Invocation::Kind::kWait:
      return "wait";
    case Invocation::Kind::kWaitAll:
      return "wait_all";
    case Invocation::Kind::kCommand:
      break;
  }
  using DmaPtr = std::shared_ptr<const pb::DmaCmd>;
  using MathPtr = std::shared_ptr<const pb::MathCmd>;
  if (const auto* dma = std::get_if<DmaPtr>(&inv.command)) {
    return (*dma)->dst().space() == pb::HBM ? "store" : "load";
  }
  if (const auto* math = std::get_if<MathPtr>(&inv.command)) {
    return absl::StrCat("math_", pb::MathOp_Name((*math)->op()));
  }
  if (std::holds_alternative<std::shared_ptr<const pb::CompositeCmd>>(inv.command)) return "composite";
  if (std::holds_alternative<std::shared_ptr<const pb::GemmCmd>>(inv.command)) return "dot";
  if (std::holds_alternative<std::shared_ptr<const pb::SoftmaxPvCmd>>(inv.command)) return "ex_composite";
  return "lse_merge";
}

Call::Call(PeRuntime* runtime, Instance* instance, std::shared_ptr<Invocation> invocation)
    : runtime_(runtime), instance_(instance), invocation_(std::move(invocation)) {}

bool Call::await_suspend(std::coroutine_handle<> handle) {
  return runtime_->Submit(*instance_, invocation_, handle);
}

Tensor Call::await_resume() {
  if (!instance_->error.empty()) throw KernelError(instance_->error);
  return invocation_->result;
}

}  // namespace ahbm::kernels
