#include "actors/models/dma_model.h"

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kShipped[] = "topology/chip_4sip_fifo.textproto";  // FIFO channels: closed-form times
constexpr char kSmall[] = "topology/small.textproto";

pb::Chip Load(const std::string& path) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(path);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// absl::string_view is not std::string_view here; gmock prints a std::string readably.
std::string Message(const absl::Status& status) { return std::string(status.message()); }

// The numbers every expectation is computed from.
struct Numbers {
  uint64_t channel_period_ps;
  uint64_t pe_period_ps;
  uint64_t bytes_per_cycle;  // one channel
  uint64_t latency_cycles;
  uint64_t interleave;
  uint64_t chunk;
  uint32_t channels_per_pe;
  uint32_t pes_per_cube;
  uint64_t region;
  uint64_t remote_extra_cycles;
};

Numbers NumbersOf(const pb::Chip& chip) {
  const pb::Cube& cube = chip.sip().cube();
  return Numbers{1'000'000 / cube.hbm_channel().clock_mhz(),
                 1'000'000 / cube.pe().clock_mhz(),
                 cube.hbm_channel().bytes_per_cycle(),
                 cube.hbm_channel().first_byte_latency_cycles(),
                 cube.hbm_channel().interleave_bytes(),
                 cube.pe().dma().chunk_bytes(),
                 cube.pe().hbm_channels(),
                 cube.pes(),
                 cube.hbm_bytes() / cube.pes(),
                 cube.pe().dma().remote_channel_extra_cycles()};
}

// One CUBE's channel models, indexed by CUBE-local channel.
std::vector<HbmChannelModel> CubeChannels(const pb::Chip& chip) {
  return std::vector<HbmChannelModel>(chip.sip().cube().hbm_pseudo_channels(),
                                      HbmChannelModel(chip.sip().cube().hbm_channel()));
}

// `bytes` contiguous bytes at `addr` of `owner_pe`'s region (1-byte elements).
HbmTensor Dense(uint32_t owner_pe, Addr addr, Bytes bytes) {
  return HbmTensor{owner_pe, addr, Bytes(1), {bytes.value()}, {}};
}

DmaPlan MustPlan(const DmaModel& dma, const HbmTensor& tensor, DmaKind kind = DmaKind::kHbmRead) {
  absl::StatusOr<DmaPlan> plan = dma.PlanHbm(tensor, kind);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : DmaPlan();
}

// --- Address map ------------------------------------------------------------------------------

struct MapCase {
  uint32_t owner_pe;     // global
  uint64_t addr_blocks;  // address in interleave blocks
  uint64_t addr_offset;  // plus this many bytes
};
void PrintTo(const MapCase& c, std::ostream* os) {
  *os << "pe " << c.owner_pe << " block " << c.addr_blocks << " +" << c.addr_offset;
}

class AddressMapTest : public ::testing::TestWithParam<MapCase> {};

TEST_P(AddressMapTest, InterleavesBlocksRoundRobinOverTheOwnersChannels) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  const DmaModel dma(chip, /*pe=*/0);
  const MapCase& c = GetParam();
  const uint64_t addr = c.addr_blocks * k.interleave + c.addr_offset;
  const uint32_t local_pe = c.owner_pe % k.pes_per_cube;
  EXPECT_EQ(dma.ChannelOf(c.owner_pe, Addr(addr)),
            local_pe * k.channels_per_pe + c.addr_blocks % k.channels_per_pe);
}

INSTANTIATE_TEST_SUITE_P(Addresses, AddressMapTest,
                         ::testing::Values(MapCase{0, 0, 0}, MapCase{0, 0, 255}, MapCase{0, 1, 0},
                                           MapCase{0, 3, 5}, MapCase{0, 8, 0}, MapCase{0, 10, 1},
                                           MapCase{3, 0, 0}, MapCase{3, 15, 17},
                                           MapCase{7, 1000003, 0}, MapCase{10, 9, 0}));

TEST(DmaModelTest, LastAddressOfARegionMapsToTheLastChannel) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  const DmaModel dma(chip, /*pe=*/0);
  // A region is a whole number of stripes, so its last block is on the owner's last channel.
  EXPECT_EQ(dma.ChannelOf(2, Addr(k.region - 1)), 3 * k.channels_per_pe - 1);
}

// --- Dense reads: 8 channels give 8x one channel's bandwidth -----------------------------------

struct DenseCase {
  std::string file;
  uint64_t bytes;  // a whole number of stripes (channels_per_pe * interleave)
  uint64_t issue_cycle;
  uint32_t pe;  // global; reads its own region from address 0
};
void PrintTo(const DenseCase& c, std::ostream* os) {
  *os << c.file << " " << c.bytes << "B at cycle " << c.issue_cycle << " by pe " << c.pe;
}

class DenseReadTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseReadTest, SpreadsEvenlyAndTakesLatencyPlusBytesOverPeBandwidth) {
  const DenseCase& c = GetParam();
  const pb::Chip chip = Load(c.file);
  const Numbers k = NumbersOf(chip);
  ASSERT_EQ(c.bytes % (k.channels_per_pe * k.interleave), 0u);
  DmaModel dma(chip, c.pe);
  std::vector<HbmChannelModel> channels = CubeChannels(chip);

