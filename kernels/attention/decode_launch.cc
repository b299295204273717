#include "kernels/attention/decode_launch.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "topology/groups.h"
#include "topology/ids.h"
#include "topology/kv_placement.h"
#include "topology/mesh.h"

namespace ahbm::kernels {
namespace {

absl::Status Field(const std::string& field, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

}  // namespace

absl::StatusOr<DecodeGeometry> MakeDecodeGeometry(const pb::Chip& chip, const DecodeConfig& cfg) {
  const topology::ChipIndex index(chip);
  if (cfg.h_kv == 0) return Field("h_kv", "must be > 0");
  if (cfg.h_q == 0 || cfg.h_q % cfg.h_kv != 0) {
    return Field("h_q", absl::StrCat("must be a positive multiple of h_kv = ", cfg.h_kv,
                                     " (got ", cfg.h_q, ")"));
  }
  if (cfg.d == 0) return Field("d", "must be > 0");
  if (cfg.t_q == 0) return Field("t_q", "must be > 0");
  if (cfg.users == 0) return Field("users", "must be > 0");
  if (!cfg.request_lengths.empty() && cfg.request_lengths.size() != cfg.users) {
    return Field("request_lengths", absl::StrCat(cfg.request_lengths.size(),
                                                 " lengths for users = ", cfg.users));
  }
  const char* s_field = cfg.request_lengths.empty() ? "s" : "request_lengths";
  for (uint32_t u = 0; u < cfg.users; ++u) {
    const uint64_t s = cfg.ContextOf(u);
    if (s == 0) return Field(s_field, "every context length must be > 0");
    if (s > cfg.MaxContextOf(u)) {
      return Field(s_field, absl::StrCat(s, " exceeds max_context ", cfg.MaxContextOf(u)));
    }
    if (cfg.t_q > s) {
      return Field("t_q", absl::StrCat(cfg.t_q, " query tokens exceed the context length ", s,
                                       " (the queries are the last T_q positions)"));
    }
  }
  if (cfg.tile == 0) return Field("tile", "must be > 0");
  const topology::Mesh& pe_mesh = index.pe_mesh();
  if (cfg.p == 0 || cfg.p > pe_mesh.size() ||
      !(cfg.p == pe_mesh.size() || cfg.p <= pe_mesh.cols() || cfg.p % pe_mesh.cols() == 0)) {
    return Field("p", absl::StrCat(cfg.p, " PEs do not form a rectangle of the CUBE's ",
                                   pe_mesh.rows(), "x", pe_mesh.cols(), " PE mesh"));
  }
  absl::StatusOr<topology::CubeGroups> groups = topology::CubeGroups::Partition(
      index.cube_mesh(), cfg.c, topology::GroupShape{cfg.group_rows, cfg.group_cols});
  if (!groups.ok()) return groups.status();
  DecodeGeometry geo{index, *groups};
  geo.pe_cols = std::min(cfg.p, pe_mesh.cols());
  geo.pe_rows = cfg.p / geo.pe_cols;
  for (uint32_t k = 0; k < cfg.p; ++k) {
    geo.pes.push_back((k / geo.pe_cols) * pe_mesh.cols() + k % geo.pe_cols);
  }
  // The Level-2 root: the PE rectangle's centre, by the CUBE-Group root rule (one group that
  // is the whole rectangle).
  absl::StatusOr<topology::CubeGroups> pe_rect = topology::CubeGroups::Partition(
      topology::Mesh(geo.pe_rows, geo.pe_cols), cfg.p);
  if (!pe_rect.ok()) return pe_rect.status();
  geo.pe_root = pe_rect->root_in_group();
  geo.groups_per_sip = groups->num_groups();
  const uint32_t heads_per_group = cfg.kv_per_cube == 0 ? 1 : cfg.kv_per_cube;
  if (cfg.kv_per_cube > 0 && cfg.c != 1) {
    return Field("c", absl::StrCat("the short-context kernel (kv_per_cube ", cfg.kv_per_cube,
                                   ") keeps whole heads per CUBE: C must be 1 (got ", cfg.c, ")"));
  }
  const uint64_t heads_on_chip = uint64_t{geo.groups_per_sip} * heads_per_group *
                                 (index.sips() - std::min(cfg.sip, index.sips()));
  if (cfg.sip >= index.sips()) {
    return Field("sip", absl::StrCat(cfg.sip, " is outside the chip's ", index.sips(), " SIPs"));
  }
  if (cfg.h_kv > heads_on_chip) {
    return Field("h_kv", absl::StrCat(cfg.h_kv, " KV heads need ", cfg.h_kv, " CUBE Groups of C = ",
                                      cfg.c, "; SIPs ", cfg.sip, ".. have ", heads_on_chip));
  }
  return geo;
}

uint32_t DecodeGeometry::CubeOf(const DecodeConfig& cfg, uint32_t h, uint32_t ci) const {
  const uint32_t slot = cfg.kv_per_cube == 0 ? h : h / cfg.kv_per_cube;  // the head's group
  const uint32_t sip = cfg.sip + slot / groups_per_sip;
  const uint32_t group = slot % groups_per_sip;
  return index.GlobalCube(topology::CubeId{sip, groups.SipCube(group, ci)});
}

absl::StatusOr<std::vector<uint32_t>> DecodeCubes(const pb::Chip& chip, const DecodeConfig& cfg) {
  absl::StatusOr<DecodeGeometry> geo = MakeDecodeGeometry(chip, cfg);
  if (!geo.ok()) return geo.status();
  std::set<uint32_t> cubes;
  for (const std::vector<uint32_t>& head : geo->HeadCubes(cfg)) cubes.insert(head.begin(), head.end());
  return std::vector<uint32_t>(cubes.begin(), cubes.end());
}

std::vector<std::vector<uint32_t>> DecodeGeometry::HeadCubes(const DecodeConfig& cfg) const {
  std::vector<std::vector<uint32_t>> cubes(cfg.h_kv);
  for (uint32_t h = 0; h < cfg.h_kv; ++h) {
    for (uint32_t ci = 0; ci < cfg.c; ++ci) cubes[h].push_back(CubeOf(cfg, h, ci));
  }
  return cubes;
}

absl::StatusOr<std::vector<ReduceNode>> Level2Tree(const DecodeGeometry& geo, ReduceShape shape) {
  absl::StatusOr<std::vector<ReduceNode>> l2 =
      BuildReduceTree(geo.pe_rows, geo.pe_cols, geo.pe_root, shape);
  if (!l2.ok()) return l2.status();
  // IPCQ links are one hop: every Level-2 edge must join mesh neighbours.
  for (uint32_t k = 0; k < l2->size(); ++k) {
    if ((*l2)[k].parent && geo.index.pe_mesh().HopDistance(geo.pes[k], geo.pes[*(*l2)[k].parent]) != 1) {
      return Field("level2_reduce", absl::StrCat("the ring over a ", geo.pe_rows, "x", geo.pe_cols,
                                                 " PE rectangle has a link that is not one IPCQ hop"));
    }
  }
  return l2;
}

absl::StatusOr<PlacedRequest> PlaceDecodeRequest(
    const DecodeGeometry& geo, const DecodeConfig& cfg, uint32_t u,
    const std::vector<std::vector<uint32_t>>& head_cubes, uint64_t k_tile,
    host::HbmAllocator& allocator, MemoryStore* store, const DecodeInputs* in) {
  const topology::ChipIndex& index = geo.index;
  const uint32_t g = cfg.h_q / cfg.h_kv;
  const uint32_t rows = g * cfg.t_q;
  const bool data = store != nullptr && in != nullptr;
  const uint32_t rot = cfg.rotate_by_request ? u : 0;
  const uint64_t context = cfg.ContextOf(u);
  absl::StatusOr<topology::KvPlacement> kv = topology::KvPlacement::Create(
      cfg.c, cfg.p, cfg.MaxContextOf(u), cfg.start_cube + rot, cfg.start_pe + rot);
  if (!kv.ok()) return kv.status();
  std::vector<host::KvHeadGroup> heads(cfg.h_kv);
  for (uint32_t h = 0; h < cfg.h_kv; ++h) heads[h] = host::KvHeadGroup{head_cubes.at(h), geo.pes};
  const std::vector<uint64_t> kv_shape = {cfg.h_kv, context, cfg.d};
  absl::StatusOr<host::PlacedTensor> k = host::PlaceKvCache(
      allocator, absl::StrCat("k[", u, "]"), kv_shape, pb::BF16, *kv, heads,
      host::KvLayout{host::SlotLayout::kTileMajor, k_tile == 0 ? kv->block() : k_tile});
  if (!k.ok()) return k.status();
  absl::StatusOr<host::PlacedTensor> v = host::PlaceKvCache(
      allocator, absl::StrCat("v[", u, "]"), kv_shape, pb::BF16, *kv, heads, host::KvLayout{});
  if (!v.ok()) return v.status();
  if (data) {
    if (absl::Status s = host::Scatter(*store, *k, in->k); !s.ok()) return s;
    if (absl::Status s = host::Scatter(*store, *v, in->v); !s.ok()) return s;
  }
  PlacedRequest placed;
  placed.block = kv->block();
  for (uint32_t h = 0; h < cfg.h_kv; ++h) {
    placed.cubes.push_back(heads[h].cubes);
    // Q group of head h, replicated on every rank's PE; M-fold row g·T_q + t.
    std::vector<uint32_t> rank_pes;
    for (uint32_t r = 0; r < kv->ranks(); ++r) {
      const uint32_t cube = heads[h].cubes[kv->CubeInGroupOfRank(r)];
      rank_pes.push_back(cube * index.pes_per_cube() + geo.pes[kv->PeOfRank(r)]);
    }
    const std::vector<uint64_t> qshape = {rows, cfg.d};
    absl::StatusOr<host::PlacedTensor> q = host::PlaceReplicated(
        allocator, absl::StrCat("q[", u, "][", h, "]"), qshape, pb::BF16, rank_pes);
    if (!q.ok()) return q.status();
    if (data) {
      host::NpyArray group{qshape, std::vector<float>(uint64_t{rows} * cfg.d)};
      for (uint32_t gi = 0; gi < g; ++gi) {
        for (uint32_t t = 0; t < cfg.t_q; ++t) {
          const uint64_t src = ((uint64_t{h} * g + gi) * cfg.t_q + t) * cfg.d;
          std::copy_n(in->q.data.begin() + src, cfg.d,
                      group.data.begin() + (uint64_t{gi} * cfg.t_q + t) * cfg.d);
        }
      }
      if (absl::Status s = host::Scatter(*store, *q, group); !s.ok()) return s;
    }
    // The group root: cube_in_group root, Level-2 root PE.
    const uint32_t root_cube = heads[h].cubes[geo.groups.root_in_group()];
    const uint32_t root_pe = root_cube * index.pes_per_cube() + geo.pes[geo.pe_root];
    absl::StatusOr<uint64_t> o_addr = allocator.Allocate(root_pe, uint64_t{rows} * cfg.d * 2);
    if (!o_addr.ok()) return o_addr.status();
    placed.outputs.push_back(DecodeLaunch::Output{root_pe, *o_addr});
    placed.ranks.emplace_back();
    for (uint32_t r = 0; r < kv->ranks(); ++r) {
      PlacedRank rank;
      rank.pe = rank_pes[r];
      rank.cube_in_group = kv->CubeInGroupOfRank(r);
      rank.node = kv->PeOfRank(r);
      rank.len = kv->MyLen(r, context);
      rank.block_start = kv->GlobalPosition(r, 0);
      rank.q_addr = q->shards()[r].ref.addr();
      rank.k_addr = k->shards()[h * kv->ranks() + r].ref.addr();
      rank.v_addr = v->shards()[h * kv->ranks() + r].ref.addr();
      placed.ranks.back().push_back(rank);
    }
  }
  return placed;
}

absl::StatusOr<DecodeLaunch> LaunchDecode(const pb::Chip& chip, const DecodeConfig& cfg,
                                          KernelRuntime& runtime, MemoryStore* store,
                                          const std::vector<DecodeInputs>& inputs) {
  absl::StatusOr<DecodeGeometry> geo_or = MakeDecodeGeometry(chip, cfg);
  if (!geo_or.ok()) return geo_or.status();
  const DecodeGeometry& geo = *geo_or;
  const topology::ChipIndex& index = geo.index;
  const uint32_t g = cfg.h_q / cfg.h_kv;
  const uint32_t rows = g * cfg.t_q;
  const bool data = store != nullptr && !inputs.empty();
  if (data && inputs.size() != cfg.users) {
    return Field("users", absl::StrCat(cfg.users, " requests but ", inputs.size(), " input sets"));
  }

  absl::StatusOr<std::vector<ReduceNode>> l2 = Level2Tree(geo, cfg.level2);
  if (!l2.ok()) return l2.status();
  const topology::GroupShape gs = geo.groups.shape();
  absl::StatusOr<std::vector<ReduceNode>> l1 =
      BuildReduceTree(gs.rows, gs.cols, geo.groups.root_in_group(), cfg.level1);
  if (!l1.ok()) return l1.status();

  DecodeLaunch launch;
  launch.g = g;
  launch.ranks_per_head = cfg.c * cfg.p;
  launch.level2_rounds = ReduceRounds(*l2, geo.pe_root);
  launch.level1_rounds = ReduceRounds(*l1, geo.groups.root_in_group());
  absl::StatusOr<std::vector<uint32_t>> cubes = DecodeCubes(chip, cfg);
  if (!cubes.ok()) return cubes.status();
  launch.cubes = *cubes;

  DecodeShape shape;
  shape.rows = rows;
  shape.d = cfg.d;
  shape.tile = cfg.tile;
  shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.d)));
  shape.variant = cfg.variant;
  shape.scratch_scope = cfg.scratch_scope;

  host::HbmAllocator allocator(chip);
  const topology::Mesh& pe_mesh = index.pe_mesh();
  const std::vector<std::vector<uint32_t>> head_cubes = geo.HeadCubes(cfg);
  for (uint32_t u = 0; u < cfg.users; ++u) {
    absl::StatusOr<PlacedRequest> placed = PlaceDecodeRequest(
        geo, cfg, u, head_cubes, cfg.tile, allocator, store, data ? &inputs[u] : nullptr);
    if (!placed.ok()) return placed.status();
    launch.outputs.push_back(placed->outputs);
    for (uint32_t h = 0; h < cfg.h_kv; ++h) {
      for (const PlacedRank& rank : placed->ranks[h]) {
        const uint32_t ci = rank.cube_in_group;
        const uint32_t node = rank.node;  // Level-2 rectangle node
        const uint32_t pe = rank.pe;
        RankPlan plan;
        plan.q_addr = rank.q_addr;
        plan.k_addr = rank.k_addr;
        plan.v_addr = rank.v_addr;
        plan.my_len = rank.len;
        for (uint32_t child : (*l2)[node].children) {
          plan.l2_children.push_back(Peer::Ipcq(DirectionTo(pe_mesh, geo.pes[node], geo.pes[child])));
        }
        if ((*l2)[node].parent) {
          plan.l2_parent = Peer::Ipcq(DirectionTo(pe_mesh, geo.pes[node], geo.pes[*(*l2)[node].parent]));
        } else {
          // A CUBE root: Level-1 over the group's CUBE roots.
          const auto cube_root_pe = [&](uint32_t cube_in_group) {
            return placed->cubes[h][cube_in_group] * index.pes_per_cube() + geo.pes[geo.pe_root];
          };
          for (uint32_t child : (*l1)[ci].children) plan.l1_children.push_back(Peer::Pe(cube_root_pe(child)));
          if ((*l1)[ci].parent) {
            plan.l1_parent = Peer::Pe(cube_root_pe(*(*l1)[ci].parent));
          } else {
            plan.store_output = true;
            plan.o_addr = placed->outputs[h].addr;
          }
        }
        if (absl::Status s = runtime.AddKernel(
                pe, u, [shape, plan](Tl& tl) { return DecodeRank(tl, shape, plan); });
            !s.ok()) {
          return s;
        }
      }
    }
  }
  return launch;
}

