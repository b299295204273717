#include "kernels/runtime/runtime.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/tensor_ref.h"
#include "base/check.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels {
namespace {

using topology::UnitKind;

constexpr uint64_t kAlign = 64;  // TCM allocations are 64-byte aligned

uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Data mode: commands applied to the memory store at completion, by the engine unit (or, for a
// DMA command, the scheduler) that computes them (sim::DataPlane).
class StoreDataPlane : public sim::DataPlane {
 public:
  explicit StoreDataPlane(DataExecutor* executor) : executor_(executor) {}
  absl::Status Apply(const pb::DmaCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::GemmCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::CompositeCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::MathCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::SoftmaxPvCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::LseMergeCmd& cmd) override { return executor_->Execute(cmd); }

 private:
  DataExecutor* executor_;
};

// Pending TCM writes by handle, ascending (a map's order, without a node per command).
using Writes = std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>>;

void SetWrite(Writes& w, uint64_t h, uint64_t begin, uint64_t end) {
  auto it = std::lower_bound(w.begin(), w.end(), h,
                             [](const auto& x, uint64_t key) { return x.first < key; });
  if (it != w.end() && it->first == h) {
    it->second = {begin, end};
  } else {
    w.insert(it, {h, {begin, end}});
  }
}

void EraseWrite(Writes& w, uint64_t h) {
  auto it = std::lower_bound(w.begin(), w.end(), h,
                             [](const auto& x, uint64_t key) { return x.first < key; });
  if (it != w.end() && it->first == h) w.erase(it);
}

// softmax_pv's accumulator as a key for its chain ("pe@addr").
std::string AccKey(const pb::SoftmaxPvCmd& c) {
  return absl::StrCat(c.acc_o().pe(), "@", c.acc_o().addr());
}

}  // namespace

KernelRuntime::KernelRuntime(sim::ChipSim* sim, MemoryStore* store,
                             ErrorKind refused_command_kind)
    : sim_(sim), store_(store) {
  sim::UnitContext& ctx = sim_->context();
  AHBM_CHECK(sim::FindIssueCostProfile(ctx.chip, ctx.issue_cost_profile) != nullptr)
      << "no issue cost profile " << ctx.issue_cost_profile;
  ctx.refused_command_kind = refused_command_kind;
  ipcq_queue_bytes_ = ctx.chip.sip().cube().ipcq().queue_bytes();
  noc_endpoint_bytes_ = ctx.chip.sip().noc().endpoint_queue_bytes();
  if (store_ != nullptr) {
    executor_.emplace(store_);
    data_plane_ = std::make_unique<StoreDataPlane>(&*executor_);
    ctx.data = data_plane_.get();
  }
}

KernelRuntime::~KernelRuntime() {
  sim_->context().data = nullptr;
  // Shut the engine down before the instances (and their coroutine frames) go away.
  sim_->engine().Shutdown();
}

std::string KernelRuntime::PeName(uint32_t pe) const {
  const std::string cpu = index().Name(index().PeUnit(UnitKind::kPeCpu, index().PeOf(pe)));
  return absl::StrCat("pe ", pe, " (", cpu.substr(0, cpu.rfind('.')), ")");
}

SimTime KernelRuntime::Now() const { return sim_->context().engine->now(); }

absl::Status KernelRuntime::AddKernel(uint32_t pe, uint32_t request_id, uint32_t stream,
                                      KernelFn fn) {
  if (ran_) return absl::FailedPreconditionError("AddKernel after Run");
  if (request_done_.size() <= request_id) request_done_.resize(request_id + 1);
  if (!kept_cubes_.empty() && !kept_cubes_.contains(pe / index().pes_per_cube())) {
    return absl::OkStatus();
  }
  if (pe < cpu_by_pe_.size() && cpu_by_pe_[pe] != nullptr) {
    for (const Instance* other : cpu_by_pe_[pe]->instances) {
      if (other->request_id() == request_id && other->stream == stream) {
        return absl::InvalidArgumentError(absl::StrCat(
            PeName(pe), ": a second kernel instance of request ", request_id, ", stream ", stream,
            " (instance ", other->ordinal, " has it; their messages could not be told apart)"));
      }
    }
  }
  if (!cpus_.contains(pe)) {
    RETURN_IF_ERROR(sim_->ClaimCpu(pe));
    Cpu& cpu = cpus_.try_emplace(pe, sim_->context(), pe, this).first->second;
    if (cpu_by_pe_.size() <= pe) cpu_by_pe_.resize(pe + 1, nullptr);
    cpu_by_pe_[pe] = &cpu;
    cpu.persistent_top = sim_->context().chip.sip().cube().pe().tcm().scratch_bytes();
    cpu.persistent_limit = sim_->context().chip.sip().cube().pe().tcm().total_bytes();
    cpu.core.Start();
  }
  auto inst = std::make_unique<Instance>(this, pe, request_id, stream, std::move(fn));
  inst->ordinal = static_cast<uint32_t>(instances_.size());
  Cpu& cpu = CpuOf(pe);
  cpu.instances.push_back(inst.get());
  cpu.core.AddInstance(inst.get());
  instances_.push_back(std::move(inst));
  return absl::OkStatus();
}

absl::Status KernelRuntime::Run() {
  AHBM_CHECK(!ran_) << "KernelRuntime::Run twice";
  ran_ = true;
  const uint64_t scratch = sim_->context().chip.sip().cube().pe().tcm().scratch_bytes();
  for (auto& [pe, cpu] : cpus_) {
    const uint64_t n = cpu.instances.size();
    // Several instances (message streams) on this PE: the IPCQ staging buffer takes the top of
    // TCM.
    if (n > 1) cpu.persistent_limit -= std::min(cpu.persistent_limit, kDemuxStagingBytes);
    for (uint64_t i = 0; i < n; ++i) {
      Instance& inst = *cpu.instances[i];
      inst.scratch_base = AlignUp(scratch * i / n);
      inst.scratch_limit = scratch * (i + 1) / n;
      inst.scratch_top = inst.scratch_base;
    }
  }
  if (recording()) {
    for (const auto& inst : instances_) {
      pb::InstanceRecord r;
      r.set_instance(inst->ordinal);
      r.set_pe(inst->pe);
      r.set_request_id(inst->request_id());
      r.set_stream(inst->stream);
      sim_->context().op_log->AddInstance(std::move(r));
    }
  }
  absl::Status status = sim_->Run();
  RETURN_IF_ERROR(status);
  std::vector<std::string> waits;
  for (const auto& inst : instances_) {
    if (inst->state() != sim::CpuInstance::State::kDone) {
      waits.push_back(Describe(*inst) + HeadOfLine(*inst) + NocSendWait(*inst));
    }
  }
  if (!waits.empty()) {
    return DeadlockError(absl::StrCat("deadlock: no event left; ", absl::StrJoin(waits, "; ")));
  }
  return absl::OkStatus();
}

std::string KernelRuntime::Describe(const Instance& inst) const {
  std::string what = inst.waiting_what.empty() ? "nothing (never ran)" : inst.WaitText();
  return absl::StrCat(PeName(inst.pe), " request ", inst.request_id(),
                      inst.stream != 0 ? absl::StrCat(" stream ", inst.stream) : "", " waits on ",
                      what);
}

void KernelRuntime::Fail(Instance& inst, const std::string& reason) {
  throw KernelError(absl::StrCat(PeName(inst.pe), ": ", reason));
}

void KernelRuntime::Finish(Instance& inst) {
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
    sim_->context().op_log->AddCall(std::move(r));
  }
  if (!message.empty()) sim_->context().AddError(KernelFaultError(message));
}

