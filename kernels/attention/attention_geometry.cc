#include "kernels/attention/attention_geometry.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "topology/mesh.h"

namespace ahbm::kernels {
namespace {

absl::Status Field(const std::string& field, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

// The short kernel's heads per CUBE: a power of two up to a CUBE's P = 8 PEs.
absl::Status CheckKvPerCube(const GeometrySpec& spec) {
  const uint32_t k = spec.kv_per_cube;
  if (k != 0 && k != 1 && k != 2 && k != 4 && k != 8) {
    return Field("kv_per_cube", absl::StrCat("must be 1, 2, 4 or 8 (got ", k, ")"));
  }
  return absl::OkStatus();
}

// Heads, query tokens, requests and their lengths.
absl::Status CheckShapes(const GeometrySpec& spec) {
  if (spec.h_kv == 0) return Field("h_kv", "must be > 0");
  if (spec.h_q == 0 || spec.h_q % spec.h_kv != 0) {
    return Field("h_q", absl::StrCat("must be a positive multiple of h_kv = ", spec.h_kv,
                                     " (got ", spec.h_q, ")"));
  }
  if (spec.d == 0) return Field("d", "must be > 0");
  if (spec.t_q == 0) return Field("t_q", "must be > 0");
  if (spec.users == 0) return Field("users", "must be > 0");
  if (!spec.request_lengths.empty() && spec.request_lengths.size() != spec.users) {
    return Field("request_lengths", absl::StrCat(spec.request_lengths.size(),
                                                 " lengths for users = ", spec.users));
  }
  const char* s_field = spec.request_lengths.empty() ? "s" : "request_lengths";
  // Without request_lengths every request has length s: check it once (users may be huge).
  const uint32_t lengths = spec.request_lengths.empty() ? 1 : spec.users;
  for (uint32_t u = 0; u < lengths; ++u) {
    const uint64_t s = spec.ContextOf(u);
    if (s == 0) return Field(s_field, "every context length must be > 0");
    if (s > spec.MaxContextOf(u)) {
      return Field(s_field, absl::StrCat(s, " exceeds max_context ", spec.MaxContextOf(u)));
    }
    if (spec.t_q > s) {
      return Field("t_q", absl::StrCat(spec.t_q, " query tokens exceed the context length ", s,
                                       " (the queries are the last T_q positions)"));
    }
  }
  if (spec.tile == 0) return Field("tile", "must be > 0");
  return absl::OkStatus();
}

// The P PEs' rectangle and its Level-2 root (the CUBE-Group root rule on one group that is
// the whole rectangle).
absl::Status PlacePes(const GeometrySpec& spec, AttentionGeometry& geo) {
  const topology::Mesh& pe_mesh = geo.index.pe_mesh();
  geo.pe_cols = std::min(spec.p, pe_mesh.cols());
  geo.pe_rows = spec.p / geo.pe_cols;
  for (uint32_t k = 0; k < spec.p; ++k) {
    geo.pes.push_back((k / geo.pe_cols) * pe_mesh.cols() + k % geo.pe_cols);
  }
  ASSIGN_OR_RETURN(const topology::CubeGroups pe_rect,
                   topology::CubeGroups::Partition(topology::Mesh(geo.pe_rows, geo.pe_cols),
                                                   spec.p));
  geo.pe_root = pe_rect.root_in_group();
  return absl::OkStatus();
}

// The KV heads fit the chip's CUBE Groups from SIP `sip` on; if not, what would fit: a
// smaller C (long kernel) or more heads per CUBE (short kernel).
absl::Status CheckHeadsFit(const pb::Chip& chip, const GeometrySpec& spec,
                           const AttentionGeometry& geo) {
  const topology::ChipIndex& index = geo.index;
  const uint32_t heads_per_group = spec.kv_per_cube == 0 ? 1 : spec.kv_per_cube;
  if (spec.kv_per_cube > 0 && spec.c != 1) {
    return Field("c", absl::StrCat("the short-context kernel (kv_per_cube ", spec.kv_per_cube,
                                   ") keeps whole heads per CUBE: C must be 1 (got ", spec.c,
                                   ")"));
  }
  const uint64_t heads_on_chip = uint64_t{geo.groups_per_sip} * heads_per_group *
                                 (index.sips() - std::min(spec.sip, index.sips()));
  if (spec.sip >= index.sips()) {
    return Field("sip", absl::StrCat(spec.sip, " is outside the chip's ", index.sips(), " SIPs"));
  }
  if (spec.h_kv <= heads_on_chip) return absl::OkStatus();
  std::string fits;
  GeometrySpec other = spec;
  if (spec.kv_per_cube == 0) {
    for (other.c = spec.c - 1; other.c > 0 && !HostsKvHeads(chip, other); --other.c) {
    }
    if (other.c > 0) fits = absl::StrCat("; C = ", other.c, " fits (--c=", other.c, ")");
  } else {
    for (other.kv_per_cube = spec.kv_per_cube * 2;
         other.kv_per_cube <= 8 && !HostsKvHeads(chip, other); other.kv_per_cube *= 2) {
    }
    if (other.kv_per_cube <= 8) {
      fits = absl::StrCat("; kv_per_cube = ", other.kv_per_cube, " fits (--kv_per_cube=",
                          other.kv_per_cube, ")");
    }
  }
  const uint64_t groups = (spec.h_kv + heads_per_group - 1) / heads_per_group;
  return Field("h_kv", absl::StrCat(spec.h_kv, " KV heads need ", groups, " CUBE Groups of C = ",
                                    spec.c, "; SIPs ", spec.sip, ".. have ",
                                    heads_on_chip / heads_per_group, fits));
}

}  // namespace

absl::StatusOr<AttentionGeometry> MakeAttentionGeometry(const pb::Chip& chip,
                                                        const GeometrySpec& spec) {
  const topology::ChipIndex index(chip);
  RETURN_IF_ERROR(CheckKvPerCube(spec));
  RETURN_IF_ERROR(CheckShapes(spec));
  const topology::Mesh& pe_mesh = index.pe_mesh();
  if (spec.p == 0 || spec.p > pe_mesh.size() ||
      !(spec.p == pe_mesh.size() || spec.p <= pe_mesh.cols() || spec.p % pe_mesh.cols() == 0)) {
    return Field("p", absl::StrCat(spec.p, " PEs do not form a rectangle of the CUBE's ",
                                   pe_mesh.rows(), "x", pe_mesh.cols(), " PE mesh"));
  }
  ASSIGN_OR_RETURN(
      const topology::CubeGroups groups,
      topology::CubeGroups::Partition(index.cube_mesh(), spec.c,
                                      topology::GroupShape{spec.group_rows, spec.group_cols}));
  AttentionGeometry geo{index, groups};
  RETURN_IF_ERROR(PlacePes(spec, geo));
  geo.groups_per_sip = groups.num_groups();
  geo.sip = spec.sip;
  geo.h_kv = spec.h_kv;
  geo.c = spec.c;
  geo.kv_per_cube = spec.kv_per_cube;
  RETURN_IF_ERROR(CheckHeadsFit(chip, spec, geo));
  if (spec.start_cube >= spec.c) {
    return Field("start_cube", absl::StrCat(spec.start_cube, " is outside the CUBE Group of C = ",
                                            spec.c, ": 0 .. ", spec.c - 1));
  }
  if (spec.start_pe >= spec.p) {
    return Field("start_pe", absl::StrCat(spec.start_pe, " is outside the CUBE's P = ", spec.p,
                                          " PEs: 0 .. ", spec.p - 1));
  }
  return geo;
}

bool HostsKvHeads(const pb::Chip& chip, const GeometrySpec& spec) {
  const topology::ChipIndex index(chip);
  const uint32_t cubes = index.cubes_per_sip();
  if (spec.c == 0 || cubes % spec.c != 0 || spec.sip >= index.sips()) return false;
  const uint64_t heads_per_group = spec.kv_per_cube == 0 ? 1 : spec.kv_per_cube;
  return uint64_t{cubes / spec.c} * (index.sips() - spec.sip) * heads_per_group >= spec.h_kv;
}

uint32_t AttentionGeometry::CubeOf(uint32_t h, uint32_t ci) const {
  const uint32_t slot = kv_per_cube == 0 ? h : h / kv_per_cube;  // the head's group
  const uint32_t sip_of_head = sip + slot / groups_per_sip;
  const uint32_t group = slot % groups_per_sip;
  return index.GlobalCube(topology::CubeId{sip_of_head, groups.SipCube(group, ci)});
}

std::vector<std::vector<uint32_t>> AttentionGeometry::HeadCubes() const {
  std::vector<std::vector<uint32_t>> cubes(h_kv);
  for (uint32_t h = 0; h < h_kv; ++h) {
    for (uint32_t ci = 0; ci < c; ++ci) cubes[h].push_back(CubeOf(h, ci));
  }
  return cubes;
}

absl::StatusOr<std::vector<uint32_t>> AttentionCubes(const pb::Chip& chip,
                                                     const GeometrySpec& spec) {
  ASSIGN_OR_RETURN(const AttentionGeometry geo, MakeAttentionGeometry(chip, spec));
  std::set<uint32_t> cubes;
  for (const std::vector<uint32_t>& head : geo.HeadCubes()) cubes.insert(head.begin(), head.end());
  return std::vector<uint32_t>(cubes.begin(), cubes.end());
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> AttentionCubeSets(const pb::Chip& chip,
                                                                     const GeometrySpec& spec) {
  ASSIGN_OR_RETURN(const AttentionGeometry geo, MakeAttentionGeometry(chip, spec));
  return geo.HeadCubes();
}

}  // namespace ahbm::kernels