  const DmaPlan plan = MustPlan(dma, Dense(c.pe, Addr(0), Bytes(c.bytes)));
  const uint64_t per_channel = c.bytes / k.channels_per_pe;
  ASSERT_EQ(plan.channels.size(), k.channels_per_pe);
  const uint32_t first = (c.pe % k.pes_per_cube) * k.channels_per_pe;
  for (uint32_t i = 0; i < k.channels_per_pe; ++i) {
    EXPECT_EQ(plan.channels[i].channel, first + i);
    EXPECT_EQ(plan.channels[i].bytes, Bytes(per_channel));
    EXPECT_EQ(plan.channels[i].chunks, per_channel / k.chunk);
  }
  EXPECT_EQ(plan.runs, 1u);
  EXPECT_EQ(plan.useful_bytes, Bytes(c.bytes));
  EXPECT_EQ(plan.charged_bytes, Bytes(c.bytes));
  EXPECT_FALSE(plan.remote);

  const SimTime issue(c.issue_cycle * k.channel_period_ps);
  const DmaTiming timing = dma.Execute(plan, issue, channels);
  // done = issue + latency + N / (channels_per_pe * bytes_per_cycle) cycles.
  const uint64_t pe_bytes_per_cycle = k.channels_per_pe * k.bytes_per_cycle;
  EXPECT_EQ(timing.done, issue + SimTime((k.latency_cycles + c.bytes / pe_bytes_per_cycle) *
                                         k.channel_period_ps));
  EXPECT_EQ(timing.start, issue);
  EXPECT_EQ(timing.channels.size(), k.channels_per_pe);

  // The same bytes from one channel: the data part takes channels_per_pe times as long.
  HbmChannelModel one(chip.sip().cube().hbm_channel());
  const HbmGrant alone = one.Access(issue, Bytes(c.bytes), HbmOp::kRead);
  const uint64_t latency_ps = k.latency_cycles * k.channel_period_ps;
  EXPECT_EQ((alone.done - issue).value() - latency_ps,
            k.channels_per_pe * ((timing.done - issue).value() - latency_ps));
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, DenseReadTest,
    ::testing::Values(DenseCase{kShipped, 65536, 0, 0}, DenseCase{kShipped, 65536, 42, 13},
                      DenseCase{kShipped, 2048, 0, 7}, DenseCase{kShipped, 1 << 20, 5, 1},
                      DenseCase{kSmall, 65536, 0, 3}, DenseCase{kSmall, 4096, 9, 30}));

TEST(DmaModelTest, SixtyFourKibOnTheShippedChipTakes100Plus256Cycles) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  DmaModel dma(chip, /*pe=*/0);
  std::vector<HbmChannelModel> channels = CubeChannels(chip);
  const DmaTiming timing = dma.Execute(MustPlan(dma, Dense(/*owner_pe=*/0, Addr(0), Bytes(65536))),
                                       SimTime(0), channels);
  // On the shipped numbers: 100 + 65536 / (8 * 32) = 356 cycles.
  EXPECT_EQ(timing.done,
            SimTime((k.latency_cycles + 65536 / (k.channels_per_pe * k.bytes_per_cycle)) *
                    k.channel_period_ps));
  EXPECT_EQ(timing.done, SimTime(356 * 1000));
}

TEST(DmaModelTest, UnevenSizeIsDoneWhenTheBusiestChannelIsDone) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  ASSERT_EQ(k.chunk, k.interleave);  // then chunk i is on channel i % channels_per_pe
  DmaModel dma(chip, /*pe=*/0);
  std::vector<HbmChannelModel> channels = CubeChannels(chip);
  const uint64_t bytes = 10 * k.chunk + 1;  // 11 chunks: the first 3 channels get 2
  const DmaPlan plan = MustPlan(dma, Dense(/*owner_pe=*/0, Addr(0), Bytes(bytes)));
  const uint64_t chunks = CeilDiv(bytes, k.chunk);
  ASSERT_EQ(plan.channels.size(), k.channels_per_pe);
  for (uint32_t i = 0; i < k.channels_per_pe; ++i) {
    EXPECT_EQ(plan.channels[i].chunks,
              chunks / k.channels_per_pe + (i < chunks % k.channels_per_pe))
        << "channel " << i;
  }
  EXPECT_EQ(plan.useful_bytes, Bytes(bytes));
  EXPECT_EQ(plan.charged_bytes, Bytes(chunks * k.chunk));
  const DmaTiming timing = dma.Execute(plan, SimTime(0), channels);
  const uint64_t busiest = CeilDiv(chunks, k.channels_per_pe) * k.chunk;
  EXPECT_EQ(timing.done, SimTime((k.latency_cycles + CeilDiv(busiest, k.bytes_per_cycle)) *
                                 k.channel_period_ps));
}

// --- Chunking: runs shorter than a chunk, or straddling one, pay whole chunks ------------------

