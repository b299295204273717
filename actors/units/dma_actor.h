// The DMA engine actor of one PE (DESIGN §2-§4): a thin CAF shell over DmaModel (STYLE 4) that
// talks to the CUBE's HBM channel actors (hbm_channel_actor.h).
//
// Ports:
// - in  std::shared_ptr<const pb::DmaCmd> or pb::DmaBatch from a requester (the PE scheduler;
//   any unit).
// - out std::shared_ptr<const pb::Completion>, pb::DmaBatchDone or pb::DmaError to the requester
//   (the src of the command).
// - HBM channels: folded calls into the CUBE's HbmChannelServers (hbm_channel_actor.h), no
//   events: a channel request and its grant carry no timing of their own.
//
// Contract:
// - A DmaCmd is planned with DmaModel::Plan at delivery time now() = issue. If planning fails,
//   or the cmd_id is still in flight on this DMA (an earlier command with that id ends after
//   now()), the requester gets at once a DmaError {cmd_id, message} (the model's message names
//   the issuing PE, the address and the reason); nothing else happens and the engine goes on.
// - HBM read / write: each DmaChannelShare, in ascending channel order, is served by the
//   channel's server at now(); the requester gets at once
//     Completion{cmd_id, unit = this DMA's unit id,
//                start_ps = min over the grants of start,
//                end_ps   = max over the grants of (done + ExtraLatency(plan))},
//   i.e. the numbers DmaModel::Execute gives; end_ps lies in the future (the PE scheduler's
//   planner needs it at issue). Contention is the channels' FIFO in the order the DMA handlers
//   run (the tie-break rule of hbm_channel_actor.h).
// - TCM -> TCM copy: no channels; the model's TCM copy path (DmaModel::Execute) times it and the
//   requester gets the Completion at once.
// - DmaBatch (a composite's operand pieces, all HBM reads): planned in batch order; each
//   channel serves its parts in batch order — the same times as separate commands arriving at
//   once — and the requester gets ONE DmaBatchDone with every command's Completion, in batch
//   order, at once. A batch command that cannot be planned is our bug (the scheduler checked
//   it): AHBM_CHECK.
// - With a UnitContext: stats on the DMA unit (ops, busy_ps = the union of the commands'
//   [start, end) spans — they overlap —, bytes read from / written to HBM or copied; for HBM
//   commands hbm_useful_bytes = the plan's useful bytes and hbm_charged_bytes = its charged
//   bytes, what the channels were asked to move, chunk waste included) and one
//   OpRecord per command ("dma_read", "dma_write", "dma_copy") in the op log. A batch's
//   commands are recorded in the order their last channel (highest channel unit id) granted
//   them, batch order among equals — the order in which per-channel replies would complete them.
// - DmaModel::stats() counts only TCM copies here (HBM commands are timed by the channels, not
//   by DmaModel::Execute).
#ifndef AHBMSIM_ACTORS_UNITS_DMA_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_DMA_ACTOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "actors/engine.h"
#include "actors/models/dma_model.h"
#include "actors/time.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/topology.pb.h"
#include "topology/ids.h"
#include "actors/units/hbm_channel_actor.h"
#include "actors/units/unit_context.h"

namespace ahbm::sim {

// A union of [start, end) spans: Add returns how much of a new span was not yet covered.
class SpanUnion {
 public:
  uint64_t Add(uint64_t start, uint64_t end);
  uint64_t total() const { return total_; }

 private:
  struct Span {
    uint64_t start;
    uint64_t end;
  };
  std::vector<Span> spans_;  // ascending, neither overlapping nor touching
  uint64_t total_ = 0;
};

struct DmaActorState {
  std::optional<DmaModel> model;          // set by the behavior function (no default ctor)
  std::optional<topology::ChipIndex> index;
  HbmChannelTable* channels = nullptr;    // the simulation's channel servers
  // The servers of the PE's CUBE by CUBE-local channel, each looked up in `channels` when it
  // first serves this DMA (the channels may be added after the DMA actor starts).
  std::vector<HbmChannelServer*> cube_channels;
  // End of every HBM command that may still be in flight (end > now), by cmd_id; pruned when
  // it grows (only for the duplicate-id check).
  absl::flat_hash_map<uint64_t, SimTime> in_flight;
  SpanUnion busy;                         // spans of finished commands (stats)
};
using DmaActor = caf::stateful_actor<DmaActorState>;

// The behavior of the DMA of global PE `pe`, unit `self_id`; spawn with
// `engine.system().spawn(DmaBehavior, &engine, self_id, &chip, pe, channels, ctx)`. `chip` must
// be validated and live until the actor has initialized (the next Run); `channels` holds the
// servers of the PE's CUBE; ctx (stats and op log) may be null.
caf::behavior DmaBehavior(DmaActor* self, Engine* engine, UnitId self_id, const pb::Chip* chip,
                          uint32_t pe, HbmChannelTable* channels, UnitContext* ctx);

// Spawns the DMA actor of global PE `pe` and registers it as unit `id` named `name` (`chip`
// lives until the next Run).
void StartDmaActor(Engine& engine, UnitId id, std::string name, const pb::Chip& chip,
                   uint32_t pe, HbmChannelTable& channels);
// The DMA of global PE `pe` of ctx's chip, with ctx.hbm_channels, stats and op log.
void StartDmaActor(UnitContext& ctx, uint32_t pe);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_DMA_ACTOR_H_
