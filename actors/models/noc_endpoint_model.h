// NocEndpointModel: receiver-side flow control of one PE's NOC endpoint (DESIGN §2 "CUBE NOC":
// a bounded endpoint queue per PE, `noc.endpoint_queue_bytes`; a message lands in a posted
// receive buffer or in that queue). A plain state machine (STYLE 4); the kernel runtime owns one
// per receiving PE and asks it when each NOC message may leave its sender.
//
// Config: the queue size in bytes (pb::Noc::endpoint_queue_bytes, validated > 0).
//
// Inputs (times in ps; `now` is the event clock, never decreasing from call to call; every
// other time is >= the `now` of its call):
//   Send(now, src, flow, id, ready, bytes)     a message of `bytes` > 0 from PE `src` on `flow`
//                                              whose data is ready at `ready`.
//   PostRecv(now, src, flow, at)               a receive for (src, flow) was posted at `at`.
// A flow is the receiver's matching key beside the source (the kernel runtime's (request,
// message stream), runtime.h); the model only compares flows.
//   Consume(now, id, at)                       a receive took message `id` at `at`.
// Outputs: Departure {message_id, depart, landing} — when a message leaves its sender and where
//   it lands; Send returns it at once or nothing (the message is *blocked*); PostRecv and
//   Consume return the blocked messages they let go, in the order they were blocked.
//
// Contract (exactly as implemented):
// - Pairing: per (src, flow), the k-th message sent is taken by the k-th receive posted (the
//   runtime's receives take their flow's oldest message from a source, in post order; NOC
//   delivery keeps a source's order). A message whose receive is already posted lands in that
//   receive's buffer ("posted": the buffer has the receive's size, no queue credit is used).
// - Credits are bytes of the endpoint queue, counted by the sender side (this model, as the
//   IPCQ sender counts its queue's): queue_bytes at the start; a message that lands in the
//   queue spends its whole size at its departure and gets it back when a receive takes it
//   (Consume, at `at`). A message never enters the queue in part (no streaming through the
//   queue: a message larger than the free queue waits whole, for credit or for its receive).
// - Departure of a message ready at r, of N bytes, on (src, flow):
//     posted  p = max(r, post time of its receive), if that receive is posted;
//     queue   q = the earliest t >= r at which credit(t) >= N, where credit(t) = credit after
//             every departure so far + every return known with time <= t (if any such t);
//     depart = p when p exists and (no q or p <= q) — landing kPosted; else q — landing kQueue
//     (spending N). Neither: blocked. Ties go to the posted buffer (no credit spent).
//   Credit is counted in call order, not time order: a departure spends from every later
//   decision, even one whose ready time lies before it (conservative, deterministic).
// - Order: per (src, flow) messages leave in send order, none before the previous one's
//   departure (r above is max(ready, that departure)): a message behind a blocked one of the
//   same (src, flow) is blocked too. Messages of other pairs are independent: a blocked
//   message holds no credit and never blocks another pair's smaller message (first fit, in
//   block order, at each PostRecv / Consume).
// - A departure released by PostRecv or Consume is at max(its rule time, now).
// - Determinism: the results depend only on the sequence of calls.
#ifndef AHBMSIM_ACTORS_MODELS_NOC_ENDPOINT_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_NOC_ENDPOINT_MODEL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "actors/time.h"

namespace ahbm::sim {

class NocEndpointModel {
 public:
  enum class Landing : uint8_t { kPosted, kQueue };
  struct Departure {
    uint64_t message_id = 0;
    SimTime depart;
    Landing landing = Landing::kQueue;
    friend bool operator==(const Departure&, const Departure&) = default;
  };
  // A blocked message (deadlock reports).
  struct Blocked {
    uint64_t message_id = 0;
    uint32_t src_pe = 0;
    uint64_t flow = 0;
    SimTime ready;
    Bytes bytes;
  };

  explicit NocEndpointModel(Bytes queue_bytes);

  std::optional<Departure> Send(SimTime now, uint32_t src_pe, uint64_t flow, uint64_t message_id,
                                SimTime ready, Bytes bytes);
  std::vector<Departure> PostRecv(SimTime now, uint32_t src_pe, uint64_t flow, SimTime at);
  std::vector<Departure> Consume(SimTime now, uint64_t message_id, SimTime at);

  Bytes queue_bytes() const { return Bytes(static_cast<uint64_t>(queue_bytes_)); }
  // Bytes of the queue held by messages that landed there and no receive has taken yet.
  Bytes queued_bytes() const { return Bytes(static_cast<uint64_t>(queued_)); }
  const std::vector<Blocked>& blocked() const { return blocked_; }

 private:
  using Key = std::pair<uint32_t, uint64_t>;  // (src_pe, flow)
  struct Pair {
    std::deque<SimTime> posts;  // receives posted and not yet paired with a departed message
    uint64_t unposted = 0;      // messages departed before their receive was posted
    SimTime last_depart;        // the pair's messages leave in order
  };
  struct Return {
    SimTime at;
    int64_t bytes = 0;
  };

  // Absorbs the returns due by `now` into credit_.
  void Absorb(SimTime now);
  // The rule above for one message; nullopt: blocked. Commits the departure.
  std::optional<Departure> Decide(SimTime now, const Blocked& m);
  std::vector<Departure> Unblock(SimTime now);

  int64_t queue_bytes_;
  int64_t credit_;                      // queue - spent + absorbed returns (may go below 0)
  int64_t queued_ = 0;                  // bytes in the queue (spent, not yet returned)
  std::vector<Return> returns_;         // not yet absorbed, by time (ties: call order)
  std::map<uint64_t, int64_t> in_queue_;  // message id -> bytes, for messages that landed there
  std::map<Key, Pair> pairs_;
  std::vector<Blocked> blocked_;        // in block order
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_NOC_ENDPOINT_MODEL_H_
