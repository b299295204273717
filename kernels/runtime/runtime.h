// KernelRuntime: runs `tl` kernel coroutines on the PE CPUs of a ChipSim (DESIGN §4).
//
// Each participating PE gets a sim::PeCpu (actors/units/pe_cpu_actor.h: the issue step, the
// wait rule, switching between instances in request-id order) whose instances are this PE's
// kernel coroutines (instance.h); this runtime is the CPU's sim::CpuRuntime and keeps what
// only kernels have: arenas, incoming messages, held commands and the data-mode memory
// store. The engine runs one handler at a time, so this shared object is touched in event
// order only (deterministic).
//
// Contract (times in ps; `cpu` = when the CPU is next free), on top of the PE CPU's:
// - A call: auto-wait first (the CPU waits on the first pending input; a StallRecord "cmd <id>
//   (auto-wait before <call>)" when real), then the issue step; non-blocking calls continue at
//   once, blocking ones wait for their completion (a StallRecord "cmd <id> (<call>)").
//   Send and receive posts cost send_cycles / recv_cycles; Wait and WaitAll cost nothing.
//   Each kind of call has its own issue function (IssueCommand, IssueSend, PostRecv,
//   IssueWait, IssueWaitAll).
// - IPCQ send: blocks only if the queue lacks credit for the whole message at the send (the
//   sender knows its credit; read from the queue's model); then it waits for IpcqAccepted.
// - Message streams: every instance has a stream besides its request (AddKernel); a request's
//   instances that message each other share one (decode and prefill: the KV head; the fan-out
//   baselines: the query head), and no two instances on one PE have the same (request,
//   stream). Every message carries its sender's (request, stream); a receive takes only
//   messages of its own (request, stream), oldest first, per source. So two instances on one
//   PE never see each other's data, whether of two requests or of two KV heads of one request.
// - A receive whose buffer holds another number of elements than its message fails its
//   instance with a kernel error naming both (timing and data mode alike).
// - Recv from an IPCQ neighbour, when the queue's head message is its (request, stream)'s:
//   pops the head message's chunks as they arrive (streaming: a message larger than the queue
//   passes) and completes at its last chunk's arrival, or at the post if that is later. A pop
//   is issued at max(now, the post, the queue's last pop) and names the chunks seen to have
//   arrived (IpcqPop bytes); a chunk arriving before that time is popped by a pop of its own at
//   its arrival.
// - IPCQ demultiplexing (PEs hosting several instances): the queue stays FIFO. If the head
//   message's (request, stream) has no receive posted but another instance's receive waits on
//   the queue, the runtime pops the head into a per-PE staging buffer (pops at max(now, that
//   receive's post); the credit returns to the sender as for any pop) and moves on to the next
//   message; a later receive of that (request, stream) takes its oldest staged message with no
//   pop, completing at max(post, its last arrival). Staging holds at most kDemuxStagingBytes
//   per PE (reserved at the top of the persistent TCM arena on PEs hosting more than one
//   instance); a message that does not fit stays at the head (head-of-line) until its own
//   receive is posted. With no receive waiting the head stays in the queue, holding its credit.
//   Pops of one queue never go back in time.
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
// - NOC send: the message leaves its PE only when the destination PE's endpoint has room for
//   it (sim::NocEndpointModel, noc.endpoint_queue_bytes, its flow the (request, stream)): the
//   receive for it (the k-th receive of its (request, stream) from this source takes the k-th
//   message) is posted — it lands in that buffer, whatever its size — or the endpoint queue
//   has credit for the whole message (bytes, back when a receive takes the message). The
//   destination CPU owns its endpoint: the sender keeps its NocSend and asks with a
//   NocRoomRequest (ready = the issue) in the instant it handles the send, holding its CPU
//   (PeCpu::AwaitAnswer); the endpoint decides then (its credit counts calls in that order) and
//   answers in the same instant. With room at the issue (NocAccepted at the issue) the send
//   continues as if it had not stopped — no stall, no resume cost, no other instance in
//   between; otherwise (NocHeld) the CPU blocks, as an IPCQ send without credit, until the
//   NocAccepted at the departure, which hands the NocSend to the router and wakes the sender.
//   No chunking: a message larger than the free queue waits whole for credit or its receive;
//   post receives first (recv_async) to send blocks larger than the queue. The destination PE
//   must run a kernel instance (its CPU is the endpoint).
// - NOC receive: messages are delivered whole; a receive takes the oldest delivered message of
//   its (request, stream) and completes at its delivery (or the post); taking a queued message
//   returns its credit at that completion.
// - Data mode: sends copy their payload when issued; receives write it at completion.
// - A kernel that throws KernelError stops; its message goes to the run's errors as a
//   KernelFaultError (base/errors.h), and so does a command its PE refuses.
// - Deadlock: when no event is left and an instance still waits, Run() fails with a
//   DeadlockError "deadlock: ..." naming, per PE, what it waits on (and, for a receive
//   stuck behind another instance's message, that message; for a NOC send without room, the
//   destination endpoint's queue in use and that no receive is posted for it).
#ifndef AHBMSIM_KERNELS_RUNTIME_RUNTIME_H_
#define AHBMSIM_KERNELS_RUNTIME_RUNTIME_H_

