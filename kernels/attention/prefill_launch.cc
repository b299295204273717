#include "kernels/attention/prefill_launch.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/errors.h"
#include "actors/tensor_ref.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "kernels/attention/baseline.h"
#include "kernels/attention/prefill_baseline.h"
#include "kernels/attention/reduce_tree.h"
#include "kernels/host/placement.h"
#include "topology/kv_placement.h"

namespace ahbm::kernels {
namespace {

absl::Status Field(const std::string& field, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

absl::Status Validate(const PrefillConfig& cfg, const pb::Chip& chip) {
  if (cfg.h_kv == 0 || cfg.h_q == 0 || cfg.h_q % cfg.h_kv != 0) {
    return Field("h_q", absl::StrCat("must be a positive multiple of h_kv = ", cfg.h_kv,
                                     " (got ", cfg.h_q, ")"));
  }
  if (cfg.tile == 0) return Field("tile", "must be > 0");
  const uint32_t g = cfg.RowsPerToken();
  if (cfg.q_tile < g) {
    return Field("q_tile", absl::StrCat(cfg.q_tile, " GEMM rows hold no token of the ", g,
                                        " M-folded query heads"));
  }
  if (cfg.Ring() && cfg.C() != cfg.G()) {
    return Field("c", absl::StrCat("the ring gives each CUBE one query head of the group: C must "
                                   "equal G = ", cfg.G(), " (got ", cfg.C(), ")"));
  }
  if (cfg.variant == PrefillVariant::kFlash && (cfg.c > 1 || cfg.p > 1)) {
    return Field(cfg.c > 1 ? "c" : "p", "flash prefill runs without SP: C = P = 1");
  }
  if (cfg.variant == PrefillVariant::kBaselineFanout && cfg.c > 1) {
    return Field("c", "baseline_fanout keeps each query head in one CUBE (C = 1)");
  }
  if (cfg.ring_message_bytes == 0) return Field("ring_message_bytes", "must be > 0");
  if (cfg.ring_depth < 1 || cfg.ring_depth > 4) {
    return Field("ring_depth", absl::StrCat("receive buffers posted ahead must be 1 .. 4 (got ",
                                            cfg.ring_depth, ")"));
  }
  if (cfg.lookahead && cfg.Baseline()) {
    return Field("lookahead", "a baseline's blocking dots leave nothing to issue ahead");
  }
  const uint32_t inflight = chip.sip().cube().pe().scheduler().max_inflight_composites();
  if (cfg.lookahead && *cfg.lookahead >= std::max(1u, inflight)) {
    return Field("lookahead", absl::StrCat(*cfg.lookahead, " Q·Kᵀ composites ahead and a P·V need ",
                                           *cfg.lookahead + 1, " in flight; the PE scheduler admits ",
                                           inflight, " (max_inflight_composites): at most ",
                                           std::max(1u, inflight) - 1));
  }
  const uint64_t queue = chip.sip().noc().endpoint_queue_bytes();
  if (cfg.Ring() && cfg.ring_message_bytes > queue) {
    return Field("ring_message_bytes", absl::StrCat(cfg.ring_message_bytes,
                                                    " B messages exceed the NOC endpoint queue (",
                                                    queue, " B, noc.endpoint_queue_bytes)"));
  }
  const uint32_t lengths = cfg.request_lengths.empty() ? 1 : cfg.users;
  for (uint32_t u = 0; u < lengths; ++u) {
    if (cfg.t_q > cfg.ContextOf(u)) {
      return Field("t_q", absl::StrCat(cfg.t_q, " query tokens exceed the context length ",
                                       cfg.ContextOf(u), " (the queries are the last T_q positions)"));
    }
  }
  return absl::OkStatus();
}

// The per-instance TCM need (prefill.cc's allocations): fixed buffers, and one running state.
struct TcmNeed {
  uint64_t fixed = 0, state = 0, scratch = 0;
};
TcmNeed NeedOf(const PrefillConfig& cfg, uint32_t g, uint32_t tokens, uint64_t block) {
  const uint64_t rows = uint64_t{tokens} * g;
  TcmNeed n;
  const uint64_t buffers = cfg.Lookahead() + 1;  // the software pipeline's (prefill.cc Buffers)
  n.fixed = buffers *
            (Align64(rows * cfg.d * 2) + Align64(rows * cfg.tile * 4) + Align64(rows * cfg.tile * 2));
  const bool row_major = cfg.k_layout == KLayout::kRowMajor;
  const uint64_t k_tile = Align64(uint64_t{cfg.tile} * cfg.d * 2);  // row-major: a K tile in TCM
  if (row_major) n.fixed += buffers * k_tile;  // the transposed tiles
  if (cfg.Ring()) {
    n.fixed += cfg.ring_depth * (Align64(KBlockBytes(cfg.k_layout, cfg.d, cfg.tile, block)) +
                                 Align64(block * cfg.d * 2)) +
               2 * Align64(64);
    if (cfg.ring_depth == 1) {
      PrefillShape s;
      s.d = cfg.d;
      s.tile = cfg.tile;
      s.k_layout = cfg.k_layout;
      n.fixed += Align64(RingBounceElements(s, block, cfg.ring_message_bytes) * 2);
    }
  }
  n.state = 3 * Align64(rows * 4) + Align64(rows * cfg.d * 4);
  // A pair's softmax temporaries (max, sub, dm, corr, sum columns; centred Sj; P bf16; P·V),
  // or the stored O.
  // Row-major: a K tile loaded in a scope of its own, outside the pair's.
  n.scratch = std::max({5 * Align64(rows * 4) + Align64(rows * cfg.tile * 4) +
                            Align64(rows * cfg.tile * 2) + Align64(rows * cfg.d * 4),
                        Align64(rows * cfg.d * 2), row_major ? k_tile : 0});
  return n;
}

// A PE's two HBM slots for received ring sub-blocks.
struct RingSlots {
  uint64_t k[2] = {0, 0};
  uint64_t v[2] = {0, 0};
};
using RingSlotsByPe = std::map<uint32_t, RingSlots>;  // by global PE

// A step's spans in the order a PE streams them: from the sub-block in its own HBM on, then
// around. Every PE of a CUBE streams the same P sub-blocks; in the same order they would all
// read one PE's 8 channels at a time (8-way contention, 56 channels idle) — rotated, each
// reads another PE's channels. (Softmax folds commute; only the fp32 rounding order moves.)
std::vector<KvSpan> StartAtOwn(std::vector<KvSpan> spans, uint32_t pe) {
  const auto own = std::find_if(spans.begin(), spans.end(),
                                [pe](const KvSpan& sp) { return sp.owner == pe; });
  if (own != spans.end()) std::rotate(spans.begin(), own, spans.end());
  return spans;
}

// One instance being built: its plan and where its tiles sit in the global output.
struct Built {
  uint32_t pe = 0;
  uint32_t stream = 0;  // its message stream: the KV head
  PrefillPlan plan;
  std::vector<PrefillLaunch::Output> outputs;
};

}  // namespace

uint64_t Align64(uint64_t v) { return (v + 63) / 64 * 64; }

TcmShare TcmShareOf(const pb::Chip& chip, uint64_t instances) {
  const pb::Tcm& tcm = chip.sip().cube().pe().tcm();
  const uint64_t staging = instances > 1 ? kDemuxStagingBytes : 0;
  const uint64_t persistent = tcm.total_bytes() - tcm.scratch_bytes() -
                              std::min(staging, tcm.total_bytes() - tcm.scratch_bytes());
  return TcmShare{persistent / instances, tcm.scratch_bytes() / instances - 63};
}

absl::Status WritePrefillMask(MemoryStore* store, uint32_t pe, const MaskSlot& m, uint32_t g) {
  const uint64_t rows = uint64_t{m.tokens} * g;
  std::vector<float> values(rows * m.len);
  for (uint64_t r = 0; r < rows; ++r) {
    const int64_t t = static_cast<int64_t>(r / g);
    for (uint64_t c = 0; c < m.len; ++c) {
      values[r * m.len + c] = m.offset + static_cast<int64_t>(c) <= t ? 0.0f : -INFINITY;
    }
  }
  const pb::TensorRef ref = sim::MakeTensorRef(pb::HBM, pe, m.addr, pb::BF16, {rows, m.len});
  // The slot came from the HBM allocator: a write outside the PE's region is our bug.
  if (absl::Status s = store->Write(ref, values); !s.ok()) {
    return InvariantError(absl::StrCat("prefill mask slot: ", s.message()));
  }
  return absl::OkStatus();
}

std::vector<std::vector<uint32_t>> SplitQueryTiles(uint32_t n, uint32_t pes, QuerySplit split) {
  std::vector<std::vector<uint32_t>> out(pes);
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t node = 0;
    switch (split) {
      case QuerySplit::kContiguous:
        node = static_cast<uint32_t>(uint64_t{k} * pes / n);
        break;
      case QuerySplit::kStriped:
        node = k % pes;
        break;
      case QuerySplit::kZigzag:
        node = (k / pes) % 2 == 0 ? k % pes : pes - 1 - k % pes;
        break;
    }
    out[node].push_back(k);
  }
  return out;
}

GeometrySpec PrefillConfig::Geometry() const {
  GeometrySpec g;
  g.h_q = h_q;
  g.h_kv = h_kv;
  g.d = d;
  g.t_q = 1;  // the query count is checked by Validate, per request
  g.users = users;
  g.s = s;
  g.max_context = max_context;
  g.request_lengths = request_lengths;
  g.c = C();
  g.p = P();
  g.group_rows = group_rows;
  g.group_cols = group_cols;
  g.tile = tile;
  g.sip = sip;
  g.start_cube = start_cube;
  g.start_pe = start_pe;
  g.kv_per_cube = variant == PrefillVariant::kShortContext ? kv_per_cube : 0;
  return g;
}

absl::StatusOr<std::vector<uint32_t>> PrefillCubes(const pb::Chip& chip, const PrefillConfig& cfg) {
  RETURN_IF_ERROR(Validate(cfg, chip));
  if (cfg.variant == PrefillVariant::kBaselineFanout) {
    return FanoutCubes(chip, cfg.Geometry());
  }
  return AttentionCubes(chip, cfg.Geometry());
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> PrefillCubeSets(const pb::Chip& chip,
                                                                   const PrefillConfig& cfg) {
  RETURN_IF_ERROR(Validate(cfg, chip));
  if (cfg.variant == PrefillVariant::kBaselineFanout) {
    return FanoutCubeSets(chip, cfg.Geometry());
  }
  return AttentionCubeSets(chip, cfg.Geometry());
}

namespace {

// ---- LaunchPrefill's phases (flash, short context, ring; the fan-out baseline has its own) ----

// What every phase of one launch reads.
struct LaunchContext {
  const PrefillConfig& cfg;
  const AttentionGeometry& geo;
  PrefillShape shape;
  uint32_t tokens_per_tile = 0;  // query tokens per GEMM tile (q_tile / g)
  std::vector<uint32_t> cycle;   // the ring's snake cycle over the group's CUBEs (cube_in_group)
  MemoryStore* store = nullptr;  // data mode: write the inputs; null: timing mode
  const std::vector<QkvInputs>* inputs = nullptr;
  bool data() const { return store != nullptr; }
};

// The kernel's shape knobs (PrefillShape) from the configuration.
PrefillShape ShapeOf(const PrefillConfig& cfg) {
  PrefillShape shape;
  shape.g = cfg.RowsPerToken();
  shape.d = cfg.d;
  shape.tile = cfg.tile;
  shape.k_layout = cfg.k_layout;
  shape.max_tokens = cfg.q_tile / shape.g;
  shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.d)));
  shape.lookahead = cfg.Lookahead();
  shape.blocking_dot = cfg.variant == PrefillVariant::kBaselineDot;
  shape.scratch_scope = cfg.scratch_scope;
  return shape;
}

