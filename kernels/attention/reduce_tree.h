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
// - kRing: the chunked ring of §4.4, not a tree (BuildReduceTree refuses it; RingCycle and
//   RingChunk give its schedule). The ring is the snake cycle in one direction, starting
//   after the root, the root last (ring position nodes - 1). The (m, l, O) payload is split
//   into `nodes` chunks by O's columns (RingChunk), m and l in every chunk. Reduce-scatter,
//   nodes - 1 steps: at step t the node at ring position k sends chunk (k - t) mod R to its
//   successor and merges chunk (k - t - 1) mod R from its predecessor into its own columns of
//   it; it ends holding chunk (k + 1) mod R fully reduced (the root: chunk 0). Gather,
//   nodes - 1 steps: every node but the root sends its reduced chunk to its successor, then
//   forwards each chunk that reaches it; the root receives chunks R - 1, R - 2, ..., 1. Each
//   link carries one chunk (~1/R of the payload) per step; 2 (nodes - 1) rounds. The edge
//   from the snake's last node back to its first (used: every node sends) is one hop only
//   when the rectangle has an even number of rows (or a single row of at most 2); otherwise
//   it is longer (fine on the NOC, refused for IPCQ by the launcher).
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

// kTree or kChain. Errors name the field: root outside the rectangle, an empty rectangle,
// kRing (a ring, not a tree).
absl::StatusOr<std::vector<ReduceNode>> BuildReduceTree(uint32_t rows, uint32_t cols,
                                                        uint32_t root, ReduceShape shape);

// kRing: the nodes in ring order (each sends to the next, the last to the first); the root
// is last. Errors as BuildReduceTree's.
absl::StatusOr<std::vector<uint32_t>> RingCycle(uint32_t rows, uint32_t cols, uint32_t root);

// kRing: chunk c of a ring of `nodes` over d columns: columns [begin, begin + count); the
// first d mod nodes chunks take one column more (chunk 0 is never empty; chunks past d are
// when d < nodes).
struct ColumnRange {
  uint64_t begin = 0, count = 0;
};
ColumnRange RingChunk(uint64_t d, uint32_t nodes, uint32_t c);

// The snake order over a rows x cols rectangle: row 0 left to right, row 1 right to left, ...
std::vector<uint32_t> SnakeOrder(uint32_t rows, uint32_t cols);

// The number of sequential message rounds to the root: the root's height (a chunked ring of
// R nodes has 2 (R - 1): RingCycle).
uint32_t ReduceRounds(const std::vector<ReduceNode>& tree, uint32_t root);

// The mesh direction from node `from` to its neighbour `to` (they must be one hop apart).
topology::Dir DirectionTo(const topology::Mesh& mesh, uint32_t from, uint32_t to);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_REDUCE_TREE_H_
