// The PE scheduler's reports on their own (pe_engine_reporter.h): a command of one GEMM tile
// and one MATH epilogue, timed by a PePlanner at 1 GHz, reported with and without an op log,
// per-tile detail and data mode.
#include "actors/units/pe_engine_reporter.h"

#include <memory>

#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

constexpr UnitId kScheduler = 21;

// A composite (GEMM tile 0: 10 cycles, 4096 FLOPs; epilogue tile 1: 5 cycles on 256
// elements, after it) planned at 1 GHz: GEMM [0, 10) ns, MATH [10, 15) ns.
class EngineReporterTest : public ::testing::Test {
 protected:
  EngineReporterTest() : planner_(*ClockDomain::FromMHz(1000)) {
    auto composite = std::make_shared<pb::CompositeCmd>();
    composite->set_cmd_id(8);
    cmd_.kind = CommandKind::kComposite;
    cmd_.cmd_id = 8;
    cmd_.issue = SimTime(500);
    cmd_.msg = composite;
    cmd_.depends_on = {3};
    cmd_.hbm_read_bytes = 2048;
    cmd_.hbm_write_bytes = 512;
    TileOp gemm;
    gemm.index = 0;
    gemm.kind = TileOpKind::kGemm;
    gemm.cycles = Cycles(10);
    gemm.flops = 4096;
    TileOp epilogue;
    epilogue.index = 1;
    epilogue.kind = TileOpKind::kEpilogue;
    epilogue.cycles = Cycles(5);
    epilogue.math_stages.push_back({.op = pb::MathOp::EXP, .elements = 256});
    epilogue.deps.push_back(0);
    cmd_.plan = {gemm, epilogue};
    OpSpec g{.engine = EngineKind::kGemm, .key = PriorityKey{0, 0}, .busy = Cycles(10)};
    const OpId g_id = planner_.Add(std::move(g));
    OpSpec m{.engine = EngineKind::kMath, .key = PriorityKey{0, 1}, .busy = Cycles(5)};
    m.deps.push_back(g_id);
    const OpId m_id = planner_.Add(std::move(m));
    planner_.Replan(SimTime(0));
    cmd_.planner_op = {g_id, m_id};
    cmd_.ops = {g_id, m_id};
    cmd_.op_pos = {0, 1};
  }

  EngineReporter Reporter(ReportOptions options) const {
    return EngineReporter(*ClockDomain::FromMHz(1000), options, kScheduler, "cube0.pe0.sched");
  }

  PePlanner planner_;
  PeCommand cmd_;
};