// ---- arenas ----

Tensor KernelRuntime::Allocate(Instance& inst, ShapeArg shape, pb::DType dtype, Arena arena) {
  Cpu& cpu = CpuOf(inst.pe);
  const pb::Tcm& tcm = sim_->context().chip.sip().cube().pe().tcm();
  uint64_t bytes = sim::DTypeBytes(dtype);
  for (uint64_t d : shape) bytes *= d;
  if (bytes == 0) Fail(inst, absl::StrCat("allocation of an empty tensor ", absl::StrJoin(shape, "x")));
  uint64_t& top = arena == Arena::kScratch ? inst.scratch_top : cpu.persistent_top;
  const uint64_t base = arena == Arena::kScratch ? inst.scratch_base : tcm.scratch_bytes();
  const uint64_t limit = arena == Arena::kScratch ? inst.scratch_limit : cpu.persistent_limit;
  const uint64_t at = AlignUp(top);
  if (at + bytes > limit) {
    Fail(inst, absl::StrCat(arena == Arena::kScratch ? "scratch" : "persistent",
                            " arena overflow: ", bytes, " bytes needed, ", at - base, " of ",
                            limit - base, " bytes in use"));
  }
  top = at + bytes;
  return Tensor(pb::TCM, inst.pe, at, dtype, shape);
}

uint64_t KernelRuntime::EnterScope(Instance& inst) {
  if (recording()) RecordScope(inst, pb::CallRecord::SCOPE_ENTER, inst.scratch_top);
  return inst.scratch_top;
}

