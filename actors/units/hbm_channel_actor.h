// One HBM pseudo-channel unit (DESIGN §2-§3): its timing state (HbmChannelServer, a plain class
// over the channel's HbmTimingModel, models/hbm_timing_model.h) and the thin CAF actor that is
// its message port (STYLE 4).
//
// Folded requests: a DMA's per-channel request and the channel's reply carry no timing of their
// own — the DMA asks at now(), the channel answers at once with a grant, a future time that
// later requests cannot change (every registered model keeps that contract). So the DMA actors
// of a CUBE call their channels' servers directly, inside their own handler (HbmChannelTable),
// instead of sending one event per channel and getting one back. The engine runs one handler
// at a time, so this is a plain, deterministic call. Tie-break rule: requests reaching one
// channel at the same instant are served in the order the requesting handlers run (engine
// delivery order of the DMA commands), and one command's parts in its own order.
//
// HbmChannelServer contract:
// - Serve(access) = the timing model's Serve, calls in non-decreasing `now` (the engine's
//   order). With a StatsBoard: ops += 1, busy_ps += the model's data-bus occupancy,
//   bytes_read / bytes_written += bytes.
// - A zero-byte request is a bug of the caller (the model's AHBM_CHECK).
//
// Channel actor (ports; models that need no addresses):
// - in  std::shared_ptr<const pb::HbmRequest> from any unit.
// - out std::shared_ptr<const pb::HbmResponse> to that unit (engine->current_src()), at once,
//   with the grant: request_id and bytes copied from the request, start_ps = grant.start,
//   done_ps = grant.done, channel = this unit's id. A request with `parts` is served part by
//   part in order, exactly like separate requests at the same instant; the response lists one
//   grant per part (`parts`) instead of start_ps / done_ps.
// The actor and the folded calls share the one server, so both kinds of requester see one
// channel.
#ifndef AHBMSIM_ACTORS_UNITS_HBM_CHANNEL_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_HBM_CHANNEL_ACTOR_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "actors/engine.h"
#include "actors/models/hbm_call_memo.h"
#include "actors/models/hbm_channel_model.h"
#include "actors/models/hbm_timing_model.h"
#include "actors/time.h"
#include "actors/units/unit_context.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
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

// The channel servers of one simulation, by channel unit id, and what their models share
// (HbmModelContext: the BANK channels' call memos, in `memo_mode`). Outlives every unit that
// uses it.
class HbmChannelTable {
 public:
  explicit HbmChannelTable(HbmCallMemo::Mode memo_mode = HbmCallMemo::Mode::kOn)
      : context_(memo_mode) {}
  // Each unit once.
  HbmChannelServer& Add(UnitId unit, const pb::HbmChannel& config, StatsBoard* stats);
  // The server of channel unit `unit`; AHBM_CHECK that it was added.
  HbmChannelServer& At(UnitId unit) {
    HbmChannelServer* s = unit < by_unit_.size() ? by_unit_[unit].get() : nullptr;
    if (s == nullptr) [[unlikely]] Missing(unit);
    return *s;
  }
  // The calls and hits of every call memo.
  HbmCallMemo::Stats memo_stats() const { return context_.memo_stats(); }

 private:
  [[noreturn]] static void Missing(UnitId unit);
  HbmModelContext context_;
  std::vector<std::unique_ptr<HbmChannelServer>> by_unit_;
};

// The behavior of the channel actor serving `server`; spawn with
// `engine.system().spawn(HbmChannelBehavior, &engine, server)`.
caf::behavior HbmChannelBehavior(caf::event_based_actor* self, Engine* engine,
                                 HbmChannelServer* server);

// Adds channel unit `id` to `table` and spawns and registers its actor named `name` (no stats).
void StartHbmChannelActor(Engine& engine, HbmChannelTable& table, UnitId id, std::string name,
                          const pb::HbmChannel& config);
// Adds channel `channel` (CUBE-local index) of global CUBE `cube` of ctx's chip to
// ctx.hbm_channels, with stats on ctx.stats, without an actor: in a ChipSim every request is a
// folded call from a DMA, and 4,096 idle channel actors were ~5 MB of a full-chip run.
void AddHbmChannel(UnitContext& ctx, uint32_t cube, uint32_t channel);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_HBM_CHANNEL_ACTOR_H_
