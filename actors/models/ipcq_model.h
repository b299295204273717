// IpcqModel: one IPCQ queue — one direction between two neighbouring PEs of a CUBE — as a plain
// state machine (STYLE 4). The IPCQ actor owns one per outgoing queue and calls it once per
// `send` and once per receiver pop; the model answers with what departs and arrives when.
//
// Config: `pb::Ipcq` (DESIGN §2: link 64 B/cycle, 8 cycles/hop, 256 KiB queue, 16 KiB chunks).
//
// Inputs (time-stamped, in picoseconds):
//   Send(ready, message_id, bytes)  the sender hands over a message whose data is ready at `ready`.
//   Pop(now, message_id, bytes)     the receiver takes, at `now`, the head message's next chunks,
//                                   `bytes` in all, each arrived by `now`.
// Outputs: the chunks that obtained a departure (`IpcqChunk`: depart / link_free / arrive), the
//   bytes still waiting on credit, and for a pop the time its credit reaches the sender.
//
// Contract (timing rules, exactly as implemented; bw = link.bytes_per_cycle, lat =
// link.latency_cycles, both in the link's clock domain; "edge" = ClockDomain::NextEdge):
// - A message of N > 0 bytes is split into ⌈N / chunk_bytes⌉ chunks of chunk_bytes, the last one
//   holding the remainder. A message is FIFO behind every earlier message of this queue, and its
//   chunks are FIFO among themselves: a chunk never departs before an earlier one.
// - Credits are bytes. The sender starts with queue_bytes of credit. A chunk spends credit equal
//   to its size at its departure and may depart only when the sender holds credit for the whole
//   chunk (no partial chunks).
// - depart   = max(edge(ready), link_free_of_previous_chunk, credit_time), where credit_time is
//              the earliest credit return that makes the credit cover the chunk (or no constraint
//              when the credit already does).
//   link_free = depart + ⌈bytes / bw⌉ cycles    (the link serialises chunks back to back)
//   arrive    = link_free + lat                  (the whole chunk is in the receiver's queue)
// - A chunk for which even every credit return already known is not enough is *blocked*; it and
//   every later chunk of this queue stay blocked until a Pop returns enough credit. Send never
//   unblocks anything (it adds no credit).
// - Pop(now, id, P): `id` must be the oldest message not yet fully popped (FIFO). It removes
//   that message's next chunks, P > 0 bytes of whole chunks, every one with arrive <= now (the
//   receiver names what it has seen arrive: a chunk arriving between the receiver's decision and
//   a later `now` is not taken along). The sender regains P bytes of credit at credit_return =
//   edge(now) + lat; blocked chunks are then scheduled by the rule above, so the first of them
//   departs at max(credit_return, ...). A receiver that posted its recv before the data came
//   calls Pop at each chunk's arrival (streaming, which lets a message larger than the queue
//   through); one that pops whole messages calls Pop once, at or after the last chunk's arrive.
// - Hence the receiver's queue (chunks departed, not yet popped) never holds more than
//   queue_bytes.
// - Pop times must not decrease from call to call (the actor pops in engine order), so credit
//   comes back in time order. Send's `ready` is free; chunks depart in the call order of Send
//   (FIFO), even when a later call has an earlier `ready` (tie-break: call order).
//
// Suggested actor use (DESIGN §4 "send blocks only while the destination queue has no credit"):
// the sending CPU continues at once when Send's `blocked_bytes` is zero, and otherwise waits until
// the depart of the message's last chunk, which the unblocking Pop reports in `departed`.
// The receiver's recv completes at the arrive of the message's last chunk.
//
// Stats (per queue): sent_bytes (bytes that departed), link_busy (Σ chunk serialisation time),
// credit_stall (Σ over chunks of depart - max(edge(ready), link free): time lost waiting for
// credit).
#ifndef AHBMSIM_ACTORS_MODELS_IPCQ_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_IPCQ_MODEL_H_

#include <cstdint>
#include <cstddef>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "actors/time.h"
#include "base/vector_fifo.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

