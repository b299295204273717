// The DMA engine actor of one PE (DESIGN §2-§4): a thin CAF shell over DmaModel (STYLE 4) that
// talks to the CUBE's HBM channel actors (hbm_channel_actor.h).
//
// Ports:
// - in  std::shared_ptr<const pb::DmaCmd> from a requester (the PE scheduler; any unit).
// - out std::shared_ptr<const pb::HbmRequest> to the CUBE's channel actors.
// - in  std::shared_ptr<const pb::HbmResponse> from those channel actors.
// - out std::shared_ptr<const pb::Completion> or std::shared_ptr<const pb::DmaError> to the
//   requester (the src of the DmaCmd).
//
// Contract:
// - A DmaCmd is planned with DmaModel::Plan at delivery time now() = issue. If planning fails,
//   or the cmd_id is already in flight on this DMA, the requester gets at once a DmaError
//   {cmd_id, message} (the model's message names the issuing PE, the address and the reason);
//   nothing else happens and the engine keeps running.
// - HBM read / write: one HbmRequest per DmaChannelShare, all sent at once (zero delay), in
//   ascending channel order, to unit ChipIndex::HbmChannelUnit(plan.cube, share.channel), with
//   request_id = cmd_id, channel = that unit id, bytes = the share's charged bytes, write = the
//   kind. Every response arrives at `issue` too (the channels reply at once). When the last one
//   has arrived the requester gets at once
//     Completion{cmd_id, unit = this DMA's unit id,
//                start_ps = min over responses of start_ps,
//                end_ps   = max over responses of (done_ps + ExtraLatency(plan))},
//   i.e. the numbers DmaModel::Execute gives; end_ps lies in the future (the PE scheduler's
//   planner needs it at issue). Contention is the channels' FIFO in engine delivery order.
// - TCM -> TCM copy: no channels; the model's TCM copy path (DmaModel::Execute) times it and the
//   requester gets the Completion at once.
// - DmaBatch (a composite's operand pieces, all HBM reads): planned in order like as many
//   DmaCmds arriving at once, but each channel gets ONE HbmRequest listing its parts (in batch
//   order) and the requester gets ONE DmaBatchDone with every command's Completion, when the
//   last grant is in — the same times as separate commands, far fewer events. A batch command
//   that cannot be planned is our bug (the scheduler checked it): AHBM_CHECK.
// - Several commands may be in flight; their state is kept in a std::map keyed by cmd_id. An
//   HbmResponse for no pending command or from an unexpected channel is a bug (AHBM_CHECK).
// - With a UnitContext: stats on the DMA unit (ops, busy_ps = the union of the commands'
//   [start, end) spans — they overlap —, bytes read from /
//   written to HBM or copied) and one OpRecord per command ("dma_read", "dma_write",
//   "dma_copy") in the op log, both when the Completion is sent.
// - DmaModel::stats() counts only TCM copies here (HBM commands are timed by the channel actors,
//   not by DmaModel::Execute).
#ifndef AHBMSIM_ACTORS_UNITS_DMA_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_DMA_ACTOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/engine.h"
#include "actors/models/dma_model.h"
#include "actors/time.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/topology.pb.h"
#include "topology/ids.h"
#include "actors/units/unit_context.h"

namespace ahbm::sim {

// A union of [start, end) spans: Add returns how much of a new span was not yet covered.
class SpanUnion {
 public:
  uint64_t Add(uint64_t start, uint64_t end);
  uint64_t total() const { return total_; }

 private:
  std::map<uint64_t, uint64_t> spans_;  // disjoint, start -> end
  uint64_t total_ = 0;
};

struct DmaActorState {
  // One HBM command waiting for its channels' responses.
  struct Pending {
    UnitId requester = 0;
    SimTime extra;                 // ExtraLatency(plan)
    std::set<UnitId> outstanding;  // channel unit ids not yet answered
    SimTime start = SimTime::Max();
    SimTime end;
    SimTime issue;
    DmaKind kind = DmaKind::kHbmRead;
    uint64_t bytes = 0;
    uint64_t batch = 0;            // the DmaBatch it belongs to (0: none)
  };
  // A DmaBatch whose commands are not all granted yet.
  struct Batch {
    UnitId requester = 0;
    std::vector<uint64_t> cmds;                          // in batch order
    std::map<uint64_t, pb::Completion> done;             // by cmd_id
  };
  std::optional<DmaModel> model;          // set by the behavior function (no default ctor)
  std::optional<topology::ChipIndex> index;
  std::map<uint64_t, Pending> pending;    // by cmd_id
  std::map<uint64_t, Batch> batches;      // by batch_id
  SpanUnion busy;                         // spans of finished commands (stats)
};
using DmaActor = caf::stateful_actor<DmaActorState>;

// The behavior of the DMA of global PE `pe`, unit `self_id`; spawn with
// `engine.system().spawn(DmaBehavior, &engine, self_id, &chip, pe, ctx)`. `chip` must be
// validated and live until the actor has initialized (the next Run); ctx (stats and op log) may
// be null.
caf::behavior DmaBehavior(DmaActor* self, Engine* engine, UnitId self_id, const pb::Chip* chip,
                          uint32_t pe, UnitContext* ctx);

// Spawns the DMA actor of global PE `pe` and registers it as unit `id` named `name` (`chip`
// lives until the next Run).
void StartDmaActor(Engine& engine, UnitId id, std::string name, const pb::Chip& chip,
                   uint32_t pe);
// The DMA of global PE `pe` of ctx's chip, with stats and op log.
void StartDmaActor(UnitContext& ctx, uint32_t pe);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_DMA_ACTOR_H_