absl::StatusOr<std::vector<float>> GatherDecodeOutput(const MemoryStore& store,
                                                      const DecodeConfig& cfg,
                                                      const DecodeLaunch& launch, uint32_t user) {
  const uint32_t g = launch.g;
  std::vector<float> o(uint64_t{cfg.h_q} * cfg.t_q * cfg.d);
  for (uint32_t h = 0; h < launch.outputs.at(user).size(); ++h) {
    const DecodeLaunch::Output& out = launch.outputs.at(user).at(h);
    pb::TensorRef ref;
    ref.set_space(pb::HBM);
    ref.set_pe(out.pe);
    ref.set_addr(out.addr);
    ref.set_dtype(pb::BF16);
    ref.add_shape(uint64_t{g} * cfg.t_q);
    ref.add_shape(cfg.d);
    absl::StatusOr<std::vector<float>> values = store.Read(ref);
    if (!values.ok()) return values.status();
    // Row gi·T_q + t of head group h is query head h·G + gi, token t.
    std::copy(values->begin(), values->end(), o.begin() + uint64_t{h} * g * cfg.t_q * cfg.d);
  }
  return o;
}

DecodeInputs RandomDecodeInputs(const DecodeConfig& cfg, uint32_t user, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  const uint64_t s = cfg.ContextOf(user);
  DecodeInputs in;
  in.q.shape = {cfg.h_q, cfg.t_q, cfg.d};
  in.k.shape = in.v.shape = {cfg.h_kv, s, cfg.d};
  in.q.data.resize(uint64_t{cfg.h_q} * cfg.t_q * cfg.d);
  in.k.data.resize(uint64_t{cfg.h_kv} * s * cfg.d);
  in.v.data.resize(in.k.data.size());
  for (float& x : in.q.data) x = normal(rng);
  for (float& x : in.k.data) x = normal(rng);
  for (float& x : in.v.data) x = uniform(rng);
  return in;
}

