#include "actors/instant_queue.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

struct Ev {
  uint32_t src = 0;
  uint32_t seq = 0;
};

TEST(InstantQueueTest, PopsBySourceThenInPushOrder) {
  InstantStore<Ev> store;
  InstantSet set;
  for (auto [src, seq] : std::vector<std::pair<uint32_t, uint32_t>>{
           {7, 0}, {3, 0}, {7, 1}, {200000, 0}, {3, 1}, {64, 0}, {4095, 0}, {4096, 0}}) {
    store.Push(set, src, 5) = Ev{src, seq};
  }
  std::vector<std::pair<uint32_t, uint32_t>> popped;
  while (!set.empty()) {
    const Ev& min = store.Min(set);
    const Ev ev = store.Pop(set);
    EXPECT_EQ(min.src, ev.src);
    popped.emplace_back(ev.src, ev.seq);
  }
  EXPECT_EQ(popped, (std::vector<std::pair<uint32_t, uint32_t>>{
                        {3, 0}, {3, 1}, {7, 0}, {7, 1}, {64, 0}, {4095, 0}, {4096, 0},
                        {200000, 0}}));
}

// Against a sorted reference: random pushes and pops interleaved (as handlers push while the
// engine pops), two sets sharing one store with disjoint sources.
TEST(InstantQueueTest, MatchesASortedReferenceUnderInterleavedPushAndPop) {
  std::mt19937 rng(12345);
  InstantStore<Ev> store;
  InstantSet sets[2];
  std::vector<std::tuple<uint32_t, uint32_t>> reference[2];
  std::vector<uint32_t> next_seq(InstantStore<Ev>::kMaxSources, 0);
  for (int step = 0; step < 200000; ++step) {
    const int s = static_cast<int>(rng() % 2);
    if (rng() % 3 != 0 || sets[s].empty()) {
      // Sources of set 0 are even, of set 1 odd; dense low ids and a few far ones.
      uint32_t src = rng() % 8 == 0 ? rng() % (InstantStore<Ev>::kMaxSources / 2) : rng() % 600;
      src = 2 * (src / 2) + static_cast<uint32_t>(s);
      if (src >= InstantStore<Ev>::kMaxSources) src -= 2;
      const uint32_t seq = next_seq[src]++;
      store.Push(sets[s], src, 9) = Ev{src, seq};
      reference[s].emplace_back(src, seq);
      std::push_heap(reference[s].begin(), reference[s].end(), std::greater<>());
    } else {
      std::pop_heap(reference[s].begin(), reference[s].end(), std::greater<>());
      const auto [src, seq] = reference[s].back();
      reference[s].pop_back();
      const Ev ev = store.Pop(sets[s]);
      ASSERT_EQ(ev.src, src) << "step " << step;
      ASSERT_EQ(ev.seq, seq) << "step " << step;
    }
    ASSERT_EQ(sets[s].size(), reference[s].size());
  }
}

TEST(InstantQueueDeathTest, ASetHoldsOneTime) {
  InstantStore<Ev> store;
  InstantSet set;
  store.Push(set, 1, 5);
  EXPECT_DEATH(store.Push(set, 2, 6), "holds events of time 5, pushed 6");
}

TEST(InstantQueueDeathTest, SourcesPastTheLimitAreRefused) {
  InstantStore<Ev> store;
  InstantSet set;
  EXPECT_DEATH(store.Push(set, InstantStore<Ev>::kMaxSources, 0), "instant event from source");
}

}  // namespace
}  // namespace ahbm::sim