TEST_F(EngineReporterTest, EachEngineGetsItsOpsCountSpanBusyWorkAndFlops) {
  const EngineWorkPair work = Reporter({}).WorkOf(cmd_, planner_);
  ASSERT_NE(work.gemm, nullptr);
  ASSERT_NE(work.math, nullptr);
  EXPECT_EQ(work.gemm->cmd_id(), 8u);
  EXPECT_EQ(work.gemm->issue_ps(), 500u);
  EXPECT_EQ(work.gemm->tile_ops(), 1u);
  EXPECT_EQ(work.gemm->start_ps(), 0u);
  EXPECT_EQ(work.gemm->end_ps(), 10'000u);
  EXPECT_EQ(work.gemm->busy_ps(), 10'000u);
  EXPECT_EQ(work.gemm->work_ps(), 10'000u);
  EXPECT_EQ(work.gemm->flops(), 4096u);
  EXPECT_EQ(work.math->start_ps(), 10'000u);
  EXPECT_EQ(work.math->end_ps(), 15'000u);
  EXPECT_EQ(work.math->work_ps(), 5'000u);
  EXPECT_EQ(work.math->flops(), 0u);
  // Without an op log: no names, no per-tile ops, no command.
  EXPECT_EQ(work.gemm->op(), "");
  EXPECT_EQ(work.gemm->ops_size(), 0);
  EXPECT_FALSE(work.gemm->has_composite());
}

TEST_F(EngineReporterTest, PerTileOpsOnlyWithAnOpLogAndDetail) {
  const EngineWorkPair named = Reporter({.op_log = true}).WorkOf(cmd_, planner_);
  EXPECT_EQ(named.gemm->op(), "composite_gemm");
  EXPECT_EQ(named.gemm->ops_size(), 0);
  const EngineWorkPair detailed =
      Reporter({.op_log = true, .per_tile_detail = true}).WorkOf(cmd_, planner_);
  ASSERT_EQ(detailed.math->ops_size(), 1);
  const pb::EngineOp& op = detailed.math->ops(0);
  EXPECT_EQ(op.tile_index(), 1u);
  EXPECT_EQ(op.what(), "Epilogue(0,0)");
  EXPECT_EQ(op.start_ps(), 10'000u);
  EXPECT_EQ(op.end_ps(), 15'000u);
  EXPECT_EQ(op.elements(), 256u);
  EXPECT_EQ(detailed.gemm->ops(0).what(), "Gemm(0,0,0)");
  // Detail needs the op log: per_tile_detail alone adds nothing.
  EXPECT_EQ(Reporter({.per_tile_detail = true}).WorkOf(cmd_, planner_).gemm->ops_size(), 0);
}

TEST_F(EngineReporterTest, DataModeCarriesTheCommandToTheEngineThatComputesIt) {
  const EngineWorkPair work = Reporter({.data = true}).WorkOf(cmd_, planner_);
  EXPECT_TRUE(work.gemm->has_composite());
  EXPECT_EQ(work.gemm->composite().cmd_id(), 8u);
  EXPECT_FALSE(work.math->has_composite());
  EXPECT_EQ(work.gemm->op(), "composite_gemm");  // for data-plane error texts
  // A command with no op on its computing engine still gets a message there.
  PeCommand math = cmd_;
  math.kind = CommandKind::kMath;
  auto m = std::make_shared<pb::MathCmd>();
  m->set_op(pb::MathOp::EXP);
  math.msg = m;
  math.op_pos = {1};
  const EngineWorkPair only_math = Reporter({.data = true}).WorkOf(math, planner_);
  EXPECT_EQ(only_math.gemm, nullptr);
  ASSERT_NE(only_math.math, nullptr);
  EXPECT_TRUE(only_math.math->has_math());
}

TEST_F(EngineReporterTest, TheSchedulerRecordRidesOnTheFirstMessageWithOps) {
  std::string record = "serialized";
  const EngineWorkPair work = Reporter({.op_log = true}).WorkOf(cmd_, planner_, &record);
  EXPECT_EQ(work.gemm->scheduler_record(), "serialized");
  EXPECT_EQ(work.math->scheduler_record(), "");
  PeCommand math_only = cmd_;
  math_only.op_pos = {1};
  std::string again = "again";
  const EngineWorkPair math = Reporter({.op_log = true}).WorkOf(math_only, planner_, &again);
  EXPECT_EQ(math.gemm, nullptr);
  EXPECT_EQ(math.math->scheduler_record(), "again");
}

TEST_F(EngineReporterTest, ADmaCommandHasNoEngineWorkAndItsDataOnlyInDataMode) {
  PeCommand dma = cmd_;
  dma.kind = CommandKind::kDma;
  auto load = std::make_shared<pb::DmaCmd>();
  load->set_cmd_id(8);
  load->mutable_src()->set_space(pb::HBM);
  dma.msg = load;
  dma.op_pos.clear();
  const EngineWorkPair work = Reporter({.data = true}).WorkOf(dma, planner_);
  EXPECT_EQ(work.gemm, nullptr);
  EXPECT_EQ(work.math, nullptr);
  EXPECT_EQ(Reporter({}).DmaDataOf(dma), nullptr);
  EXPECT_EQ(Reporter({.data = true}).DmaDataOf(cmd_), nullptr);  // not a DMA command
  const std::shared_ptr<pb::DmaData> data = Reporter({.data = true}).DmaDataOf(dma);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->op(), "dma_load");
  EXPECT_EQ(data->cmd().cmd_id(), 8u);
}

TEST_F(EngineReporterTest, AccountAddsToTheStatsAndRecordsOnlyWithAnOpLog) {
  pb::UnitStats stats;
  EXPECT_EQ(Reporter({}).Account(cmd_, SimTime(0), SimTime(15'000), stats), std::nullopt);
  const std::optional<pb::OpRecord> rec =
      Reporter({.op_log = true}).Account(cmd_, SimTime(0), SimTime(15'000), stats);
  EXPECT_EQ(stats.ops(), 2u);
  EXPECT_EQ(stats.bytes_read(), 4096u);
  EXPECT_EQ(stats.bytes_written(), 1024u);
  EXPECT_EQ(stats.flops(), 8192u);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->unit(), kScheduler);
  EXPECT_EQ(rec->unit_name(), "cube0.pe0.sched");
  EXPECT_EQ(rec->op(), "composite_gemm");
  EXPECT_EQ(rec->issue_ps(), 500u);
  EXPECT_EQ(rec->end_ps(), 15'000u);
  EXPECT_EQ(rec->flops(), 4096u);
  ASSERT_EQ(rec->depends_on_size(), 1);
  EXPECT_EQ(rec->depends_on(0), 3u);
}

}  // namespace
}  // namespace ahbm::sim
