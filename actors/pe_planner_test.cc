#include "actors/pe_planner.h"

#include <map>
#include <random>

#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

constexpr uint64_t kPeriodPs = 1000;  // 1 GHz

SimTime Cyc(uint64_t n) { return SimTime(n * kPeriodPs); }

ClockDomain Clock() { return *ClockDomain::FromPeriod(SimTime(kPeriodPs)); }

OpSpec Gemm(uint64_t seq, uint32_t tile, uint64_t busy, std::vector<OpId> deps = {},
            bool external = false) {
  return OpSpec{EngineKind::kGemm, {seq, tile}, Cycles(busy), Cycles(16),
                OpDeps(deps.begin(), deps.end()), external};
}

OpSpec Math(uint64_t seq, uint32_t tile, uint64_t busy, std::vector<OpId> deps = {},
            bool external = false) {
  return OpSpec{EngineKind::kMath, {seq, tile}, Cycles(busy), Cycles(0),
                OpDeps(deps.begin(), deps.end()), external};
}

TEST(PePlannerTest, FirstOpPaysFillAndBackToBackOpsDoNot) {
  PePlanner planner(Clock());
  const OpId a = planner.Add(Gemm(1, 0, 64));
  const OpId b = planner.Add(Gemm(1, 1, 64));
  planner.Replan(Cyc(0));
  EXPECT_EQ(planner.timing(a)->start, Cyc(0));
  EXPECT_EQ(planner.timing(a)->end, Cyc(64 + 16));
  EXPECT_EQ(planner.timing(b)->start, Cyc(80));
  EXPECT_EQ(planner.timing(b)->end, Cyc(80 + 64));
}

TEST(PePlannerTest, IdleGapPaysFillAgain) {
  PePlanner planner(Clock());
  const OpId a = planner.Add(Gemm(1, 0, 10));
  const OpId b = planner.Add(Gemm(2, 0, 10, {}, /*external=*/true));
  planner.Replan(Cyc(0));
  planner.SetExternalReady(b, Cyc(100));
  planner.Replan(Cyc(0));
  EXPECT_EQ(planner.timing(a)->end, Cyc(26));
  EXPECT_EQ(planner.timing(b)->start, Cyc(100));
  EXPECT_EQ(planner.timing(b)->end, Cyc(126));
}

TEST(PePlannerTest, ReadyTimeIsRoundedUpToTheEngineClock) {
  PePlanner planner(Clock());
  const OpId a = planner.Add(Math(1, 0, 5, {}, /*external=*/true));
  planner.SetExternalReady(a, SimTime(1500));
  planner.Replan(SimTime(0));
  EXPECT_EQ(planner.timing(a)->start, SimTime(2000));
}

TEST(PePlannerTest, OldestReadyOpWinsAtABusyEngine) {
  PePlanner planner(Clock());
  const OpId busy = planner.Add(Gemm(1, 0, 50));
  // Added younger-first: the key decides, not the order of Add.
  const OpId young = planner.Add(Gemm(9, 0, 10));
  const OpId old = planner.Add(Gemm(5, 3, 10));
  planner.Replan(Cyc(0));
  EXPECT_EQ(planner.timing(busy)->end, Cyc(66));
  EXPECT_EQ(planner.timing(old)->start, Cyc(66));
  EXPECT_EQ(planner.timing(young)->start, Cyc(76));
}

TEST(PePlannerTest, AWaitingOpNeverBlocksAYoungerReadyOne) {
  PePlanner planner(Clock());
  const OpId waiting = planner.Add(Gemm(1, 0, 10, {}, /*external=*/true));
  const OpId ready = planner.Add(Gemm(2, 0, 10));
  planner.Replan(Cyc(0));
  EXPECT_FALSE(planner.timing(waiting).has_value());
  EXPECT_EQ(planner.timing(ready)->start, Cyc(0));
  // The older op's input arrives while the younger one runs: it goes next.
  planner.SetExternalReady(waiting, Cyc(5));
  planner.Replan(Cyc(5));
  EXPECT_TRUE(planner.committed(ready));
  EXPECT_EQ(planner.timing(waiting)->start, Cyc(26));
}

