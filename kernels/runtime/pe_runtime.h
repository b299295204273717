// PeRuntime: one PE's kernel runtime (DESIGN §4; the rules are KernelRuntime's contract in
// runtime.h). It is the sim::CpuRuntime of its PE's CPU and keeps what only kernels have on
// that PE: its instances, the persistent arena, pending TCM writes, held commands, incoming
// channels and IPCQ staging, its NOC sends awaiting room and its NOC endpoint. It reaches
// another PE only by message (through the engine) or through the run's IpcqCredit
// (run_context.h); the harness (KernelRuntime) reads it after the run for deadlock reports.
#ifndef AHBMSIM_KERNELS_RUNTIME_PE_RUNTIME_H_
#define AHBMSIM_KERNELS_RUNTIME_PE_RUNTIME_H_

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

#include "actors/models/noc_endpoint_model.h"
#include "actors/time.h"
#include "actors/units/pe_cpu_actor.h"
#include "kernels/runtime/call.h"
#include "kernels/runtime/instance.h"
#include "kernels/runtime/messaging.h"
#include "kernels/runtime/run_context.h"
#include "proto/commands.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels {

using sim::SimTime;

class PeRuntime : public sim::CpuRuntime {
 public:
  // The runtime of global PE `pe`; its CPU is made here and spawned by Start().
  PeRuntime(RunContext& run, uint32_t pe);

  uint32_t pe() const { return core_.pe(); }
  RunContext& run() { return run_; }
  const topology::ChipIndex& index() const { return run_.index(); }
  // This PE's name, "pe 3 (sip0.cube0.pe3)".
  std::string PeName() const { return run_.PeName(pe()); }

  // ---- setting up (before the run) ----
  // The instance of (request, stream) on this PE, if any.
  const Instance* FindInstance(uint32_t request_id, uint32_t stream) const;
  // Adds an instance (`ordinal`: its number over the run, creation order).
  Instance& AddInstance(uint32_t request_id, uint32_t stream, KernelFn fn, uint32_t ordinal);
  const std::vector<std::unique_ptr<Instance>>& instances() const { return instances_; }
  // Spawns the CPU (unit kPeCpu of the PE; its start event at time 0).
  void Start() { core_.Start(); }
  // Before the run, with every instance added: splits the scratch arena among the instances
  // and, with several, reserves the IPCQ staging buffer at the top of TCM.
  void SplitArenas();

  // ---- used by Tl ----
  uint64_t NextCmdId() { return core_.NextId(); }
  // Whether `handle` names a receive (recv / recv_async) posted here.
  bool IsReceive(uint64_t h) const { return h < receive_.size() && receive_[h] != 0; }
  bool Done(uint64_t handle) const { return core_.IsDone(handle); }
  bool recording() const { return run_.recording(); }
  const std::vector<uint32_t>& Ring() const { return run_.ring(); }
  Tensor Allocate(Instance& inst, ShapeArg shape, pb::DType dtype, Arena arena);
  // A scratch_scope opens at the arena's top (returned: its mark) and closes at its mark.
  uint64_t EnterScope(Instance& inst);
  void LeaveScope(Instance& inst, uint64_t mark);
  [[noreturn]] void Fail(Instance& inst, const std::string& reason);
  // Call protocol: returns true if the coroutine must suspend.
  bool Submit(Instance& inst, std::shared_ptr<Invocation> inv, std::coroutine_handle<> h);

  // ---- used by Instance ----
  // Issues the instance's pending call (auto-wait first); returns true if it has issued and
  // the coroutine may continue right away.
  bool TryIssue(Instance& inst);
  // The instance's coroutine has ended: its error (if any) goes to the run's errors.
  void Finish(Instance& inst);
  // "pe 1 (sip0.cube0.pe1) over IPCQ queue sip0.cube0.pe1.ipcq.W", "pe 9 (...) over the NOC".
  std::string DescribePeer(const Peer& peer) const;

  // ---- read by the harness after the run (deadlock reports) ----
  // For a receive of `inst` stuck behind another instance's message: that message.
  std::string HeadOfLine(const Instance& inst) const;
  // The NOC send `message_id` still waiting for room here (null: none).
  const pb::NocSend* UnsentNoc(uint64_t message_id) const;
  // This PE's NOC endpoint (null: never used).
  const sim::NocEndpointModel* endpoint() const { return endpoint_ ? &*endpoint_ : nullptr; }

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
  // Pending TCM writes: (handle, [begin, end)), ascending by handle.
  using Writes = std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>>;

  SimTime Now() const { return run_.Now(); }

