// CUBE Groups (ADR rev2 §0, §B hierarchical items 1-2; DESIGN §4b): a SIP's CUBE mesh
// partitioned into contiguous rectangles of C CUBEs, each jointly owning one KV head.
//
// Contract:
// - Every group is a `shape.rows x shape.cols` rectangle; groups tile the SIP mesh and are
//   numbered row-major over the grid of rectangles.
// - CUBEs are numbered 0..C-1 row-major inside their group ("cube_in_group").
// - The root is the CUBE that minimises the maximum hop distance to the other CUBEs of its
//   group; ties go to the lowest cube_in_group. An even rectangle has no true centre: the
//   root's depth (`root_depth()`) is what the Level-1 reduce pays, and reports say so.
// - With no shape requested, the shape is chosen among all rectangles that tile the mesh by:
//   (1) smallest root depth, (2) smallest total hop distance from the root, (3) fewest rows.
#ifndef AHBM_TOPOLOGY_GROUPS_H_
#define AHBM_TOPOLOGY_GROUPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "topology/mesh.h"

namespace ahbm::topology {

struct GroupShape {
  uint32_t rows = 0;
  uint32_t cols = 0;
  friend bool operator==(const GroupShape&, const GroupShape&) = default;
};

class CubeGroups {
 public:
  // `requested` = {0, 0} picks the shape by the contract's rules. Errors name the workload
  // field (`c`, `group_rows`, `group_cols`) and the reason.
  static absl::StatusOr<CubeGroups> Partition(const Mesh& sip_mesh, uint32_t c,
                                              GroupShape requested = {});

  uint32_t c() const { return shape_.rows * shape_.cols; }
  GroupShape shape() const { return shape_; }
  uint32_t num_groups() const { return sip_mesh_.size() / c(); }

  // SIP-mesh index of a group's `cube_in_group`-th CUBE.
  uint32_t SipCube(uint32_t group, uint32_t cube_in_group) const;
  uint32_t GroupOf(uint32_t sip_cube) const;
  uint32_t CubeInGroup(uint32_t sip_cube) const;

  uint32_t root_in_group() const { return root_; }
  uint32_t RootSipCube(uint32_t group) const { return SipCube(group, root_); }
  // Maximum hop distance from the root to a CUBE of its group.
  uint32_t root_depth() const { return root_depth_; }
  // Hop distance between two CUBEs of one group (same for every group).
  uint32_t HopsInGroup(uint32_t cube_in_group_a, uint32_t cube_in_group_b) const;

 private:
  CubeGroups(const Mesh& sip_mesh, GroupShape shape);

  Mesh sip_mesh_;
  GroupShape shape_;
  uint32_t root_ = 0;
  uint32_t root_depth_ = 0;
};

// The root of a rows x cols rectangle by the contract's rule, and its depth.
struct RectangleRoot {
  uint32_t index = 0;
  uint32_t depth = 0;
  uint32_t total_hops = 0;
};
RectangleRoot RootOfRectangle(GroupShape shape);

}  // namespace ahbm::topology

#endif  // AHBM_TOPOLOGY_GROUPS_H_
