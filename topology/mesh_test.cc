#include "topology/mesh.h"

#include <set>

#include "gtest/gtest.h"

namespace ahbm::topology {
namespace {

TEST(MeshTest, IndexIsRowMajor) {
  const Mesh mesh(/*rows=*/2, /*cols=*/4);
  EXPECT_EQ(mesh.size(), 8u);
  EXPECT_EQ(mesh.IndexOf({1, 2}), 6u);
  EXPECT_EQ(mesh.CoordOf(6), (Coord{1, 2}));
  for (uint32_t i = 0; i < mesh.size(); ++i) EXPECT_EQ(mesh.IndexOf(mesh.CoordOf(i)), i);
}

TEST(MeshTest, NeighboursFollowCompassAndStopAtEdges) {
  const Mesh mesh(/*rows=*/2, /*cols=*/4);
  // Node 1 = (0, 1).
  EXPECT_EQ(mesh.Neighbour(1, Dir::kNorth), std::nullopt);
  EXPECT_EQ(mesh.Neighbour(1, Dir::kSouth), 5u);
  EXPECT_EQ(mesh.Neighbour(1, Dir::kEast), 2u);
  EXPECT_EQ(mesh.Neighbour(1, Dir::kWest), 0u);
  // Node 7 = (1, 3), the south-east corner.
  EXPECT_EQ(mesh.Neighbour(7, Dir::kSouth), std::nullopt);
  EXPECT_EQ(mesh.Neighbour(7, Dir::kEast), std::nullopt);
  EXPECT_EQ(mesh.Neighbour(7, Dir::kNorth), 3u);
  EXPECT_EQ(mesh.Neighbour(7, Dir::kWest), 6u);
}

TEST(MeshTest, NeighbourRelationIsSymmetricWithOppositeDirection) {
  const Mesh mesh(/*rows=*/4, /*cols=*/4);
  for (uint32_t i = 0; i < mesh.size(); ++i) {
    int count = 0;
    for (Dir dir : kAllDirs) {
      const auto n = mesh.Neighbour(i, dir);
      if (!n) continue;
      ++count;
      EXPECT_EQ(mesh.HopDistance(i, *n), 1u);
      EXPECT_EQ(mesh.Neighbour(*n, Opposite(dir)), i);
    }
    const Coord c = mesh.CoordOf(i);
    const int edges = (c.row == 0) + (c.row == 3) + (c.col == 0) + (c.col == 3);
    EXPECT_EQ(count, 4 - edges) << "node " << i;
  }
}

TEST(MeshTest, XyPathGoesAlongTheRowFirstAndHasManhattanLength) {
  const Mesh mesh(/*rows=*/4, /*cols=*/4);
  for (uint32_t from = 0; from < mesh.size(); ++from) {
    for (uint32_t to = 0; to < mesh.size(); ++to) {
      const std::vector<Dir> path = mesh.XyPath(from, to);
      ASSERT_EQ(path.size(), mesh.HopDistance(from, to));
      uint32_t at = from;
      bool turned = false;
      for (Dir dir : path) {
        const bool vertical = dir == Dir::kNorth || dir == Dir::kSouth;
        if (vertical) turned = true;
        EXPECT_FALSE(turned && !vertical) << "X move after a Y move";
        const auto next = mesh.Neighbour(at, dir);
        ASSERT_TRUE(next.has_value());
        at = *next;
      }
      EXPECT_EQ(at, to);
    }
  }
  EXPECT_EQ(mesh.XyPath(/*from=*/0, /*to=*/15),
            (std::vector<Dir>{Dir::kEast, Dir::kEast, Dir::kEast, Dir::kSouth, Dir::kSouth,
                              Dir::kSouth}));
}

TEST(MeshDeathTest, OutOfRangeNodeIsABug) {
  const Mesh mesh(/*rows=*/2, /*cols=*/2);
  EXPECT_DEATH(mesh.CoordOf(4), "outside 2x2");
}

}  // namespace
}  // namespace ahbm::topology
