// LinkModel: one directed link between two routers (a CUBE NOC link or one direction of a UCIe
// link) as a reservation table, for virtual cut-through packets. LinkNetworkModel strings these
// together along a Router hop list; this class holds the one rule every hop obeys.
//
// Config: `pb::Link` (clock_mhz, bytes_per_cycle = bw, latency_cycles = lat, per hop: router +
// wire) and the downstream buffer size in packets (`credits`; none = unbounded).
//
// Input:  Transmit(at, bytes) — a packet whose head is at this link's sending router from
//         `at.head` and whose tail (last byte) is there from `at.tail`.
//         Release(seq, t)     — the packet `seq` of this link left the downstream buffer at `t`
//                               (its tail left on the next link, or reached its destination).
// Output: LinkTransmission — the packet's start/end on this link and when its head and tail
//         reach the downstream router.
//
// Contract (exactly as implemented; "edge(t)" = first clock edge of this link at or after t):
// - start = edge(max(at.head, free, slot_free))
//     free      = the end of the packet this link transmitted before (call order: first
//                 transmitted, first served; a packet never uses an idle gap before an earlier
//                 reservation),
//     slot_free = with `credits` = c, the Release time of the packet transmitted c packets
//                 earlier (0 if none): at most c packets occupy the downstream buffer, each from
//                 its start on this link until its Release. Credit return takes no time.
// - end   = edge(max(start + ⌈bytes / bw⌉ cycles, at.tail)): the link sends no faster than its
//           bandwidth nor faster than the packet's bytes reach it (a faster link after a slower
//           one stays occupied until the tail is in). The link is busy over [start, end).
// - downstream head = start + lat, downstream tail = end + lat.
// - A packet must be Released before the packet `credits` later is transmitted (CHECK); a
//   LinkNetworkModel walks one packet over its whole route before the next, which ensures it.
//
// Stats: busy (Σ end - start), bytes, packets; busy_intervals: the [start, end) spans the link
// was busy, in time order (transmissions that touch are one span; they never overlap).
#ifndef AHBMSIM_ACTORS_MODELS_LINK_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_LINK_MODEL_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "actors/time.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

// When a packet's first and last byte are available at a router.
struct PacketAt {
  SimTime head;
  SimTime tail;
  friend bool operator==(const PacketAt&, const PacketAt&) = default;
};

struct LinkTransmission {
  uint64_t seq = 0;  // 0, 1, ... in transmit order on this link; names the packet for Release
  SimTime start;
  SimTime end;
  PacketAt downstream;  // {start + lat, end + lat}
};

struct LinkStats {
  SimTime busy;
  Bytes bytes;
  uint64_t packets = 0;
  std::vector<std::pair<SimTime, SimTime>> busy_intervals;
};

class LinkModel {
 public:
  // `link` must have passed topology Validate(). `credits` must be > 0 when given.
  LinkModel(const pb::Link& link, std::optional<uint32_t> credits);

  LinkTransmission Transmit(PacketAt at, Bytes bytes);
  void Release(uint64_t seq, SimTime at);

  // ⌈bytes / bw⌉ cycles, as time.
  SimTime SerialisationTime(Bytes bytes) const;
  SimTime Latency() const { return clock_.ToTime(latency_); }
  const ClockDomain& clock() const { return clock_; }
  // The end of the last transmission (0 before the first).
  SimTime free() const { return free_; }
  const LinkStats& stats() const { return stats_; }

 private:
  ClockDomain clock_;
  uint64_t bytes_per_cycle_;
  Cycles latency_;
  // Release times of the last `credits` packets, by seq % credits; SimTime::Max() while a packet
  // still holds its slot without a known release. Empty when the buffer is unbounded.
  std::vector<SimTime> slot_release_;
  uint64_t next_seq_ = 0;
  SimTime free_;
  LinkStats stats_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_LINK_MODEL_H_