TEST(DmaModelTest, StridedRunsOfHalfAChunkPayWholeChunks) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  ASSERT_EQ(k.chunk, 256u);
  DmaModel dma(chip, /*pe=*/0);
  // bf16 [64, 64] with a row pitch of one chunk: 64 runs of 128 B, 256 B apart.
  const uint64_t elem = 2;
  const uint64_t rows = 64;
  const uint64_t run_elements = k.chunk / 2 / elem;
  const HbmTensor tile{0, Addr(0), Bytes(elem), {rows, run_elements}, {k.chunk / elem, 1}};
  const DmaPlan plan = MustPlan(dma, tile);
  EXPECT_EQ(plan.runs, rows);
  EXPECT_EQ(plan.run_bytes, Bytes(128));
  EXPECT_EQ(plan.useful_bytes, Bytes(rows * 128));
  EXPECT_EQ(plan.charged_bytes, Bytes(rows * k.chunk));
  EXPECT_EQ(plan.charged_bytes, plan.useful_bytes * 2);
  // One chunk per row, rows one interleave block apart: spread evenly.
  ASSERT_EQ(k.chunk, k.interleave);
  ASSERT_EQ(plan.channels.size(), k.channels_per_pe);
  for (const DmaChannelShare& share : plan.channels) {
    EXPECT_EQ(share.chunks, rows / k.channels_per_pe);
  }

  std::vector<HbmChannelModel> channels = CubeChannels(chip);
  const DmaTiming timing = dma.Execute(plan, SimTime(0), channels);
  const uint64_t per_channel_bytes = rows / k.channels_per_pe * k.chunk;
  EXPECT_EQ(timing.done, SimTime((k.latency_cycles + per_channel_bytes / k.bytes_per_cycle) *
                                 k.channel_period_ps));
  EXPECT_EQ(dma.stats().hbm_useful_bytes, Bytes(rows * 128));
  EXPECT_EQ(dma.stats().hbm_charged_bytes, Bytes(rows * k.chunk));
}

// BANK channels (DESIGN §2): the plan lists each chunk's channel-local address, in transfer order,
// for the bank model to map; the charge is the FIFO plan's. The same strided tile as above: row
// r is chunk r of the region, block r on channel r % 8 at channel-local block r / 8.
TEST(DmaModelTest, BankChannelsGetEachChunksChannelLocalAddress) {
  pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  const HbmTensor tile{0, Addr(0), Bytes(2), {64, k.chunk / 4}, {k.chunk / 2, 1}};
  const DmaPlan fifo = MustPlan(DmaModel(chip, 0), tile);
  for (const DmaChannelShare& share : fifo.channels) EXPECT_TRUE(share.chunk_addrs.empty());
  const pb::Chip hbm3 = Load("topology/chip_4sip_hbm3.textproto");
  *chip.mutable_sip()->mutable_cube()->mutable_hbm_channel() = hbm3.sip().cube().hbm_channel();
  const DmaPlan bank = MustPlan(DmaModel(chip, 0), tile);
  ASSERT_EQ(bank.channels.size(), fifo.channels.size());
  for (size_t i = 0; i < bank.channels.size(); ++i) {
    const DmaChannelShare& share = bank.channels[i];
    EXPECT_EQ(share.chunks, fifo.channels[i].chunks);
    EXPECT_EQ(share.bytes, fifo.channels[i].bytes);
    ASSERT_EQ(share.chunk_addrs.size(), share.chunks);
    for (uint64_t j = 0; j < share.chunk_addrs.size(); ++j) {
      EXPECT_EQ(share.chunk_addrs[j], j * k.chunk) << "channel " << share.channel << " chunk " << j;
    }
  }
}

struct RunCase {
  uint64_t offset;  // run start, bytes from address 0
  uint64_t length;  // run bytes
  uint64_t expected_chunks;
};
void PrintTo(const RunCase& c, std::ostream* os) {
  *os << "[" << c.offset << ", +" << c.length << ")";
}

class RunChunksTest : public ::testing::TestWithParam<RunCase> {};

TEST_P(RunChunksTest, ARunPaysEveryChunkItTouches) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  ASSERT_EQ(k.chunk, 256u);
  const DmaModel dma(chip, /*pe=*/0);
  const RunCase& c = GetParam();
  const DmaPlan plan = MustPlan(dma, Dense(/*owner_pe=*/0, Addr(c.offset), Bytes(c.length)));
  EXPECT_EQ(plan.charged_bytes, Bytes(c.expected_chunks * k.chunk));
  EXPECT_EQ(plan.useful_bytes, Bytes(c.length));
  // The channel shares add up to the chunks touched.
  uint64_t chunks = 0;
  for (const DmaChannelShare& share : plan.channels) chunks += share.chunks;
  EXPECT_EQ(chunks, c.expected_chunks);
}

INSTANTIATE_TEST_SUITE_P(Runs, RunChunksTest,
                         ::testing::Values(RunCase{0, 256, 1},    // aligned: one chunk
                                           RunCase{128, 256, 2},  // straddles: both chunks
                                           RunCase{255, 2, 2},    // 2 bytes over a boundary
                                           RunCase{0, 1, 1},      // 1 byte costs a chunk
                                           RunCase{100, 100, 1},  // inside one chunk
                                           RunCase{128, 512, 3},  // 2 chunks' worth, 3 touched
                                           RunCase{256, 2048, 8}));

TEST(DmaModelTest, RunStraddlingAChunkBoundaryChargesBothChannels) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  ASSERT_EQ(k.chunk, k.interleave);
  DmaModel dma(chip, /*pe=*/0);
  // One bf16 run of a chunk's length, starting half a chunk in: touches chunks 0 and 1.
  const HbmTensor run{0, Addr(k.chunk / 2), Bytes(2), {k.chunk / 2}, {}};
  const DmaPlan plan = MustPlan(dma, run);
  ASSERT_EQ(plan.channels.size(), 2u);
  EXPECT_EQ(plan.channels[0], (DmaChannelShare{0, 1, Bytes(k.chunk)}));
  EXPECT_EQ(plan.channels[1], (DmaChannelShare{1, 1, Bytes(k.chunk)}));
  EXPECT_EQ(plan.charged_bytes, Bytes(2 * k.chunk));
  std::vector<HbmChannelModel> channels = CubeChannels(chip);
  const DmaTiming timing = dma.Execute(plan, SimTime(0), channels);
  EXPECT_EQ(timing.done,
            SimTime((k.latency_cycles + k.chunk / k.bytes_per_cycle) * k.channel_period_ps));
}

