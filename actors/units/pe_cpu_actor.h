// The PE CPU (DESIGN §4): one actor per PE whose program is one or more instances — kernel
// coroutines (kernels/runtime) or an injected command stream (command_stream.h). This file
// holds what every program shares: the issue step, the wait rule and the rule for switching
// between instances. The instances decide what to issue; the CPU decides when.
//
// Ports:
// - out DmaCmd / CompositeCmd / SoftmaxPvCmd / GemmCmd / MathCmd / LseMergeCmd to the PE's
//   scheduler (and whatever the runtime sends: IPCQ / NOC messages, pops).
// - in  Completion / CommandError from the scheduler; IpcqAccepted / IpcqArrival /
//   NocAccepted / NocHeld / NocDelivered, and NocRoomRequest from other PEs' CPUs (handed to
//   the CpuRuntime, which owns the PE's NOC endpoint); its own start and check events.
//
// Contract (times in ps; `cpu` = when the CPU is next free, starting at 0; `now` = the event
// clock, which the CPU may run ahead of: a non-blocking issue does not suspend, its command is
// sent with a delay of issue - now):
// - Issue step: a command (or send / receive post) of `cost` cycles issues at
//   issue = edge(max(cpu, now)) + cost and cpu becomes issue. Costs by command (ADR-0064):
//   DmaCmd load_cycles (store_cycles when the destination is HBM), CompositeCmd
//   composite_cycles, SoftmaxPvCmd and LseMergeCmd ex_composite_cycles, GemmCmd dot_cycles,
//   MathCmd primitive_cycles. The CPU unit's stats count issues (ops) and Σ costs (busy_ps);
//   the op log gets an IssueRecord per command (pe, request_id, cmd_id, issue_ps, blocking,
//   depends_on = the auto-waited handles then the command's own depends_on, recv_depends_on,
//   the command).
// - Blocking commands (MathCmd, GemmCmd, a DmaCmd to HBM = store) wait for their Completion;
//   load, composite, softmax_pv and lse_merge continue at once.
// - Wait rule: an instance waits from `from` (its cpu time) on one handle, on all its
//   outstanding handles, or on an event only its runtime knows (Wake). When the wait ends at
//   `end`: if end > from the wait was real — a StallRecord (from, end; unless the wait is not
//   logged) and, when it resumes, cpu = edge(max(cpu, end, now)) + resume_after_wait_cycles;
//   otherwise (the CPU had run ahead past the completion) it continues with no stall and no
//   cost, at cpu = max(cpu, from). The CPU unit's stall_ps sums the real logged waits' spans.
// - Switching: one instance runs at a time; when it waits, the CPU picks the next ready (or
//   new) instance in request-id order (ties: creation order). A wait that began ahead of the
//   event clock holds the CPU for its instance until the clock reaches it (a check event), so
//   a wait that turns out not to be real never lets another instance in. An instance waiting
//   for an answer that comes in the same instant (AwaitAnswer) holds the CPU until it comes.
// - A CommandError's message goes to UnitContext::errors (the run fails), of the kind
//   UnitContext::refused_command_kind (input for a command stream, kernel fault under the
//   kernel runtime); the instance that issued the command stops if it still runs.
#ifndef AHBMSIM_ACTORS_UNITS_PE_CPU_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_PE_CPU_ACTOR_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "actors/time.h"
#include "actors/units/unit_context.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

using CpuCommand =
    std::variant<std::shared_ptr<const pb::DmaCmd>, std::shared_ptr<const pb::CompositeCmd>,
                 std::shared_ptr<const pb::SoftmaxPvCmd>, std::shared_ptr<const pb::GemmCmd>,
                 std::shared_ptr<const pb::MathCmd>, std::shared_ptr<const pb::LseMergeCmd>>;

uint64_t CommandId(const CpuCommand& command);
bool IsBlocking(const CpuCommand& command);
// The issue cost of `command` under `profile`, in CPU cycles.
uint32_t IssueCycles(const pb::IssueCostProfile& profile, const CpuCommand& command);
// The profile named `name` of the chip's PE; null if there is none.
const pb::IssueCostProfile* FindIssueCostProfile(const pb::Chip& chip, const std::string& name);

class PeCpu;

