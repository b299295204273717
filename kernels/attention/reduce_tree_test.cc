#include "kernels/attention/reduce_tree.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "topology/mesh.h"

namespace ahbm::kernels {
namespace {

using ::testing::ElementsAre;

// Every edge is one hop, every node reaches the root, and the depth is the root's maximum hop
// distance (tree) — ceil(log2 P) for the 2x2 and 2x4 PE meshes with a central root.
TEST(ReduceTree, TreeEdgesAreOneHopAndDepthIsTheRootDistance) {
  struct Case {
    uint32_t rows, cols, root, depth;
  };
  for (const Case c : {Case{2, 4, 1, 3}, Case{2, 2, 0, 2}, Case{1, 1, 0, 0}, Case{1, 8, 3, 4},
                       Case{4, 4, 5, 4}, Case{2, 4, 0, 4}}) {
    auto tree = BuildReduceTree(c.rows, c.cols, c.root, ReduceShape::kTree);
    ASSERT_TRUE(tree.ok());
    const topology::Mesh mesh(c.rows, c.cols);
    uint32_t max_distance = 0;
    for (uint32_t i = 0; i < c.rows * c.cols; ++i) {
      max_distance = std::max(max_distance, mesh.HopDistance(i, c.root));
      if (i == c.root) {
        EXPECT_FALSE((*tree)[i].parent.has_value());
        continue;
      }
      ASSERT_TRUE((*tree)[i].parent.has_value());
      EXPECT_EQ(mesh.HopDistance(i, *(*tree)[i].parent), 1u);
      // Walking up reaches the root in exactly the hop distance.
      uint32_t node = i, steps = 0;
      while ((*tree)[node].parent) {
        node = *(*tree)[node].parent;
        ++steps;
      }
      EXPECT_EQ(node, c.root);
      EXPECT_EQ(steps, mesh.HopDistance(i, c.root));
    }
    EXPECT_EQ(ReduceRounds(*tree, c.root), c.depth);
    EXPECT_EQ(c.depth, max_distance);
  }
  // For P = 8 (2x4) and P = 4 (2x2): ceil(log2 P).
  EXPECT_EQ(ReduceRounds(*BuildReduceTree(2, 4, 1, ReduceShape::kTree), 1), 3u);
  EXPECT_EQ(ReduceRounds(*BuildReduceTree(2, 2, 0, ReduceShape::kTree), 0), 2u);
}

TEST(ReduceTree, RootMergesLeavesFirst) {
  // 2x4, root 1: node 1 receives 0 (leaf) and 2 (height 1) from its row, 5 (height 2) from
  // below: merge order by height.
  auto tree = BuildReduceTree(2, 4, 1, ReduceShape::kTree);
  ASSERT_TRUE(tree.ok());
  EXPECT_THAT((*tree)[1].children, ElementsAre(0, 2, 5));
  EXPECT_THAT((*tree)[5].children, ElementsAre(4, 6));
  EXPECT_THAT((*tree)[6].children, ElementsAre(7));
}

TEST(ReduceTree, ChainIsTwoSnakesMeetingAtTheRoot) {
  // Snake over 2x4: 0 1 2 3 7 6 5 4; root 1: 0 -> 1 <- 2 <- 3 <- 7 <- 6 <- 5 <- 4.
  auto tree = BuildReduceTree(2, 4, 1, ReduceShape::kChain);
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(*(*tree)[0].parent, 1u);
  EXPECT_EQ(*(*tree)[3].parent, 2u);
  EXPECT_EQ(*(*tree)[7].parent, 3u);
  EXPECT_EQ(*(*tree)[4].parent, 5u);
  EXPECT_EQ(ReduceRounds(*tree, 1), 6u);
  const topology::Mesh mesh(2, 4);
  for (uint32_t i = 0; i < 8; ++i) {
    if ((*tree)[i].parent) EXPECT_EQ(mesh.HopDistance(i, *(*tree)[i].parent), 1u);
  }
}

TEST(ReduceTree, BadRootIsAnError) {
  EXPECT_FALSE(BuildReduceTree(2, 4, 8, ReduceShape::kTree).ok());
  EXPECT_FALSE(BuildReduceTree(0, 4, 0, ReduceShape::kTree).ok());
}

TEST(ReduceTree, RingCycleGoesOnceAroundTheSnakeRootLast) {
  // Snake over 2x4: 0 1 2 3 7 6 5 4 (and back to 0); root 1: 2 -> 3 -> 7 -> 6 -> 5 -> 4 -> 0 -> 1
  // -> 2. Every link, the closing one too, is one hop (two rows).
  auto cycle = RingCycle(2, 4, 1);
  ASSERT_TRUE(cycle.ok());
  EXPECT_THAT(*cycle, ElementsAre(2, 3, 7, 6, 5, 4, 0, 1));
  const topology::Mesh mesh(2, 4);
  for (size_t k = 0; k < cycle->size(); ++k) {
    EXPECT_EQ(mesh.HopDistance((*cycle)[k], (*cycle)[(k + 1) % cycle->size()]), 1u) << k;
  }
  // One row of 4: the closing link 3 -> 0 is three hops (the launcher refuses it for IPCQ).
  auto row = RingCycle(1, 4, 1);
  ASSERT_TRUE(row.ok());
  EXPECT_THAT(*row, ElementsAre(2, 3, 0, 1));
  EXPECT_FALSE(RingCycle(2, 4, 8).ok());
  // The ring is not a tree.
  EXPECT_FALSE(BuildReduceTree(2, 4, 1, ReduceShape::kRing).ok());
}

// Chunks cover d's columns in order; the first d mod R take one more; chunk 0 is never empty.
TEST(ReduceTree, RingChunksSplitTheColumns) {
  struct Case {
    uint64_t d;
    uint32_t nodes;
    std::vector<uint64_t> counts;
  };
  for (const Case& c : {Case{128, 8, {16, 16, 16, 16, 16, 16, 16, 16}}, Case{10, 4, {3, 3, 2, 2}},
                        Case{2, 4, {1, 1, 0, 0}}, Case{1, 3, {1, 0, 0}}, Case{64, 1, {64}}}) {
    uint64_t next = 0;
    for (uint32_t k = 0; k < c.nodes; ++k) {
      const ColumnRange r = RingChunk(c.d, c.nodes, k);
      EXPECT_EQ(r.begin, next) << c.d << "/" << c.nodes << " chunk " << k;
      EXPECT_EQ(r.count, c.counts[k]) << c.d << "/" << c.nodes << " chunk " << k;
      next += r.count;
    }
    EXPECT_EQ(next, c.d);
  }
}

}  // namespace
}  // namespace ahbm::kernels