TEST(DmaModelTest, AChunkSharedWithThePreviousRunIsChargedOnce) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  const DmaModel dma(chip, /*pe=*/0);
  // Runs of half a chunk, 3/4 chunk apart: [0, c/2), [3c/4, 5c/4), [3c/2, 2c).
  // Chunks touched: {0}, {0, 1}, {1}: charged 2 (repeats of the previous run's chunk are free).
  const uint64_t elem = 2;
  const HbmTensor t{0, Addr(0), Bytes(elem), {3, k.chunk / 2 / elem}, {3 * k.chunk / 4 / elem, 1}};
  const DmaPlan plan = MustPlan(dma, t);
  EXPECT_EQ(plan.runs, 3u);
  EXPECT_EQ(plan.charged_bytes, Bytes(2 * k.chunk));
}

TEST(DmaModelTest, NonUnitInnerStrideMakesElementRuns) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  const DmaModel dma(chip, /*pe=*/0);
  // A column of a row-major fp32 matrix with one chunk per row: 16 single elements, one chunk
  // apart...
  const uint64_t elem = 4;
  const HbmTensor column{0, Addr(0), Bytes(elem), {16}, {k.chunk / elem}};
  const DmaPlan plan = MustPlan(dma, column);
  EXPECT_EQ(plan.runs, 16u);
  EXPECT_EQ(plan.run_bytes, Bytes(elem));
  EXPECT_EQ(plan.charged_bytes, Bytes(16 * k.chunk));
  // ... and contiguous dims merge into one run however they are written.
  const HbmTensor merged{0, Addr(0), Bytes(elem), {4, 8, 32}, {256, 32, 1}};
  const DmaPlan dense = MustPlan(dma, merged);
  EXPECT_EQ(dense.runs, 1u);
  EXPECT_EQ(dense.run_bytes, Bytes(4 * 8 * 32 * elem));
}

// --- Remote channels and contention -----------------------------------------------------------

TEST(DmaModelTest, RemotePeReadPaysTheExtraCycles) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  DmaModel local(chip, /*pe=*/0);
  DmaModel remote(chip, /*pe=*/1);
  std::vector<HbmChannelModel> local_channels = CubeChannels(chip);
  std::vector<HbmChannelModel> remote_channels = CubeChannels(chip);
  const uint64_t bytes = 2048;

  const DmaPlan local_plan = MustPlan(local, Dense(/*owner_pe=*/0, Addr(0), Bytes(bytes)));
  const DmaPlan remote_plan = MustPlan(remote, Dense(/*owner_pe=*/0, Addr(0), Bytes(bytes)));
  EXPECT_FALSE(local_plan.remote);
  EXPECT_TRUE(remote_plan.remote);
  EXPECT_EQ(remote_plan.channels, local_plan.channels);  // PE 0's channels either way
  EXPECT_EQ(remote_plan.channels.front().channel, 0u);

  const DmaTiming a = local.Execute(local_plan, SimTime(0), local_channels);
  const DmaTiming b = remote.Execute(remote_plan, SimTime(0), remote_channels);
  EXPECT_EQ(b.done, a.done + SimTime(k.remote_extra_cycles * k.pe_period_ps));
  EXPECT_EQ(b.done - a.done, SimTime(8 * 1000));  // +8 cycles on the shipped chip
  EXPECT_EQ(remote.ExtraLatency(remote_plan), SimTime(k.remote_extra_cycles * k.pe_period_ps));
  EXPECT_EQ(local.ExtraLatency(local_plan), SimTime(0));
}

TEST(DmaModelTest, TwoPesContendingForOneChannelSerialise) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  DmaModel pe0(chip, /*pe=*/0);
  DmaModel pe1(chip, /*pe=*/1);
  std::vector<HbmChannelModel> channels = CubeChannels(chip);  // shared by both
  const DmaTiming first = pe0.Execute(MustPlan(pe0, Dense(/*owner_pe=*/0, Addr(0), Bytes(k.chunk))),
                                      SimTime(0), channels);
  const DmaTiming second = pe1.Execute(
      MustPlan(pe1, Dense(/*owner_pe=*/0, Addr(0), Bytes(k.chunk))), SimTime(0), channels);
  ASSERT_EQ(first.channels.size(), 1u);
  ASSERT_EQ(second.channels.size(), 1u);
  EXPECT_EQ(second.channels[0].channel, first.channels[0].channel);
  EXPECT_EQ(second.channels[0].grant.start, first.channels[0].grant.free_at);
  const uint64_t occupancy = k.chunk / k.bytes_per_cycle;
  EXPECT_EQ(second.done, first.channels[0].grant.free_at +
                             SimTime((k.latency_cycles + occupancy) * k.channel_period_ps) +
                             SimTime(k.remote_extra_cycles * k.pe_period_ps));
  EXPECT_EQ(channels[0].stats().requests, 2u);
}

