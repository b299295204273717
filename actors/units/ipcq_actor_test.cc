#include "actors/units/ipcq_actor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/engine.h"
#include "actors/msg.h"
#include "actors/time.h"
#include "caf/event_based_actor.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"
#include "topology/loader.h"
#include "topology/mesh.h"

namespace ahbm::sim {
namespace {

using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using topology::Dir;

constexpr char kSmall[] = "topology/small.textproto";

pb::Chip Load() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(kSmall);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// What a PE CPU got from a queue.
struct Arrival {
  uint64_t time_ps;
  UnitId src;
  uint64_t message_id;
  uint32_t src_pe;
  uint32_t dst_pe;
  uint32_t chunk_index;
  uint32_t chunk_count;
  uint64_t bytes;
  uint64_t message_bytes;
  uint32_t queue_unit;
  friend bool operator==(const Arrival&, const Arrival&) = default;
};

void PrintTo(const Arrival& a, std::ostream* os) {
  *os << "{t=" << a.time_ps << " src=" << a.src << " msg=" << a.message_id << " pe" << a.src_pe
      << "->pe" << a.dst_pe << " chunk " << a.chunk_index << "/" << a.chunk_count << " " << a.bytes
      << "B of " << a.message_bytes << "B queue=" << a.queue_unit << "}";
}

struct Accepted {
  uint64_t time_ps;
  UnitId src;
  uint64_t message_id;
  uint64_t accepted_ps;
  friend bool operator==(const Accepted&, const Accepted&) = default;
};

void PrintTo(const Accepted& a, std::ostream* os) {
  *os << "{t=" << a.time_ps << " src=" << a.src << " msg=" << a.message_id
      << " accepted=" << a.accepted_ps << "}";
}

struct Log {
  std::vector<Arrival> arrivals;
  std::vector<Accepted> accepted;
};

// A PE CPU stand-in. With `pop_on_arrival` it is a receiver that posted its recv before the data
// came: it pops the chunk's message at once (zero delay) when a chunk arrives.
caf::behavior CpuStandIn(caf::event_based_actor*, Engine* engine, UnitId self_id, Log* log,
                         bool pop_on_arrival) {
  return {
      [=](const Msg<pb::IpcqArrival>& a) {
        log->arrivals.push_back({engine->now().value(), engine->current_src(), a->message_id(),
                                 a->src_pe(), a->dst_pe(), a->chunk_index(), a->chunk_count(),
                                 a->bytes(), a->message_bytes(), a->queue_unit()});
        if (!pop_on_arrival) return;
        auto pop = std::make_shared<pb::IpcqPop>();
        pop->set_message_id(a->message_id());
        pop->set_bytes(a->bytes());
        engine->Send(self_id, SimTime(0), a->queue_unit(),
                     std::shared_ptr<const pb::IpcqPop>(std::move(pop)));
      },
      [=](const Msg<pb::IpcqAccepted>& a) {
        log->accepted.push_back(
            {engine->now().value(), engine->current_src(), a->message_id(), a->accepted_ps()});
      },
  };
}

// CUBE 0 of the small chip (2x2 PEs): every PE's four queue actors (edge ones included) and a
// CPU stand-in per PE, each with its own log. Expectations are computed from the IPCQ numbers.
class IpcqActorTest : public ::testing::Test {
 protected:
  IpcqActorTest() : chip_(Load()), index_(chip_) {}

  // Call after any change to chip_.
  void Build(Engine& engine, bool receivers_pop_on_arrival = false) {
    const pb::Ipcq& q = chip_.sip().cube().ipcq();
    period_ps_ = 1'000'000 / q.link().clock_mhz();
    bw_ = q.link().bytes_per_cycle();
    lat_ = q.link().latency_cycles();
    chunk_ = q.chunk_bytes();
    queue_ = q.queue_bytes();
    logs_.assign(index_.pes_per_cube(), Log{});
    unpopped_.clear();
    for (uint32_t p = 0; p < index_.pes_per_cube(); ++p) {
      for (const Dir dir : topology::kAllDirs) {
        states_[p][static_cast<int>(dir)] = &IpcqStateOf(StartIpcqActor(engine, chip_, p, dir));
      }
      engine.Register(
          Cpu(p), index_.Name(topology::UnitId(Cpu(p))),
          engine.system().spawn(CpuStandIn, &engine, Cpu(p), &logs_[p], receivers_pop_on_arrival));
    }
  }

