#include "actors/models/link_network_model.h"

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

using topology::CubeId;
using topology::Dir;

pb::Chip LoadChip(const std::string& path) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(path);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

pb::Chip Chip2() { return LoadChip("topology/chip_2sip.textproto"); }
pb::Chip Chip4() { return LoadChip("topology/chip_4sip.textproto"); }

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t AbsDiff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

// Every expectation below is computed from these topology numbers. All shipped links share one
// clock, so times are counted in its cycles.
struct Numbers {
  uint64_t period_ps;
  uint64_t cols;
  uint64_t noc_bw, noc_lat, packet, credits;
  uint64_t ucie_bw, ucie_lat;
  uint64_t port;  // the UCIe port CUBE's index in the mesh

  SimTime Cyc(uint64_t cycles) const { return SimTime(cycles * period_ps); }
  uint64_t NocSer(uint64_t bytes) const { return CeilDiv(bytes, noc_bw); }
  uint64_t UcieSer(uint64_t bytes) const { return CeilDiv(bytes, ucie_bw); }
  // X-Y hop count between two CUBEs of one SIP, from their coordinates.
  uint64_t Hops(uint64_t a, uint64_t b) const {
    return AbsDiff(a / cols, b / cols) + AbsDiff(a % cols, b % cols);
  }
  std::vector<uint64_t> Packets(uint64_t bytes) const {
    std::vector<uint64_t> sizes;
    for (uint64_t left = bytes; left > 0; left -= std::min(left, packet)) {
      sizes.push_back(std::min(left, packet));
    }
    return sizes;
  }
};

Numbers NumbersOf(const pb::Chip& chip) {
  const pb::Noc& noc = chip.sip().noc();
  const pb::Ucie& ucie = chip.ucie();
  EXPECT_EQ(noc.link().clock_mhz(), ucie.link().clock_mhz()) << "the tests assume one clock";
  const uint64_t cols = chip.sip().cube_mesh().cols();
  return Numbers{1'000'000 / noc.link().clock_mhz(),
                 cols,
                 noc.link().bytes_per_cycle(),
                 noc.link().latency_cycles(),
                 noc.packet_bytes(),
                 noc.credits_per_link(),
                 ucie.link().bytes_per_cycle(),
                 ucie.link().latency_cycles(),
                 ucie.port_cube().row() * cols + ucie.port_cube().col()};
}

// --- H hops cost H hop latencies plus one serialisation ---------------------------------------

struct RouteCase {
  uint32_t from;
  uint32_t to;
  uint64_t bytes;  // at most one packet
  friend std::ostream& operator<<(std::ostream& os, const RouteCase& c) {
    return os << c.from << "->" << c.to << " " << c.bytes << "B";
  }
};

class NocHopsTest : public ::testing::TestWithParam<RouteCase> {};

TEST_P(NocHopsTest, OnePacketPaysEveryHop) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  const RouteCase c = GetParam();
  ASSERT_LE(c.bytes, k.packet);
  for (const uint32_t sip : {0u, 1u}) {
    LinkNetworkModel net(chip);
    const SimTime ready = k.Cyc(100);
    const NetworkMessageTiming t =
        net.Send(ready, CubeId{sip, c.from}, CubeId{sip, c.to}, Bytes(c.bytes));
    const uint64_t hops = k.Hops(c.from, c.to);
    EXPECT_EQ(t.noc_hops, hops);
    EXPECT_EQ(t.ucie_hops, 0u);
    ASSERT_EQ(t.packets.size(), 1u);
    const uint64_t cost = hops == 0 ? 0 : hops * k.noc_lat + k.NocSer(c.bytes);
    EXPECT_EQ(t.delivered, ready + k.Cyc(cost)) << c.from << " -> " << c.to;
    EXPECT_EQ(t.packets[0].injected, ready);
  }
}

