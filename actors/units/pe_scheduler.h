// PE_SCHEDULER: the dataflow command scheduler of one PE (DESIGN §4; actors/README.md "The
// planner"). It owns the PE's GEMM and MATH engine timelines through a PePlanner, sends operand
// and write-out DMAs to the PE's DMA unit, and reports each command's completion.
//
// Ports (all messages std::shared_ptr<const pb::X>):
// - in  CompositeCmd, SoftmaxPvCmd (non-blocking on the CPU; admitted up to
//       scheduler.max_inflight_composites at once, the rest wait in issue order),
//       GemmCmd (`dot`), MathCmd (a primitive MATH op), LseMergeCmd (the decode reduce's fused
//       merge: one MATH op, non-blocking, `depends_on` like a composite, not admission-limited),
//       DmaCmd (`load` / `store`) from the PE CPU
//       (any unit: the requester is the event's src).
// - out Completion{cmd_id, unit = this scheduler, start_ps, end_ps} to the requester at end_ps,
//       or CommandError{cmd_id, message} at once when the command is invalid (CommandChecker) —
//       nothing of an invalid command runs.
// - out DmaCmd to the PE's DMA unit; in Completion / DmaError from it (same instant).
// - out EngineWork to the PE's GEMM and MATH units when a command's timing is final (at its
//       completion, or ahead of it: ReplyAhead), in every run: per engine that ran ops of it,
//       their count, span, busy and work time and FLOPs (the units own their stats and op
//       records); per-tile EngineOps only with an op log and per-tile detail; op names only
//       with an op log or in data mode; in data mode the command itself to the engine that
//       computes its values (engine_unit_actor.h), sent even when no op of it ran there.
// - self: a versioned wake-up (Engine::SetTimer with the version; OnTimer).
//
// Contract:
// - Issue order: commands get issue_seq 0, 1, ... in arrival order; every tile op of a command
//   has the priority key (issue_seq, index in its tile plan). A MATH command is one op (index 0).
// - Tile graphs: composites and `dot` by PlanGemm (operand homes from the TensorRefs' space; a
//   `dot` has no epilogue), softmax_pv by PlanSoftmaxPv, lse_merge by PlanLseMerge. GEMM / epilogue / merge ops go to the
//   planner; a load or write-out of an HBM operand is one DmaCmd per tile piece; a TCM-homed
//   load or write-out costs nothing.
// - Admission: a composite / softmax_pv is admitted on arrival when no older one waits and a
//   slot is free (so its loads reach the DMA unit before those of any later command), else in
//   issue order as slots free. An admitted one sends all its operand loads at once, in plan
//   order, as one DmaBatch ("the next composite's loads overlap the current one's GEMMs"; the
//   DMA and the channels serve them in that order, timed as separate DMAs). `dot`, MATH and DMA commands are not admission-limited
//   (the CPU blocks on the first two).
// - Dependencies: `depends_on` names earlier commands of this PE. Every planner op of the
//   dependent command then also depends on the dependency's planner ops, and waits for the
//   end of its DMA parts (loads, write-outs). A completed dependency imposes nothing. A
//   softmax_pv on an accumulator (acc_o's PE and address) also depends on the previous
//   softmax_pv on that accumulator (the serial chain).
// - HBM write-outs are issued when their producing op has ended (a wake-up at that instant).
// - A command completes when all its planner ops and DMAs have ended; the Completion goes out
//   at that instant, with start = the earliest op/DMA start. In data mode the command's values
//   exist before the Completion is delivered: the engine's EngineWork, or a DMA command's
//   DmaData to the DMA (which moves its values), goes out first (same instant, same source).
// - Event budget (closed form): after every input the planner re-plans and ONE wake-up is
//   posted, at the earliest instant something must happen (a completion, a write-out issue);
//   a stale wake-up is dropped. A command whose end is already final (ReplyAhead: it is the
//   only live command and the PE's CPU can send nothing before its Completion) gets its
//   EngineWork and Completion at once, delayed to its end, and no wake-up (unless
//   UnitContext::reply_ahead is off). With UnitContext::per_tile_events a wake-up is also posted at
//   every planned op start and end (per-tile simulation); both give identical results.
//   DMA replies for DMAs sent at one instant all arrive at that instant; the re-plan waits for
//   the last of them (equivalent by Rule 3: nothing starting at `now` is committed at `now`).
#ifndef AHBMSIM_ACTORS_UNITS_PE_SCHEDULER_H_
#define AHBMSIM_ACTORS_UNITS_PE_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "actors/command_check.h"
#include "actors/engine.h"
#include "actors/message_pool.h"
#include "actors/models/tile_plan.h"
#include "actors/pe_planner.h"
#include "actors/time.h"
#include "actors/unit_actor.h"
#include "actors/units/unit_context.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/commands.pb.h"

