// KernelRuntime: runs `tl` kernel coroutines on the PE CPUs of a ChipSim (DESIGN §4).
//
// Each participating PE's CPU unit is a CAF actor whose handlers call into this runtime; the
// runtime keeps every PE's CPU state (its clock, its kernel instances, arenas, incoming
// messages) and the data-mode memory store. The engine runs one handler at a time, so this
// shared object is touched in event order only (deterministic).
//
// Contract — the PE CPU (times in ps; `cpu` = when the CPU is next free):
// - Instances on one CPU run one at a time; the CPU switches when the running one waits and
//   picks the next ready instance in request-id order (ties: instance creation order). Issue
//   costs serialise on `cpu`. An instance whose auto-wait turns out to be satisfied at the
//   instant it checked (the CPU had run ahead of the event clock) continues without cost.
// - A call: auto-wait first (stall until every pending input completed; a StallRecord), then
//   issue at cpu' = edge(max(cpu, now)) + cost; non-blocking calls continue at cpu', blocking
//   ones wait for their completion and pay resume_after_wait_cycles when they resume after a
//   real wait.
// - IPCQ send: blocks only if the queue lacks credit for the whole message at the send (the
//   sender knows its credit; read from the queue's model); then it waits for IpcqAccepted.
// - Every message carries its sender's request_id; a receive takes only its own request's
//   messages, oldest first, per source (several requests on one PE never see each other's data;
//   instances of one request on one PE share its messages in post order).
// - Recv from an IPCQ neighbour, when the queue's head message is its request's: pops the head
//   message's chunks as they arrive (streaming: a message larger than the queue passes) and
//   completes at its last chunk's arrival, or at the post if that is later.
// - IPCQ demultiplexing (multi-request PEs): the queue stays FIFO. If the head message's request
//   has no receive posted but another request's receive waits on the queue, the runtime pops
//   the head into a per-PE staging buffer (pops at max(now, that receive's post); the credit
//   returns to the sender as for any pop) and moves on to the next message; a later receive of
//   that request takes its oldest staged message with no pop, completing at max(post, its last
//   arrival). Staging holds at most kDemuxStagingBytes per PE (reserved at the top of the
//   persistent TCM arena on PEs hosting more than one request); a message that does not fit
//   stays at the head (head-of-line) until its own receive is posted. With no receive waiting
//   the head stays in the queue, holding its credit. Pops of one queue never go back in time.
// - A non-blocking scheduler command (composite, ex_composite, lse_merge) whose inputs include
//   a receive still pending (recv_async not yet complete) does not wait either: it issues as
//   usual (issue cost on `cpu`, IssueRecord at its issue time, the CPU continues at cpu') and
//   the runtime hands it to the scheduler when every such receive has completed, at
//   max(issue, the last of those completions) — as if the scheduler held it on that
//   dependency. Its depends_on lists only scheduler commands (the scheduler knows no receives);
//   the IssueRecord lists the receive handles separately in `recv_depends_on` (replay: hand the
//   command to the scheduler at max(issue_ps, each listed receive's completion), never put them
//   in the command's depends_on). Differences from a scheduler-side hold: the scheduler sees
//   the command at the hand-over, so its OpRecord issue_ps and its age (oldest-first
//   tie-break, composite admission and operand DMA) count from the hand-over, not from the
//   CPU's issue. Blocking commands and sends still auto-wait on a pending receive.
// - NOC: messages are delivered whole; a receive takes the oldest delivered message of its
//   request and completes at its delivery (or the post). No credit is involved.
// - Data mode: sends copy their payload when issued; receives write it at completion.
// - A kernel that throws KernelError stops; its message goes to the run's errors.
// - Deadlock: when no event is left and an instance still waits, Run() fails with
//   FailedPrecondition "deadlock: ..." naming, per PE, what it waits on (and, for a receive
//   stuck behind another request's message, that message).
#ifndef AHBMSIM_KERNELS_RUNTIME_RUNTIME_H_
#define AHBMSIM_KERNELS_RUNTIME_RUNTIME_H_

#include <coroutine>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "actors/chip_sim.h"
#include "actors/time.h"
#include "actors/units/pe_cpu_actor.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"
#include "proto/commands.pb.h"