TEST(DmaModelTest, TwoLargeDmasOnTheSameChannelsSerialiseOnEveryChannel) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  DmaModel pe0(chip, /*pe=*/0);
  DmaModel pe1(chip, /*pe=*/1);
  std::vector<HbmChannelModel> channels = CubeChannels(chip);
  const uint64_t bytes = 65536;
  const SimTime issue(10 * k.channel_period_ps);
  const DmaTiming first =
      pe0.Execute(MustPlan(pe0, Dense(/*owner_pe=*/0, Addr(0), Bytes(bytes))), issue, channels);
  const DmaTiming second =
      pe1.Execute(MustPlan(pe1, Dense(/*owner_pe=*/0, Addr(0), Bytes(bytes))), issue, channels);
  ASSERT_EQ(first.channels.size(), second.channels.size());
  for (size_t i = 0; i < first.channels.size(); ++i) {
    EXPECT_EQ(second.channels[i].grant.start, first.channels[i].grant.free_at) << i;
  }
  const uint64_t occupancy = bytes / k.channels_per_pe / k.bytes_per_cycle;
  EXPECT_EQ(second.done, issue + SimTime((k.latency_cycles + 2 * occupancy) * k.channel_period_ps) +
                             SimTime(k.remote_extra_cycles * k.pe_period_ps));
}

TEST(DmaModelTest, PesReadingTheirOwnRegionsDoNotContend) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  DmaModel pe0(chip, /*pe=*/0);
  DmaModel pe1(chip, /*pe=*/1);
  std::vector<HbmChannelModel> channels = CubeChannels(chip);
  const DmaTiming a = pe0.Execute(MustPlan(pe0, Dense(/*owner_pe=*/0, Addr(0), Bytes(65536))),
                                  SimTime(0), channels);
  const DmaTiming b = pe1.Execute(MustPlan(pe1, Dense(/*owner_pe=*/1, Addr(0), Bytes(65536))),
                                  SimTime(0), channels);
  EXPECT_EQ(a.done, b.done);
  EXPECT_EQ(b.channels.front().channel, k.channels_per_pe);
}

// --- Errors -----------------------------------------------------------------------------------

TEST(DmaModelTest, AddressInAnotherCubeIsAnErrorNamingPeAddressAndReason) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  const DmaModel dma(chip, /*pe=*/3);
  const uint32_t other_cube_pe = k.pes_per_cube;  // sip0.cube1.pe0
  const absl::StatusOr<DmaPlan> plan =
      dma.PlanHbm(Dense(other_cube_pe, Addr(0x1000), Bytes(256)), DmaKind::kHbmRead);
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(plan.status()),
              AllOf(HasSubstr("pe 3 (sip0.cube0.pe3)"), HasSubstr("0x1000"),
                    HasSubstr("sip0.cube1.pe0"), HasSubstr("another CUBE"), HasSubstr("NOC")));
}

TEST(DmaModelTest, AddressOutsideTheRegionIsAnError) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  const DmaModel dma(chip, /*pe=*/2);
  const absl::StatusOr<DmaPlan> plan =
      dma.PlanHbm(Dense(/*owner_pe=*/2, Addr(k.region - 128), Bytes(256)), DmaKind::kHbmRead);
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(plan.status()),
              AllOf(HasSubstr("pe 2 (sip0.cube0.pe2)"), HasSubstr("outside the PE's HBM region")));
  // The last byte of the region is fine.
  EXPECT_TRUE(
      dma.PlanHbm(Dense(/*owner_pe=*/2, Addr(k.region - 256), Bytes(256)), DmaKind::kHbmRead).ok());
  // A strided tensor whose last row runs off the end.
  const HbmTensor strided{2, Addr(k.region - 4096), Bytes(2), {3, 64}, {1024, 1}};
  EXPECT_THAT(Message(dma.PlanHbm(strided, DmaKind::kHbmWrite).status()),
              HasSubstr("outside the PE's HBM region"));
  // Overflowing shapes do not wrap around.
  const HbmTensor huge{2, Addr(0), Bytes(4), {uint64_t{1} << 40, uint64_t{1} << 40}, {}};
  EXPECT_THAT(Message(dma.PlanHbm(huge, DmaKind::kHbmRead).status()), HasSubstr("beyond 2^64"));
}

struct BadCase {
  std::string name;
  HbmTensor tensor;
  std::string reason;
};
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadRequestTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadRequestTest, IsInvalidArgumentNamingPeAndReason) {
  const pb::Chip chip = Load(kShipped);
  const DmaModel dma(chip, /*pe=*/5);
  const absl::StatusOr<DmaPlan> plan = dma.PlanHbm(GetParam().tensor, DmaKind::kHbmRead);
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(plan.status()),
              AllOf(HasSubstr("pe 5 (sip0.cube0.pe5)"), HasSubstr(GetParam().reason)));
}