TEST(PePlannerTest, DependenciesChainAcrossEngines) {
  PePlanner planner(Clock());
  const OpId s = planner.Add(Gemm(1, 0, 64));         // Sj = Q.K^T
  const OpId p = planner.Add(Math(2, 0, 40, {s}));   // softmax on the MATH engine
  const OpId pv = planner.Add(Gemm(3, 0, 64, {p}));  // P.V
  planner.Replan(Cyc(0));
  EXPECT_EQ(planner.timing(p)->start, Cyc(80));
  EXPECT_EQ(planner.timing(p)->end, Cyc(120));
  // The GEMM engine idled during softmax: P.V pays fill/drain again (opt1's bubble).
  EXPECT_EQ(planner.timing(pv)->start, Cyc(120));
  EXPECT_EQ(planner.timing(pv)->end, Cyc(200));
}

TEST(PePlannerTest, ArrivalsAtTheDecisionInstantTakePart) {
  PePlanner planner(Clock());
  const OpId first = planner.Add(Gemm(1, 0, 10));
  const OpId young = planner.Add(Gemm(7, 0, 10));
  planner.Replan(Cyc(0));
  ASSERT_EQ(planner.timing(young)->start, Cyc(26));
  // At 26 an older op arrives: the decision at 26 is re-made and it wins (Rule 3).
  const OpId old = planner.Add(Gemm(3, 0, 10));
  planner.Replan(Cyc(26));
  EXPECT_TRUE(planner.committed(first));
  EXPECT_EQ(planner.timing(old)->start, Cyc(26));
  EXPECT_EQ(planner.timing(young)->start, Cyc(36));
}

TEST(PePlannerTest, CommittedOpsAreNotReDecided) {
  PePlanner planner(Clock());
  const OpId young = planner.Add(Gemm(7, 0, 10));
  planner.Replan(Cyc(0));
  const OpId old = planner.Add(Gemm(3, 0, 10));
  planner.Replan(Cyc(1));  // `young` started at 0 < 1: it keeps the engine
  EXPECT_EQ(planner.timing(young)->start, Cyc(0));
  EXPECT_EQ(planner.timing(old)->start, Cyc(26));
}

// Rule 4: closed form (re-plan only when inputs arrive) equals per-tile simulation (also
// re-plan at every planned start and end), on random dataflow graphs with external inputs
// arriving at random instants.
struct Input {
  SimTime at;
  bool add = false;          // add an op, or release an external input
  OpSpec spec;
  size_t release_index = 0;  // index into the external ops added so far
  SimTime ready;
};

std::vector<Input> RandomScenario(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](uint64_t n) { return rng() % n; };
  std::vector<Input> inputs;
  uint64_t t = 0;
  size_t ops = 0;
  size_t externals = 0;
  size_t released = 0;
  for (int step = 0; step < 60; ++step) {
    t += pick(3) == 0 ? 0 : pick(40);  // many equal-time inputs
    Input in;
    in.at = Cyc(t);
    if (released < externals && pick(3) == 0) {
      in.add = false;
      in.release_index = released++;
      in.ready = Cyc(t + pick(4) * pick(30));
    } else {
      in.add = true;
      std::vector<OpId> deps;
      for (int d = 0; d < 2 && ops > 0; ++d) {
        if (pick(2) == 0) deps.push_back(pick(ops));
      }
      const bool external = pick(4) == 0;
      externals += external;
      const bool gemm = pick(2) == 0;
      in.spec = OpSpec{gemm ? EngineKind::kGemm : EngineKind::kMath,
                       {pick(20), static_cast<uint32_t>(pick(4))},
                       Cycles(1 + pick(50)),
                       Cycles(gemm ? 16 : 0),
                       OpDeps(deps.begin(), deps.end()),
                       external};
      ++ops;
    }
    inputs.push_back(in);
  }
  // Release every external input that is still pending.
  while (released < externals) {
    Input in;
    in.at = Cyc(t);
    in.release_index = released++;
    in.ready = Cyc(t + 10);
    inputs.push_back(in);
  }
  return inputs;
}

// Every op's timing after each re-plan ({0, 0}: none yet).
using PlanTrace = std::vector<std::vector<std::pair<uint64_t, uint64_t>>>;