namespace ahbm::kernels {

using sim::SimTime;

// Per-PE TCM for IPCQ messages popped ahead of their request's receive (see the contract).
// 64 KiB holds the reduce's (m, l, O) messages (a few KiB each) of several requests.
inline constexpr uint64_t kDemuxStagingBytes = 64 * 1024;
// One call as the runtime sees it.
struct Invocation {
  enum class Kind : uint8_t { kCommand, kSend, kRecv, kWait, kWaitAll };
  Kind kind = Kind::kCommand;
  sim::CpuCommand command;       // kCommand
  uint64_t cmd_id = 0;           // kCommand: its id; kRecv: the receive's handle
  bool blocking = false;
  uint32_t cost_cycles = 0;
  std::vector<uint64_t> wait_for;  // pending inputs: auto-wait (not for composites)
  // kCommand, non-blocking scheduler commands (composite, ex_composite, lse_merge): inputs
  // still pending in a posted receive. Issued at once; handed to the scheduler when they have
  // completed (see the contract); never in the scheduler command's depends_on.
  std::vector<uint64_t> held_for_recv;
  Tensor result;
  std::optional<Peer> peer;      // kSend, kRecv
  Tensor payload;                // kSend
  uint64_t wait_id = 0;          // kWait
  std::string what;              // "math_EXP", "composite", "send", ...
  uint64_t written_begin = 0;    // TCM bytes the command writes (scratch-scope check)
  uint64_t written_end = 0;
};

using KernelFn = std::function<Task<void>(Tl&)>;

struct Instance {
  uint32_t pe = 0;
  uint32_t request_id = 0;
  uint32_t order = 0;                 // creation order (tie-break)
  std::unique_ptr<Tl> tl;
  KernelFn fn;  // kept alive: a lambda coroutine refers to its closure
  std::optional<Task<void>> task;
  enum class State : uint8_t { kNew, kReady, kWaiting, kDone } state = State::kNew;
  std::coroutine_handle<> resume;     // where the coroutine continues
  std::shared_ptr<Invocation> pending;  // a call stalled before it issued
  uint64_t waiting_on = 0;            // handle (cmd / receive id) it waits for; 0 = none
  // What it waits on, rendered only for StallRecords (op log) and deadlock reports.
  struct WaitWhat {
    enum class Kind : uint8_t { kNone, kAutoWait, kWait, kAll, kCmd, kSend, kRecv };
    Kind kind = Kind::kNone;
    uint64_t id = 0;      // the command / receive / first outstanding handle
    uint64_t count = 0;   // kAll: pending handles; kSend: destination PE
    std::string what;     // kAutoWait, kCmd: the call ("math_EXP", "composite", ...)
    Peer peer = Peer::Pe(0);  // kRecv: the source; kSend: its direction
    bool empty() const { return kind == Kind::kNone; }
    void clear() { kind = Kind::kNone; }
  } waiting_what;
  bool waiting_all = false;
  bool waiting_send = false;          // an IPCQ send without credit
  uint64_t waiting_message = 0;
  SimTime wait_from;                  // cpu time the wait began
  bool real_wait_cost = true;         // pay resume_after_wait_cycles when it resumes
  uint64_t outstanding = 0;           // its handles not yet complete (Cpu::HandleState::owner)
  std::string error;                  // set when it failed
  // Its share of the PE's scratch arena (several instances on one PE split it evenly, so
  // one's scope never releases another's temporaries): [scratch_base, scratch_limit).
  uint64_t scratch_base = 0;
  uint64_t scratch_limit = 0;
  uint64_t scratch_top = 0;
};

class KernelRuntime {
 public:
  // `sim` outlives the runtime; `store` (data mode) may be null (timing mode).
  KernelRuntime(sim::ChipSim* sim, MemoryStore* store);
  ~KernelRuntime();

  // The ring order for "ring+"/"ring-" (global CUBE indices); optional.
  void SetRing(std::vector<uint32_t> cubes) { ring_ = std::move(cubes); }

  // Adds a kernel instance on global PE `pe` for `request_id`. Before Run().
  absl::Status AddKernel(uint32_t pe, uint32_t request_id, KernelFn fn);

  // Runs the simulation to the end; see the contract for errors.
  absl::Status Run();

  sim::ChipSim& sim() { return *sim_; }
  const topology::ChipIndex& index() const { return sim_->context().index; }
  MemoryStore* store() { return store_; }
  bool data_mode() const { return store_ != nullptr; }

  // ---- used by Tl ----
  uint64_t NextCmdId(uint32_t pe) { return CpuOf(pe).next_cmd++; }
  // Whether `handle` names a receive (recv / recv_async) posted on PE `pe`.
  bool IsReceive(uint32_t pe, uint64_t handle) const { return CpuOf(pe).IsReceive(handle); }
  Tensor Allocate(Instance& inst, std::vector<uint64_t> shape, pb::DType dtype, Arena arena);
  uint64_t ScratchTop(const Instance& inst) const { return inst.scratch_top; }
  void LeaveScope(Instance& inst, uint64_t mark);
  bool Done(uint32_t pe, uint64_t handle) const { return CpuOf(pe).IsDone(handle); }
  [[noreturn]] void Fail(Instance& inst, const std::string& reason);
  std::string PeName(uint32_t pe) const;
  const pb::IssueCostProfile& profile() const { return profile_; }
  std::vector<uint32_t> Ring() const { return ring_; }