INSTANTIATE_TEST_SUITE_P(
    Bad, BadRequestTest,
    ::testing::Values(
        BadCase{"ZeroDim", HbmTensor{5, Addr(64), Bytes(2), {4, 0}, {}}, "zero-sized"},
        BadCase{"ZeroElement", HbmTensor{5, Addr(64), Bytes(0), {4}, {}}, "zero-sized"},
        BadCase{"StridesMismatch", HbmTensor{5, Addr(0), Bytes(2), {4, 4}, {4}},
                "strides [4] has 1 entries but shape [4, 4] has 2"},
        BadCase{"Broadcast", HbmTensor{5, Addr(0), Bytes(2), {4, 4}, {0, 1}}, "stride 0"},
        BadCase{"NoSuchPe", HbmTensor{100000, Addr(0), Bytes(2), {4}, {}}, "no such PE"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

// --- Deterministic channel order ---------------------------------------------------------------

TEST(DmaModelTest, PlanListsChannelsInAscendingOrderWhereverTheTensorStarts) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  DmaModel dma(chip, /*pe=*/3);
  // Starts on the owner's channel 5 and wraps round: still listed 0..7 (of PE 3: 24..31).
  const HbmTensor t =
      Dense(/*owner_pe=*/3, Addr(5 * k.interleave), Bytes(k.channels_per_pe * k.interleave));
  const DmaPlan plan = MustPlan(dma, t);
  ASSERT_EQ(plan.channels.size(), k.channels_per_pe);
  for (uint32_t i = 0; i < k.channels_per_pe; ++i) {
    EXPECT_EQ(plan.channels[i].channel, 3 * k.channels_per_pe + i);
  }
  EXPECT_EQ(MustPlan(dma, t), plan);  // same input, same plan
  std::vector<HbmChannelModel> channels = CubeChannels(chip);
  const DmaTiming timing = dma.Execute(plan, SimTime(0), channels);
  for (uint32_t i = 0; i < k.channels_per_pe; ++i) {
    EXPECT_EQ(timing.channels[i].channel, plan.channels[i].channel);
  }
  // Only touched channels are listed.
  const DmaPlan two =
      MustPlan(dma, Dense(/*owner_pe=*/3, Addr(6 * k.interleave), Bytes(2 * k.interleave)));
  ASSERT_EQ(two.channels.size(), 2u);
  EXPECT_EQ(two.channels[0].channel, 3 * k.channels_per_pe + 6);
  EXPECT_EQ(two.channels[1].channel, 3 * k.channels_per_pe + 7);
}

// --- TCM copies and DmaCmd --------------------------------------------------------------------

TEST(DmaModelTest, TcmCopyMovesTheDocumentedRateAndSerialises) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  DmaModel dma(chip, /*pe=*/0);
  const absl::StatusOr<DmaPlan> plan = dma.PlanTcmCopy(Bytes(65536));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kind, DmaKind::kTcmCopy);
  const SimTime issue(3 * k.pe_period_ps);
  const DmaTiming first = dma.Execute(*plan, issue, {});
  const uint64_t cycles = 65536 / kTcmCopyBytesPerCycle;
  EXPECT_EQ(first.start, issue);
  EXPECT_EQ(first.done, issue + SimTime(cycles * k.pe_period_ps));
  const DmaTiming second = dma.Execute(*plan, issue, {});
  EXPECT_EQ(second.start, first.done);
  EXPECT_EQ(second.done, first.done + SimTime(cycles * k.pe_period_ps));
  EXPECT_EQ(dma.stats().tcm_copy_bytes, Bytes(2 * 65536));
  EXPECT_EQ(dma.stats().tcm_busy_ps, SimTime(2 * cycles * k.pe_period_ps));
  // A partial cycle costs a whole one.
  const DmaTiming odd =
      dma.Execute(*dma.PlanTcmCopy(Bytes(kTcmCopyBytesPerCycle + 1)), second.done, {});
  EXPECT_EQ(odd.done, second.done + SimTime(2 * k.pe_period_ps));
  EXPECT_THAT(Message(dma.PlanTcmCopy(Bytes(0)).status()), HasSubstr("zero-sized TCM copy"));
}

pb::TensorRef Ref(pb::MemorySpace space, uint32_t pe, uint64_t addr, pb::DType dtype,
                  std::vector<uint64_t> shape, std::vector<uint64_t> strides = {}) {
  pb::TensorRef ref;
  ref.set_space(space);
  ref.set_pe(pe);
  ref.set_addr(addr);
  ref.set_dtype(dtype);
  for (uint64_t d : shape) ref.add_shape(d);
  for (uint64_t s : strides) ref.add_strides(s);
  return ref;
}

pb::DmaCmd Cmd(pb::TensorRef src, pb::TensorRef dst) {
  pb::DmaCmd cmd;
  cmd.set_cmd_id(7);
  *cmd.mutable_src() = std::move(src);
  *cmd.mutable_dst() = std::move(dst);
  return cmd;
}

TEST(DmaModelTest, DmaCmdBecomesReadWriteOrTcmCopy) {
  const pb::Chip chip = Load(kShipped);
  const Numbers k = NumbersOf(chip);
  DmaModel dma(chip, /*pe=*/1);
  std::vector<HbmChannelModel> channels = CubeChannels(chip);

  // HBM -> TCM: a read of the HBM side, with its strides.
  const absl::StatusOr<DmaPlan> read = dma.Plan(Cmd(
      Ref(pb::HBM, 1, 0, pb::BF16, {64, 64}, {128, 1}), Ref(pb::TCM, 1, 0, pb::BF16, {64, 64})));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kind, DmaKind::kHbmRead);
  EXPECT_EQ(read->useful_bytes, Bytes(64 * 64 * 2));
  EXPECT_EQ(read->charged_bytes, Bytes(64 * k.chunk));

  // TCM -> HBM: a write of the HBM side; the channels count written bytes.
  const absl::StatusOr<DmaPlan> write =
      dma.Plan(Cmd(Ref(pb::TCM, 1, 0, pb::FP32, {512}), Ref(pb::HBM, 1, 0, pb::FP32, {512})));
  ASSERT_TRUE(write.ok()) << write.status();
  EXPECT_EQ(write->kind, DmaKind::kHbmWrite);
  dma.Execute(*write, SimTime(0), channels);
  EXPECT_EQ(channels[k.channels_per_pe].stats().bytes_written, Bytes(k.interleave));
  EXPECT_EQ(channels[k.channels_per_pe].stats().bytes_read, Bytes(0));

  // TCM -> TCM: a copy of the bytes.
  const absl::StatusOr<DmaPlan> copy = dma.Plan(
      Cmd(Ref(pb::TCM, 1, 0, pb::BF16, {8, 128}), Ref(pb::TCM, 1, 4096, pb::BF16, {1024})));
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->kind, DmaKind::kTcmCopy);
  EXPECT_EQ(copy->charged_bytes, Bytes(8 * 128 * 2));
}