void KernelRuntime::LeaveScope(Instance& inst, uint64_t mark) {
  if (recording()) RecordScope(inst, pb::CallRecord::SCOPE_LEAVE, mark);
  Cpu& cpu = CpuOf(inst.pe);
  // A pending write into the released part [mark, scratch_top) of the scratch arena.
  for (const auto& [handle, range] : cpu.writes) {
    if (range.first < inst.scratch_top && range.second > mark) {
      if (inst.error.empty()) {
        inst.error = absl::StrCat(PeName(inst.pe), ": leaving scratch_scope while cmd ", handle,
                                  " still writes TCM [", range.first, ", ", range.second, ")");
      }
    }
  }
  inst.scratch_top = std::min(inst.scratch_top, mark);
}

void KernelRuntime::NoteWrite(Cpu& cpu, const Invocation& inv, uint64_t handle) {
  if (inv.written_end > inv.written_begin) {
    SetWrite(cpu.writes, handle, inv.written_begin, inv.written_end);
  }
}

// ---- calls ----

bool KernelRuntime::Submit(Instance& inst, std::shared_ptr<Invocation> inv,
                           std::coroutine_handle<> h) {
  if (recording()) RecordCall(inst, *inv);
  inst.resume = h;
  inst.pending = std::move(inv);
  return !TryIssue(inst);
}

// ---- recording a trace ----

pb::CallRecord KernelRuntime::NewCallRecord(Instance& inst, pb::CallRecord::Kind kind) {
  pb::CallRecord r;
  r.set_instance(inst.ordinal);
  r.set_index(inst.calls++);
  r.set_kind(kind);
  return r;
}

uint64_t KernelRuntime::CallOf(const Instance& inst, uint64_t handle) const {
  if (handle == 0) return 0;
  AHBM_CHECK(handle < inst.call_of_handle.size() && inst.call_of_handle[handle] != 0)
      << PeName(inst.pe) << " request " << inst.request_id() << ": handle " << handle
      << " was not made by this kernel instance (a trace records each instance on its own)";
  return inst.call_of_handle[handle];
}

void KernelRuntime::RecordScope(Instance& inst, pb::CallRecord::Kind kind, uint64_t mark) {
  pb::CallRecord r = NewCallRecord(inst, kind);
  r.set_scope_mark(mark);
  r.set_scope_top(inst.scratch_top);
  sim_->context().op_log->AddCall(std::move(r));
}

void KernelRuntime::RecordCall(Instance& inst, Invocation& inv) {
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
  sim_->context().op_log->AddCall(std::move(r));
}

bool KernelRuntime::TryIssue(Instance& inst) {
  if (!inst.error.empty()) throw KernelError(inst.error);
  Cpu& cpu = CpuOf(inst.pe);
  if (const uint64_t h = cpu.core.FirstPending(inst.pending->wait_for)) {
    inst.waiting_what = {Instance::WaitWhat::Kind::kAutoWait, h, 0, inst.pending, Peer::Pe(0)};
    cpu.core.Wait(inst, h, cpu.core.ready());
    return false;
  }
  switch (inst.pending->kind) {
    case Invocation::Kind::kWait:
      return IssueWait(inst, cpu, *inst.pending);
    case Invocation::Kind::kWaitAll:
      return IssueWaitAll(inst, cpu);
    case Invocation::Kind::kCommand:
    case Invocation::Kind::kSend:
    case Invocation::Kind::kRecv:
      break;
  }
  // Issued: the call leaves `pending` (the awaiting Call keeps the invocation alive).
  const std::shared_ptr<Invocation> inv = std::move(inst.pending);
  switch (inv->kind) {
    case Invocation::Kind::kCommand:
      return IssueCommand(inst, cpu, inv);
    case Invocation::Kind::kSend:
      return IssueSend(inst, cpu, *inv);
    default:
      return PostRecv(inst, cpu, *inv);
  }
}

bool KernelRuntime::IssueWait(Instance& inst, Cpu& cpu, const Invocation& inv) {
  if (inv.wait_id == 0 || cpu.core.IsDone(inv.wait_id)) {
    inst.pending.reset();
    return true;
  }
  inst.waiting_what = {Instance::WaitWhat::Kind::kWait, inv.wait_id, 0, nullptr, Peer::Pe(0)};
  cpu.core.Wait(inst, inv.wait_id, cpu.core.ready());
  return false;
}

bool KernelRuntime::IssueWaitAll(Instance& inst, Cpu& cpu) {
  if (inst.outstanding() == 0) {
    inst.pending.reset();
    return true;
  }
  inst.waiting_what = {Instance::WaitWhat::Kind::kAll, cpu.core.FirstOutstanding(inst),
                       inst.outstanding(), nullptr, Peer::Pe(0)};
  cpu.core.WaitAll(inst, cpu.core.ready());
  return false;
}

