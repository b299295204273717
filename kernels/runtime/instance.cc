#include "kernels/runtime/instance.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/runtime/pe_runtime.h"

namespace ahbm::kernels {

Instance::Instance(PeRuntime* runtime_in, uint32_t pe_in, uint32_t request_id,
                   uint32_t stream_in, KernelFn fn_in)
    : CpuInstance(request_id),
      pe(pe_in),
      stream(stream_in),
      runtime(runtime_in),
      tl(std::make_unique<Tl>(runtime_in, this, pe_in)),
      fn(std::move(fn_in)) {
  task.emplace(fn(*tl));
}

bool Instance::Run(sim::PeCpu&) {
  waiting_what = WaitWhat();
  try {
    if (pending && !runtime->TryIssue(*this)) return false;  // waits again
  } catch (const KernelError& e) {
    error = e.what();
    pending.reset();
  }
  const std::coroutine_handle<> h = started ? resume : std::coroutine_handle<>(task->handle());
  started = true;
  h.resume();
  if (task->done()) {
    waiting_what = WaitWhat();
    runtime->Finish(*this);
    return true;
  }
  AHBM_CHECK(waiting()) << runtime->PeName() << ": kernel suspended outside a tl call";
  return false;
}

std::string Instance::WaitText() const {
  const WaitWhat& w = waiting_what;
  using K = WaitWhat::Kind;
  switch (w.kind) {
    case K::kNone:
      return "";
    case K::kAutoWait:
      return absl::StrCat("cmd ", w.id, " (auto-wait before ", CallName(*w.call), ")");
    case K::kWait:
      return absl::StrCat("cmd ", w.id, " (wait)");
    case K::kAll:
      return absl::StrCat("all commands (wait; ", w.count, " pending, first cmd ", w.id, ")");
    case K::kCmd:
      return absl::StrCat("cmd ", w.id, " (", CallName(*w.call), ")");
    case K::kSend:
      if (w.peer.kind() == Peer::Kind::kPe) {
        return absl::StrCat("send to pe ", w.count, " (NOC endpoint has no room)");
      }
      return absl::StrCat("send to pe ", w.count, " (IPCQ ", topology::DirName(w.peer.dir()),
                          " queue has no credit)");
    case K::kRecv:
      return absl::StrCat("recv ", w.id, " from ", runtime->DescribePeer(w.peer));
  }
  return "";
}

}  // namespace ahbm::kernels
