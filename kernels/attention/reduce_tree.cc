#include "kernels/attention/reduce_tree.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace ahbm::kernels {

std::vector<uint32_t> SnakeOrder(uint32_t rows, uint32_t cols) {
  std::vector<uint32_t> snake;
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t k = 0; k < cols; ++k) snake.push_back(r * cols + (r % 2 == 0 ? k : cols - 1 - k));
  }
  return snake;
}

absl::StatusOr<std::vector<ReduceNode>> BuildReduceTree(uint32_t rows, uint32_t cols,
                                                        uint32_t root, ReduceShape shape) {
  const uint32_t n = rows * cols;
  if (n == 0) return absl::InvalidArgumentError("reduce: empty rectangle");
  if (root >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce: root ", root, " is outside the ", rows, "x", cols, " rectangle"));
  }
  if (shape == ReduceShape::kRing) {
    return absl::InvalidArgumentError("reduce: the chunked ring is not a tree (RingCycle)");
  }
  std::vector<ReduceNode> nodes(n);
  const uint32_t root_row = root / cols, root_col = root % cols;
  if (shape == ReduceShape::kTree) {
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t r = i / cols, c = i % cols;
      if (c != root_col) {
        nodes[i].parent = r * cols + (c < root_col ? c + 1 : c - 1);
      } else if (r != root_row) {
        nodes[i].parent = (r < root_row ? r + 1 : r - 1) * cols + c;
      }
    }
  } else {
    const std::vector<uint32_t> snake = SnakeOrder(rows, cols);
    const size_t at = std::find(snake.begin(), snake.end(), root) - snake.begin();
    for (size_t k = 0; k < snake.size(); ++k) {
      if (k < at) nodes[snake[k]].parent = snake[k + 1];
      if (k > at) nodes[snake[k]].parent = snake[k - 1];
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (nodes[i].parent) nodes[*nodes[i].parent].children.push_back(i);
  }
  std::function<uint32_t(uint32_t)> height = [&](uint32_t i) {
    uint32_t h = 0;
    for (uint32_t child : nodes[i].children) h = std::max(h, height(child) + 1);
    nodes[i].height = h;
    return h;
  };
  height(root);
  for (ReduceNode& node : nodes) {
    std::sort(node.children.begin(), node.children.end(), [&](uint32_t a, uint32_t b) {
      return nodes[a].height != nodes[b].height ? nodes[a].height < nodes[b].height : a < b;
    });
  }
  return nodes;
}

absl::StatusOr<std::vector<uint32_t>> RingCycle(uint32_t rows, uint32_t cols, uint32_t root) {
  const uint32_t n = rows * cols;
  if (n == 0) return absl::InvalidArgumentError("reduce: empty rectangle");
  if (root >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce: root ", root, " is outside the ", rows, "x", cols, " rectangle"));
  }
  const std::vector<uint32_t> snake = SnakeOrder(rows, cols);
  const size_t at = std::find(snake.begin(), snake.end(), root) - snake.begin();
  std::vector<uint32_t> cycle;
  for (size_t step = 1; step <= n; ++step) cycle.push_back(snake[(at + step) % n]);
  return cycle;
}

ColumnRange RingChunk(uint64_t d, uint32_t nodes, uint32_t c) {
  AHBM_CHECK(c < nodes) << "chunk " << c << " of " << nodes;
  const uint64_t base = d / nodes, extra = d % nodes;
  return ColumnRange{c * base + std::min<uint64_t>(c, extra), base + (c < extra ? 1 : 0)};
}

uint32_t ReduceRounds(const std::vector<ReduceNode>& tree, uint32_t root) {
  return tree.at(root).height;
}

topology::Dir DirectionTo(const topology::Mesh& mesh, uint32_t from, uint32_t to) {
  for (topology::Dir dir : topology::kAllDirs) {
    if (mesh.Neighbour(from, dir) == to) return dir;
  }
  AHBM_CHECK(false) << "nodes " << from << " and " << to << " are not neighbours";
  return topology::Dir::kNorth;
}

}  // namespace ahbm::kernels
