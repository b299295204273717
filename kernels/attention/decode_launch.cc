#include "kernels/attention/decode_launch.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/tensor_ref.h"
#include "base/check.h"
#include "base/status_macros.h"
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

GeometrySpec DecodeConfig::Geometry() const {
  GeometrySpec g;
  g.h_q = h_q;
  g.h_kv = h_kv;
  g.d = d;
  g.t_q = t_q;
  g.users = users;
  g.s = s;
  g.max_context = max_context;
  g.request_lengths = request_lengths;
  g.c = c;
  g.p = p;
  g.group_rows = group_rows;
  g.group_cols = group_cols;
  g.tile = tile;
  g.sip = sip;
  g.start_cube = start_cube;
  g.start_pe = start_pe;
  g.kv_per_cube = kv_per_cube;
  return g;
}

// Causal T_q > 1 (DESIGN §6): query t (row g·T_q + t) sits at global position S - T_q + t and
// sees keys up to it. A rank's tiles from the first one holding a position > S - T_q get an
// additive bf16 mask [rows, len] (0 or -inf), placed back to back in the rank's HBM (data
// mode: written). The masked span may cross rank boundaries: each rank masks its own part.
namespace {

absl::Status PlaceCausalMasks(host::HbmAllocator& allocator, MemoryStore* store,
                              const DecodeConfig& cfg, uint32_t rows, uint64_t context,
                              uint64_t block_start, uint32_t pe, RankPlan& plan) {
  if (cfg.t_q <= 1 || plan.my_len == 0) return absl::OkStatus();
  const uint64_t first_hidden = context - cfg.t_q + 1;  // no query sees keys from here on
  const uint64_t tiles = (plan.my_len + cfg.tile - 1) / cfg.tile;
  uint64_t first = tiles;
  for (uint64_t j = 0; j < tiles; ++j) {
    const uint64_t end = block_start + std::min<uint64_t>((j + 1) * cfg.tile, plan.my_len);
    if (end > first_hidden) {  // tile j holds a hidden key; so does every later one
      first = j;
      break;
    }
  }
  if (first == tiles) return absl::OkStatus();
  absl::StatusOr<uint64_t> addr =
      allocator.Allocate(pe, (tiles - first) * uint64_t{rows} * cfg.tile * 2);
  RETURN_IF_ERROR(addr.status());
  plan.first_masked_tile = first;
  plan.mask_addr = *addr;
  if (store == nullptr) return absl::OkStatus();
  const uint32_t g = rows / cfg.t_q;
  for (uint64_t j = first; j < tiles; ++j) {
    const uint64_t len = std::min<uint64_t>(cfg.tile, plan.my_len - j * cfg.tile);
    std::vector<float> mask(uint64_t{rows} * len);
    for (uint32_t gi = 0; gi < g; ++gi) {
      for (uint32_t t = 0; t < cfg.t_q; ++t) {
        const uint64_t last_visible = context - cfg.t_q + t;
        for (uint64_t k = 0; k < len; ++k) {
          const uint64_t pos = block_start + j * cfg.tile + k;
          mask[(uint64_t{gi} * cfg.t_q + t) * len + k] = pos <= last_visible ? 0.0f : -INFINITY;
        }
      }
    }
    const pb::TensorRef ref =
        sim::MakeTensorRef(pb::HBM, pe, *addr + (j - first) * uint64_t{rows} * cfg.tile * 2,
                           pb::BF16, {rows, len});
    RETURN_IF_ERROR(store->Write(ref, mask));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> DecodeCubes(const pb::Chip& chip, const DecodeConfig& cfg) {
  return AttentionCubes(chip, cfg.Geometry());
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> DecodeCubeSets(const pb::Chip& chip,
                                                                  const DecodeConfig& cfg) {
  return AttentionCubeSets(chip, cfg.Geometry());
}

absl::StatusOr<std::vector<ReduceNode>> Level2Tree(const AttentionGeometry& geo,
                                                   ReduceShape shape) {
  absl::StatusOr<std::vector<ReduceNode>> l2 =
      BuildReduceTree(geo.pe_rows, geo.pe_cols, geo.pe_root, shape);
  RETURN_IF_ERROR(l2.status());
  // IPCQ links are one hop: every Level-2 edge must join mesh neighbours (a chain over the
  // snake always does).
  for (uint32_t k = 0; k < l2->size(); ++k) {
    AHBM_CHECK(!(*l2)[k].parent ||
               geo.index.pe_mesh().HopDistance(geo.pes[k], geo.pes[*(*l2)[k].parent]) == 1)
        << "Level-2 edge " << k << " is not one IPCQ hop";
  }
  return l2;
}

absl::StatusOr<std::vector<uint32_t>> Level2Ring(const AttentionGeometry& geo) {
  absl::StatusOr<std::vector<uint32_t>> cycle = RingCycle(geo.pe_rows, geo.pe_cols, geo.pe_root);
  RETURN_IF_ERROR(cycle.status());
  // Every node sends to its successor: each link of the cycle, the closing one too, must be
  // one IPCQ hop.
  for (size_t k = 0; cycle->size() > 1 && k < cycle->size(); ++k) {
    const uint32_t from = geo.pes[(*cycle)[k]], to = geo.pes[(*cycle)[(k + 1) % cycle->size()]];
    if (geo.index.pe_mesh().HopDistance(from, to) != 1) {
      return Field("level2_reduce",
                   absl::StrCat("the ring over a ", geo.pe_rows, "x", geo.pe_cols,
                                " PE rectangle has a link that is not one IPCQ hop (the snake "
                                "cycle closes in one hop only for an even number of rows)"));
    }
  }
  return cycle;
}

absl::StatusOr<PlacedRequest> PlaceDecodeRequest(
    const AttentionGeometry& geo, const DecodeConfig& cfg, uint32_t u,
    const std::vector<std::vector<uint32_t>>& head_cubes, KLayout k_layout,
    host::HbmAllocator& allocator, MemoryStore* store, const QkvInputs* in) {
  const topology::ChipIndex& index = geo.index;
  const uint32_t g = cfg.h_q / cfg.h_kv;
  const uint32_t rows = g * cfg.t_q;
  const bool data = store != nullptr && in != nullptr;
  const uint32_t rot = cfg.rotate_by_request ? u : 0;
  const uint64_t context = cfg.ContextOf(u);
  absl::StatusOr<topology::KvPlacement> kv = topology::KvPlacement::Create(
      cfg.c, cfg.p, cfg.MaxContextOf(u), cfg.start_cube + rot, cfg.start_pe + rot);
  RETURN_IF_ERROR(kv.status());
  std::vector<host::KvHeadGroup> heads(cfg.h_kv);
  for (uint32_t h = 0; h < cfg.h_kv; ++h) heads[h] = host::KvHeadGroup{head_cubes.at(h), geo.pes};
  const std::vector<uint64_t> kv_shape = {cfg.h_kv, context, cfg.d};
  absl::StatusOr<host::PlacedTensor> k = host::PlaceKvCache(
      allocator, absl::StrCat("k[", u, "]"), kv_shape, pb::BF16, *kv, heads,
      HostKvLayout(k_layout, cfg.tile, kv->block()));
  RETURN_IF_ERROR(k.status());
  if (cfg.kv_bank_interleaved) {
    RETURN_IF_ERROR(host::PadForBankInterleave(allocator, *k));
  }
  absl::StatusOr<host::PlacedTensor> v = host::PlaceKvCache(
      allocator, absl::StrCat("v[", u, "]"), kv_shape, pb::BF16, *kv, heads, host::KvLayout{});
  RETURN_IF_ERROR(v.status());
  if (data) {
    RETURN_IF_ERROR(host::Scatter(*store, *k, in->k));
    RETURN_IF_ERROR(host::Scatter(*store, *v, in->v));
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
    RETURN_IF_ERROR(q.status());
    if (data) {
      host::NpyArray group{qshape, std::vector<float>(uint64_t{rows} * cfg.d)};
      for (uint32_t gi = 0; gi < g; ++gi) {
        for (uint32_t t = 0; t < cfg.t_q; ++t) {
          const uint64_t src = ((uint64_t{h} * g + gi) * cfg.t_q + t) * cfg.d;
          std::copy_n(in->q.data.begin() + src, cfg.d,
                      group.data.begin() + (uint64_t{gi} * cfg.t_q + t) * cfg.d);
        }
      }
      RETURN_IF_ERROR(host::Scatter(*store, *q, group));
    }
    // The group root: cube_in_group root, Level-2 root PE.
    const uint32_t root_cube = heads[h].cubes[geo.groups.root_in_group()];
    const uint32_t root_pe = root_cube * index.pes_per_cube() + geo.pes[geo.pe_root];
    absl::StatusOr<uint64_t> o_addr = allocator.Allocate(root_pe, uint64_t{rows} * cfg.d * 2);
    RETURN_IF_ERROR(o_addr.status());
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

namespace {

// The two reduce levels (ADR-0060 rev2 §4): each a tree (parent, children by rectangle node) or
// the chunked ring (the rectangle's nodes in ring order, root last). Level 2 over the CUBE's
// PE rectangle, Level 1 over the group's CUBE roots.
struct ReduceLevels {
  bool l2_ring = false, l1_ring = false;
  std::vector<ReduceNode> l2, l1;
  std::vector<uint32_t> l2_cycle, l1_cycle;
};

absl::StatusOr<ReduceLevels> BuildReduceLevels(const AttentionGeometry& geo,
                                               const DecodeConfig& cfg) {
  ReduceLevels lv;
  lv.l2_ring = cfg.level2 == ReduceShape::kRing;
  lv.l1_ring = cfg.level1 == ReduceShape::kRing;
  const topology::GroupShape gs = geo.groups.shape();
  if (lv.l2_ring) {
    ASSIGN_OR_RETURN(lv.l2_cycle, Level2Ring(geo));
  } else {
    ASSIGN_OR_RETURN(lv.l2, Level2Tree(geo, cfg.level2));
  }
  if (lv.l1_ring) {
    ASSIGN_OR_RETURN(lv.l1_cycle, RingCycle(gs.rows, gs.cols, geo.groups.root_in_group()));
  } else {
    ASSIGN_OR_RETURN(lv.l1,
                     BuildReduceTree(gs.rows, gs.cols, geo.groups.root_in_group(), cfg.level1));
  }
  return lv;
}

// A node's ring position (the root's is nodes - 1).
uint32_t RingPos(const std::vector<uint32_t>& cycle, uint32_t node) {
  return static_cast<uint32_t>(std::find(cycle.begin(), cycle.end(), node) - cycle.begin());
}

DecodeShape ShapeOf(const DecodeConfig& cfg) {
  DecodeShape shape;
  shape.rows = cfg.h_q / cfg.h_kv * cfg.t_q;
  shape.d = cfg.d;
  shape.tile = cfg.tile;
  shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.d)));
  shape.variant = cfg.variant;
  shape.k_layout = cfg.k_layout;
  shape.lookahead = cfg.lookahead;
  shape.scratch_scope = cfg.scratch_scope;
  shape.packed_payload = cfg.packed_payload;
  shape.fused_merge = cfg.fused_merge;
  return shape;
}

// One level's links of the node at `pos` (a rectangle node, or a CUBE in its group): on the
// ring its next and previous nodes (none with a single node), else its tree children and parent;
// `peer` names a node as this rank reaches it.
template <typename PeerOf>
void WireLevel(bool ring, const std::vector<uint32_t>& cycle, const std::vector<ReduceNode>& tree,
               uint32_t pos, uint32_t nodes, const PeerOf& peer, std::optional<RingPlace>& place,
               std::vector<Peer>& children, std::optional<Peer>& parent) {
  if (ring) {
    if (nodes <= 1) return;
    const uint32_t k = RingPos(cycle, pos);
    place = RingPlace{peer(cycle[(k + 1) % nodes]), peer(cycle[(k + nodes - 1) % nodes]), k, nodes};
    return;
  }
  for (uint32_t child : tree[pos].children) children.push_back(peer(child));
  if (tree[pos].parent) parent = peer(*tree[pos].parent);
}

// A rank's place in the reduce-to-root: its Level-2 neighbours over IPCQ, and at a CUBE root its
// Level-1 neighbours (the other CUBE roots, over the NOC) and, at the group root, where O goes.
void WireReduce(const AttentionGeometry& geo, const DecodeConfig& cfg, const ReduceLevels& lv,
                const PlacedRequest& placed, uint32_t h, const PlacedRank& rank, RankPlan& plan) {
  const topology::Mesh& pe_mesh = geo.index.pe_mesh();
  const uint32_t node = rank.node;  // Level-2 rectangle node
  const auto ipcq = [&](uint32_t to) {
    return Peer::Ipcq(DirectionTo(pe_mesh, geo.pes[node], geo.pes[to]));
  };
  WireLevel(lv.l2_ring, lv.l2_cycle, lv.l2, node, cfg.p, ipcq, plan.l2_ring, plan.l2_children,
            plan.l2_parent);
  if (node != geo.pe_root) return;
  // A CUBE root: Level-1 over the group's CUBE roots.
  const auto cube_root = [&](uint32_t cube_in_group) {
    return Peer::Pe(placed.cubes[h][cube_in_group] * geo.index.pes_per_cube() +
                    geo.pes[geo.pe_root]);
  };
  const uint32_t ci = rank.cube_in_group;
  WireLevel(lv.l1_ring, lv.l1_cycle, lv.l1, ci, cfg.c, cube_root, plan.l1_ring,
            plan.l1_children, plan.l1_parent);
  if (ci == geo.groups.root_in_group()) {
    plan.store_output = true;
    plan.o_addr = placed.outputs[h].addr;
  }
}

}  // namespace

absl::StatusOr<DecodeLaunch> LaunchDecode(const pb::Chip& chip, const DecodeConfig& cfg,
                                          KernelRuntime& runtime, MemoryStore* store,
                                          const std::vector<QkvInputs>& inputs) {
  RETURN_IF_ERROR(CheckDecodeCapacity(chip, cfg));
  ASSIGN_OR_RETURN(const AttentionGeometry geo, MakeAttentionGeometry(chip, cfg.Geometry()));
  const uint32_t rows = cfg.h_q / cfg.h_kv * cfg.t_q;
  const bool data = store != nullptr && !inputs.empty();
  if (data && inputs.size() != cfg.users) {
    return Field("users", absl::StrCat(cfg.users, " requests but ", inputs.size(), " input sets"));
  }
  ASSIGN_OR_RETURN(const ReduceLevels lv, BuildReduceLevels(geo, cfg));

  DecodeLaunch launch;
  launch.g = cfg.h_q / cfg.h_kv;
  launch.ranks_per_head = cfg.c * cfg.p;
  launch.level2_rounds = lv.l2_ring ? 2 * (cfg.p - 1) : ReduceRounds(lv.l2, geo.pe_root);
  launch.level1_rounds =
      lv.l1_ring ? 2 * (cfg.c - 1) : ReduceRounds(lv.l1, geo.groups.root_in_group());
  launch.level2_ring = lv.l2_ring && cfg.p > 1 ? cfg.p : 0;
  launch.level1_ring = lv.l1_ring && cfg.c > 1 ? cfg.c : 0;
  ASSIGN_OR_RETURN(launch.cubes, DecodeCubes(chip, cfg));
  const DecodeShape shape = ShapeOf(cfg);

  host::HbmAllocator allocator(chip);
  const std::vector<std::vector<uint32_t>> head_cubes = geo.HeadCubes();
  for (uint32_t u = 0; u < cfg.users; ++u) {
    ASSIGN_OR_RETURN(const PlacedRequest placed,
                     PlaceDecodeRequest(geo, cfg, u, head_cubes, cfg.k_layout, allocator, store,
                                        data ? &inputs[u] : nullptr));
    launch.outputs.push_back(placed.outputs);
    for (uint32_t h = 0; h < cfg.h_kv; ++h) {
      for (const PlacedRank& rank : placed.ranks[h]) {
        RankPlan plan;
        plan.q_addr = rank.q_addr;
        plan.k_addr = rank.k_addr;
        plan.block = placed.block;
        plan.v_addr = rank.v_addr;
        plan.my_len = rank.len;
        RETURN_IF_ERROR(PlaceCausalMasks(allocator, store, cfg, rows, cfg.ContextOf(u),
                                         rank.block_start, rank.pe, plan));
        WireReduce(geo, cfg, lv, placed, h, rank, plan);
        // Message stream: the KV head (its group's instances message only each other).
        RETURN_IF_ERROR(runtime.AddKernel(
            rank.pe, u, h, [shape, plan](Tl& tl) { return DecodeRank(tl, shape, plan); }));
      }
    }
  }
  return launch;
}

// ---- CheckDecodeCapacity: HBM and TCM budgets, before anything is placed ----
namespace {

using U128 = unsigned __int128;

U128 AlignUp(U128 v, uint64_t align) { return (v + align - 1) / align * align; }

// "400000024576 B (372.53 GiB)", "1048832 B (1.00 MiB)"; past 2^64 B only the GiB.
std::string BytesText(U128 bytes) {
  const double b = static_cast<double>(bytes);
  const std::string scaled = b >= (1ull << 30) ? absl::StrFormat("%.2f GiB", b / (1ull << 30))
                                               : absl::StrFormat("%.2f MiB", b / (1ull << 20));
  if (bytes >> 64 != 0) return scaled;
  return absl::StrCat(static_cast<uint64_t>(bytes), " B (", scaled, ")");
}

// Scratch bytes of one level's chunked ring of `nodes` at its root, the busiest node
// (decode.cc RingReduce; nothing of it is in a scratch scope): nodes - 1 received and merged
// chunks, nodes - 1 gathered ones, and, packed, the copy of its own chunk; each chunk counted
// at the widest (RingChunk's chunk 0). A merged chunk: received m, l, O_c (packed: one
// [m | l | O_c] buffer) and, primitive, the merge's temporaries (LseMergeInto: 5 columns and
// O_c·sb) and its output (triplet: the new m; packed: a second chunk buffer).
uint64_t RingScratchBytes(const DecodeConfig& cfg, uint64_t rows, uint32_t nodes) {
  if (nodes < 2) return 0;
  const uint64_t w = RingChunk(cfg.d, nodes, 0).count;
  const uint64_t col = AlignUp(rows * 4, 64), o = AlignUp(rows * w * 4, 64);
  const uint64_t flat = AlignUp(rows * (w + 2) * 4, 64);
  const uint64_t temps = 5 * col + o;
  if (cfg.packed_payload) {
    const uint64_t step = flat + (cfg.fused_merge ? 0 : temps + flat);
    return (nodes - 1) * (step + flat) + flat;
  }
  const uint64_t step = 2 * col + o + (cfg.fused_merge ? 0 : temps + col);
  return (nodes - 1) * (step + o);
}

// The reduce trees' fan-in (children per node) where the scratch peaks: at the Level-2 root,
// at the busiest Level-2 node, at the busiest Level-1 CUBE root. A chunked ring's level has
// none (RingScratchBytes prices it). The trees depend on the geometry and the level shapes
// only, so the capacity check's bisections over tile, d, t_q and h_q build them once.
struct ReduceFanIn {
  uint64_t l2_root = 0, l2_most = 0, l1_most = 0;
};

absl::StatusOr<ReduceFanIn> ReduceFanInOf(const AttentionGeometry& geo, const DecodeConfig& cfg) {
  ReduceFanIn fan;
  if (cfg.level2 != ReduceShape::kRing) {
    ASSIGN_OR_RETURN(const std::vector<ReduceNode> l2,
                     BuildReduceTree(geo.pe_rows, geo.pe_cols, geo.pe_root, cfg.level2));
    for (uint32_t k = 0; k < l2.size(); ++k) {
      fan.l2_most = std::max<uint64_t>(fan.l2_most, l2[k].children.size());
      if (k == geo.pe_root) fan.l2_root = l2[k].children.size();
    }
  }
  if (cfg.level1 != ReduceShape::kRing) {
    const topology::GroupShape gs = geo.groups.shape();
    ASSIGN_OR_RETURN(const std::vector<ReduceNode> l1,
                     BuildReduceTree(gs.rows, gs.cols, geo.groups.root_in_group(), cfg.level1));
    for (const ReduceNode& n : l1) fan.l1_most = std::max<uint64_t>(fan.l1_most, n.children.size());
  }
  return fan;
}

// Scratch bytes of the reduce at the busiest node: per tree merge the received m, l, O and
// the merge's temporaries (LseMerge: 6 columns and O·sb), a chunked ring's RingScratchBytes;
// the Level-2 root adds its Level-1 part; plus the stored O at the root.
uint64_t ReduceScratchBytes(const ReduceFanIn& fan, const DecodeConfig& cfg, uint64_t rows) {
  const uint64_t col = AlignUp(rows * 4, 64), full = AlignUp(rows * cfg.d * 4, 64);
  const uint64_t per_merge = 8 * col + 2 * full;
  uint64_t l2_root = fan.l2_root * per_merge, l2_most = fan.l2_most * per_merge;
  if (cfg.level2 == ReduceShape::kRing) l2_root = l2_most = RingScratchBytes(cfg, rows, cfg.p);
  const uint64_t l1 = cfg.level1 == ReduceShape::kRing ? RingScratchBytes(cfg, rows, cfg.c)
                                                       : fan.l1_most * per_merge;
  return std::max(l2_most, l2_root + l1) + AlignUp(rows * cfg.d * 2, 64);
}

// Bytes of one K tile in TCM, [TILE, d] or [d, TILE] bf16 (a row-major K's loaded and
// transposed tiles).
uint64_t KTileTcmBytes(const DecodeConfig& cfg) { return AlignUp(uint64_t{cfg.tile} * cfg.d * 2, 64); }

// Scratch bytes of one KV tile's temporaries in the sweep (decode.cc SoftmaxAndPv; opt1 also
// Sj; opt2 uses none; baseline_dot also the loaded K and V tiles, Sj, and the loaded causal
// mask). A row-major K adds its loaded tile (k_layout.h: in a scope of its own, freed before
// the softmax's temporaries) and, in opt1 and baseline_dot, the transposed tile (in the tile's
// scope, beside them).
uint64_t TileScratchBytes(const DecodeConfig& cfg, uint64_t rows) {
  const bool row_major = cfg.k_layout == KLayout::kRowMajor;
  const uint64_t load = row_major ? KTileTcmBytes(cfg) : 0;
  if (cfg.variant == DecodeVariant::kOpt2 || cfg.variant == DecodeVariant::kOpt2Lookahead) {
    return load;
  }
  const uint64_t col = AlignUp(rows * 4, 64), sj = AlignUp(rows * cfg.tile * 4, 64);
  uint64_t bytes = 4 * col /* max, sub, exp, sum */ + sj /* centred */ +
                   AlignUp(rows * cfg.tile * 2, 64) /* P bf16 */ + AlignUp(rows * cfg.d * 4, 64);
  if (cfg.variant == DecodeVariant::kOpt1) bytes += sj;
  if (cfg.variant == DecodeVariant::kBaselineDot) {
    const uint64_t kv_tile = AlignUp(uint64_t{cfg.tile} * cfg.d * 2, 64);
    bytes += sj + 2 * kv_tile + (cfg.t_q > 1 ? AlignUp(rows * cfg.tile * 2, 64) : 0);
  }
  bytes = std::max(bytes, load);
  if ((cfg.variant == DecodeVariant::kOpt1 || cfg.variant == DecodeVariant::kBaselineDot) &&
      row_major) {
    bytes += KTileTcmBytes(cfg);
  }
  return bytes;
}

// Causal T_q > 1: at most this many of a rank's tiles hold hidden keys (PlaceCausalMasks).
uint64_t MaxMaskedTiles(const DecodeConfig& cfg) {
  return cfg.t_q <= 1 ? 0 : (cfg.t_q - 2) / cfg.tile + 2;
}

// Persistent bytes of one instance: q, m (x2), l, O, the Sj buffers (and a row-major K's
// transposed tile beside each) and the loaded masks (baseline_dot loads its masks into the
// scratch arena).
uint64_t PersistentBytes(const DecodeConfig& cfg, uint64_t rows, uint64_t max_tiles) {
  const uint64_t col = AlignUp(rows * 4, 64), sj = AlignUp(rows * cfg.tile * 4, 64);
  uint64_t bytes = AlignUp(rows * cfg.d * 2, 64) + 3 * col + AlignUp(rows * cfg.d * 4, 64);
  if (cfg.variant != DecodeVariant::kBaselineDot) {
    bytes += std::min(MaxMaskedTiles(cfg), max_tiles) * AlignUp(rows * cfg.tile * 2, 64);
  }
  // Packed reduce (decode.cc): [m | l | O] and its spare for the merge, beside the m buffers.
  if (cfg.packed_payload) bytes += 2 * AlignUp(rows * (cfg.d + 2) * 4, 64);
  const uint64_t per_s = sj + (cfg.k_layout == KLayout::kRowMajor ? KTileTcmBytes(cfg) : 0);
  if (cfg.variant == DecodeVariant::kOpt3) bytes += (uint64_t{cfg.lookahead} + 1) * per_s;
  if (cfg.variant == DecodeVariant::kOpt2) bytes += std::min<uint64_t>(8, max_tiles) * per_s;
  if (cfg.variant == DecodeVariant::kOpt2Lookahead) {
    bytes += std::min<uint64_t>(std::max<uint64_t>(8, uint64_t{cfg.lookahead} + 1), max_tiles) * per_s;
  }
  return bytes;
}

// What the persistent arena holds, for the refusals.
std::string PersistentText(const DecodeConfig& cfg) {
  return cfg.k_layout == KLayout::kRowMajor
             ? "persistent arena (q, m, l, O, Sj buffers, transposed K tiles)"
             : "persistent arena (q, m, l, O, Sj buffers)";
}

// One instance's TCM need: (persistent, scratch) bytes.
std::pair<uint64_t, uint64_t> InstanceTcm(const ReduceFanIn& fan, const DecodeConfig& cfg,
                                          uint64_t max_block) {
  const uint64_t rows = uint64_t{cfg.h_q / cfg.h_kv} * cfg.t_q;
  return {PersistentBytes(cfg, rows, (max_block + cfg.tile - 1) / cfg.tile),
          std::max(TileScratchBytes(cfg, rows), ReduceScratchBytes(fan, cfg, rows))};
}

// Not even one instance fits a PE's TCM: the refusal names the shape field that made it too
// big (CheckDecodeCapacity's contract in decode_launch.h), its value, the need, the arena and
// the largest value of that field that fits.
absl::Status TcmCulprit(const ReduceFanIn& fan, const DecodeConfig& cfg,
                        const std::string& pe_name, uint64_t max_block, uint64_t persistent,
                        uint64_t scratch) {
  const uint32_t g = cfg.h_q / cfg.h_kv;
  // Each field varies one factor of the need: h_q through G (h_q = G x h_kv).
  struct Candidate {
    const char* field;
    uint64_t value, fallback;  // the factor as given, its default
    std::string given;         // "100000 keys"
    uint64_t per_unit;         // field value per unit of the factor
    void (*set)(DecodeConfig&, uint64_t);
  };
  const Candidate candidates[] = {
      {"tile", cfg.tile, 256, absl::StrCat(cfg.tile, " keys"), 1,
       [](DecodeConfig& c, uint64_t v) { c.tile = static_cast<uint32_t>(v); }},
      {"d", cfg.d, 128, absl::StrCat(cfg.d, " elements per head"), 1,
       [](DecodeConfig& c, uint64_t v) { c.d = static_cast<uint32_t>(v); }},
      {"t_q", cfg.t_q, 1, absl::StrCat(cfg.t_q, " query tokens"), 1,
       [](DecodeConfig& c, uint64_t v) { c.t_q = static_cast<uint32_t>(v); }},
      {"h_q", g, 8, absl::StrCat(cfg.h_q, " query heads (G = ", g, " per KV head)"), cfg.h_kv,
       [](DecodeConfig& c, uint64_t v) { c.h_q = static_cast<uint32_t>(v) * c.h_kv; }},
  };
  const auto fits = [&](const DecodeConfig& c) {
    const auto [p, s] = InstanceTcm(fan, c, max_block);
    return p <= persistent && s + 63 <= scratch;
  };
  // The largest value of a candidate that fits, the others as given (0: none), by bisection
  // (the need grows with each of them).
  const auto largest_fit = [&](const Candidate& k) {
    uint64_t lo = 0, hi = k.value;  // fits(lo) or lo == 0; !fits(hi)
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      DecodeConfig c = cfg;
      k.set(c, mid);
      (fits(c) ? lo : hi) = mid;
    }
    return lo;
  };
  bool above_default = false;
  for (const Candidate& k : candidates) above_default = above_default || k.value > k.fallback;
  const Candidate* culprit = nullptr;
  uint64_t culprit_fit = 0;
  double best = -1;
  for (const Candidate& k : candidates) {
    if (above_default && k.value <= k.fallback) continue;
    const uint64_t fit = largest_fit(k);
    const double kept = static_cast<double>(fit) / static_cast<double>(k.value);
    if (kept > best) {
      best = kept;
      culprit = &k;
      culprit_fit = fit;
    }
  }
  const auto [need_persistent, need_scratch] = InstanceTcm(fan, cfg, max_block);
  const bool in_persistent = need_persistent > persistent;
  const std::string fit_text =
      culprit_fit == 0 ? "; no value of it alone fits"
                       : absl::StrCat("; at most ", culprit->field, " = ",
                                      culprit_fit * culprit->per_unit, " fits");
  return Field(culprit->field,
               absl::StrCat(culprit->given, ": one kernel instance on ", pe_name, " needs ",
                            in_persistent ? need_persistent : need_scratch, " B of the TCM ",
                            in_persistent ? PersistentText(cfg)
                                          : "scratch arena (a KV tile's or the reduce's temporaries)",
                            in_persistent ? ", which holds " : ", which gives one instance ",
                            in_persistent ? persistent : scratch - 63, " B",
                            fit_text));
}

// One-shot's keys do not fit one instance's TCM: the most keys per rank (one tile) that fit.
absl::Status OneShotRefusal(const ReduceFanIn& fan, const DecodeConfig& cfg,
                            const std::string& pe_name, uint64_t max_block, uint64_t persistent,
                            uint64_t scratch) {
  const auto fits = [&](uint64_t keys) {
    DecodeConfig c = cfg;
    c.tile = static_cast<uint32_t>(keys);
    const auto [p, s] = InstanceTcm(fan, c, keys);
    return p <= persistent && s + 63 <= scratch;
  };
  uint64_t lo = 0, hi = cfg.tile;  // fits(lo) or lo == 0; !fits(hi)
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  lo = lo / kOneShotTileKeys * kOneShotTileKeys;  // OneShotTile's granule
  const auto [need_persistent, need_scratch] = InstanceTcm(fan, cfg, max_block);
  const bool in_persistent = need_persistent > persistent;
  return Field("one_shot",
               absl::StrCat("a rank's ", max_block, " keys as one tile need ",
                            in_persistent ? need_persistent : need_scratch, " B of the TCM ",
                            in_persistent ? "persistent arena" : "scratch arena", " on ", pe_name,
                            ", which gives one instance ", in_persistent ? persistent : scratch - 63,
                            " B; at most ", lo, " keys per rank (max_context <= ",
                            lo * cfg.c * cfg.p, ") fit one shot; use tile instead"));
}

}  // namespace

uint64_t OneShotTile(const DecodeConfig& cfg) {
  const uint64_t ranks = uint64_t{cfg.c} * cfg.p;
  uint64_t block = 1;
  for (uint32_t u = 0; u < (cfg.request_lengths.empty() ? 1 : cfg.users); ++u) {
    block = std::max<uint64_t>(block, (cfg.MaxContextOf(u) + ranks - 1) / ranks);
  }
  return (block + kOneShotTileKeys - 1) / kOneShotTileKeys * kOneShotTileKeys;
}

absl::Status CheckDecodeCapacity(const pb::Chip& chip, const DecodeConfig& cfg) {
  absl::StatusOr<AttentionGeometry> geo_or = MakeAttentionGeometry(chip, cfg.Geometry());
  RETURN_IF_ERROR(geo_or.status());
  const AttentionGeometry& geo = *geo_or;
  const uint64_t rows = uint64_t{cfg.h_q / cfg.h_kv} * cfg.t_q;
  const uint64_t heads_per_pe = cfg.kv_per_cube == 0 ? 1 : std::min(cfg.kv_per_cube, cfg.h_kv);
  // The busiest PE: head 0's group root (every PE of a group holds the same KV; the root O).
  const uint32_t root_pe = geo.CubeOf(0, geo.groups.root_in_group()) *
                               geo.index.pes_per_cube() + geo.pes[geo.pe_root];
  const std::string pe_name = host::PeName(geo.index, root_pe);

  // HBM: per request and head, K (KBlockBytes: [ceil(B/TILE), d, TILE] tile-major, else
  // [d, B] or [B, d]), V [B, d], Q [rows, d], O [rows, d].
  const uint64_t ranks = uint64_t{cfg.c} * cfg.p;
  // Without request_lengths every request needs the same: one term times users.
  const uint32_t lengths = cfg.request_lengths.empty() ? 1 : cfg.users;
  const uint64_t copies = cfg.request_lengths.empty() ? cfg.users : 1;
  U128 hbm = 0;
  uint64_t max_block = 0;
  for (uint32_t u = 0; u < lengths; ++u) {
    const uint64_t block = (cfg.MaxContextOf(u) + ranks - 1) / ranks;
    max_block = std::max(max_block, block);
    const U128 tiles = (U128{block} + cfg.tile - 1) / cfg.tile;
    const U128 k = AlignUp(cfg.k_layout == KLayout::kTileMajor ? tiles * cfg.d * cfg.tile * 2
                                                               : U128{block} * cfg.d * 2,
                           256);
    const U128 v = AlignUp(U128{block} * cfg.d * 2, 256);
    const U128 qo = 2 * AlignUp(U128{rows} * cfg.d * 2, 256);
    const U128 masks = AlignUp(
        U128{std::min<uint64_t>(MaxMaskedTiles(cfg), tiles)} * rows * cfg.tile * 2, 256);
    hbm += U128{copies} * heads_per_pe * (k + v + qo + masks);
  }
  const uint64_t region = chip.sip().cube().hbm_bytes() / chip.sip().cube().pes();
  if (hbm > region) {
    const std::string field = cfg.max_context != 0       ? "max_context"
                              : !cfg.request_lengths.empty() ? "request_lengths"
                              : cfg.users > 1               ? "s, users"
                                                            : "s";
    return Field(field, absl::StrCat("the KV caches of ", cfg.users, " request(s) need ",
                                     BytesText(hbm), " of HBM on ", pe_name, " (", heads_per_pe,
                                     " KV head(s) per PE), its region holds ", BytesText(region)));
  }

  // TCM: instances per PE, persistent arena shared, scratch arena split evenly.
  const pb::Tcm& tcm = chip.sip().cube().pe().tcm();
  const uint64_t instances = uint64_t{cfg.users} * heads_per_pe;
  // Several instances on a PE reserve the runtime's message staging (runtime.h).
  const uint64_t staging = instances > 1 ? kDemuxStagingBytes : 0;
  const uint64_t scratch = tcm.scratch_bytes();
  const uint64_t persistent = tcm.total_bytes() - scratch - std::min(staging, tcm.total_bytes() - scratch);
  const uint64_t per_persistent = PersistentBytes(cfg, rows, (max_block + cfg.tile - 1) / cfg.tile);
  ASSIGN_OR_RETURN(const ReduceFanIn fan, ReduceFanInOf(geo, cfg));
  const uint64_t per_scratch =
      std::max(TileScratchBytes(cfg, rows), ReduceScratchBytes(fan, cfg, rows));
  // An instance's scratch share is at least floor(scratch / n) - 63 (64 B aligned bases).
  const uint64_t fit_scratch = scratch / (per_scratch + 63);
  const uint64_t fit_persistent = persistent / per_persistent;
  const uint64_t fit_users = std::min(fit_scratch, fit_persistent) / heads_per_pe;
  if (per_persistent > persistent || per_scratch + 63 > scratch) {
    if (cfg.one_shot) return OneShotRefusal(fan, cfg, pe_name, max_block, persistent, scratch);
    return TcmCulprit(fan, cfg, pe_name, max_block, persistent, scratch);
  }
  const std::string who = absl::StrCat(cfg.users, " request(s) x ", heads_per_pe,
                                       " KV head(s) = ", instances, " kernel instances on ",
                                       pe_name);
  if (instances > fit_persistent) {
    return Field("users", absl::StrCat(who, " need ", instances, " x ", per_persistent,
                                       " B of the TCM ", PersistentText(cfg), ", "
                                       "which holds ", persistent, " B",
                                       staging > 0 ? absl::StrCat(" beside ", staging,
                                                                  " B of message staging")
                                                   : "",
                                       "; at most ", fit_users,
                                       " request(s) fit"));
  }
  if (instances > fit_scratch) {
    return Field("users", absl::StrCat(who, " need ", per_scratch,
                                       " B of TCM scratch each (a KV tile's or the reduce's "
                                       "temporaries); the ", scratch, " B scratch arena gives each ",
                                       scratch / instances, " B; at most ", fit_users,
                                       " request(s) fit"));
  }
  return absl::OkStatus();
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
    RETURN_IF_ERROR(values.status());
    // Row gi·T_q + t of head group h is query head h·G + gi, token t.
    std::copy(values->begin(), values->end(), o.begin() + uint64_t{h} * g * cfg.t_q * cfg.d);
  }
  return o;
}

QkvInputs RandomDecodeInputs(const DecodeConfig& cfg, uint32_t user, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  const uint64_t s = cfg.ContextOf(user);
  QkvInputs in;
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

std::vector<float> ReferenceDecode(const DecodeConfig& cfg, const QkvInputs& in) {
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