// One program instance on a PE CPU: a kernel coroutine or an injected command stream.
// A recorded trace's kernel instance and call index + 1 (0: no recorded call).
struct CallKey {
  uint32_t instance = 0;
  uint64_t call = 0;
};

class CpuInstance {
 public:
  enum class State : uint8_t { kNew, kReady, kWaiting, kDone };

  explicit CpuInstance(uint32_t request_id) : request_id_(request_id) {}
  virtual ~CpuInstance() = default;

  // Runs the program from where it stopped until it waits (PeCpu::Wait / WaitAll / WaitEvent)
  // or ends; returns true when it has ended.
  virtual bool Run(PeCpu& cpu) = 0;
  // What it waits on (StallRecords, deadlock reports).
  virtual std::string WaitText() const = 0;

  uint32_t request_id() const { return request_id_; }
  State state() const { return state_; }
  bool waiting() const { return state_ == State::kWaiting; }
  uint64_t waiting_on() const { return waiting_on_; }  // 0: none (all / an event)
  uint64_t outstanding() const { return outstanding_; }  // handles not yet complete

 private:
  friend class PeCpu;
  uint32_t request_id_;
  State state_ = State::kNew;
  uint64_t waiting_on_ = 0;
  bool waiting_all_ = false;
  bool logged_ = true;        // a real wait writes a StallRecord
  bool real_wait_cost_ = true;  // pay resume_after_wait_cycles when it resumes
  SimTime wait_from_;         // cpu time the wait began; after Wake, resume no earlier
  uint64_t outstanding_ = 0;
};

// The runtime behind a CPU's instances (the kernel runtime): bookkeeping a completion touches
// and the messages only it understands. Null for an injected stream.
class CpuRuntime {
 public:
  virtual ~CpuRuntime() = default;
  // `handle` completed at `end`; called before waiting instances are woken. `owner`: the
  // instance it was outstanding for (null: none, e.g. a handle the program picked itself).
  virtual void OnDone(PeCpu& cpu, uint64_t handle, const CpuInstance* owner, SimTime end) = 0;
  virtual void OnIpcqAccepted(PeCpu& cpu, const pb::IpcqAccepted& accepted) = 0;
  virtual void OnIpcqArrival(PeCpu& cpu, const pb::IpcqArrival& arrival) = 0;
  virtual void OnNocDelivered(PeCpu& cpu, const pb::NocDelivered& delivered) = 0;
  virtual void OnNocAccepted(PeCpu& cpu, const pb::NocAccepted& accepted) = 0;
  virtual void OnNocHeld(PeCpu& cpu, const pb::NocHeld& held) = 0;
  virtual void OnNocRoomRequest(PeCpu& cpu, const pb::NocRoomRequest& request) = 0;
};

class PeCpu : public CpuProbe, public Engine::TimerHandler {
 public:
  // The CPU of global PE `pe`; ctx.issue_cost_profile must name a profile of the chip.
  PeCpu(UnitContext& ctx, uint32_t pe, CpuRuntime* runtime);

  // Instances, in creation order; they outlive the CPU's events. Before the first event.
  void AddInstance(CpuInstance* inst) { instances_.push_back(inst); }
  // Spawns the CPU actor (unit kPeCpu of the PE) and sends its start event at time 0.
  void Start();

  uint32_t pe() const { return pe_; }
  UnitId unit() const { return unit_; }
  const pb::IssueCostProfile& profile() const { return profile_; }
  SimTime now() const { return ctx_.engine->now(); }
  // max(cpu, now): when a wait that begins now starts.
  SimTime ready() const { return std::max(cpu_, now()); }

  // ---- handles: command / receive ids of this CPU ----
  // A fresh id (1, 2, ...); ids a program picks itself (streams) are tracked by value.
  uint64_t NextId() { return next_id_++; }
  bool IsDone(uint64_t h) const;
  SimTime DoneAt(uint64_t h) const;  // the completion of a done handle
  // The first pending handle of `handles` (0: all done) — the auto-wait rule's test.
  uint64_t FirstPending(std::span<const uint64_t> handles) const;
  // `handle` is outstanding for `inst` until it completes or fails.
  void AddOutstanding(CpuInstance& inst, uint64_t handle);
  // The lowest outstanding handle of `inst` (0: none).
  uint64_t FirstOutstanding(const CpuInstance& inst) const;

