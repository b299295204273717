#include "actors/models/hbm_channel_model.h"

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

// The shipped chip's channel: every expectation below is computed from these numbers.
pb::HbmChannel ShippedChannel() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip_fifo.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? chip->sip().cube().hbm_channel() : pb::HbmChannel();
}

struct Numbers {
  uint64_t period_ps;
  uint64_t bytes_per_cycle;
  uint64_t latency_cycles;
};

Numbers NumbersOf(const pb::HbmChannel& c) {
  return Numbers{1'000'000 / c.clock_mhz(), c.bytes_per_cycle(), c.first_byte_latency_cycles()};
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// N bytes from an idle channel take first-byte latency + ceil(N / bandwidth) cycles.
class SingleRequestTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SingleRequestTest, TakesLatencyPlusBytesOverBandwidth) {
  const pb::HbmChannel config = ShippedChannel();
  const Numbers k = NumbersOf(config);
  const uint64_t n = GetParam();
  for (const uint64_t arrival_cycle : {uint64_t{0}, uint64_t{7}}) {
    HbmChannelModel channel(config);
    const SimTime arrival(arrival_cycle * k.period_ps);
    const HbmGrant grant = channel.Access(arrival, Bytes(n), HbmOp::kRead);
    const uint64_t occupancy = CeilDiv(n, k.bytes_per_cycle);
    EXPECT_EQ(grant.start, arrival);
    EXPECT_EQ(grant.free_at, arrival + SimTime(occupancy * k.period_ps));
    EXPECT_EQ(grant.done, arrival + SimTime((k.latency_cycles + occupancy) * k.period_ps))
        << n << " bytes at cycle " << arrival_cycle;
    EXPECT_EQ(channel.OccupancyCycles(Bytes(n)), Cycles(occupancy));
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, SingleRequestTest,
                         ::testing::Values(1, 31, 32, 33, 100, 256, 1000, 4096, 8192, 65536));

// Back-to-back requests stream: the second starts when the first's occupancy ends and is done
// latency + N2 / bandwidth later, i.e. N2 / bandwidth after the first is done.
struct PairCase {
  uint64_t first_bytes;
  uint64_t second_bytes;
};
void PrintTo(const PairCase& c, std::ostream* os) {
  *os << c.first_bytes << "B then " << c.second_bytes << "B";
}

class BackToBackTest : public ::testing::TestWithParam<PairCase> {};

TEST_P(BackToBackTest, SecondStreamsBehindFirst) {
  const pb::HbmChannel config = ShippedChannel();
  const Numbers k = NumbersOf(config);
  HbmChannelModel channel(config);
  const SimTime t(3 * k.period_ps);
  const HbmGrant first = channel.Access(t, Bytes(GetParam().first_bytes), HbmOp::kRead);
  const HbmGrant second = channel.Access(t, Bytes(GetParam().second_bytes), HbmOp::kRead);
  const uint64_t occupancy1 = CeilDiv(GetParam().first_bytes, k.bytes_per_cycle);
  const uint64_t occupancy2 = CeilDiv(GetParam().second_bytes, k.bytes_per_cycle);

  EXPECT_EQ(first.free_at, t + SimTime(occupancy1 * k.period_ps));
  EXPECT_EQ(second.start, first.free_at);
  EXPECT_EQ(second.done, first.free_at + SimTime((k.latency_cycles + occupancy2) * k.period_ps));
  EXPECT_EQ(second.done, first.done + SimTime(occupancy2 * k.period_ps));  // full bandwidth
  EXPECT_EQ(channel.free_at(), second.free_at);
}

INSTANTIATE_TEST_SUITE_P(Pairs, BackToBackTest,
                         ::testing::Values(PairCase{256, 256}, PairCase{32, 8192},
                                           PairCase{8192, 32}, PairCase{100, 33}));

TEST(HbmChannelModelTest, RequestArrivingWhileBusyWaits) {
  const pb::HbmChannel config = ShippedChannel();
  const Numbers k = NumbersOf(config);
  HbmChannelModel channel(config);
  const uint64_t n = 4096;  // occupies 4096 / bytes_per_cycle cycles
  const HbmGrant first = channel.Access(SimTime(0), Bytes(n), HbmOp::kRead);
  const uint64_t occupancy = CeilDiv(n, k.bytes_per_cycle);
  ASSERT_GT(occupancy, 2u);
  const SimTime mid(occupancy / 2 * k.period_ps);
  const HbmGrant second = channel.Access(mid, Bytes(n), HbmOp::kWrite);
  EXPECT_EQ(second.start, first.free_at);
  EXPECT_EQ(second.done, first.free_at + SimTime((k.latency_cycles + occupancy) * k.period_ps));
}

// fifo_efficiency_ppm 896000 (the bank model's sequential stream under all-bank refresh): 4096 B
// at 32 B/cycle hold the bus ceil(4096 / (32 * 0.896)) = ceil(142.857) = 143 cycles, not 128.
TEST(HbmChannelModelTest, AnEfficiencyFactorStretchesTheOccupancy) {
  pb::HbmChannel config = ShippedChannel();
  ASSERT_EQ(config.bytes_per_cycle(), 32u);
  config.set_fifo_efficiency_ppm(896000);
  const Numbers k = NumbersOf(config);
  HbmChannelModel channel(config);
  const HbmGrant g = channel.Access(SimTime(0), Bytes(4096), HbmOp::kRead);
  EXPECT_EQ(g.free_at, SimTime(143 * k.period_ps));
  EXPECT_EQ(g.done, SimTime((k.latency_cycles + 143) * k.period_ps));
}

TEST(HbmChannelModelTest, RequestArrivingAfterTheChannelIsFreeStartsAtItsArrival) {
  const pb::HbmChannel config = ShippedChannel();
  const Numbers k = NumbersOf(config);
  HbmChannelModel channel(config);
  const HbmGrant first = channel.Access(SimTime(0), Bytes(256), HbmOp::kRead);
  const SimTime later = first.done + SimTime(5 * k.period_ps);
  const HbmGrant second = channel.Access(later, Bytes(256), HbmOp::kRead);
  EXPECT_EQ(second.start, later);
}

TEST(HbmChannelModelTest, ArrivalBetweenEdgesStartsAtTheNextEdge) {
  const pb::HbmChannel config = ShippedChannel();
  const Numbers k = NumbersOf(config);
  HbmChannelModel channel(config);
  const HbmGrant grant = channel.Access(SimTime(k.period_ps + 1), Bytes(32), HbmOp::kRead);
  EXPECT_EQ(grant.start, SimTime(2 * k.period_ps));
  EXPECT_EQ(grant.done, SimTime((2 + k.latency_cycles + 1) * k.period_ps));
}

TEST(HbmChannelModelTest, StatsCountOccupancyBytesAndRequests) {
  const pb::HbmChannel config = ShippedChannel();
  const Numbers k = NumbersOf(config);
  HbmChannelModel channel(config);
  channel.Access(SimTime(0), Bytes(100), HbmOp::kRead);
  channel.Access(SimTime(0), Bytes(256), HbmOp::kWrite);
  channel.Access(SimTime(10 * k.period_ps), Bytes(33), HbmOp::kRead);
  const HbmChannelStats& stats = channel.stats();
  EXPECT_EQ(stats.requests, 3u);
  EXPECT_EQ(stats.bytes_read, Bytes(133));
  EXPECT_EQ(stats.bytes_written, Bytes(256));
  const uint64_t busy = CeilDiv(100, k.bytes_per_cycle) + CeilDiv(256, k.bytes_per_cycle) +
                        CeilDiv(33, k.bytes_per_cycle);
  EXPECT_EQ(stats.busy_ps, SimTime(busy * k.period_ps));
}

TEST(HbmChannelModelTest, EqualArrivalsAreServedInCallOrder) {
  const pb::HbmChannel config = ShippedChannel();
  HbmChannelModel channel(config);
  const HbmGrant a = channel.Access(SimTime(0), Bytes(64), HbmOp::kRead);
  const HbmGrant b = channel.Access(SimTime(0), Bytes(32), HbmOp::kRead);
  EXPECT_LT(a.start, b.start);
  EXPECT_EQ(b.start, a.free_at);
}

TEST(HbmChannelModelDeathTest, OutOfOrderArrivalIsABug) {
  const pb::HbmChannel config = ShippedChannel();
  HbmChannelModel channel(config);
  channel.Access(SimTime(5000), Bytes(32), HbmOp::kRead);
  EXPECT_DEATH(channel.Access(SimTime(4000), Bytes(32), HbmOp::kRead), "arrival order");
}

TEST(HbmChannelModelDeathTest, ZeroBytesIsABug) {
  const pb::HbmChannel config = ShippedChannel();
  HbmChannelModel channel(config);
  EXPECT_DEATH(channel.Access(SimTime(0), Bytes(0), HbmOp::kRead), "zero-byte");
}

}  // namespace
}  // namespace ahbm::sim