INSTANTIATE_TEST_SUITE_P(Routes, NocHopsTest,
                         ::testing::Values(RouteCase{0, 1, 4096}, RouteCase{1, 0, 4096},
                                           RouteCase{0, 4, 4096}, RouteCase{0, 3, 4096},
                                           RouteCase{0, 15, 4096}, RouteCase{15, 0, 4096},
                                           RouteCase{12, 3, 4096}, RouteCase{5, 10, 4096},
                                           RouteCase{9, 6, 100}, RouteCase{3, 12, 1},
                                           RouteCase{6, 6, 4096}));

TEST(LinkNetworkModelTest, ReadyBetweenEdgesInjectsAtTheNextEdge) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  LinkNetworkModel net(chip);
  const NetworkMessageTiming t =
      net.Send(k.Cyc(7) + SimTime(1), CubeId{0, 0}, CubeId{0, 1}, Bytes(k.packet));
  EXPECT_EQ(t.packets[0].injected, k.Cyc(8));
  EXPECT_EQ(t.delivered, k.Cyc(8 + k.noc_lat + k.NocSer(k.packet)));
}

// --- A multi-packet message pipelines ---------------------------------------------------------

struct PipelineCase {
  uint32_t from;
  uint32_t to;
  uint64_t bytes;
  friend std::ostream& operator<<(std::ostream& os, const PipelineCase& c) {
    return os << c.from << "->" << c.to << " " << c.bytes << "B";
  }
};

class NocPipelineTest : public ::testing::TestWithParam<PipelineCase> {};

// The first link sends the packets back to back; every later link is as fast and, with enough
// credits, free when a packet's head gets there. Packet i is delivered at
// ready + H * lat + Σ_{j <= i} ser_j.
TEST_P(NocPipelineTest, PacketsFollowEachOtherAtLinkRate) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  const PipelineCase c = GetParam();
  // A packet holds a downstream slot for lat + ser after its start; packets start every ser.
  ASSERT_LE(CeilDiv(k.noc_lat + k.NocSer(k.packet), k.NocSer(k.packet)), k.credits);
  LinkNetworkModel net(chip);
  const NetworkMessageTiming t =
      net.Send(SimTime(0), CubeId{0, c.from}, CubeId{0, c.to}, Bytes(c.bytes));
  const std::vector<uint64_t> sizes = k.Packets(c.bytes);
  ASSERT_EQ(t.packets.size(), sizes.size());
  const uint64_t hops = k.Hops(c.from, c.to);
  uint64_t sent = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(t.packets[i].bytes, Bytes(sizes[i]));
    EXPECT_EQ(t.packets[i].injected, k.Cyc(sent)) << "packet " << i;
    sent += k.NocSer(sizes[i]);
    EXPECT_EQ(t.packets[i].delivered, k.Cyc(hops * k.noc_lat + sent)) << "packet " << i;
  }
  // Not store-and-forward: the hop latency is paid once, not once per packet.
  EXPECT_EQ(t.delivered, k.Cyc(hops * k.noc_lat + k.NocSer(c.bytes)));
}

INSTANTIATE_TEST_SUITE_P(Messages, NocPipelineTest,
                         ::testing::Values(PipelineCase{0, 1, 2 * 4096},
                                           PipelineCase{0, 15, 10 * 4096 + 1000},
                                           PipelineCase{13, 2, 65536}, PipelineCase{4, 7, 4097}));

