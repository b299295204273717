#include "kernels/attention/prefill_baseline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/tensor_ref.h"
#include "base/status_macros.h"
#include "kernels/attention/baseline.h"
#include "kernels/attention/lse_merge.h"
#include "kernels/attention/reduce_tree.h"
#include "kernels/host/placement.h"
#include "topology/kv_placement.h"

namespace ahbm::kernels {
namespace {

using Shape = std::vector<uint64_t>;

bool HasTile(const FanoutBlock& b, uint64_t j, uint32_t tile) { return j * tile < b.len; }
uint64_t TileLen(const FanoutBlock& b, uint64_t j, uint32_t tile) {
  return std::min<uint64_t>(tile, b.len - j * tile);
}

// A K / V tile in TCM (persistent): dense prefixes of [d·tile, 1] bf16 buffers, K as (d, len),
// V as [len, d]; and the receives posted into it.
struct KvBuf {
  Tensor k, v;
  std::vector<Tensor> pending;
};

Tensor KOf(const KvBuf& b, uint32_t d, uint64_t len) {
  const Shape shape = {d, len};
  return b.k.Rows(0, d * len).View(shape);
}
Tensor VOf(const KvBuf& b, uint32_t d, uint64_t len) {
  const Shape shape = {len, d};
  return b.v.Rows(0, len * d).View(shape);
}

struct Rank {
  const FanoutPrefillPlan& p;
  KvBuf own, from_prev[2], from_next[2];  // [k % 2]: the buffer of round k
  Tensor mask;                            // [q_tile · tile, 1] bf16
  Tensor q;                               // [tiles_per_chunk · q_tile, d] bf16: the chunk's Q
  std::vector<Running> slots;             // running states of q_tile rows
  std::vector<Running> states;            // this chunk's: views of the slots' first rows
  uint32_t first = 0;                     // the chunk's first query tile
};

// Posts the receives of a `len`-key K / V tile into `buf` (before any send they might wait on).
Task<void> Post(Tl& tl, const FanoutPrefillPlan& p, KvBuf& buf, const Peer& from, uint64_t len) {
  buf.pending.clear();
  for (const Tensor& c : MessageChunks(KOf(buf, p.d, len), p.d, p.message_bytes)) {
    buf.pending.push_back(co_await tl.RecvAsyncInto(from, c));
  }
  for (const Tensor& c : MessageChunks(VOf(buf, p.d, len), len, p.message_bytes)) {
    buf.pending.push_back(co_await tl.RecvAsyncInto(from, c));
  }
}

Task<void> SendTile(Tl& tl, const FanoutPrefillPlan& p, const Tensor& k, const Tensor& v,
                    const Peer& to) {
  for (const Tensor& c : MessageChunks(k, p.d, p.message_bytes)) co_await tl.Send(to, c);
  for (const Tensor& c : MessageChunks(v, v.dim(0), p.message_bytes)) co_await tl.Send(to, c);
}

// K / V tile (kj, vj) of keys from `kpos` folded into every query tile of the chunk: no causal
// skip; a pair with a future key adds its mask.
Task<void> FoldAll(Tl& tl, Rank& rk, const Tensor& kj, const Tensor& vj, uint64_t kpos) {
  const FanoutPrefillPlan& p = rk.p;
  const uint64_t len = kj.dim(1);
  for (uint32_t i = 0; i < rk.states.size(); ++i) {
    const QueryTile& qt = p.tiles[rk.first + i];
    ScratchScope scope(&tl);
    const Tensor q = rk.q.Rows(uint64_t{i} * p.q_tile, qt.tokens);
    const CausalPair pair = ClassifyPair(qt.pos, qt.tokens, kpos, len);
    if (pair == CausalPair::kFull) {
      co_await FoldTileBlocking(tl, rk.states[i], q, kj, vj, p.scale);
      continue;
    }
    const int64_t offset = pair == CausalPair::kSkip
                               ? int64_t{qt.tokens}
                               : static_cast<int64_t>(kpos) - static_cast<int64_t>(qt.pos);
    const MaskSlot& slot = FindMask(tl, p.masks, offset, qt.tokens, static_cast<uint32_t>(len));
    const Shape mshape = {qt.tokens, len};
    const Tensor mask = co_await tl.LoadInto(tl.Ref(slot.addr, mshape),
                                             rk.mask.Rows(0, qt.tokens * len).View(mshape));
    co_await FoldTileBlocking(tl, rk.states[i], q, kj, vj, p.scale, &mask);
  }
}

// Round k's tile j from one side: wait for it, forward it (when the next rank on that side
// still needs it), fold it.
Task<void> TakeRound(Tl& tl, Rank& rk, KvBuf& buf, const FanoutBlock& block, uint64_t j,
                     const Peer* forward_to) {
  const FanoutPrefillPlan& p = rk.p;
  for (const Tensor& t : buf.pending) co_await tl.Wait(t);
  const uint64_t len = TileLen(block, j, p.tile);
  const Tensor k = KOf(buf, p.d, len), v = VOf(buf, p.d, len);
  if (forward_to != nullptr) co_await SendTile(tl, p, k, v, *forward_to);
  co_await FoldAll(tl, rk, k, v, block.pos + j * p.tile);
}

}  // namespace

Task<void> FanoutPrefillRank(Tl& tl, FanoutPrefillPlan plan) {
  const FanoutPrefillPlan& p = plan;
  const uint32_t a = static_cast<uint32_t>(p.from_prev.size());
  const uint32_t b = static_cast<uint32_t>(p.from_next.size());
  const uint32_t n = static_cast<uint32_t>(p.tiles.size());
  const uint32_t per = std::max<uint32_t>(1, p.tiles_per_chunk);
  Rank rk{p, {}, {}, {}, {}, {}, {}, {}, {}};
  const Shape kv = {uint64_t{p.d} * p.tile, 1}, mshape = {uint64_t{p.q_tile} * p.tile, 1};
  const auto alloc = [&](KvBuf& buf) {
    buf.k = tl.Alloc(kv, pb::BF16, Arena::kPersistent);
    buf.v = tl.Alloc(kv, pb::BF16, Arena::kPersistent);
  };
  alloc(rk.own);
  for (int i = 0; i < 2; ++i) {
    if (a > 0) alloc(rk.from_prev[i]);
    if (b > 0) alloc(rk.from_next[i]);
  }
  if (n > 0) {
    const Shape qshape = {uint64_t{per} * p.q_tile, p.d};
    const Shape col = {p.q_tile, 1}, full = {p.q_tile, p.d};
    rk.mask = tl.Alloc(mshape, pb::BF16, Arena::kPersistent);
    rk.q = tl.Alloc(qshape, pb::BF16, Arena::kPersistent);
    rk.slots.resize(std::min(per, n));
    for (Running& s : rk.slots) {
      s.m[0] = tl.Alloc(col, pb::FP32, Arena::kPersistent);
      s.m[1] = tl.Alloc(col, pb::FP32, Arena::kPersistent);
      s.l = tl.Alloc(col, pb::FP32, Arena::kPersistent);
      s.o = tl.Alloc(full, pb::FP32, Arena::kPersistent);
    }
  }
  uint64_t longest = p.own.len;  // KV tile indices: those of the longest block
  for (const FanoutBlock& blk : p.from_prev) longest = std::max(longest, blk.len);
  for (const FanoutBlock& blk : p.from_next) longest = std::max(longest, blk.len);
  const uint64_t kv_tiles = (longest + p.tile - 1) / p.tile;
  for (uint32_t c = 0; c < std::max<uint32_t>(1, p.chunks); ++c) {
    rk.first = std::min(n, c * per);
    const uint32_t count = std::min(n, rk.first + per) - rk.first;
    rk.states.clear();
    uint64_t rows = 0;
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t tokens = p.tiles[rk.first + i].tokens;
      const Running& s = rk.slots[i];
      Running st;
      st.m[0] = s.m[0].Rows(0, tokens);
      st.m[1] = s.m[1].Rows(0, tokens);
      st.l = s.l.Rows(0, tokens);
      st.o = s.o.Rows(0, tokens);
      co_await tl.FillInto(st.m[0], kEmptyRowMax);
      co_await tl.FillInto(st.l, 0.0f);
      co_await tl.FillInto(st.o, 0.0f);
      rk.states.push_back(st);
      rows += tokens;
    }
    if (count > 0) {
      const Shape qshape = {rows, p.d};
      const Tensor q = co_await tl.LoadInto(tl.Ref(p.tiles[rk.first].q_addr, qshape), rk.q.Rows(0, rows));
      co_await tl.Wait(q);  // the folds read rk.q's rows, which do not carry the load
    }
    for (uint64_t j = 0; j < kv_tiles; ++j) {
      // Round 1's receives are posted before this tile's own sends.
      if (a > 0 && HasTile(p.from_prev[0], j, p.tile)) {
        co_await Post(tl, p, rk.from_prev[1], p.prev, TileLen(p.from_prev[0], j, p.tile));
      }
      if (b > 0 && HasTile(p.from_next[0], j, p.tile)) {
        co_await Post(tl, p, rk.from_next[1], p.next, TileLen(p.from_next[0], j, p.tile));
      }
      if (HasTile(p.own, j, p.tile)) {
        const uint64_t len = TileLen(p.own, j, p.tile);
        const Shape kshape = {p.d, p.tile}, vshape = {len, p.d};
        const Tensor k = co_await tl.LoadInto(
            tl.Ref(p.own_k_addr + j * p.d * p.tile * 2, kshape).Cols(0, len), KOf(rk.own, p.d, len));
        const Tensor v = co_await tl.LoadInto(tl.Ref(p.own_v_addr + j * p.tile * p.d * 2, vshape),
                                              VOf(rk.own, p.d, len));
        co_await tl.Wait(k);
        co_await tl.Wait(v);
        if (a > 0) co_await SendTile(tl, p, k, v, p.next);
        if (b > 0) co_await SendTile(tl, p, k, v, p.prev);
        co_await FoldAll(tl, rk, k, v, p.own.pos + j * p.tile);
      }
      for (uint32_t k = 1; k <= a; ++k) {
        // Round k + 1's receives before round k's forwards.
        if (k < a && HasTile(p.from_prev[k], j, p.tile)) {
          co_await Post(tl, p, rk.from_prev[(k + 1) % 2], p.prev, TileLen(p.from_prev[k], j, p.tile));
        }
        if (k < b && HasTile(p.from_next[k], j, p.tile)) {
          co_await Post(tl, p, rk.from_next[(k + 1) % 2], p.next, TileLen(p.from_next[k], j, p.tile));
        }
        if (HasTile(p.from_prev[k - 1], j, p.tile)) {
          co_await TakeRound(tl, rk, rk.from_prev[k % 2], p.from_prev[k - 1], j,
                             k < a ? &p.next : nullptr);
        }
        if (k <= b && HasTile(p.from_next[k - 1], j, p.tile)) {
          co_await TakeRound(tl, rk, rk.from_next[k % 2], p.from_next[k - 1], j,
                             k < b ? &p.prev : nullptr);
        }
      }
    }
    for (uint32_t i = 0; i < count; ++i) {
      ScratchScope scope(&tl);
      const QueryTile& qt = p.tiles[rk.first + i];
      co_await NormaliseAndStore(tl, rk.states[i], qt.o_addr, qt.tokens, p.d);
    }
  }
}