  // Call protocol: returns true if the coroutine must suspend.
  bool Submit(Instance& inst, std::shared_ptr<Invocation> inv, std::coroutine_handle<> h);

  // ---- used by the CPU actors ----
  void OnStart(uint32_t pe);
  void OnCompletion(uint32_t pe, const pb::Completion& done);
  void OnCommandError(uint32_t pe, const pb::CommandError& error);
  void OnAccepted(uint32_t pe, const pb::IpcqAccepted& accepted);
  void OnArrival(uint32_t pe, const pb::IpcqArrival& arrival);
  void OnNocDelivered(uint32_t pe, const pb::NocDelivered& delivered);
  void OnCheck(uint32_t pe);

 private:
  struct IncomingMessage {
    uint64_t message_id = 0;
    uint32_t src_pe = 0;
    uint32_t request_id = 0;
    uint64_t bytes = 0;        // the whole message
    uint32_t chunks = 0;
    uint32_t arrived = 0;
    uint64_t arrived_bytes = 0;
    uint64_t popped_bytes = 0;  // pops issued (IPCQ)
    bool complete = false;     // every chunk arrived (IPCQ) / delivered (NOC)
    SimTime last_arrival;
    sim::UnitId queue = 0;     // IPCQ: the sender's queue unit (pops go there)
    bool staging = false;      // IPCQ: being popped into the staging buffer (bytes reserved)
    SimTime stage_from;        // the post of the receive that made it stage
    uint32_t stage_for = 0;    // that receive's request
    SimTime first_pop, last_pop;
  };
  struct PostedRecv {
    uint64_t handle = 0;
    Instance* inst = nullptr;
    SimTime posted;            // cpu time of the post
    Tensor dst;
  };
  // One incoming channel: an IPCQ queue from a neighbour, or NOC messages from one PE.
  struct Channel {
    std::deque<IncomingMessage> messages;  // IPCQ: the queue, head first; NOC: delivered
    std::deque<IncomingMessage> staged;    // IPCQ: popped into staging, oldest first
    std::deque<PostedRecv> recvs;          // not yet matched, in post order
    SimTime last_pop;                      // IPCQ: pops never go back in time
  };
  // A non-blocking scheduler command issued while a receive it reads was pending: the
  // scheduler gets it at max(issue, every such receive's completion). A command that depends
  // on a held one (its depends_on, or softmax_pv's chain on one accumulator) is held behind it.
  struct HeldCommand {
    sim::CpuCommand command;
    uint64_t cmd_id = 0;
    SimTime hand;                       // max(issue, completions / hand-overs so far)
    std::set<uint64_t> receives;        // still pending
    std::set<uint64_t> commands;        // held commands it must follow to the scheduler
    std::string acc;                    // softmax_pv: its accumulator ("pe@addr")
  };

  // Per handle (command or receive id, indexed by the id: ids are this CPU's next_cmd).
  struct HandleState {
    SimTime end;            // completion, when done
    bool done = false;
    bool receive = false;   // a receive posted here
    Instance* owner = nullptr;  // the instance it is outstanding for (null once complete)
  };

  struct Cpu {
    uint32_t pe = 0;
    sim::UnitId unit = 0;
    sim::UnitId scheduler = 0;
    SimTime cpu;
    uint64_t next_cmd = 1;
    // By handle id. A deque: growing it never moves or reallocates a large block (a vector's
    // doubling of a few KiB ran glibc's malloc_consolidate each time).
    std::deque<HandleState> handles;
    std::map<uint64_t, SimTime> done_other;  // completed ids this CPU never issued (none so far)
    std::vector<Instance*> instances;   // creation order
    bool running = false;
    SimTime hold_until;                 // no switch before this (run-ahead wait unresolved)
    Instance* holder = nullptr;
    uint64_t persistent_top = 0;
    uint64_t persistent_limit = 0;      // TCM top, minus the staging buffer (multi-request)
    uint64_t staged_bytes = 0;          // IPCQ staging in use (<= kDemuxStagingBytes)
    // Pending TCM writes: (handle, [begin, end)), ascending by handle.
    std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>> writes;
    std::map<uint64_t, Channel> channels;  // by ChannelKey: IPCQ queue unit / NOC source PE
    std::deque<HeldCommand> held;       // issued, waiting for receives (issue order)