// The query tiles an instance may hold at once (its T_q chunk's cap), or the refusal when not
// even one fits the instance's TCM share: the fixed buffers plus two running states in the
// persistent arena, one pair's temporaries in scratch.
absl::StatusOr<uint32_t> TilesPerChunkCap(const LaunchContext& ctx, uint64_t block,
                                          const TcmShare& share, uint64_t per_pe) {
  const PrefillConfig& cfg = ctx.cfg;
  const bool ring = cfg.Ring();
  const TcmNeed need = NeedOf(cfg, ctx.shape.g, ctx.tokens_per_tile, block);
  if (need.fixed + 2 * need.state > share.persistent) {
    return Field(cfg.users > 1      ? "users"
                 : cfg.Lookahead() > 1 ? "lookahead"
                 : ring && cfg.ring_depth > 2 ? "ring_depth"
                 : ring             ? "s, tile, q_tile"
                                    : "tile, q_tile",
                 absl::StrCat("a prefill instance needs ", need.fixed + 2 * need.state,
                              " B of the TCM persistent arena (Q, Sj, mask",
                              ring ? ", ring sub-block" : "", " buffers and two running states); ",
                              per_pe, " instance(s) per PE leave each ", share.persistent, " B"));
  }
  if (need.scratch > share.scratch) {
    return Field(cfg.users > 1 ? "users" : "tile, q_tile",
                 absl::StrCat("a prefill instance needs ", need.scratch, " B of TCM scratch; ",
                              per_pe, " instance(s) per PE leave each ", share.scratch, " B"));
  }
  uint32_t cap = static_cast<uint32_t>(
      std::min<uint64_t>(UINT32_MAX, (share.persistent - need.fixed) / need.state));
  if (cfg.max_tiles_per_chunk != 0) cap = std::min(cap, cfg.max_tiles_per_chunk);
  return cap;
}