std::vector<float> ReferenceDecode(const DecodeConfig& cfg, const DecodeInputs& in) {
  const uint32_t g = cfg.h_q / cfg.h_kv;
  const uint64_t s = in.k.shape.at(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(cfg.d));
  std::vector<float> o(uint64_t{cfg.h_q} * cfg.t_q * cfg.d);
  std::vector<double> score(s);
  for (uint32_t hq = 0; hq < cfg.h_q; ++hq) {
    const uint32_t hk = hq / g;
    for (uint32_t t = 0; t < cfg.t_q; ++t) {
      const float* q = &in.q.data[(uint64_t{hq} * cfg.t_q + t) * cfg.d];
      const uint64_t visible = s - cfg.t_q + t + 1;  // causal: keys 0 .. S - T_q + t
      double mx = -INFINITY;
      for (uint64_t pos = 0; pos < visible; ++pos) {
        const float* k = &in.k.data[(uint64_t{hk} * s + pos) * cfg.d];
        double dot = 0;
        for (uint32_t i = 0; i < cfg.d; ++i) dot += double(RoundToBf16(q[i])) * RoundToBf16(k[i]);
        score[pos] = dot * scale;
        mx = std::max(mx, score[pos]);
      }
      double sum = 0;
      for (uint64_t pos = 0; pos < visible; ++pos) sum += (score[pos] = std::exp(score[pos] - mx));
      for (uint32_t i = 0; i < cfg.d; ++i) {
        double acc = 0;
        for (uint64_t pos = 0; pos < visible; ++pos) {
          acc += score[pos] * RoundToBf16(in.v.data[(uint64_t{hk} * s + pos) * cfg.d + i]);
        }
        o[(uint64_t{hq} * cfg.t_q + t) * cfg.d + i] = static_cast<float>(acc / sum);
      }
    }
  }
  return o;
}

}  // namespace ahbm::kernels
