#include "kernels/runtime/ipcq_credit.h"

#include "gtest/gtest.h"

namespace ahbm::kernels {
namespace {

TEST(IpcqCreditTest, ASendBlocksOnlyWhenTheQueueLacksCreditForTheWholeMessage) {
  IpcqCredit credit(/*queue_bytes=*/1024);
  EXPECT_FALSE(credit.Send(7, 1000));
  EXPECT_FALSE(credit.Send(7, 24));  // exactly full
  EXPECT_TRUE(credit.Send(7, 1));
  EXPECT_EQ(credit.unpopped(7), 1025u);
}

TEST(IpcqCreditTest, IssuedPopsReturnCreditToTheSender) {
  IpcqCredit credit(1024);
  EXPECT_FALSE(credit.Send(7, 1024));
  EXPECT_TRUE(credit.Send(7, 512));  // 1536 unpopped
  credit.Popped(7, 1024);            // the receiver issued pops for the first message
  EXPECT_EQ(credit.unpopped(7), 512u);
  EXPECT_FALSE(credit.Send(7, 512));
  EXPECT_TRUE(credit.Send(7, 1));
}

TEST(IpcqCreditTest, QueuesKeepTheirOwnCredit) {
  IpcqCredit credit(1024);
  EXPECT_FALSE(credit.Send(7, 1024));
  EXPECT_FALSE(credit.Send(8, 1024));
  EXPECT_TRUE(credit.Send(7, 1));
  EXPECT_EQ(credit.unpopped(8), 1024u);
  EXPECT_EQ(credit.unpopped(9), 0u);
}

TEST(IpcqCreditDeathTest, APopOfMoreThanWasSentDies) {
  IpcqCredit credit(1024);
  credit.Send(7, 100);
  EXPECT_DEATH(credit.Popped(7, 101), "a pop of 101 bytes, 100 bytes sent and not popped");
  EXPECT_DEATH(credit.Popped(8, 1), "queue unit 8: a pop of 1 bytes, 0 bytes sent");
}

}  // namespace
}  // namespace ahbm::kernels