struct BadCmdCase {
  std::string name;
  pb::DmaCmd cmd;
  std::string reason;
};
void PrintTo(const BadCmdCase& c, std::ostream* os) { *os << c.name; }

class BadCmdTest : public ::testing::TestWithParam<BadCmdCase> {};

TEST_P(BadCmdTest, IsInvalidArgument) {
  const pb::Chip chip = Load(kShipped);
  const DmaModel dma(chip, /*pe=*/1);
  const absl::StatusOr<DmaPlan> plan = dma.Plan(GetParam().cmd);
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(plan.status()), AllOf(HasSubstr("pe 1 (sip0.cube0.pe1)"), HasSubstr("cmd 7"),
                                            HasSubstr(GetParam().reason)));
}

INSTANTIATE_TEST_SUITE_P(
    Bad, BadCmdTest,
    ::testing::Values(
        BadCmdCase{"HbmToHbm",
                   Cmd(Ref(pb::HBM, 1, 0, pb::BF16, {64}), Ref(pb::HBM, 1, 256, pb::BF16, {64})),
                   "only HBM -> TCM"},
        BadCmdCase{"DtypeMismatch",
                   Cmd(Ref(pb::HBM, 1, 0, pb::BF16, {64}), Ref(pb::TCM, 1, 0, pb::FP32, {64})),
                   "one dtype"},
        BadCmdCase{"NoDtype",
                   Cmd(Ref(pb::HBM, 1, 0, pb::DTYPE_UNSPECIFIED, {64}),
                       Ref(pb::TCM, 1, 0, pb::DTYPE_UNSPECIFIED, {64})),
                   "one dtype"},
        BadCmdCase{"ElementCountMismatch",
                   Cmd(Ref(pb::HBM, 1, 0, pb::BF16, {64}), Ref(pb::TCM, 1, 0, pb::BF16, {32})),
                   "different numbers of elements"},
        BadCmdCase{"OtherPesTcm",
                   Cmd(Ref(pb::HBM, 1, 0, pb::BF16, {64}), Ref(pb::TCM, 2, 0, pb::BF16, {64})),
                   "TCM of pe 2"},
        BadCmdCase{"EmptyTcmCopy",
                   Cmd(Ref(pb::TCM, 1, 0, pb::BF16, {0}), Ref(pb::TCM, 1, 0, pb::BF16, {0})),
                   "zero-sized TCM copy"},
        BadCmdCase{"EmptyRead",
                   Cmd(Ref(pb::HBM, 1, 0, pb::BF16, {4, 0}), Ref(pb::TCM, 1, 0, pb::BF16, {0})),
                   "zero-sized"},
        BadCmdCase{"OtherCubeHbm",
                   Cmd(Ref(pb::HBM, 9, 0, pb::BF16, {64}), Ref(pb::TCM, 1, 0, pb::BF16, {64})),
                   "another CUBE"}),
    [](const ::testing::TestParamInfo<BadCmdCase>& info) { return info.param.name; });

// --- The plan against a literal walk of the contract ------------------------------------------

