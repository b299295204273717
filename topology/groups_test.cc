#include "topology/groups.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"

namespace ahbm::topology {
namespace {

struct PartitionCase {
  uint32_t mesh_rows;
  uint32_t mesh_cols;
  uint32_t c;
};

class CubeGroupsTest : public testing::TestWithParam<PartitionCase> {};

// Every group is a contiguous rectangle, the groups tile the mesh, CUBEs are numbered
// row-major inside a group, and the root's depth is the smallest any CUBE of the group has
// (brute force over every candidate, independent of the library's own search).
TEST_P(CubeGroupsTest, GroupsAreRectanglesAndTheRootIsACentre) {
  const PartitionCase pc = GetParam();
  const Mesh mesh(pc.mesh_rows, pc.mesh_cols);
  const absl::StatusOr<CubeGroups> groups = CubeGroups::Partition(mesh, pc.c);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->c(), pc.c);
  ASSERT_EQ(groups->num_groups() * pc.c, mesh.size());

  std::set<uint32_t> seen;
  for (uint32_t g = 0; g < groups->num_groups(); ++g) {
    uint32_t min_row = UINT32_MAX, max_row = 0, min_col = UINT32_MAX, max_col = 0;
    for (uint32_t i = 0; i < pc.c; ++i) {
      const uint32_t cube = groups->SipCube(g, i);
      EXPECT_TRUE(seen.insert(cube).second) << "cube " << cube << " in two groups";
      EXPECT_EQ(groups->GroupOf(cube), g);
      EXPECT_EQ(groups->CubeInGroup(cube), i);
      const Coord at = mesh.CoordOf(cube);
      min_row = std::min(min_row, at.row);
      max_row = std::max(max_row, at.row);
      min_col = std::min(min_col, at.col);
      max_col = std::max(max_col, at.col);
      if (i > 0) {  // row-major inside the group
        const Coord prev = mesh.CoordOf(groups->SipCube(g, i - 1));
        EXPECT_TRUE(prev.row < at.row || (prev.row == at.row && prev.col + 1 == at.col));
      }
    }
    // c CUBEs inside a bounding box of c cells: a contiguous rectangle.
    EXPECT_EQ((max_row - min_row + 1) * (max_col - min_col + 1), pc.c) << "group " << g;

    uint32_t best_depth = UINT32_MAX;
    uint32_t best_index = 0;
    for (uint32_t cand = 0; cand < pc.c; ++cand) {
      uint32_t depth = 0;
      for (uint32_t other = 0; other < pc.c; ++other) {
        depth = std::max(depth, mesh.HopDistance(groups->SipCube(g, cand),
                                                 groups->SipCube(g, other)));
      }
      if (depth < best_depth) {
        best_depth = depth;
        best_index = cand;
      }
    }
    EXPECT_EQ(groups->root_depth(), best_depth) << "group " << g;
    EXPECT_EQ(groups->root_in_group(), best_index) << "ties go to the lowest index";
    EXPECT_EQ(groups->RootSipCube(g), groups->SipCube(g, best_index));
  }
  EXPECT_EQ(seen.size(), mesh.size());
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, CubeGroupsTest,
    testing::Values(PartitionCase{4, 4, 1}, PartitionCase{4, 4, 2}, PartitionCase{4, 4, 4},
                    PartitionCase{4, 4, 8}, PartitionCase{4, 4, 16}, PartitionCase{2, 4, 1},
                    PartitionCase{2, 4, 2}, PartitionCase{2, 4, 4}, PartitionCase{2, 4, 8},
                    PartitionCase{3, 6, 9}, PartitionCase{1, 5, 5}));

TEST(CubeGroupsShapeTest, EightCubesOfA4x4MeshAreTwoBands) {
  const absl::StatusOr<CubeGroups> groups = CubeGroups::Partition(Mesh(4, 4), /*c=*/8);
  ASSERT_TRUE(groups.ok());
  // 2x4 and 4x2 both have root depth 3 and 12 total hops; fewer rows wins.
  EXPECT_EQ(groups->shape(), (GroupShape{2, 4}));
  EXPECT_EQ(groups->root_in_group(), 1u);  // (0,1): 3 hops to (1,3)
  EXPECT_EQ(groups->root_depth(), 3u);
  EXPECT_EQ(groups->SipCube(/*group=*/1, /*cube_in_group=*/0), 8u);
}

TEST(CubeGroupsShapeTest, RequestedShapeIsUsed) {
  const absl::StatusOr<CubeGroups> groups =
      CubeGroups::Partition(Mesh(4, 4), /*c=*/8, GroupShape{4, 2});
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(groups->shape(), (GroupShape{4, 2}));
  EXPECT_EQ(groups->SipCube(/*group=*/0, /*cube_in_group=*/2), 4u);  // (1,0)
  EXPECT_EQ(groups->SipCube(/*group=*/1, /*cube_in_group=*/0), 2u);  // (0,2)
}

TEST(CubeGroupsShapeTest, SquareGroupOfNinePicksTheTrueCentre) {
  const absl::StatusOr<CubeGroups> groups = CubeGroups::Partition(Mesh(3, 3), /*c=*/9);
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(groups->root_in_group(), 4u);
  EXPECT_EQ(groups->root_depth(), 2u);
}

struct BadPartition {
  uint32_t c;
  GroupShape shape;
  const char* message;
};

class CubeGroupsErrorTest : public testing::TestWithParam<BadPartition> {};

TEST_P(CubeGroupsErrorTest, NamesTheFieldAndReason) {
  const BadPartition bad = GetParam();
  const absl::StatusOr<CubeGroups> groups = CubeGroups::Partition(Mesh(4, 4), bad.c, bad.shape);
  ASSERT_FALSE(groups.ok());
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(groups.status().message(), bad.message);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, CubeGroupsErrorTest,
    testing::Values(
        BadPartition{0, {}, "c must be > 0 (got 0)"},
        BadPartition{3, {}, "c must divide the 16 CUBEs of a 4x4 SIP mesh (got 3)"},
        BadPartition{8, {2, 2}, "group_rows x group_cols must equal c=8 (got 2x2)"},
        BadPartition{8, {1, 8}, "group_rows x group_cols must tile the 4x4 SIP mesh (got 1x8)"}));

TEST(CubeGroupsErrorTest, DivisibilityIsEnoughForARectangle) {
  // gcd(c, rows) x c/gcd(c, rows) always tiles the mesh when c divides its size.
  for (uint32_t rows = 1; rows <= 9; ++rows) {
    for (uint32_t cols = 1; cols <= 9; ++cols) {
      for (uint32_t c = 1; c <= rows * cols; ++c) {
        const absl::StatusOr<CubeGroups> groups = CubeGroups::Partition(Mesh(rows, cols), c);
        EXPECT_EQ(groups.ok(), (rows * cols) % c == 0) << rows << "x" << cols << " c=" << c;
      }
    }
  }
}

}  // namespace
}  // namespace ahbm::topology
