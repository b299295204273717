// The PE scheduler's command table on its own (pe_command_table.h): numbering, refusals,
// the done set, admission order and limit, softmax_pv chains, and reuse of released commands.
#include "actors/units/pe_command_table.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

constexpr UnitId kCpu = 7;

PeCommand& AcceptComposite(CommandTable& table, uint64_t cmd_id,
                           std::vector<uint64_t> depends_on = {}) {
  EXPECT_EQ(table.Refusal(cmd_id, depends_on), "");
  return table.Accept(CommandKind::kComposite, cmd_id, kCpu, SimTime(1000), depends_on);
}

// Completes and releases `c` the way the scheduler's Step does.
void Finish(CommandTable& table, PeCommand& c) {
  table.Complete(c);
  table.Remove(c);
}

TEST(CommandTable, AcceptedCommandsAreNumberedInIssueOrderAndLive) {
  CommandTable table;
  PeCommand& a = AcceptComposite(table, 40);
  PeCommand& b = table.Accept(CommandKind::kMath, 12, 3, SimTime(2000), {});
  EXPECT_EQ(a.seq, 0u);
  EXPECT_EQ(b.seq, 1u);
  EXPECT_EQ(b.kind, CommandKind::kMath);
  EXPECT_EQ(b.requester, 3u);
  EXPECT_EQ(b.issue, SimTime(2000));
  ASSERT_EQ(table.live().size(), 2u);
  EXPECT_EQ(table.live()[0], &a);  // issue order, not cmd_id order
  EXPECT_EQ(table.live()[1], &b);
  EXPECT_EQ(table.Find(12), &b);
  EXPECT_EQ(&table.At(40), &a);
  EXPECT_EQ(table.Find(99), nullptr);
}

TEST(CommandTable, RefusesAReusedIdAndADependencyNeverIssued) {
  CommandTable table;
  PeCommand& a = AcceptComposite(table, 1);
  EXPECT_EQ(table.Refusal(1, {}), "cmd_id already used on this PE");  // live
  const std::vector<uint64_t> unknown = {1, 5};
  EXPECT_EQ(table.Refusal(2, unknown), "depends_on: cmd 5 was never issued on this PE");
  Finish(table, a);
  EXPECT_EQ(table.Refusal(1, {}), "cmd_id already used on this PE");  // done
  const std::vector<uint64_t> done = {1};
  EXPECT_EQ(table.Refusal(2, done), "");  // a completed dependency is legal
  EXPECT_EQ(table.Find(1), nullptr);
}

TEST(CommandTable, AdmitsUpToTheLimitThenInIssueOrderAsSlotsFree) {
  CommandTable table;
  PeCommand& a = AcceptComposite(table, 1);
  PeCommand& b = AcceptComposite(table, 2);
  PeCommand& c = AcceptComposite(table, 3);
  EXPECT_TRUE(table.AdmitOnArrival(a, 1));
  EXPECT_FALSE(table.AdmitOnArrival(b, 1));
  EXPECT_TRUE(table.any_waiting());
  EXPECT_EQ(table.NextAdmitted(1), nullptr);  // the slot is a's
  // c waits behind b even when a slot frees before c arrives at admission.
  Finish(table, a);
  EXPECT_FALSE(table.AdmitOnArrival(c, 1));
  EXPECT_EQ(table.NextAdmitted(1), &b);
  EXPECT_EQ(table.NextAdmitted(1), nullptr);
  Finish(table, b);
  EXPECT_EQ(table.NextAdmitted(1), &c);
  EXPECT_FALSE(table.any_waiting());
}

TEST(CommandTable, OnlyAdmissionLimitedKindsHoldASlot) {
  CommandTable table;
  PeCommand& merge = table.Accept(CommandKind::kLseMerge, 1, kCpu, SimTime(), {});
  PeCommand& a = AcceptComposite(table, 2);
  EXPECT_TRUE(table.AdmitOnArrival(a, 1));
  Finish(table, merge);  // frees no composite slot
  PeCommand& b = AcceptComposite(table, 3);
  EXPECT_FALSE(table.AdmitOnArrival(b, 1));
}

