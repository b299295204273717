// A rectangular 2-D mesh of nodes (PEs inside a CUBE, CUBEs inside a SIP): coordinates,
// N/S/E/W neighbours, hop distance and X-Y paths.
//
// Contract: node index = row * cols + col (row-major). North is row - 1, South row + 1,
// East col + 1, West col - 1. The mesh does not wrap. An X-Y path first moves along the
// row (E/W) to the destination column, then along the column (N/S); its length is the
// Manhattan distance.
#ifndef AHBM_TOPOLOGY_MESH_H_
#define AHBM_TOPOLOGY_MESH_H_

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <vector>

namespace ahbm::topology {

enum class Dir : uint8_t { kNorth = 0, kSouth = 1, kEast = 2, kWest = 3 };

inline constexpr std::array<Dir, 4> kAllDirs = {Dir::kNorth, Dir::kSouth, Dir::kEast,
                                                Dir::kWest};

// "N", "S", "E", "W".
const char* DirName(Dir dir);
Dir Opposite(Dir dir);

struct Coord {
  uint32_t row = 0;
  uint32_t col = 0;
  friend auto operator<=>(const Coord&, const Coord&) = default;
};

class Mesh {
 public:
  Mesh(uint32_t rows, uint32_t cols);

  uint32_t rows() const { return rows_; }
  uint32_t cols() const { return cols_; }
  uint32_t size() const { return rows_ * cols_; }

  bool Contains(Coord c) const { return c.row < rows_ && c.col < cols_; }
  Coord CoordOf(uint32_t index) const;
  uint32_t IndexOf(Coord c) const;

  // The neighbour of `index` in direction `dir`, or nullopt at the mesh edge.
  std::optional<uint32_t> Neighbour(uint32_t index, Dir dir) const;

  // Manhattan distance between two nodes.
  uint32_t HopDistance(uint32_t a, uint32_t b) const;

  // The directions an X-Y routed message takes from `from` to `to` (empty if equal).
  std::vector<Dir> XyPath(uint32_t from, uint32_t to) const;

 private:
  uint32_t rows_;
  uint32_t cols_;
};

}  // namespace ahbm::topology

#endif  // AHBM_TOPOLOGY_MESH_H_
