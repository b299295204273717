#include "kernels/runtime/pe_runtime.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/tensor_ref.h"
#include "base/check.h"
#include "base/errors.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels {
namespace {

constexpr uint64_t kAlign = 64;  // TCM allocations are 64-byte aligned

uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// softmax_pv's accumulator as a key for its chain ("pe@addr").
std::string AccKey(const pb::SoftmaxPvCmd& c) {
  return absl::StrCat(c.acc_o().pe(), "@", c.acc_o().addr());
}

}  // namespace

PeRuntime::PeRuntime(RunContext& run, uint32_t pe)
    : run_(run),
      core_(run.units(), pe, this),
      persistent_top_(run.units().chip.sip().cube().pe().tcm().scratch_bytes()),
      persistent_limit_(run.units().chip.sip().cube().pe().tcm().total_bytes()) {}

const Instance* PeRuntime::FindInstance(uint32_t request_id, uint32_t stream) const {
  for (const auto& inst : instances_) {
    if (inst->request_id() == request_id && inst->stream == stream) return inst.get();
  }
  return nullptr;
}

Instance& PeRuntime::AddInstance(uint32_t request_id, uint32_t stream, KernelFn fn,
                                 uint32_t ordinal) {
  auto inst = std::make_unique<Instance>(this, pe(), request_id, stream, std::move(fn));
  inst->ordinal = ordinal;
  core_.AddInstance(inst.get());
  instances_.push_back(std::move(inst));
  return *instances_.back();
}

void PeRuntime::SplitArenas() {
  const uint64_t scratch = run_.units().chip.sip().cube().pe().tcm().scratch_bytes();
  const uint64_t n = instances_.size();
  // Several instances (message streams) on this PE: the IPCQ staging buffer takes the top of
  // TCM.
  if (n > 1) persistent_limit_ -= std::min(persistent_limit_, kDemuxStagingBytes);
  for (uint64_t i = 0; i < n; ++i) {
    Instance& inst = *instances_[i];
    inst.scratch_base = AlignUp(scratch * i / n);
    inst.scratch_limit = scratch * (i + 1) / n;
    inst.scratch_top = inst.scratch_base;
  }
}

void PeRuntime::Fail(Instance& inst, const std::string& reason) {
  throw KernelError(absl::StrCat(run_.PeName(inst.pe), ": ", reason));
}

void PeRuntime::Finish(Instance& inst) {
  std::string message;
  if (std::exception_ptr e = inst.task->error()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      message = ex.what();
    }
  } else if (!inst.error.empty()) {
    message = inst.error;
  }
  // A kernel's own error (not one the runtime gave it) is part of its recorded calls.
  if (!message.empty() && inst.error.empty() && recording()) {
    pb::CallRecord r = NewCallRecord(inst, pb::CallRecord::KERNEL_ERROR);
    r.set_error(message);
    run_.units().op_log->AddCall(std::move(r));
  }
  if (!message.empty()) run_.units().AddError(KernelFaultError(message));
}

// ---- arenas ----

Tensor PeRuntime::Allocate(Instance& inst, ShapeArg shape, pb::DType dtype, Arena arena) {
  const pb::Tcm& tcm = run_.units().chip.sip().cube().pe().tcm();
  uint64_t bytes = sim::DTypeBytes(dtype);
  for (uint64_t d : shape) bytes *= d;
  if (bytes == 0) {
    Fail(inst, absl::StrCat("allocation of an empty tensor ", absl::StrJoin(shape, "x")));
  }
  uint64_t& top = arena == Arena::kScratch ? inst.scratch_top : persistent_top_;
  const uint64_t base = arena == Arena::kScratch ? inst.scratch_base : tcm.scratch_bytes();
  const uint64_t limit = arena == Arena::kScratch ? inst.scratch_limit : persistent_limit_;
  const uint64_t at = AlignUp(top);
  if (at + bytes > limit) {
    Fail(inst, absl::StrCat(arena == Arena::kScratch ? "scratch" : "persistent",
                            " arena overflow: ", bytes, " bytes needed, ", at - base, " of ",
                            limit - base, " bytes in use"));
  }
  top = at + bytes;
  return Tensor(pb::TCM, inst.pe, at, dtype, shape);
}

