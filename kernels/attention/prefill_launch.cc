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

// The decode geometry of the prefill's CUBEs and PEs (MakeDecodeGeometry validates it).
DecodeConfig GeometryConfig(const PrefillConfig& cfg) {
  DecodeConfig d;
  d.h_q = cfg.h_q;
  d.h_kv = cfg.h_kv;
  d.d = cfg.d;
  d.t_q = 1;  // the query count is checked here, per request
  d.s = cfg.s;
  d.max_context = cfg.max_context;
  d.c = cfg.C();
  d.p = cfg.P();
  d.group_rows = cfg.group_rows;
  d.group_cols = cfg.group_cols;
  d.tile = cfg.tile;
  d.sip = cfg.sip;
  d.users = cfg.users;
  d.start_cube = cfg.start_cube;
  d.start_pe = cfg.start_pe;
  d.rotate_by_request = cfg.rotate_by_request;
  d.kv_per_cube = cfg.variant == PrefillVariant::kShortContext ? cfg.kv_per_cube : 0;
  d.request_lengths = cfg.request_lengths;
  return d;
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

absl::StatusOr<std::vector<uint32_t>> PrefillCubes(const pb::Chip& chip, const PrefillConfig& cfg) {
  RETURN_IF_ERROR(Validate(cfg, chip));
  if (cfg.variant == PrefillVariant::kBaselineFanout) {
    return BaselineCubes(chip, GeometryConfig(cfg), BaselineKind::kFanout);
  }
  return DecodeCubes(chip, GeometryConfig(cfg));
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> PrefillCubeSets(const pb::Chip& chip,
                                                                   const PrefillConfig& cfg) {
  RETURN_IF_ERROR(Validate(cfg, chip));
  if (cfg.variant == PrefillVariant::kBaselineFanout) {
    return BaselineCubeSets(chip, GeometryConfig(cfg), BaselineKind::kFanout);
  }
  return DecodeCubeSets(chip, GeometryConfig(cfg));
}

absl::StatusOr<PrefillLaunch> LaunchPrefill(const pb::Chip& chip, const PrefillConfig& cfg,
                                            KernelRuntime& runtime, MemoryStore* store,
                                            const std::vector<DecodeInputs>& inputs) {
  RETURN_IF_ERROR(Validate(cfg, chip));
  const DecodeConfig gcfg = GeometryConfig(cfg);
  absl::StatusOr<DecodeGeometry> geo_or = MakeDecodeGeometry(chip, gcfg);
  RETURN_IF_ERROR(geo_or.status());
  const DecodeGeometry& geo = *geo_or;
  const topology::ChipIndex& index = geo.index;
  const bool data = store != nullptr && !inputs.empty();
  if (data && inputs.size() != cfg.users) {
    return Field("users", absl::StrCat(cfg.users, " requests but ", inputs.size(), " input sets"));
  }
  if (cfg.variant == PrefillVariant::kBaselineFanout) {
    return LaunchPrefillFanout(chip, cfg, geo, gcfg, runtime, data ? store : nullptr, inputs);
  }
  const bool ring = cfg.Ring();
  const uint32_t G = cfg.G(), C = cfg.C(), P = cfg.P();
  const uint32_t g = cfg.RowsPerToken();
  const uint32_t tokens_per_tile = cfg.q_tile / g;

  PrefillShape shape;
  shape.g = g;
  shape.d = cfg.d;
  shape.tile = cfg.tile;
  shape.k_layout = cfg.k_layout;
  shape.max_tokens = tokens_per_tile;
  shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.d)));
  shape.lookahead = cfg.Lookahead();
  shape.blocking_dot = cfg.variant == PrefillVariant::kBaselineDot;
  shape.scratch_scope = cfg.scratch_scope;

  PrefillLaunch launch;
  absl::StatusOr<std::vector<uint32_t>> cubes = DecodeCubes(chip, gcfg);
  RETURN_IF_ERROR(cubes.status());
  launch.cubes = *cubes;

  // The ring's barrier tree over the CUBE's PEs and the snake cycle over the group's CUBEs.
  absl::StatusOr<std::vector<ReduceNode>> tree = Level2Tree(geo, ReduceShape::kTree);
  RETURN_IF_ERROR(tree.status());
  const topology::GroupShape gs = geo.groups.shape();
  const std::vector<uint32_t> cycle = SnakeOrder(gs.rows, gs.cols);  // cube_in_group order

  // TCM budget per instance: instances per PE = users x KV heads per PE.
  // (Short context: a CUBE holds kv_per_cube KV heads, or all of them when there are fewer.)
  const uint32_t heads_per_pe =
      cfg.variant == PrefillVariant::kShortContext ? std::min(cfg.kv_per_cube, cfg.h_kv) : 1;
  const uint64_t per_pe = uint64_t{cfg.users} * heads_per_pe;
  const TcmShare share = TcmShareOf(chip, per_pe);
  const uint64_t persistent_each = share.persistent, scratch_each = share.scratch;

  host::HbmAllocator allocator(chip);
  std::vector<Built> built;
  launch.tiles_per_chunk = UINT32_MAX;
  for (uint32_t u = 0; u < cfg.users; ++u) {
    const uint32_t rot = cfg.rotate_by_request ? u : 0;
    const uint64_t S = cfg.ContextOf(u), Tq = cfg.QueriesOf(u);
    absl::StatusOr<topology::KvPlacement> kv = topology::KvPlacement::Create(
        C, P, cfg.MaxContextOf(u), cfg.start_cube + rot, cfg.start_pe + rot);
    RETURN_IF_ERROR(kv.status());
    const uint64_t B = kv->block();
    const TcmNeed need = NeedOf(cfg, g, tokens_per_tile, B);
    if (need.fixed + 2 * need.state > persistent_each) {
      return Field(cfg.users > 1      ? "users"
                   : cfg.Lookahead() > 1 ? "lookahead"
                   : ring && cfg.ring_depth > 2 ? "ring_depth"
                   : ring             ? "s, tile, q_tile"
                                      : "tile, q_tile",
                   absl::StrCat("a prefill instance needs ", need.fixed + 2 * need.state,
                                " B of the TCM persistent arena (Q, Sj, mask",
                                ring ? ", ring sub-block" : "", " buffers and two running states); ",
                                per_pe, " instance(s) per PE leave each ", persistent_each, " B"));
    }
    if (need.scratch > scratch_each) {
      return Field(cfg.users > 1 ? "users" : "tile, q_tile",
                   absl::StrCat("a prefill instance needs ", need.scratch, " B of TCM scratch; ",
                                per_pe, " instance(s) per PE leave each ", scratch_each, " B"));
    }
    uint32_t per_chunk = static_cast<uint32_t>(
        std::min<uint64_t>(UINT32_MAX, (persistent_each - need.fixed) / need.state));
    if (cfg.max_tiles_per_chunk != 0) per_chunk = std::min(per_chunk, cfg.max_tiles_per_chunk);

    std::vector<host::KvHeadGroup> heads(cfg.h_kv);
    const std::vector<std::vector<uint32_t>> head_cubes = geo.HeadCubes(gcfg);
    for (uint32_t h = 0; h < cfg.h_kv; ++h) heads[h] = host::KvHeadGroup{head_cubes[h], geo.pes};
    const std::vector<uint64_t> kv_shape = {cfg.h_kv, S, cfg.d};
    absl::StatusOr<host::PlacedTensor> k = host::PlaceKvCache(
        allocator, absl::StrCat("k[", u, "]"), kv_shape, pb::BF16, *kv, heads,
        HostKvLayout(cfg.k_layout, cfg.tile, B));
    RETURN_IF_ERROR(k.status());
    if (cfg.kv_bank_interleaved) {
      RETURN_IF_ERROR(host::PadForBankInterleave(allocator, *k));
    }
    absl::StatusOr<host::PlacedTensor> v = host::PlaceKvCache(
        allocator, absl::StrCat("v[", u, "]"), kv_shape, pb::BF16, *kv, heads, host::KvLayout{});
    RETURN_IF_ERROR(v.status());
    if (data) {
      RETURN_IF_ERROR(host::Scatter(*store, *k, inputs[u].k));
      RETURN_IF_ERROR(host::Scatter(*store, *v, inputs[u].v));
    }
    const uint32_t ranks = kv->ranks();
    const auto pe_of = [&](uint32_t h, uint32_t ci, uint32_t node) {
      return heads[h].cubes[ci] * index.pes_per_cube() + geo.pes[node];
    };
    const auto span_of = [&](uint32_t h, uint32_t r) {
      const uint32_t owner = pe_of(h, kv->CubeInGroupOfRank(r), kv->PeOfRank(r));
      return KvSpan{owner, k->shards()[h * ranks + r].ref.addr(), B,
                    v->shards()[h * ranks + r].ref.addr(), kv->GlobalPosition(r, 0),
                    kv->MyLen(r, S)};
    };
    // Query tiles of the request: tokens [t0, t0 + tokens), g rows each.
    const uint32_t n_tiles = static_cast<uint32_t>((Tq + tokens_per_tile - 1) / tokens_per_tile);
    const std::vector<std::vector<uint32_t>> split = SplitQueryTiles(n_tiles, P, cfg.query_split);

    // Ring slots: two sub-blocks per PE of every group CUBE (allocated first, so the spans
    // of step s >= 1 can name them).
    std::map<uint32_t, RingSlots> slots;  // by global PE
    if (ring && C > 1) {
      const uint64_t kbytes = KBlockBytes(cfg.k_layout, cfg.d, cfg.tile, B);
      for (uint32_t h = 0; h < cfg.h_kv; ++h) {
        for (uint32_t ci = 0; ci < C; ++ci) {
          for (uint32_t node = 0; node < P; ++node) {
            auto& sl = slots[pe_of(h, ci, node)];
            for (int i = 0; i < 2; ++i) {
              absl::StatusOr<uint64_t> ka = allocator.Allocate(pe_of(h, ci, node), kbytes);
              RETURN_IF_ERROR(ka.status());
              absl::StatusOr<uint64_t> va = allocator.Allocate(pe_of(h, ci, node), B * cfg.d * 2);
              RETURN_IF_ERROR(va.status());
              sl.k[i] = *ka;
              sl.v[i] = *va;
            }
          }
        }
      }
    }

    for (uint32_t h = 0; h < cfg.h_kv; ++h) {
      // Instances: flash / short: (CUBE of head h, node); ring: (CUBE ci, node).
      for (uint32_t ci = 0; ci < C; ++ci) {
        for (uint32_t node = 0; node < P; ++node) {
          Built b;
          b.pe = pe_of(h, ci, node);
          b.stream = h;
          PrefillPlan& plan = b.plan;
          uint32_t head = h * G;  // query head of row g = 0
          if (ring) {
            const uint32_t k_pos = static_cast<uint32_t>(
                std::find(cycle.begin(), cycle.end(), ci) - cycle.begin());
            const auto slice_at = [&](uint32_t pos) {  // slice held at cycle position pos, step 0
              return (cycle[pos] + C - kv->start_cube()) % C;  // kv->CubeLocal
            };
            head = h * G + slice_at(k_pos);
            RingPlan rp;
            rp.next = Peer::Pe(pe_of(h, cycle[(k_pos + 1) % C], node));
            rp.prev = Peer::Pe(pe_of(h, cycle[(k_pos + C - 1) % C], node));
            rp.block = B;
            rp.message_bytes = cfg.ring_message_bytes;
            rp.depth = cfg.ring_depth;
            rp.send_first = cfg.ring_send_first;
            const auto& sl = slots[b.pe];
            for (int i = 0; i < 2; ++i) {
              rp.slot_k[i] = sl.k[i];
              rp.slot_v[i] = sl.v[i];
            }
            for (uint32_t step = 0; step < C; ++step) {
              const uint32_t slice = slice_at((k_pos + C - step) % C);
              std::vector<KvSpan> spans;
              for (uint32_t q = 0; q < P; ++q) {
                const uint32_t r = slice * P + q;
                KvSpan sp = span_of(h, r);
                if (step > 0) {  // the copy in this CUBE's slot, at the PE of rank r's node
                  sp.owner = pe_of(h, ci, kv->PeOfRank(r));
                  const auto& ol = slots[sp.owner];
                  sp.k_addr = ol.k[step % 2];
                  sp.v_addr = ol.v[step % 2];
                }
                if (kv->PeOfRank(r) == node) {
                  rp.held_len.push_back(sp.len);
                  if (step == 0) {
                    rp.own_k_addr = sp.k_addr;
                    rp.own_v_addr = sp.v_addr;
                  }
                }
                spans.push_back(sp);
              }
              plan.steps.push_back(StartAtOwn(std::move(spans), b.pe));
            }
            for (uint32_t child : (*tree)[node].children) {
              rp.barrier_children.push_back(
                  Peer::Ipcq(DirectionTo(index.pe_mesh(), geo.pes[node], geo.pes[child])));
            }
            if ((*tree)[node].parent) {
              rp.barrier_parent = Peer::Ipcq(
                  DirectionTo(index.pe_mesh(), geo.pes[node], geo.pes[*(*tree)[node].parent]));
            }
            plan.ring = std::move(rp);
          } else {
            std::vector<KvSpan> spans;
            for (uint32_t r = 0; r < ranks; ++r) spans.push_back(span_of(h, r));
            plan.steps.push_back(StartAtOwn(std::move(spans), b.pe));
          }
          // This instance's query tiles: Q and O back to back in its HBM.
          const std::vector<uint32_t>& mine = split[node];
          uint64_t rows_total = 0;
          for (uint32_t t : mine) {
            rows_total += std::min<uint64_t>(tokens_per_tile, Tq - uint64_t{t} * tokens_per_tile) * g;
          }
          uint64_t q_base = 0, o_base = 0;
          if (rows_total > 0) {
            absl::StatusOr<uint64_t> qa = allocator.Allocate(b.pe, rows_total * cfg.d * 2);
            RETURN_IF_ERROR(qa.status());
            absl::StatusOr<uint64_t> oa = allocator.Allocate(b.pe, rows_total * cfg.d * 2);
            RETURN_IF_ERROR(oa.status());
            q_base = *qa;
            o_base = *oa;
          }
          std::vector<float> qvals;
          uint64_t row = 0;
          for (uint32_t t : mine) {
            const uint64_t t0 = uint64_t{t} * tokens_per_tile;
            const uint32_t tokens = static_cast<uint32_t>(std::min<uint64_t>(tokens_per_tile, Tq - t0));
            plan.tiles.push_back(QueryTile{S - Tq + t0, tokens, q_base + row * cfg.d * 2,
                                           o_base + row * cfg.d * 2});
            b.outputs.push_back(PrefillLaunch::Output{b.pe, o_base + row * cfg.d * 2, head, g, t0, tokens});
            if (data) {
              for (uint32_t tt = 0; tt < tokens; ++tt) {
                for (uint32_t gi = 0; gi < g; ++gi) {
                  const float* src = &inputs[u].q.data[((uint64_t{head} + gi) * Tq + t0 + tt) * cfg.d];
                  qvals.insert(qvals.end(), src, src + cfg.d);
                }
              }
            }
            row += uint64_t{tokens} * g;
          }
          if (data && rows_total > 0) {
            const pb::TensorRef ref = sim::MakeTensorRef(pb::HBM, b.pe, q_base, pb::BF16, {rows_total, cfg.d});
            RETURN_IF_ERROR(store->Write(ref, qvals));
          }
          plan.tiles_per_chunk = per_chunk;  // the cap; spread over the chunks below
          // Causal masks: one per distinct (offset, tokens, len) among the masked pairs.
          std::set<std::tuple<int64_t, uint32_t, uint32_t>> keys;
          for (uint32_t step = 0; step < plan.steps.size(); ++step) {
            for (const PrefillPair& pair :
                 VisiblePairs(shape, plan, step, 0, static_cast<uint32_t>(plan.tiles.size()))) {
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
          for (const auto& [offset, tokens, len] : keys) {
            absl::StatusOr<uint64_t> ma = allocator.Allocate(b.pe, uint64_t{tokens} * g * len * 2);
            RETURN_IF_ERROR(ma.status());
            plan.masks.push_back(MaskSlot{offset, tokens, len, *ma});
            if (data) RETURN_IF_ERROR(WritePrefillMask(store, b.pe, plan.masks.back(), g));
          }
          built.push_back(std::move(b));
        }
      }
    }
  }
  // The ring's T_q chunks must agree around a ring (every PE of every CUBE runs as many ring
  // passes): as many as the busiest instance of the request needs, each instance's tiles
  // spread evenly over them.
  const uint32_t per_request = cfg.h_kv * C * P;
  for (uint32_t at = 0; at < built.size(); at += per_request) {
    size_t most = 0;
    for (uint32_t i = at; i < at + per_request; ++i) most = std::max(most, built[i].plan.tiles.size());
    const uint32_t cap = std::max<uint32_t>(1, built[at].plan.tiles_per_chunk);
    const uint32_t chunks = std::max<uint32_t>(1, static_cast<uint32_t>((most + cap - 1) / cap));
    for (uint32_t i = at; i < at + per_request; ++i) {
      PrefillPlan& p = built[i].plan;
      p.chunks = chunks;
      p.tiles_per_chunk = std::max<uint32_t>(1, static_cast<uint32_t>((p.tiles.size() + chunks - 1) / chunks));
    }
    launch.chunks = std::max(launch.chunks, chunks);
  }
  launch.outputs.resize(cfg.users);
  for (uint32_t i = 0; i < built.size(); ++i) {
    const uint32_t u = i / (cfg.h_kv * C * P);
    for (const PrefillLaunch::Output& o : built[i].outputs) launch.outputs[u].push_back(o);
    launch.instance_pes.push_back(built[i].pe);
    if (!built[i].plan.tiles.empty()) {
      launch.tiles_per_chunk = std::min(launch.tiles_per_chunk, built[i].plan.tiles_per_chunk);
    }
    RETURN_IF_ERROR(runtime.AddKernel(
        built[i].pe, u, built[i].stream,
        [shape, plan = built[i].plan](Tl& tl) { return PrefillRank(tl, shape, plan); }));
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

DecodeInputs RandomPrefillInputs(const PrefillConfig& cfg, uint32_t user, std::mt19937_64& rng) {
  return RandomDecodeInputs(RequestConfig(cfg, user), 0, rng);
}

std::vector<float> ReferencePrefill(const PrefillConfig& cfg, uint32_t user, const DecodeInputs& in) {
  return ReferenceDecode(RequestConfig(cfg, user), in);
}

}  // namespace ahbm::kernels
