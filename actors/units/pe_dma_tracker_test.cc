// The PE scheduler's DMA bookkeeping on its own (pe_dma_tracker.h): DMA ids, batches, replies
// of one instant, and the external inputs of planner ops.
#include "actors/units/pe_dma_tracker.h"

#include <memory>

#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

TEST(DmaTracker, NumbersDmasFromOneAndCountsTheirReplies) {
  DmaTracker dmas(/*pe=*/3);
  EXPECT_FALSE(dmas.replies_pending());
  EXPECT_EQ(dmas.SendOne(/*cmd_id=*/10, /*tile_index=*/0, /*whole_command=*/true), 1u);
  EXPECT_EQ(dmas.SendOne(11, 4, false), 2u);
  EXPECT_TRUE(dmas.replies_pending());
  // Replies may come in any order; the last one of the two says so.
  const DmaPiece second = dmas.Take(2);
  EXPECT_EQ(second.cmd_id, 11u);
  EXPECT_EQ(second.tile_index, 4u);
  EXPECT_FALSE(second.whole_command);
  EXPECT_FALSE(dmas.ReplyArrived());
  EXPECT_TRUE(dmas.Take(1).whole_command);
  EXPECT_TRUE(dmas.ReplyArrived());
  EXPECT_FALSE(dmas.replies_pending());
}

TEST(DmaTracker, ABatchNumbersItsLoadsThenItselfAndAwaitsOneReply) {
  DmaTracker dmas(0);
  dmas.BeginBatch(2);
  pb::DmaCmd& first = dmas.Slot(/*cmd_id=*/5, /*tile_index=*/1);
  first.mutable_src()->add_shape(8);
  pb::DmaCmd& second = dmas.Slot(5, 2);
  EXPECT_EQ(second.cmd_id(), 2u);
  EXPECT_EQ(second.parent_cmd_id(), 5u);
  std::shared_ptr<const pb::DmaBatch> batch = dmas.EndBatch();
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->batch_id(), 3u);
  ASSERT_EQ(batch->cmds_size(), 2);
  EXPECT_EQ(batch->cmds(0).cmd_id(), 1u);
  EXPECT_EQ(batch->cmds(0).src().shape_size(), 1);
  EXPECT_TRUE(dmas.replies_pending());
  // The batch id is no DMA's: the next DMA is 4, and its reply is found past the gap.
  EXPECT_EQ(dmas.SendOne(6, 0, true), 4u);
  EXPECT_EQ(dmas.Take(1).tile_index, 1u);
  EXPECT_EQ(dmas.Take(2).tile_index, 2u);
  EXPECT_EQ(dmas.Take(4).cmd_id, 6u);
  EXPECT_FALSE(dmas.ReplyArrived());  // the batch's
  EXPECT_TRUE(dmas.ReplyArrived());   // the single DMA's
}

TEST(DmaTracker, AnAdmissionWithoutLoadsSendsNoBatch) {
  DmaTracker dmas(0);
  dmas.BeginBatch(0);
  EXPECT_EQ(dmas.EndBatch(), nullptr);
  EXPECT_FALSE(dmas.replies_pending());
  EXPECT_EQ(dmas.SendOne(1, 0, true), 1u);  // no id was used
}

TEST(DmaTracker, AReusedBatchHoldsOnlyThisAdmissionsLoads) {
  DmaTracker dmas(0);
  dmas.BeginBatch(3);
  for (uint32_t i = 0; i < 3; ++i) dmas.Slot(1, i).mutable_src()->add_shape(64);
  dmas.EndBatch();  // dropped at once: back to the pool with its three commands
  dmas.BeginBatch(1);
  pb::DmaCmd& only = dmas.Slot(2, 0);
  EXPECT_EQ(only.src().shape_size(), 0);  // cleared, not the old piece's
  std::shared_ptr<const pb::DmaBatch> batch = dmas.EndBatch();
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->cmds_size(), 1);
  EXPECT_EQ(batch->cmds(0).parent_cmd_id(), 2u);
}

TEST(DmaTracker, ABatchLargerThanThePoolsIsBuiltWhole) {
  DmaTracker dmas(0);
  const int loads = DmaTracker::kPooledBatchCmds + 6;
  dmas.BeginBatch(loads);
  for (int i = 0; i < loads; ++i) dmas.Slot(9, static_cast<uint32_t>(i));
  std::shared_ptr<const pb::DmaBatch> batch = dmas.EndBatch();
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->cmds_size(), loads);
  EXPECT_EQ(batch->batch_id(), static_cast<uint64_t>(loads) + 1);
}

TEST(DmaTrackerDeathTest, AReplyForAnUnknownDmaIsAnInvariantFailure) {
  DmaTracker dmas(4);
  dmas.SendOne(1, 0, true);
  dmas.Take(1);
  EXPECT_DEATH(dmas.Take(1), "scheduler of pe 4: reply for unknown DMA 1");
  EXPECT_DEATH(dmas.Slot(1, 0), "operand load outside an admission");
}

TEST(ExternalInputs, AnOpIsReadyAtTheLatestOfItsInputsOnceAllAreKnown) {
  ExternalInputs inputs;
  inputs.Add(/*op=*/3, /*unknown=*/2, SimTime(10));
  inputs.Add(7, 1, SimTime(0));  // ids may skip
  EXPECT_EQ(inputs.Resolve(3, SimTime(5)), std::nullopt);
  EXPECT_EQ(inputs.Resolve(7, SimTime(4)), SimTime(4));
  EXPECT_EQ(inputs.Resolve(3, SimTime(8)), SimTime(10));  // the floor it was added with
  inputs.Add(9, 1, SimTime(0));
  EXPECT_EQ(inputs.Resolve(9, SimTime(30)), SimTime(30));
}

TEST(ExternalInputsDeathTest, AnOpWithoutPendingInputsOrOutOfOrderIsAnInvariantFailure) {
  ExternalInputs inputs;
  inputs.Add(5, 1, SimTime());
  EXPECT_DEATH(inputs.Add(4, 1, SimTime()), "external input of op 4 added out of order");
  EXPECT_EQ(inputs.Resolve(5, SimTime()), SimTime());
  EXPECT_DEATH(inputs.Resolve(5, SimTime()), "op 5 has no pending external input");
}

}  // namespace
}  // namespace ahbm::sim
