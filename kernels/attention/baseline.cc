#include "kernels/attention/baseline.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "actors/tensor_ref.h"
#include "base/status_macros.h"
#include "kernels/attention/lse_merge.h"
#include "kernels/attention/reduce_tree.h"
#include "kernels/host/placement.h"
#include "topology/ids.h"

namespace ahbm::kernels {
namespace {

// The log-sum-exp merge of lse_merge.h with the new maximum written into the other m buffer
// (LseMerge allocates it in scratch, which a per-step scope would release).
Task<void> MergeInto(Tl& tl, Running& r, const Tensor& mb, const Tensor& lb, const Tensor& ob) {
  const Tensor& m = r.m[r.cur];
  const Tensor& mm = r.m[1 - r.cur];
  co_await tl.Maximum(m, mb, mm);
  Tensor sa = co_await tl.Sub(m, mm);
  co_await tl.Exp(sa, sa);
  Tensor sb = co_await tl.Sub(mb, mm);
  co_await tl.Exp(sb, sb);
  co_await tl.Mul(r.l, sa, r.l);
  Tensor lbs = co_await tl.Mul(lb, sb);
  co_await tl.Add(r.l, lbs, r.l);
  co_await tl.Mul(r.o, sa, r.o);
  Tensor obs = co_await tl.Mul(ob, sb);
  co_await tl.Add(r.o, obs, r.o);
  r.cur = 1 - r.cur;
}

struct Triplet {
  Tensor m, l, o;
};

// m, l, O as three messages (the ADR's triplet).
Task<void> SendTriplet(Tl& tl, const Peer& to, const Tensor& m, const Tensor& l, const Tensor& o) {
  co_await tl.Send(to, m);
  co_await tl.Send(to, l);
  co_await tl.Send(to, o);
}

Task<Triplet> RecvTriplet(Tl& tl, const Peer& from, uint32_t rows, uint32_t d) {
  const std::vector<uint64_t> col = {rows, 1};
  const std::vector<uint64_t> full = {rows, d};
  Triplet t;
  t.m = co_await tl.Recv(from, col);
  t.l = co_await tl.Recv(from, col);
  t.o = co_await tl.Recv(from, full);
  co_return t;
}

}  // namespace

Task<void> NormaliseAndStore(Tl& tl, const Running& r, uint64_t o_addr, uint32_t rows,
                             uint32_t d) {
  const std::vector<uint64_t> full = {rows, d};
  Tensor out = tl.Alloc(full, pb::BF16);
  co_await tl.Div(r.o, r.l, out);
  co_await tl.Store(tl.Ref(o_addr, full), out);
}

// rev1 §3's tile: the ops in the order Rev1Rank has always issued them (its golden op log).
Task<void> FoldTileBlocking(Tl& tl, Running& r, const Tensor& q, const Tensor& kj,
                            const Tensor& vj, float scale, const Tensor* mask) {
  const std::vector<uint64_t> pshape = {q.dim(0), kj.dim(1)};
  Tensor sj = co_await tl.Dot(q, kj);  // [rows, len], blocking
  co_await tl.Scale(sj, scale, sj);
  if (mask != nullptr) co_await tl.Add(sj, *mask, sj);
  // m_new = maximum(m, max(Sj)); P = exp(Sj - m_new); corr = exp(m - m_new)
  const Tensor& m = r.m[r.cur];
  const Tensor& m_new = r.m[1 - r.cur];
  Tensor mj = co_await tl.Max(sj);
  co_await tl.Maximum(m, mj, m_new);
  Tensor centred = co_await tl.Sub(sj, m_new);
  Tensor pj = tl.Alloc(pshape, pb::BF16);  // P rounded to bf16 before P·V
  co_await tl.Exp(centred, pj);
  Tensor corr = co_await tl.Sub(m, m_new);
  co_await tl.Exp(corr, corr);
  // l = l·corr + sum(P); O = O·corr + dot(P, Vj)
  co_await tl.Mul(r.l, corr, r.l);
  Tensor lj = co_await tl.Sum(pj);
  co_await tl.Add(r.l, lj, r.l);
  co_await tl.Mul(r.o, corr, r.o);
  Tensor pv = co_await tl.Dot(pj, vj);  // blocking
  co_await tl.Add(r.o, pv, r.o);
  r.cur = 1 - r.cur;
}

// §A: one-shot partial attention with blocking dots (Sj = q·Kᵀ, scale, max, exp, sum, P·V),
// then the one-direction fan-out: send the own partial, then ranks − 1 times receive the
// predecessor's, forward it (but the last) and merge it, each step in a scratch scope.
Task<void> BaselineRank(Tl& tl, BaselineRankPlan p) {
  const std::vector<uint64_t> col = {1, 1};
  const std::vector<uint64_t> row = {1, p.d};
  Tensor q = co_await tl.Load(tl.Ref(p.q_addr, row), Arena::kPersistent);
  Running r;
  if (p.len > 0) {
    const std::vector<uint64_t> kshape = {p.d, p.block};
    const std::vector<uint64_t> vshape = {p.len, p.d};
    const std::vector<uint64_t> pshape = {1, p.len};
    ScratchScope scope(&tl);
    Tensor s = co_await tl.Dot(q, tl.Ref(p.kt_addr, kshape).Cols(0, p.len));  // blocking
    co_await tl.Scale(s, p.scale, s);
    r.m[0] = co_await tl.Max(s, -1, tl.Alloc(col, pb::FP32, Arena::kPersistent));
    r.m[1] = tl.Alloc(col, pb::FP32, Arena::kPersistent);
    Tensor centred = co_await tl.Sub(s, r.m[0]);
    Tensor pr = tl.Alloc(pshape, pb::BF16);  // P rounded to bf16 before P·V
    co_await tl.Exp(centred, pr);
    r.l = co_await tl.Sum(pr, -1, tl.Alloc(col, pb::FP32, Arena::kPersistent));
    r.o = co_await tl.Dot(pr, tl.Ref(p.v_addr, vshape),  // blocking
                          tl.Alloc(row, pb::FP32, Arena::kPersistent));
  } else {
    co_await FillEmptyRunning(tl, 1, p.d, r.m, r.l, r.o);  // the identity partial
  }
  if (p.ranks > 1) co_await SendTriplet(tl, p.next, r.M(), r.l, r.o);
  for (uint32_t step = 0; step + 1 < p.ranks; ++step) {
    ScratchScope scope(&tl);
    const Triplet in = co_await RecvTriplet(tl, p.prev, 1, p.d);
    if (step + 2 < p.ranks) co_await SendTriplet(tl, p.next, in.m, in.l, in.o);
    co_await MergeInto(tl, r, in.m, in.l, in.o);
  }
  if (p.store_output) co_await NormaliseAndStore(tl, r, p.o_addr, 1, p.d);
}

// rev1 §3 per tile (blocking dots, MATH primitives), then rev1 §4's tree to the root.
Task<void> Rev1Rank(Tl& tl, Rev1RankPlan p) {
  const std::vector<uint64_t> qshape = {p.rows, p.d};
  Tensor q = co_await tl.Load(tl.Ref(p.q_addr, qshape), Arena::kPersistent);
  Running r;
  co_await FillEmptyRunning(tl, p.rows, p.d, r.m, r.l, r.o);
  const uint64_t tiles = (p.len + p.tile - 1) / p.tile;
  for (uint64_t j = 0; j < tiles; ++j) {
    ScratchScope scope(&tl);
    const uint64_t len = std::min<uint64_t>(p.tile, p.len - j * p.tile);
    const std::vector<uint64_t> kshape = {p.d, p.tile};
    const std::vector<uint64_t> vshape = {len, p.d};
    const Tensor kj = tl.Ref(p.k_addr + j * p.d * p.tile * 2, kshape).Cols(0, len);
    const Tensor vj = tl.Ref(p.v_addr + j * p.tile * p.d * 2, vshape);
    co_await FoldTileBlocking(tl, r, q, kj, vj, p.scale);
  }
  for (const Peer& child : p.children) {
    ScratchScope scope(&tl);
    const Triplet in = co_await RecvTriplet(tl, child, p.rows, p.d);
    co_await MergeInto(tl, r, in.m, in.l, in.o);
  }
  if (p.parent) {
    co_await SendTriplet(tl, *p.parent, r.M(), r.l, r.o);
  } else if (p.store_output) {
    co_await NormaliseAndStore(tl, r, p.o_addr, p.rows, p.d);
  }
}

namespace {

absl::Status Field(const std::string& field, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

// kFanout and kRev1Tree keep a head inside one CUBE: the decode geometry with C = 1.
DecodeConfig OneCube(const DecodeConfig& cfg) {
  DecodeConfig one = cfg;
  one.c = 1;
  one.group_rows = one.group_cols = 0;
  one.kv_per_cube = 0;
  return one;
}

// One instance per head on one CUBE each (kFanout: h_q, kRev1Tree: h_kv): CUBEs from SIP sip.
absl::StatusOr<std::vector<uint32_t>> CubesFromSip(const pb::Chip& chip, uint32_t sip,
                                                   uint32_t heads, const char* field) {
  const topology::ChipIndex index(chip);
  const uint32_t first = sip * index.cubes_per_sip();
  if (first + heads > index.num_cubes()) {
    return Field(field, absl::StrCat("this baseline puts one head per CUBE: ", heads,
                                     " heads need ", heads, " CUBEs from SIP ", sip,
                                     ", the chip has ", index.num_cubes() - first));
  }
  std::vector<uint32_t> cubes;
  for (uint32_t h = 0; h < heads; ++h) cubes.push_back(first + h);
  return cubes;
}

}  // namespace

absl::StatusOr<std::map<uint32_t, RingLinks>> FanoutRing(const AttentionGeometry& geo,
                                                         const std::vector<uint32_t>& cubes) {
  const uint32_t per_cube = geo.index.pes_per_cube();
  std::vector<std::pair<uint32_t, uint32_t>> ring;  // (global CUBE, PE in CUBE)
  for (uint32_t cube : cubes) {
    for (uint32_t node : SnakeOrder(geo.pe_rows, geo.pe_cols)) ring.emplace_back(cube, geo.pes[node]);
  }
  const topology::Mesh& mesh = geo.index.pe_mesh();
  const auto link = [&](size_t from, size_t to) -> absl::StatusOr<Peer> {
    const auto [fc, fp] = ring[from];
    const auto [tc, tp] = ring[to];
    if (fc != tc) return Peer::Pe(tc * per_cube + tp);
    if (mesh.HopDistance(fp, tp) != 1) {
      return Field("p", absl::StrCat("the fan-out ring over a ", geo.pe_rows, "x", geo.pe_cols,
                                     " PE rectangle in one CUBE has a link that is not one IPCQ hop"));
    }
    return Peer::Ipcq(DirectionTo(mesh, fp, tp));
  };
  std::map<uint32_t, RingLinks> links;
  const size_t n = ring.size();
  for (size_t i = 0; n > 1 && i < n; ++i) {
    absl::StatusOr<Peer> next = link(i, (i + 1) % n);
    absl::StatusOr<Peer> prev = link(i, (i + n - 1) % n);
    RETURN_IF_ERROR(next.status());
    RETURN_IF_ERROR(prev.status());
    links[ring[i].first * per_cube + ring[i].second] = RingLinks{*next, *prev};
  }
  return links;
}

namespace {

// The fan-out ring's sequential steps (ranks − 1) split into IPCQ and NOC rounds: the longest
// chain of ranks − 1 consecutive ring edges holds min(C, ranks − 1) NOC edges when C > 1.
void SetFanoutRounds(uint32_t c, uint32_t p, DecodeLaunch& launch) {
  const uint32_t steps = c * p - 1;
  launch.level1_rounds = c > 1 ? std::min(c, steps) : 0;
  launch.level2_rounds = steps - launch.level1_rounds;
}

// kFanout / kFanoutGroup: PlaceDecodeRequest per copy of the KV heads, then the fan-out ring
// per head copy; instance g of a rank serves Q row g (query head h·G + g).
absl::StatusOr<DecodeLaunch> LaunchFanout(const pb::Chip& chip, const DecodeConfig& cfg,
                                          BaselineKind kind, KernelRuntime& runtime,
                                          MemoryStore* store,
                                          const std::vector<QkvInputs>& inputs) {
  const bool group = kind == BaselineKind::kFanoutGroup;
  const DecodeConfig gcfg = group ? cfg : OneCube(cfg);
  absl::StatusOr<AttentionGeometry> geo = MakeAttentionGeometry(chip, gcfg.Geometry());
  RETURN_IF_ERROR(geo.status());
  absl::StatusOr<std::vector<uint32_t>> cubes = BaselineCubes(chip, cfg, kind);
  RETURN_IF_ERROR(cubes.status());
  const uint32_t g = cfg.h_q / cfg.h_kv;
  const bool data = store != nullptr && !inputs.empty();
  // Each copy places every KV head once: kFanoutGroup one copy on the decode geometry;
  // kFanout G copies, copy gi of head h on query head h·G + gi's CUBE.
  std::vector<std::vector<std::vector<uint32_t>>> copies;
  if (group) {
    copies.push_back(geo->HeadCubes());
  } else {
    for (uint32_t gi = 0; gi < g; ++gi) {
      copies.emplace_back();
      for (uint32_t h = 0; h < cfg.h_kv; ++h) copies.back().push_back({(*cubes)[h * g + gi]});
    }
  }
  const std::vector<uint32_t> cube_snake = SnakeOrder(geo->groups.shape().rows, geo->groups.shape().cols);

  DecodeLaunch launch;
  launch.g = group ? g : 1;
  launch.ranks_per_head = gcfg.c * gcfg.p;
  launch.cubes = *cubes;
  SetFanoutRounds(gcfg.c, gcfg.p, launch);
  BaselineRankPlan base;
  base.d = cfg.d;
  base.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.d)));
  base.ranks = gcfg.c * gcfg.p;
  host::HbmAllocator allocator(chip);
  for (uint32_t u = 0; u < cfg.users; ++u) {
    launch.outputs.emplace_back(group ? cfg.h_kv : cfg.h_q);
    for (uint32_t copy = 0; copy < copies.size(); ++copy) {
      absl::StatusOr<PlacedRequest> placed = PlaceDecodeRequest(
          *geo, gcfg, u, copies[copy], KLayout::kTransposed, allocator, store,
          data ? &inputs[u] : nullptr);
      RETURN_IF_ERROR(placed.status());
      for (uint32_t h = 0; h < cfg.h_kv; ++h) {
        std::vector<uint32_t> ring_cubes;
        for (uint32_t ci : cube_snake) ring_cubes.push_back(placed->cubes[h][ci]);
        absl::StatusOr<std::map<uint32_t, RingLinks>> ring = FanoutRing(*geo, ring_cubes);
        RETURN_IF_ERROR(ring.status());
        const DecodeLaunch::Output root = placed->outputs[h];
        // The query rows this copy's instances serve and their request ids (module comment).
        std::vector<uint32_t> rows;
        if (group) {
          for (uint32_t gi = 0; gi < g; ++gi) rows.push_back(gi);
          launch.outputs[u][h] = root;
        } else {
          rows.push_back(copy);
          launch.outputs[u][h * g + copy] = DecodeLaunch::Output{root.pe, root.addr + uint64_t{copy} * cfg.d * 2};
        }
        for (const PlacedRank& rank : placed->ranks[h]) {
          for (uint32_t gi : rows) {
            BaselineRankPlan plan = base;
            plan.q_addr = rank.q_addr + uint64_t{gi} * cfg.d * 2;
            plan.kt_addr = rank.k_addr;
            plan.block = placed->block;
            plan.v_addr = rank.v_addr;
            plan.len = rank.len;
            if (auto it = ring->find(rank.pe); it != ring->end()) {
              plan.next = it->second.next;
              plan.prev = it->second.prev;
            }
            plan.store_output = rank.pe == root.pe;
            plan.o_addr = root.addr + uint64_t{gi} * cfg.d * 2;
            const uint32_t request = group ? u * g + gi : u;
            // Message stream: the KV head (a PE may hold several with kv_per_cube).
            RETURN_IF_ERROR(runtime.AddKernel(
                rank.pe, request, h, [plan](Tl& tl) { return BaselineRank(tl, plan); }));
          }
        }
      }
    }
  }
  return launch;
}