uint64_t PeRuntime::EnterScope(Instance& inst) {
  if (recording()) RecordScope(inst, pb::CallRecord::SCOPE_ENTER, inst.scratch_top);
  return inst.scratch_top;
}

void PeRuntime::LeaveScope(Instance& inst, uint64_t mark) {
  if (recording()) RecordScope(inst, pb::CallRecord::SCOPE_LEAVE, mark);
  // A pending write into the released part [mark, scratch_top) of the scratch arena.
  for (const auto& [handle, range] : writes_) {
    if (range.first < inst.scratch_top && range.second > mark) {
      if (inst.error.empty()) {
        inst.error = absl::StrCat(run_.PeName(inst.pe), ": leaving scratch_scope while cmd ",
                                  handle, " still writes TCM [", range.first, ", ", range.second,
                                  ")");
      }
    }
  }
  inst.scratch_top = std::min(inst.scratch_top, mark);
}

PeRuntime::Writes::iterator PeRuntime::WriteAt(uint64_t handle) {
  return std::lower_bound(writes_.begin(), writes_.end(), handle,
                          [](const auto& x, uint64_t key) { return x.first < key; });
}

void PeRuntime::NoteWrite(const Invocation& inv, uint64_t handle) {
  if (inv.written_end <= inv.written_begin) return;
  const auto it = WriteAt(handle);
  if (it != writes_.end() && it->first == handle) {
    it->second = {inv.written_begin, inv.written_end};
  } else {
    writes_.insert(it, {handle, {inv.written_begin, inv.written_end}});
  }
}

// ---- calls ----

bool PeRuntime::Submit(Instance& inst, std::shared_ptr<Invocation> inv,
                       std::coroutine_handle<> h) {
  if (recording()) RecordCall(inst, *inv);
  inst.resume = h;
  inst.pending = std::move(inv);
  return !TryIssue(inst);
}

// ---- recording a trace ----

pb::CallRecord PeRuntime::NewCallRecord(Instance& inst, pb::CallRecord::Kind kind) {
  pb::CallRecord r;
  r.set_instance(inst.ordinal);
  r.set_index(inst.calls++);
  r.set_kind(kind);
  return r;
}

uint64_t PeRuntime::CallOf(const Instance& inst, uint64_t handle) const {
  if (handle == 0) return 0;
  AHBM_CHECK(handle < inst.call_of_handle.size() && inst.call_of_handle[handle] != 0)
      << run_.PeName(inst.pe) << " request " << inst.request_id() << ": handle " << handle
      << " was not made by this kernel instance (a trace records each instance on its own)";
  return inst.call_of_handle[handle];
}

void PeRuntime::RecordScope(Instance& inst, pb::CallRecord::Kind kind, uint64_t mark) {
  pb::CallRecord r = NewCallRecord(inst, kind);
  r.set_scope_mark(mark);
  r.set_scope_top(inst.scratch_top);
  run_.units().op_log->AddCall(std::move(r));
}

