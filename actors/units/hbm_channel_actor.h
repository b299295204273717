// The actor of one HBM pseudo-channel (DESIGN §2-§3): a thin CAF shell over HbmChannelModel
// (STYLE 4). All timing lives in the model; this file only moves messages.
//
// Ports:
// - in  std::shared_ptr<const pb::HbmRequest> from any unit (a DMA actor).
// - out std::shared_ptr<const pb::HbmResponse> to that unit (engine->current_src()).
//
// Contract:
// - A request arriving at now() is served by HbmChannelModel::Access(now(), bytes, read/write)
//   in delivery order (the engine's order, non-decreasing in time, as the model requires).
// - The response is sent AT ONCE (zero delay) and carries the grant: request_id and bytes copied
//   from the request, start_ps = grant.start, done_ps = grant.done, channel = this unit's id.
//   Replying at once is exact: a FIFO grant is a future time that later requests cannot change.
//   The requester, not the channel, waits until done_ps if it needs to.
// - Stats (when a StatsBoard is given): ops += 1, busy_ps += data-bus occupancy
//   (grant.free_at - grant.start), bytes_read / bytes_written += bytes.
// - A batched request (`parts`, from a DmaBatch) is served part by part in order, each exactly
//   like a separate request arriving at the same instant; the response lists one grant per
//   part (`parts`) instead of start_ps / done_ps.
// - A zero-byte request is a bug of the requester (the model's AHBM_CHECK fails; the engine
//   then reports the terminated unit).
#ifndef AHBMSIM_ACTORS_UNITS_HBM_CHANNEL_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_HBM_CHANNEL_ACTOR_H_

#include <optional>
#include <string>

#include "actors/engine.h"
#include "actors/models/hbm_channel_model.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/topology.pb.h"
#include "actors/units/unit_context.h"

namespace ahbm::sim {

struct HbmChannelActorState {
  std::optional<HbmChannelModel> model;  // set by the behavior function (no default ctor)
};
using HbmChannelActor = caf::stateful_actor<HbmChannelActorState>;

// The behavior of unit `self_id`; spawn with
// `engine.system().spawn(HbmChannelBehavior, &engine, self_id, &config, stats)` (stats may be
// null; `config` lives until the actor has initialized, at the next Run).
caf::behavior HbmChannelBehavior(HbmChannelActor* self, Engine* engine, UnitId self_id,
                                 const pb::HbmChannel* config, StatsBoard* stats);

// Spawns the channel actor in engine.system() and registers it as unit `id` named `name`
// (`config` lives until the next Run).
void StartHbmChannelActor(Engine& engine, UnitId id, std::string name,
                          const pb::HbmChannel& config);
// The same for channel `channel` (CUBE-local index) of global CUBE `cube` of ctx's chip, with
// stats on ctx.stats.
void StartHbmChannelActor(UnitContext& ctx, uint32_t cube, uint32_t channel);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_HBM_CHANNEL_ACTOR_H_
