#include "actors/models/gemm_model.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "base/check.h"
#include "gtest/gtest.h"
#include "proto/topology.pb.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// One PE of the small test chip; every number below comes from it.
pb::Pe SmallChipPe() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  AHBM_CHECK(chip.ok()) << chip.status();
  return chip->sip().cube().pe();
}

ClockDomain PeClock(const pb::Pe& pe) {
  absl::StatusOr<ClockDomain> clock = ClockDomain::FromMHz(pe.clock_mhz());
  AHBM_CHECK(clock.ok()) << clock.status();
  return *clock;
}

// The shipped array, and the DESIGN §2 what-if: a 32x32 array (with a different fill/drain so
// that a formula reading the wrong field shows).
enum class Array { kShipped, kSquare32 };

pb::GemmEngine GemmConfig(Array array) {
  pb::GemmEngine gemm = SmallChipPe().gemm();
  if (array == Array::kSquare32) {
    gemm.set_array_rows(32);
    gemm.set_array_cols(32);
    gemm.set_fill_drain_cycles(5);
  }
  return gemm;
}

std::string ArrayName(Array array) { return array == Array::kShipped ? "shipped" : "square32"; }
void PrintTo(Array array, std::ostream* os) { *os << ArrayName(array); }

// --- Tile cycles: k * ceil(m / rows) * ceil(n / cols), for every (m, n, k) of the table. ---

using TileCase = std::tuple<Array, uint64_t /*m*/, uint64_t /*n*/, uint64_t /*k*/>;

class GemmTileCyclesTest : public ::testing::TestWithParam<TileCase> {};

TEST_P(GemmTileCyclesTest, MatchesClosedForm) {
  const auto [array, m, n, k] = GetParam();
  const pb::GemmEngine gemm = GemmConfig(array);
  const GemmTileShape tile{.m = m, .k = k, .n = n};

  const uint64_t row_passes = CeilDiv(m, gemm.array_rows());
  const uint64_t col_passes = CeilDiv(n, gemm.array_cols());
  EXPECT_EQ(GemmTileCycles(gemm, tile), Cycles(k * row_passes * col_passes));
  EXPECT_EQ(GemmTileFlops(tile), 2 * m * k * n);
}

INSTANTIATE_TEST_SUITE_P(Table, GemmTileCyclesTest,
                         ::testing::Combine(::testing::Values(Array::kShipped, Array::kSquare32),
                                            ::testing::Values(1, 8, 9, 32),
                                            ::testing::Values(1, 128, 129, 256),
                                            ::testing::Values(1, 64, 256)),
                         [](const ::testing::TestParamInfo<TileCase>& info) {
                           // std::get, not a structured binding: its commas would split the macro's
                           // arguments.
                           return ArrayName(std::get<0>(info.param)) + "_m" +
                                  std::to_string(std::get<1>(info.param)) + "_n" +
                                  std::to_string(std::get<2>(info.param)) + "_k" +
                                  std::to_string(std::get<3>(info.param));
                         });

// Anchors of the table above on the shipped 8x128 array, spelled out: a row or column past the
// array's edge costs a whole extra pass.
TEST(GemmTileCyclesTest, ExtraPassPastArrayEdge) {
  const pb::GemmEngine gemm = GemmConfig(Array::kShipped);
  const uint64_t rows = gemm.array_rows();
  const uint64_t cols = gemm.array_cols();
  const uint64_t k = 64;
  const Cycles full = GemmTileCycles(gemm, {.m = rows, .k = k, .n = cols});
  EXPECT_EQ(full, Cycles(k));
  EXPECT_EQ(GemmTileCycles(gemm, {.m = 1, .k = k, .n = 1}), full);
  EXPECT_EQ(GemmTileCycles(gemm, {.m = rows + 1, .k = k, .n = cols}), full * 2);
  EXPECT_EQ(GemmTileCycles(gemm, {.m = rows, .k = k, .n = cols + 1}), full * 2);
  EXPECT_EQ(GemmTileCycles(gemm, {.m = rows + 1, .k = k, .n = cols + 1}), full * 4);
}

// --- The stateful engine: start edge, fill/drain, stats. ---

class GemmEngineModelTest : public ::testing::TestWithParam<Array> {
 protected:
  GemmEngineModelTest()
      : gemm_(GemmConfig(GetParam())), clock_(PeClock(SmallChipPe())), engine_(gemm_, clock_) {}