// kRev1Tree: rev1 §0 / §2.1 round-robin placement on KV head h's CUBE, §4 tree.
absl::StatusOr<DecodeLaunch> LaunchRev1(const pb::Chip& chip, const DecodeConfig& cfg,
                                        KernelRuntime& runtime, MemoryStore* store,
                                        const std::vector<QkvInputs>& inputs) {
  const DecodeConfig one = OneCube(cfg);
  absl::StatusOr<AttentionGeometry> geo = MakeAttentionGeometry(chip, one.Geometry());
  RETURN_IF_ERROR(geo.status());
  absl::StatusOr<std::vector<uint32_t>> cubes = BaselineCubes(chip, cfg, BaselineKind::kRev1Tree);
  RETURN_IF_ERROR(cubes.status());
  absl::StatusOr<std::vector<ReduceNode>> tree = Level2Tree(*geo, cfg.level2);
  RETURN_IF_ERROR(tree.status());
  const uint32_t g = cfg.h_q / cfg.h_kv;
  const uint32_t p = cfg.p;
  const bool data = store != nullptr && !inputs.empty();
  const topology::Mesh& mesh = geo->index.pe_mesh();
  const uint32_t per_cube = geo->index.pes_per_cube();

  DecodeLaunch launch;
  launch.g = g;
  launch.ranks_per_head = p;
  launch.cubes = *cubes;
  launch.level2_rounds = ReduceRounds(*tree, geo->pe_root);
  Rev1RankPlan base;
  base.rows = g;
  base.d = cfg.d;
  base.tile = cfg.tile;
  base.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.d)));
  host::HbmAllocator allocator(chip);
  for (uint32_t u = 0; u < cfg.users; ++u) {
    const uint64_t context = cfg.ContextOf(u);
    // rev1 §2.1: token t on PE (start_pe + t) mod P, start_pe rotated by the request;
    // ⌈max_context / P⌉ dense slots per PE, slot j of PE rank k = (pe - start) mod P holding
    // token j·P + k.
    const uint32_t start = (cfg.start_pe + (cfg.rotate_by_request ? u : 0)) % p;
    const uint64_t slots = (cfg.MaxContextOf(u) + p - 1) / p;
    const uint64_t tiles = (slots + cfg.tile - 1) / cfg.tile;
    launch.outputs.emplace_back(cfg.h_kv);
    for (uint32_t h = 0; h < cfg.h_kv; ++h) {
      std::vector<uint32_t> pes;
      for (uint32_t node = 0; node < p; ++node) pes.push_back((*cubes)[h] * per_cube + geo->pes[node]);
      const std::vector<uint64_t> qshape = {g, cfg.d};
      absl::StatusOr<host::PlacedTensor> q = host::PlaceReplicated(
          allocator, absl::StrCat("q[", u, "][", h, "]"), qshape, pb::BF16, pes);
      RETURN_IF_ERROR(q.status());
      if (data) {
        const auto first = inputs[u].q.data.begin() + uint64_t{h} * g * cfg.d;
        host::NpyArray group{qshape, std::vector<float>(first, first + uint64_t{g} * cfg.d)};
        RETURN_IF_ERROR(host::Scatter(*store, *q, group));
      }
      const uint32_t root_pe = pes[geo->pe_root];
      absl::StatusOr<uint64_t> o_addr = allocator.Allocate(root_pe, uint64_t{g} * cfg.d * 2);
      RETURN_IF_ERROR(o_addr.status());
      launch.outputs[u][h] = DecodeLaunch::Output{root_pe, *o_addr};
      for (uint32_t node = 0; node < p; ++node) {
        const uint32_t k = (node + p - start) % p;  // rev1's (pe_id - start_pe) mod N
        Rev1RankPlan plan = base;
        plan.q_addr = q->shards()[node].ref.addr();
        plan.len = context / p + (k < context % p ? 1 : 0);
        absl::StatusOr<uint64_t> k_addr = allocator.Allocate(pes[node], tiles * cfg.tile * cfg.d * 2);
        RETURN_IF_ERROR(k_addr.status());
        absl::StatusOr<uint64_t> v_addr = allocator.Allocate(pes[node], slots * cfg.d * 2);
        RETURN_IF_ERROR(v_addr.status());
        plan.k_addr = *k_addr;
        plan.v_addr = *v_addr;
        if (data && plan.len > 0) {
          const uint64_t padded = (plan.len + cfg.tile - 1) / cfg.tile * cfg.tile;
          std::vector<float> kt(padded * cfg.d), v(plan.len * cfg.d);
          for (uint64_t j = 0; j < plan.len; ++j) {
            const uint64_t src = (uint64_t{h} * context + j * p + k) * cfg.d;
            for (uint32_t i = 0; i < cfg.d; ++i) {
              kt[(j / cfg.tile) * cfg.d * cfg.tile + i * cfg.tile + j % cfg.tile] = inputs[u].k.data[src + i];
              v[j * cfg.d + i] = inputs[u].v.data[src + i];
            }
          }
          const pb::TensorRef k_ref = sim::MakeTensorRef(pb::HBM, pes[node], plan.k_addr, pb::BF16,
                                                         {padded / cfg.tile * cfg.d, cfg.tile});
          const pb::TensorRef v_ref =
              sim::MakeTensorRef(pb::HBM, pes[node], plan.v_addr, pb::BF16, {plan.len, cfg.d});
          RETURN_IF_ERROR(store->Write(k_ref, kt));
          RETURN_IF_ERROR(store->Write(v_ref, v));
        }
        for (uint32_t child : (*tree)[node].children) {
          plan.children.push_back(Peer::Ipcq(DirectionTo(mesh, geo->pes[node], geo->pes[child])));
        }
        if ((*tree)[node].parent) {
          plan.parent = Peer::Ipcq(DirectionTo(mesh, geo->pes[node], geo->pes[*(*tree)[node].parent]));
        }
        plan.store_output = node == geo->pe_root;
        plan.o_addr = *o_addr;
        RETURN_IF_ERROR(
            runtime.AddKernel(pes[node], u, h, [plan](Tl& tl) { return Rev1Rank(tl, plan); }));
      }
    }
  }
  return launch;
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> BaselineCubes(const pb::Chip& chip, const DecodeConfig& cfg,
                                                    BaselineKind kind) {
  if (cfg.t_q != 1) return Field("t_q", "the baselines decode one token (t_q = 1)");
  const bool group = kind == BaselineKind::kFanoutGroup;
  if (group && cfg.kv_per_cube != 0) return Field("kv_per_cube", "the baselines do not use it");
  if (kind == BaselineKind::kFanout) return FanoutCubes(chip, cfg.Geometry());
  const DecodeConfig gcfg = group ? cfg : OneCube(cfg);
  absl::StatusOr<AttentionGeometry> geo = MakeAttentionGeometry(chip, gcfg.Geometry());
  RETURN_IF_ERROR(geo.status());
  // The message pattern must fit the PE mesh: the ring's IPCQ hops, the rev1 tree's edges.
  if (kind == BaselineKind::kRev1Tree) {
    RETURN_IF_ERROR(Level2Tree(*geo, cfg.level2).status());
    return CubesFromSip(chip, cfg.sip, cfg.h_kv, "h_kv");
  }
  RETURN_IF_ERROR(FanoutRing(*geo, geo->HeadCubes()[0]).status());
  return DecodeCubes(chip, cfg);
}

