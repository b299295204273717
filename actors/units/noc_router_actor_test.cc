#include "actors/units/noc_router_actor.h"

#include <algorithm>
#include <cstdint>
#include <map>
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
#include "actors/units/ucie_actor.h"
#include "caf/event_based_actor.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

using ::testing::ElementsAre;
using topology::CubeId;

constexpr char kSmall[] = "topology/small.textproto";

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
  UnitId src;
  uint64_t message_id;
  uint32_t src_pe;
  uint32_t dst_pe;
  uint64_t bytes;
  uint64_t sent_ps;
  uint32_t noc_hops;
  uint32_t ucie_hops;
  friend bool operator==(const Delivered&, const Delivered&) = default;
};

void PrintTo(const Delivered& d, std::ostream* os) {
  *os << "{t=" << d.time_ps << " src=" << d.src << " msg=" << d.message_id << " pe" << d.src_pe
      << "->pe" << d.dst_pe << " " << d.bytes << "B sent=" << d.sent_ps << " noc=" << d.noc_hops
      << " ucie=" << d.ucie_hops << "}";
}

caf::behavior CpuStandIn(caf::event_based_actor*, Engine* engine, std::vector<Delivered>* log) {
  return {[=](const Msg<pb::NocDelivered>& d) {
    log->push_back({engine->now().value(), engine->current_src(), d->message_id(), d->src_pe(),
                    d->dst_pe(), d->bytes(), d->sent_ps(), d->noc_hops(), d->ucie_hops()});
  }};
}

// The small chip (1 SIP, 2x4 CUBEs): every router, the (unused) UCIe actor, one shared
// LinkNetworkModel, and a CPU stand-in at every PE CPU unit logging into one log. Expectations
// are computed from the NOC numbers and the mesh coordinates, not read back from the routers.
class NocRouterActorTest : public ::testing::Test {
 protected:
  NocRouterActorTest() : chip_(Load(kSmall)), index_(chip_), net_(chip_) {
    const pb::Noc& noc = chip_.sip().noc();
    period_ps_ = 1'000'000 / noc.link().clock_mhz();
    bw_ = noc.link().bytes_per_cycle();
    lat_ = noc.link().latency_cycles();
    packet_ = noc.packet_bytes();
    credits_ = noc.credits_per_link();
    cols_ = chip_.sip().cube_mesh().cols();
  }

  void Build(Engine& engine) {
    for (uint32_t c = 0; c < index_.num_cubes(); ++c) {
      routers_.push_back(
          &NocRouterStateOf(StartNocRouterActor(engine, chip_, index_.CubeOf(c), &net_)));
    }
    for (uint32_t s = 0; s < index_.sips(); ++s) StartUcieActor(engine, chip_, s, &net_);
    for (uint32_t pe = 0; pe < index_.num_pes(); ++pe) {
      const UnitId cpu = Cpu(pe);
      engine.Register(cpu, index_.Name(topology::UnitId(cpu)),
                      engine.system().spawn(CpuStandIn, &engine, &log_));
    }
  }

  UnitId Cpu(uint32_t pe) const {
    return index_.PeUnit(topology::UnitKind::kPeCpu, index_.PeOf(pe)).value();
  }
  UnitId Router(uint32_t cube) const { return index_.NocRouterUnit(index_.CubeOf(cube)).value(); }
  // PE `p` of CUBE `cube` (SIP 0).
  uint32_t Pe(uint32_t cube, uint32_t p) const {
    return index_.GlobalPe(topology::PeId{0, cube, p});
  }

  // PE `src`'s CPU sends `bytes` to PE `dst` through its CUBE's router at absolute time `at`.
  void SendMsg(Engine& engine, SimTime at, uint64_t id, uint32_t src, uint32_t dst,
               uint64_t bytes) {
    testing::SendNocMessage(engine, index_, at, id, src, dst, bytes);
  }

  // The CUBEs an X-Y route visits after `from`, in order: columns first, then rows.
  std::vector<uint32_t> XyPath(uint32_t from, uint32_t to) const {
    return testing::XyPathInSip(from, to, cols_);
  }
  uint64_t Hops(uint32_t a, uint32_t b) const {
    return AbsDiff(a / cols_, b / cols_) + AbsDiff(a % cols_, b % cols_);
  }

  uint64_t Cyc(uint64_t cycles) const { return cycles * period_ps_; }
  uint64_t Edge(uint64_t ps) const { return CeilDiv(ps, period_ps_) * period_ps_; }
  uint64_t Ser(uint64_t bytes) const { return CeilDiv(bytes, bw_); }

