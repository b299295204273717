#include "actors/unit_actor.h"

#include <memory>
#include <string>
#include <vector>

#include "actors/engine.h"
#include "actors/msg.h"
#include "actors/time.h"
#include "caf/send.hpp"
#include "gtest/gtest.h"
#include "proto/commands.pb.h"

namespace ahbm::sim {
namespace {

// What a unit's handlers saw: which handler, the stamp, the body.
struct Seen {
  std::string handler;
  Stamp stamp;
  uint64_t id;
  friend bool operator==(const Seen&, const Seen&) = default;
};

struct Log {
  std::vector<Seen> seen;
};

struct UnitState {
  Log* log = nullptr;
};
using Unit = UnitStateActor<UnitState>;

// Two protobuf handlers and one plain-value handler.
caf::behavior TwoKinds(Unit* self, Log* log) {
  self->state.log = log;
  return self->Handlers(
      [self](const Msg<pb::Completion>& m) {
        self->state.log->seen.push_back({"completion", m.stamp, m->cmd_id()});
      },
      [self](const Msg<pb::DmaCmd>& m) {
        self->state.log->seen.push_back({"dma", m.stamp, m->cmd_id()});
      },
      [self](const Msg<uint64_t>& m) { self->state.log->seen.push_back({"value", m.stamp, *m}); });
}

std::shared_ptr<const pb::Completion> Done(uint64_t id) {
  auto m = std::make_shared<pb::Completion>();
  m->set_cmd_id(id);
  return m;
}

std::shared_ptr<const pb::DmaCmd> Dma(uint64_t id) {
  auto m = std::make_shared<pb::DmaCmd>();
  m->set_cmd_id(id);
  return m;
}

TEST(UnitActorTest, StampedMessagesReachTheHandlerOfTheirTypeInEngineOrder) {
  Log log;
  Engine engine;
  engine.Register(1, "unit", engine.system().spawn(TwoKinds, &log));
  engine.Send(7, SimTime(20), 1, Dma(3));
  engine.Send(7, SimTime(10), 1, Done(2));
  engine.Send(5, SimTime(20), 1, uint64_t{4});
  engine.Run();
  EXPECT_EQ(log.seen, (std::vector<Seen>{{"completion", {SimTime(10), 7, 1}, 2},
                                         {"value", {SimTime(20), 5, 0}, 4},
                                         {"dma", {SimTime(20), 7, 0}, 3}}));
  EXPECT_EQ(engine.events_processed(), 3u);
}

TEST(UnitActorDeathTest, AStampedTypeWithoutAHandlerFailsLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Log log;
        Engine engine;
        engine.Register(1, "unit", engine.system().spawn(TwoKinds, &log));
        engine.Send(2, SimTime(1), 1, std::string("no handler"));
        engine.Run();
      },
      "unit 1 \\(unit\\) has no handler for message");
}

// A unit has no mailbox: a message that did not come through Engine::Send fails loudly, naming
// the unit.
TEST(UnitActorDeathTest, AMessageFromOutsideTheEngineFailsLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Log log;
        Engine engine;
        caf::actor unit = engine.system().spawn(TwoKinds, &log);
        engine.Register(1, "unit", unit);
        engine.Run();
        caf::anon_send(unit, Msg<pb::Completion>{{SimTime(1), 9, 0}, Done(11)});
      },
      "got a message from outside the engine");
}

// Still a CAF actor: counted by the actor system while it lives, initialized at the next Run
// (its behavior function runs then), and its state destroyed once when it goes — by becoming
// unreachable, or by an exit message while something else holds it.
struct Counted {
  int* alive = nullptr;
  ~Counted() {
    if (alive != nullptr) --*alive;
  }
};
using CountedUnit = UnitStateActor<Counted>;
caf::behavior CountedBehavior(CountedUnit* self, int* alive, int* initialized) {
  self->state.alive = alive;
  ++*alive;
  ++*initialized;
  return self->Handlers([](const Msg<uint64_t>&) {});
}

TEST(UnitActorTest, LivesAsACafActorAndItsStateGoesOnce) {
  int alive = 0;
  int initialized = 0;
  {
    Engine engine;
    engine.Register(1, "dropped", engine.system().spawn(CountedBehavior, &alive, &initialized));
    caf::actor held = engine.system().spawn(CountedBehavior, &alive, &initialized);
    engine.Register(2, "held", held);
    EXPECT_EQ(engine.system().registry().running(), 2u);
    EXPECT_EQ(initialized, 0);  // not before the engine runs
    engine.Run();
    EXPECT_EQ(initialized, 2);
    EXPECT_EQ(alive, 2);
    engine.Shutdown();  // drops unit 1 (unreachable), sends unit 2 an exit message
    EXPECT_EQ(alive, 0);
    EXPECT_EQ(engine.system().registry().running(), 0u);
  }
  EXPECT_EQ(alive, 0);
}

// A unit registered while the engine runs (from a handler) is initialized at its first
// message, in the same Run.
caf::behavior Spawner(UnitActor* self, Engine* engine, Log* log) {
  return self->Handlers([engine, log](const Msg<uint64_t>&) {
    engine->Register(2, "late", engine->system().spawn(TwoKinds, log));
    engine->Send(1, SimTime(0), 2, Done(5));
  });
}

TEST(UnitActorTest, AUnitRegisteredDuringARunGetsItsMessageInThatRun) {
  Log log;
  Engine engine;
  engine.Register(1, "spawner", engine.system().spawn(Spawner, &engine, &log));
  engine.Send(9, SimTime(3), 1, uint64_t{1});
  engine.Run();
  EXPECT_EQ(log.seen, (std::vector<Seen>{{"completion", {SimTime(3), 1, 0}, 5}}));
}

}  // namespace
}  // namespace ahbm::sim