absl::StatusOr<std::vector<uint32_t>> FanoutCubes(const pb::Chip& chip, const GeometrySpec& spec) {
  GeometrySpec one = spec;  // a head inside one CUBE
  one.c = 1;
  one.group_rows = one.group_cols = 0;
  one.kv_per_cube = 0;
  ASSIGN_OR_RETURN(const AttentionGeometry geo, MakeAttentionGeometry(chip, one));
  // The ring's IPCQ hops must fit the PE mesh.
  RETURN_IF_ERROR(FanoutRing(geo, geo.HeadCubes()[0]).status());
  return CubesFromSip(chip, spec.sip, spec.h_q, "h_q");
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> FanoutCubeSets(const pb::Chip& chip,
                                                                  const GeometrySpec& spec) {
  ASSIGN_OR_RETURN(const std::vector<uint32_t> cubes, FanoutCubes(chip, spec));
  std::vector<std::vector<uint32_t>> sets;
  for (uint32_t cube : cubes) sets.push_back({cube});
  return sets;
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> BaselineCubeSets(const pb::Chip& chip,
                                                                    const DecodeConfig& cfg,
                                                                    BaselineKind kind) {
  if (kind == BaselineKind::kFanoutGroup) return DecodeCubeSets(chip, cfg);
  absl::StatusOr<std::vector<uint32_t>> cubes = BaselineCubes(chip, cfg, kind);
  RETURN_IF_ERROR(cubes.status());
  std::vector<std::vector<uint32_t>> sets;
  for (uint32_t cube : *cubes) sets.push_back({cube});
  return sets;
}

absl::StatusOr<DecodeLaunch> LaunchBaseline(const pb::Chip& chip, const DecodeConfig& cfg,
                                            KernelRuntime& runtime, MemoryStore* store,
                                            const std::vector<QkvInputs>& inputs,
                                            BaselineKind kind) {
  if (store != nullptr && !inputs.empty() && inputs.size() != cfg.users) {
    return Field("users", absl::StrCat(cfg.users, " requests but ", inputs.size(), " input sets"));
  }
  if (kind == BaselineKind::kRev1Tree) return LaunchRev1(chip, cfg, runtime, store, inputs);
  return LaunchFanout(chip, cfg, kind, runtime, store, inputs);
}

}  // namespace ahbm::kernels