// With one credit per link a packet may only enter a link when the previous one has left the
// router behind it: the first link then sends a packet every lat + ser cycles, and packet i is
// delivered at i * (lat + ser) + H * lat + ser.
class OneCreditTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(OneCreditTest, PacketsWaitForTheCredit) {
  pb::Chip chip = Chip2();
  chip.mutable_sip()->mutable_noc()->set_credits_per_link(1);
  const Numbers k = NumbersOf(chip);
  const uint32_t to = GetParam();
  const uint64_t packets = 6;
  LinkNetworkModel net(chip);
  const NetworkMessageTiming t =
      net.Send(SimTime(0), CubeId{0, 0}, CubeId{0, to}, Bytes(packets * k.packet));
  const uint64_t hops = k.Hops(0, to);
  const uint64_t ser = k.NocSer(k.packet);
  ASSERT_EQ(t.packets.size(), packets);
  for (uint64_t i = 0; i < packets; ++i) {
    EXPECT_EQ(t.packets[i].injected, k.Cyc(i * (k.noc_lat + ser))) << "packet " << i;
    EXPECT_EQ(t.packets[i].delivered, k.Cyc(i * (k.noc_lat + ser) + hops * k.noc_lat + ser))
        << "packet " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Destinations, OneCreditTest, ::testing::Values(1u, 2u, 3u, 15u));

// --- Contention -------------------------------------------------------------------------------

TEST(LinkNetworkModelTest, TwoMessagesFromOneCubeSerialiseOnTheFirstLink) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  LinkNetworkModel net(chip);
  const uint64_t ser = k.NocSer(k.packet);
  const NetworkMessageTiming a = net.Send(SimTime(0), CubeId{0, 0}, CubeId{0, 1}, Bytes(k.packet));
  const NetworkMessageTiming b = net.Send(SimTime(0), CubeId{0, 0}, CubeId{0, 1}, Bytes(k.packet));
  EXPECT_EQ(a.delivered, k.Cyc(k.noc_lat + ser));
  EXPECT_EQ(b.packets[0].injected, k.Cyc(ser));
  EXPECT_EQ(b.delivered, k.Cyc(k.noc_lat + 2 * ser));
  EXPECT_EQ(net.NocLink(CubeId{0, 0}, Dir::kEast).stats().busy, k.Cyc(2 * ser));
  EXPECT_EQ(net.NocLink(CubeId{0, 0}, Dir::kEast).stats().packets, 2u);
}

// A router is busy while any link leaving it is: two messages out of CUBE 1 (east and west)
// at once count once, a later one adds its own span; back-to-back packets are one span.
TEST(LinkNetworkModelTest, RouterBusyIsTheUnionOfItsOutLinks) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  LinkNetworkModel net(chip);
  const uint64_t ser = k.NocSer(k.packet);
  EXPECT_EQ(net.NocRouterBusy(CubeId{0, 1}), SimTime(0));
  net.Send(SimTime(0), CubeId{0, 1}, CubeId{0, 2}, Bytes(2 * k.packet));
  net.Send(SimTime(0), CubeId{0, 1}, CubeId{0, 0}, Bytes(k.packet));
  const LinkModel& east = net.NocLink(CubeId{0, 1}, Dir::kEast);
  ASSERT_EQ(east.stats().busy_intervals.size(), 1u);
  EXPECT_EQ(east.stats().busy_intervals[0],
            std::make_pair(SimTime(0), k.Cyc(2 * ser)));
  EXPECT_EQ(net.NocRouterBusy(CubeId{0, 1}), k.Cyc(2 * ser));
  net.Send(k.Cyc(10 * ser), CubeId{0, 1}, CubeId{0, 0}, Bytes(k.packet));
  EXPECT_EQ(net.NocRouterBusy(CubeId{0, 1}), k.Cyc(3 * ser));
  // bytes / bandwidth <= a link's busy time <= its router's.
  EXPECT_LE(k.Cyc(CeilDiv(east.stats().bytes.value(), k.noc_bw)), east.stats().busy);
  // The far routers forwarded nothing; the UCIe links are idle.
  EXPECT_EQ(net.NocRouterBusy(CubeId{0, 2}), SimTime(0));
  EXPECT_EQ(net.UcieBusy(0), SimTime(0));
  net.Send(SimTime(0), CubeId{0, k.port}, CubeId{1, k.port}, Bytes(k.packet));
  EXPECT_EQ(net.UcieBusy(0), k.Cyc(k.UcieSer(k.packet)));
  EXPECT_EQ(net.UcieBusy(1), SimTime(0));
}

