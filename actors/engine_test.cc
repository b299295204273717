#include "actors/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <queue>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "actors/time.h"
#include "caf/event_based_actor.hpp"
#include "caf/meta/type_name.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

// Test message; CAF 0.17 finds `inspect` by ADL.
struct Token {
  uint64_t value;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Token& x) {
  return f(caf::meta::type_name("Token"), x.value);
}

// What a unit saw: when, who it is, who sent it, what.
struct Delivery {
  uint64_t time_ps;
  UnitId dst;
  UnitId src;
  uint64_t value;
  friend bool operator==(const Delivery&, const Delivery&) = default;
};

void PrintTo(const Delivery& d, std::ostream* os) {
  *os << "{t=" << d.time_ps << " dst=" << d.dst << " src=" << d.src << " v=" << d.value << "}";
}

using Log = std::vector<Delivery>;

constexpr UnitId kDriver = 0xFFFF'FFFF;  // the test body, sending from outside any actor

// Logs every Token it receives.
caf::behavior Recorder(caf::event_based_actor*, Engine* engine, UnitId self, Log* log) {
  return {[=](const Msg<Token>& t) {
    // The stamp is the event's key, as the engine reports it while the handler runs.
    EXPECT_EQ(t.stamp.time, engine->now());
    EXPECT_EQ(t.stamp.src, engine->current_src());
    EXPECT_EQ(t.stamp.key(), engine->current_key());
    log->push_back({engine->now().value(), self, engine->current_src(), t->value});
  }};
}

// Logs a Token and passes value + 1 to `peer` after `delay`, while value < limit.
caf::behavior Relay(caf::event_based_actor*, Engine* engine, UnitId self, UnitId peer,
                    SimTime delay, uint64_t limit, Log* log) {
  return {[=](const Msg<Token>& t) {
    log->push_back({engine->now().value(), self, engine->current_src(), t->value});
    if (t->value < limit) engine->Send(self, delay, peer, Token{t->value + 1});
  }};
}

template <class... Ts>
void Add(Engine& engine, UnitId id, Ts&&... args) {
  engine.Register(id, "unit" + std::to_string(id),
                  engine.system().spawn(std::forward<Ts>(args)...));
}

TEST(EngineTest, EqualTimeEventsAreOrderedBySrcIdThenSendOrder) {
  Log log;
  Engine engine;
  Add(engine, 100, Recorder, &engine, UnitId{100}, &log);
  engine.Send(5, SimTime(10), 100, Token{1});
  engine.Send(3, SimTime(10), 100, Token{2});
  engine.Send(5, SimTime(10), 100, Token{3});
  engine.Send(3, SimTime(10), 100, Token{4});
  engine.Send(9, SimTime(5), 100, Token{5});
  engine.Send(3, SimTime(20), 100, Token{6});
  engine.Send(1, SimTime(10), 100, Token{7});
  engine.Run();
  EXPECT_THAT(log, testing::ElementsAre(Delivery{5, 100, 9, 5}, Delivery{10, 100, 1, 7},
                                        Delivery{10, 100, 3, 2}, Delivery{10, 100, 3, 4},
                                        Delivery{10, 100, 5, 1}, Delivery{10, 100, 5, 3},
                                        Delivery{20, 100, 3, 6}));
  EXPECT_EQ(engine.events_processed(), 7u);
  EXPECT_EQ(engine.now(), SimTime(20));
}

// Sends to the recorder, interleaving two delivery times; FIFO must hold per time.
caf::behavior Burst(caf::event_based_actor*, Engine* engine, UnitId self, UnitId recorder) {
  return {[=](const Msg<Token>&) {
    engine->Send(self, SimTime(5), recorder, Token{10});
    engine->Send(self, SimTime(0), recorder, Token{11});
    engine->Send(self, SimTime(5), recorder, Token{12});
    engine->Send(self, SimTime(0), recorder, Token{13});
    engine->Send(self, SimTime(0), recorder, Token{14});
  }};
}

