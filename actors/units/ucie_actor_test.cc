#include "actors/units/ucie_actor.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/engine.h"
#include "actors/units/link_test_util.h"
#include "actors/models/link_network_model.h"
#include "actors/msg.h"
#include "actors/time.h"
#include "actors/units/noc_router_actor.h"
#include "caf/event_based_actor.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

using topology::CubeId;

constexpr char k2Sip[] = "topology/chip_2sip.textproto";
constexpr char k4Sip[] = "topology/chip_4sip.textproto";

pb::Chip Load(const std::string& path) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(path);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t AbsDiff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

// What a destination PE CPU got.
struct Delivered {
  uint64_t time_ps;
  uint64_t message_id;
  uint32_t noc_hops;
  uint32_t ucie_hops;
  friend bool operator==(const Delivered&, const Delivered&) = default;
};

void PrintTo(const Delivered& d, std::ostream* os) {
  *os << "{t=" << d.time_ps << " msg=" << d.message_id << " noc=" << d.noc_hops
      << " ucie=" << d.ucie_hops << "}";
}

caf::behavior CpuStandIn(caf::event_based_actor*, Engine* engine, std::vector<Delivered>* log) {
  return {[=](const Msg<pb::NocDelivered>& d) {
    log->push_back({engine->now().value(), d->message_id(), d->noc_hops(), d->ucie_hops()});
  }};
}

// A whole chip: every router, every UCIe actor, one shared LinkNetworkModel, a CPU stand-in at
// every PE CPU unit. Expectations are computed from the NOC / UCIe numbers and the coordinates.
class ChipNetwork {
 public:
  explicit ChipNetwork(const std::string& path) : chip_(Load(path)), index_(chip_), net_(chip_) {
    const pb::Noc& noc = chip_.sip().noc();
    const pb::Ucie& ucie = chip_.ucie();
    EXPECT_EQ(noc.link().clock_mhz(), ucie.link().clock_mhz()) << "the tests assume one clock";
    period_ps_ = 1'000'000 / noc.link().clock_mhz();
    noc_bw_ = noc.link().bytes_per_cycle();
    noc_lat_ = noc.link().latency_cycles();
    packet_ = noc.packet_bytes();
    ucie_bw_ = ucie.link().bytes_per_cycle();
    ucie_lat_ = ucie.link().latency_cycles();
    cols_ = chip_.sip().cube_mesh().cols();
    port_ = ucie.port_cube().row() * cols_ + ucie.port_cube().col();
  }

  void Build(Engine& engine) {
    for (uint32_t c = 0; c < index_.num_cubes(); ++c) {
      routers_.push_back(
          &NocRouterStateOf(StartNocRouterActor(engine, chip_, index_.CubeOf(c), &net_)));
    }
    for (uint32_t s = 0; s < index_.sips(); ++s) {
      ucies_.push_back(&UcieStateOf(StartUcieActor(engine, chip_, s, &net_)));
    }
    for (uint32_t pe = 0; pe < index_.num_pes(); ++pe) {
      const UnitId cpu = Cpu(pe);
      engine.Register(cpu, index_.Name(topology::UnitId(cpu)),
                      engine.system().spawn(CpuStandIn, &engine, &log_));
    }
  }

  UnitId Cpu(uint32_t pe) const {
    return index_.PeUnit(topology::UnitKind::kPeCpu, index_.PeOf(pe)).value();
  }
  uint32_t Pe(CubeId cube, uint32_t p) const {
    return index_.GlobalPe(topology::PeId{cube.sip, cube.cube, p});
  }

  void SendMsg(Engine& engine, SimTime at, uint64_t id, uint32_t src, uint32_t dst,
               uint64_t bytes) {
    testing::SendNocMessage(engine, index_, at, id, src, dst, bytes);
  }

  // The CUBEs an X-Y route inside one SIP visits after `from`: columns first, then rows.
  std::vector<uint32_t> XyPath(uint32_t from, uint32_t to) const {
    return testing::XyPathInSip(from, to, cols_);
  }