// The chunks the contract charges `t`, per CUBE-local channel, walked element by element in
// row-major order: each element a run of its own (back-to-back pieces of one run charge that
// run's chunks under the merge rule), each chunk's channel from ChannelOf.
std::map<uint32_t, uint64_t> ChunksByWalk(const DmaModel& dma, const HbmTensor& t) {
  const uint64_t chunk = dma.chunk_bytes().value();
  const uint64_t elem = t.element_bytes.value();
  const size_t rank = t.shape.size();
  std::vector<uint64_t> strides = t.strides;
  if (strides.empty()) {
    strides.assign(rank, 1);
    for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * t.shape[d];
  }
  std::map<uint32_t, uint64_t> chunks;
  std::optional<uint64_t> previous_last;
  std::vector<uint64_t> idx(rank, 0);
  while (true) {
    uint64_t offset = 0;
    for (size_t d = 0; d < rank; ++d) offset += idx[d] * strides[d];
    const uint64_t addr = t.base.value() + offset * elem;
    const uint64_t first = addr / chunk;
    const uint64_t last = (addr + elem - 1) / chunk;
    for (uint64_t c = first; c <= last; ++c) {
      if (c == first && previous_last == c) continue;
      ++chunks[dma.ChannelOf(t.owner_pe, Addr(c * chunk))];
    }
    previous_last = last;
    size_t d = rank;
    while (d > 0 && ++idx[d - 1] == t.shape[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
  return chunks;
}

// A random strided tensor of at most ~20k elements in `owner_pe`'s region: dense or not, dims
// of size 1, contiguous inner dims, rows whose stride repeats the channel map after a few
// rows or only after many, bases and strides off the chunk grid.
HbmTensor RandomTensor(std::mt19937_64& rng, uint32_t owner_pe) {
  const auto uniform = [&rng](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  HbmTensor t;
  t.owner_pe = owner_pe;
  t.element_bytes = Bytes(uint64_t{1} << uniform(0, 2));
  t.base = Addr(uniform(0, 1) ? uniform(0, 1 << 20) : uniform(0, 1 << 12) * 256);
  const size_t rank = uniform(0, 4);
  uint64_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    const uint64_t room = std::max<uint64_t>(1, 20000 / elements);
    t.shape.push_back(uniform(0, 3) == 0 ? 1 : std::min<uint64_t>(uniform(1, room), 300));
    elements *= t.shape.back();
  }
  if (uniform(0, 3) == 0) return t;  // dense
  uint64_t inner = 1;  // the elements the dims inside span, for a contiguous stride
  t.strides.assign(rank, 0);
  for (size_t d = rank; d-- > 0;) {
    switch (uniform(0, 3)) {
      case 0:  // contiguous with the dims inside
        t.strides[d] = inner;
        break;
      case 1:  // whole chunks apart
        t.strides[d] = uniform(1, 64) * 256 / t.element_bytes.value();
        break;
      case 2:  // a few elements
        t.strides[d] = uniform(1, 40);
        break;
      default:  // anywhere
        t.strides[d] = uniform(1, 5000);
    }
    inner = t.strides[d] * t.shape[d];
  }
  return t;
}

struct ChunkingCase {
  std::string name;
  uint64_t chunk_bytes;
  uint64_t interleave_bytes;
  uint32_t channels_per_pe;
};
void PrintTo(const ChunkingCase& c, std::ostream* os) { *os << c.name; }

class PlanMatchesWalkTest : public ::testing::TestWithParam<ChunkingCase> {};

TEST_P(PlanMatchesWalkTest, OnRandomTensors) {
  const ChunkingCase& c = GetParam();
  pb::Chip chip = Load(kShipped);
  pb::Cube& cube = *chip.mutable_sip()->mutable_cube();
  cube.mutable_pe()->mutable_dma()->set_chunk_bytes(c.chunk_bytes);
  cube.mutable_hbm_channel()->set_interleave_bytes(c.interleave_bytes);
  cube.mutable_pe()->set_hbm_channels(c.channels_per_pe);
  cube.set_hbm_pseudo_channels(c.channels_per_pe * cube.pes());
  // 2^22 stripes per PE region.
  cube.set_hbm_bytes(uint64_t{cube.pes()} * c.interleave_bytes * c.channels_per_pe << 22);
  const uint32_t issuer = 2;
  const DmaModel dma(chip, issuer);
  std::mt19937_64 rng(20240610);
  // More tensors than the memo holds (DmaModel::kMemoEntries), so it is also emptied once.
  for (int n = 0; n < 4500; ++n) {
    const HbmTensor t = RandomTensor(rng, /*owner_pe=*/n % 4);
    SCOPED_TRACE(testing::Message() << "tensor " << n << ": pe " << t.owner_pe << " base "
                                    << t.base.value() << " element " << t.element_bytes.value()
                                    << " shape " << ::testing::PrintToString(t.shape)
                                    << " strides " << ::testing::PrintToString(t.strides));
    const DmaPlan plan = MustPlan(dma, t);
    std::map<uint32_t, uint64_t> planned;
    for (const DmaChannelShare& share : plan.channels) {
      EXPECT_EQ(share.bytes, Bytes(share.chunks * c.chunk_bytes));
      planned[share.channel] = share.chunks;
    }
    ASSERT_EQ(planned, ChunksByWalk(dma, t));
    uint64_t elements = 1;
    for (uint64_t d : t.shape) elements *= d;
    EXPECT_EQ(plan.useful_bytes, t.element_bytes * elements);

    // The same tensor whole stripes further on: the planner's memo (FIFO channels) answers it
    // from the walk above; the answer matches the contract's walk there and a fresh model's.
    HbmTensor shifted = t;
    shifted.base += Bytes(uint64_t{c.interleave_bytes} * c.channels_per_pe * (1 + n % 5));
    const DmaPlan shifted_plan = MustPlan(dma, shifted);
    std::map<uint32_t, uint64_t> shifted_planned;
    for (const DmaChannelShare& share : shifted_plan.channels) {
      shifted_planned[share.channel] = share.chunks;
    }
    ASSERT_EQ(shifted_planned, ChunksByWalk(dma, shifted));
    EXPECT_EQ(shifted_plan, MustPlan(DmaModel(chip, issuer), shifted));

    // A DmaCmd of the same tensor plans the same.
    if (t.element_bytes == Bytes(1)) continue;
    const pb::DType dtype = t.element_bytes == Bytes(2) ? pb::BF16 : pb::FP32;
    const absl::StatusOr<DmaPlan> from_cmd =
        dma.Plan(Cmd(Ref(pb::HBM, t.owner_pe, t.base.value(), dtype, t.shape, t.strides),
                     Ref(pb::TCM, issuer, 0, dtype, {elements})));
    ASSERT_TRUE(from_cmd.ok()) << from_cmd.status();
    EXPECT_EQ(*from_cmd, plan);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Chunkings, PlanMatchesWalkTest,
    ::testing::Values(ChunkingCase{"Shipped", 256, 256, 8},
                      ChunkingCase{"FourChunksPerBlock", 64, 256, 8},
                      ChunkingCase{"ThreeChannels", 128, 1024, 3}),
    [](const ::testing::TestParamInfo<ChunkingCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ahbm::sim