TEST(EngineTest, OneSendersEventsAtEqualTimeArriveInSendOrder) {
  Log log;
  Engine engine;
  Add(engine, 2, Recorder, &engine, UnitId{2}, &log);
  Add(engine, 1, Burst, &engine, UnitId{1}, UnitId{2});
  engine.Send(kDriver, SimTime(7), 1, Token{0});
  engine.Run();
  EXPECT_THAT(
      log, testing::ElementsAre(Delivery{7, 2, 1, 11}, Delivery{7, 2, 1, 13}, Delivery{7, 2, 1, 14},
                                Delivery{12, 2, 1, 10}, Delivery{12, 2, 1, 12}));
}

TEST(EngineTest, ZeroDelaySendsGoThroughTheHeapAfterTheCurrentEvent) {
  Log log;
  Engine engine;
  Add(engine, 100, Recorder, &engine, UnitId{100}, &log);
  // Unit 30 forwards its kick to the recorder with zero delay (limit 1: one hop).
  Add(engine, 30, Relay, &engine, UnitId{30}, UnitId{100}, SimTime(0), uint64_t{1}, &log);
  engine.Send(60, SimTime(10), 100, Token{60});
  engine.Send(40, SimTime(10), 100, Token{40});
  engine.Send(45, SimTime(10), 30, Token{0});
  engine.Run();
  // (10,40) and the kick (10,45) come first; the forwarded (10,30) did not exist yet when
  // (10,40) was delivered, so it arrives after it but still before (10,60).
  EXPECT_THAT(log, testing::ElementsAre(Delivery{10, 100, 40, 40}, Delivery{10, 30, 45, 0},
                                        Delivery{10, 100, 30, 1}, Delivery{10, 100, 60, 60}));
}

// A unit that wakes itself: on Token{n} it sets timers after 5 and 0 ps and sends Token{n}
// to `peer` after 5 ps, so a wake-up and a message of the same unit share one instant.
class Waker : public Engine::TimerHandler {
 public:
  Waker(Engine* engine, UnitId self, UnitId peer, Log* log)
      : engine_(engine), self_(self), peer_(peer), log_(log) {}
  void OnTimer(uint64_t arg) override {
    log_->push_back({engine_->now().value(), self_, engine_->current_src(), 1000 + arg});
  }
  void OnToken(const Token& t) {
    engine_->SetTimer(self_, SimTime(5), t.value);
    engine_->Send(self_, SimTime(5), peer_, Token{t.value});
    engine_->SetTimer(self_, SimTime(0), t.value + 1);
  }

 private:
  Engine* engine_;
  UnitId self_, peer_;
  Log* log_;
};

caf::behavior WakerBehavior(caf::event_based_actor*, Engine* engine, Waker* waker, UnitId self) {
  engine->SetTimerHandler(self, waker);
  return {[waker](const Msg<Token>& t) { waker->OnToken(*t); }};
}

TEST(EngineTest, TimersAreEventsOfTheirUnitKeyedLikeASendToItself) {
  Log log;
  Engine engine;
  Add(engine, 100, Recorder, &engine, UnitId{100}, &log);
  Waker waker(&engine, 50, 100, &log);
  Add(engine, 50, WakerBehavior, &engine, &waker, UnitId{50});
  engine.Send(60, SimTime(15), 100, Token{60});
  engine.Send(40, SimTime(15), 100, Token{40});
  engine.Send(kDriver, SimTime(10), 50, Token{7});
  engine.Run();
  // At 10: the kick, then the zero-delay wake-up (seq 2 of unit 50). At 15: src 40, then unit
  // 50's wake-up (seq 0) and its Token (seq 1) in the order set, then src 60.
  EXPECT_THAT(log, testing::ElementsAre(Delivery{10, 50, 50, 1008}, Delivery{15, 100, 40, 40},
                                        Delivery{15, 50, 50, 1007}, Delivery{15, 100, 50, 7},
                                        Delivery{15, 100, 60, 60}));
  EXPECT_EQ(engine.events_processed(), 6u);  // timers count as events
}

