// Static reduce-to-root trees for the decode reduction (ADR-0060 rev2 §4): over a rectangle of
// nodes (a CUBE's PE mesh for Level-2, a CUBE Group for Level-1), every node's parent and the
// children it merges, fixed before launch so receives are data-independent (§4 "static").
//
// Contract (nodes are row-major indices of a rows x cols rectangle; `root` is one of them):
// - kTree (the default, §4.1/§4.2 "row-then-column converge at the center"): a node not in the
//   root's column sends to its neighbour one column closer to the root; a node in the root's
//   column sends to its neighbour one row closer. Every edge is one hop; the depth is the root's
//   maximum hop distance (for a 2x4 mesh with root 1: 3 = ceil(log2 8)).
// - kChain: the snake order over the rectangle (row 0 left to right, row 1 right to left, ...);
//   nodes before the root on the snake send forward, nodes after it backward: two chains
//   meeting at the root. Every edge is one hop; depth = the longer chain.
// - kRing: around the snake cycle in one direction: the node after the root on the snake
//   starts and every node sends to the next one, the root last; depth = nodes - 1. The edge
//   from the snake's last node back to its first is one hop only when the rectangle has an
//   even number of rows (or a single row of at most 2); otherwise it is longer (fine on the
//   NOC, refused for IPCQ by the launcher).
// - Children are listed in the order the parent merges them: by the height of their subtree
//   (a leaf's message arrives first), ties by index.
// - round(node) = the height of its subtree: the round in which it sends (leaves send in 1).
#ifndef AHBMSIM_KERNELS_ATTENTION_REDUCE_TREE_H_
#define AHBMSIM_KERNELS_ATTENTION_REDUCE_TREE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "topology/mesh.h"

namespace ahbm::kernels {

enum class ReduceShape : uint8_t { kTree, kChain, kRing };

struct ReduceNode {
  std::optional<uint32_t> parent;
  std::vector<uint32_t> children;  // merge order
  uint32_t height = 0;             // 0 for a leaf
};

// Errors name the field: root outside the rectangle, an empty rectangle.
absl::StatusOr<std::vector<ReduceNode>> BuildReduceTree(uint32_t rows, uint32_t cols,
                                                        uint32_t root, ReduceShape shape);

// The snake order over a rows x cols rectangle: row 0 left to right, row 1 right to left, ...
std::vector<uint32_t> SnakeOrder(uint32_t rows, uint32_t cols);

// The number of sequential message rounds to the root: the root's height.
uint32_t ReduceRounds(const std::vector<ReduceNode>& tree, uint32_t root);

// The mesh direction from node `from` to its neighbour `to` (they must be one hop apart).
topology::Dir DirectionTo(const topology::Mesh& mesh, uint32_t from, uint32_t to);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_REDUCE_TREE_H_