// One request's KV cache placed over its KV heads' CUBE Groups (and written in data mode).
struct RequestKv {
  uint32_t user = 0;
  uint64_t s = 0, t_q = 0;  // its context and query tokens
  topology::KvPlacement kv;
  std::vector<host::KvHeadGroup> heads;
  host::PlacedTensor k, v;

  uint64_t block() const { return kv.block(); }
  // The global PE of KV head h's CUBE ci, rectangle node `node`.
  uint32_t PeOf(const AttentionGeometry& geo, uint32_t h, uint32_t ci, uint32_t node) const {
    return heads[h].cubes[ci] * geo.index.pes_per_cube() + geo.pes[node];
  }
  // Rank r's K/V sub-block of KV head h, where its cache holds it.
  KvSpan SpanOf(const AttentionGeometry& geo, uint32_t h, uint32_t r) const {
    const uint32_t ranks = kv.ranks();
    return KvSpan{PeOf(geo, h, kv.CubeInGroupOfRank(r), kv.PeOfRank(r)),
                  k.shards()[h * ranks + r].ref.addr(), block(),
                  v.shards()[h * ranks + r].ref.addr(), kv.GlobalPosition(r, 0),
                  kv.MyLen(r, s)};
  }
};

// Request u's KV placement over C·P ranks (rotated by the request when asked).
absl::StatusOr<topology::KvPlacement> RequestPlacement(const PrefillConfig& cfg, uint32_t u) {
  const uint32_t rot = cfg.rotate_by_request ? u : 0;
  return topology::KvPlacement::Create(cfg.C(), cfg.P(), cfg.MaxContextOf(u),
                                       cfg.start_cube + rot, cfg.start_pe + rot);
}

