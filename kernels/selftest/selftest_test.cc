// The self-test kernels' host-side helper: the IPCQ ring over a PE mesh. (The kernels
// themselves run end to end in kernels/launch/launch_test.cc.)
#include "kernels/selftest/selftest.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "topology/mesh.h"

namespace ahbm::kernels::selftest {
namespace {

using ::testing::ElementsAre;

TEST(SnakeRing, TwoByTwoAndTwoByFour) {
  EXPECT_THAT(*SnakeRing(2, 2), ElementsAre(0, 1, 3, 2));
  EXPECT_THAT(*SnakeRing(2, 4), ElementsAre(0, 1, 2, 3, 7, 6, 5, 4));
}

TEST(SnakeRing, EveryRingVisitsEachNodeOnceAlongMeshEdges) {
  for (uint32_t rows = 1; rows <= 6; ++rows) {
    for (uint32_t cols = 1; cols <= 6; ++cols) {
      const auto ring = SnakeRing(rows, cols);
      const uint32_t size = rows * cols;
      const bool exists = size <= 2 || (size % 2 == 0 && rows >= 2 && cols >= 2);
      ASSERT_EQ(ring.has_value(), exists) << rows << "x" << cols;
      if (!ring) continue;
      ASSERT_EQ(ring->size(), size) << rows << "x" << cols;
      EXPECT_EQ(std::set<uint32_t>(ring->begin(), ring->end()).size(), size);
      const topology::Mesh mesh(rows, cols);
      for (size_t i = 0; size > 1 && i < size; ++i) {
        EXPECT_EQ(mesh.HopDistance((*ring)[i], (*ring)[(i + 1) % size]), 1u)
            << rows << "x" << cols << " step " << i;
      }
    }
  }
}

TEST(DirTo, NamesTheNeighbourDirection) {
  const topology::Mesh mesh(2, 4);
  EXPECT_EQ(DirTo(mesh, 0, 1), topology::Dir::kEast);
  EXPECT_EQ(DirTo(mesh, 1, 0), topology::Dir::kWest);
  EXPECT_EQ(DirTo(mesh, 3, 7), topology::Dir::kSouth);
  EXPECT_EQ(DirTo(mesh, 4, 0), topology::Dir::kNorth);
}

}  // namespace
}  // namespace ahbm::kernels::selftest
