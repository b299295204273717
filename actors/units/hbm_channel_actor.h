// One HBM pseudo-channel unit (DESIGN §2-§3): a CAF actor in every run, holding the channel's
// timing state (HbmChannelServer, a plain class over the channel's HbmTimingModel,
// models/hbm_timing_model.h, tested without CAF: STYLE 4).
//
// A DMA call's share for this channel arrives as one HbmRequest and is answered with one
// HbmResponse, both at zero delay: the channel serves the request at arrival and its grants are
// future times that later requests cannot change (every registered model keeps that contract;
// a BANK channel runs the request's bursts to the end), so the exchange costs two events per
// channel share and moves no time. Tie-break rule: requests reaching one channel at the same
// instant are served in engine delivery order (time, source, source sequence), one request's
// parts in their own order.
//
// HbmChannelServer contract:
// - Serve(access) = the timing model's Serve, calls in non-decreasing `now` (the engine's
//   order). With a StatsBoard: ops += 1, busy_ps += the model's data-bus occupancy,
//   bytes_read / bytes_written += bytes.
// - A zero-byte request is a bug of the caller (the model's AHBM_CHECK).
//
// Channel actor ports:
// - in  std::shared_ptr<const pb::HbmRequest> from any unit (a DMA).
// - out std::shared_ptr<const pb::HbmResponse> to that unit (engine->current_src()), at once:
//   request_id copied from the request, channel = this unit's id, and one grant per
//   part, in order (part_cmd copied, start_ps = grant.start, done_ps = grant.done), each part
//   served by Serve({now, bytes, op, its chunk_addrs, bytes / chunks}) in turn, exactly like
//   separate requests at the same instant. Part arrays of different lengths, a part without
//   chunks, or chunk addresses that do not add up to the parts' chunk counts fail a CHECK (a
//   requester's bug).
#ifndef AHBMSIM_ACTORS_UNITS_HBM_CHANNEL_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_HBM_CHANNEL_ACTOR_H_

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "actors/engine.h"
#include "actors/models/hbm_call_memo.h"
#include "actors/models/hbm_channel_model.h"
#include "actors/models/hbm_timing_model.h"
#include "actors/time.h"
#include "actors/unit_actor.h"
#include "actors/units/unit_context.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

class HbmChannelServer {
 public:
  // `stats` may be null (no stats kept); `context` outlives it.
  HbmChannelServer(UnitId unit, const pb::HbmChannel& config, StatsBoard* stats,
                   HbmModelContext& context);

  // One access through the channel's timing model (hbm_timing_model.h), counted in the stats.
  HbmGrant Serve(const HbmAccess& access);
  // `bytes` anywhere: models that do not need addresses (FIFO).
  HbmGrant Serve(SimTime now, Bytes bytes, HbmOp op) { return Serve({now, bytes, op, {}, {}}); }
  // Whether accesses must list their chunks' channel-local addresses (BANK).
  bool needs_addresses() const { return needs_addresses_; }
  UnitId unit() const { return unit_; }

 private:
  UnitId unit_;
  std::unique_ptr<HbmTimingModel> model_;
  bool needs_addresses_;
  StatsBoard* stats_board_;
  pb::UnitStats* stats_ = nullptr;  // stats_board_->At(unit_), looked up at the first request
};

// The state of a channel actor: its server, by value (set when the actor starts).
struct HbmChannelState {
  std::optional<HbmChannelServer> server;
};
using HbmChannelActor = UnitStateActor<HbmChannelState>;

// The behavior of HBM channel unit `id` configured as `config` (which lives until the actor has
// initialized, the next Run); spawn with `engine.system().spawn(HbmChannelBehavior, &engine,
// id, &config, stats, &context)`. `stats` may be null; `context` (the call memos shared by the
// simulation's channels) outlives the actor.
caf::behavior HbmChannelBehavior(HbmChannelActor* self, Engine* engine, UnitId id,
                                 const pb::HbmChannel* config, StatsBoard* stats,
                                 HbmModelContext* context);

// Spawns and registers channel unit `id` named `name` (no stats).
void StartHbmChannelActor(Engine& engine, HbmModelContext& context, UnitId id, std::string name,
                          const pb::HbmChannel& config);
// Spawns and registers channel `channel` (CUBE-local index) of global CUBE `cube` of ctx's chip,
// with stats on ctx.stats and ctx.hbm_models' call memos.
void StartHbmChannelActor(UnitContext& ctx, uint32_t cube, uint32_t channel);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_HBM_CHANNEL_ACTOR_H_