absl::StatusOr<RequestKv> PlaceRequestKv(const LaunchContext& ctx, uint32_t u,
                                         topology::KvPlacement kv, host::HbmAllocator& allocator) {
  const PrefillConfig& cfg = ctx.cfg;
  std::vector<host::KvHeadGroup> heads(cfg.h_kv);
  const std::vector<std::vector<uint32_t>> head_cubes = ctx.geo.HeadCubes();
  for (uint32_t h = 0; h < cfg.h_kv; ++h) heads[h] = host::KvHeadGroup{head_cubes[h], ctx.geo.pes};
  const uint64_t s = cfg.ContextOf(u);
  const std::vector<uint64_t> kv_shape = {cfg.h_kv, s, cfg.d};
  ASSIGN_OR_RETURN(host::PlacedTensor k,
                   host::PlaceKvCache(allocator, absl::StrCat("k[", u, "]"), kv_shape, pb::BF16,
                                      kv, heads, HostKvLayout(cfg.k_layout, cfg.tile, kv.block())));
  if (cfg.kv_bank_interleaved) RETURN_IF_ERROR(host::PadForBankInterleave(allocator, k));
  ASSIGN_OR_RETURN(host::PlacedTensor v,
                   host::PlaceKvCache(allocator, absl::StrCat("v[", u, "]"), kv_shape, pb::BF16,
                                      kv, heads, host::KvLayout{}));
  if (ctx.data()) {
    RETURN_IF_ERROR(host::Scatter(*ctx.store, k, (*ctx.inputs)[u].k));
    RETURN_IF_ERROR(host::Scatter(*ctx.store, v, (*ctx.inputs)[u].v));
  }
  return RequestKv{u, s, cfg.QueriesOf(u), std::move(kv), std::move(heads), std::move(k),
                   std::move(v)};
}