bool KernelRuntime::IssueCommand(Instance& inst, Cpu& cpu, const std::shared_ptr<Invocation>& inv) {
  const SimTime issue = cpu.core.IssueCommand(inst, inv->command, inv->wait_for, inv->held_for_recv,
                                              {inst.ordinal, inv->call});
  HandOrHold(cpu, *inv, issue);
  NoteWrite(cpu, *inv, inv->cmd_id);
  if (!sim::IsBlocking(inv->command)) return true;
  inst.waiting_what = {Instance::WaitWhat::Kind::kCmd, inv->cmd_id, 0, inv, Peer::Pe(0)};
  cpu.core.Wait(inst, inv->cmd_id, issue);
  return false;
}

// ---- held commands ----

void KernelRuntime::HandOrHold(Cpu& cpu, const Invocation& inv, SimTime issue) {
  // Inputs still in a posted receive: hand the command over when they have completed.
  HeldCommand held;
  held.hand = issue;
  for (uint64_t h : inv.held_for_recv) {
    if (cpu.core.IsDone(h)) {
      held.hand = std::max(held.hand, cpu.core.DoneAt(h));
    } else {
      held.receives.insert(h);
    }
  }
  if (!cpu.held.empty()) {
    // Behind a held command it depends on (the scheduler must have seen it first).
    std::visit(
        [&](const auto& c) {
          using T = std::decay_t<decltype(*c)>;
          if constexpr (std::is_same_v<T, pb::CompositeCmd> || std::is_same_v<T, pb::SoftmaxPvCmd> ||
                        std::is_same_v<T, pb::LseMergeCmd>) {
            for (uint64_t d : c->depends_on()) {
              for (const HeldCommand& x : cpu.held) {
                if (x.cmd_id == d) held.commands.insert(d);
              }
            }
          }
          if constexpr (std::is_same_v<T, pb::SoftmaxPvCmd>) {
            held.acc = AccKey(*c);
            for (const HeldCommand& x : cpu.held) {
              if (x.acc == held.acc) held.commands.insert(x.cmd_id);
            }
          }
        },
        inv.command);
  }
  if (held.receives.empty() && held.commands.empty()) {
    cpu.core.SendCommand(inv.command, held.hand);
    return;
  }
  held.command = inv.command;
  held.cmd_id = inv.cmd_id;
  if (held.acc.empty()) {
    if (const auto* pv = std::get_if<std::shared_ptr<const pb::SoftmaxPvCmd>>(&inv.command)) {
      held.acc = AccKey(**pv);
    }
  }
  cpu.held.push_back(std::move(held));
}

void KernelRuntime::ReleaseHeld(Cpu& cpu) {
  const SimTime now = Now();
  // Issue order: a command's held predecessors come before it, so one pass releases chains
  // (each sent after its predecessors, at the same time or later).
  for (auto it = cpu.held.begin(); it != cpu.held.end();) {
    if (!it->receives.empty() || !it->commands.empty()) {
      ++it;
      continue;
    }
    const SimTime at = std::max(it->hand, now);
    cpu.core.SendCommand(it->command, at);
    for (HeldCommand& x : cpu.held) {
      if (x.commands.erase(it->cmd_id) > 0) x.hand = std::max(x.hand, at);
    }
    it = cpu.held.erase(it);
  }
}

std::vector<uint64_t> KernelRuntime::RequestLatencyPs(uint32_t requests) const {
  AHBM_CHECK(requests > 0 && request_done_.size() % requests == 0)
      << request_done_.size() << " request ids do not split into " << requests << " requests";
  const size_t per = request_done_.size() / requests;
  std::vector<uint64_t> out(requests, 0);
  for (size_t id = 0; id < request_done_.size(); ++id) {
    out[id / per] = std::max(out[id / per], request_done_[id].value());
  }
  return out;
}

// ---- sim::CpuRuntime ----

void KernelRuntime::OnDone(sim::PeCpu& core, uint64_t handle, const sim::CpuInstance* owner,
                           SimTime end) {
  if (owner != nullptr) {
    SimTime& done = request_done_[owner->request_id()];
    done = std::max(done, end);
  }
  Cpu& cpu = CpuOf(core.pe());
  EraseWrite(cpu.writes, handle);
  if (cpu.IsReceive(handle) && !cpu.held.empty()) {
    for (HeldCommand& x : cpu.held) {
      if (x.receives.erase(handle) > 0) x.hand = std::max(x.hand, end);
    }
    ReleaseHeld(cpu);
  }
}

}  // namespace ahbm::kernels
