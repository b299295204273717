#include "actors/models/math_model.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "base/check.h"
#include "gtest/gtest.h"
#include "proto/commands.pb.h"
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

ClockDomain PeClock() {
  absl::StatusOr<ClockDomain> clock = ClockDomain::FromMHz(SmallChipPe().clock_mhz());
  AHBM_CHECK(clock.ok()) << clock.status();
  return *clock;
}

// The shipped MATH engine, and a what-if in which every number differs from every other, so
// that a formula reading the wrong field shows.
enum class Variant { kShipped, kDistinct };

pb::MathEngine MathConfig(Variant variant) {
  pb::MathEngine math = SmallChipPe().math();
  if (variant == Variant::kDistinct) {
    math.set_lanes_per_cycle(64);
    math.set_transcendental_per_cycle(12);
    math.set_reduction_extra_cycles(3);
    math.set_startup_cycles(5);
  }
  return math;
}

std::string VariantName(Variant v) { return v == Variant::kShipped ? "shipped" : "distinct"; }
void PrintTo(Variant v, std::ostream* os) { *os << VariantName(v); }

// How an op is costed, written out per op kind (the decision documented in math_model.h).
enum class Rate { kLanes, kTranscendental };
struct OpKind {
  pb::MathOp op;
  Rate rate;
  bool reduction;
};
void PrintTo(const OpKind& kind, std::ostream* os) { *os << pb::MathOp_Name(kind.op); }

const OpKind kOpKinds[] = {
    {pb::ADD, Rate::kLanes, false},          {pb::SUB, Rate::kLanes, false},
    {pb::MUL, Rate::kLanes, false},          {pb::MAXIMUM, Rate::kLanes, false},
    {pb::SCALE, Rate::kLanes, false},        {pb::COPY, Rate::kLanes, false},
    {pb::FILL, Rate::kLanes, false},         {pb::TRANSPOSE, Rate::kLanes, false},
    {pb::EXP, Rate::kTranscendental, false}, {pb::DIV, Rate::kTranscendental, false},
    {pb::REDUCE_MAX, Rate::kLanes, true},    {pb::REDUCE_SUM, Rate::kLanes, true},
};

using OpCase = std::tuple<Variant, OpKind, uint64_t /*elements*/>;

class MathOpCyclesTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(MathOpCyclesTest, MatchesClosedForm) {
  const auto [variant, kind, elements] = GetParam();
  const pb::MathEngine math = MathConfig(variant);
  const uint64_t rate =
      kind.rate == Rate::kLanes ? math.lanes_per_cycle() : math.transcendental_per_cycle();
  const uint64_t extra = kind.reduction ? math.reduction_extra_cycles() : 0;

  EXPECT_EQ(MathElementsPerCycle(math, kind.op), rate);
  EXPECT_EQ(IsMathReduction(kind.op), kind.reduction);
  EXPECT_EQ(MathOpCycles(math, {.op = kind.op, .elements = elements}),
            Cycles(math.startup_cycles() + CeilDiv(elements, rate) + extra));
}

INSTANTIATE_TEST_SUITE_P(Table, MathOpCyclesTest,
                         ::testing::Combine(::testing::Values(Variant::kShipped,
                                                              Variant::kDistinct),
                                            ::testing::ValuesIn(kOpKinds),
                                            ::testing::Values(0, 1, 32, 33, 128, 129, 4096)),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           // std::get, not a structured binding: its commas would split the macro's
                           // arguments.
                           return VariantName(std::get<0>(info.param)) + "_" +
                                  pb::MathOp_Name(std::get<1>(info.param).op) + "_" +
                                  std::to_string(std::get<2>(info.param));
                         });

// Decode's softmax over Sj[G*T_q, TILE] = [8, 256] (ADR §5.2), op by op on the shipped engine.
// A broadcast (subtracting the row max, dividing by the row sum) costs by its output elements.
TEST(MathOpCyclesTest, DecodeSoftmaxOps) {
  const pb::MathEngine math = MathConfig(Variant::kShipped);
  const uint64_t rows = 8;
  const uint64_t cols = 256;
  const uint64_t sj = rows * cols;
  const uint64_t startup = math.startup_cycles();
  const uint64_t lanes = math.lanes_per_cycle();
  const uint64_t trans = math.transcendental_per_cycle();
  const uint64_t extra = math.reduction_extra_cycles();

  // m_j = rowmax(Sj): reads all of Sj.
  EXPECT_EQ(MathOpCycles(math, {.op = pb::REDUCE_MAX, .elements = sj}),
            Cycles(startup + sj / lanes + extra));
  // Sj - m_j, the [rows, 1] max broadcast over the columns: output-sized.
  EXPECT_EQ(MathOpCycles(math, {.op = pb::SUB, .elements = sj}), Cycles(startup + sj / lanes));
  EXPECT_EQ(MathOpCycles(math, {.op = pb::EXP, .elements = sj}), Cycles(startup + sj / trans));
  EXPECT_EQ(MathOpCycles(math, {.op = pb::REDUCE_SUM, .elements = sj}),
            Cycles(startup + sj / lanes + extra));
  // A per-row op on the [rows, 1] statistics themselves: one partial cycle.
  EXPECT_EQ(MathOpCycles(math, {.op = pb::EXP, .elements = rows}), Cycles(startup + 1));
}