// One chunk that has obtained its departure.
struct IpcqChunk {
  uint64_t message_id = 0;
  uint32_t index = 0;  // 0-based position in its message
  Bytes bytes;
  bool last = false;  // the message's final chunk
  SimTime depart;     // first byte leaves the sender; credit is spent here
  SimTime link_free;  // last byte has left: depart + ⌈bytes / bw⌉ cycles
  SimTime arrive;     // the whole chunk is in the receiver's queue: link_free + latency
  friend bool operator==(const IpcqChunk&, const IpcqChunk&) = default;
};

struct IpcqSendResult {
  std::vector<IpcqChunk> departed;  // this message's chunks that have a departure, in order
  Bytes blocked_bytes;              // this message's bytes still waiting for a Pop's credit
  // The last chunk's depart when blocked_bytes is zero: the whole message has been accepted.
  std::optional<SimTime> accepted;
};

struct IpcqPopResult {
  Bytes popped;                          // bytes removed from the receiver's queue by this call
  bool message_complete = false;         // every chunk of the message has now been popped
  SimTime credit_return;                 // when the sender regains `popped`
  std::vector<IpcqChunk> departed;       // previously blocked chunks (any message) now scheduled
};

struct IpcqStats {
  Bytes sent_bytes;
  SimTime link_busy;
  SimTime credit_stall;
};

class IpcqModel {
 public:
  // `ipcq` must have passed topology Validate() (positive sizes, chunk_bytes <= queue_bytes).
  explicit IpcqModel(const pb::Ipcq& ipcq);

  // Enqueues a message of `bytes` > 0 whose data is ready at `ready`. `message_id` must differ
  // from every message of this queue that is not yet fully popped.
  IpcqSendResult Send(SimTime ready, uint64_t message_id, Bytes bytes);

  // The receiver pops, at `now`, the next `bytes` (whole chunks, all arrived by `now`) of the
  // head message, which must be `message_id`. `now` must be >= the previous Pop's.
  IpcqPopResult Pop(SimTime now, uint64_t message_id, Bytes bytes);

  // Whether a message of `bytes` sent now would have a chunk blocked, i.e. could not be wholly
  // accepted without a Pop that has not happened yet. Time does not matter: credit already on its
  // way back counts (the departure then waits for its return time, see Send's result).
  bool WouldBlock(Bytes bytes) const;

  // Bytes of chunks waiting for credit (all messages).
  Bytes blocked_bytes() const { return blocked_bytes_; }
  // Messages sent and not yet fully popped.
  size_t pending_messages() const { return messages_.size(); }

  const IpcqStats& stats() const { return stats_; }
  const ClockDomain& clock() const { return clock_; }
  // ⌈bytes / bw⌉ cycles, as time.
  SimTime SerialisationTime(Bytes bytes) const;
  // latency_cycles, as time.
  SimTime Latency() const { return clock_.ToTime(latency_); }

 private:
  struct Chunk {
    uint64_t message_id = 0;
    uint32_t index = 0;
    Bytes bytes;
    bool last = false;
    SimTime ready;
  };
  struct Message {
    uint64_t id = 0;
    uint32_t chunks = 0;
    uint32_t popped_chunks = 0;
    VectorFifo<IpcqChunk> unpopped;  // scheduled chunks not yet popped, in order
  };
  struct CreditReturn {
    SimTime at;
    Bytes bytes;
  };

  // Gives `chunk` its departure if the known credit allows, updating link and credit state.
  std::optional<IpcqChunk> TrySchedule(const Chunk& chunk);
  Message& FindMessage(uint64_t id);

  ClockDomain clock_;
  Bytes queue_bytes_;
  Bytes chunk_bytes_;
  uint64_t bytes_per_cycle_;
  Cycles latency_;

  VectorFifo<Message> messages_;  // FIFO; the front is the next one the receiver pops
  VectorFifo<Chunk> blocked_;          // FIFO; chunks waiting on credit
  Bytes blocked_bytes_;
  VectorFifo<CreditReturn> returns_;  // credit on its way back, by time, not yet counted
  Bytes returns_bytes_;               // Σ returns_
  Bytes credit_;                      // credit counted: start + absorbed returns - departures
  SimTime link_free_;
  SimTime last_pop_;
  IpcqStats stats_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_IPCQ_MODEL_H_