  pb::Chip chip_;
  topology::ChipIndex index_;
  LinkNetworkModel net_;  // the chip's one network model, shared by every router
  uint64_t period_ps_ = 0, bw_ = 0, lat_ = 0, packet_ = 0, credits_ = 0, cols_ = 0;
  std::vector<const NocRouterActorState*> routers_;  // by global CUBE; valid while engine runs
  std::vector<Delivered> log_;
};

// --- A NOC message of H hops pays H hop costs ---------------------------------------------------

struct RouteCase {
  uint32_t from;  // CUBE indices in SIP 0
  uint32_t to;
  uint64_t bytes;
  uint64_t ready_ps;
  friend std::ostream& operator<<(std::ostream& os, const RouteCase& c) {
    return os << "cube" << c.from << "->cube" << c.to << " " << c.bytes << "B at " << c.ready_ps
              << "ps";
  }
};

class NocHopsTest : public NocRouterActorTest, public ::testing::WithParamInterface<RouteCase> {};

// One packet: delivered at edge(ready) + H * lat + ⌈bytes / bw⌉; the head reaches the k-th router
// of the route at edge(ready) + k * lat, and each router on the route sees exactly one NocHop.
TEST_P(NocHopsTest, OnePacketPaysEveryHopAndVisitsEveryRouterOnce) {
  const RouteCase c = GetParam();
  ASSERT_LE(c.bytes, packet_);
  Engine engine;
  Build(engine);
  const uint32_t src = Pe(c.from, 1), dst = Pe(c.to, 3);
  SendMsg(engine, SimTime(c.ready_ps), 5, src, dst, c.bytes);
  const std::vector<uint32_t> path = XyPath(c.from, c.to);
  const uint64_t hops = Hops(c.from, c.to);
  ASSERT_EQ(path.size(), hops);
  const uint64_t injected = Edge(c.ready_ps);
  // Step through the head's arrivals: router path[k] has its NocHop at injected + (k+1) * lat,
  // not one picosecond earlier.
  for (size_t k = 0; k < path.size(); ++k) {
    const uint64_t head = injected + Cyc((k + 1) * lat_);
    engine.RunUntil(SimTime(head - 1));
    EXPECT_EQ(routers_[path[k]]->stats.hops_received, 0u) << "router " << path[k];
    engine.RunUntil(SimTime(head));
    EXPECT_EQ(routers_[path[k]]->stats.hops_received, 1u) << "router " << path[k];
  }
  engine.Run();
  const uint64_t delivered = injected + Cyc(hops * lat_ + Ser(c.bytes));
  EXPECT_THAT(log_, ElementsAre(Delivered{delivered, Router(c.to), 5, src, dst, c.bytes, c.ready_ps,
                                          static_cast<uint32_t>(hops), 0}));
  EXPECT_EQ(engine.events_processed(), 1 + hops + 1);  // NocSend, H NocHops, NocDelivered
  for (uint32_t cube = 0; cube < index_.num_cubes(); ++cube) {
    const NocRouterStats& s = routers_[cube]->stats;
    const bool on_path = std::find(path.begin(), path.end(), cube) != path.end();
    EXPECT_EQ(s.hops_received, on_path ? 1u : 0u) << "router " << cube;
    EXPECT_EQ(s.injected_messages, cube == c.from ? 1u : 0u) << "router " << cube;
    EXPECT_EQ(s.delivered_messages, cube == c.to ? 1u : 0u) << "router " << cube;
    const bool forwards = cube == c.from || (on_path && cube != c.to);
    EXPECT_EQ(s.forwarded_messages, forwards ? 1u : 0u) << "router " << cube;
    EXPECT_EQ(s.forwarded_bytes, forwards ? c.bytes : 0u) << "router " << cube;
  }
}