  SimTime Cyc(uint64_t n) const { return clock_.ToTime(Cycles(n)); }
  uint64_t Fill() const { return gemm_.fill_drain_cycles(); }

  const pb::GemmEngine gemm_;
  const ClockDomain clock_;
  GemmEngineModel engine_;
  const GemmTileShape tile_{.m = 8, .k = 64, .n = 128};
};

TEST_P(GemmEngineModelTest, FirstTilePaysFillDrain) {
  const uint64_t c = GemmTileCycles(gemm_, tile_).value();
  const GemmService s = engine_.Serve(SimTime(0), tile_);
  EXPECT_EQ(s, (GemmService{.start = SimTime(0), .end = Cyc(c + Fill()), .paid_fill_drain = true}));
  EXPECT_EQ(engine_.free_at(), s.end);
}

TEST_P(GemmEngineModelTest, BackToBackTilePaysNoFillDrain) {
  const uint64_t c = GemmTileCycles(gemm_, tile_).value();
  const GemmService first = engine_.Serve(SimTime(0), tile_);
  // Ready exactly when the previous tile ends.
  const GemmService second = engine_.Serve(first.end, tile_);
  EXPECT_EQ(second, (GemmService{.start = first.end, .end = first.end + Cyc(c)}));
  // Ready before the engine is free: queued, starts at free_at, still back-to-back.
  const GemmService third = engine_.Serve(SimTime(0), tile_);
  EXPECT_EQ(third, (GemmService{.start = second.end, .end = second.end + Cyc(c)}));
}

TEST_P(GemmEngineModelTest, TileAfterIdleGapPaysFillDrain) {
  const uint64_t c = GemmTileCycles(gemm_, tile_).value();
  const GemmService first = engine_.Serve(SimTime(0), tile_);
  // One picosecond late: the array idles until the next PE clock edge and must refill.
  const GemmService second = engine_.Serve(first.end + SimTime(1), tile_);
  EXPECT_EQ(second, (GemmService{.start = first.end + Cyc(1),
                                 .end = first.end + Cyc(1 + c + Fill()),
                                 .paid_fill_drain = true}));
}

TEST_P(GemmEngineModelTest, StartsOnFirstEdgeAtOrAfterReady) {
  const uint64_t c = GemmTileCycles(gemm_, tile_).value();
  const SimTime half = SimTime(clock_.period().value() / 2);
  const GemmService s = engine_.Serve(Cyc(3) + half, tile_);
  EXPECT_EQ(s.start, Cyc(4));
  EXPECT_EQ(s.end, Cyc(4 + c + Fill()));
}

TEST_P(GemmEngineModelTest, PreviewChangesNothing) {
  const GemmService first = engine_.Serve(SimTime(0), tile_);
  const GemmEngineStats before = engine_.stats();
  const GemmService preview = engine_.Preview(first.end, tile_);
  EXPECT_EQ(engine_.stats(), before);
  EXPECT_EQ(engine_.free_at(), first.end);
  EXPECT_EQ(engine_.Serve(first.end, tile_), preview);
}

TEST_P(GemmEngineModelTest, StatsCountBusyTimeFlopsTilesAndFills) {
  const GemmTileShape edge{.m = 5, .k = 7, .n = 130};
  const uint64_t c = GemmTileCycles(gemm_, tile_).value();
  const uint64_t e = GemmTileCycles(gemm_, edge).value();
  const GemmService a = engine_.Serve(SimTime(0), tile_);  // fill
  engine_.Serve(a.end, edge);                              // back-to-back
  engine_.Serve(Cyc(1'000'000), tile_);                    // fill after idle

  EXPECT_EQ(engine_.stats(),
            (GemmEngineStats{.busy_ps = Cyc((c + Fill()) + e + (c + Fill())),
                             .flops = 2 * GemmTileFlops(tile_) + 2 * edge.m * edge.k * edge.n,
                             .tiles = 3,
                             .fill_drains = 2}));
  EXPECT_EQ(engine_.free_at(), Cyc(1'000'000 + c + Fill()));
}

INSTANTIATE_TEST_SUITE_P(Arrays, GemmEngineModelTest,
                         ::testing::Values(Array::kShipped, Array::kSquare32),
                         [](const ::testing::TestParamInfo<Array>& info) {
                           return ArrayName(info.param);
                         });

}  // namespace
}  // namespace ahbm::sim
