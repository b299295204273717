// KernelRuntime: runs `tl` kernel coroutines on the PE CPUs of a ChipSim (DESIGN §4).
//
// Each participating PE gets its own runtime, a PeRuntime (pe_runtime.h): the sim::CpuRuntime
// of that PE's sim::PeCpu (actors/units/pe_cpu_actor.h: the issue step, the wait rule,
// switching between instances in request-id order), keeping what only kernels have there —
// its instances (instance.h), arenas, held commands, incoming channels and NOC endpoint. PEs
// reach each other only by message, and the sender's IPCQ credit through one declared probe
// (ipcq_credit.h). KernelRuntime is the harness: it makes the PE runtimes, holds what the run
// shares (run_context.h: the ring, the data-mode store, the requests' finish times), runs the
// simulation and reports deadlocks. The engine runs one handler at a time, so the shared run
// state is touched in event order only (deterministic).
//
// Contract (times in ps; `cpu` = when the CPU is next free), on top of the PE CPU's:
// - A call: auto-wait first (the CPU waits on the first pending input; a StallRecord "cmd <id>
//   (auto-wait before <call>)" when real), then the issue step; non-blocking calls continue at
//   once, blocking ones wait for their completion (a StallRecord "cmd <id> (<call>)").
//   Send and receive posts cost send_cycles / recv_cycles; Wait and WaitAll cost nothing.
//   Each kind of call has its own issue function (IssueCommand, IssueSend, PostRecv,
//   IssueWait, IssueWaitAll).
// - IPCQ send: blocks only if the queue lacks credit for the whole message at the send (the
//   sender knows its credit: ipcq_credit.h); then it waits for IpcqAccepted.
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

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "actors/chip_sim.h"
#include "base/errors.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/instance.h"
#include "kernels/runtime/pe_runtime.h"
#include "kernels/runtime/run_context.h"

namespace ahbm::kernels {

class KernelRuntime {
 public:
  // `sim` outlives the runtime; `store` (data mode) may be null (timing mode). A command a PE
  // refuses is `refused_command_kind` (base/errors.h): the kernel's fault, unless the calls
  // come from elsewhere (a replayed trace: the input's).
  KernelRuntime(sim::ChipSim* sim, MemoryStore* store,
                ErrorKind refused_command_kind = ErrorKind::kKernelFault);
  ~KernelRuntime();

  // The ring order for "ring+"/"ring-" (global CUBE indices); optional.
  void SetRing(std::vector<uint32_t> cubes) { run_.set_ring(std::move(cubes)); }

  // One-group runs (kernels/launch/launch.h LaunchOptions::one_group): AddKernel drops, with
  // OK, an instance on a PE outside `cubes` (its CUBE set mirrors the simulated one). Before
  // any AddKernel.
  void KeepOnlyCubes(std::set<uint32_t> cubes) { kept_cubes_ = std::move(cubes); }

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
  const topology::ChipIndex& index() const { return run_.index(); }
  MemoryStore* store() { return run_.store(); }
  bool data_mode() const { return run_.store() != nullptr; }

 private:
  // "pe 3 (...) request 0 waits on ...", for the deadlock report.
  std::string Describe(const Instance& inst) const;
  // For a NOC send waiting for room: the destination endpoint's state ("" otherwise); reads
  // both PEs' runtimes after the run.
  std::string NocSendWait(const Instance& inst) const;

  sim::ChipSim* sim_;
  RunContext run_;
  std::optional<DataExecutor> executor_;
  std::unique_ptr<sim::DataPlane> data_plane_;
  std::set<uint32_t> kept_cubes_;  // KeepOnlyCubes; empty: every CUBE
  std::map<uint32_t, std::unique_ptr<PeRuntime>> pes_;  // by global PE
  std::vector<const Instance*> instances_;  // over the run, creation order (their ordinals)
  bool ran_ = false;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_RUNTIME_H_