namespace {

absl::Status Field(const std::string& field, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

// The query tiles a fan-out instance may hold at once, or the refusal when not even one fits
// its TCM share (one instance per request on every PE of the head's CUBE). FanoutPrefillRank's
// allocations — persistent: own, 2 + 2 received K / V tiles (a: from the previous PEs, b: from
// the next), the mask, then per query tile of a chunk Q and a running state; scratch: a fold's
// temporaries (FoldTileBlocking: Sj, centred, P, P·V, three columns) or the stored O.
absl::StatusOr<uint32_t> FanoutTileCap(const pb::Chip& chip, const PrefillConfig& cfg, uint32_t a,
                                       uint32_t b) {
  const TcmShare share = TcmShareOf(chip, cfg.users);
  const uint64_t q = cfg.q_tile, t = cfg.tile, d = cfg.d;
  const uint64_t kv_buf = Align64(d * t * 2);
  const uint64_t fixed = kv_buf * 2 * (1 + (a > 0 ? 2 : 0) + (b > 0 ? 2 : 0)) + Align64(q * t * 2) + 64;
  const uint64_t per_tile = q * d * 2 + 3 * Align64(q * 4) + Align64(q * d * 4);
  const uint64_t scratch = std::max(2 * Align64(q * t * 4) + Align64(q * t * 2) +
                                        3 * Align64(q * 4) + Align64(q * d * 4),
                                    Align64(q * d * 2));
  const std::string tcm_field = cfg.users > 1 ? "users" : "q_tile";
  if (fixed + per_tile > share.persistent) {
    return Field(tcm_field, absl::StrCat("a baseline_fanout instance needs ", fixed + per_tile,
                                         " B of the TCM persistent arena (K / V tile buffers, "
                                         "mask, one query tile); ", cfg.users,
                                         " instance(s) per PE leave each ", share.persistent, " B"));
  }
  if (scratch > share.scratch) {
    return Field(tcm_field, absl::StrCat("a baseline_fanout instance needs ", scratch,
                                         " B of TCM scratch; ", cfg.users,
                                         " instance(s) per PE leave each ", share.scratch, " B"));
  }
  return static_cast<uint32_t>(std::min<uint64_t>(UINT32_MAX, (share.persistent - fixed) / per_tile));
}

// Request u's K and V once per query head: copy gi of every KV head h on query head h·G + gi's
// CUBE (written in data mode).
struct FanoutKv {
  std::vector<host::PlacedTensor> k, v;  // [gi]
};

absl::StatusOr<FanoutKv> PlaceFanoutKv(const PrefillConfig& cfg, const AttentionGeometry& geo,
                                       const std::vector<uint32_t>& cubes, uint32_t u,
                                       const topology::KvPlacement& kv,
                                       host::HbmAllocator& allocator, MemoryStore* store,
                                       const std::vector<QkvInputs>& inputs) {
  const uint32_t G = cfg.G();
  const std::vector<uint64_t> kv_shape = {cfg.h_kv, cfg.ContextOf(u), cfg.d};
  FanoutKv placed;
  for (uint32_t gi = 0; gi < G; ++gi) {
    std::vector<host::KvHeadGroup> heads;
    for (uint32_t h = 0; h < cfg.h_kv; ++h) heads.push_back({{cubes[h * G + gi]}, geo.pes});
    ASSIGN_OR_RETURN(host::PlacedTensor k,
                     host::PlaceKvCache(allocator, absl::StrCat("k[", u, "][", gi, "]"), kv_shape,
                                        pb::BF16, kv, heads,
                                        host::KvLayout{host::SlotLayout::kTileMajor, cfg.tile}));
    if (cfg.kv_bank_interleaved) RETURN_IF_ERROR(host::PadForBankInterleave(allocator, k));
    ASSIGN_OR_RETURN(host::PlacedTensor v,
                     host::PlaceKvCache(allocator, absl::StrCat("v[", u, "][", gi, "]"), kv_shape,
                                        pb::BF16, kv, heads, host::KvLayout{}));
    if (store != nullptr) {
      RETURN_IF_ERROR(host::Scatter(*store, k, inputs[u].k));
      RETURN_IF_ERROR(host::Scatter(*store, v, inputs[u].v));
    }
    placed.k.push_back(std::move(k));
    placed.v.push_back(std::move(v));
  }
  return placed;
}

// Query rows [row0, row0 + rows) of query head hq on `pe`: Q and O back to back in its HBM (Q
// written in data mode), split into q_tile tiles; where each tile's output lands.
absl::Status PlaceFanoutQueries(const PrefillConfig& cfg, uint32_t u, uint32_t hq, uint32_t pe,
                                uint64_t row0, uint64_t rows, host::HbmAllocator& allocator,
                                MemoryStore* store, const std::vector<QkvInputs>& inputs,
                                FanoutPrefillPlan& plan, PrefillLaunch& launch) {
  const uint64_t S = cfg.ContextOf(u), Tq = cfg.QueriesOf(u), q = cfg.q_tile;
  uint64_t q_addr = 0, o_addr = 0;
  if (rows > 0) {
    ASSIGN_OR_RETURN(q_addr, allocator.Allocate(pe, rows * cfg.d * 2));
    ASSIGN_OR_RETURN(o_addr, allocator.Allocate(pe, rows * cfg.d * 2));
    if (store != nullptr) {
      const auto src = inputs[u].q.data.begin() + (uint64_t{hq} * Tq + row0) * cfg.d;
      const std::vector<float> values(src, src + rows * cfg.d);
      const pb::TensorRef ref = sim::MakeTensorRef(pb::HBM, pe, q_addr, pb::BF16, {rows, cfg.d});
      RETURN_IF_ERROR(store->Write(ref, values));
    }
  }
  for (uint64_t t0 = 0; t0 < rows; t0 += q) {
    const uint32_t tokens = static_cast<uint32_t>(std::min(q, rows - t0));
    plan.tiles.push_back(QueryTile{S - Tq + row0 + t0, tokens, q_addr + t0 * cfg.d * 2,
                                   o_addr + t0 * cfg.d * 2});
    launch.outputs[u].push_back(
        PrefillLaunch::Output{pe, o_addr + t0 * cfg.d * 2, hq, 1, row0 + t0, tokens});
  }
  return absl::OkStatus();
}

// Every (query tile, KV tile) pair of every block the instance folds: 2 dots each (no causal
// skip: the baseline computes the full grid); a mask per distinct (offset, tokens, len) for
// the pairs not wholly visible, placed in its HBM and written in data mode.
absl::Status PlaceFanoutMasks(const PrefillConfig& cfg, uint32_t pe, host::HbmAllocator& allocator,
                              MemoryStore* store, FanoutPrefillPlan& plan, PrefillLaunch& launch) {
  std::set<std::tuple<int64_t, uint32_t, uint32_t>> keys;
  std::vector<FanoutBlock> blocks = {plan.own};
  blocks.insert(blocks.end(), plan.from_prev.begin(), plan.from_prev.end());
  blocks.insert(blocks.end(), plan.from_next.begin(), plan.from_next.end());
  for (const QueryTile& qt : plan.tiles) {
    for (const FanoutBlock& blk : blocks) {
      for (uint64_t kpos = blk.pos; kpos < blk.pos + blk.len; kpos += cfg.tile) {
        const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(cfg.tile, blk.pos + blk.len - kpos));
        launch.composites += 2;
        const CausalPair pair = ClassifyPair(qt.pos, qt.tokens, kpos, len);
        if (pair == CausalPair::kFull) continue;
        const int64_t offset = pair == CausalPair::kSkip
                                   ? int64_t{qt.tokens}
                                   : static_cast<int64_t>(kpos) - static_cast<int64_t>(qt.pos);
        keys.insert({offset, qt.tokens, len});
      }
    }
  }
  for (const auto& [offset, tokens, len] : keys) {
    ASSIGN_OR_RETURN(const uint64_t addr, allocator.Allocate(pe, uint64_t{tokens} * len * 2));
    plan.masks.push_back(MaskSlot{offset, tokens, len, addr});
    if (store != nullptr) RETURN_IF_ERROR(WritePrefillMask(store, pe, plan.masks.back(), 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PrefillLaunch> LaunchPrefillFanout(const pb::Chip& chip, const PrefillConfig& cfg,
                                                  const AttentionGeometry& geo,
                                                  KernelRuntime& runtime, MemoryStore* store,
                                                  const std::vector<QkvInputs>& inputs) {
  ASSIGN_OR_RETURN(const std::vector<uint32_t> cubes, FanoutCubes(chip, cfg.Geometry()));
  const uint32_t G = cfg.G(), P = cfg.P();
  const uint32_t a = P / 2, b = (P - 1) / 2;  // ⌈(P − 1) / 2⌉, ⌊(P − 1) / 2⌋
  const uint32_t per_cube = geo.index.pes_per_cube();
  const std::vector<uint32_t> ring = SnakeOrder(geo.pe_rows, geo.pe_cols);  // rectangle nodes

  PrefillLaunch launch;
  launch.cubes = cubes;
  launch.fanout_rounds = a;

  FanoutPrefillPlan base;
  base.d = cfg.d;
  base.tile = cfg.tile;
  base.q_tile = cfg.q_tile;
  base.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.d)));
  base.message_bytes = cfg.fanout_message_bytes != 0 ? cfg.fanout_message_bytes
                                                     : chip.sip().cube().ipcq().queue_bytes();
  ASSIGN_OR_RETURN(const uint32_t cap, FanoutTileCap(chip, cfg, a, b));

  launch.outputs.resize(cfg.users);  // after the TCM check: users may be huge
  host::HbmAllocator allocator(chip);
  for (uint32_t u = 0; u < cfg.users; ++u) {
    const uint32_t rot = cfg.rotate_by_request ? u : 0;
    const uint64_t S = cfg.ContextOf(u), Tq = cfg.QueriesOf(u);
    ASSIGN_OR_RETURN(const topology::KvPlacement kv,
                     topology::KvPlacement::Create(1, P, cfg.MaxContextOf(u), 0, cfg.start_pe + rot));
    const uint64_t qb = (Tq + P - 1) / P;  // query rows per rank
    const uint32_t q_tiles = static_cast<uint32_t>((qb + cfg.q_tile - 1) / cfg.q_tile);
    const uint32_t chunks = std::max<uint32_t>(1, (q_tiles + cap - 1) / cap);
    launch.chunks = std::max(launch.chunks, chunks);
    ASSIGN_OR_RETURN(const FanoutKv placed,
                     PlaceFanoutKv(cfg, geo, cubes, u, kv, allocator, store, inputs));
    const auto block_of = [&](uint32_t node) {
      const uint32_t r = kv.PeLocal(node);
      return FanoutBlock{kv.GlobalPosition(r, 0), kv.MyLen(r, S)};
    };
    for (uint32_t hq = 0; hq < cfg.h_q; ++hq) {
      const uint32_t h = hq / G, gi = hq % G, cube = cubes[hq];
      const std::vector<uint32_t> ring_cubes = {cube};
      ASSIGN_OR_RETURN(const auto links, FanoutRing(geo, ring_cubes));
      for (uint32_t pos = 0; pos < P; ++pos) {
        const uint32_t node = ring[pos], r = kv.PeLocal(node);
        const uint32_t pe = cube * per_cube + geo.pes[node];
        FanoutPrefillPlan plan = base;
        plan.own = block_of(node);
        plan.own_k_addr = placed.k[gi].shards()[h * P + r].ref.addr();
        plan.own_v_addr = placed.v[gi].shards()[h * P + r].ref.addr();
        for (uint32_t k = 1; k <= a; ++k) plan.from_prev.push_back(block_of(ring[(pos + P - k) % P]));
        for (uint32_t k = 1; k <= b; ++k) plan.from_next.push_back(block_of(ring[(pos + k) % P]));
        if (auto it = links.find(pe); it != links.end()) {
          plan.next = it->second.next;
          plan.prev = it->second.prev;
        }
        // Query rows [r·qb, (r+1)·qb) of head hq.
        const uint64_t row0 = std::min(Tq, r * qb), rows = std::min(Tq, row0 + qb) - row0;
        RETURN_IF_ERROR(PlaceFanoutQueries(cfg, u, hq, pe, row0, rows, allocator, store, inputs,
                                           plan, launch));
        plan.chunks = chunks;
        plan.tiles_per_chunk = std::max<uint32_t>(
            1, static_cast<uint32_t>((plan.tiles.size() + chunks - 1) / chunks));
        if (!plan.tiles.empty()) {
          launch.tiles_per_chunk = launch.tiles_per_chunk == 0
                                       ? plan.tiles_per_chunk
                                       : std::min(launch.tiles_per_chunk, plan.tiles_per_chunk);
        }
        RETURN_IF_ERROR(PlaceFanoutMasks(cfg, pe, allocator, store, plan, launch));
        launch.instance_pes.push_back(pe);
        // Message stream: the query head (one per CUBE).
        RETURN_IF_ERROR(runtime.AddKernel(
            pe, u, hq,
            [plan = std::move(plan)](Tl& tl) { return FanoutPrefillRank(tl, plan); }));
      }
    }
  }
  launch.grid_composites = launch.composites;
  return launch;
}

}  // namespace ahbm::kernels
