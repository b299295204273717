#include "actors/models/tile_plan.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/models/gemm_model.h"
#include "actors/models/math_model.h"
#include "base/check.h"
#include "gtest/gtest.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

constexpr Bytes kBf16 = GemmComposite::kBf16;
constexpr Bytes kFp32 = GemmComposite::kFp32;

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Extent of tile i when `size` elements are cut into tiles of `tile`: full tiles, then the rest.
uint64_t TileExtent(uint64_t size, uint64_t tile, uint64_t i) {
  const uint64_t count = CeilDiv(size, tile);
  return i + 1 < count ? tile : size - (count - 1) * tile;
}

// One PE of the small test chip; every number below comes from it.
pb::Pe SmallChipPe() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  AHBM_CHECK(chip.ok()) << chip.status();
  return chip->sip().cube().pe();
}

using Kind = TileOpKind;
using Key = std::tuple<Kind, uint32_t /*mi*/, uint32_t /*ki*/, uint32_t /*ni*/>;

// Index of every op by (kind, mi, ki, ni); fails the test on a duplicate.
std::map<Key, uint32_t> IndexByKey(const TilePlan& plan) {
  std::map<Key, uint32_t> index;
  for (const TileOp& op : plan.ops) {
    const bool inserted = index.emplace(Key{op.kind, op.mi, op.ki, op.ni}, op.index).second;
    EXPECT_TRUE(inserted) << TileOpKindName(op.kind) << " " << op.mi << "," << op.ki << "," << op.ni
                          << " appears twice";
  }
  return index;
}

std::vector<Kind> Kinds(const TilePlan& plan) {
  std::vector<Kind> kinds;
  for (const TileOp& op : plan.ops) kinds.push_back(op.kind);
  return kinds;
}

int64_t Count(const TilePlan& plan, Kind kind) {
  return std::count_if(plan.ops.begin(), plan.ops.end(),
                       [kind](const TileOp& op) { return op.kind == kind; });
}

Bytes SumBytes(const TilePlan& plan, Kind kind) {
  Bytes total;
  for (const TileOp& op : plan.ops) {
    if (op.kind == kind) total += op.bytes;
  }
  return total;
}

class TilePlanTest : public ::testing::Test {
 protected:
  TilePlanTest()
      : pe_(SmallChipPe()),
        clock_(PeClock(pe_)),
        tile_m_(pe_.scheduler().tile_m()),
        tile_k_(pe_.scheduler().tile_k()),
        tile_n_(pe_.scheduler().tile_n()),
        rows_(pe_.gemm().array_rows()),
        cols_(pe_.gemm().array_cols()) {}

  TilePlan Plan(const GemmComposite& c) const {
    return PlanGemm(c, pe_.scheduler(), pe_.gemm(), pe_.math());
  }

  // The time the plan's GEMM tiles take when served back to back from t = 0, in plan order,
  // each ready at once (the uncontended closed form the scheduler relies on).
  SimTime ServeGemmsBackToBack(const TilePlan& plan, GemmEngineStats* stats) const {
    GemmEngineModel engine(pe_.gemm(), clock_);
    for (const TileOp& op : plan.ops) {
      if (op.kind == Kind::kGemm) engine.Serve(SimTime(0), op.tile);
    }
    *stats = engine.stats();
    return engine.free_at();
  }

  SimTime Cyc(Cycles c) const { return clock_.ToTime(c); }

  static ClockDomain PeClock(const pb::Pe& pe) {
    absl::StatusOr<ClockDomain> clock = ClockDomain::FromMHz(pe.clock_mhz());
    AHBM_CHECK(clock.ok()) << clock.status();
    return *clock;
  }

  const pb::Pe pe_;
  const ClockDomain clock_;
  const uint64_t tile_m_, tile_k_, tile_n_;
  const uint64_t rows_, cols_;
};