std::map<OpId, std::pair<uint64_t, uint64_t>> Simulate(
    const std::vector<Input>& inputs, bool per_tile,
    PePlanner::Mode mode = PePlanner::Mode::kIncremental, PlanTrace* trace = nullptr) {
  PePlanner planner(Clock(), mode);
  std::map<OpId, std::pair<uint64_t, uint64_t>> seen;
  std::vector<OpId> external_ops;
  OpId next_id = 0;
  const auto record = [&] {
    if (trace != nullptr) trace->emplace_back();
    for (OpId id = 0; id < next_id; ++id) {
      if (trace != nullptr) {
        const auto t = planner.timing(id);
        trace->back().emplace_back(t ? t->start.value() : 0, t ? t->end.value() : 0);
      }
      if (planner.committed(id) && seen.count(id) != 0) continue;
      if (const auto t = planner.timing(id)) seen[id] = {t->start.value(), t->end.value()};
    }
  };
  SimTime now;
  const auto advance_to = [&](SimTime target) {
    while (per_tile) {
      const std::optional<SimTime> b = planner.NextBoundaryAfter(now);
      if (!b || *b > target) break;  // engine events at `target` before the input
      now = *b;
      planner.Replan(now);
      record();
    }
    now = target;
  };
  for (const Input& in : inputs) {
    advance_to(in.at);
    if (in.add) {
      const OpId id = planner.Add(in.spec);
      ++next_id;
      if (in.spec.waits_external) external_ops.push_back(id);
    } else {
      planner.SetExternalReady(external_ops[in.release_index], in.ready);
    }
    planner.Replan(now);
    record();
  }
  advance_to(Cyc(1'000'000));
  planner.Replan(now);
  record();
  EXPECT_EQ(planner.live_ops(), 0u);
  return seen;
}

TEST(PePlannerTest, ClosedFormEqualsPerTileSimulation) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const std::vector<Input> inputs = RandomScenario(seed);
    const auto closed = Simulate(inputs, /*per_tile=*/false);
    const auto per_tile = Simulate(inputs, /*per_tile=*/true);
    ASSERT_EQ(closed, per_tile) << "seed " << seed;
    ASSERT_GT(closed.size(), 30u);
  }
}

// The incremental re-plan (decisions before the earliest instant an input can move are kept)
// gives, after every re-plan, the plan of re-deciding every uncommitted op.
TEST(PePlannerTest, IncrementalReplanEqualsFullReplan) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const std::vector<Input> inputs = RandomScenario(seed);
    PlanTrace incremental, full;
    Simulate(inputs, /*per_tile=*/false, PePlanner::Mode::kIncremental, &incremental);
    Simulate(inputs, /*per_tile=*/false, PePlanner::Mode::kFull, &full);
    ASSERT_EQ(incremental.size(), full.size()) << "seed " << seed;
    for (size_t step = 0; step < full.size(); ++step) {
      ASSERT_EQ(incremental[step], full[step]) << "seed " << seed << ", re-plan " << step;
    }
  }
}

// An op that waits on an unknown input moves no decision: the plan stands until the input.
TEST(PePlannerTest, BlockedOpKeepsThePlanUntilItsInput) {
  PePlanner planner(Clock());
  const OpId a = planner.Add(Gemm(0, 0, 10));
  const OpId b = planner.Add(Gemm(1, 0, 10));
  planner.Replan(Cyc(0));
  const OpId c = planner.Add(Gemm(0, 1, 10, {}, /*external=*/true));  // oldest key, blocked
  planner.Replan(Cyc(0));
  EXPECT_EQ(planner.timing(b)->start, Cyc(26));
  EXPECT_FALSE(planner.timing(c).has_value());
  planner.SetExternalReady(c, Cyc(20));  // ready before b's start: c goes first
  planner.Replan(Cyc(0));
  EXPECT_EQ(planner.timing(a)->start, Cyc(0));
  EXPECT_EQ(planner.timing(c)->start, Cyc(26));
  EXPECT_EQ(planner.timing(b)->start, Cyc(36));
}

// VectorFifo keeps FIFO order and indexes from the front across its compactions.
TEST(VectorFifoTest, FifoOrderAcrossCompactions) {
  VectorFifo<uint64_t> fifo;
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 7; ++i) fifo.push_back(next_in++);
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(fifo.front(), next_out);
      fifo.pop_front();
      ++next_out;
    }
    ASSERT_EQ(fifo.size(), next_in - next_out);
    for (size_t i = 0; i < fifo.size(); ++i) ASSERT_EQ(fifo[i], next_out + i);
    ASSERT_EQ(*fifo.begin(), next_out);
  }
  while (!fifo.empty()) {
    ASSERT_EQ(fifo.front(), next_out++);
    fifo.pop_front();
  }
  EXPECT_EQ(next_out, next_in);
}

}  // namespace
}  // namespace ahbm::sim
