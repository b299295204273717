// The DMA engine actor of one PE (DESIGN §2-§4): a thin CAF shell over DmaModel (STYLE 4) that
// talks to the CUBE's HBM channel actors (hbm_channel_actor.h).
//
// Ports:
// - in  std::shared_ptr<const pb::DmaCmd> or pb::DmaBatch from a requester (the PE scheduler;
//   any unit).
// - out std::shared_ptr<const pb::Completion>, pb::DmaBatchDone or pb::DmaError to the requester
//   (the src of the command).
// - out std::shared_ptr<const pb::HbmRequest> to the CUBE's HBM channels (a call's share of
//   each), in std::shared_ptr<const pb::HbmResponse> from them (the grants).
// - in  std::shared_ptr<const pb::DmaData> from the PE scheduler, data mode only: a completed
//   command's values, moved at delivery through UnitContext::data (a data-plane error goes to
//   UnitContext::AddError as an InvariantError "<pe>: <op> cmd <id>: data: <reason>": the
//   command passed the scheduler's checks; without a data plane the message is a bug:
//   AHBM_CHECK).
//
// Contract:
// - A DmaCmd is planned with DmaModel::Plan at delivery time now() = issue. If planning fails,
//   or the cmd_id is still in flight on this DMA (an earlier command with that id has not
//   completed or ends after now()), the requester gets at once a DmaError {cmd_id, message}
//   (the model's message names the issuing PE, the address and the reason); nothing else
//   happens and the engine goes on.
// - HBM read / write (a call): each DmaChannelShare, in ascending channel order, goes to its
//   channel at once as one HbmRequest {request_id = the call, one part: the share's bytes,
//   chunks and chunk addresses}. The channels serve at arrival and answer at once; when the
//   last answer arrives the requester gets
//     Completion{cmd_id, unit = this DMA's unit id,
//                start_ps = min over the grants of start,
//                end_ps   = max over the grants of (done + ExtraLatency(plan))},
//   i.e. the numbers DmaModel::Execute gives; end_ps lies in the future (the PE scheduler's
//   planner needs it at issue). Contention is the channels' FIFO in delivery order (the
//   tie-break rule of hbm_channel_actor.h). Events: the command, two per channel share, the
//   Completion.
// - TCM -> TCM copy: no channels; the model's TCM copy path (DmaModel::Execute) times it and the
//   requester gets the Completion at once.
// - DmaBatch (a composite's operand pieces, all HBM reads; one call): planned in batch order;
//   each channel gets ONE HbmRequest with one part per command that has chunks there, in batch
//   order, and serves them in that order — the same times as separate commands arriving at
//   once — and after the last answer the requester gets ONE DmaBatchDone with every command's
//   Completion, in batch order. A batch command that cannot be planned is our bug (the
//   scheduler checked it): AHBM_CHECK.
// - With a UnitContext: stats on the DMA unit (ops, busy_ps = the union of the commands'
//   [start, end) spans — they overlap —, bytes read from / written to HBM or copied; for HBM
//   commands hbm_useful_bytes = the plan's useful bytes and hbm_charged_bytes = its charged
//   bytes, what the channels were asked to move, chunk waste included) and one
//   OpRecord per command ("dma_read", "dma_write", "dma_copy") in the op log, filled in when
//   the call completes into the places reserved for it at issue (OpLog::ReserveOp: the log
//   lists a DMA command's record at the event that issued it). A batch's commands fill its
//   places in the order their last channel (highest channel unit id) answered, batch order
//   among equals.
// - DmaModel::stats() counts only TCM copies here (HBM commands are timed by the channels, not
//   by DmaModel::Execute).
#ifndef AHBMSIM_ACTORS_UNITS_DMA_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_DMA_ACTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "actors/engine.h"
#include "actors/models/dma_model.h"
#include "actors/time.h"
#include "actors/unit_actor.h"
#include "actors/units/unit_context.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"

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

// One command of a call in flight: what its record and Completion need.
struct DmaCallCmd {
  uint64_t cmd_id = 0;
  uint64_t parent_cmd_id = 0;
  DmaKind kind = DmaKind::kHbmRead;
  Bytes useful_bytes;
  Bytes charged_bytes;
  SimTime extra;                   // DmaModel::ExtraLatency of its plan
  SimTime start = SimTime::Max();  // min over its grants of start
  SimTime end;                     // max over its grants of (done + extra)
  UnitId last_channel = 0;         // the highest channel unit id that answered for it
};

// A DmaCmd or DmaBatch waiting for its channels' answers.
struct DmaCall {
  UnitId requester = 0;
  SimTime issue;
  bool batch = false;
  uint64_t batch_id = 0;
  uint32_t pending = 0;  // answers still to come
  // The op log places reserved for its commands' records at issue (consecutive), or
  // UINT64_MAX: none (no op log).
  uint64_t first_op_seq = UINT64_MAX;
  std::vector<DmaCallCmd> cmds;  // in command (batch) order
};

struct DmaActorState {
  std::optional<DmaModel> model;          // set by the behavior function (no default ctor)
  DmaPlan plan;                           // the command being planned (its buffers reused)
  UnitId first_channel = 0;               // unit id of channel 0 of the PE's CUBE
  // Calls by request_id (their slot; a slot is reused once its call completes).
  std::vector<DmaCall> calls;
  std::vector<uint32_t> free_calls;
  // A call's request per CUBE-local channel while it is being built (null: none yet).
  std::vector<std::shared_ptr<pb::HbmRequest>> outgoing;
  std::vector<uint32_t> outgoing_channels;  // the channels of `outgoing`'s non-null requests
  // End of every HBM command that may still be in flight (end > now; SimTime::Max() until its
  // call completes), by cmd_id; pruned when it grows (only for the duplicate-id check).
  absl::flat_hash_map<uint64_t, SimTime> in_flight;
  SpanUnion busy;                         // spans of finished commands (stats)
};
using DmaActor = UnitStateActor<DmaActorState>;

// The behavior of the DMA of global PE `pe`, unit `self_id`; spawn with
// `engine.system().spawn(DmaBehavior, &engine, self_id, &chip, pe, ctx)`. `chip` must be
// validated and live until the actor has initialized (the next Run); the CUBE's HBM channel
// actors must be registered before its first call; ctx (stats and op log) may be null.
caf::behavior DmaBehavior(DmaActor* self, Engine* engine, UnitId self_id, const pb::Chip* chip,
                          uint32_t pe, UnitContext* ctx);

// Spawns the DMA actor of global PE `pe` and registers it as unit `id` named `name` (`chip`
// lives until the next Run).
void StartDmaActor(Engine& engine, UnitId id, std::string name, const pb::Chip& chip, uint32_t pe);
// The DMA of global PE `pe` of ctx's chip, with stats and op log.
void StartDmaActor(UnitContext& ctx, uint32_t pe);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_DMA_ACTOR_H_
