// Routes between CUBEs: X-Y over the CUBE NOC inside a SIP, and across SIPs through each
// SIP's UCIe port CUBE (SIPs form a line; ../shared/DESIGN.md §2).
//
// Contract: a route is the list of links a message traverses, in order. Inside a SIP it is
// the X-Y path (columns first, then rows), so its length is the Manhattan distance. Across
// SIPs it is X-Y to the source SIP's port CUBE, one UCIe hop per SIP boundary crossed, then
// X-Y from the destination SIP's port CUBE.
#ifndef AHBM_TOPOLOGY_ROUTING_H_
#define AHBM_TOPOLOGY_ROUTING_H_

#include <cstdint>
#include <vector>

#include "topology/ids.h"
#include "topology/mesh.h"

namespace ahbm::topology {

struct Hop {
  enum class Link : uint8_t { kNoc, kUcie };
  Link link = Link::kNoc;
  CubeId from;
  CubeId to;
  Dir dir = Dir::kEast;  // NOC hops: the direction taken; UCIe hops: kEast = to sip + 1
  friend bool operator==(const Hop&, const Hop&) = default;
};

class Router {
 public:
  Router(const ChipIndex& index, Coord ucie_port);

  std::vector<Hop> Route(CubeId from, CubeId to) const;
  uint32_t NocHops(CubeId from, CubeId to) const;
  uint32_t UcieHops(CubeId from, CubeId to) const;

 private:
  void AppendXy(uint32_t sip, uint32_t from, uint32_t to, std::vector<Hop>& route) const;

  ChipIndex index_;
  uint32_t port_cube_;
};

}  // namespace ahbm::topology

#endif  // AHBM_TOPOLOGY_ROUTING_H_
