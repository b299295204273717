#include "actors/models/tile_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "base/check.h"

namespace ahbm::sim {
namespace {

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Extent of tile `i` on an axis of `size` elements cut into tiles of `tile` elements.
uint64_t Extent(uint64_t size, uint64_t tile, uint64_t i) {
  return std::min(tile, size - i * tile);
}

uint32_t TileCount(uint64_t size, uint64_t tile) {
  const uint64_t count = CeilDiv(size, tile);
  AHBM_CHECK(count <= std::numeric_limits<uint32_t>::max()) << count << " tiles on one axis";
  return static_cast<uint32_t>(count);
}

// Appends `op` at the end of `plan`, setting its index; returns the index.
uint32_t Append(TilePlan& plan, TileOp op) {
  AHBM_CHECK(plan.ops.size() < std::numeric_limits<uint32_t>::max())
      << "tile plan too large: " << plan.ops.size() << " ops";
  op.index = static_cast<uint32_t>(plan.ops.size());
  for (uint32_t dep : op.deps) {
    AHBM_CHECK(dep < op.index) << TileOpKindName(op.kind) << " " << op.index
                               << " depends on a later op " << dep;
  }
  plan.ops.push_back(std::move(op));
  return plan.ops.back().index;
}

}  // namespace

const char* TileOpKindName(TileOpKind kind) {
  switch (kind) {
    case TileOpKind::kLoadB:
      return "LoadB";
    case TileOpKind::kLoadA:
      return "LoadA";
    case TileOpKind::kGemm:
      return "Gemm";
    case TileOpKind::kEpilogue:
      return "Epilogue";
    case TileOpKind::kSoftmaxMerge:
      return "SoftmaxMerge";
    case TileOpKind::kLseMerge:
      return "LseMerge";
    case TileOpKind::kWriteOut:
      return "WriteOut";
  }
  return "?";
}

namespace {

// PlanGemm's preconditions (the scheduler's checks and the topology's validation hold them).
void CheckGemmInputs(const GemmComposite& c, const pb::Scheduler& scheduler,
                     const pb::GemmEngine& gemm) {
  AHBM_CHECK(c.m > 0 && c.k > 0 && c.n > 0)
      << "empty composite m=" << c.m << " k=" << c.k << " n=" << c.n;
  AHBM_CHECK(c.a_element_bytes.value() > 0 && c.b_element_bytes.value() > 0 &&
             c.out_element_bytes.value() > 0)
      << "element sizes a=" << c.a_element_bytes << " b=" << c.b_element_bytes
      << " out=" << c.out_element_bytes;
  AHBM_CHECK(scheduler.tile_m() > 0 && scheduler.tile_k() > 0 && scheduler.tile_n() > 0)
      << "scheduler tile " << scheduler.tile_m() << "/" << scheduler.tile_k() << "/"
      << scheduler.tile_n();
  AHBM_CHECK(gemm.array_rows() > 0 && gemm.array_cols() > 0)
      << "GEMM array " << gemm.array_rows() << "x" << gemm.array_cols();
}

// The output tile (mi, ni) after its last GEMM op `last_gemm`: its epilogue, if the composite
// has one, then its write-out.
void AppendOutputTile(const GemmComposite& c, const pb::MathEngine& math, uint32_t mi,
                      uint32_t ni, GemmTileShape tile, uint32_t last_gemm, TilePlan& plan) {
  uint32_t write_after = last_gemm;
  if (!c.epilogue.empty()) {
    TileOp epilogue;
    epilogue.kind = TileOpKind::kEpilogue;
    epilogue.mi = mi;
    epilogue.ni = ni;
    epilogue.tile = tile;
    for (pb::MathOp stage : c.epilogue) {
      epilogue.math_stages.push_back({.op = stage, .elements = tile.m * tile.n});
    }
    epilogue.cycles = MathFusedCycles(math, epilogue.math_stages);
    epilogue.deps.push_back(last_gemm);
    plan.epilogue_cycles += epilogue.cycles;
    write_after = Append(plan, std::move(epilogue));
  }

  TileOp write;
  write.kind = TileOpKind::kWriteOut;
  write.mi = mi;
  write.ni = ni;
  write.tile = tile;
  write.home = c.out_home;
  write.bytes = c.out_element_bytes * (tile.m * tile.n);
  write.deps.push_back(write_after);
  Append(plan, std::move(write));
}

// The plan's totals: FLOPs, peak cycles, operand and output bytes, HBM traffic.
void FillGemmTotals(const GemmComposite& c, const pb::GemmEngine& gemm, TilePlan& plan) {
  plan.flops = 2 * c.m * c.k * c.n;
  plan.peak_gemm_cycles =
      Cycles(CeilDiv(plan.flops, 2 * uint64_t{gemm.array_rows()} * gemm.array_cols()));
  plan.a_bytes = c.a_element_bytes * (c.m * c.k);
  plan.b_bytes = c.b_element_bytes * (c.k * c.n);
  plan.out_bytes = c.out_element_bytes * (c.m * c.n);
  if (c.a_home == TensorHome::kHbm) plan.hbm_read_bytes += plan.a_bytes;
  if (c.b_home == TensorHome::kHbm) plan.hbm_read_bytes += plan.b_bytes;
  if (c.out_home == TensorHome::kHbm) plan.hbm_write_bytes += plan.out_bytes;
}

// PlanGemm into `plan`, keeping the capacity of plan.ops; `front` free slots are reserved
// beyond the plan's own ops (PlanSoftmaxPv's merge op).
void PlanGemmInto(const GemmComposite& composite, const pb::Scheduler& scheduler,
                  const pb::GemmEngine& gemm, const pb::MathEngine& math, TilePlan& plan,
                  size_t front) {
  const GemmComposite& c = composite;
  CheckGemmInputs(c, scheduler, gemm);
  const uint64_t tile_m = scheduler.tile_m();
  const uint64_t tile_k = scheduler.tile_k();
  const uint64_t tile_n = scheduler.tile_n();

  {
    std::vector<TileOp> ops = std::move(plan.ops);
    ops.clear();
    plan = TilePlan{};
    plan.ops = std::move(ops);
  }
  plan.m_tiles = TileCount(c.m, tile_m);
  plan.k_tiles = TileCount(c.k, tile_k);
  plan.n_tiles = TileCount(c.n, tile_n);

  const bool load_a = c.a_home == TensorHome::kHbm;
  // Index of kLoadA(mi, ki) at [mi * k_tiles + ki], filled during the first n-tile.
  absl::InlinedVector<uint32_t, 16> a_load(load_a ? plan.m_tiles * size_t{plan.k_tiles} : 0);
  // Index of kGemm(mi, ki - 1, ni) while walking ki, per mi.
  absl::InlinedVector<uint32_t, 16> prev_gemm(plan.m_tiles);
  // Every op below, counted up front: one allocation instead of a regrowth per doubling.
  {
    const size_t m = plan.m_tiles, k = plan.k_tiles, n = plan.n_tiles;
    plan.ops.reserve(front + n * k + (load_a ? m * k : 0) + n * k * m +
                     n * m * (c.epilogue.empty() ? 1 : 2));
  }

  for (uint32_t ni = 0; ni < plan.n_tiles; ++ni) {
    const uint64_t n_t = Extent(c.n, tile_n, ni);
    for (uint32_t ki = 0; ki < plan.k_tiles; ++ki) {
      const uint64_t k_t = Extent(c.k, tile_k, ki);
      const bool last_k = ki + 1 == plan.k_tiles;

      TileOp load_b;
      load_b.kind = TileOpKind::kLoadB;
      load_b.ki = ki;
      load_b.ni = ni;
      load_b.tile = {.m = 0, .k = k_t, .n = n_t};
      load_b.home = c.b_home;
      load_b.bytes = c.b_element_bytes * (k_t * n_t);
      const uint32_t b_index = Append(plan, std::move(load_b));

      for (uint32_t mi = 0; mi < plan.m_tiles; ++mi) {
        const uint64_t m_t = Extent(c.m, tile_m, mi);

        if (load_a && ni == 0) {
          TileOp op;
          op.kind = TileOpKind::kLoadA;
          op.mi = mi;
          op.ki = ki;
          op.tile = {.m = m_t, .k = k_t, .n = 0};
          op.home = c.a_home;
          op.bytes = c.a_element_bytes * (m_t * k_t);
          a_load[mi * static_cast<size_t>(plan.k_tiles) + ki] = Append(plan, std::move(op));
        }

        TileOp mac;
        mac.kind = TileOpKind::kGemm;
        mac.mi = mi;
        mac.ki = ki;
        mac.ni = ni;
        mac.tile = {.m = m_t, .k = k_t, .n = n_t};
        mac.cycles = GemmTileCycles(gemm, mac.tile);
        mac.flops = GemmTileFlops(mac.tile);
        mac.deps.push_back(b_index);
        if (load_a) mac.deps.push_back(a_load[mi * static_cast<size_t>(plan.k_tiles) + ki]);
        if (ki > 0) mac.deps.push_back(prev_gemm[mi]);
        std::sort(mac.deps.begin(), mac.deps.end());
        plan.gemm_cycles += mac.cycles;
        prev_gemm[mi] = Append(plan, std::move(mac));

        if (!last_k) continue;

        AppendOutputTile(c, math, mi, ni, {.m = m_t, .k = 0, .n = n_t}, prev_gemm[mi], plan);
      }
    }
  }

  FillGemmTotals(c, gemm, plan);
}

}  // namespace

void PlanGemm(const GemmComposite& composite, const pb::Scheduler& scheduler,
              const pb::GemmEngine& gemm, const pb::MathEngine& math, TilePlan& plan) {
  PlanGemmInto(composite, scheduler, gemm, math, plan, 0);
}

TilePlan PlanGemm(const GemmComposite& composite, const pb::Scheduler& scheduler,
                  const pb::GemmEngine& gemm, const pb::MathEngine& math) {
  TilePlan plan;
  PlanGemmInto(composite, scheduler, gemm, math, plan, 0);
  return plan;
}

std::vector<MathOpShape> SoftmaxMergeStages(uint64_t rows, uint64_t keys, uint64_t d) {
  const uint64_t rc = rows * keys;
  return {
      {pb::SCALE, rc},     {pb::REDUCE_MAX, rc}, {pb::MAXIMUM, rows}, {pb::SUB, rc},
      {pb::EXP, rc},       {pb::REDUCE_SUM, rc}, {pb::SUB, rows},     {pb::EXP, rows},
      {pb::MUL, rows},     {pb::ADD, rows},      {pb::MUL, rows * d},
  };
}

void PlanSoftmaxPv(const SoftmaxPvShape& shape, const pb::Scheduler& scheduler,
                   const pb::GemmEngine& gemm, const pb::MathEngine& math, TilePlan& plan) {
  AHBM_CHECK(shape.rows > 0 && shape.keys > 0 && shape.d > 0)
      << "empty softmax_pv rows=" << shape.rows << " keys=" << shape.keys << " d=" << shape.d;
  GemmComposite pv;
  pv.m = shape.rows;
  pv.k = shape.keys;
  pv.n = shape.d;
  pv.a_element_bytes = GemmComposite::kBf16;  // P is rounded to bf16 before P·V (DESIGN §2)
  pv.b_element_bytes = shape.v_element_bytes;
  pv.out_element_bytes = GemmComposite::kFp32;
  pv.a_home = TensorHome::kTcm;
  pv.b_home = shape.v_home;
  pv.out_home = TensorHome::kTcm;
  // The P·V ops in place (one slot spare for the merge), then shifted behind it.
  PlanGemmInto(pv, scheduler, gemm, math, plan, 1);
  for (TileOp& op : plan.ops) {
    op.index += 1;
    for (uint32_t& dep : op.deps) dep += 1;
    if (op.kind == TileOpKind::kGemm && op.ki == 0) op.deps.insert(op.deps.begin(), 0);
  }

  TileOp merge;
  merge.kind = TileOpKind::kSoftmaxMerge;
  merge.tile = {.m = shape.rows, .k = shape.keys, .n = 0};
  const std::vector<MathOpShape> stages = SoftmaxMergeStages(shape.rows, shape.keys, shape.d);
  merge.math_stages.assign(stages.begin(), stages.end());
  merge.cycles = MathFusedCycles(math, merge.math_stages);
  plan.ops.insert(plan.ops.begin(), std::move(merge));
  plan.epilogue_cycles = plan.ops[0].cycles;
}

TilePlan PlanSoftmaxPv(const SoftmaxPvShape& shape, const pb::Scheduler& scheduler,
                       const pb::GemmEngine& gemm, const pb::MathEngine& math) {
  TilePlan plan;
  PlanSoftmaxPv(shape, scheduler, gemm, math, plan);
  return plan;
}

std::vector<MathOpShape> LseMergeStages(uint64_t rows, uint64_t d) {
  const uint64_t rd = rows * d;
  return {
      {pb::MAXIMUM, rows}, {pb::SUB, rows}, {pb::EXP, rows}, {pb::SUB, rows},
      {pb::EXP, rows},     {pb::MUL, rows}, {pb::MUL, rows}, {pb::ADD, rows},
      {pb::MUL, rd},       {pb::MUL, rd},   {pb::ADD, rd},
  };
}

TilePlan PlanLseMerge(uint64_t rows, uint64_t d, const pb::MathEngine& math) {
  AHBM_CHECK(rows > 0 && d > 0) << "empty lse_merge rows=" << rows << " d=" << d;
  TileOp merge;
  merge.kind = TileOpKind::kLseMerge;
  merge.tile = {.m = rows, .k = 0, .n = d};
  const std::vector<MathOpShape> stages = LseMergeStages(rows, d);
  merge.math_stages.assign(stages.begin(), stages.end());
  merge.cycles = MathSingleStartupCycles(math, merge.math_stages);
  TilePlan plan;
  plan.epilogue_cycles = merge.cycles;
  plan.ops.push_back(std::move(merge));
  return plan;
}

}  // namespace ahbm::sim
