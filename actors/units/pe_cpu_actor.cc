#include "actors/units/pe_cpu_actor.h"

#include <algorithm>
#include <utility>

#include "actors/engine.h"
#include "actors/msg.h"
#include "actors/unit_actor.h"
#include "base/check.h"
#include "base/errors.h"
#include "caf/event_based_actor.hpp"
#include "proto/trace.pb.h"

namespace ahbm::sim {
namespace {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// The command into its IssueRecord field; its own depends_on after the auto-waited handles.
void FillIssue(const CpuCommand& command, pb::IssueRecord& rec) {
  std::visit(Overloaded{
                 [&](const std::shared_ptr<const pb::DmaCmd>& c) { *rec.mutable_dma() = *c; },
                 [&](const std::shared_ptr<const pb::CompositeCmd>& c) {
                   *rec.mutable_composite() = *c;
                   for (uint64_t d : c->depends_on()) rec.add_depends_on(d);
                 },
                 [&](const std::shared_ptr<const pb::SoftmaxPvCmd>& c) {
                   *rec.mutable_softmax_pv() = *c;
                   for (uint64_t d : c->depends_on()) rec.add_depends_on(d);
                 },
                 [&](const std::shared_ptr<const pb::GemmCmd>& c) { *rec.mutable_gemm() = *c; },
                 [&](const std::shared_ptr<const pb::MathCmd>& c) { *rec.mutable_math() = *c; },
                 [&](const std::shared_ptr<const pb::LseMergeCmd>& c) {
                   *rec.mutable_lse_merge() = *c;
                   for (uint64_t d : c->depends_on()) rec.add_depends_on(d);
                 },
             },
             command);
}

ClockDomain PeClock(const pb::Chip& chip) {
  absl::StatusOr<ClockDomain> clock = ClockDomain::FromMHz(chip.sip().cube().pe().clock_mhz());
  AHBM_CHECK(clock.ok()) << clock.status().message();
  return *clock;
}

const pb::IssueCostProfile& ProfileOf(const UnitContext& ctx) {
  const pb::IssueCostProfile* profile = FindIssueCostProfile(ctx.chip, ctx.issue_cost_profile);
  AHBM_CHECK(profile != nullptr) << "no issue cost profile '" << ctx.issue_cost_profile << "'";
  return *profile;
}

// The CPU actor: every handler forwards to its PeCpu.
caf::behavior PeCpuBehavior(UnitActor* self, PeCpu* cpu) {
  return self->Handlers(
      [cpu](const Msg<pb::Completion>& m) -> NoReply {
        if (!m->scheduler_record().empty()) cpu->AddCarriedRecord(*m);
        cpu->Complete(m->cmd_id(), SimTime(m->end_ps()));
        return {};
      },
      [cpu](const Msg<pb::CommandError>& m) { cpu->OnCommandError(*m); },
      [cpu](const Msg<pb::IpcqAccepted>& m) {
        AHBM_CHECK(cpu->runtime() != nullptr) << "IpcqAccepted on a stream CPU";
        cpu->runtime()->OnIpcqAccepted(*cpu, *m);
      },
      [cpu](const Msg<pb::IpcqArrival>& m) {
        AHBM_CHECK(cpu->runtime() != nullptr) << "IpcqArrival on a stream CPU";
        cpu->runtime()->OnIpcqArrival(*cpu, *m);
      },
      [cpu](const Msg<pb::NocDelivered>& m) {
        AHBM_CHECK(cpu->runtime() != nullptr) << "NocDelivered on a stream CPU";
        cpu->runtime()->OnNocDelivered(*cpu, *m);
      },
      [cpu](const Msg<pb::NocAccepted>& m) {
        AHBM_CHECK(cpu->runtime() != nullptr) << "NocAccepted on a stream CPU";
        cpu->runtime()->OnNocAccepted(*cpu, *m);
      },
      [cpu](const Msg<pb::NocHeld>& m) {
        AHBM_CHECK(cpu->runtime() != nullptr) << "NocHeld on a stream CPU";
        cpu->runtime()->OnNocHeld(*cpu, *m);
      },
      [cpu](const Msg<pb::NocRoomRequest>& m) {
        AHBM_CHECK(cpu->runtime() != nullptr) << "NocRoomRequest on a stream CPU";
        cpu->runtime()->OnNocRoomRequest(*cpu, *m);
      });
}

}  // namespace

uint64_t CommandId(const CpuCommand& command) {
  return std::visit([](const auto& c) { return c->cmd_id(); }, command);
}

bool IsBlocking(const CpuCommand& command) {
  return std::visit(Overloaded{
                        [](const std::shared_ptr<const pb::DmaCmd>& c) { return c->dst().space() == pb::HBM; },
                        [](const std::shared_ptr<const pb::CompositeCmd>&) { return false; },
                        [](const std::shared_ptr<const pb::SoftmaxPvCmd>&) { return false; },
                        [](const std::shared_ptr<const pb::GemmCmd>&) { return true; },
                        [](const std::shared_ptr<const pb::MathCmd>&) { return true; },
                        [](const std::shared_ptr<const pb::LseMergeCmd>&) { return false; },
                    },
                    command);
}

uint32_t IssueCycles(const pb::IssueCostProfile& p, const CpuCommand& command) {
  return std::visit(
      Overloaded{
          [&](const std::shared_ptr<const pb::DmaCmd>& c) {
            return c->dst().space() == pb::HBM ? p.store_cycles() : p.load_cycles();
          },
          [&](const std::shared_ptr<const pb::CompositeCmd>&) { return p.composite_cycles(); },
          [&](const std::shared_ptr<const pb::SoftmaxPvCmd>&) { return p.ex_composite_cycles(); },
          [&](const std::shared_ptr<const pb::GemmCmd>&) { return p.dot_cycles(); },
          [&](const std::shared_ptr<const pb::MathCmd>&) { return p.primitive_cycles(); },
          [&](const std::shared_ptr<const pb::LseMergeCmd>&) { return p.ex_composite_cycles(); },
      },
      command);
}

const pb::IssueCostProfile* FindIssueCostProfile(const pb::Chip& chip, const std::string& name) {
  for (const pb::IssueCostProfile& p : chip.sip().cube().pe().issue_cost_profiles()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

PeCpu::PeCpu(UnitContext& ctx, uint32_t pe, CpuRuntime* runtime)
    : ctx_(ctx),
      runtime_(runtime),
      pe_(pe),
      unit_(ctx.index.PeUnit(topology::UnitKind::kPeCpu, ctx.index.PeOf(pe)).value()),
      scheduler_(ctx.index.PeUnit(topology::UnitKind::kPeScheduler, ctx.index.PeOf(pe)).value()),
      profile_(ProfileOf(ctx)),
      clock_(PeClock(ctx.chip)),
      stats_(&ctx.stats.At(unit_)) {}

void PeCpu::Start() {
  Engine& engine = *ctx_.engine;
  engine.Register(unit_, engine.system().spawn(PeCpuBehavior, this));
  if (ctx_.cpus.size() <= pe_) ctx_.cpus.resize(pe_ + 1, nullptr);
  ctx_.cpus[pe_] = this;
  engine.SetTimerHandler(unit_, this);
  engine.SetTimer(unit_, SimTime(0), kTimerStart);
}

void PeCpu::OnTimer(uint64_t what) {
  AHBM_CHECK(what == kTimerStart || what == kTimerCheck) << "PE CPU wake-up " << what;
  if (what == kTimerStart) {
    RunReady();
  } else {
    OnCheck();
  }
}

PeCpu::HandleState* PeCpu::Slot(uint64_t h) {
  if (h >= next_id_) return &other_[h];
  if (h >= handles_.size()) handles_.resize(h + 1);
  return &handles_[h];
}

const PeCpu::HandleState* PeCpu::Find(uint64_t h) const {
  if (h < handles_.size()) return &handles_[h];
  if (h < next_id_ || other_.empty()) return nullptr;
  auto it = other_.find(h);
  return it == other_.end() ? nullptr : &it->second;
}

bool PeCpu::IsDone(uint64_t h) const {
  const HandleState* s = Find(h);
  return s != nullptr && s->done;
}

SimTime PeCpu::DoneAt(uint64_t h) const {
  const HandleState* s = Find(h);
  AHBM_CHECK(s != nullptr && s->done) << "handle " << h << " is not done";
  return s->end;
}

uint64_t PeCpu::FirstPending(std::span<const uint64_t> handles) const {
  for (uint64_t h : handles) {
    if (!IsDone(h)) return h;
  }
  return 0;
}

void PeCpu::AddOutstanding(CpuInstance& inst, uint64_t handle) {
  HandleState* slot = Slot(handle);
  if (slot->owner == &inst) return;
  slot->owner = &inst;
  ++inst.outstanding_;
}

uint64_t PeCpu::FirstOutstanding(const CpuInstance& inst) const {
  for (uint64_t h = 0; h < handles_.size(); ++h) {
    if (handles_[h].owner == &inst) return h;
  }
  for (const auto& [h, s] : other_) {
    if (s.owner == &inst) return h;
  }
  return 0;
}

SimTime PeCpu::Charge(uint32_t cycles) {
  const SimTime start = clock_.NextEdge(ready());
  const SimTime issue = start + clock_.ToTime(Cycles(cycles));
  stats_->set_ops(stats_->ops() + 1);
  stats_->set_busy_ps(stats_->busy_ps() + (issue - start).value());
  cpu_ = issue;
  return issue;
}

SimTime PeCpu::IssueCommand(CpuInstance& inst, const CpuCommand& command,
                            std::span<const uint64_t> wait_for,
                            std::span<const uint64_t> recv_depends_on, CallKey call) {
  const SimTime issue = Charge(IssueCycles(profile_, command));
  const uint64_t id = CommandId(command);
  ++commands_issued_;
  if (observe::OpLog* log = ctx_.op_log) {
    pb::IssueRecord rec;
    rec.set_pe(pe_);
    rec.set_request_id(inst.request_id());
    rec.set_cmd_id(id);
    rec.set_issue_ps(issue.value());
    rec.set_blocking(IsBlocking(command));
    for (uint64_t d : wait_for) rec.add_depends_on(d);
    for (uint64_t d : recv_depends_on) rec.add_recv_depends_on(d);
    if (call.call != 0) {
      rec.set_instance(call.instance);
      rec.set_call(call.call);
    }
    FillIssue(command, rec);
    log->AddIssue(std::move(rec));
  }
  AddOutstanding(inst, id);
  return issue;
}

void PeCpu::SendCommand(const CpuCommand& command, SimTime at) {
  const SimTime t = now();
  ++commands_sent_;
  std::visit([&](const auto& c) { ctx_.engine->Send(unit_, at - t, scheduler_, c); }, command);
}

bool PeCpu::QuietUntil(uint64_t handle, uint64_t received) const {
  if (commands_sent_ != commands_issued_ || received != commands_sent_) return false;
  const CpuInstance* waiting = nullptr;
  for (const CpuInstance* inst : instances_) {
    if (inst->state_ == CpuInstance::State::kDone) continue;
    if (waiting != nullptr || inst->state_ != CpuInstance::State::kWaiting) return false;
    waiting = inst;
  }
  return waiting != nullptr && !waiting->waiting_all_ && waiting->waiting_on_ == handle;
}

void PeCpu::Wait(CpuInstance& inst, uint64_t handle, SimTime from, bool logged) {
  inst.state_ = CpuInstance::State::kWaiting;
  inst.waiting_on_ = handle;
  inst.wait_from_ = from;
  inst.logged_ = logged;
  // The CPU ran ahead of the event clock: whether this wait is real is known only at `from`;
  // do not hand the CPU to another instance before then.
  const SimTime t = now();
  if (from <= t) return;
  for (CpuInstance* other : instances_) {
    if (other != &inst && (other->state_ == CpuInstance::State::kReady ||
                           other->state_ == CpuInstance::State::kNew)) {
      hold_until_ = from;
      holder_ = &inst;
      ctx_.engine->SetTimer(unit_, from - t, kTimerCheck);
      return;
    }
  }
}

void PeCpu::WaitAll(CpuInstance& inst, SimTime from) {
  Wait(inst, /*handle=*/0, from);
  inst.waiting_all_ = true;
}

void PeCpu::WaitEvent(CpuInstance& inst, SimTime from) { Wait(inst, /*handle=*/0, from); }

void PeCpu::Wake(CpuInstance& inst, SimTime end) {
  const bool real = end > inst.wait_from_;
  if (real && inst.logged_) {
    stats_->set_stall_ps(stats_->stall_ps() + (end - inst.wait_from_).value());
    if (observe::OpLog* log = ctx_.op_log) {
      pb::StallRecord rec;
      rec.set_pe(pe_);
      rec.set_request_id(inst.request_id());
      rec.set_waits_on(inst.WaitText());
      rec.set_cmd_id(inst.waiting_on_);
      rec.set_from_ps(inst.wait_from_.value());
      rec.set_to_ps(end.value());
      log->AddStall(std::move(rec));
    }
  }
  inst.state_ = CpuInstance::State::kReady;
  inst.waiting_on_ = 0;
  inst.waiting_all_ = false;
  inst.real_wait_cost_ = real && inst.real_wait_cost_;
  inst.wait_from_ = std::max(end, inst.wait_from_);
}

void PeCpu::AwaitAnswer(CpuInstance& inst) {
  AHBM_CHECK(asking_ == nullptr && inst.state_ == CpuInstance::State::kWaiting)
      << "pe " << pe_ << ": a second question before an answer";
  asking_ = &inst;
}

void PeCpu::AnswerCame() {
  AHBM_CHECK(asking_ != nullptr) << "pe " << pe_ << ": an answer to no question";
  if (asking_->state_ == CpuInstance::State::kReady) holder_ = asking_;
  asking_ = nullptr;
}

void PeCpu::AddCarriedRecord(const pb::Completion& done) {
  AHBM_CHECK(ctx_.op_log != nullptr) << "a scheduler record without an op log";
  pb::OpRecord record;
  AHBM_CHECK(record.ParseFromString(done.scheduler_record()))
      << "Completion of cmd " << done.cmd_id() << ": bad scheduler record";
  ctx_.op_log->AddOp(std::move(record));
}

void PeCpu::Complete(uint64_t handle, SimTime end) {
  HandleState* slot = Slot(handle);
  slot->done = true;
  slot->end = end;
  const CpuInstance* owner = slot->owner;
  if (slot->owner != nullptr) {
    --slot->owner->outstanding_;
    slot->owner = nullptr;
  }
  if (runtime_ != nullptr) runtime_->OnDone(*this, handle, owner, end);
  for (CpuInstance* inst : instances_) {
    if (inst->state_ != CpuInstance::State::kWaiting) continue;
    if ((handle != 0 && inst->waiting_on_ == handle) ||
        (inst->waiting_all_ && inst->outstanding_ == 0)) {
      Wake(*inst, end);
    }
  }
  RunReady();
}

void PeCpu::RunReady() {
  if (running_) return;
  running_ = true;
  while (asking_ == nullptr) {
    CpuInstance* next = nullptr;
    if (holder_ != nullptr) {
      if (holder_->state_ == CpuInstance::State::kReady) {
        next = holder_;
      } else if (now() < hold_until_) {
        break;
      }
      holder_ = nullptr;
    }
    if (next == nullptr) {
      for (CpuInstance* inst : instances_) {
        if (inst->state_ != CpuInstance::State::kReady && inst->state_ != CpuInstance::State::kNew) {
          continue;
        }
        if (next == nullptr || inst->request_id() < next->request_id()) next = inst;
      }
    }
    if (next == nullptr) break;
    Resume(*next);
  }
  running_ = false;
}

void PeCpu::Resume(CpuInstance& inst) {
  if (inst.state_ != CpuInstance::State::kNew) {
    cpu_ = std::max(cpu_, inst.wait_from_);
    if (inst.real_wait_cost_) {
      cpu_ = clock_.NextEdge(ready()) + clock_.ToTime(Cycles(profile_.resume_after_wait_cycles()));
    }
  }
  inst.real_wait_cost_ = true;
  inst.state_ = CpuInstance::State::kReady;
  if (inst.Run(*this)) {
    inst.state_ = CpuInstance::State::kDone;
    return;
  }
  AHBM_CHECK(inst.state_ == CpuInstance::State::kWaiting)
      << "pe " << pe_ << ": an instance stopped without waiting";
}

void PeCpu::OnCheck() {
  if (now() >= hold_until_) holder_ = nullptr;
  RunReady();
}

void PeCpu::OnCommandError(const pb::CommandError& error) {
  ctx_.AddError(WithKind(absl::InvalidArgumentError(error.message()), ctx_.refused_command_kind));
  HandleState* slot = Slot(error.cmd_id());
  CpuInstance* inst = slot->owner;
  if (inst == nullptr) return;
  slot->owner = nullptr;
  --inst->outstanding_;
  inst->state_ = CpuInstance::State::kDone;  // stopped: it does not run again
}

}  // namespace ahbm::sim
