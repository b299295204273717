#include "bench/ping_fanin.h"

#include "gtest/gtest.h"

namespace ahbm::bench {
namespace {

TEST(PingFanInTest, EngineAndPlainHeapAgreeExactly) {
  for (uint32_t hops : {0u, 1u, 4u, 37u, 400u}) {
    const PingFanInResult plain = RunOnPlainHeap(hops);
    EXPECT_EQ(plain.events, PingFanInEvents(hops)) << hops;
    const PingFanInResult engine = RunOnEngine(hops);
    EXPECT_EQ(engine, plain) << hops;
  }
}

TEST(PingFanInTest, Repeatable) { EXPECT_EQ(RunOnEngine(200), RunOnEngine(200)); }

}  // namespace
}  // namespace ahbm::bench