  UnitId Cpu(uint32_t pe) const {
    return index_.PeUnit(topology::UnitKind::kPeCpu, index_.PeOf(pe)).value();
  }
  UnitId Queue(uint32_t pe, Dir dir) const { return index_.IpcqUnit(index_.PeOf(pe), dir).value(); }
  const IpcqActorState& State(uint32_t pe, Dir dir) const {
    return *states_[pe][static_cast<int>(dir)];
  }

  // PE `src`'s CPU sends `bytes` to `dst` through its `dir` queue at absolute time `at`. It
  // decides whether it blocks as the kernel runtime does (bytes sent minus bytes popped over the
  // queue's credit), so calls must come in time order (the stand-ins' own pops are not counted).
  void SendMsg(Engine& engine, SimTime at, uint64_t id, uint32_t src, Dir dir, uint32_t dst,
               uint64_t bytes) {
    uint64_t& unpopped = unpopped_[Queue(src, dir)];
    unpopped += bytes;
    auto send = std::make_shared<pb::IpcqSend>();
    send->set_message_id(id);
    send->set_src_pe(src);
    send->set_dst_pe(dst);
    send->set_bytes(bytes);
    send->set_sender_blocks(unpopped > queue_);
    engine.Send(Cpu(src), at - engine.now(), Queue(src, dir),
                std::shared_ptr<const pb::IpcqSend>(std::move(send)));
  }

  // PE `receiver`'s CPU pops `bytes` of message `id` from the queue `src`.`dir` at absolute
  // time `at`.
  void PopMsg(Engine& engine, SimTime at, uint64_t id, uint64_t bytes, uint32_t receiver,
              uint32_t src, Dir dir) {
    unpopped_[Queue(src, dir)] -= bytes;
    auto pop = std::make_shared<pb::IpcqPop>();
    pop->set_message_id(id);
    pop->set_bytes(bytes);
    engine.Send(Cpu(receiver), at - engine.now(), Queue(src, dir),
                std::shared_ptr<const pb::IpcqPop>(std::move(pop)));
  }

  uint64_t Cyc(uint64_t cycles) const { return cycles * period_ps_; }
  uint64_t Edge(uint64_t ps) const { return CeilDiv(ps, period_ps_) * period_ps_; }
  // Serialisation of `bytes`, in cycles.
  uint64_t Ser(uint64_t bytes) const { return CeilDiv(bytes, bw_); }

