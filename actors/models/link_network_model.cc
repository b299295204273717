#include "actors/models/link_network_model.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/interval_union.h"

namespace ahbm::sim {
namespace {

using topology::CubeId;
using topology::Dir;
using topology::Hop;

topology::Coord PortCube(const pb::Chip& chip) {
  return topology::Coord{chip.ucie().port_cube().row(), chip.ucie().port_cube().col()};
}

// Length of the union of the busy spans of `links`.
SimTime UnionBusy(const std::vector<const LinkModel*>& links) {
  std::vector<std::pair<SimTime, SimTime>> spans;
  for (const LinkModel* link : links) {
    const auto& own = link->stats().busy_intervals;
    spans.insert(spans.end(), own.begin(), own.end());
  }
  return UnionLength(std::move(spans));
}

}  // namespace

LinkNetworkModel::LinkNetworkModel(const pb::Chip& chip)
    : index_(chip),
      router_(index_, PortCube(chip)),
      packet_bytes_(chip.sip().noc().packet_bytes()) {
  AHBM_CHECK(packet_bytes_.value() > 0) << "noc.packet_bytes must be > 0";
  const size_t noc_count = size_t{index_.num_cubes()} * topology::kAllDirs.size();
  noc_links_.reserve(noc_count);
  for (size_t i = 0; i < noc_count; ++i) {
    noc_links_.emplace_back(chip.sip().noc().link(), chip.sip().noc().credits_per_link());
  }
  ucie_links_.reserve(size_t{index_.sips()} * 2);
  for (size_t i = 0; i < size_t{index_.sips()} * 2; ++i) {
    ucie_links_.emplace_back(chip.ucie().link(), std::nullopt);
  }
}

size_t LinkNetworkModel::NocIndex(CubeId from, Dir dir) const {
  return size_t{index_.GlobalCube(from)} * topology::kAllDirs.size() + static_cast<size_t>(dir);
}

size_t LinkNetworkModel::UcieIndex(uint32_t from_sip, Dir dir) const {
  AHBM_CHECK(from_sip < index_.sips()) << "SIP " << from_sip << " of " << index_.sips();
  AHBM_CHECK(dir == Dir::kEast || dir == Dir::kWest) << "UCIe links run east or west";
  return size_t{from_sip} * 2 + (dir == Dir::kEast ? 0 : 1);
}

const LinkModel& LinkNetworkModel::NocLink(CubeId from, Dir dir) const {
  AHBM_CHECK(index_.cube_mesh().Neighbour(from.cube, dir).has_value())
      << "no NOC link leaves cube " << from.cube << " towards " << topology::DirName(dir);
  return noc_links_[NocIndex(from, dir)];
}

const LinkModel& LinkNetworkModel::UcieLink(uint32_t from_sip, Dir dir) const {
  return ucie_links_[UcieIndex(from_sip, dir)];
}

SimTime LinkNetworkModel::NocRouterBusy(CubeId cube) const {
  std::vector<const LinkModel*> links;
  for (Dir dir : topology::kAllDirs) {
    if (index_.cube_mesh().Neighbour(cube.cube, dir).has_value()) {
      links.push_back(&noc_links_[NocIndex(cube, dir)]);
    }
  }
  return UnionBusy(links);
}

SimTime LinkNetworkModel::UcieBusy(uint32_t sip) const {
  std::vector<const LinkModel*> links;
  if (sip + 1 < index_.sips()) links.push_back(&ucie_links_[UcieIndex(sip, Dir::kEast)]);
  if (sip > 0) links.push_back(&ucie_links_[UcieIndex(sip, Dir::kWest)]);
  return UnionBusy(links);
}

LinkModel& LinkNetworkModel::LinkOf(const Hop& hop) {
  if (hop.link == Hop::Link::kUcie) return ucie_links_[UcieIndex(hop.from.sip, hop.dir)];
  return noc_links_[NocIndex(hop.from, hop.dir)];
}

NetworkMessageTiming LinkNetworkModel::Send(SimTime ready, CubeId from, CubeId to, Bytes bytes) {
  AHBM_CHECK(bytes.value() > 0) << "network message of 0 bytes";
  const std::vector<Hop> route = router_.Route(from, to);
  std::vector<LinkModel*> links;
  links.reserve(route.size());
  NetworkMessageTiming timing;
  for (const Hop& hop : route) {
    links.push_back(&LinkOf(hop));
    ++(hop.link == Hop::Link::kUcie ? timing.ucie_hops : timing.noc_hops);
  }

  const uint64_t packet = packet_bytes_.value();
  const uint32_t packets = static_cast<uint32_t>((bytes.value() + packet - 1) / packet);
  timing.packets.reserve(packets);
  for (uint32_t i = 0; i < packets; ++i) {
    const Bytes size =
        i + 1 == packets ? Bytes(bytes.value() - uint64_t{i} * packet) : packet_bytes_;
    PacketAt at{ready, ready};
    SimTime injected = ready;
    LinkModel* upstream = nullptr;  // the link whose downstream buffer holds the packet
    uint64_t upstream_seq = 0;
    for (size_t h = 0; h < links.size(); ++h) {
      const LinkTransmission tx = links[h]->Transmit(at, size);
      if (h == 0) injected = tx.start;
      // The packet's tail has left the router it was buffered in.
      if (upstream != nullptr) upstream->Release(upstream_seq, tx.end);
      upstream = links[h];
      upstream_seq = tx.seq;
      at = tx.downstream;
    }
    // At the destination the packet is ejected as its tail arrives.
    if (upstream != nullptr) upstream->Release(upstream_seq, at.tail);
    timing.packets.push_back(PacketDelivery{i, size, injected, at.tail});
  }
  timing.delivered = timing.packets.back().delivered;
  return timing;
}

}  // namespace ahbm::sim