#include <coroutine>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "actors/chip_sim.h"
#include "base/check.h"
#include "base/errors.h"
#include "actors/models/noc_endpoint_model.h"
#include "actors/time.h"
#include "actors/units/pe_cpu_actor.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/call.h"
#include "kernels/runtime/instance.h"
#include "kernels/runtime/messaging.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"
#include "proto/commands.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels {

using sim::SimTime;

class KernelRuntime : public sim::CpuRuntime {
 public:
  // `sim` outlives the runtime; `store` (data mode) may be null (timing mode). A command a PE
  // refuses is `refused_command_kind` (base/errors.h): the kernel's fault, unless the calls
  // come from elsewhere (a replayed trace: the input's).
  KernelRuntime(sim::ChipSim* sim, MemoryStore* store,
                ErrorKind refused_command_kind = ErrorKind::kKernelFault);
  ~KernelRuntime() override;

  // The ring order for "ring+"/"ring-" (global CUBE indices); optional.
  void SetRing(std::vector<uint32_t> cubes) { ring_ = std::move(cubes); }

  // One-group runs (kernels/launch/launch.h LaunchOptions::one_group): AddKernel drops, with
  // OK, an instance on a PE outside `cubes` (its CUBE set mirrors the simulated one). Before
  // any AddKernel.
  void KeepOnlyCubes(std::set<uint32_t> cubes) { kept_cubes_ = std::move(cubes); }

  // A message's id: drawn by its sending PE alone, (pe + 1) * kMessageIdsPerPe + its n-th send
  // (n from 1), so it reads as "PE pe's n-th message" and does not depend on the order other
  // PEs' handlers run in (an island run labels messages as a single heap does).
  static constexpr uint64_t kMessageIdsPerPe = 1'000'000'000;
  static uint64_t MessageId(uint32_t pe, uint64_t n) {
    AHBM_CHECK(n > 0 && n < kMessageIdsPerPe) << "pe " << pe << " sent message " << n;
    return (uint64_t{pe} + 1) * kMessageIdsPerPe + n;
  }

  // Adds a kernel instance on global PE `pe` for `request_id` with message stream `stream`
  // (the contract); InvalidArgument if `pe` has an instance of that (request, stream) already.
  // Before Run(). Without a stream: stream 0.
  absl::Status AddKernel(uint32_t pe, uint32_t request_id, uint32_t stream, KernelFn fn);
  absl::Status AddKernel(uint32_t pe, uint32_t request_id, KernelFn fn) {
    return AddKernel(pe, request_id, /*stream=*/0, std::move(fn));
  }

  // Runs the simulation to the end; see the contract for errors.
  absl::Status Run();

  // After Run(), per request of the workload: when it finished — the latest completion of a
  // command, send or receive any of its instances issued, i.e. its output written (each
  // kernel's last act is storing its O); the report's request_latency_ps (proto/report.proto).
  // The instances' request ids (0 .. the largest AddKernel gave) fall into `requests`
  // contiguous blocks of equal size, one per request (BASELINE_FANOUT_GROUP: request u's query
  // rows are u * G + g; every other kernel: one id per request).
  std::vector<uint64_t> RequestLatencyPs(uint32_t requests) const;

  sim::ChipSim& sim() { return *sim_; }
  const topology::ChipIndex& index() const { return sim_->context().index; }
  MemoryStore* store() { return store_; }
  bool data_mode() const { return store_ != nullptr; }