  // ---- one function per kind of call (pe_runtime.cc, messaging.cc) ----
  bool IssueCommand(Instance& inst, const std::shared_ptr<Invocation>& inv);
  bool IssueWait(Instance& inst, const Invocation& inv);
  bool IssueWaitAll(Instance& inst);
  bool IssueSend(Instance& inst, const Invocation& inv);
  bool IssueIpcqSend(Instance& inst, const Invocation& inv, uint64_t id, SimTime issue,
                     std::string values);
  bool IssueNocSend(Instance& inst, const Invocation& inv, uint64_t id, SimTime issue,
                    std::string values);
  bool PostRecv(Instance& inst, const Invocation& inv);

  // Hands the command to the scheduler at `issue`, or holds it for pending receives / held
  // commands it depends on.
  void HandOrHold(const Invocation& inv, SimTime issue);
  // Hands every held command whose receives and held predecessors are done to the scheduler.
  void ReleaseHeld();
  // The TCM range the call writes is pending until its handle completes (scratch-scope check).
  void NoteWrite(const Invocation& inv, uint64_t handle);
  // The first pending write at or after `handle` (writes_ is ascending by handle).
  Writes::iterator WriteAt(uint64_t handle);

  // ---- messaging (messaging.cc) ----
  // IPCQ: kIpcqChannel | the queue unit; NOC: the source PE.
  uint64_t ChannelKey(const Peer& from) const;
  // Matches the channel's messages to posted receives, one step at a time, until none of the
  // three steps below can move.
  void PumpChannel(uint64_t key);
  // Step 1: a receive (in post order) takes its (request, stream)'s oldest message already off
  // the queue — staged (IPCQ) or delivered (NOC). No pop, no credit change.
  bool TakeWaitingMessage(Channel& ch, bool ipcq);
  // Step 2 (IPCQ): the head message's own receive is posted: pop what has arrived; deliver it
  // once complete. False while chunks are still to come.
  bool StreamHeadToReceive(Channel& ch, std::deque<PostedRecv>::iterator own);
  // Step 3 (IPCQ): another instance's receive waits behind the head: pop the head into the
  // staging buffer if it fits. False if it does not, or chunks are still to come.
  bool StageHead(Channel& ch);
  // Pops every chunk of `msg` seen to arrive and not yet popped, at max(now, at, the channel's
  // last pop).
  void PopArrived(Channel& ch, IncomingMessage& msg, SimTime at);
  // Writes `msg` into `recv`'s buffer (data mode), logs the receive and completes it at `end`.
  void Deliver(const IncomingMessage& msg, const PostedRecv& recv, SimTime end, bool staged);
  // This PE's NOC endpoint (made on first use).
  sim::NocEndpointModel& Endpoint();
  // Sends the NocAccepted of each message the endpoint let go, at its departure.
  void ReleaseNoc(const std::vector<sim::NocEndpointModel::Departure>& deps);
  // Wakes the instance whose send `message_id` was accepted at `at`.
  void WakeSender(uint64_t message_id, SimTime at);
  // Op log: an IssueRecord (for replay) and an OpRecord "send_ipcq"/"send_noc" on the CPU unit.
  void RecordSend(const Instance& inst, const Invocation& inv, const std::string& op,
                  uint64_t message_id, uint32_t dst_pe, SimTime issue);
  void RecordStage(const IncomingMessage& head);
  // Recording: the call's CallRecord (handles as call indices of the instance).
  void RecordCall(Instance& inst, Invocation& inv);
  void RecordScope(Instance& inst, pb::CallRecord::Kind kind, uint64_t mark);
  pb::CallRecord NewCallRecord(Instance& inst, pb::CallRecord::Kind kind);
  uint64_t CallOf(const Instance& inst, uint64_t handle) const;

  RunContext& run_;
  sim::PeCpu core_;
  std::vector<uint8_t> receive_;       // by handle: a receive posted here
  uint64_t persistent_top_ = 0;
  uint64_t persistent_limit_ = 0;      // TCM top, minus the staging buffer (several instances)
  Writes writes_;
  std::deque<HeldCommand> held_;       // issued, waiting for receives (issue order)
  std::map<uint64_t, Channel> channels_;  // by ChannelKey
  uint64_t staged_bytes_ = 0;          // IPCQ staging in use (<= kDemuxStagingBytes)
  uint64_t messages_sent_ = 0;         // this PE's sends so far (MessageId)
  // NOC, as sender: its sends not yet left, by message id (sent to the router at their
  // NocAccepted), and the one whose endpoint answer the CPU awaits (0: none).
  std::map<uint64_t, std::shared_ptr<const pb::NocSend>> noc_unsent_;
  uint64_t noc_asking_ = 0;
  // NOC, as receiver: this PE's endpoint and the sending PE of each message it holds back.
  std::optional<sim::NocEndpointModel> endpoint_;
  std::map<uint64_t, uint32_t> endpoint_blocked_;
  // Creation order. Last, so destroyed first: a coroutine frame going away closes its scratch
  // scopes (LeaveScope reads writes_).
  std::vector<std::unique_ptr<Instance>> instances_;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_PE_RUNTIME_H_