namespace ahbm::sim {

class PeScheduler : public Engine::TimerHandler {
 public:
  PeScheduler(UnitContext* ctx, UnitId self, uint32_t pe);

  void OnComposite(std::shared_ptr<const pb::CompositeCmd> cmd);
  void OnSoftmaxPv(std::shared_ptr<const pb::SoftmaxPvCmd> cmd);
  void OnLseMerge(std::shared_ptr<const pb::LseMergeCmd> cmd);
  void OnDot(std::shared_ptr<const pb::GemmCmd> cmd);
  void OnMath(std::shared_ptr<const pb::MathCmd> cmd);
  void OnDma(std::shared_ptr<const pb::DmaCmd> cmd);
  void OnDmaDone(const pb::Completion& done);
  void OnDmaError(const pb::DmaError& error);
  void OnDmaBatchDone(const pb::DmaBatchDone& done);
  // The wake-up posted with `version` (stale unless it is the latest).
  void OnTimer(uint64_t version) override;

 private:
  enum class Kind : uint8_t { kComposite, kSoftmaxPv, kDot, kMath, kDma, kLseMerge };
  struct Cmd {
    Kind kind = Kind::kComposite;
    bool admitted = false;
    UnitId requester = 0;
    int dmas_in_flight = 0;  // DMAs sent whose end is not yet known
    // Completion check by index: ops[0 .. ops_final) are committed and ended (final), their
    // span folded into ops_start / ops_end; TryComplete resumes from ops_final.
    uint32_t ops_final = 0;
    uint64_t cmd_id = 0;
    uint64_t seq = 0;
    SimTime issue;
    std::vector<uint64_t> depends_on;
    // The command message, of the type `kind` names (read through the accessors below).
    std::shared_ptr<const google::protobuf::MessageLite> msg;
    const pb::CompositeCmd& composite() const { return As<pb::CompositeCmd>(); }
    const pb::SoftmaxPvCmd& softmax_pv() const { return As<pb::SoftmaxPvCmd>(); }
    const pb::GemmCmd& dot() const { return As<pb::GemmCmd>(); }
    const pb::MathCmd& math() const { return As<pb::MathCmd>(); }
    const pb::LseMergeCmd& lse_merge() const { return As<pb::LseMergeCmd>(); }
    const pb::DmaCmd& dma() const { return As<pb::DmaCmd>(); }
    template <class T>
    const T& As() const { return static_cast<const T&>(*msg); }
    std::vector<TileOp> plan;  // the tile plan's ops (TilePlan::ops; its totals are not used)
    std::vector<std::optional<OpId>> planner_op;  // by tile op index (GEMM/MATH ops)
    std::vector<std::vector<OpId>> piece_waiters;  // by tile op index: planner ops a load feeds
    std::vector<OpId> ops;                         // every planner op, ascending
    std::vector<uint32_t> op_pos;                  // ops[i]'s position in plan.ops
    SimTime ops_start = SimTime::Max();
    SimTime ops_end;
    // PostWake's: the latest end of its planner ops (nullopt: one is not planned yet), as of
    // the planner's plan_version `planned_version`.
    std::optional<SimTime> planned_end;
    uint64_t planned_version = UINT64_MAX;
    std::vector<uint32_t> pending_writes;          // HBM write-outs not yet issued
    SimTime dma_start = SimTime::Max();
    SimTime dma_end;
    std::vector<OpId> dma_waiters;  // ops of later commands waiting for this one's DMA parts
    uint64_t hbm_read_bytes = 0;
    uint64_t hbm_write_bytes = 0;