// The ring's two HBM slots for received sub-blocks on every PE of every group CUBE, by global
// PE (allocated before the instances, so the spans of step s >= 1 can name them).
absl::StatusOr<RingSlotsByPe> AllocateRingSlots(const LaunchContext& ctx, const RequestKv& req,
                                                host::HbmAllocator& allocator) {
  const PrefillConfig& cfg = ctx.cfg;
  RingSlotsByPe slots;
  if (!cfg.Ring() || cfg.C() <= 1) return slots;
  const uint64_t kbytes = KBlockBytes(cfg.k_layout, cfg.d, cfg.tile, req.block());
  for (uint32_t h = 0; h < cfg.h_kv; ++h) {
    for (uint32_t ci = 0; ci < cfg.C(); ++ci) {
      for (uint32_t node = 0; node < cfg.P(); ++node) {
        const uint32_t pe = req.PeOf(ctx.geo, h, ci, node);
        RingSlots& sl = slots[pe];
        for (int i = 0; i < 2; ++i) {
          ASSIGN_OR_RETURN(sl.k[i], allocator.Allocate(pe, kbytes));
          ASSIGN_OR_RETURN(sl.v[i], allocator.Allocate(pe, req.block() * cfg.d * 2));
        }
      }
    }
  }
  return slots;
}

// The ring's plan for the instance at (KV head h, group CUBE ci, rectangle node): its
// neighbours on the snake cycle of the group's CUBEs, the slices it streams at each of the C
// steps (ADR-0060 rev2 §5: step 0 its own CUBE's slice, then what the previous CUBE held), and
// the barrier tree over the CUBE's PEs. Returns the query head of its row g = 0.
uint32_t PlanRingInstance(const LaunchContext& ctx, const RequestKv& req,
                          const RingSlotsByPe& slots,
                          const std::vector<ReduceNode>& tree, uint32_t h, uint32_t ci,
                          uint32_t node, PrefillPlan& plan) {
  const PrefillConfig& cfg = ctx.cfg;
  const AttentionGeometry& geo = ctx.geo;
  const uint32_t C = cfg.C(), P = cfg.P();
  const std::vector<uint32_t>& cycle = ctx.cycle;
  const uint32_t pe = req.PeOf(geo, h, ci, node);
  const uint32_t k_pos =
      static_cast<uint32_t>(std::find(cycle.begin(), cycle.end(), ci) - cycle.begin());
  const auto slice_at = [&](uint32_t pos) {  // slice held at cycle position pos, step 0
    return (cycle[pos] + C - req.kv.start_cube()) % C;  // kv.CubeLocal
  };
  RingPlan rp;
  rp.next = Peer::Pe(req.PeOf(geo, h, cycle[(k_pos + 1) % C], node));
  rp.prev = Peer::Pe(req.PeOf(geo, h, cycle[(k_pos + C - 1) % C], node));
  rp.block = req.block();
  rp.message_bytes = cfg.ring_message_bytes;
  rp.depth = cfg.ring_depth;
  rp.send_first = cfg.ring_send_first;
  // C = 1: no slots (nothing is received); their addresses stay 0.
  const auto own_it = slots.find(pe);
  const RingSlots own = own_it != slots.end() ? own_it->second : RingSlots{};
  for (int i = 0; i < 2; ++i) {
    rp.slot_k[i] = own.k[i];
    rp.slot_v[i] = own.v[i];
  }
  for (uint32_t step = 0; step < C; ++step) {
    const uint32_t slice = slice_at((k_pos + C - step) % C);
    std::vector<KvSpan> spans;
    for (uint32_t q = 0; q < P; ++q) {
      const uint32_t r = slice * P + q;
      KvSpan sp = req.SpanOf(geo, h, r);
      if (step > 0) {  // the copy in this CUBE's slot, at the PE of rank r's node
        sp.owner = req.PeOf(geo, h, ci, req.kv.PeOfRank(r));
        const RingSlots& at = slots.at(sp.owner);  // step > 0: C > 1, every PE has slots
        sp.k_addr = at.k[step % 2];
        sp.v_addr = at.v[step % 2];
      }
      if (req.kv.PeOfRank(r) == node) {
        rp.held_len.push_back(sp.len);
        if (step == 0) {
          rp.own_k_addr = sp.k_addr;
          rp.own_v_addr = sp.v_addr;
        }
      }
      spans.push_back(sp);
    }
    plan.steps.push_back(StartAtOwn(std::move(spans), pe));
  }
  const topology::Mesh& mesh = geo.index.pe_mesh();
  for (uint32_t child : tree[node].children) {
    rp.barrier_children.push_back(
        Peer::Ipcq(DirectionTo(mesh, geo.pes[node], geo.pes[child])));
  }
  if (tree[node].parent) {
    rp.barrier_parent =
        Peer::Ipcq(DirectionTo(mesh, geo.pes[node], geo.pes[*tree[node].parent]));
  }
  plan.ring = std::move(rp);
  return h * cfg.G() + slice_at(k_pos);
}