// A: 0 -> 3 (links 0-1, 1-2, 2-3), B: 1 -> 2 (link 1-2 only), both ready at 0.
TEST(LinkNetworkModelTest, SharedMiddleLinkServesTheEarlierReservationFirst) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  const uint64_t ser = k.NocSer(k.packet);
  const uint64_t lat = k.noc_lat;
  {
    LinkNetworkModel net(chip);
    const NetworkMessageTiming a =
        net.Send(SimTime(0), CubeId{0, 0}, CubeId{0, 3}, Bytes(k.packet));
    const NetworkMessageTiming b =
        net.Send(SimTime(0), CubeId{0, 1}, CubeId{0, 2}, Bytes(k.packet));
    EXPECT_EQ(a.delivered, k.Cyc(3 * lat + ser));
    // B waits on link 1-2 until A's packet, which got there first in call order, is through.
    EXPECT_EQ(b.packets[0].injected, k.Cyc(lat + ser));
    EXPECT_EQ(b.delivered, k.Cyc(lat + ser + lat + ser));
  }
  {
    // The other call order: B takes link 1-2 at 0; A's head reaches it at lat and, by the rule,
    // A starts there at max(lat, B's end) and ends at max(start + ser, A's tail arrival).
    LinkNetworkModel net(chip);
    const NetworkMessageTiming b =
        net.Send(SimTime(0), CubeId{0, 1}, CubeId{0, 2}, Bytes(k.packet));
    const NetworkMessageTiming a =
        net.Send(SimTime(0), CubeId{0, 0}, CubeId{0, 3}, Bytes(k.packet));
    EXPECT_EQ(b.delivered, k.Cyc(lat + ser));
    const uint64_t start1 = std::max(lat, ser);
    const uint64_t end1 = std::max(start1 + ser, ser + lat);
    const uint64_t start2 = start1 + lat;
    const uint64_t end2 = std::max(start2 + ser, end1 + lat);
    EXPECT_EQ(a.delivered, k.Cyc(end2 + lat));
  }
}

TEST(LinkNetworkModelTest, DisjointLinksDoNotInterfere) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  LinkNetworkModel net(chip);
  const SimTime expected = k.Cyc(k.noc_lat + k.NocSer(k.packet));
  // Opposite directions between the same CUBEs are two links; so are parallel rows.
  for (const auto& [from, to] :
       std::vector<std::pair<uint32_t, uint32_t>>{{0, 1}, {1, 0}, {4, 5}, {5, 4}, {1, 5}}) {
    EXPECT_EQ(net.Send(SimTime(0), CubeId{0, from}, CubeId{0, to}, Bytes(k.packet)).delivered,
              expected)
        << from << " -> " << to;
  }
  // The same links in SIP 1 are other links again.
  EXPECT_EQ(net.Send(SimTime(0), CubeId{1, 0}, CubeId{1, 1}, Bytes(k.packet)).delivered, expected);
}

TEST(LinkNetworkModelTest, PacketOrderPerSourceAndDestinationIsKept) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  LinkNetworkModel net(chip);
  SimTime last_delivered(0);
  uint64_t ready_cycle = 0;
  for (const uint64_t bytes : {3 * k.packet + 5, uint64_t{1}, 2 * k.packet, uint64_t{700}}) {
    // Cross traffic on part of the route between the messages.
    net.Send(k.Cyc(ready_cycle), CubeId{0, 1}, CubeId{0, 13}, Bytes(2 * k.packet));
    const NetworkMessageTiming t =
        net.Send(k.Cyc(ready_cycle), CubeId{0, 0}, CubeId{0, 14}, Bytes(bytes));
    for (const PacketDelivery& p : t.packets) {
      EXPECT_GT(p.delivered, last_delivered);
      last_delivered = p.delivered;
    }
    ready_cycle += 10;
  }
}

// --- Across SIPs: NOC to the port CUBE, UCIe, NOC from the port CUBE ---------------------------

