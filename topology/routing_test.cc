#include "topology/routing.h"

#include "gtest/gtest.h"
#include "topology/test_chip.h"

namespace ahbm::topology {
namespace {

// Follows a route link by link and checks it is connected, ends at `to`, and that each NOC
// hop moves one step in its direction.
void ExpectConnected(const ChipIndex& index, const std::vector<Hop>& route, CubeId from,
                     CubeId to) {
  CubeId at = from;
  for (const Hop& hop : route) {
    ASSERT_EQ(hop.from, at);
    if (hop.link == Hop::Link::kNoc) {
      ASSERT_EQ(hop.from.sip, hop.to.sip);
      ASSERT_EQ(index.cube_mesh().Neighbour(hop.from.cube, hop.dir), hop.to.cube);
    } else {
      ASSERT_EQ(hop.from.cube, hop.to.cube);
      ASSERT_EQ(hop.to.sip, hop.dir == Dir::kEast ? hop.from.sip + 1 : hop.from.sip - 1);
    }
    at = hop.to;
  }
  EXPECT_EQ(at, to);
}

TEST(RouterTest, RoutesInsideASipHaveManhattanLength) {
  const ChipIndex index(MakeStructuralChip({.sips = 1}));
  const Router router(index, Coord{0, 0});
  const Mesh& mesh = index.cube_mesh();
  for (uint32_t a = 0; a < mesh.size(); ++a) {
    for (uint32_t b = 0; b < mesh.size(); ++b) {
      const CubeId from{0, a};
      const CubeId to{0, b};
      const std::vector<Hop> route = router.Route(from, to);
      EXPECT_EQ(route.size(), mesh.HopDistance(a, b));
      EXPECT_EQ(router.NocHops(from, to), mesh.HopDistance(a, b));
      EXPECT_EQ(router.UcieHops(from, to), 0u);
      ExpectConnected(index, route, from, to);
    }
  }
}

TEST(RouterTest, RoutesAcrossSipsGoThroughThePortCube) {
  const ChipIndex index(MakeStructuralChip({.sips = 4}));
  const Coord port{1, 2};
  const Router router(index, port);
  const Mesh& mesh = index.cube_mesh();
  const uint32_t port_cube = mesh.IndexOf(port);
  for (uint32_t sa = 0; sa < 4; ++sa) {
    for (uint32_t sb = 0; sb < 4; ++sb) {
      if (sa == sb) continue;
      for (uint32_t a = 0; a < mesh.size(); a += 3) {
        for (uint32_t b = 0; b < mesh.size(); b += 5) {
          const CubeId from{sa, a};
          const CubeId to{sb, b};
          const std::vector<Hop> route = router.Route(from, to);
          const uint32_t sip_hops = sa > sb ? sa - sb : sb - sa;
          const uint32_t noc_hops =
              mesh.HopDistance(a, port_cube) + mesh.HopDistance(port_cube, b);
          EXPECT_EQ(route.size(), noc_hops + sip_hops);
          EXPECT_EQ(router.NocHops(from, to), noc_hops);
          EXPECT_EQ(router.UcieHops(from, to), sip_hops);
          ExpectConnected(index, route, from, to);
        }
      }
    }
  }
}

TEST(RouterTest, XyRouteExample) {
  const ChipIndex index(MakeStructuralChip({.sips = 1}));
  const Router router(index, Coord{0, 0});
  // (0,1) -> (2,3): E, E, S, S.
  const std::vector<Hop> route = router.Route(CubeId{0, 1}, CubeId{0, 11});
  ASSERT_EQ(route.size(), 4u);
  EXPECT_EQ(route[0].dir, Dir::kEast);
  EXPECT_EQ(route[1].dir, Dir::kEast);
  EXPECT_EQ(route[2].dir, Dir::kSouth);
  EXPECT_EQ(route[3].dir, Dir::kSouth);
  EXPECT_EQ(route[1].to, (CubeId{0, 3}));
}

}  // namespace
}  // namespace ahbm::topology