// ADR §5.2 decode, G = 8, T_q = 1, d = 128, TILE = 256:
// Sj[G*T_q, TILE] = scale * (q_g[G*T_q, d] · Kᵀ[d, TILE]); q_g in TCM, K in HBM, Sj fp32 in TCM.
TEST_F(TilePlanTest, DecodeQkTranspose) {
  const uint64_t m = 8, k = 128, n = 256;
  const TilePlan plan = Plan({.m = m,
                              .k = k,
                              .n = n,
                              .a_element_bytes = kBf16,
                              .b_element_bytes = kBf16,
                              .out_element_bytes = kFp32,
                              .a_home = TensorHome::kTcm,
                              .b_home = TensorHome::kHbm,
                              .out_home = TensorHome::kTcm,
                              .epilogue = {pb::SCALE}});

  // The closed forms below hold because all rows fit one m-tile and one array pass, K and N are
  // whole tiles, and an n-tile is a whole number of array columns.
  ASSERT_LE(m, tile_m_);
  ASSERT_LE(m, rows_);
  ASSERT_EQ(k % tile_k_, 0u);
  ASSERT_EQ(n % tile_n_, 0u);
  ASSERT_EQ(tile_n_ % cols_, 0u);
  const uint64_t k_tiles = k / tile_k_;
  const uint64_t n_tiles = n / tile_n_;
  EXPECT_EQ(plan.m_tiles, 1u);
  EXPECT_EQ(plan.k_tiles, k_tiles);
  EXPECT_EQ(plan.n_tiles, n_tiles);

  // Every GEMM tile is one row pass: k_t cycles per array-column pass.
  EXPECT_EQ(plan.gemm_cycles, Cycles(k * (n / cols_)));
  EXPECT_EQ(plan.flops, 2 * m * k * n);
  EXPECT_EQ(plan.peak_gemm_cycles, Cycles(CeilDiv(2 * m * k * n, 2 * rows_ * cols_)));
  EXPECT_EQ(plan.padding_loss_cycles(), plan.gemm_cycles - plan.peak_gemm_cycles);
  // m == array_rows on the shipped array: no padding at all.
  if (m == rows_) {
    EXPECT_EQ(plan.padding_loss_cycles(), Cycles(0));
  }

  const pb::MathEngine& math = pe_.math();
  EXPECT_EQ(plan.epilogue_cycles, Cycles(n_tiles * (math.startup_cycles() +
                                                    CeilDiv(m * tile_n_, math.lanes_per_cycle()))));

  EXPECT_EQ(plan.b_bytes, kBf16 * (k * n));
  EXPECT_EQ(plan.a_bytes, kBf16 * (m * k));
  EXPECT_EQ(plan.out_bytes, kFp32 * (m * n));
  EXPECT_EQ(plan.hbm_read_bytes, plan.b_bytes);
  EXPECT_EQ(plan.hbm_write_bytes, Bytes(0));
  EXPECT_EQ(SumBytes(plan, Kind::kLoadB), plan.b_bytes);
  EXPECT_EQ(SumBytes(plan, Kind::kWriteOut), plan.out_bytes);

  // The order rule spelled out for k_tiles = n_tiles = 2 (shipped 64/128 tiles): per n-tile,
  // per k-tile, the B piece then its GEMM; the epilogue and write-out after the last k-tile.
  ASSERT_EQ(k_tiles, 2u);
  ASSERT_EQ(n_tiles, 2u);
  EXPECT_EQ(Kinds(plan),
            (std::vector<Kind>{Kind::kLoadB, Kind::kGemm, Kind::kLoadB, Kind::kGemm,
                               Kind::kEpilogue, Kind::kWriteOut, Kind::kLoadB, Kind::kGemm,
                               Kind::kLoadB, Kind::kGemm, Kind::kEpilogue, Kind::kWriteOut}));

  // Uncontended, the GEMM engine pays one fill/drain and then runs the plan's cycles.
  GemmEngineStats stats;
  EXPECT_EQ(ServeGemmsBackToBack(plan, &stats),
            Cyc(plan.gemm_cycles + Cycles(pe_.gemm().fill_drain_cycles())));
  EXPECT_EQ(stats.fill_drains, 1u);
  EXPECT_EQ(stats.flops, plan.flops);
}