TEST(EngineTest, PingPongSeesExactDeliveryTimes) {
  const ClockDomain ping_clock = ClockDomain::FromMHz(1000).value();
  const ClockDomain pong_clock = ClockDomain::FromMHz(800).value();
  const SimTime ping_delay = ping_clock.ToTime(Cycles(100));  // 100000 ps
  const SimTime pong_delay = pong_clock.ToTime(Cycles(3));    // 3750 ps
  Log log;
  Engine engine;
  Add(engine, 1, Relay, &engine, UnitId{1}, UnitId{2}, ping_delay, uint64_t{6}, &log);
  Add(engine, 2, Relay, &engine, UnitId{2}, UnitId{1}, pong_delay, uint64_t{6}, &log);
  engine.Send(kDriver, SimTime(0), 1, Token{0});
  engine.Run();
  EXPECT_THAT(log, testing::ElementsAre(Delivery{0, 1, kDriver, 0}, Delivery{100000, 2, 1, 1},
                                        Delivery{103750, 1, 2, 2}, Delivery{203750, 2, 1, 3},
                                        Delivery{207500, 1, 2, 4}, Delivery{307500, 2, 1, 5},
                                        Delivery{311250, 1, 2, 6}));
  EXPECT_EQ(engine.now(), SimTime(311250));
  EXPECT_EQ(engine.events_processed(), 7u);
}

TEST(EngineTest, RunUntilStopsAtTheLimitAndAdvancesNow) {
  Log log;
  Engine engine;
  Add(engine, 7, Recorder, &engine, UnitId{7}, &log);
  for (uint64_t t : {10, 20, 30}) engine.Send(kDriver, SimTime(t), 7, Token{t});
  engine.RunUntil(SimTime(20));
  EXPECT_EQ(log.size(), 2u);
  EXPECT_EQ(engine.now(), SimTime(20));
  EXPECT_EQ(engine.pending_events(), 1u);
  engine.RunUntil(SimTime(25));
  EXPECT_EQ(engine.now(), SimTime(25));
  // Delays are relative to now(): 25 + 1 = 26, before the pending event at 30.
  engine.Send(kDriver, SimTime(1), 7, Token{26});
  engine.Run();
  EXPECT_THAT(log,
              testing::ElementsAre(Delivery{10, 7, kDriver, 10}, Delivery{20, 7, kDriver, 20},
                                   Delivery{26, 7, kDriver, 26}, Delivery{30, 7, kDriver, 30}));
}

TEST(EngineTest, ShutdownWithPendingEventsIsClean) {
  Log log;
  {
    Engine engine;
    Add(engine, 7, Recorder, &engine, UnitId{7}, &log);
    engine.Send(kDriver, SimTime(10), 7, Token{1});
    engine.Send(kDriver, SimTime(20), 7, Token{2});
    engine.RunUntil(SimTime(15));
    EXPECT_EQ(engine.pending_events(), 1u);
  }  // ~Engine: the unit ends with its handle, ~actor_system returns.
  EXPECT_EQ(log.size(), 1u);
}

// --- A branching workload with many ties, against a plain-C++ reference. ---

constexpr size_t kUnits = 16;
constexpr uint64_t kStartValue = 18;

// Unit ids are sparse and not monotonic in their index.
std::vector<UnitId> WorkloadIds() {
  std::vector<UnitId> ids;
  for (UnitId k = 0; k < kUnits; ++k) ids.push_back(1000 + (k * 7919) % 10007);
  return ids;
}

struct Out {
  SimTime delay;
  UnitId dst;
  uint64_t value;
};

