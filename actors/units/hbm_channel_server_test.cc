// A BANK channel's server (hbm_channel_actor.h): one 256 B chunk, timed by hand.
#include <cstdint>
#include <vector>

#include "actors/units/hbm_channel_actor.h"
#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

pb::HbmChannel Hbm3() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip_hbm3.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip->sip().cube().hbm_channel();
}

// BANK_GROUP_FIRST: the chunk's 8 bursts go to bank groups 0, 1, 2, 3, 0, 1, 2, 3 (columns 0, 1)
// of bank 0, row 0. ACTs at 0, 4, 8, 12 (tRRD_S 4), so each group's first read may go at 31,
// 35, 39, 43 (tRCD 31) and its second tCCD_L 4 later; FR-FCFS takes the oldest ready read every
// tCCD_S 2: 31 g0, 35 g1, 37 g0', 39 g2, 41 g1', 43 g3, 45 g2', 47 g3'. The last byte: 47 + CL 20
// + burst 2 = 69 cycles, plus the path latency 160 - 53 = 107: 176 cycles of 625 ps.
HbmGrant ReadChunks(HbmChannelServer& server, SimTime now, const std::vector<uint64_t>& addrs) {
  return server.Serve({now, Bytes(256 * addrs.size()), HbmOp::kRead, addrs, Bytes(256)});
}

TEST(HbmChannelServer, ABankChannelTimesAChunkBurstByBurst) {
  HbmModelContext context;
  HbmChannelServer server(0, Hbm3(), nullptr, context);
  ASSERT_TRUE(server.needs_addresses());
  const std::vector<uint64_t> addrs = {0};
  const HbmGrant grant = ReadChunks(server, SimTime(0), addrs);
  EXPECT_EQ(grant.start, SimTime(31 * 625));
  EXPECT_EQ(grant.free_at, SimTime(49 * 625));
  EXPECT_EQ(grant.done, SimTime(176 * 625));
  // The same chunk again at 300 ns = 480 cycles: four open rows, eight hits every tCCD_S from
  // 480 to 494 (g0, g1, g2, g3, then each group's second, tCCD_L already met); done 494 + 22 +
  // 107 = 623.
  const HbmGrant again = ReadChunks(server, SimTime(300'000), addrs);
  EXPECT_EQ(again.start, SimTime(480 * 625));
  EXPECT_EQ(again.done, SimTime(623 * 625));
}

TEST(HbmChannelServer, AFifoChannelHasNoBanks) {
  pb::HbmChannel fifo = Hbm3();
  fifo.set_model(pb::FIFO);
  fifo.clear_bank();
  HbmModelContext context;
  HbmChannelServer server(0, fifo, nullptr, context);
  EXPECT_FALSE(server.needs_addresses());
  // 256 B at 16 B/cycle: 16 cycles after the 160-cycle first byte.
  EXPECT_EQ(server.Serve(SimTime(0), Bytes(256), HbmOp::kRead).done, SimTime(176 * 625));
}

}  // namespace
}  // namespace ahbm::sim