TEST(CommandTable, ChainsSoftmaxPvOnAnAccumulatorWhileThePreviousIsLive) {
  CommandTable table;
  const std::pair<uint32_t, uint64_t> acc(0, 4096);
  PeCommand& first = table.Accept(CommandKind::kSoftmaxPv, 1, kCpu, SimTime(), {});
  EXPECT_EQ(table.ChainOnAccumulator(acc, 1), std::nullopt);
  table.Accept(CommandKind::kSoftmaxPv, 2, kCpu, SimTime(), {});
  EXPECT_EQ(table.ChainOnAccumulator(acc, 2), 1u);
  EXPECT_EQ(table.ChainOnAccumulator({0, 8192}, 2), std::nullopt);  // another accumulator
  Finish(table, first);
  table.Accept(CommandKind::kSoftmaxPv, 3, kCpu, SimTime(), {});
  EXPECT_EQ(table.ChainOnAccumulator(acc, 3), 2u);
}

TEST(CommandTable, AReleasedCommandIsReusedFreshAndItsPlanBufferKept) {
  CommandTable table;
  PeCommand& a = AcceptComposite(table, 1);
  a.plan.resize(10);
  a.ops = {3, 4};
  a.dmas_in_flight = 2;
  a.hbm_read_bytes = 64;
  a.admitted = true;
  PeCommand* const address = &a;
  Finish(table, a);
  std::vector<TileOp> buffer = table.TakePlanBuffer();
  EXPECT_TRUE(buffer.empty());
  EXPECT_GE(buffer.capacity(), 10u);
  EXPECT_TRUE(table.TakePlanBuffer().empty());  // only one was kept
  PeCommand& b = table.Accept(CommandKind::kDot, 2, kCpu, SimTime(5), {});
  EXPECT_EQ(&b, address);  // from the pool
  EXPECT_EQ(b.kind, CommandKind::kDot);
  EXPECT_EQ(b.seq, 1u);
  EXPECT_TRUE(b.ops.empty());
  EXPECT_EQ(b.dmas_in_flight, 0);
  EXPECT_EQ(b.hbm_read_bytes, 0u);
  EXPECT_FALSE(b.admitted);
  EXPECT_EQ(b.ops_start, SimTime::Max());
}

TEST(CommandTable, DmaSettledNeedsNoDmaInFlightAndNoPendingWriteOut) {
  PeCommand c;
  EXPECT_TRUE(c.DmaSettled());
  c.pending_writes = {3};
  EXPECT_FALSE(c.DmaSettled());
  c.pending_writes.clear();
  c.dmas_in_flight = 1;
  EXPECT_FALSE(c.DmaSettled());
}

TEST(CommandTable, OpNamesSayTheCommandAndTheDmaDirection) {
  PeCommand c;
  c.kind = CommandKind::kMath;
  auto math = std::make_shared<pb::MathCmd>();
  math->set_op(pb::MathOp::EXP);
  c.msg = math;
  EXPECT_EQ(OpName(c), "math_EXP");
  auto dma = std::make_shared<pb::DmaCmd>();
  dma->mutable_src()->set_space(pb::HBM);
  dma->mutable_dst()->set_space(pb::TCM);
  c.kind = CommandKind::kDma;
  c.msg = dma;
  EXPECT_EQ(OpName(c), "dma_load");
  dma->mutable_src()->set_space(pb::TCM);
  dma->mutable_dst()->set_space(pb::HBM);
  EXPECT_EQ(OpName(c), "dma_store");
  dma->mutable_dst()->set_space(pb::TCM);
  EXPECT_EQ(OpName(c), "dma_copy");
}

}  // namespace
}  // namespace ahbm::sim