// What unit `self` sends when it receives `value`: one message, two when value % 3 == 0.
// Delays are 0..300 ps in steps of 100, so equal delivery times are common.
std::vector<Out> MixerOutputs(UnitId self, uint64_t value, const std::vector<UnitId>& ids) {
  if (value == 0) return {};
  const uint64_t h = (uint64_t{self} * 2654435761u) ^ (value * 40503u);
  std::vector<Out> out = {{SimTime((h >> 8) % 4 * 100), ids[h % ids.size()], value - 1}};
  if (value % 3 == 0) out.push_back({SimTime(0), ids[(h >> 16) % ids.size()], value - 1});
  return out;
}

caf::behavior Mixer(caf::event_based_actor*, Engine* engine, UnitId self,
                    const std::vector<UnitId>* ids, Log* log) {
  return {[=](const Msg<Token>& t) {
    log->push_back({engine->now().value(), self, engine->current_src(), t->value});
    for (const Out& o : MixerOutputs(self, t->value, *ids)) {
      engine->Send(self, o.delay, o.dst, Token{o.value});
    }
  }};
}

// Spawns and registers units in `order` (indices into WorkloadIds()).
Log RunWorkloadOnEngine(const std::vector<size_t>& order) {
  const std::vector<UnitId> ids = WorkloadIds();
  Log log;
  Engine engine;
  for (size_t i : order) Add(engine, ids[i], Mixer, &engine, ids[i], &ids, &log);
  for (UnitId id : ids) engine.Send(kDriver, SimTime(0), id, Token{kStartValue});
  engine.Run();
  EXPECT_EQ(engine.events_processed(), log.size());
  return log;
}