INSTANTIATE_TEST_SUITE_P(Routes, NocHopsTest,
                         ::testing::Values(RouteCase{0, 1, 4096, 0},       // H = 1, E
                                           RouteCase{1, 0, 100, 1000},     // H = 1, W
                                           RouteCase{0, 4, 4096, 5000},    // H = 1, S
                                           RouteCase{6, 2, 1, 5001},       // H = 1, N
                                           RouteCase{0, 5, 4096, 0},       // H = 2
                                           RouteCase{0, 2, 2048, 7},       // H = 2, one row
                                           RouteCase{4, 2, 4096, 0},       // H = 3
                                           RouteCase{0, 7, 4096, 12'345},  // H = 4
                                           RouteCase{7, 0, 129, 0},        // H = 4
                                           RouteCase{3, 4, 4096, 0}));     // H = 4

// --- A multi-packet message pipelines: hop latencies once, then the packets back to back -------

struct PipelineCase {
  uint32_t from;
  uint32_t to;
  uint64_t bytes;
  friend std::ostream& operator<<(std::ostream& os, const PipelineCase& c) {
    return os << "cube" << c.from << "->cube" << c.to << " " << c.bytes << "B";
  }
};

class NocPipelineTest : public NocRouterActorTest,
                        public ::testing::WithParamInterface<PipelineCase> {};

// With enough credits (a packet holds a downstream slot for lat + ser after its start and packets
// start every ser), delivered = ready + H * lat + Σ_packets ⌈size / bw⌉.
TEST_P(NocPipelineTest, MessageIsDeliveredWhenItsLastPacketArrives) {
  const PipelineCase c = GetParam();
  ASSERT_LE(CeilDiv(lat_ + Ser(packet_), Ser(packet_)), credits_);
  Engine engine;
  Build(engine);
  const uint64_t ready = Cyc(100);
  SendMsg(engine, SimTime(ready), 1, Pe(c.from, 0), Pe(c.to, 0), c.bytes);
  engine.Run();
  uint64_t body = 0;
  for (uint64_t left = c.bytes; left > 0; left -= std::min(left, packet_)) {
    body += Ser(std::min(left, packet_));
  }
  const uint64_t hops = Hops(c.from, c.to);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_EQ(log_[0].time_ps, ready + Cyc(hops * lat_ + body));
  EXPECT_EQ(log_[0].noc_hops, hops);
  EXPECT_EQ(engine.events_processed(), 1 + hops + 1) << "one event per hop, not per packet";
}

INSTANTIATE_TEST_SUITE_P(Messages, NocPipelineTest,
                         ::testing::Values(PipelineCase{0, 1, 2 * 4096},
                                           PipelineCase{0, 7, 10 * 4096 + 1000},
                                           PipelineCase{6, 1, 65536}, PipelineCase{4, 7, 4097}));

// --- Contention: one shared model, so messages of different routers see each other ---------------

TEST_F(NocRouterActorTest, TwoMessagesOnOneLinkSerialise) {
  Engine engine;
  Build(engine);
  // Two PEs of CUBE 0 send one packet each to CUBE 1 at the same instant; PE 0's NocSend is
  // delivered first (lower src unit id), so it goes first on the link 0 -> 1.
  SendMsg(engine, SimTime(0), 1, Pe(0, 0), Pe(1, 0), packet_);
  SendMsg(engine, SimTime(0), 2, Pe(0, 1), Pe(1, 1), packet_);
  engine.Run();
  const uint64_t ser = Ser(packet_);
  EXPECT_THAT(
      log_,
      ElementsAre(
          Delivered{Cyc(lat_ + ser), Router(1), 1, Pe(0, 0), Pe(1, 0), packet_, 0, 1, 0},
          Delivered{Cyc(lat_ + 2 * ser), Router(1), 2, Pe(0, 1), Pe(1, 1), packet_, 0, 1, 0}));
  EXPECT_EQ(routers_[0]->stats.forwarded_messages, 2u);
  EXPECT_EQ(routers_[0]->stats.forwarded_bytes, 2 * packet_);
  EXPECT_EQ(routers_[1]->stats.delivered_bytes, 2 * packet_);
}

// A: CUBE 0 -> 3 (links 0-1, 1-2, 2-3), B: CUBE 1 -> 2 (link 1-2), both sent at 0 by different
// routers. A's NocSend is delivered first, so A holds link 1-2 first and B waits for it there.
TEST_F(NocRouterActorTest, MessagesOfDifferentRoutersShareTheMiddleLink) {
  Engine engine;
  Build(engine);
  SendMsg(engine, SimTime(0), 1, Pe(0, 0), Pe(3, 0), packet_);
  SendMsg(engine, SimTime(0), 2, Pe(1, 0), Pe(2, 0), packet_);
  engine.Run();
  const uint64_t ser = Ser(packet_);
  EXPECT_THAT(log_, ElementsAre(Delivered{Cyc(3 * lat_ + ser), Router(3), 1, Pe(0, 0), Pe(3, 0),
                                          packet_, 0, 3, 0},
                                Delivered{Cyc(lat_ + ser + lat_ + ser), Router(2), 2, Pe(1, 0),
                                          Pe(2, 0), packet_, 0, 1, 0}));
  EXPECT_EQ(routers_[1]->stats.forwarded_messages, 2u);  // A in transit, B injected
  EXPECT_EQ(routers_[2]->stats.hops_received, 2u);
}

TEST_F(NocRouterActorTest, SameScenarioTwiceGivesIdenticalDeliveries) {
  const auto run = [this] {
    log_.clear();
    routers_.clear();
    net_ = LinkNetworkModel(chip_);
    Engine engine;
    Build(engine);
    uint64_t id = 0;
    for (uint32_t from = 0; from < index_.num_cubes(); ++from) {
      for (uint32_t p = 0; p < index_.pes_per_cube(); ++p) {
        const uint32_t to = (from + 1 + p) % index_.num_cubes();
        ++id;
        SendMsg(engine, SimTime(Cyc(p * 7)), id, Pe(from, p), Pe(to, 3 - p),
                1 + (id * 2749) % (3 * packet_));
      }
    }
    engine.Run();
    return log_;
  };
  const std::vector<Delivered> first = run();
  EXPECT_EQ(first.size(), index_.num_cubes() * index_.pes_per_cube());
  EXPECT_EQ(run(), first);
}

// --- Invalid sends are kernel-runtime bugs: fail loudly, naming router, message and reason ------

struct BadSend {
  std::string name;
  uint32_t router_cube;
  uint32_t src;
  uint32_t dst;
  uint64_t bytes;
  std::string error;  // regex
  friend std::ostream& operator<<(std::ostream& os, const BadSend& c) { return os << c.name; }
};

class NocBadSendDeathTest : public NocRouterActorTest,
                            public ::testing::WithParamInterface<BadSend> {};

TEST_P(NocBadSendDeathTest, FailsNamingTheRouterTheMessageAndTheReason) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const BadSend c = GetParam();
  EXPECT_DEATH(
      {
        Engine engine;
        Build(engine);
        auto send = std::make_shared<pb::NocSend>();
        send->set_message_id(42);
        send->set_src_pe(c.src);
        send->set_dst_pe(c.dst);
        send->set_bytes(c.bytes);
        engine.Send(Cpu(0), SimTime(0), Router(c.router_cube),
                    std::shared_ptr<const pb::NocSend>(std::move(send)));
        engine.Run();
      },
      c.error);
}