// ADR §5.2 decode: O_j[G*T_q, d] = P[G*T_q, TILE] · V[TILE, d]; P in TCM, V in HBM, fp32 out,
// no epilogue stage.
TEST_F(TilePlanTest, DecodePvIsOneMTileOfKTilesWithTheWriteOutAfterTheLastGemm) {
  const uint64_t m = 8, k = 256, n = 128;
  const TilePlan plan = Plan({.m = m,
                              .k = k,
                              .n = n,
                              .a_element_bytes = kBf16,
                              .b_element_bytes = kBf16,
                              .out_element_bytes = kFp32});

  ASSERT_LE(m, tile_m_);
  ASSERT_LE(m, rows_);
  ASSERT_EQ(k % tile_k_, 0u);
  ASSERT_EQ(n % tile_n_, 0u);
  ASSERT_EQ(tile_n_ % cols_, 0u);
  const uint64_t k_tiles = k / tile_k_;
  EXPECT_EQ(plan.m_tiles, 1u);
  EXPECT_EQ(plan.k_tiles, k_tiles);
  EXPECT_EQ(plan.n_tiles, n / tile_n_);

  EXPECT_EQ(plan.gemm_cycles, Cycles(k * (n / cols_)));
  EXPECT_EQ(plan.flops, 2 * m * k * n);
  EXPECT_EQ(plan.peak_gemm_cycles, Cycles(CeilDiv(2 * m * k * n, 2 * rows_ * cols_)));
  EXPECT_EQ(plan.epilogue_cycles, Cycles(0));
  EXPECT_EQ(plan.b_bytes, kBf16 * (k * n));
  EXPECT_EQ(plan.hbm_read_bytes, plan.b_bytes);
  EXPECT_EQ(plan.out_bytes, kFp32 * (m * n));

  // k_tiles = 4, n_tiles = 1 on the shipped tiles; no epilogue op, so the write-out follows
  // the last GEMM directly.
  ASSERT_EQ(k_tiles, 4u);
  ASSERT_EQ(plan.n_tiles, 1u);
  EXPECT_EQ(Kinds(plan),
            (std::vector<Kind>{Kind::kLoadB, Kind::kGemm, Kind::kLoadB, Kind::kGemm, Kind::kLoadB,
                               Kind::kGemm, Kind::kLoadB, Kind::kGemm, Kind::kWriteOut}));
  EXPECT_EQ(plan.ops.back().deps, (TileDeps{plan.ops.back().index - 1}));

  GemmEngineStats stats;
  EXPECT_EQ(ServeGemmsBackToBack(plan, &stats),
            Cyc(plan.gemm_cycles + Cycles(pe_.gemm().fill_drain_cycles())));
}

// ADR rev2 §B item 4: the shared K/V operand is loaded once per (k, n) piece however many
// m-tiles reuse it. M > tile_m must not grow the B bytes; FLOPs grow with M.
TEST_F(TilePlanTest, BOperandBytesDoNotGrowWithM) {
  const uint64_t k = 128, n = 256;
  const auto plan_for = [&](uint64_t m) {
    return Plan({.m = m,
                 .k = k,
                 .n = n,
                 .a_element_bytes = kBf16,
                 .b_element_bytes = kBf16,
                 .out_element_bytes = kFp32,
                 .epilogue = {pb::SCALE}});
  };
  const TilePlan base = plan_for(8);
  const uint64_t k_tiles = CeilDiv(k, tile_k_);
  const uint64_t n_tiles = CeilDiv(n, tile_n_);

  for (uint64_t m : {8, 32, 64}) {
    SCOPED_TRACE(m);
    const TilePlan plan = plan_for(m);
    EXPECT_EQ(plan.m_tiles, CeilDiv(m, tile_m_));
    EXPECT_EQ(Count(plan, Kind::kLoadB), static_cast<int64_t>(k_tiles * n_tiles));
    EXPECT_EQ(Count(plan, Kind::kGemm), static_cast<int64_t>(plan.m_tiles * k_tiles * n_tiles));
    EXPECT_EQ(plan.b_bytes, kBf16 * (k * n));
    EXPECT_EQ(SumBytes(plan, Kind::kLoadB), base.b_bytes);
    EXPECT_EQ(plan.hbm_read_bytes, base.hbm_read_bytes);
    EXPECT_EQ(plan.flops, base.flops / 8 * m);
    EXPECT_EQ(plan.out_bytes, kFp32 * (m * n));
  }
  EXPECT_GT(plan_for(64).m_tiles, 1u);  // the case the lever is about
}