  pb::Chip chip_;
  topology::ChipIndex index_;
  uint64_t period_ps_ = 0;
  uint64_t bw_ = 0;
  uint64_t lat_ = 0;
  uint64_t chunk_ = 0;
  uint64_t queue_ = 0;
  std::vector<Log> logs_;
  std::map<UnitId, uint64_t> unpopped_;  // SendMsg's credit count, by queue
  // The queue actors' states, valid while the test's engine runs (the engine holds the actors).
  const IpcqActorState* states_[4][4] = {};
};

// --- A single small message: depart at the next edge, serialise, pay one hop ------------------

struct SingleCase {
  uint32_t src;
  Dir dir;
  uint32_t dst;  // the neighbour of src towards dir in the 2x2 PE mesh
  uint64_t bytes;
  uint64_t ready_ps;
  friend std::ostream& operator<<(std::ostream& os, const SingleCase& c) {
    return os << "pe" << c.src << "." << topology::DirName(c.dir) << "->pe" << c.dst << " "
              << c.bytes << "B at " << c.ready_ps << "ps";
  }
};

class IpcqSingleMessageTest : public IpcqActorTest,
                              public ::testing::WithParamInterface<SingleCase> {};

TEST_P(IpcqSingleMessageTest, ArrivesAfterSerialisationAndOneHop) {
  const SingleCase c = GetParam();
  Engine engine;
  Build(engine);
  ASSERT_LE(c.bytes, chunk_);
  SendMsg(engine, SimTime(c.ready_ps), 7, c.src, c.dir, c.dst, c.bytes);
  engine.Run();
  const uint64_t depart = Edge(c.ready_ps);
  const UnitId q = Queue(c.src, c.dir);
  EXPECT_THAT(logs_[c.dst].arrivals,
              ElementsAreArray({Arrival{depart + Cyc(Ser(c.bytes) + lat_), q, 7, c.src, c.dst, 0, 1,
                                        c.bytes, c.bytes, q}}));
  // It has credit: accepted at the send itself (not at the clock edge it departs on).
  EXPECT_THAT(logs_[c.src].accepted,
              ElementsAreArray({Accepted{c.ready_ps, q, 7, c.ready_ps}}));
  EXPECT_THAT(logs_[c.src].arrivals, IsEmpty());
  EXPECT_THAT(logs_[c.dst].accepted, IsEmpty());
  EXPECT_EQ(engine.events_processed(), 3u);  // IpcqSend, IpcqArrival, IpcqAccepted
  const IpcqStats& stats = State(c.src, c.dir).stats();
  EXPECT_EQ(stats.sent_bytes, Bytes(c.bytes));
  EXPECT_EQ(stats.link_busy, SimTime(Cyc(Ser(c.bytes))));
  EXPECT_EQ(stats.credit_stall, SimTime(0));
}

INSTANTIATE_TEST_SUITE_P(Directions, IpcqSingleMessageTest,
                         ::testing::Values(SingleCase{0, Dir::kEast, 1, 1, 10'000},
                                           SingleCase{0, Dir::kSouth, 2, 64, 10'000},
                                           SingleCase{3, Dir::kNorth, 1, 65, 10'001},
                                           SingleCase{3, Dir::kWest, 2, 1000, 999},
                                           SingleCase{1, Dir::kWest, 0, 16384, 0},
                                           SingleCase{2, Dir::kEast, 3, 16383, 123'456}));

// --- A message larger than a chunk is chunked; the chunks follow each other on the link --------

TEST_F(IpcqActorTest, LargeMessageIsChunkedAndChunksArriveBackToBack) {
  Engine engine;
  Build(engine);
  const uint64_t bytes = 3 * chunk_ + 100;
  const uint64_t ready = Cyc(10);
  SendMsg(engine, SimTime(ready), 1, 0, Dir::kEast, 1, bytes);
  engine.Run();
  const UnitId q = Queue(0, Dir::kEast);
  std::vector<Arrival> expected;
  uint64_t depart = ready;
  uint64_t last_depart = 0;
  for (uint32_t i = 0; i < 4; ++i) {
    const uint64_t size = i < 3 ? chunk_ : 100;
    last_depart = depart;
    depart += Cyc(Ser(size));
    expected.push_back(Arrival{depart + Cyc(lat_), q, 1, 0, 1, i, 4, size, bytes, q});
  }
  EXPECT_THAT(logs_[1].arrivals, ElementsAreArray(expected));
  EXPECT_EQ(last_depart, ready + Cyc(3 * Ser(chunk_)));
  // Wholly accepted at once (it fits the credit): at the send, not at its last departure.
  EXPECT_THAT(logs_[0].accepted, ElementsAreArray({Accepted{ready, q, 1, ready}}));
}

// --- Credit backpressure: a send with no credit blocks until the receiver pops ------------------

TEST_F(IpcqActorTest, SendWithNoCreditBlocksUntilTheReceiverPops) {
  Engine engine;
  Build(engine);
  const UnitId q = Queue(0, Dir::kSouth);
  // Message 1 fills the queue exactly; nobody pops it.
  const uint64_t t0 = Cyc(10);
  SendMsg(engine, SimTime(t0), 1, 0, Dir::kSouth, 2, queue_);
  const uint64_t chunks = queue_ / chunk_;
  const uint64_t link_free = t0 + Cyc(chunks * Ser(chunk_));
  const uint64_t last_arrive = link_free + Cyc(lat_);
  // Message 2 is sent while message 1 is still on the link: it has no credit.
  const uint64_t t1 = Cyc(20);
  const uint64_t bytes2 = 1000;
  SendMsg(engine, SimTime(t1), 2, 0, Dir::kSouth, 2, bytes2);
  const uint64_t t_pop = last_arrive + Cyc(100) + 1;  // off a clock edge
  engine.RunUntil(SimTime(t_pop - 1));
  EXPECT_THAT(logs_[0].accepted, ElementsAreArray({Accepted{t0, q, 1, t0}}));  // had credit
  EXPECT_EQ(logs_[2].arrivals.size(), chunks);
  EXPECT_EQ(logs_[2].arrivals.back().time_ps, last_arrive);
  EXPECT_EQ(engine.pending_events(), 0u) << "message 2 must wait for a pop";
  EXPECT_EQ(State(0, Dir::kSouth).model->blocked_bytes(), Bytes(bytes2));

  // The receiver pops message 1: the credit is back at edge(pop) + latency, then message 2
  // departs and serialises.
  PopMsg(engine, SimTime(t_pop), 1, queue_, 2, 0, Dir::kSouth);
  engine.Run();
  const uint64_t credit_return = Edge(t_pop) + Cyc(lat_);
  ASSERT_EQ(logs_[0].accepted.size(), 2u);
  EXPECT_EQ(logs_[0].accepted[1], (Accepted{credit_return, q, 2, credit_return}));
  EXPECT_GT(logs_[0].accepted[1].time_ps, t_pop);
  ASSERT_EQ(logs_[2].arrivals.size(), chunks + 1);
  EXPECT_EQ(logs_[2].arrivals.back(), (Arrival{credit_return + Cyc(Ser(bytes2) + lat_), q, 2, 0, 2,
                                               0, 1, bytes2, bytes2, q}));
  const IpcqStats& stats = State(0, Dir::kSouth).stats();
  EXPECT_EQ(stats.sent_bytes, Bytes(queue_ + bytes2));
  EXPECT_EQ(stats.credit_stall, SimTime(credit_return - link_free));
}

// A message larger than the free credit is partly sent: its first chunks depart at once, the
// rest and its IpcqAccepted wait for a pop.
TEST_F(IpcqActorTest, PartlyBlockedMessageIsAcceptedWhenItsLastChunkDeparts) {
  Engine engine;
  Build(engine);
  const UnitId q = Queue(3, Dir::kNorth);
  const uint64_t first = queue_ - chunk_;  // leaves one chunk of credit
  SendMsg(engine, SimTime(0), 1, 3, Dir::kNorth, 1, first);
  SendMsg(engine, SimTime(0), 2, 3, Dir::kNorth, 1, 2 * chunk_);
  const uint64_t t_pop = Cyc(10'000);
  PopMsg(engine, SimTime(t_pop), 1, first, 1, 3, Dir::kNorth);
  engine.Run();
  const uint64_t credit_return = Edge(t_pop) + Cyc(lat_);
  const uint64_t second_chunk0 = Cyc((first / chunk_) * Ser(chunk_));
  ASSERT_EQ(logs_[3].accepted.size(), 2u);
  EXPECT_EQ(logs_[3].accepted[1], (Accepted{credit_return, q, 2, credit_return}));
  ASSERT_EQ(logs_[1].arrivals.size(), first / chunk_ + 2);
  const Arrival& a0 = logs_[1].arrivals[first / chunk_];
  const Arrival& a1 = logs_[1].arrivals[first / chunk_ + 1];
  EXPECT_EQ(a0, (Arrival{second_chunk0 + Cyc(Ser(chunk_) + lat_), q, 2, 3, 1, 0, 2, chunk_,
                         2 * chunk_, q}));
  EXPECT_EQ(a1, (Arrival{credit_return + Cyc(Ser(chunk_) + lat_), q, 2, 3, 1, 1, 2, chunk_,
                         2 * chunk_, q}));
}

// --- Streaming: a receiver popping at each arrival passes a message larger than the queue ------

struct StreamCase {
  uint64_t queue_chunks;    // queue_bytes in chunks
  uint64_t latency_cycles;  // 0: as shipped
  friend std::ostream& operator<<(std::ostream& os, const StreamCase& c) {
    return os << c.queue_chunks << " chunks of credit, latency "
              << (c.latency_cycles == 0 ? std::string("as shipped")
                                        : std::to_string(c.latency_cycles));
  }
};

class IpcqStreamingTest : public IpcqActorTest, public ::testing::WithParamInterface<StreamCase> {};

// Chunk i departs when the link is free and the credit of chunk i - k (k = queue in chunks) is
// back: depart_i = max(depart_{i-1} + ser, arrive_{i-k} + lat), arrive_i = depart_i + ser + lat
// (pops happen at arrivals, which are on clock edges).
TEST_P(IpcqStreamingTest, PopAtEachArrivalPassesAMessageLargerThanTheQueue) {
  const StreamCase c = GetParam();
  pb::Ipcq* ipcq = chip_.mutable_sip()->mutable_cube()->mutable_ipcq();
  ipcq->set_queue_bytes(c.queue_chunks * ipcq->chunk_bytes());
  if (c.latency_cycles != 0) ipcq->mutable_link()->set_latency_cycles(c.latency_cycles);
  Engine engine;
  Build(engine, /*receivers_pop_on_arrival=*/true);
  const uint64_t bytes = 3 * queue_;
  const uint64_t n = bytes / chunk_;
  SendMsg(engine, SimTime(Cyc(5)), 9, 1, Dir::kSouth, 3, bytes);
  engine.Run();
  const UnitId q = Queue(1, Dir::kSouth);
  const uint64_t ser = Cyc(Ser(chunk_));
  std::vector<uint64_t> depart(n), arrive(n);
  std::vector<Arrival> expected;
  uint64_t stall = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t link = i == 0 ? Cyc(5) : depart[i - 1] + ser;
    const uint64_t credit = i < c.queue_chunks ? 0 : arrive[i - c.queue_chunks] + Cyc(lat_);
    depart[i] = std::max(link, credit);
    stall += depart[i] - link;
    arrive[i] = depart[i] + ser + Cyc(lat_);
    expected.push_back(Arrival{arrive[i], q, 9, 1, 3, static_cast<uint32_t>(i),
                               static_cast<uint32_t>(n), chunk_, bytes, q});
  }
  EXPECT_THAT(logs_[3].arrivals, ElementsAreArray(expected));
  EXPECT_THAT(logs_[1].accepted, ElementsAreArray({Accepted{depart[n - 1], q, 9, depart[n - 1]}}));
  const IpcqActorState& st = State(1, Dir::kSouth);
  EXPECT_EQ(st.stats().sent_bytes, Bytes(bytes));
  EXPECT_EQ(st.stats().credit_stall, SimTime(stall));
  EXPECT_EQ(st.model->pending_messages(), 0u);
  EXPECT_TRUE(st.messages.empty());
}

INSTANTIATE_TEST_SUITE_P(Credits, IpcqStreamingTest,
                         ::testing::Values(StreamCase{1, 0}, StreamCase{2, 0}, StreamCase{16, 0},
                                           StreamCase{2, 300}, StreamCase{3, 300}));

// --- Queues are independent; same scenario twice gives the same events ---------------------------

TEST_F(IpcqActorTest, SameScenarioTwiceGivesIdenticalEvents) {
  const auto run = [this] {
    Engine engine;
    Build(engine, /*receivers_pop_on_arrival=*/true);
    uint64_t id = 1;
    for (uint32_t p = 0; p < 4; ++p) {
      for (const Dir dir : topology::kAllDirs) {
        const std::optional<uint32_t> n = index_.pe_mesh().Neighbour(p, dir);
        if (!n.has_value()) continue;
        SendMsg(engine, SimTime(Cyc(p)), id++, p, dir, *n, 5 * chunk_ + p);
        SendMsg(engine, SimTime(Cyc(3)), id++, p, dir, *n, queue_ + 17);
      }
    }
    engine.Run();
    std::vector<Log> logs = logs_;
    return logs;
  };
  const std::vector<Log> first = run();
  const std::vector<Log> second = run();
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_EQ(first[p].arrivals, second[p].arrivals);
    EXPECT_EQ(first[p].accepted, second[p].accepted);
    EXPECT_EQ(first[p].accepted.size(), 4u) << "pe " << p << " has two queues, two messages each";
  }
}

// --- Invalid sends are kernel-runtime bugs: fail loudly, naming queue, message and reason -------

struct BadSend {
  std::string name;
  uint32_t queue_pe;
  Dir dir;
  uint32_t src;
  uint32_t dst;
  uint64_t bytes;
  std::string error;  // regex
  friend std::ostream& operator<<(std::ostream& os, const BadSend& c) { return os << c.name; }
};

class IpcqBadSendDeathTest : public IpcqActorTest, public ::testing::WithParamInterface<BadSend> {};

TEST_P(IpcqBadSendDeathTest, FailsNamingTheQueueTheMessageAndTheReason) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const BadSend c = GetParam();
  EXPECT_DEATH(
      {
        Engine engine;
        Build(engine);
        auto send = std::make_shared<pb::IpcqSend>();
        send->set_message_id(42);
        send->set_src_pe(c.src);
        send->set_dst_pe(c.dst);
        send->set_bytes(c.bytes);
        engine.Send(Cpu(c.queue_pe), SimTime(0), Queue(c.queue_pe, c.dir),
                    std::shared_ptr<const pb::IpcqSend>(std::move(send)));
        engine.Run();
      },
      c.error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, IpcqBadSendDeathTest,
    ::testing::Values(
        BadSend{"WrongSrc", 0, Dir::kEast, 1, 0, 64,
                "queue sip0.cube0.pe0.ipcq.E: IpcqSend 42 from pe 1: src_pe is not this "
                "queue's pe 0"},
        BadSend{"NotTheNeighbour", 0, Dir::kEast, 0, 2, 64,
                "queue sip0.cube0.pe0.ipcq.E: IpcqSend 42 to pe 2: dst_pe is not the E "
                "neighbour of pe 0 \\(pe 1\\)"},
        BadSend{"OtherCube", 0, Dir::kEast, 0, 5, 64,
                "queue sip0.cube0.pe0.ipcq.E: IpcqSend 42 to pe 5: dst_pe is not the E "
                "neighbour"},
        BadSend{"MeshEdge", 0, Dir::kWest, 0, 1, 64,
                "queue sip0.cube0.pe0.ipcq.W: IpcqSend 42 to pe 1: pe 0 has no W neighbour"},
        BadSend{"Empty", 3, Dir::kNorth, 3, 1, 0,
                "queue sip0.cube0.pe3.ipcq.N: IpcqSend 42 has 0 bytes"}),
    [](const ::testing::TestParamInfo<BadSend>& info) { return info.param.name; });

TEST_F(IpcqActorTest, DuplicatePendingMessageIdDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Engine engine;
        Build(engine);
        SendMsg(engine, SimTime(0), 5, 0, Dir::kEast, 1, 64);
        SendMsg(engine, SimTime(Cyc(1000)), 5, 0, Dir::kEast, 1, 64);
        engine.Run();
      },
      "queue sip0.cube0.pe0.ipcq.E: IpcqSend 5: message_id is still pending");
}

// The sender's decision (IpcqSend::sender_blocks, the kernel runtime's shadow credit) must be
// the queue's: a wrong one either way is a bug.
TEST_F(IpcqActorTest, SenderDecisionThatIsNotTheQueuesDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto send = [&](Engine& engine, uint64_t id, uint64_t bytes, bool blocks) {
    auto m = std::make_shared<pb::IpcqSend>();
    m->set_message_id(id);
    m->set_src_pe(0);
    m->set_dst_pe(1);
    m->set_bytes(bytes);
    m->set_sender_blocks(blocks);
    engine.Send(Cpu(0), SimTime(0), Queue(0, Dir::kEast),
                std::shared_ptr<const pb::IpcqSend>(std::move(m)));
  };
  EXPECT_DEATH(
      {
        Engine engine;
        Build(engine);
        send(engine, 5, 64, true);
        engine.Run();
      },
      "queue sip0.cube0.pe0.ipcq.E: IpcqSend 5 of 64 B: the sender waits for credit, but every "
      "chunk has credit now");
  EXPECT_DEATH(
      {
        Engine engine;
        Build(engine);
        send(engine, 5, queue_, false);
        send(engine, 6, 64, false);
        engine.Run();
      },
      "queue sip0.cube0.pe0.ipcq.E: IpcqSend 6 of 64 B: the sender goes on, but a chunk has no "
      "credit now");
}

TEST_F(IpcqActorTest, PopOfAMessageThatIsNotTheHeadDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Engine engine;
        Build(engine);
        SendMsg(engine, SimTime(0), 5, 0, Dir::kEast, 1, 64);
        SendMsg(engine, SimTime(0), 6, 0, Dir::kEast, 1, 64);
        PopMsg(engine, SimTime(Cyc(1000)), 6, 64, 1, 0, Dir::kEast);
        engine.Run();
      },
      "queue sip0.cube0.pe0.ipcq.E: IpcqPop of message 6, but the head message is 5");
}

}  // namespace
}  // namespace ahbm::sim
