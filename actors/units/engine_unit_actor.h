// The GEMM engine and MATH engine actors of one PE (DESIGN §2, §4). Their only client is the
// PE's scheduler, which owns their timelines (a PePlanner over GemmTileCycles / MathOpCycles
// with the fill/drain rule, actors/README.md); the engine unit receives what ran on it.
//
// Ports:
// - in  std::shared_ptr<const pb::EngineWork> from the PE scheduler, once per completed command,
//       when the run keeps an op log (without one the scheduler calls RecordEngineStats itself).
//
// Contract:
// - Stats (UnitContext::stats, RecordEngineStats): ops += tile ops, busy_ps += Σ (end - start)
//   (tile ops on one engine never overlap), work_ps += Σ the ops' own cycles (GEMM: fill/drain
//   excluded, so the roofline does not depend on how the work was scheduled), flops += Σ flops.
// - Op log (if any): one OpRecord per command — start = first tile op's start, end = last tile
//   op's end, flops, op "<command op>" (e.g. "composite_gemm"), label "<n> tiles" — and with
//   UnitContext::per_tile_detail one more per tile op (op "<command op>:<what>").
// - Data mode (issue "kernel runtime") computes values here.
#ifndef AHBMSIM_ACTORS_UNITS_ENGINE_UNIT_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_ENGINE_UNIT_ACTOR_H_

#include <cstdint>

#include "actors/units/unit_context.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "topology/ids.h"

namespace ahbm::sim {

// One command's tile ops on one engine, summed.
struct EngineStats {
  uint64_t ops = 0;
  uint64_t busy_ps = 0;
  uint64_t work_ps = 0;
  uint64_t flops = 0;
};

// Adds `work` to the stats of engine unit `unit`.
void RecordEngineStats(UnitContext& ctx, UnitId unit, const EngineStats& work);

caf::behavior EngineUnitBehavior(caf::event_based_actor* self, UnitContext* ctx, UnitId self_id);

// Spawns and registers the GEMM (kind kGemm) or MATH (kMath) unit of global PE `pe`.
void StartEngineUnitActor(UnitContext& ctx, topology::UnitKind kind, uint32_t pe);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_ENGINE_UNIT_ACTOR_H_
