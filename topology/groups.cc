#include "topology/groups.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace ahbm::topology {

RectangleRoot RootOfRectangle(GroupShape shape) {
  const Mesh rect(shape.rows, shape.cols);
  std::optional<RectangleRoot> best;
  for (uint32_t candidate = 0; candidate < rect.size(); ++candidate) {
    RectangleRoot r{candidate, 0, 0};
    for (uint32_t other = 0; other < rect.size(); ++other) {
      const uint32_t hops = rect.HopDistance(candidate, other);
      r.depth = std::max(r.depth, hops);
      r.total_hops += hops;
    }
    if (!best || r.depth < best->depth) best = r;  // ties keep the lowest index
  }
  return *best;
}

CubeGroups::CubeGroups(const Mesh& sip_mesh, GroupShape shape)
    : sip_mesh_(sip_mesh), shape_(shape) {
  const RectangleRoot root = RootOfRectangle(shape);
  root_ = root.index;
  root_depth_ = root.depth;
}

absl::StatusOr<CubeGroups> CubeGroups::Partition(const Mesh& sip_mesh, uint32_t c,
                                                 GroupShape requested) {
  const std::string mesh_text = absl::StrCat(sip_mesh.rows(), "x", sip_mesh.cols());
  if (c == 0) return absl::InvalidArgumentError("c must be > 0 (got 0)");
  if (sip_mesh.size() % c != 0) {
    return absl::InvalidArgumentError(absl::StrCat("c must divide the ", sip_mesh.size(),
                                                   " CUBEs of a ", mesh_text, " SIP mesh (got ",
                                                   c, ")"));
  }
  if (requested.rows != 0 || requested.cols != 0) {
    if (requested.rows * requested.cols != c) {
      return absl::InvalidArgumentError(
          absl::StrCat("group_rows x group_cols must equal c=", c, " (got ", requested.rows,
                       "x", requested.cols, ")"));
    }
    if (sip_mesh.rows() % requested.rows != 0 || sip_mesh.cols() % requested.cols != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("group_rows x group_cols must tile the ", mesh_text,
                       " SIP mesh (got ", requested.rows, "x", requested.cols, ")"));
    }
    return CubeGroups(sip_mesh, requested);
  }
  std::optional<GroupShape> best;
  std::tuple<uint32_t, uint32_t, uint32_t> best_key;
  for (uint32_t rows = 1; rows <= c; ++rows) {
    if (c % rows != 0) continue;
    const GroupShape shape{rows, c / rows};
    if (sip_mesh.rows() % shape.rows != 0 || sip_mesh.cols() % shape.cols != 0) continue;
    const RectangleRoot root = RootOfRectangle(shape);
    const auto key = std::make_tuple(root.depth, root.total_hops, shape.rows);
    if (!best || key < best_key) {
      best = shape;
      best_key = key;
    }
  }
  // gcd(c, rows) x c/gcd(c, rows) always tiles the mesh once c divides rows * cols.
  AHBM_CHECK(best.has_value()) << "no rectangle of " << c << " CUBEs tiles " << mesh_text;
  return CubeGroups(sip_mesh, *best);
}

uint32_t CubeGroups::SipCube(uint32_t group, uint32_t cube_in_group) const {
  AHBM_CHECK(group < num_groups() && cube_in_group < c())
      << "group " << group << " cube " << cube_in_group;
  const uint32_t groups_per_row = sip_mesh_.cols() / shape_.cols;
  const uint32_t row = (group / groups_per_row) * shape_.rows + cube_in_group / shape_.cols;
  const uint32_t col = (group % groups_per_row) * shape_.cols + cube_in_group % shape_.cols;
  return sip_mesh_.IndexOf({row, col});
}

uint32_t CubeGroups::GroupOf(uint32_t sip_cube) const {
  const Coord at = sip_mesh_.CoordOf(sip_cube);
  const uint32_t groups_per_row = sip_mesh_.cols() / shape_.cols;
  return (at.row / shape_.rows) * groups_per_row + at.col / shape_.cols;
}

uint32_t CubeGroups::CubeInGroup(uint32_t sip_cube) const {
  const Coord at = sip_mesh_.CoordOf(sip_cube);
  return (at.row % shape_.rows) * shape_.cols + at.col % shape_.cols;
}

uint32_t CubeGroups::HopsInGroup(uint32_t a, uint32_t b) const {
  return Mesh(shape_.rows, shape_.cols).HopDistance(a, b);
}

}  // namespace ahbm::topology