void PeRuntime::RecordCall(Instance& inst, Invocation& inv) {
  static constexpr pb::CallRecord::Kind kKinds[] = {
      pb::CallRecord::COMMAND, pb::CallRecord::SEND, pb::CallRecord::RECV,
      pb::CallRecord::WAIT, pb::CallRecord::WAIT_ALL};
  pb::CallRecord r = NewCallRecord(inst, kKinds[static_cast<int>(inv.kind)]);
  inv.call = r.index() + 1;
  if (inv.kind == Invocation::Kind::kCommand) {
    std::visit(
        [&r](const auto& cmd) {
          using C = std::decay_t<decltype(*cmd)>;
          C* copy;
          if constexpr (std::is_same_v<C, pb::DmaCmd>) copy = r.mutable_dma();
          if constexpr (std::is_same_v<C, pb::GemmCmd>) copy = r.mutable_gemm();
          if constexpr (std::is_same_v<C, pb::MathCmd>) copy = r.mutable_math();
          if constexpr (std::is_same_v<C, pb::CompositeCmd>) copy = r.mutable_composite();
          if constexpr (std::is_same_v<C, pb::SoftmaxPvCmd>) copy = r.mutable_softmax_pv();
          if constexpr (std::is_same_v<C, pb::LseMergeCmd>) copy = r.mutable_lse_merge();
          *copy = *cmd;
          copy->clear_cmd_id();
          if constexpr (requires { copy->clear_depends_on(); }) copy->clear_depends_on();
        },
        inv.command);
  }
  for (const InputLog& group : inv.inputs) {
    pb::InputGroup* g = r.add_inputs();
    g->set_scheduler(group.scheduler);
    for (uint64_t h : group.producers) g->add_producers(CallOf(inst, h));
  }
  if (inv.peer) {
    r.set_peer_ipcq(inv.peer->kind() == Peer::Kind::kIpcq);
    r.set_peer_dir(static_cast<uint32_t>(inv.peer->dir()));
    r.set_peer_pe(inv.peer->pe());
  }
  if (inv.kind == Invocation::Kind::kSend) inv.payload.WriteTo(*r.mutable_tensor());
  if (inv.kind == Invocation::Kind::kRecv) {
    inv.result.WriteTo(*r.mutable_tensor());
    r.set_blocking(inv.blocking);
  }
  if (inv.kind == Invocation::Kind::kWait) r.set_wait_on(CallOf(inst, inv.wait_id));
  r.set_written_begin(inv.written_begin);
  r.set_written_end(inv.written_end);
  // The handle this call makes (a command's or a receive's id).
  if (inv.cmd_id != 0) {
    if (inst.call_of_handle.size() <= inv.cmd_id) inst.call_of_handle.resize(inv.cmd_id + 1, 0);
    inst.call_of_handle[inv.cmd_id] = r.index() + 1;
  }
  run_.units().op_log->AddCall(std::move(r));
}

bool PeRuntime::TryIssue(Instance& inst) {
  if (!inst.error.empty()) throw KernelError(inst.error);
  if (const uint64_t h = core_.FirstPending(inst.pending->wait_for)) {
    inst.waiting_what = {Instance::WaitWhat::Kind::kAutoWait, h, 0, inst.pending, Peer::Pe(0)};
    core_.Wait(inst, h, core_.ready());
    return false;
  }
  switch (inst.pending->kind) {
    case Invocation::Kind::kWait:
      return IssueWait(inst, *inst.pending);
    case Invocation::Kind::kWaitAll:
      return IssueWaitAll(inst);
    case Invocation::Kind::kCommand:
    case Invocation::Kind::kSend:
    case Invocation::Kind::kRecv:
      break;
  }
  // Issued: the call leaves `pending` (the awaiting Call keeps the invocation alive).
  const std::shared_ptr<Invocation> inv = std::move(inst.pending);
  switch (inv->kind) {
    case Invocation::Kind::kCommand:
      return IssueCommand(inst, inv);
    case Invocation::Kind::kSend:
      return IssueSend(inst, *inv);
    default:
      return PostRecv(inst, *inv);
  }
}

bool PeRuntime::IssueWait(Instance& inst, const Invocation& inv) {
  if (inv.wait_id == 0 || core_.IsDone(inv.wait_id)) {
    inst.pending.reset();
    return true;
  }
  inst.waiting_what = {Instance::WaitWhat::Kind::kWait, inv.wait_id, 0, nullptr, Peer::Pe(0)};
  core_.Wait(inst, inv.wait_id, core_.ready());
  return false;
}