// The same workload on a plain priority queue keyed (time, src, src_seq).
Log RunWorkloadReference() {
  const std::vector<UnitId> ids = WorkloadIds();
  using Key = std::tuple<uint64_t, UnitId, uint64_t>;
  struct Ev {
    Key key;
    UnitId dst;
    uint64_t value;
    bool operator>(const Ev& o) const { return key > o.key; }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> heap;
  std::vector<std::pair<UnitId, uint64_t>> seq;  // (src, next seq), linear lookup
  auto next_seq = [&](UnitId src) -> uint64_t {
    for (auto& [id, n] : seq) {
      if (id == src) return n++;
    }
    seq.push_back({src, 1});
    return 0;
  };
  for (UnitId id : ids) heap.push({{0, kDriver, next_seq(kDriver)}, id, kStartValue});
  Log log;
  while (!heap.empty()) {
    Ev ev = heap.top();
    heap.pop();
    const uint64_t now = std::get<0>(ev.key);
    log.push_back({now, ev.dst, std::get<1>(ev.key), ev.value});
    for (const Out& o : MixerOutputs(ev.dst, ev.value, ids)) {
      heap.push({{now + o.delay.value(), ev.dst, next_seq(ev.dst)}, o.dst, o.value});
    }
  }
  return log;
}

std::vector<size_t> Identity() {
  std::vector<size_t> order(kUnits);
  for (size_t i = 0; i < kUnits; ++i) order[i] = i;
  return order;
}

// A unit whose handle is still held elsewhere gets an exit message (the others end when the
// engine drops its handle); Shutdown fails its "still running" check if one is left.
TEST(EngineTest, ShutdownEndsUnitsHeldElsewhere) {
  Log log;
  Engine engine;
  Add(engine, 1, Recorder, &engine, UnitId{1}, &log);
  caf::actor held = engine.system().spawn(Recorder, &engine, UnitId{2}, &log);
  engine.Register(2, "held", held);
  engine.Send(kDriver, SimTime(1), 2, Token{7});
  engine.Run();
  engine.Shutdown();
  EXPECT_EQ(engine.system().registry().running(), 0u);
  EXPECT_THAT(log, testing::ElementsAre(Delivery{1, 2, kDriver, 7}));
}

TEST(EngineDeterminismTest, MatchesPlainHeapReference) {
  const Log log = RunWorkloadOnEngine(Identity());
  EXPECT_GT(log.size(), 2000u);
  EXPECT_EQ(log, RunWorkloadReference());
}

TEST(EngineDeterminismTest, SameWorkloadTwiceGivesIdenticalLogs) {
  EXPECT_EQ(RunWorkloadOnEngine(Identity()), RunWorkloadOnEngine(Identity()));
}

TEST(EngineDeterminismTest, ShuffledRegistrationOrderGivesIdenticalLogs) {
  const Log baseline = RunWorkloadOnEngine(Identity());
  std::vector<size_t> order = Identity();
  std::reverse(order.begin(), order.end());
  EXPECT_EQ(RunWorkloadOnEngine(order), baseline);
  std::mt19937 rng(/*seed=*/42);
  for (int round = 0; round < 3; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    EXPECT_EQ(RunWorkloadOnEngine(order), baseline) << "round " << round;
  }
}

// --- Islands: units that never exchange an event, delivered one island after the other. ---

// Two Mixer workloads on disjoint id sets (each sends only inside its own set), run on one
// heap or as two islands. Returns the log; `last` gets now() after Run.
Log RunTwoWorkloads(bool islands, SimTime* last) {
  const std::vector<UnitId> a = WorkloadIds();
  const std::vector<UnitId> b = [&a] {
    std::vector<UnitId> ids;
    for (UnitId id : a) ids.push_back(id + 20000);
    return ids;
  }();
  Log log;
  Engine engine;
  if (islands) {
    std::vector<uint32_t> island_of(40000, Engine::kNoIsland);
    for (UnitId id : a) island_of[id] = 0;
    for (UnitId id : b) island_of[id] = 1;
    engine.SetIslands(std::move(island_of));
    EXPECT_EQ(engine.islands(), 2u);
  }
  for (const std::vector<UnitId>* ids : {&a, &b}) {
    for (UnitId id : *ids) Add(engine, id, Mixer, &engine, id, ids, &log);
  }
  // Island b starts later and with more work: its last event is the latest.
  for (UnitId id : a) engine.Send(kDriver, SimTime(0), id, Token{kStartValue});
  for (UnitId id : b) engine.Send(kDriver, SimTime(50), id, Token{kStartValue + 2});
  engine.Run();
  *last = engine.now();
  return log;
}

Log OfUnit(const Log& log, UnitId unit) {
  Log out;
  for (const Delivery& d : log) {
    if (d.dst == unit) out.push_back(d);
  }
  return out;
}

TEST(EngineIslandTest, EveryUnitSeesWhatTheSingleHeapGivesIt) {
  SimTime one_heap_end, islands_end;
  const Log one_heap = RunTwoWorkloads(false, &one_heap_end);
  const Log islands = RunTwoWorkloads(true, &islands_end);
  ASSERT_EQ(islands.size(), one_heap.size());
  EXPECT_GT(one_heap.size(), 4000u);
  EXPECT_NE(islands, one_heap);  // the islands' events interleave on one heap
  for (UnitId id : WorkloadIds()) {
    EXPECT_EQ(OfUnit(islands, id), OfUnit(one_heap, id)) << "unit " << id;
    EXPECT_EQ(OfUnit(islands, id + 20000), OfUnit(one_heap, id + 20000)) << "unit " << id + 20000;
  }
  // Island 0 first, whole; then island 1.
  const auto first_b = std::find_if(islands.begin(), islands.end(),
                                    [](const Delivery& d) { return d.dst >= 20000; });
  EXPECT_TRUE(std::all_of(first_b, islands.end(), [](const Delivery& d) { return d.dst >= 20000; }));
  // now() after Run: the latest event over both islands.
  EXPECT_EQ(islands_end, one_heap_end);
  EXPECT_EQ(islands_end.value(), std::max_element(islands.begin(), islands.end(),
                                                  [](const Delivery& x, const Delivery& y) {
                                                    return x.time_ps < y.time_ps;
                                                  })->time_ps);
}

TEST(EngineIslandDeathTest, AnEventBetweenIslandsFails) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Log log;
        Engine engine;
        engine.SetIslands({Engine::kNoIsland, 0, 1});
        Add(engine, 1, Relay, &engine, UnitId{1}, UnitId{2}, SimTime(5), 3, &log);
        Add(engine, 2, Recorder, &engine, UnitId{2}, &log);
        engine.Send(kDriver, SimTime(1), 1, Token{0});
        engine.Run();
      },
      "island 0.* to unit2 .*island 1.*: islands "
      "must never exchange events");
}

