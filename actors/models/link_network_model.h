// LinkNetworkModel: the CUBE NOC of every SIP plus the UCIe links between SIPs, as one set of
// LinkModel reservation tables walked along topology::Router hop lists. The NOC / UCIe actors call
// Send once per message; it computes every packet's delivery at once from the current link
// reservations and leaves its own reservations behind, so later messages see the contention.
//
// Config: `pb::Chip` — sip.noc (link, packet_bytes, credits_per_link), ucie (link, port_cube),
// sips and sip.cube_mesh. Links: one per direction between neighbouring CUBEs of a SIP (NOC,
// downstream buffer of credits_per_link packets) and one per direction between neighbouring SIPs
// (UCIe, downstream buffer unbounded: the proto has no UCIe credit field).
//
// Input:  Send(ready, from, to, bytes) — a message of `bytes` > 0 whose data is ready at the
//         source CUBE's router at `ready`.
// Output: NetworkMessageTiming — per packet, when it starts on its first link and when its last
//         byte reaches the destination CUBE; `delivered` is the last packet's.
//
// Contract (exactly as implemented):
// - Route: Router::Route(from, to) — X-Y inside a SIP; across SIPs X-Y to the port CUBE, one UCIe
//   hop per SIP boundary, X-Y from the port CUBE.
// - Packets: the message is split into ⌈bytes / packet_bytes⌉ packets of noc.packet_bytes, the last
//   holding the remainder; the same packets cross UCIe. Every packet is available at the source
//   at `ready` (head and tail).
// - Switching: virtual cut-through, by the LinkModel rule at every hop h of the route:
//     start_h = edge(max(head_h, link free, downstream slot free))
//     end_h   = edge(max(start_h + ⌈size / bw_h⌉ cycles, tail_h))
//     head_{h+1} = start_h + lat_h, tail_{h+1} = end_h + lat_h, with head_0 = tail_0 = ready.
//   A packet holds a buffer slot at the downstream router of hop h from start_h until it leaves
//   that router: end_{h+1}, or, at the destination, its delivery. delivered = tail_H.
//   Hence an uncontended packet is delivered at
//     ready + Σ_h lat_h + max_h ⌈size / bw_h⌉      (one hop cost per hop, one slowest body),
//   and the packets of an uncontended message follow one another at the slowest link's pace.
// - Order: packets are walked one at a time over their whole route, in packet order, and messages
//   in Send call order; every link serves packets in the order they were reserved (first
//   reserved, first served — a later call never slips into an idle gap before an earlier
//   reservation, even if its packet would get there first). So packets of one (from, to) pair
//   arrive in send order.
// - from == to: no link is used; every packet is delivered at `ready`.
// - Determinism: the result depends only on the chip and the sequence of calls.
// - Busy time (NocRouterBusy, UcieBusy): a unit is busy while at least one link leaving it is
//   busy (LinkModel: [start, end) of each transmission), so for each of its links
//   bytes / bw <= link busy <= unit busy <= the end of the last transmission.
#ifndef AHBMSIM_ACTORS_MODELS_LINK_NETWORK_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_LINK_NETWORK_MODEL_H_

#include <cstdint>
#include <vector>

#include "actors/models/link_model.h"
#include "actors/time.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"
#include "topology/mesh.h"
#include "topology/routing.h"

namespace ahbm::sim {

struct PacketDelivery {
  uint32_t index = 0;  // 0-based position in its message
  Bytes bytes;
  SimTime injected;   // start on the first link (ready when the route is empty)
  SimTime delivered;  // last byte at the destination CUBE
  friend bool operator==(const PacketDelivery&, const PacketDelivery&) = default;
};

struct NetworkMessageTiming {
  std::vector<PacketDelivery> packets;
  SimTime delivered;  // the last packet's delivery
  uint32_t noc_hops = 0;
  uint32_t ucie_hops = 0;
};

class LinkNetworkModel {
 public:
  // `chip` must have passed topology Validate().
  explicit LinkNetworkModel(const pb::Chip& chip);

  NetworkMessageTiming Send(SimTime ready, topology::CubeId from, topology::CubeId to, Bytes bytes);

  // The NOC link leaving CUBE `from` in direction `dir` (must exist in the mesh).
  const LinkModel& NocLink(topology::CubeId from, topology::Dir dir) const;
  // The UCIe link leaving SIP `from_sip` towards sip + 1 (kEast) or sip - 1 (kWest).
  const LinkModel& UcieLink(uint32_t from_sip, topology::Dir dir) const;
  // Busy time of the NOC router of `cube`: the length of the union of the busy spans of the NOC
  // links leaving it (time during which it moves bytes on at least one link).
  SimTime NocRouterBusy(topology::CubeId cube) const;
  // Busy time of SIP `sip`'s UCIe unit: the union of the busy spans of the UCIe links leaving it.
  SimTime UcieBusy(uint32_t sip) const;
  const topology::Router& router() const { return router_; }

 private:
  size_t NocIndex(topology::CubeId from, topology::Dir dir) const;
  size_t UcieIndex(uint32_t from_sip, topology::Dir dir) const;
  LinkModel& LinkOf(const topology::Hop& hop);

  topology::ChipIndex index_;
  topology::Router router_;
  Bytes packet_bytes_;
  std::vector<LinkModel> noc_links_;   // by (global cube, dir); links off the mesh edge unused
  std::vector<LinkModel> ucie_links_;  // by (sip, east/west); the ends of the line unused
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_LINK_NETWORK_MODEL_H_