// The small chip has 4 PEs per CUBE: PEs 0-3 are CUBE 0, 4-7 CUBE 1, 32 PEs in all.
INSTANTIATE_TEST_SUITE_P(
    Cases, NocBadSendDeathTest,
    ::testing::Values(
        BadSend{"SrcInAnotherCube", 0, 4, 9, 64,
                "router sip0.cube0.noc: NocSend 42 from pe 4: src_pe is not a PE of this CUBE"},
        BadSend{"DstInOwnCube", 0, 0, 3, 64,
                "router sip0.cube0.noc: NocSend 42 to pe 3: dst_pe is in the sender's own CUBE"},
        BadSend{"NoSuchDst", 0, 0, 32, 64,
                "router sip0.cube0.noc: NocSend 42 to pe 32: no such PE \\(the chip has 32\\)"},
        BadSend{"Empty", 1, 5, 0, 0, "router sip0.cube1.noc: NocSend 42 has 0 bytes"}),
    [](const ::testing::TestParamInfo<BadSend>& info) { return info.param.name; });

TEST_F(NocRouterActorTest, HopThatDoesNotEndAtTheRouterDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Engine engine;
        Build(engine);
        auto hop = std::make_shared<pb::NocHop>();
        hop->mutable_message()->set_message_id(8);
        hop->mutable_message()->set_src_pe(Pe(0, 0));
        hop->mutable_message()->set_dst_pe(Pe(2, 0));
        hop->mutable_message()->set_bytes(64);
        hop->set_hop_index(0);  // ends at CUBE 1, not 2
        hop->set_hop_count(2);
        engine.Send(Router(0), SimTime(0), Router(2),
                    std::shared_ptr<const pb::NocHop>(std::move(hop)));
        engine.Run();
      },
      "router sip0.cube2.noc: NocHop of message 8 \\(sip0.cube0 -> sip0.cube2, hop 0 of 2\\) "
      "does not end at this router");
}

}  // namespace
}  // namespace ahbm::sim