// The instance's query tiles (`mine`, in tile order): Q and O back to back in its HBM, Q
// written in data mode, where each tile's output lands.
absl::Status PlaceQueryTiles(const LaunchContext& ctx, const RequestKv& req,
                             const std::vector<uint32_t>& mine, uint32_t head,
                             host::HbmAllocator& allocator, Built& b) {
  const PrefillConfig& cfg = ctx.cfg;
  const uint32_t g = ctx.shape.g, per_tile = ctx.tokens_per_tile;
  const uint64_t Tq = req.t_q;
  uint64_t rows_total = 0;
  for (uint32_t t : mine) rows_total += std::min<uint64_t>(per_tile, Tq - uint64_t{t} * per_tile) * g;
  uint64_t q_base = 0, o_base = 0;
  if (rows_total > 0) {
    ASSIGN_OR_RETURN(q_base, allocator.Allocate(b.pe, rows_total * cfg.d * 2));
    ASSIGN_OR_RETURN(o_base, allocator.Allocate(b.pe, rows_total * cfg.d * 2));
  }
  std::vector<float> qvals;
  uint64_t row = 0;
  for (uint32_t t : mine) {
    const uint64_t t0 = uint64_t{t} * per_tile;
    const uint32_t tokens = static_cast<uint32_t>(std::min<uint64_t>(per_tile, Tq - t0));
    b.plan.tiles.push_back(QueryTile{req.s - Tq + t0, tokens, q_base + row * cfg.d * 2,
                                     o_base + row * cfg.d * 2});
    b.outputs.push_back(
        PrefillLaunch::Output{b.pe, o_base + row * cfg.d * 2, head, g, t0, tokens});
    if (ctx.data()) {
      const host::NpyArray& q = (*ctx.inputs)[req.user].q;
      for (uint32_t tt = 0; tt < tokens; ++tt) {
        for (uint32_t gi = 0; gi < g; ++gi) {
          const float* src = &q.data[((uint64_t{head} + gi) * Tq + t0 + tt) * cfg.d];
          qvals.insert(qvals.end(), src, src + cfg.d);
        }
      }
    }
    row += uint64_t{tokens} * g;
  }
  if (ctx.data() && rows_total > 0) {
    const pb::TensorRef ref =
        sim::MakeTensorRef(pb::HBM, b.pe, q_base, pb::BF16, {rows_total, cfg.d});
    RETURN_IF_ERROR(ctx.store->Write(ref, qvals));
  }
  return absl::OkStatus();
}

// The causal masks the instance's visible pairs need, one per distinct (offset, tokens, len)
// (ADR-0060 rev2 §5, causal skip: only the diagonal tiles are masked), placed in its HBM and
// written in data mode; counts the composites it will issue and the full grid's.
absl::Status PlaceMasks(const LaunchContext& ctx, host::HbmAllocator& allocator, Built& b,
                        PrefillLaunch& launch) {
  const PrefillConfig& cfg = ctx.cfg;
  const PrefillPlan& plan = b.plan;
  std::set<std::tuple<int64_t, uint32_t, uint32_t>> keys;
  for (uint32_t step = 0; step < plan.steps.size(); ++step) {
    for (const PrefillPair& pair :
         VisiblePairs(ctx.shape, plan, step, 0, static_cast<uint32_t>(plan.tiles.size()))) {
      launch.composites += 2;
      if (!pair.masked) continue;
      const KvSpan& sp = plan.steps[step][pair.span];
      const uint64_t kpos = sp.pos + pair.tile * cfg.tile;
      keys.insert({static_cast<int64_t>(kpos) - static_cast<int64_t>(plan.tiles[pair.q].pos),
                   plan.tiles[pair.q].tokens,
                   static_cast<uint32_t>(std::min<uint64_t>(cfg.tile, sp.pos + sp.len - kpos))});
    }
    for (const KvSpan& sp : plan.steps[step]) {
      launch.grid_composites += 2 * plan.tiles.size() * ((sp.len + cfg.tile - 1) / cfg.tile);
    }
  }
  const uint32_t g = ctx.shape.g;
  for (const auto& [offset, tokens, len] : keys) {
    ASSIGN_OR_RETURN(const uint64_t addr, allocator.Allocate(b.pe, uint64_t{tokens} * g * len * 2));
    b.plan.masks.push_back(MaskSlot{offset, tokens, len, addr});
    if (ctx.data()) RETURN_IF_ERROR(WritePrefillMask(ctx.store, b.pe, b.plan.masks.back(), g));
  }
  return absl::OkStatus();
}