TEST(MathFusedCyclesTest, SumsStagesEachWithItsStartup) {
  const pb::MathEngine math = MathConfig(Variant::kShipped);
  const std::vector<MathOpShape> stages = {{.op = pb::SCALE, .elements = 4096},
                                           {.op = pb::EXP, .elements = 4096},
                                           {.op = pb::REDUCE_SUM, .elements = 4096}};
  EXPECT_EQ(MathFusedCycles(math, stages), MathOpCycles(math, stages[0]) +
                                               MathOpCycles(math, stages[1]) +
                                               MathOpCycles(math, stages[2]));
  EXPECT_EQ(MathFusedCycles(math, stages),
            Cycles(3 * math.startup_cycles() + 4096 / math.lanes_per_cycle() +
                   4096 / math.transcendental_per_cycle() + 4096 / math.lanes_per_cycle() +
                   math.reduction_extra_cycles()));
}

// One start-up for the whole op (distinct numbers: start-up 5, 64 lanes, exp 12/cycle,
// reduction +3): 5 + ceil(8/64) + ceil(8/12) + 4096/64 + 3 = 74.
TEST(MathSingleStartupCyclesTest, PaysOneStartup) {
  const pb::MathEngine math = MathConfig(Variant::kDistinct);
  const std::vector<MathOpShape> stages = {{.op = pb::MUL, .elements = 8},
                                           {.op = pb::EXP, .elements = 8},
                                           {.op = pb::REDUCE_SUM, .elements = 4096}};
  EXPECT_EQ(MathSingleStartupCycles(math, stages),
            Cycles(math.startup_cycles() + 1 + 1 + 4096 / math.lanes_per_cycle() +
                   math.reduction_extra_cycles()));
  EXPECT_EQ(MathSingleStartupCycles(math, stages), Cycles(74));
  EXPECT_EQ(MathSingleStartupCycles(math, stages) + Cycles(2 * math.startup_cycles()),
            MathFusedCycles(math, stages));
}

// --- The stateful engine. ---

class MathEngineModelTest : public ::testing::Test {
 protected:
  MathEngineModelTest()
      : math_(MathConfig(Variant::kShipped)), clock_(PeClock()), engine_(math_, clock_) {}

  SimTime Cyc(uint64_t n) const { return clock_.ToTime(Cycles(n)); }

  const pb::MathEngine math_;
  const ClockDomain clock_;
  MathEngineModel engine_;
};

TEST_F(MathEngineModelTest, ServesInOrderOnClockEdges) {
  const MathOpShape exp{.op = pb::EXP, .elements = 2048};
  const MathOpShape max{.op = pb::REDUCE_MAX, .elements = 2048};
  const uint64_t e = MathOpCycles(math_, exp).value();
  const uint64_t m = MathOpCycles(math_, max).value();

  // Off-edge ready: the first edge at or after it.
  const SimTime half = SimTime(clock_.period().value() / 2);
  const MathService first = engine_.Serve(Cyc(2) + half, exp);
  EXPECT_EQ(first, (MathService{.start = Cyc(3), .end = Cyc(3 + e)}));
  // Ready while busy: queued behind it.
  const MathService second = engine_.Serve(SimTime(0), max);
  EXPECT_EQ(second, (MathService{.start = first.end, .end = first.end + Cyc(m)}));
  // After an idle gap: no penalty beyond the op's own startup.
  const MathService third = engine_.Serve(second.end + Cyc(10), max);
  EXPECT_EQ(third, (MathService{.start = second.end + Cyc(10), .end = second.end + Cyc(10 + m)}));
  EXPECT_EQ(engine_.free_at(), third.end);
}

TEST_F(MathEngineModelTest, FusedOpOccupiesOnceAndCountsOnce) {
  const std::vector<MathOpShape> epilogue = {{.op = pb::SCALE, .elements = 1024},
                                             {.op = pb::ADD, .elements = 1024}};
  const MathOpShape copy{.op = pb::COPY, .elements = 300};
  const uint64_t f = MathFusedCycles(math_, epilogue).value();
  const uint64_t c = MathOpCycles(math_, copy).value();

  const MathService fused = engine_.Serve(SimTime(0), epilogue);
  EXPECT_EQ(fused, (MathService{.start = SimTime(0), .end = Cyc(f)}));
  engine_.Serve(SimTime(0), copy);
  EXPECT_EQ(engine_.stats(),
            (MathEngineStats{.busy_ps = Cyc(f + c), .ops = 2, .elements = 1024 + 1024 + 300}));
}

TEST_F(MathEngineModelTest, PreviewChangesNothing) {
  const MathOpShape op{.op = pb::DIV, .elements = 100};
  engine_.Serve(SimTime(0), op);
  const MathEngineStats before = engine_.stats();
  const SimTime free_at = engine_.free_at();
  const MathService preview = engine_.Preview(SimTime(0), op);
  EXPECT_EQ(engine_.stats(), before);
  EXPECT_EQ(engine_.free_at(), free_at);
  EXPECT_EQ(engine_.Serve(SimTime(0), op), preview);
}

}  // namespace
}  // namespace ahbm::sim