// M, K, N each end in a partial tile. The shipped tiles give m-tiles {32, 8}, k-tiles {64, 36},
// n-tiles {128, 72}; every partial n-tile still costs a whole array-column pass.
TEST_F(TilePlanTest, PartialEdgeTilesKeepTheirExtentsAndPayWholeArrayPasses) {
  const uint64_t m = 40, k = 100, n = 200;
  ASSERT_NE(m % tile_m_, 0u);
  ASSERT_NE(k % tile_k_, 0u);
  ASSERT_NE(n % tile_n_, 0u);
  const TilePlan plan = Plan({.m = m,
                              .k = k,
                              .n = n,
                              .a_element_bytes = kBf16,
                              .b_element_bytes = kBf16,
                              .out_element_bytes = kBf16,
                              .out_home = TensorHome::kHbm,
                              .epilogue = {pb::SCALE}});
  EXPECT_EQ(plan.m_tiles, CeilDiv(m, tile_m_));
  EXPECT_EQ(plan.k_tiles, CeilDiv(k, tile_k_));
  EXPECT_EQ(plan.n_tiles, CeilDiv(n, tile_n_));

  for (const TileOp& op : plan.ops) {
    SCOPED_TRACE(op.index);
    const uint64_t m_t = TileExtent(m, tile_m_, op.mi);
    const uint64_t k_t = TileExtent(k, tile_k_, op.ki);
    const uint64_t n_t = TileExtent(n, tile_n_, op.ni);
    switch (op.kind) {
      case Kind::kLoadB:
        EXPECT_EQ(op.tile, (GemmTileShape{.m = 0, .k = k_t, .n = n_t}));
        EXPECT_EQ(op.bytes, kBf16 * (k_t * n_t));
        break;
      case Kind::kLoadA:
        ADD_FAILURE() << "A lives in TCM: no loads";
        break;
      case Kind::kGemm:
        EXPECT_EQ(op.tile, (GemmTileShape{.m = m_t, .k = k_t, .n = n_t}));
        EXPECT_EQ(op.cycles, Cycles(k_t * CeilDiv(m_t, rows_) * CeilDiv(n_t, cols_)));
        EXPECT_EQ(op.flops, 2 * m_t * k_t * n_t);
        break;
      case Kind::kEpilogue:
        EXPECT_EQ(op.tile, (GemmTileShape{.m = m_t, .k = 0, .n = n_t}));
        EXPECT_EQ(op.math_stages, (MathStages{{.op = pb::SCALE, .elements = m_t * n_t}}));
        break;
      case Kind::kWriteOut:
        EXPECT_EQ(op.tile, (GemmTileShape{.m = m_t, .k = 0, .n = n_t}));
        EXPECT_EQ(op.bytes, kBf16 * (m_t * n_t));
        EXPECT_EQ(op.home, TensorHome::kHbm);
        break;
    }
  }
  // The shipped numbers, spelled out.
  if (tile_m_ == 32 && tile_k_ == 64 && tile_n_ == 128) {
    EXPECT_EQ(plan.ops.back().tile, (GemmTileShape{.m = 8, .k = 0, .n = 72}));
  }

  // Sum over tiles of k_t * ceil(m_t / rows) * ceil(n_t / cols) factorises over the axes.
  uint64_t row_passes = 0;
  for (uint64_t i = 0; i < plan.m_tiles; ++i)
    row_passes += CeilDiv(TileExtent(m, tile_m_, i), rows_);
  uint64_t col_passes = 0;
  for (uint64_t i = 0; i < plan.n_tiles; ++i)
    col_passes += CeilDiv(TileExtent(n, tile_n_, i), cols_);
  EXPECT_EQ(plan.gemm_cycles, Cycles(k * row_passes * col_passes));
  EXPECT_EQ(plan.flops, 2 * m * k * n);
  EXPECT_EQ(plan.peak_gemm_cycles, Cycles(CeilDiv(2 * m * k * n, 2 * rows_ * cols_)));
  EXPECT_GT(plan.padding_loss_cycles(), Cycles(0));
  EXPECT_EQ(SumBytes(plan, Kind::kLoadB), plan.b_bytes);
  EXPECT_EQ(SumBytes(plan, Kind::kWriteOut), plan.out_bytes);
  EXPECT_EQ(plan.hbm_write_bytes, kBf16 * (m * n));
}