  uint64_t Cyc(uint64_t cycles) const { return cycles * period_ps_; }
  uint64_t Edge(uint64_t ps) const { return CeilDiv(ps, period_ps_) * period_ps_; }
  uint64_t NocSer(uint64_t bytes) const { return CeilDiv(bytes, noc_bw_); }
  uint64_t UcieSer(uint64_t bytes) const { return CeilDiv(bytes, ucie_bw_); }

  pb::Chip chip_;
  topology::ChipIndex index_;
  LinkNetworkModel net_;  // the chip's one network model, shared by every router and UCIe actor
  uint64_t period_ps_ = 0, noc_bw_ = 0, noc_lat_ = 0, packet_ = 0, ucie_bw_ = 0, ucie_lat_ = 0;
  uint32_t cols_ = 0, port_ = 0;
  std::vector<const NocRouterActorState*> routers_;  // by global CUBE; valid while engine runs
  std::vector<const UcieActorState*> ucies_;         // by SIP
  std::vector<Delivered> log_;
};

// --- Across SIPs: every NOC and UCIe hop pays its cost, the head passes every unit once --------

struct CrossCase {
  const char* chip;
  CubeId from;
  CubeId to;
  uint64_t bytes;
  friend std::ostream& operator<<(std::ostream& os, const CrossCase& c) {
    return os << c.chip << " sip" << c.from.sip << ".cube" << c.from.cube << "->sip" << c.to.sip
              << ".cube" << c.to.cube << " " << c.bytes << "B";
  }
};

class UcieHopsTest : public ::testing::TestWithParam<CrossCase> {};

