#include "topology/mesh.h"

#include <cstdlib>

#include "base/check.h"

namespace ahbm::topology {

const char* DirName(Dir dir) {
  switch (dir) {
    case Dir::kNorth:
      return "N";
    case Dir::kSouth:
      return "S";
    case Dir::kEast:
      return "E";
    case Dir::kWest:
      return "W";
  }
  return "?";
}

Dir Opposite(Dir dir) {
  switch (dir) {
    case Dir::kNorth:
      return Dir::kSouth;
    case Dir::kSouth:
      return Dir::kNorth;
    case Dir::kEast:
      return Dir::kWest;
    case Dir::kWest:
      return Dir::kEast;
  }
  return dir;
}

Mesh::Mesh(uint32_t rows, uint32_t cols) : rows_(rows), cols_(cols) {
  AHBM_CHECK(rows > 0 && cols > 0) << "mesh must be non-empty, got " << rows << "x" << cols;
}

Coord Mesh::CoordOf(uint32_t index) const {
  AHBM_CHECK(index < size()) << "node " << index << " outside " << rows_ << "x" << cols_;
  return Coord{index / cols_, index % cols_};
}

uint32_t Mesh::IndexOf(Coord c) const {
  AHBM_CHECK(Contains(c)) << "(" << c.row << "," << c.col << ") outside " << rows_ << "x"
                          << cols_;
  return c.row * cols_ + c.col;
}

std::optional<uint32_t> Mesh::Neighbour(uint32_t index, Dir dir) const {
  const Coord c = CoordOf(index);
  switch (dir) {
    case Dir::kNorth:
      if (c.row == 0) return std::nullopt;
      return IndexOf({c.row - 1, c.col});
    case Dir::kSouth:
      if (c.row + 1 == rows_) return std::nullopt;
      return IndexOf({c.row + 1, c.col});
    case Dir::kEast:
      if (c.col + 1 == cols_) return std::nullopt;
      return IndexOf({c.row, c.col + 1});
    case Dir::kWest:
      if (c.col == 0) return std::nullopt;
      return IndexOf({c.row, c.col - 1});
  }
  return std::nullopt;
}

uint32_t Mesh::HopDistance(uint32_t a, uint32_t b) const {
  const Coord ca = CoordOf(a);
  const Coord cb = CoordOf(b);
  const auto diff = [](uint32_t x, uint32_t y) { return x > y ? x - y : y - x; };
  return diff(ca.row, cb.row) + diff(ca.col, cb.col);
}

std::vector<Dir> Mesh::XyPath(uint32_t from, uint32_t to) const {
  const Coord a = CoordOf(from);
  const Coord b = CoordOf(to);
  std::vector<Dir> path;
  path.reserve(HopDistance(from, to));
  for (uint32_t col = a.col; col < b.col; ++col) path.push_back(Dir::kEast);
  for (uint32_t col = a.col; col > b.col; --col) path.push_back(Dir::kWest);
  for (uint32_t row = a.row; row < b.row; ++row) path.push_back(Dir::kSouth);
  for (uint32_t row = a.row; row > b.row; --row) path.push_back(Dir::kNorth);
  return path;
}

}  // namespace ahbm::topology