bool PeRuntime::IssueWaitAll(Instance& inst) {
  if (inst.outstanding() == 0) {
    inst.pending.reset();
    return true;
  }
  inst.waiting_what = {Instance::WaitWhat::Kind::kAll, core_.FirstOutstanding(inst),
                       inst.outstanding(), nullptr, Peer::Pe(0)};
  core_.WaitAll(inst, core_.ready());
  return false;
}

bool PeRuntime::IssueCommand(Instance& inst, const std::shared_ptr<Invocation>& inv) {
  const SimTime issue = core_.IssueCommand(inst, inv->command, inv->wait_for,
                                           inv->held_for_recv, {inst.ordinal, inv->call});
  HandOrHold(*inv, issue);
  NoteWrite(*inv, inv->cmd_id);
  if (!sim::IsBlocking(inv->command)) return true;
  inst.waiting_what = {Instance::WaitWhat::Kind::kCmd, inv->cmd_id, 0, inv, Peer::Pe(0)};
  core_.Wait(inst, inv->cmd_id, issue);
  return false;
}

// ---- held commands ----

void PeRuntime::HandOrHold(const Invocation& inv, SimTime issue) {
  // Inputs still in a posted receive: hand the command over when they have completed.
  HeldCommand held;
  held.hand = issue;
  for (uint64_t h : inv.held_for_recv) {
    if (core_.IsDone(h)) {
      held.hand = std::max(held.hand, core_.DoneAt(h));
    } else {
      held.receives.insert(h);
    }
  }
  if (!held_.empty()) {
    // Behind a held command it depends on (the scheduler must have seen it first).
    std::visit(
        [&](const auto& c) {
          using T = std::decay_t<decltype(*c)>;
          if constexpr (std::is_same_v<T, pb::CompositeCmd> ||
                        std::is_same_v<T, pb::SoftmaxPvCmd> ||
                        std::is_same_v<T, pb::LseMergeCmd>) {
            for (uint64_t d : c->depends_on()) {
              for (const HeldCommand& x : held_) {
                if (x.cmd_id == d) held.commands.insert(d);
              }
            }
          }
          if constexpr (std::is_same_v<T, pb::SoftmaxPvCmd>) {
            held.acc = AccKey(*c);
            for (const HeldCommand& x : held_) {
              if (x.acc == held.acc) held.commands.insert(x.cmd_id);
            }
          }
        },
        inv.command);
  }
  if (held.receives.empty() && held.commands.empty()) {
    core_.SendCommand(inv.command, held.hand);
    return;
  }
  held.command = inv.command;
  held.cmd_id = inv.cmd_id;
  if (held.acc.empty()) {
    if (const auto* pv = std::get_if<std::shared_ptr<const pb::SoftmaxPvCmd>>(&inv.command)) {
      held.acc = AccKey(**pv);
    }
  }
  held_.push_back(std::move(held));
}

void PeRuntime::ReleaseHeld() {
  const SimTime now = Now();
  // Issue order: a command's held predecessors come before it, so one pass releases chains
  // (each sent after its predecessors, at the same time or later).
  for (auto it = held_.begin(); it != held_.end();) {
    if (!it->receives.empty() || !it->commands.empty()) {
      ++it;
      continue;
    }
    const SimTime at = std::max(it->hand, now);
    core_.SendCommand(it->command, at);
    for (HeldCommand& x : held_) {
      if (x.commands.erase(it->cmd_id) > 0) x.hand = std::max(x.hand, at);
    }
    it = held_.erase(it);
  }
}

// ---- sim::CpuRuntime ----

void PeRuntime::OnDone(sim::PeCpu&, uint64_t handle, const sim::CpuInstance* owner,
                       SimTime end) {
  if (owner != nullptr) run_.NoteRequestDone(owner->request_id(), end);
  if (const auto w = WriteAt(handle); w != writes_.end() && w->first == handle) writes_.erase(w);
  if (IsReceive(handle) && !held_.empty()) {
    for (HeldCommand& x : held_) {
      if (x.receives.erase(handle) > 0) x.hand = std::max(x.hand, end);
    }
    ReleaseHeld();
  }
}

}  // namespace ahbm::kernels