    // Back to a fresh command, keeping the buffers' capacity (commands are reused); the plan
    // buffer goes to `free_plans` (up to kMaxFreePlans of them). Resets field by field: a new
    // field needs its line there.
    void Reset(std::vector<std::vector<TileOp>>& free_plans);
  };
  struct ExternalInput {
    int unknown = 0;
    SimTime ready;
  };
  struct DmaPiece {
    uint64_t cmd_id = 0;
    uint32_t tile_index = 0;
    bool whole_command = false;  // a CPU load/store: the command itself
  };

  // Shared front end: checks, numbering, queueing. Returns null after replying CommandError
  // (`op_name` is called only for its text).
  Cmd* Accept(Kind kind, uint64_t cmd_id, absl::FunctionRef<std::string()> op_name,
              absl::Status check, std::span<const uint64_t> depends_on);
  // A command from the pool (or a new one), registered as live under `cmd_id`.
  Cmd& NewCmd(Kind kind, uint64_t cmd_id);
  // Unregisters a finished command and returns it to the pool (or frees it: the pool keeps
  // at most kMaxFreeCmds, so a burst of live commands does not stay allocated).
  void ReleaseCmd(Cmd& c);
  // "composite_gemm", "math_EXP", "dma_load", ...: for op-log records and error texts only.
  static std::string OpName(const Cmd& c);
  // The EngineWork.command field that carries a command of `kind` (none for DMA commands).
  static pb::EngineWork::CommandCase CommandCaseOf(Kind kind);
  void Admit(Cmd& c);
  void AdmitOrWait(Cmd& c);  // a composite / softmax_pv on arrival
  void AddPlannerOps(Cmd& c, const std::vector<OpId>& extra_deps, int extra_external,
                     SimTime external_ready);
  // Numbers a DMA of `c` and records it in flight; returns its id.
  uint64_t NewDma(Cmd& c, uint32_t tile_index, bool whole_command);
  // Sends one DMA on its own.
  void SendDma(Cmd& c, pb::DmaCmd dma, uint32_t tile_index, bool whole_command);
  // A new operand load of `c` in the open batch (see Admit), numbered; the caller fills it.
  pb::DmaCmd& BatchSlot(Cmd& c, uint32_t tile_index);
  void FlushBatch();
  void PieceDone(const pb::Completion& done);
  void ResolveExternal(OpId op, SimTime ready);
  void NoteDmaEnd(Cmd& c, SimTime end);
  bool DmaSettled(const Cmd& c) const { return c.dmas_in_flight == 0 && c.pending_writes.empty(); }
  void Step();  // re-plan, write-outs, completions, admission, next wake-up
  static std::pair<SimTime, SimTime> Span(const Cmd& c, SimTime ops_start, SimTime ops_end);
  bool TryComplete(Cmd& c);
  void IssueWriteOuts(Cmd& c);
  void PostWake();
  // Answers `c` (the only live command) now, with its Completion (and EngineWork) timed for
  // its end, when that end is final: see the contract. Returns whether it did.
  bool ReplyAhead(Cmd& c);
  // Every handler's first step: finishes the command answered ahead (its end has come).
  void Enter() {
    if (replied_ != nullptr) RetireReplied();
  }
  void RetireReplied();
  // A command handler's first step: Enter, and counts the commands of the PE's CPU.
  void EnterCommand() {
    Enter();
    if (engine_->current_src() == cpu_unit_) ++commands_received_;
  }
  // What ran on the GEMM and MATH engines for `c`: one EngineWork to each engine that ran ops
  // of it and, in data mode, to the engine that computes its values (engine_unit_actor.h).
  // `delay`: sent that far ahead of the events' instant (ReplyAhead), the scheduler's op record
  // `record` (serialized) riding on the first EngineWork.
  void ReportEngineWork(const Cmd& c, SimTime delay = SimTime(), std::string* record = nullptr);
  // Data mode: a DMA command's DmaData to the DMA, which moves its values, at its completion
  // (the engines compute the others': EngineWork.command).
  void SendDmaData(const Cmd& c);
  // The Completion, for `end` (>= now; sent now).
  void Reply(const Cmd& c, SimTime start, SimTime end);
  // The scheduler's stats and op record of a finished command; the record is written now, or
  // with `record` given serialized into it (not written).
  void Account(const Cmd& c, SimTime start, SimTime end, std::string* record = nullptr);
  void Fail(UnitId requester, uint64_t cmd_id, const std::string& message);
  // Fill `piece` / `t` in place (in the message that carries them).
  void Piece(const pb::TensorRef& ref, uint64_t r0, uint64_t rows, uint64_t c0, uint64_t cols,
             pb::TensorRef& piece) const;
  void Staging(const pb::TensorRef& like, uint64_t rows, uint64_t cols, pb::TensorRef& t) const;