struct CrossCase {
  uint32_t from_cube;
  uint32_t to_cube;
  uint64_t bytes;
  friend std::ostream& operator<<(std::ostream& os, const CrossCase& c) {
    return os << "sip0.cube" << c.from_cube << "->sip1.cube" << c.to_cube << " " << c.bytes << "B";
  }
};

class CrossSipTest : public ::testing::TestWithParam<CrossCase> {};

// One packet: every hop's latency, once the slowest link's serialisation.
TEST_P(CrossSipTest, OnePacketPaysNocAndUcieHops) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  const CrossCase c = GetParam();
  ASSERT_LE(c.bytes, k.packet);
  LinkNetworkModel net(chip);
  const NetworkMessageTiming t =
      net.Send(SimTime(0), CubeId{0, c.from_cube}, CubeId{1, c.to_cube}, Bytes(c.bytes));
  const uint64_t noc_hops = k.Hops(c.from_cube, k.port) + k.Hops(k.port, c.to_cube);
  EXPECT_EQ(t.noc_hops, noc_hops);
  EXPECT_EQ(t.ucie_hops, 1u);
  const uint64_t slowest =
      noc_hops == 0 ? k.UcieSer(c.bytes) : std::max(k.NocSer(c.bytes), k.UcieSer(c.bytes));
  EXPECT_EQ(t.delivered, k.Cyc(noc_hops * k.noc_lat + k.ucie_lat + slowest));
  EXPECT_EQ(net.UcieLink(0, Dir::kEast).stats().bytes, Bytes(c.bytes));
  EXPECT_EQ(net.UcieLink(1, Dir::kWest).stats().packets, 0u);
}

INSTANTIATE_TEST_SUITE_P(Routes, CrossSipTest,
                         ::testing::Values(CrossCase{0, 0, 4096}, CrossCase{0, 0, 100},
                                           CrossCase{5, 0, 4096}, CrossCase{0, 15, 4096},
                                           CrossCase{15, 15, 4096}, CrossCase{3, 12, 2000}));

TEST(LinkNetworkModelTest, EveryUcieBoundaryIsAHop) {
  const pb::Chip chip = Chip4();
  const Numbers k = NumbersOf(chip);
  for (const auto& [from_sip, to_sip] :
       std::vector<std::pair<uint32_t, uint32_t>>{{0, 3}, {3, 0}, {1, 2}, {2, 0}}) {
    LinkNetworkModel net(chip);
    const NetworkMessageTiming t =
        net.Send(SimTime(0), CubeId{from_sip, 5}, CubeId{to_sip, 10}, Bytes(k.packet));
    const uint64_t ucie_hops = AbsDiff(from_sip, to_sip);
    const uint64_t noc_hops = k.Hops(5, k.port) + k.Hops(k.port, 10);
    EXPECT_EQ(t.ucie_hops, ucie_hops);
    EXPECT_EQ(t.delivered, k.Cyc(noc_hops * k.noc_lat + ucie_hops * k.ucie_lat +
                                 std::max(k.NocSer(k.packet), k.UcieSer(k.packet))))
        << from_sip << " -> " << to_sip;
  }
}

// Full packets across SIPs pipeline at the slowest link's pace, whichever link that is: the
// shipped UCIe (faster than the NOC) and a what-if UCIe slower than the NOC.
struct UcieBandwidthCase {
  uint32_t ucie_bytes_per_cycle;  // 0: as shipped
  uint64_t packets;
  friend std::ostream& operator<<(std::ostream& os, const UcieBandwidthCase& c) {
    return os << "ucie " << c.ucie_bytes_per_cycle << "B/cycle, " << c.packets << " packets";
  }
};

class UcieBandwidthTest : public ::testing::TestWithParam<UcieBandwidthCase> {};

