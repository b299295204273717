#include "actors/models/noc_endpoint_model.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

using Landing = NocEndpointModel::Landing;
using Departure = NocEndpointModel::Departure;

constexpr uint64_t kQueue = 64 * 1024;

SimTime T(uint64_t ps) { return SimTime(ps); }
Bytes B(uint64_t b) { return Bytes(b); }
Departure D(uint64_t id, uint64_t at, Landing landing) { return Departure{id, T(at), landing}; }

// A message that fits the free queue goes at once, into the queue.
TEST(NocEndpointModel, MessageThatFitsGoesAtOnce) {
  NocEndpointModel ep(B(kQueue));
  EXPECT_EQ(ep.Send(T(0), 1, 0, 10, T(100), B(4096)), D(10, 100, Landing::kQueue));
  EXPECT_EQ(ep.Send(T(0), 2, 0, 11, T(50), B(kQueue - 4096)), D(11, 50, Landing::kQueue));
  EXPECT_EQ(ep.queued_bytes(), B(kQueue));
  EXPECT_TRUE(ep.blocked().empty());
}

// A message bigger than the free queue waits for credit; the credit comes back when a receive
// takes a queued message, and the waiting message leaves then.
TEST(NocEndpointModel, MessageBiggerThanFreeQueueWaitsForCredit) {
  NocEndpointModel ep(B(kQueue));
  ASSERT_TRUE(ep.Send(T(0), 1, 0, 10, T(0), B(48 * 1024)).has_value());
  EXPECT_EQ(ep.Send(T(0), 2, 0, 11, T(10), B(32 * 1024)), std::nullopt);
  ASSERT_EQ(ep.blocked().size(), 1u);
  EXPECT_EQ(ep.blocked()[0].message_id, 11u);
  // A receive from another source: no credit change, nothing leaves.
  EXPECT_TRUE(ep.PostRecv(T(20), 3, 0, T(20)).empty());
  // Message 10 is taken at 500 (a receive's completion may lie ahead of the event clock).
  EXPECT_EQ(ep.Consume(T(300), 10, T(500)), std::vector<Departure>{D(11, 500, Landing::kQueue)});
  EXPECT_TRUE(ep.blocked().empty());
  EXPECT_EQ(ep.queued_bytes(), B(32 * 1024));
}

// Credit already on its way back counts: a send after the Consume departs at the return time.
TEST(NocEndpointModel, CreditReturnAheadOfTheClockDelaysTheDeparture) {
  NocEndpointModel ep(B(kQueue));
  ASSERT_TRUE(ep.Send(T(0), 1, 0, 10, T(0), B(kQueue)).has_value());
  EXPECT_TRUE(ep.Consume(T(100), 10, T(700)).empty());
  EXPECT_EQ(ep.Send(T(200), 1, 0, 11, T(300), B(1024)), D(11, 700, Landing::kQueue));
  EXPECT_EQ(ep.Send(T(800), 1, 0, 12, T(900), B(1024)), D(12, 900, Landing::kQueue));
}

// A posted receive takes a message bigger than the whole queue, with no credit spent.
TEST(NocEndpointModel, PostedReceiveTakesAMessageBiggerThanTheQueue) {
  NocEndpointModel ep(B(kQueue));
  EXPECT_TRUE(ep.PostRecv(T(0), 1, 0, T(40)).empty());
  EXPECT_EQ(ep.Send(T(0), 1, 0, 10, T(100), B(4 * kQueue)), D(10, 100, Landing::kPosted));
  EXPECT_EQ(ep.queued_bytes(), B(0));
  // The receive was posted after the send was ready: the message leaves at the post.
  EXPECT_TRUE(ep.PostRecv(T(0), 1, 0, T(300)).empty());
  EXPECT_EQ(ep.Send(T(0), 1, 0, 11, T(200), B(4 * kQueue)), D(11, 300, Landing::kPosted));
  // Consuming a posted message returns no credit.
  EXPECT_TRUE(ep.Consume(T(400), 10, T(400)).empty());
  EXPECT_EQ(ep.queued_bytes(), B(0));
}

// Sent before its receive: a too-big message blocks and leaves when the receive is posted.
TEST(NocEndpointModel, BlockedMessageLeavesAtItsReceivesPost) {
  NocEndpointModel ep(B(kQueue));
  EXPECT_EQ(ep.Send(T(0), 1, 0, 10, T(100), B(2 * kQueue)), std::nullopt);
  // A second message of the same (src, flow) waits behind it even though it fits.
  EXPECT_EQ(ep.Send(T(0), 1, 0, 11, T(120), B(1024)), std::nullopt);
  // Another flow's (request's) message of the same source is independent.
  EXPECT_EQ(ep.Send(T(0), 1, 1, 12, T(130), B(1024)), D(12, 130, Landing::kQueue));
  EXPECT_EQ(ep.PostRecv(T(200), 1, 0, T(250)),
            (std::vector<Departure>{D(10, 250, Landing::kPosted), D(11, 250, Landing::kQueue)}));
  EXPECT_EQ(ep.queued_bytes(), B(2048));
}

// The k-th message pairs with the k-th receive: a receive posted after its message landed in
// the queue is not free for the next message.
TEST(NocEndpointModel, ReceivesPairWithMessagesInOrder) {
  NocEndpointModel ep(B(kQueue));
  EXPECT_EQ(ep.Send(T(0), 1, 0, 10, T(0), B(kQueue)), D(10, 0, Landing::kQueue));
  EXPECT_TRUE(ep.PostRecv(T(10), 1, 0, T(10)).empty());  // takes message 10
  EXPECT_EQ(ep.Send(T(20), 1, 0, 11, T(20), B(1024)), std::nullopt);
  EXPECT_EQ(ep.PostRecv(T(30), 1, 0, T(30)),
            std::vector<Departure>{D(11, 30, Landing::kPosted)});
}

// Two requests share one endpoint queue: one request's queued message holds credit the other
// needs; the other's own receive lets its message through regardless.
TEST(NocEndpointModel, TwoRequestsShareTheEndpoint) {
  NocEndpointModel ep(B(kQueue));
  EXPECT_EQ(ep.Send(T(0), 1, 0, 10, T(0), B(40 * 1024)), D(10, 0, Landing::kQueue));
  EXPECT_EQ(ep.Send(T(0), 2, 1, 11, T(0), B(40 * 1024)), std::nullopt);
  EXPECT_EQ(ep.Send(T(0), 3, 2, 12, T(0), B(40 * 1024)), std::nullopt);
  // Request 2's receive: its message goes to the posted buffer; request 1 still waits.
  EXPECT_EQ(ep.PostRecv(T(50), 3, 2, T(50)), std::vector<Departure>{D(12, 50, Landing::kPosted)});
  ASSERT_EQ(ep.blocked().size(), 1u);
  EXPECT_EQ(ep.blocked()[0].message_id, 11u);
  // Request 0's message is taken: its credit lets request 1's message into the queue.
  EXPECT_TRUE(ep.PostRecv(T(60), 1, 0, T(60)).empty());
  EXPECT_EQ(ep.Consume(T(80), 10, T(80)), std::vector<Departure>{D(11, 80, Landing::kQueue)});
  EXPECT_EQ(ep.queued_bytes(), B(40 * 1024));
}

}  // namespace
}  // namespace ahbm::sim