    bool IsDone(uint64_t h) const {
      if (h < handles.size()) return handles[h].done;
      return !done_other.empty() && done_other.contains(h);
    }
    // The completion of a done handle.
    SimTime DoneAt(uint64_t h) const {
      return h < handles.size() ? handles[h].end : done_other.at(h);
    }
    bool IsReceive(uint64_t h) const { return h < handles.size() && handles[h].receive; }
    HandleState* Slot(uint64_t h) {
      if (h >= next_cmd) return nullptr;
      if (h >= handles.size()) handles.resize(h + 1);
      return &handles[h];
    }
  };

  Cpu& CpuOf(uint32_t pe) { return *cpu_by_pe_.at(pe); }
  // `handle` (this CPU's id) is outstanding for `inst` until it completes or fails.
  static void AddOutstanding(Cpu& cpu, Instance& inst, uint64_t handle);
  const Cpu& CpuOf(uint32_t pe) const { return *cpu_by_pe_.at(pe); }
  // Hands every held command whose receives and held predecessors are done to the scheduler.
  void ReleaseHeld(Cpu& cpu);
  SimTime Now() const;
  SimTime Edge(SimTime t) const { return clock_->NextEdge(t); }
  SimTime CyclesTime(uint32_t c) const { return clock_->ToTime(sim::Cycles(c)); }
  // Returns true if the call has issued and the coroutine may continue right away.
  bool TryIssue(Instance& inst);
  void Wait(Instance& inst, uint64_t handle, Instance::WaitWhat what, SimTime from, bool cost);
  // The text of a wait ("cmd 7 (composite)", "recv 9 from pe 1 (...) over the NOC", ...).
  std::string WaitText(const Instance& inst) const;
  void Complete(uint32_t pe, uint64_t handle, SimTime end);
  void Wake(Instance& inst, SimTime end);
  void RunCpu(uint32_t pe);
  void Resume(Instance& inst);
  void Finish(Instance& inst);
  // IPCQ: (1 << 32) | the queue unit; NOC: the source PE.
  uint64_t ChannelKey(uint32_t pe, const Peer& from) const;
  // "pe 1 (sip0.cube0.pe1) over IPCQ queue sip0.cube0.pe1.ipcq.W", "pe 9 (...) over the NOC".
  std::string DescribePeer(uint32_t pe, const Peer& peer) const;
  // Matches the channel's messages to posted receives (and stages, see the contract).
  void PumpChannel(uint32_t pe, uint64_t key);
  // Pops every arrived, unpopped chunk of `msg` at max(now, at, the channel's last pop).
  void PopArrived(Cpu& cpu, Channel& ch, IncomingMessage& msg, SimTime at);
  // Writes `msg` into `recv`'s buffer (data mode) and logs the receive; returns its handle.
  uint64_t Deliver(uint32_t pe, const IncomingMessage& msg, const PostedRecv& recv, SimTime end,
                   bool staged);
  // For a receive stuck behind another request's message: that message ("" otherwise).
  std::string HeadOfLine(const Instance& inst) const;
  void IssueStats(uint32_t pe, SimTime cost);
  // Op log: an IssueRecord (for replay) and an OpRecord "send_ipcq"/"send_noc" on the CPU unit.
  void RecordSend(const Instance& inst, const std::string& op, uint64_t message_id,
                  uint32_t dst_pe, uint64_t bytes, SimTime issue);
  std::string Describe(const Instance& inst) const;

  sim::ChipSim* sim_;
  MemoryStore* store_;
  std::optional<DataExecutor> executor_;
  std::unique_ptr<sim::DataPlane> data_plane_;
  std::optional<sim::ClockDomain> clock_;
  pb::IssueCostProfile profile_;
  std::map<uint32_t, Cpu> cpus_;
  std::vector<Cpu*> cpu_by_pe_;  // by global PE (null: no kernel there)
  std::vector<std::unique_ptr<Instance>> instances_;
  std::map<uint64_t, std::vector<uint8_t>> payloads_;  // message id -> bytes (data mode)
  std::map<sim::UnitId, int64_t> ipcq_unpopped_;  // per IPCQ queue: bytes sent - bytes popped
  uint64_t ipcq_queue_bytes_ = 0;
  uint64_t next_message_ = 1;
  std::vector<uint32_t> ring_;
  std::vector<std::string> errors_;
  bool ran_ = false;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_RUNTIME_H_