// Every dependency edge named in tile_plan.h, with A and the output in HBM and a two-stage
// epilogue, on a 2 x 3 x 2 tile grid.
TEST_F(TilePlanTest, DependencyStructure) {
  const uint64_t m = tile_m_ + 1, k = 2 * tile_k_ + 1, n = tile_n_ + 1;
  const TilePlan plan = Plan({.m = m,
                              .k = k,
                              .n = n,
                              .a_element_bytes = kBf16,
                              .b_element_bytes = kBf16,
                              .out_element_bytes = kFp32,
                              .a_home = TensorHome::kHbm,
                              .b_home = TensorHome::kHbm,
                              .out_home = TensorHome::kHbm,
                              .epilogue = {pb::SCALE, pb::EXP}});
  ASSERT_EQ(plan.m_tiles, 2u);
  ASSERT_EQ(plan.k_tiles, 3u);
  ASSERT_EQ(plan.n_tiles, 2u);
  const uint32_t last_k = plan.k_tiles - 1;
  const std::map<Key, uint32_t> at = IndexByKey(plan);

  EXPECT_EQ(Count(plan, Kind::kLoadB), plan.k_tiles * plan.n_tiles);
  EXPECT_EQ(Count(plan, Kind::kLoadA), plan.m_tiles * plan.k_tiles);
  EXPECT_EQ(Count(plan, Kind::kGemm), plan.m_tiles * plan.k_tiles * plan.n_tiles);
  EXPECT_EQ(Count(plan, Kind::kEpilogue), plan.m_tiles * plan.n_tiles);
  EXPECT_EQ(Count(plan, Kind::kWriteOut), plan.m_tiles * plan.n_tiles);

  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const TileOp& op = plan.ops[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(op.index, i);
    EXPECT_TRUE(std::is_sorted(op.deps.begin(), op.deps.end()));
    for (uint32_t dep : op.deps) EXPECT_LT(dep, op.index);

    std::vector<uint32_t> want;
    switch (op.kind) {
      case Kind::kLoadB:
      case Kind::kLoadA:
        EXPECT_EQ(op.home, TensorHome::kHbm);
        break;
      case Kind::kGemm:
        want.push_back(at.at({Kind::kLoadB, 0, op.ki, op.ni}));
        want.push_back(at.at({Kind::kLoadA, op.mi, op.ki, 0}));
        if (op.ki > 0) want.push_back(at.at({Kind::kGemm, op.mi, op.ki - 1, op.ni}));
        std::sort(want.begin(), want.end());
        break;
      case Kind::kEpilogue: {
        want.push_back(at.at({Kind::kGemm, op.mi, last_k, op.ni}));
        const uint64_t elements = op.tile.m * op.tile.n;
        const std::vector<MathOpShape> stages = {{.op = pb::SCALE, .elements = elements},
                                                 {.op = pb::EXP, .elements = elements}};
        EXPECT_EQ(op.math_stages, MathStages(stages.begin(), stages.end()));
        EXPECT_EQ(op.cycles,
                  MathOpCycles(pe_.math(), stages[0]) + MathOpCycles(pe_.math(), stages[1]));
        break;
      }
      case Kind::kWriteOut:
        want.push_back(at.at({Kind::kEpilogue, op.mi, 0, op.ni}));
        EXPECT_EQ(op.home, TensorHome::kHbm);
        break;
    }
    EXPECT_EQ(op.deps, TileDeps(want.begin(), want.end())) << TileOpKindName(op.kind);
  }

  // Order: GEMMs in (ni, ki, mi) order; each B piece right before the GEMMs that use it; each A
  // tile loaded once, right before its first GEMM (ni = 0).
  uint32_t prev_gemm = 0;
  bool first = true;
  for (uint32_t ni = 0; ni < plan.n_tiles; ++ni) {
    for (uint32_t ki = 0; ki < plan.k_tiles; ++ki) {
      const uint32_t b = at.at({Kind::kLoadB, 0, ki, ni});
      for (uint32_t mi = 0; mi < plan.m_tiles; ++mi) {
        const uint32_t g = at.at({Kind::kGemm, mi, ki, ni});
        EXPECT_TRUE(first || g > prev_gemm);
        EXPECT_GT(g, b);
        // The piece comes after every GEMM of the previous (ki, ni) step.
        if (!first && mi == 0) {
          EXPECT_GT(b, prev_gemm);
        }
        if (ni == 0) {
          EXPECT_EQ(at.at({Kind::kLoadA, mi, ki, 0}), g - 1);
        }
        prev_gemm = g;
        first = false;
      }
    }
  }

  EXPECT_EQ(plan.a_bytes, kBf16 * (m * k));
  EXPECT_EQ(SumBytes(plan, Kind::kLoadA), plan.a_bytes);
  EXPECT_EQ(plan.hbm_read_bytes, plan.a_bytes + plan.b_bytes);
  EXPECT_EQ(plan.hbm_write_bytes, plan.out_bytes);
}

TEST_F(TilePlanTest, SamePlanTwice) {
  const GemmComposite composite{.m = 40,
                                .k = 300,
                                .n = 500,
                                .a_element_bytes = kBf16,
                                .b_element_bytes = kBf16,
                                .out_element_bytes = kFp32,
                                .a_home = TensorHome::kHbm,
                                .out_home = TensorHome::kHbm,
                                .epilogue = {pb::SCALE, pb::ADD}};
  const TilePlan first = Plan(composite);
  const TilePlan second = Plan(composite);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first.ops.size(), second.ops.size());
}