  // ---- the issue step ----
  // Charges `cycles` on the CPU clock; returns the issue time (cpu becomes it).
  SimTime Charge(uint32_t cycles);
  // Issues `command` for `inst`: charges its cost, writes its IssueRecord and marks it
  // outstanding; returns the issue time. The caller sends it (SendCommand) at once or later.
  // `call`: the recorded trace's (instance, call index + 1) of the command, for its IssueRecord.
  SimTime IssueCommand(CpuInstance& inst, const CpuCommand& command,
                       std::span<const uint64_t> wait_for,
                       std::span<const uint64_t> recv_depends_on = {}, CallKey call = {});
  // Sends `command` to the PE scheduler at `at` (>= now).
  void SendCommand(const CpuCommand& command, SimTime at);

  // ---- the wait rule ----
  // `inst` waits from `from` on `handle` (logged: a real wait writes a StallRecord).
  void Wait(CpuInstance& inst, uint64_t handle, SimTime from, bool logged = true);
  // `inst` waits from `from` until none of its handles is outstanding.
  void WaitAll(CpuInstance& inst, SimTime from);
  // `inst` waits from `from` until its runtime calls Wake.
  void WaitEvent(CpuInstance& inst, SimTime from);
  // Ends `inst`'s wait at `end`; it runs again at the next RunReady.
  void Wake(CpuInstance& inst, SimTime end);
  // `inst`, waiting, asked another unit a question whose answer comes in this instant (a NOC
  // endpoint's room): no instance runs on this CPU until AnswerCame, so the answer finds the
  // CPU as the question left it.
  void AwaitAnswer(CpuInstance& inst);
  // The answer came: if it woke the instance, that instance runs first (at the next RunReady).
  void AnswerCame();
  // `handle` completed at `end`: the runtime's bookkeeping, then every wait it ends; then
  // RunReady.
  void Complete(uint64_t handle, SimTime end);
  // The scheduler's op record riding on `done` (pb::Completion.scheduler_record), into the op
  // log before anything this CPU records at this event.
  void AddCarriedRecord(const pb::Completion& done);
  // Runs ready instances (switching rule) until none is ready.
  void RunReady();

  // ---- events (the actor's handlers and its own wake-ups) ----
  // kTimerStart: the first RunReady (posted by Start); kTimerCheck: OnCheck (posted by Wait
  // when it holds the CPU until the event clock reaches a wait's start).
  static constexpr uint64_t kTimerStart = 0;
  static constexpr uint64_t kTimerCheck = 1;
  void OnTimer(uint64_t what) override;
  void OnCheck();
  void OnCommandError(const pb::CommandError& error);
  CpuRuntime* runtime() const { return runtime_; }

  // CpuProbe (the PE scheduler's question).
  bool QuietUntil(uint64_t handle, uint64_t received) const override;

 private:
  struct HandleState {
    SimTime end;
    bool done = false;
    CpuInstance* owner = nullptr;  // outstanding for it (null once complete)
  };
  HandleState* Slot(uint64_t h);
  const HandleState* Find(uint64_t h) const;
  void Resume(CpuInstance& inst);

  UnitContext& ctx_;
  CpuRuntime* runtime_;
  uint32_t pe_;
  UnitId unit_;
  UnitId scheduler_;
  pb::IssueCostProfile profile_;
  ClockDomain clock_;
  pb::UnitStats* stats_;
  SimTime cpu_;
  uint64_t next_id_ = 1;
  // Ids from NextId, by id. A deque: growing it never moves or reallocates a large block.
  std::deque<HandleState> handles_;
  std::map<uint64_t, HandleState> other_;  // ids the program picked itself
  std::vector<CpuInstance*> instances_;
  uint64_t commands_issued_ = 0;  // IssueCommand calls
  uint64_t commands_sent_ = 0;    // SendCommand calls (fewer: commands held by the runtime)
  bool running_ = false;
  SimTime hold_until_;  // no switch before this (a run-ahead wait unresolved)
  CpuInstance* holder_ = nullptr;
  CpuInstance* asking_ = nullptr;  // AwaitAnswer: the CPU is its until AnswerCame
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_PE_CPU_ACTOR_H_