  // ---- used by Tl ----
  uint64_t NextCmdId(uint32_t pe) { return CpuOf(pe).core.NextId(); }
  // Whether `handle` names a receive (recv / recv_async) posted on PE `pe`.
  bool IsReceive(uint32_t pe, uint64_t handle) const { return CpuOf(pe).IsReceive(handle); }
  Tensor Allocate(Instance& inst, ShapeArg shape, pb::DType dtype, Arena arena);
  // A scratch_scope opens at the arena's top (returned: its mark) and closes at its mark.
  uint64_t EnterScope(Instance& inst);
  void LeaveScope(Instance& inst, uint64_t mark);
  // Whether the run records a trace (its Instance and Call records; ChipSimOptions) — not
  // once the engine is shut down (coroutine frames destroyed then close their scopes).
  bool recording() const {
    return sim_->context().record_calls && !sim_->context().engine->shut_down();
  }
  bool Done(uint32_t pe, uint64_t handle) const { return CpuOf(pe).core.IsDone(handle); }
  [[noreturn]] void Fail(Instance& inst, const std::string& reason);
  std::string PeName(uint32_t pe) const;
  std::vector<uint32_t> Ring() const { return ring_; }
  // Call protocol: returns true if the coroutine must suspend.
  bool Submit(Instance& inst, std::shared_ptr<Invocation> inv, std::coroutine_handle<> h);

  // ---- used by Instance ----
  // Issues the instance's pending call (auto-wait first); returns true if it has issued and
  // the coroutine may continue right away.
  bool TryIssue(Instance& inst);
  // The instance's coroutine has ended: its error (if any) goes to the run's errors.
  void Finish(Instance& inst);
  // "pe 1 (sip0.cube0.pe1) over IPCQ queue sip0.cube0.pe1.ipcq.W", "pe 9 (...) over the NOC".
  std::string DescribePeer(uint32_t pe, const Peer& peer) const;

  // ---- sim::CpuRuntime ----
  void OnDone(sim::PeCpu& cpu, uint64_t handle, const sim::CpuInstance* owner,
              SimTime end) override;
  void OnIpcqAccepted(sim::PeCpu& cpu, const pb::IpcqAccepted& accepted) override;
  void OnIpcqArrival(sim::PeCpu& cpu, const pb::IpcqArrival& arrival) override;
  void OnNocDelivered(sim::PeCpu& cpu, const pb::NocDelivered& delivered) override;
  void OnNocAccepted(sim::PeCpu& cpu, const pb::NocAccepted& accepted) override;
  void OnNocHeld(sim::PeCpu& cpu, const pb::NocHeld& held) override;
  void OnNocRoomRequest(sim::PeCpu& cpu, const pb::NocRoomRequest& request) override;

 private:
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

  // What the runtime keeps per PE beside its CPU.
  struct Cpu {
    Cpu(sim::UnitContext& ctx, uint32_t pe, KernelRuntime* runtime) : core(ctx, pe, runtime) {}

    sim::PeCpu core;
    std::vector<Instance*> instances;   // creation order
    std::vector<uint8_t> receive;       // by handle: a receive posted here
    uint64_t persistent_top = 0;
    uint64_t persistent_limit = 0;      // TCM top, minus the staging buffer (multi-request)
    uint64_t staged_bytes = 0;          // IPCQ staging in use (<= kDemuxStagingBytes)
    // Pending TCM writes: (handle, [begin, end)), ascending by handle.
    std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>> writes;
    std::map<uint64_t, Channel> channels;  // by ChannelKey: IPCQ queue unit / NOC source PE
    std::deque<HeldCommand> held;       // issued, waiting for receives (issue order)
    uint64_t messages_sent = 0;         // this PE's sends so far (MessageId)
    // NOC, as sender: its sends not yet left, by message id (sent to the router at their
    // NocAccepted), and the one whose endpoint answer the CPU awaits (0: none).
    std::map<uint64_t, std::shared_ptr<const pb::NocSend>> noc_unsent;
    uint64_t noc_asking = 0;
    // NOC, as receiver: this PE's endpoint (made at the first use) and the sending PE of each
    // message it holds back, by message id.
    std::optional<sim::NocEndpointModel> endpoint;
    std::map<uint64_t, uint32_t> endpoint_blocked;

    bool IsReceive(uint64_t h) const { return h < receive.size() && receive[h] != 0; }
  };