// softmax_pv: op 0 is the fused merge costing the sum of its stages; the P·V GEMM follows with
// every k-tile-0 GEMM depending on the merge; V bytes are loaded once, whatever the rows.
TEST(PlanSoftmaxPvTest, MergeThenPvGemm) {
  const pb::Pe pe = SmallChipPe();
  const uint64_t rows = 8, keys = 256, d = 128;
  const SoftmaxPvShape shape{rows, keys, d, GemmComposite::kBf16, TensorHome::kHbm};
  const TilePlan plan = PlanSoftmaxPv(shape, pe.scheduler(), pe.gemm(), pe.math());
  ASSERT_FALSE(plan.ops.empty());
  const TileOp& merge = plan.ops[0];
  EXPECT_EQ(merge.kind, TileOpKind::kSoftmaxMerge);
  Cycles expected;
  for (const MathOpShape& s : SoftmaxMergeStages(rows, keys, d)) expected += MathOpCycles(pe.math(), s);
  EXPECT_EQ(merge.cycles, expected);
  EXPECT_EQ(plan.epilogue_cycles, expected);
  EXPECT_EQ(SoftmaxMergeStages(rows, keys, d).size(), 11u);
  int gemms = 0;
  for (size_t i = 1; i < plan.ops.size(); ++i) {
    const TileOp& op = plan.ops[i];
    EXPECT_EQ(op.index, i);
    if (op.kind != TileOpKind::kGemm) continue;
    ++gemms;
    if (op.ki == 0) EXPECT_EQ(op.deps.front(), 0u) << i;
  }
  EXPECT_EQ(gemms, static_cast<int>((keys / pe.scheduler().tile_k()) * (d / pe.scheduler().tile_n())));
  EXPECT_EQ(plan.b_bytes, Bytes(keys * d * 2));
  EXPECT_EQ(plan.hbm_read_bytes, Bytes(keys * d * 2));
}

// lse_merge (decode reduce, FUSED): one MATH op whose stages are the primitive merge's 11 ops;
// one start-up. Derived on paper for rows = 8, d = 128 from the small chip's MATH engine
// (128 lanes, exp 32/cycle, 8 start-up): eight per-row ops of 8 elements take one cycle
// each, the three [8, 128] ops 1024 / 128 = 8 cycles each: 8 + 8 + 24 = 40 cycles, where the
// 11 primitive ops cost 11 * 8 + 8 + 24 = 120.
TEST(PlanLseMergeTest, OneOpWithOneStartup) {
  const pb::Pe pe = SmallChipPe();
  const uint64_t rows = 8, d = 128;
  const TilePlan plan = PlanLseMerge(rows, d, pe.math());
  ASSERT_EQ(plan.ops.size(), 1u);
  const TileOp& op = plan.ops[0];
  EXPECT_EQ(op.kind, TileOpKind::kLseMerge);
  EXPECT_STREQ(TileOpKindName(op.kind), "LseMerge");
  EXPECT_TRUE(op.deps.empty());
  const uint64_t startup = pe.math().startup_cycles();
  const uint64_t lanes = pe.math().lanes_per_cycle();
  const uint64_t row_ops = 8 * CeilDiv(rows, lanes);  // 2 of them EXP: 8 rows < 32 per cycle too
  const uint64_t o_ops = 3 * CeilDiv(rows * d, lanes);
  EXPECT_EQ(op.cycles, Cycles(startup + row_ops + o_ops));
  EXPECT_EQ(op.cycles, Cycles(40));
  Cycles primitive;
  for (const MathOpShape& s : LseMergeStages(rows, d)) primitive += MathOpCycles(pe.math(), s);
  EXPECT_EQ(primitive, Cycles(120));
  EXPECT_EQ(op.cycles + Cycles(10 * startup), primitive);
  EXPECT_EQ(plan.epilogue_cycles, op.cycles);
  EXPECT_EQ(plan.flops, 0u);
  EXPECT_EQ(plan.hbm_read_bytes, Bytes(0));
  uint64_t elements = 0;
  for (const MathOpShape& s : op.math_stages) elements += s.elements;
  EXPECT_EQ(elements, 8 * rows + 3 * rows * d);
}

}  // namespace
}  // namespace ahbm::sim