// The ring's T_q chunks must agree around a ring (every PE of every CUBE runs as many ring
// passes): per request, as many as its busiest instance needs, each instance's tiles spread
// evenly over them.
void SpreadChunks(uint32_t per_request, std::vector<Built>& built, PrefillLaunch& launch) {
  for (uint32_t at = 0; at < built.size(); at += per_request) {
    size_t most = 0;
    for (uint32_t i = at; i < at + per_request; ++i) most = std::max(most, built[i].plan.tiles.size());
    const uint32_t cap = std::max<uint32_t>(1, built[at].plan.tiles_per_chunk);
    const uint32_t chunks = std::max<uint32_t>(1, static_cast<uint32_t>((most + cap - 1) / cap));
    for (uint32_t i = at; i < at + per_request; ++i) {
      PrefillPlan& p = built[i].plan;
      p.chunks = chunks;
      p.tiles_per_chunk =
          std::max<uint32_t>(1, static_cast<uint32_t>((p.tiles.size() + chunks - 1) / chunks));
    }
    launch.chunks = std::max(launch.chunks, chunks);
  }
}

}  // namespace

absl::StatusOr<PrefillLaunch> LaunchPrefill(const pb::Chip& chip, const PrefillConfig& cfg,
                                            KernelRuntime& runtime, MemoryStore* store,
                                            const std::vector<QkvInputs>& inputs) {
  RETURN_IF_ERROR(Validate(cfg, chip));
  const GeometrySpec spec = cfg.Geometry();
  ASSIGN_OR_RETURN(const AttentionGeometry geo, MakeAttentionGeometry(chip, spec));
  const bool data = store != nullptr && !inputs.empty();
  if (data && inputs.size() != cfg.users) {
    return Field("users", absl::StrCat(cfg.users, " requests but ", inputs.size(), " input sets"));
  }
  if (cfg.variant == PrefillVariant::kBaselineFanout) {
    return LaunchPrefillFanout(chip, cfg, geo, runtime, data ? store : nullptr, inputs);
  }
  const topology::GroupShape gs = geo.groups.shape();
  const LaunchContext ctx{cfg,
                          geo,
                          ShapeOf(cfg),
                          cfg.q_tile / cfg.RowsPerToken(),
                          SnakeOrder(gs.rows, gs.cols),
                          data ? store : nullptr,
                          &inputs};
  PrefillLaunch launch;
  ASSIGN_OR_RETURN(launch.cubes, AttentionCubes(chip, spec));
  // The ring's barrier tree over the CUBE's PEs.
  ASSIGN_OR_RETURN(const std::vector<ReduceNode> tree, Level2Tree(geo, ReduceShape::kTree));
  // TCM budget per instance: instances per PE = users x KV heads per PE.
  // (Short context: a CUBE holds kv_per_cube KV heads, or all of them when there are fewer.)
  const uint32_t heads_per_pe =
      cfg.variant == PrefillVariant::kShortContext ? std::min(cfg.kv_per_cube, cfg.h_kv) : 1;
  const uint64_t per_pe = uint64_t{cfg.users} * heads_per_pe;
  const TcmShare share = TcmShareOf(chip, per_pe);

  host::HbmAllocator allocator(chip);
  std::vector<Built> built;
  const uint32_t C = cfg.C(), P = cfg.P();
  for (uint32_t u = 0; u < cfg.users; ++u) {
    ASSIGN_OR_RETURN(topology::KvPlacement kv, RequestPlacement(cfg, u));
    ASSIGN_OR_RETURN(const uint32_t cap, TilesPerChunkCap(ctx, kv.block(), share, per_pe));
    ASSIGN_OR_RETURN(const RequestKv req, PlaceRequestKv(ctx, u, std::move(kv), allocator));
    // Query tiles of the request: tokens [t0, t0 + tokens), g rows each, split over the P PEs.
    const uint32_t n_tiles =
        static_cast<uint32_t>((req.t_q + ctx.tokens_per_tile - 1) / ctx.tokens_per_tile);
    const std::vector<std::vector<uint32_t>> split = SplitQueryTiles(n_tiles, P, cfg.query_split);
    ASSIGN_OR_RETURN(const RingSlotsByPe slots, AllocateRingSlots(ctx, req, allocator));
    // Instances: flash / short: (CUBE of head h, node); ring: (CUBE ci, node).
    for (uint32_t h = 0; h < cfg.h_kv; ++h) {
      for (uint32_t ci = 0; ci < C; ++ci) {
        for (uint32_t node = 0; node < P; ++node) {
          Built b;
          b.pe = req.PeOf(geo, h, ci, node);
          b.stream = h;
          uint32_t head = h * cfg.G();  // query head of row g = 0
          if (cfg.Ring()) {
            head = PlanRingInstance(ctx, req, slots, tree, h, ci, node, b.plan);
          } else {
            std::vector<KvSpan> spans;
            for (uint32_t r = 0; r < req.kv.ranks(); ++r) spans.push_back(req.SpanOf(geo, h, r));
            b.plan.steps.push_back(StartAtOwn(std::move(spans), b.pe));
          }
          RETURN_IF_ERROR(PlaceQueryTiles(ctx, req, split[node], head, allocator, b));
          b.plan.tiles_per_chunk = cap;  // the cap; SpreadChunks spreads the tiles
          RETURN_IF_ERROR(PlaceMasks(ctx, allocator, b, launch));
          built.push_back(std::move(b));
        }
      }
    }
  }
  const uint32_t per_request = cfg.h_kv * C * P;
  SpreadChunks(per_request, built, launch);
  launch.outputs.resize(cfg.users);
  launch.tiles_per_chunk = UINT32_MAX;
  for (uint32_t i = 0; i < built.size(); ++i) {
    const uint32_t u = i / per_request;
    for (const PrefillLaunch::Output& o : built[i].outputs) launch.outputs[u].push_back(o);
    launch.instance_pes.push_back(built[i].pe);
    if (!built[i].plan.tiles.empty()) {
      launch.tiles_per_chunk = std::min(launch.tiles_per_chunk, built[i].plan.tiles_per_chunk);
    }
    RETURN_IF_ERROR(runtime.AddKernel(
        built[i].pe, u, built[i].stream,
        [shape = ctx.shape, plan = built[i].plan](Tl& tl) { return PrefillRank(tl, shape, plan); }));
  }
  if (launch.tiles_per_chunk == UINT32_MAX) launch.tiles_per_chunk = 0;
  return launch;
}

