// The actor of one IPCQ queue: PE `pe`'s outgoing queue in direction `dir` towards its
// neighbour inside the CUBE (DESIGN §2, §4). A thin CAF shell over IpcqModel (STYLE 4); all
// timing lives in the model, this file moves messages and validates them.
//
// Ports:
// - in  std::shared_ptr<const pb::IpcqSend> from the sending PE's CPU (any unit; the sender is
//   engine->current_src()).
// - out std::shared_ptr<const pb::IpcqAccepted> to that sender.
// - out std::shared_ptr<const pb::IpcqArrival> to the receiving PE's CPU,
//   ChipIndex::PeUnit(kPeCpu, dst_pe), one per chunk.
// - in  std::shared_ptr<const pb::IpcqPop> from the receiver (any unit).
//
// Contract:
// - IpcqSend at now(): IpcqModel::Send(now(), message_id, bytes). Every chunk that obtained a
//   departure gets an IpcqArrival {message_id, src_pe, dst_pe, chunk_index, chunk_count, bytes
//   (the chunk's), message_bytes, queue_unit = this unit, payload, request_id and stream (the
//   send's), values (the send's, on chunk 0 only)}, sent with delay arrive - now(), i.e.
//   delivered at the chunk's arrive. A message whose every chunk has credit at the send is
//   accepted at once: the sender gets IpcqAccepted {message_id, accepted_ps = now()} with zero
//   delay, before the arrivals (a `send` blocks only while the destination queue has no credit,
//   DESIGN §4). A message with blocked chunks (no credit) is remembered; its remaining
//   arrivals are sent by the IpcqPop that lets them depart, and its IpcqAccepted
//   {accepted_ps = the last chunk's depart} is delivered at that depart.
// - IpcqPop at now(): IpcqModel::Pop(now(), message_id, bytes); every chunk that departs because
//   of the returned credit (any message) is handled as above (arrival, and IpcqAccepted for a
//   message whose last chunk departed). Per-sender events of one handler are sent in chunk
//   order, a message's IpcqAccepted right after its last chunk's IpcqArrival.
// - Errors are kernel-runtime bugs (the tl API validates first) and fail an AHBM_CHECK naming the
//   queue, the message and the reason: src_pe is not this queue's PE, dst_pe is not the
//   neighbour in this queue's direction (or the PE has none), bytes == 0, message_id still pending
//   on this queue, a pop of a message that is not the queue's head (oldest not fully popped),
//   an IpcqSend whose sender_blocks (the sender's decision to wait for the IpcqAccepted) is not
//   the queue's (some chunk blocked at the send; actors/README.md, "Declared shortcuts").
// - The actor keeps every message until it is fully popped (std::map by message_id, plus the
//   FIFO of ids); nothing depends on pointer or hash order.
// - Stats: IpcqActorState::stats() = IpcqModel::stats() (sent_bytes, link_busy, credit_stall).
#ifndef AHBMSIM_ACTORS_UNITS_IPCQ_ACTOR_H_
#define AHBMSIM_ACTORS_UNITS_IPCQ_ACTOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "actors/engine.h"
#include "actors/models/ipcq_model.h"
#include "actors/unit_actor.h"
#include "caf/actor.hpp"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"
#include "topology/mesh.h"

namespace ahbm::sim {

struct IpcqActorState {
  // A message sent and not yet fully popped.
  struct Message {
    UnitId sender = 0;  // current_src() of its IpcqSend: gets the IpcqAccepted
    uint32_t src_pe = 0;
    uint32_t dst_pe = 0;
    uint64_t bytes = 0;
    uint32_t request_id = 0;  // passed through to the arrivals
    uint32_t stream = 0;
    uint32_t chunk_count = 0;
    bool accepted_sent = false;  // IpcqAccepted already sent (the message had credit at once)
    pb::TensorRef payload;
    std::string values;  // data mode: the send's values, until chunk 0's arrival carries them
  };

  std::optional<IpcqModel> model;  // set by the behavior function (no default ctor)
  std::optional<topology::ChipIndex> index;
  UnitId unit = 0;                       // this queue's unit id
  uint64_t chunk_bytes = 0;              // the model's chunk size (chunk_count of a message)
  uint32_t pe = 0;                       // global index of the sending PE
  std::optional<uint32_t> neighbour;     // global index of the receiving PE; none at the mesh edge
  std::map<uint64_t, Message> messages;  // by message_id
  VectorFifo<uint64_t> fifo;                   // message ids, oldest (the receiver's head) first
  uint64_t sent_messages = 0;            // IpcqSends accepted

  const IpcqStats& stats() const { return model->stats(); }
  // e.g. "sip0.cube0.pe0.ipcq.E", for diagnostics (built when asked: thousands of queues).
  std::string unit_name() const { return index->Name(topology::UnitId(unit)); }
};
using IpcqActor = UnitStateActor<IpcqActorState>;

// The behavior of the queue of global PE `pe` in direction `dir`, unit `self_id`; spawn with
// `engine.system().spawn(IpcqBehavior, &engine, self_id, chip.sip().cube().ipcq(),
// topology::ChipIndex(chip), pe, dir)`. `chip` must be validated. Only the queue's config and
// the (small) chip index are passed, not the whole chip: a chip has thousands of queues.
caf::behavior IpcqBehavior(IpcqActor* self, Engine* engine, UnitId self_id, const pb::Ipcq& ipcq,
                           const topology::ChipIndex& index, uint32_t pe, topology::Dir dir);

// Spawns the queue actor of global PE `pe`, direction `dir`, registers it as unit
// ChipIndex::IpcqUnit(pe, dir) under its ChipIndex name, and returns its handle.
caf::actor StartIpcqActor(Engine& engine, const pb::Chip& chip, uint32_t pe, topology::Dir dir);

// The state of a running queue actor (for stats and tests). The engine runs one handler at a
// time on one thread, so reading it between Run calls is safe; valid until Engine::Shutdown().
const IpcqActorState& IpcqStateOf(const caf::actor& actor);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_IPCQ_ACTOR_H_