TEST(EngineIslandDeathTest, AnEventToAUnitInNoIslandFails) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Log log;
        Engine engine;
        engine.SetIslands({0, 1, Engine::kNoIsland});
        Add(engine, 2, Recorder, &engine, UnitId{2}, &log);
        engine.Send(kDriver, SimTime(1), 2, Token{0});
      },
      "to unit2 .*, a unit in no island");
}

// --- Failing loudly. ---

// These actors take an argument besides `self` (their unit id, unused): CAF 0.17.6 spawns a
// function of none by dereferencing a null argument tuple, undefined behaviour that
// `--config=asan` (UBSan) reports; the simulator's own units always take arguments.
caf::behavior Quitter(caf::event_based_actor* self, UnitId /*id*/) {
  return {[=](const Msg<Token>&) { self->quit(); }};
}

caf::behavior Sleeper(caf::event_based_actor* self, UnitId /*id*/) {
  return {[=](const Msg<Token>& t) {
    self->delayed_send(self, std::chrono::seconds(1), Token{t->value + 1});
  }};
}

TEST(EngineDeathTest, CafTimer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Engine engine;
        Add(engine, 7, Sleeper, UnitId{7});
        engine.Send(kDriver, SimTime(1), 7, Token{0});
        engine.Run();
      },
      "unit 7 \\(unit7\\) started a CAF timer");
}

TEST(EngineDeathTest, SendToUnknownUnit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Engine engine;
        engine.Send(kDriver, SimTime(1), 42, Token{0});
        engine.Run();
      },
      "to unknown unit 42");
}

TEST(EngineDeathTest, UnhandledMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Log log;
        Engine engine;
        Add(engine, 7, Recorder, &engine, UnitId{7}, &log);
        engine.Send(kDriver, SimTime(1), 7, std::string("hello"));
        engine.Run();
      },
      "unit 7 \\(unit7\\) has no handler for message");
}

TEST(EngineDeathTest, UnhandledMessageNamesAUnitRegisteredWithoutANameByTheNamer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Log log;
        Engine engine([](UnitId id) { return "named" + std::to_string(id); });
        engine.Register(7, engine.system().spawn(Recorder, &engine, UnitId{7}, &log));
        engine.Send(kDriver, SimTime(1), 7, std::string("hello"));
        engine.Run();
      },
      "unit 7 \\(named7\\) has no handler for message");
}

TEST(EngineDeathTest, UnitTerminatingDuringSimulation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Engine engine;
        Add(engine, 7, Quitter, UnitId{7});
        engine.Send(kDriver, SimTime(1), 7, Token{0});
        engine.Run();
      },
      "unit 7 \\(unit7\\) terminated during simulation");
}

TEST(EngineDeathTest, TimerOfAUnitWithoutTimerHandler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Log log;
        Engine engine;
        Add(engine, 7, Recorder, &engine, UnitId{7}, &log);
        engine.SetTimer(7, SimTime(1), 0);
        engine.Run();
      },
      "wake-up of unit 7 \\(unit7\\), which has no timer handler");
}

TEST(EngineDeathTest, DuplicateUnitId) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Engine engine;
        Add(engine, 7, Quitter, UnitId{7});
        Add(engine, 7, Quitter, UnitId{7});
      },
      "unit id 7 registered twice");
}

TEST(EngineDeathTest, UnregisteredActorAtShutdown) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Engine engine;
        caf::actor kept = engine.system().spawn(Quitter, UnitId{8});
        engine.Shutdown();
      },
      "never registered");
}

}  // namespace
}  // namespace ahbm::sim
