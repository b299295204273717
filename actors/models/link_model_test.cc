#include "actors/models/link_model.h"

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

pb::Chip ShippedChip() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_2sip.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

struct Numbers {
  uint64_t period_ps;
  uint64_t bw;
  uint64_t latency;
  SimTime Cyc(uint64_t cycles) const { return SimTime(cycles * period_ps); }
  uint64_t Ser(uint64_t bytes) const { return CeilDiv(bytes, bw); }
};

Numbers NumbersOf(const pb::Link& link) {
  return Numbers{1'000'000 / link.clock_mhz(), link.bytes_per_cycle(), link.latency_cycles()};
}

// An idle link: start at the head, busy ⌈bytes / bw⌉ cycles, head and tail one latency later.
class IdleLinkTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(IdleLinkTest, SerialisesAndAddsLatency) {
  const pb::Link config = ShippedChip().sip().noc().link();
  const Numbers k = NumbersOf(config);
  const uint64_t n = GetParam();
  LinkModel link(config, /*credits=*/std::nullopt);
  const SimTime at = k.Cyc(10);
  const LinkTransmission tx = link.Transmit(PacketAt{at, at}, Bytes(n));
  EXPECT_EQ(tx.seq, 0u);
  EXPECT_EQ(tx.start, at);
  EXPECT_EQ(tx.end, at + k.Cyc(k.Ser(n)));
  EXPECT_EQ(tx.downstream, (PacketAt{at + k.Cyc(k.latency), at + k.Cyc(k.Ser(n) + k.latency)}));
  EXPECT_EQ(link.stats().busy, k.Cyc(k.Ser(n)));
  EXPECT_EQ(link.stats().bytes, Bytes(n));
  EXPECT_EQ(link.stats().packets, 1u);
}

INSTANTIATE_TEST_SUITE_P(Sizes, IdleLinkTest, ::testing::Values(1, 127, 128, 129, 4096));

TEST(LinkModelTest, HeadBetweenEdgesStartsAtTheNextEdge) {
  const pb::Link config = ShippedChip().sip().noc().link();
  const Numbers k = NumbersOf(config);
  LinkModel link(config, /*credits=*/std::nullopt);
  const SimTime at = k.Cyc(2) + SimTime(1);
  const LinkTransmission tx = link.Transmit(PacketAt{at, at}, Bytes(k.bw));
  EXPECT_EQ(tx.start, k.Cyc(3));
  EXPECT_EQ(tx.end, k.Cyc(4));
}

// Back-to-back packets: the second starts when the first ends (first reserved, first served),
// even when its head was there earlier than the first one's.
TEST(LinkModelTest, PacketsSerialiseInReservationOrder) {
  const pb::Link config = ShippedChip().sip().noc().link();
  const Numbers k = NumbersOf(config);
  LinkModel link(config, /*credits=*/std::nullopt);
  const uint64_t n = 4096;
  const LinkTransmission first = link.Transmit(PacketAt{k.Cyc(50), k.Cyc(50)}, Bytes(n));
  const LinkTransmission second = link.Transmit(PacketAt{k.Cyc(0), k.Cyc(0)}, Bytes(n));
  EXPECT_EQ(second.seq, 1u);
  EXPECT_EQ(second.start, first.end);
  EXPECT_EQ(second.end, k.Cyc(50 + 2 * k.Ser(n)));
  EXPECT_EQ(link.free(), second.end);
}

// A link faster than the bytes reaching it holds the packet until its tail is in.
TEST(LinkModelTest, EndWaitsForTheTail) {
  const pb::Chip chip = ShippedChip();
  const pb::Link config = chip.ucie().link();
  const Numbers k = NumbersOf(config);
  LinkModel link(config, /*credits=*/std::nullopt);
  const uint64_t n = 4096;
  const uint64_t tail_cycle = 3 * k.Ser(n);
  const LinkTransmission tx = link.Transmit(PacketAt{k.Cyc(0), k.Cyc(tail_cycle)}, Bytes(n));
  EXPECT_EQ(tx.start, k.Cyc(0));
  EXPECT_EQ(tx.end, k.Cyc(tail_cycle));
  EXPECT_EQ(tx.downstream.tail, k.Cyc(tail_cycle + k.latency));
  EXPECT_EQ(link.stats().busy, k.Cyc(tail_cycle));
}

// With c credits, packet i + c waits for packet i's release.
class CreditTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(CreditTest, PacketWaitsForTheSlotReleasedCreditsEarlier) {
  const pb::Link config = ShippedChip().sip().noc().link();
  const Numbers k = NumbersOf(config);
  const uint32_t credits = GetParam();
  LinkModel link(config, credits);
  const uint64_t n = 4096;
  const uint64_t hold = 1000;  // cycles each packet sits downstream after its start
  ASSERT_GE(hold, credits * k.Ser(n)) << "a round ends before its slots come back";
  for (uint64_t i = 0; i < 3 * credits; ++i) {
    const LinkTransmission tx = link.Transmit(PacketAt{k.Cyc(0), k.Cyc(0)}, Bytes(n));
    // Rounds of `credits` packets: inside a round they serialise; the next round waits for the
    // slots, released `hold` after each packet of this round started.
    const uint64_t round = i / credits;
    EXPECT_EQ(tx.start, k.Cyc(round * hold + (i % credits) * k.Ser(n))) << "packet " << i;
    link.Release(tx.seq, tx.start + k.Cyc(hold));
  }
}

INSTANTIATE_TEST_SUITE_P(Credits, CreditTest, ::testing::Values(1u, 2u, 4u));

}  // namespace
}  // namespace ahbm::sim
