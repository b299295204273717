#include "actors/msg.h"

#include <memory>
#include <vector>

#include "actors/engine.h"
#include "actors/time.h"
#include "caf/event_based_actor.hpp"
#include "gtest/gtest.h"
#include "proto/commands.pb.h"

namespace ahbm::sim {
namespace {

// Any protobuf message travels the same way: Completion {cmd_id, end_ps} both ways here.
using RequestPtr = std::shared_ptr<const pb::Completion>;
using ResponsePtr = std::shared_ptr<const pb::Completion>;

// A fixed-latency memory: answers each request after 100 ps + 1 ps per byte.
caf::behavior Memory(caf::event_based_actor*, Engine* engine, UnitId self,
                     std::vector<const pb::Completion*>* seen, std::vector<Stamp>* stamps) {
  return {[=](const Msg<pb::Completion>& req) {
    seen->push_back(req.body.get());
    stamps->push_back(req.stamp);
    auto resp = std::make_shared<pb::Completion>();
    resp->set_cmd_id(req->cmd_id());
    resp->set_end_ps(req->end_ps());
    engine->Send(self, SimTime(100 + req->end_ps()), req.stamp.src, ResponsePtr(std::move(resp)));
  }};
}

struct Response {
  Stamp stamp;
  uint64_t now_ps;
  uint64_t request_id;
  uint64_t bytes;
  friend bool operator==(const Response&, const Response&) = default;
};

caf::behavior Requester(caf::event_based_actor*, Engine* engine, std::vector<Response>* got) {
  return {[=](const Msg<pb::Completion>& resp) {
    got->push_back({resp.stamp, engine->now().value(), resp->cmd_id(), (*resp).end_ps()});
  }};
}

TEST(MsgTest, SharedProtoTravelsWithoutCopyAndStamped) {
  std::vector<const pb::Completion*> seen;
  std::vector<Stamp> stamps;
  std::vector<Response> got;
  Engine engine;
  engine.Register(1, "requester", engine.system().spawn(Requester, &engine, &got));
  engine.Register(2, "memory", engine.system().spawn(Memory, &engine, UnitId{2}, &seen, &stamps));
  for (uint64_t id : {9, 10}) {
    auto req = std::make_shared<pb::Completion>();
    req->set_cmd_id(id);
    req->set_end_ps(256);
    if (id == 9) {
      const pb::Completion* sent = req.get();
      engine.Send(1, SimTime(10), 2, RequestPtr(std::move(req)));
      engine.Run();
      ASSERT_EQ(seen.size(), 1u);
      EXPECT_EQ(seen[0], sent);  // the handler saw the very object that was sent
    } else {
      engine.Send(1, SimTime(5), 2, std::move(req));  // a shared_ptr<T> arrives as Msg<T> too
      engine.Run();
    }
  }
  // The stamps: (time, sender, the sender's sequence number).
  EXPECT_EQ(stamps, (std::vector<Stamp>{{SimTime(10), 1, 0}, {SimTime(366 + 5), 1, 1}}));
  EXPECT_EQ(got, (std::vector<Response>{{{SimTime(366), 2, 0}, 366, 9, 256},
                                        {{SimTime(371 + 356), 2, 1}, 727, 10, 256}}));
  EXPECT_EQ(Stamp::FromKey(got[1].stamp.key()), got[1].stamp);
}

struct Token {
  int value;
};

TEST(MsgTest, PlainValuesTravelByValue) {
  std::vector<std::pair<Stamp, int>> got;
  Engine engine;
  // An argument besides `self` (the unit id, unused): engine_test.cc, "Failing loudly".
  engine.Register(3, "sink", engine.system().spawn([&got](caf::event_based_actor*, UnitId) {
    return caf::behavior{[&got](const Msg<Token>& t) { got.emplace_back(t.stamp, t->value); }};
  }, UnitId{3}));
  engine.Send(7, SimTime(4), 3, Token{41});
  engine.Send(7, SimTime(2), 3, Token{42});
  engine.Run();
  EXPECT_EQ(got, (std::vector<std::pair<Stamp, int>>{{{SimTime(2), 7, 1}, 42},
                                                     {{SimTime(4), 7, 0}, 41}}));
}

}  // namespace
}  // namespace ahbm::sim