  Cpu& CpuOf(uint32_t pe) { return *cpu_by_pe_.at(pe); }
  const Cpu& CpuOf(uint32_t pe) const { return *cpu_by_pe_.at(pe); }
  SimTime Now() const;

  // ---- one function per kind of call (runtime.cc, messaging.cc) ----
  bool IssueCommand(Instance& inst, Cpu& cpu, const std::shared_ptr<Invocation>& inv);
  bool IssueWait(Instance& inst, Cpu& cpu, const Invocation& inv);
  bool IssueWaitAll(Instance& inst, Cpu& cpu);
  bool IssueSend(Instance& inst, Cpu& cpu, const Invocation& inv);
  bool PostRecv(Instance& inst, Cpu& cpu, const Invocation& inv);

  // Hands the command to the scheduler at `issue`, or holds it for pending receives / held
  // commands it depends on.
  void HandOrHold(Cpu& cpu, const Invocation& inv, SimTime issue);
  // Hands every held command whose receives and held predecessors are done to the scheduler.
  void ReleaseHeld(Cpu& cpu);
  // The TCM range the call writes is pending until its handle completes (scratch-scope check).
  static void NoteWrite(Cpu& cpu, const Invocation& inv, uint64_t handle);

  // ---- messaging (messaging.cc) ----
  // IPCQ: kIpcqChannel | the queue unit; NOC: the source PE.
  uint64_t ChannelKey(uint32_t pe, const Peer& from) const;
  // Matches the channel's messages to posted receives (and stages, see the contract).
  void PumpChannel(Cpu& cpu, uint64_t key);
  // Pops every chunk of `msg` seen to arrive and not yet popped, at max(now, at, the channel's
  // last pop).
  void PopArrived(Cpu& cpu, Channel& ch, IncomingMessage& msg, SimTime at);
  // Writes `msg` into `recv`'s buffer (data mode) and logs the receive; returns its handle.
  uint64_t Deliver(Cpu& cpu, const IncomingMessage& msg, const PostedRecv& recv, SimTime end,
                   bool staged);
  // For a receive stuck behind another instance's message: that message ("" otherwise).
  std::string HeadOfLine(const Instance& inst) const;
  // For a NOC send waiting for room: the destination endpoint's state ("" otherwise).
  std::string NocSendWait(const Instance& inst) const;
  // `cpu`'s NOC endpoint (made on first use).
  sim::NocEndpointModel& Endpoint(Cpu& cpu);
  // Sends, from `cpu`, the NocAccepted of each message its endpoint let go, at its departure.
  void ReleaseNoc(Cpu& cpu, const std::vector<sim::NocEndpointModel::Departure>& deps);
  // Op log: an IssueRecord (for replay) and an OpRecord "send_ipcq"/"send_noc" on the CPU unit.
  void RecordSend(const Instance& inst, const Invocation& inv, const std::string& op,
                  uint64_t message_id, uint32_t dst_pe, SimTime issue);
  std::string Describe(const Instance& inst) const;
  // Recording: the call's CallRecord (handles as call indices of the instance).
  void RecordCall(Instance& inst, Invocation& inv);
  void RecordScope(Instance& inst, pb::CallRecord::Kind kind, uint64_t mark);
  pb::CallRecord NewCallRecord(Instance& inst, pb::CallRecord::Kind kind);
  uint64_t CallOf(const Instance& inst, uint64_t handle) const;

  sim::ChipSim* sim_;
  MemoryStore* store_;
  std::optional<DataExecutor> executor_;
  std::unique_ptr<sim::DataPlane> data_plane_;
  std::map<uint32_t, Cpu> cpus_;
  std::set<uint32_t> kept_cubes_;  // KeepOnlyCubes; empty: every CUBE
  std::vector<Cpu*> cpu_by_pe_;  // by global PE (null: no kernel there)
  std::vector<std::unique_ptr<Instance>> instances_;
  std::map<sim::UnitId, int64_t> ipcq_unpopped_;  // per IPCQ queue: bytes sent - bytes popped
  uint64_t ipcq_queue_bytes_ = 0;
  uint64_t noc_endpoint_bytes_ = 0;
  std::vector<uint32_t> ring_;
  std::vector<SimTime> request_done_;  // by request id: its latest completion (OnDone)
  bool ran_ = false;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_RUNTIME_H_
