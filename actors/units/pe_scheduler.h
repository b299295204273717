// PE_SCHEDULER: the dataflow command scheduler of one PE (DESIGN §4; actors/README.md "The
// planner"). It owns the PE's GEMM and MATH engine timelines through a PePlanner, sends operand
// and write-out DMAs to the PE's DMA unit, and reports each command's completion.
//
// Parts (plain classes, each with its own test): the CommandTable (pe_command_table.h) holds
// the commands from acceptance to release, with the done set and admission queue; the
// DmaTracker and ExternalInputs (pe_dma_tracker.h) number the DMAs in flight, build the
// admission's batch and resolve planner inputs as replies arrive; the EngineReporter
// (pe_engine_reporter.h) builds the EngineWork, DmaData, statistics and op records. This class
// is the glue: the handlers, Admit, and Step, which turns the planner's timings into
// write-outs, completions, admissions and the next wake-up.
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
//   UnitContext::reply_ahead is off), op log or not: its op record rides on the first
//   EngineWork, or on the Completion when no engine ran an op of it (a DMA command). With
//   UnitContext::per_tile_events a wake-up is also posted at every planned op start and end
//   (per-tile simulation); both give identical results.
//   DMA replies for DMAs sent at one instant all arrive at that instant; the re-plan waits for
//   the last of them (equivalent by Rule 3: nothing starting at `now` is committed at `now`).
#ifndef AHBMSIM_ACTORS_UNITS_PE_SCHEDULER_H_
#define AHBMSIM_ACTORS_UNITS_PE_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "actors/command_check.h"
#include "actors/engine.h"
#include "actors/models/tile_plan.h"
#include "actors/pe_planner.h"
#include "actors/time.h"
#include "actors/unit_actor.h"
#include "actors/units/pe_command_table.h"
#include "actors/units/pe_dma_tracker.h"
#include "actors/units/pe_engine_reporter.h"
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
  using Cmd = PeCommand;
  using Kind = CommandKind;
  // This PE and the units its scheduler talks to.
  struct Peers {
    uint32_t pe;
    UnitId self, dma, gemm, math, cpu;
  };
  // Admit's buffers, kept between admissions.
  struct AdmitScratch {
    TilePlan plan;              // each plan is made here and its ops moved to the command
    std::vector<OpId> dep_ops;  // the planner ops of a command's dependencies
  };
  struct Wake {  // the one wake-up posted (PostWake), by version
    uint64_t version = 0;
    std::optional<SimTime> at;
  };
  struct RepliedAhead {  // a command answered ahead (ReplyAhead), not yet retired
    Cmd* cmd = nullptr;  // the only live command
    SimTime end;
  };

  // ---- intake ----
  // Shared front end: checks, numbering, queueing. Returns null after replying CommandError
  // (`op_name` is called only for its text).
  Cmd* Accept(Kind kind, uint64_t cmd_id, absl::FunctionRef<std::string()> op_name,
              absl::Status check, std::span<const uint64_t> depends_on);
  // Every handler's first step: finishes the command answered ahead (its end has come).
  void Enter() {
    if (replied_.cmd != nullptr) RetireReplied();
  }
  // A command handler's first step: Enter, and counts the commands of the PE's CPU.
  void EnterCommand() {
    Enter();
    if (ctx_->engine->current_src() == peers_.cpu) ++commands_received_;
  }

  // ---- admission and planning ----
  void AdmitOrWait(Cmd& c);  // a composite / softmax_pv on arrival
  void Admit(Cmd& c);
  void PlanTiles(Cmd& c);  // c.plan from the command's shape
  void AddDependencies(Cmd& c);
  void AddPlannerOps(Cmd& c, const std::vector<OpId>& extra_deps, int extra_external,
                     SimTime external_ready);
  void SendOperandLoads(Cmd& c);  // one DmaBatch, in plan order; write-outs become pending

  // ---- DMAs ----
  void SendDma(Cmd& c, pb::DmaCmd dma, uint32_t tile_index, bool whole_command);
  void PieceDone(const pb::Completion& done);
  void ResolveExternal(OpId op, SimTime ready);
  void NoteDmaEnd(Cmd& c, SimTime end);
  void IssueWriteOuts(Cmd& c);

  // ---- stepping ----
  void Step();  // re-plan, write-outs, completions, admission, next wake-up
  static std::pair<SimTime, SimTime> Span(const Cmd& c, SimTime ops_start, SimTime ops_end);
  bool TryComplete(Cmd& c);
  void PostWake();
  // Answers `c` (the only live command) now, with its Completion (and EngineWork) timed for
  // its end, when that end is final: see the contract. Returns whether it did.
  bool ReplyAhead(Cmd& c);
  void RetireReplied();

  // ---- outputs (built by the EngineReporter) ----
  // The engine units' EngineWork for `c`, sent `delay` ahead, `record` riding on the first.
  void SendEngineWork(const Cmd& c, SimTime delay = SimTime(), std::string* record = nullptr);
  // The Completion, for `end` (>= now; sent now), carrying `record` if given (ReplyAhead).
  void Reply(const Cmd& c, SimTime start, SimTime end, std::string* record = nullptr);
  // The scheduler's stats and op record of a finished command; the record is written now, or
  // with `record` given serialized into it (not written).
  void Account(const Cmd& c, SimTime start, SimTime end, std::string* record = nullptr);
  void Fail(UnitId requester, uint64_t cmd_id, const std::string& message);
  // Fill `piece` / `t` in place (in the message that carries them).
  static void Piece(const pb::TensorRef& ref, uint64_t r0, uint64_t rows, uint64_t c0,
                    uint64_t cols, pb::TensorRef& piece);
  void Staging(const pb::TensorRef& like, uint64_t rows, uint64_t cols, pb::TensorRef& t) const;

  UnitContext* ctx_;
  Peers peers_;
  const pb::Pe& config_;  // in ctx_->chip, which outlives every unit
  CommandChecker checker_;
  PePlanner planner_;
  CommandTable table_;
  DmaTracker dmas_;
  ExternalInputs external_;  // planner ops waiting for DMA ends
  EngineReporter reporter_;
  AdmitScratch scratch_;
  Wake wake_;
  uint64_t commands_received_ = 0;  // from the PE's CPU (CpuProbe::QuietUntil)
  RepliedAhead replied_;
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