// One packet: delivered at edge(ready) + Σ hop latencies + the slowest link's ⌈bytes / bw⌉. Head
// rule: each NOC hop adds noc_lat; a UCIe actor gets the head when it is at its SIP's port CUBE,
// the far SIP's port router ucie_lat later.
TEST_P(UcieHopsTest, OnePacketPaysEveryHopAndPassesEveryUnitOnce) {
  const CrossCase c = GetParam();
  ChipNetwork n(c.chip);
  ASSERT_LE(c.bytes, n.packet_);
  Engine engine;
  n.Build(engine);
  const uint64_t ready = n.Cyc(50) + 1;
  const uint32_t src = n.Pe(c.from, 2), dst = n.Pe(c.to, 5);
  n.SendMsg(engine, SimTime(ready), 3, src, dst, c.bytes);

  // The expected head timeline: (unit stats to watch, time the head reaches it).
  struct Visit {
    const uint64_t* count;
    uint64_t time_ps;
    std::string what;
  };
  std::vector<Visit> visits;
  std::vector<uint64_t> hops_expected(n.index_.num_cubes(), 0);
  std::vector<uint64_t> ucie_expected(n.index_.sips(), 0);
  uint64_t t = n.Edge(ready);
  uint64_t noc_hops = 0, ucie_hops = 0;
  const auto noc_leg = [&](uint32_t sip, uint32_t from, uint32_t to) {
    for (const uint32_t cube : n.XyPath(from, to)) {
      t += n.Cyc(n.noc_lat_);
      const uint32_t g = n.index_.GlobalCube(CubeId{sip, cube});
      visits.push_back({&n.routers_[g]->stats.hops_received, t, "router " + std::to_string(g)});
      ++hops_expected[g];
      ++noc_hops;
    }
  };
  noc_leg(c.from.sip, c.from.cube, n.port_);
  for (uint32_t s = c.from.sip; s != c.to.sip;) {
    visits.push_back({&n.ucies_[s]->stats.forwarded_messages, t, "ucie " + std::to_string(s)});
    ++ucie_expected[s];
    s = s < c.to.sip ? s + 1 : s - 1;
    t += n.Cyc(n.ucie_lat_);
    const uint32_t g = n.index_.GlobalCube(CubeId{s, n.port_});
    visits.push_back({&n.routers_[g]->stats.hops_received, t, "router " + std::to_string(g)});
    ++hops_expected[g];
    ++ucie_hops;
  }
  noc_leg(c.to.sip, n.port_, c.to.cube);
  EXPECT_EQ(ucie_hops, AbsDiff(c.from.sip, c.to.sip));

  for (const Visit& v : visits) {
    // A hand-off to a UCIe actor happens at the instant the head reaches the port router.
    if (engine.now() < SimTime(v.time_ps)) {
      engine.RunUntil(SimTime(v.time_ps - 1));
      EXPECT_EQ(*v.count, 0u) << v.what << " before " << v.time_ps;
    }
    engine.RunUntil(SimTime(v.time_ps));
    EXPECT_EQ(*v.count, 1u) << v.what << " at " << v.time_ps;
  }
  engine.Run();
  const uint64_t slowest = std::max(noc_hops == 0 ? 0 : n.NocSer(c.bytes), n.UcieSer(c.bytes));
  const uint64_t delivered =
      n.Edge(ready) + n.Cyc(noc_hops * n.noc_lat_ + ucie_hops * n.ucie_lat_ + slowest);
  EXPECT_THAT(n.log_,
              ::testing::ElementsAre(Delivered{delivered, 3, static_cast<uint32_t>(noc_hops),
                                               static_cast<uint32_t>(ucie_hops)}));
  // NocSend, a NocHop per hop, a hand-off to the UCIe actor per UCIe hop, NocDelivered.
  EXPECT_EQ(engine.events_processed(), 1 + noc_hops + 2 * ucie_hops + 1);
  for (uint32_t g = 0; g < n.index_.num_cubes(); ++g) {
    EXPECT_EQ(n.routers_[g]->stats.hops_received, hops_expected[g]) << "router " << g;
  }
  for (uint32_t s = 0; s < n.index_.sips(); ++s) {
    EXPECT_EQ(n.ucies_[s]->stats.forwarded_messages, ucie_expected[s]) << "ucie " << s;
    EXPECT_EQ(n.ucies_[s]->stats.forwarded_bytes, ucie_expected[s] * c.bytes) << "ucie " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Routes, UcieHopsTest,
    ::testing::Values(CrossCase{k2Sip, {0, 0}, {1, 0}, 4096},  // port to port: UCIe only
                      CrossCase{k2Sip, {0, 0}, {1, 0}, 100},
                      CrossCase{k2Sip, {0, 5}, {1, 0}, 4096},   // 2 NOC hops, then UCIe
                      CrossCase{k2Sip, {0, 0}, {1, 15}, 4096},  // UCIe, then 6 NOC hops
                      CrossCase{k2Sip, {0, 15}, {1, 15}, 4096},
                      CrossCase{k2Sip, {1, 3}, {0, 12}, 2000},  // westwards
                      CrossCase{k4Sip, {0, 5}, {3, 10}, 4096},  // three UCIe hops
                      CrossCase{k4Sip, {3, 0}, {0, 0}, 1}, CrossCase{k4Sip, {2, 6}, {1, 9}, 4096}));

// --- Multi-packet messages across the UCIe pipeline at the slowest link's pace -----------------

class UciePipelineTest : public ::testing::TestWithParam<CrossCase> {};

TEST_P(UciePipelineTest, FullPacketsFollowEachOtherAtTheSlowestLink) {
  const CrossCase c = GetParam();
  ChipNetwork n(c.chip);
  ASSERT_EQ(c.bytes % n.packet_, 0u);
  Engine engine;
  n.Build(engine);
  n.SendMsg(engine, SimTime(0), 1, n.Pe(c.from, 0), n.Pe(c.to, 0), c.bytes);
  engine.Run();
  const uint64_t noc_hops =
      n.XyPath(c.from.cube, n.port_).size() + n.XyPath(n.port_, c.to.cube).size();
  const uint64_t ucie_hops = AbsDiff(c.from.sip, c.to.sip);
  const uint64_t slowest = std::max(noc_hops == 0 ? 0 : n.NocSer(n.packet_), n.UcieSer(n.packet_));
  EXPECT_THAT(
      n.log_,
      ::testing::ElementsAre(Delivered{
          n.Cyc(noc_hops * n.noc_lat_ + ucie_hops * n.ucie_lat_ + c.bytes / n.packet_ * slowest), 1,
          static_cast<uint32_t>(noc_hops), static_cast<uint32_t>(ucie_hops)}));
}

INSTANTIATE_TEST_SUITE_P(Messages, UciePipelineTest,
                         ::testing::Values(CrossCase{k2Sip, {0, 0}, {1, 0}, 16 * 4096},
                                           CrossCase{k2Sip, {0, 5}, {1, 6}, 16 * 4096},
                                           CrossCase{k4Sip, {0, 15}, {3, 15}, 8 * 4096}));

// --- Two messages crossing one UCIe link serialise on it
// ------------------------------------------

TEST(UcieActorTest, TwoMessagesShareTheUcieLink) {
  ChipNetwork n(k2Sip);
  Engine engine;
  n.Build(engine);
  const CubeId port0{0, n.port_}, port1{1, n.port_};
  n.SendMsg(engine, SimTime(0), 1, n.Pe(port0, 0), n.Pe(port1, 0), n.packet_);
  n.SendMsg(engine, SimTime(0), 2, n.Pe(port0, 1), n.Pe(port1, 1), n.packet_);
  engine.Run();
  const uint64_t ser = n.UcieSer(n.packet_);
  EXPECT_THAT(n.log_, ::testing::ElementsAre(Delivered{n.Cyc(n.ucie_lat_ + ser), 1, 0, 1},
                                             Delivered{n.Cyc(n.ucie_lat_ + 2 * ser), 2, 0, 1}));
  EXPECT_EQ(n.ucies_[0]->stats.forwarded_messages, 2u);
  EXPECT_EQ(n.ucies_[0]->stats.forwarded_bytes, 2 * n.packet_);
  EXPECT_EQ(n.ucies_[1]->stats.forwarded_messages, 0u);
}

// --- A hop that is not a UCIe hop of this SIP is a routing bug ----------------------------------

struct BadHop {
  std::string name;
  const char* chip;
  CubeId from;
  CubeId to;
  uint32_t ucie_sip;  // the UCIe actor it is sent to
  uint32_t hop_index;
  std::string error;  // regex
  friend std::ostream& operator<<(std::ostream& os, const BadHop& c) { return os << c.name; }
};

class UcieBadHopDeathTest : public ::testing::TestWithParam<BadHop> {};

TEST_P(UcieBadHopDeathTest, FailsNamingTheUnitAndTheMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const BadHop c = GetParam();
  EXPECT_DEATH(
      {
        ChipNetwork n(c.chip);
        Engine engine;
        n.Build(engine);
        auto hop = std::make_shared<pb::NocHop>();
        hop->mutable_message()->set_message_id(8);
        hop->mutable_message()->set_src_pe(n.Pe(c.from, 0));
        hop->mutable_message()->set_dst_pe(n.Pe(c.to, 0));
        hop->mutable_message()->set_bytes(64);
        hop->set_hop_index(c.hop_index);
        hop->set_hop_count(static_cast<uint32_t>(n.net_.router().Route(c.from, c.to).size()));
        engine.Send(n.index_.NocRouterUnit(c.from).value(), SimTime(0),
                    n.index_.UcieUnit(c.ucie_sip).value(),
                    std::shared_ptr<const pb::NocHop>(std::move(hop)));
        engine.Run();
      },
      c.error);
}

// chip_2sip: 8 PEs per CUBE, 16 CUBEs per SIP, so PE 0 of sip0.cube1 is 8, of sip1.cube0 128.
INSTANTIATE_TEST_SUITE_P(
    Cases, UcieBadHopDeathTest,
    ::testing::Values(
        BadHop{"NocHop",
               k2Sip,
               {0, 1},
               {1, 0},
               0,
               0,
               "UCIe sip0.ucie: NocHop of message 8 \\(pe 8 -> pe 128, hop 0 of 2\\) is not a "
               "UCIe hop leaving sip 0"},
        BadHop{"OtherSipsUcieHop",
               k4Sip,
               {0, 0},
               {2, 0},
               0,
               1,
               "UCIe sip0.ucie: NocHop of message 8 .*hop 1 of 2\\) is not a UCIe hop leaving "
               "sip 0"}),
    [](const ::testing::TestParamInfo<BadHop>& info) { return info.param.name; });

}  // namespace
}  // namespace ahbm::sim