absl::StatusOr<std::vector<float>> GatherPrefillOutput(const MemoryStore& store,
                                                       const PrefillConfig& cfg,
                                                       const PrefillLaunch& launch, uint32_t user) {
  const uint64_t Tq = cfg.QueriesOf(user);
  std::vector<float> o(uint64_t{cfg.h_q} * Tq * cfg.d);
  for (const PrefillLaunch::Output& out : launch.outputs.at(user)) {
    const uint64_t rows = uint64_t{out.tokens} * out.g;
    const pb::TensorRef ref = sim::MakeTensorRef(pb::HBM, out.pe, out.addr, pb::BF16, {rows, cfg.d});
    absl::StatusOr<std::vector<float>> values = store.Read(ref);
    RETURN_IF_ERROR(values.status());
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t head = out.head + r % out.g, t = out.t0 + r / out.g;
      std::copy_n(values->begin() + r * cfg.d, cfg.d, o.begin() + (head * Tq + t) * cfg.d);
    }
  }
  return o;
}

namespace {
DecodeConfig RequestConfig(const PrefillConfig& cfg, uint32_t user) {
  DecodeConfig d;
  d.h_q = cfg.h_q;
  d.h_kv = cfg.h_kv;
  d.d = cfg.d;
  d.s = cfg.ContextOf(user);
  d.t_q = static_cast<uint32_t>(cfg.QueriesOf(user));
  return d;
}
}  // namespace

QkvInputs RandomPrefillInputs(const PrefillConfig& cfg, uint32_t user, std::mt19937_64& rng) {
  return RandomDecodeInputs(RequestConfig(cfg, user), 0, rng);
}

std::vector<float> ReferencePrefill(const PrefillConfig& cfg, uint32_t user, const QkvInputs& in) {
  return ReferenceDecode(RequestConfig(cfg, user), in);
}

}  // namespace ahbm::kernels
