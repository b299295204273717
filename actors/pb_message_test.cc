#include "actors/pb_message.h"

#include <memory>
#include <vector>

#include "actors/engine.h"
#include "actors/time.h"
#include "caf/event_based_actor.hpp"
#include "gtest/gtest.h"
#include "proto/commands.pb.h"

namespace ahbm::sim {
namespace {

using RequestPtr = std::shared_ptr<const pb::HbmRequest>;
using ResponsePtr = std::shared_ptr<const pb::HbmResponse>;

// A fixed-latency memory: answers each request after 100 ps + 1 ps per byte.
caf::behavior Memory(caf::event_based_actor*, Engine* engine, UnitId self,
                     std::vector<const pb::HbmRequest*>* seen) {
  return {[=](const RequestPtr& req) {
    seen->push_back(req.get());
    auto resp = std::make_shared<pb::HbmResponse>();
    resp->set_request_id(req->request_id());
    resp->set_bytes(req->bytes());
    engine->Send(self, SimTime(100 + req->bytes()), engine->current_src(),
                 ResponsePtr(std::move(resp)));
  }};
}

struct Response {
  uint64_t time_ps;
  uint64_t request_id;
  uint64_t bytes;
  friend bool operator==(const Response&, const Response&) = default;
};

caf::behavior Requester(caf::event_based_actor*, Engine* engine, std::vector<Response>* got) {
  return {[=](const ResponsePtr& resp) {
    got->push_back({engine->now().value(), resp->request_id(), resp->bytes()});
  }};
}

TEST(PbMessageTest, SharedProtoTravelsWithoutCopy) {
  std::vector<const pb::HbmRequest*> seen;
  std::vector<Response> got;
  Engine engine;
  engine.Register(1, "requester", engine.system().spawn(Requester, &engine, &got));
  engine.Register(2, "memory", engine.system().spawn(Memory, &engine, UnitId{2}, &seen));
  auto req = std::make_shared<pb::HbmRequest>();
  req->set_request_id(9);
  req->set_bytes(256);
  const pb::HbmRequest* sent = req.get();
  engine.Send(1, SimTime(10), 2, RequestPtr(std::move(req)));
  engine.Run();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], sent);  // the handler saw the very object that was sent
  EXPECT_EQ(got, (std::vector<Response>{{10 + 100 + 256, 9, 256}}));
}

}  // namespace
}  // namespace ahbm::sim