TEST_P(UcieBandwidthTest, MessagePipelinesAtTheSlowestLink) {
  pb::Chip chip = Chip2();
  const UcieBandwidthCase c = GetParam();
  if (c.ucie_bytes_per_cycle != 0) {
    chip.mutable_ucie()->mutable_link()->set_bytes_per_cycle(c.ucie_bytes_per_cycle);
  }
  const Numbers k = NumbersOf(chip);
  for (const auto& [from, to] :
       std::vector<std::pair<uint32_t, uint32_t>>{{0, 0}, {5, 6}, {15, 15}}) {
    LinkNetworkModel net(chip);
    const NetworkMessageTiming t =
        net.Send(SimTime(0), CubeId{0, from}, CubeId{1, to}, Bytes(c.packets * k.packet));
    const uint64_t noc_hops = k.Hops(from, k.port) + k.Hops(k.port, to);
    const uint64_t slowest = std::max(noc_hops == 0 ? 0 : k.NocSer(k.packet), k.UcieSer(k.packet));
    EXPECT_EQ(t.delivered, k.Cyc(noc_hops * k.noc_lat + k.ucie_lat + c.packets * slowest))
        << from << " -> " << to;
    EXPECT_EQ(net.UcieLink(0, Dir::kEast).stats().bytes, Bytes(c.packets * k.packet));
  }
}

INSTANTIATE_TEST_SUITE_P(Bandwidths, UcieBandwidthTest,
                         ::testing::Values(UcieBandwidthCase{0, 1}, UcieBandwidthCase{0, 16},
                                           UcieBandwidthCase{64, 1}, UcieBandwidthCase{64, 16},
                                           UcieBandwidthCase{32, 9}));

// Two SIP-0 CUBEs sending through the port at once share the UCIe link.
TEST(LinkNetworkModelTest, CrossSipMessagesShareTheUcieLink) {
  const pb::Chip chip = Chip2();
  const Numbers k = NumbersOf(chip);
  LinkNetworkModel net(chip);
  ASSERT_EQ(k.port, 0u) << "the shipped port is CUBE (0, 0)";
  const NetworkMessageTiming a = net.Send(SimTime(0), CubeId{0, 0}, CubeId{1, 0}, Bytes(k.packet));
  const NetworkMessageTiming b = net.Send(SimTime(0), CubeId{0, 0}, CubeId{1, 0}, Bytes(k.packet));
  EXPECT_EQ(a.delivered, k.Cyc(k.ucie_lat + k.UcieSer(k.packet)));
  EXPECT_EQ(b.packets[0].injected, k.Cyc(k.UcieSer(k.packet)));
  EXPECT_EQ(b.delivered, k.Cyc(k.ucie_lat + 2 * k.UcieSer(k.packet)));
}

// --- Determinism --------------------------------------------------------------------------------

std::vector<NetworkMessageTiming> RunTraffic(const pb::Chip& chip) {
  const Numbers k = NumbersOf(chip);
  LinkNetworkModel net(chip);
  std::vector<NetworkMessageTiming> out;
  uint64_t state = 99;
  auto next = [&state](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  SimTime now(0);
  for (int i = 0; i < 300; ++i) {
    now += k.Cyc(next(50));
    const CubeId from{static_cast<uint32_t>(next(chip.sips())), static_cast<uint32_t>(next(16))};
    const CubeId to{static_cast<uint32_t>(next(chip.sips())), static_cast<uint32_t>(next(16))};
    out.push_back(net.Send(now, from, to, Bytes(1 + next(6 * k.packet))));
  }
  return out;
}

TEST(LinkNetworkModelTest, SameTrafficSameTimes) {
  const pb::Chip chip = Chip2();
  const std::vector<NetworkMessageTiming> first = RunTraffic(chip);
  const std::vector<NetworkMessageTiming> second = RunTraffic(chip);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].packets, second[i].packets) << "message " << i;
    EXPECT_EQ(first[i].delivered, second[i].delivered) << "message " << i;
  }
}

}  // namespace
}  // namespace ahbm::sim