  UnitContext* ctx_;
  Engine* engine_;
  UnitId self_;
  uint32_t pe_;
  UnitId dma_unit_, gemm_unit_, math_unit_, cpu_unit_;
  const pb::Pe& config_;  // in ctx_->chip, which outlives every unit
  CommandChecker checker_;
  ClockDomain clock_;
  PePlanner planner_;

  // Live commands by cmd_id (lookups only, never iterated; heap objects, so live_ can point
  // at them); finished ones wait in free_cmds_ for reuse with their buffers.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Cmd>> cmds_;
  static constexpr size_t kMaxFreeCmds = 2;
  std::vector<std::unique_ptr<Cmd>> free_cmds_;
  std::vector<Cmd*> live_;                   // the same commands in issue (seq) order: iterated
  // Completed cmd_ids (membership only, never iterated: a hash set is deterministic here).
  absl::flat_hash_set<uint64_t> done_;
  VectorFifo<uint64_t> waiting_;             // composites / softmax_pv not yet admitted
  uint32_t inflight_ = 0;                    // admitted composites / softmax_pv not completed
  uint64_t next_seq_ = 0;
  // Planner ops with external inputs not all known, by id: external_[i] is op
  // external_first_ + i (ops are added in id order; resolved slots are empty, dropped from
  // the front).
  VectorFifo<std::optional<ExternalInput>> external_;
  OpId external_first_ = 0;
  void AddExternal(OpId op, ExternalInput input);
  // DMAs in flight by id: dma_pieces_[i] is DMA id dma_pieces_first_ + i (ids ascend; batch ids
  // and answered DMAs are empty slots, dropped from the front).
  VectorFifo<std::optional<DmaPiece>> dma_pieces_;
  uint64_t dma_pieces_first_ = 1;
  DmaPiece TakePiece(uint64_t dma_id);  // removes an in-flight DMA's entry (CHECKs it exists)
  uint64_t next_dma_id_ = 1;
  int dma_replies_pending_ = 0;
  // Admit's operand loads: while `batching_`, BatchSlot fills `batch_` (made at the first of
  // the admission's `batch_cmds_` loads; `batch_used_` of its commands are this admission's;
  // FlushBatch sends it).
  bool batching_ = false;
  std::shared_ptr<pb::DmaBatch> batch_;
  int batch_cmds_ = 0;
  int batch_used_ = 0;
  // softmax_pv chain: accumulator (acc_o's PE, address) -> last cmd_id on it.
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> last_on_acc_;
  std::vector<OpId> dep_ops_;  // Admit's scratch: the planner ops of a command's dependencies
  // Plan buffers of finished commands, for any command's next plan: TileOp buffers are large
  // enough (~150 bytes an op) that allocating one per plan is a slow-path malloc, and a
  // command object is reused only once as many of its kind have finished.
  static constexpr size_t kMaxFreePlans = 4;
  std::vector<std::vector<TileOp>> free_plan_ops_;
  TilePlan plan_;  // Admit's: each plan is made here and its ops moved to the command
  uint64_t wake_version_ = 0;
  std::optional<SimTime> wake_at_;
  uint64_t commands_received_ = 0;  // from the PE's CPU (CpuProbe::QuietUntil)
  Cmd* replied_ = nullptr;          // answered ahead, not yet retired (the only live command)
  SimTime replied_end_;
};

struct PeSchedulerActorState {
  std::unique_ptr<PeScheduler> scheduler;
};
using PeSchedulerActor = UnitStateActor<PeSchedulerActorState>;

caf::behavior PeSchedulerBehavior(PeSchedulerActor* self, UnitContext* ctx, UnitId self_id,
                                  uint32_t pe);

// Spawns and registers the scheduler of global PE `pe` (unit id from ctx->index).
void StartPeSchedulerActor(UnitContext& ctx, uint32_t pe);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_PE_SCHEDULER_H_
