#include "topology/routing.h"

#include "base/check.h"

namespace ahbm::topology {

Router::Router(const ChipIndex& index, Coord ucie_port)
    : index_(index), port_cube_(index.cube_mesh().IndexOf(ucie_port)) {}

void Router::AppendXy(uint32_t sip, uint32_t from, uint32_t to, std::vector<Hop>& route) const {
  const Mesh& mesh = index_.cube_mesh();
  uint32_t at = from;
  for (Dir dir : mesh.XyPath(from, to)) {
    const std::optional<uint32_t> next = mesh.Neighbour(at, dir);
    AHBM_CHECK(next.has_value()) << "X-Y path left the mesh";
    route.push_back(Hop{Hop::Link::kNoc, CubeId{sip, at}, CubeId{sip, *next}, dir});
    at = *next;
  }
}

std::vector<Hop> Router::Route(CubeId from, CubeId to) const {
  index_.GlobalCube(from);  // bounds checks
  index_.GlobalCube(to);
  std::vector<Hop> route;
  if (from.sip == to.sip) {
    AppendXy(from.sip, from.cube, to.cube, route);
    return route;
  }
  AppendXy(from.sip, from.cube, port_cube_, route);
  const bool east = to.sip > from.sip;
  for (uint32_t sip = from.sip; sip != to.sip; east ? ++sip : --sip) {
    const uint32_t next = east ? sip + 1 : sip - 1;
    route.push_back(Hop{Hop::Link::kUcie, CubeId{sip, port_cube_}, CubeId{next, port_cube_},
                        east ? Dir::kEast : Dir::kWest});
  }
  AppendXy(to.sip, port_cube_, to.cube, route);
  return route;
}

uint32_t Router::NocHops(CubeId from, CubeId to) const {
  const Mesh& mesh = index_.cube_mesh();
  if (from.sip == to.sip) return mesh.HopDistance(from.cube, to.cube);
  return mesh.HopDistance(from.cube, port_cube_) + mesh.HopDistance(port_cube_, to.cube);
}

uint32_t Router::UcieHops(CubeId from, CubeId to) const {
  return from.sip > to.sip ? from.sip - to.sip : to.sip - from.sip;
}

}  // namespace ahbm::topology
