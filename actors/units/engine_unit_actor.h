// The GEMM engine and MATH engine actors of one PE (DESIGN §2, §4). Their only client is the
// PE's scheduler, which owns their timelines (a PePlanner over GemmTileCycles / MathOpCycles
// with the fill/drain rule, actors/README.md) and sends each engine what ran on it once the
// timing of a command is final; the engine unit owns what follows from that work.
//
// Ports:
// - in  std::shared_ptr<const pb::EngineWork> from the PE scheduler, in every run: once per
//       command that ran tile ops on this engine (sent at the command's completion, or ahead of
//       it delayed to its end, ReplyAhead), and in data mode to the engine that computes the
//       command's values (below), even when none of its ops ran there. The scheduler sends it
//       before the command's Completion, at the same instant: the requester sees the values.
//
// Contract:
// - Stats (UnitContext::stats, the unit's own entry): ops += tile_ops, busy_ps += busy_ps (the
//   sum of the ops' end - start; tile ops on one engine never overlap), work_ps += work_ps (the
//   ops' own cycles; GEMM: fill/drain excluded, so the roofline does not depend on how the work
//   was scheduled), flops += flops.
// - Op log (if any; only for work with tile ops): the scheduler's record riding on the work
//   (scheduler_record) first, then one OpRecord per command — start = first tile op's start,
//   end = last tile op's end, flops, op "<command op>" (e.g. "composite_gemm"), label
//   "<n> tiles" — and with UnitContext::per_tile_detail one more per tile op (op
//   "<command op>:<what>").
// - Data mode (UnitContext::data): exactly one engine computes a command's values, at the
//   delivery of its work — the GEMM engine for composite and dot (the composite's epilogue
//   values included), the MATH engine for math, softmax_pv and lse_merge; EngineWork.command
//   carries the command to that engine only. A data-plane error goes to UnitContext::AddError
//   as an InvariantError "<pe>: <op> cmd <id>: data: <message>" (the command passed the
//   scheduler's checks; the run then fails with it, exit 70).
#ifndef AHBMSIM_ACTORS_UNITS_ENGINE_UNIT_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_ENGINE_UNIT_ACTOR_H_

#include <cstdint>
#include <memory>

#include "actors/unit_actor.h"
#include "actors/units/unit_context.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/commands.pb.h"
#include "topology/ids.h"

namespace ahbm::sim {

// The engine that computes the values of a command of this kind in data mode (the rule above).
inline topology::UnitKind DataEngineOf(pb::EngineWork::CommandCase command) {
  return command == pb::EngineWork::kComposite || command == pb::EngineWork::kDot
             ? topology::UnitKind::kGemm
             : topology::UnitKind::kMath;
}

// One GEMM or MATH engine unit: what the actor's handler runs.
class EngineUnit {
 public:
  EngineUnit(UnitContext* ctx, topology::UnitKind kind, UnitId self, uint32_t pe);
  void OnWork(const pb::EngineWork& work);

 private:
  void Record(const pb::EngineWork& work);
  void Compute(const pb::EngineWork& work);

  UnitContext* ctx_;
  topology::UnitKind kind_;
  UnitId self_;
  uint32_t pe_;  // global PE, named only in data-plane errors
};

struct EngineUnitActorState {
  std::unique_ptr<EngineUnit> unit;
};
using EngineUnitActor = UnitStateActor<EngineUnitActorState>;

// Spawns and registers the GEMM (kind kGemm) or MATH (kMath) unit of global PE `pe`.
void StartEngineUnitActor(UnitContext& ctx, topology::UnitKind kind, uint32_t pe);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_ENGINE_UNIT_ACTOR_H_
