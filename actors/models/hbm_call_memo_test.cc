// The call memo gives exactly what simulating every call gives: call by call on random call
// streams (every refresh mode, both schedulers, reads and writes, a short queue), and a call
// that meets a refresh is simulated, never replayed.
#include "actors/models/hbm_call_memo.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {
namespace {

// A DMA call's share of one channel: chunks of chunk_bursts bursts, each from its first.
struct Call {
  std::vector<uint64_t> chunks;
  uint32_t chunk_bursts = 8;
  pb::HbmAddressMap map = pb::BANK_GROUP_FIRST;
};

// `chunks` chunks of 8 bursts from burst `first` on.
Call Stream(uint64_t first, uint64_t chunks, pb::HbmAddressMap map = pb::BANK_GROUP_FIRST) {
  Call c;
  for (uint64_t i = 0; i < chunks; ++i) c.chunks.push_back(first + 8 * i);
  c.map = map;
  return c;
}

// The call simulated burst by burst, without the memo.
HbmCallResult Simulate(HbmBankModel& model, uint64_t arrival, const Call& call, bool write) {
  std::vector<HbmBankAddress> bursts;
  for (uint64_t c : call.chunks) {
    for (uint64_t k = 0; k < call.chunk_bursts; ++k) {
      bursts.push_back(MapBurst(c + k, call.map, model.timing()));
    }
  }
  return model.ServeCall(arrival, bursts, write);
}

HbmCallResult Memoized(HbmCallMemo& memo, HbmBankModel& model, uint64_t arrival,
                       const Call& call, bool write) {
  return memo.Serve(model, call.map, arrival, call.chunks, call.chunk_bursts, write);
}

struct Case {
  std::string name;
  HbmBankTiming timing;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (auto refresh : {HbmBankTiming::Refresh::kNone, HbmBankTiming::Refresh::kAllBank,
                       HbmBankTiming::Refresh::kPerBank}) {
    for (auto scheduler : {HbmBankTiming::Scheduler::kFrFcfs, HbmBankTiming::Scheduler::kFcfs}) {
      for (uint32_t depth : {32u, 8u}) {
        Case c;
        c.timing.refresh = refresh;
        c.timing.scheduler = scheduler;
        c.timing.queue_depth = depth;
        c.name = std::to_string(static_cast<int>(refresh)) + "/" +
                 std::to_string(static_cast<int>(scheduler)) + "/" + std::to_string(depth);
        cases.push_back(c);
      }
    }
  }
  return cases;
}

TEST(HbmCallMemo, EveryCallAsSimulatedOnRandomStreams) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    HbmBankModel plain(c.timing), memoized(c.timing);
    HbmCallMemo memo(HbmCallMemo::Mode::kVerify);
    std::mt19937_64 rng(7);
    // A few call shapes, so that keys repeat: tiles of a stream, K/V pairs in one bank, short
    // scattered calls.
    const uint64_t row_bursts = uint64_t{c.timing.columns} * c.timing.banks();
    uint64_t arrival = 0;
    for (int i = 0; i < 3000; ++i) {
      Call call;
      const uint64_t tile = rng() % 4;
      switch (rng() % 7) {
        case 0: call = Stream(tile * 256, 32); break;  // a tile of a stream
        case 1: call = Stream((tile % 2) * row_bursts * 3, 8); break;
        case 2: call = Stream(tile * 40, 1, pb::COLUMN_FIRST); break;
        case 5: call = Stream(tile * 256 + tile * row_bursts, 32, pb::BANK_GROUP_FIRST_HASHED); break;
        case 4: call = Stream(tile * 256 + row_bursts, 32); break;  // the next row of the stream
        case 3:  // K and V pieces, rows apart in one bank, a few rows on
          call.chunks = {tile * row_bursts, (tile + 2) * row_bursts, tile * row_bursts + 8,
                         (tile + 2) * row_bursts + 8};
          break;
        default:  // scattered bursts
          call.chunk_bursts = 1 + rng() % 3;
          for (uint64_t n = 1 + rng() % 12; n > 0; --n) call.chunks.push_back(rng() % 8192);
          break;
      }
      const bool write = rng() % 5 == 0;
      switch (rng() % 4) {
        case 0: break;                                   // while the last call is served
        case 1: arrival += rng() % 64; break;            // as it ends
        case 2: arrival += 200 + rng() % 800; break;     // after it
        default: arrival += 2000 + rng() % 9000; break;  // idle: refreshes meanwhile
      }
      const HbmCallResult a = Simulate(plain, arrival, call, write);
      const HbmCallResult b = Memoized(memo, memoized, arrival, call, write);
      ASSERT_EQ(a, b) << "call " << i;
      ASSERT_EQ(plain.now(), memoized.now()) << "call " << i;
      ASSERT_EQ(plain.counts(), memoized.counts()) << "call " << i;
    }
    std::vector<int32_t> sa, sb;
    plain.AppendState(plain.now(), 0, 0, UINT32_MAX, sa);
    memoized.AppendState(memoized.now(), 0, 0, UINT32_MAX, sb);
    if (c.timing.refresh != HbmBankTiming::Refresh::kNone) {
      plain.AppendRefreshSchedule(plain.now(), sa);
      memoized.AppendRefreshSchedule(memoized.now(), sb);
    }
    EXPECT_EQ(sa, sb);
    EXPECT_EQ(memo.stats().calls, 3000u);
    // Open rows of every shape make many states without refresh (120-130 hits here); an
    // all-bank refresh closes them all now and then (600-650). Per-bank refresh falls due every
    // 195 cycles, inside nearly every call, at a phase its key must hold (1-2).
    if (c.timing.refresh == HbmBankTiming::Refresh::kNone) {
      EXPECT_GT(memo.stats().hits, 100u);
    } else if (c.timing.refresh == HbmBankTiming::Refresh::kAllBank) {
      EXPECT_GT(memo.stats().hits, 500u);
    }
    EXPECT_LT(memo.stats().hits, memo.stats().calls);
  }
}

// The same call shape four times: a miss on closed banks, a miss on its own open rows, a hit,
// and — just before an all-bank refresh falls due — a simulation again.
TEST(HbmCallMemo, ACallThatMeetsARefreshIsSimulated) {
  HbmBankTiming t;
  t.refresh = HbmBankTiming::Refresh::kAllBank;  // due every t_refi = 6240 cycles
  HbmBankModel plain(t), memoized(t);
  HbmCallMemo memo(HbmCallMemo::Mode::kVerify);
  const Call tile = Stream(0, 32);
  const std::vector<uint64_t> arrivals = {0, 2000, 4000, 6140};
  const std::vector<uint64_t> hits_after = {0, 0, 1, 1};
  for (size_t i = 0; i < arrivals.size(); ++i) {
    EXPECT_EQ(Simulate(plain, arrivals[i], tile, false),
              Memoized(memo, memoized, arrivals[i], tile, false));
    EXPECT_EQ(memo.stats().hits, hits_after[i]) << "call " << i;
  }
  // The refresh went in the middle of the last call: 256 bursts need at least 512 cycles.
  EXPECT_EQ(memoized.counts().ref, 1u);
  EXPECT_EQ(plain.counts(), memoized.counts());
  EXPECT_EQ(plain.now(), memoized.now());
}

TEST(HbmCallMemo, OffOnlySimulates) {
  HbmBankTiming t;
  HbmBankModel plain(t), memoized(t);
  HbmCallMemo memo(HbmCallMemo::Mode::kOff);
  const Call tile = Stream(0, 8);
  for (uint64_t at : {0, 1000, 2000}) {
    EXPECT_EQ(Simulate(plain, at, tile, false), Memoized(memo, memoized, at, tile, false));
  }
  EXPECT_EQ(memo.stats().calls, 0u);
  EXPECT_EQ(memo.stats().hits, 0u);
}

// Past its byte budget the memo starts again empty, and still gives the simulated results.
TEST(HbmCallMemo, AFullMemoStartsAgain) {
  HbmBankTiming t;
  HbmBankModel plain(t), memoized(t);
  HbmCallMemo memo(HbmCallMemo::Mode::kVerify, /*max_bytes=*/4 << 10);
  uint64_t at = 0;
  for (int i = 0; i < 200; ++i) {
    // Every other call is new (another length): they fill the memo.
    const Call tile = Stream(0, i % 2 == 0 ? 32 : 1 + i / 2 % 40);
    at += 700;
    ASSERT_EQ(Simulate(plain, at, tile, false), Memoized(memo, memoized, at, tile, false));
  }
  EXPECT_GT(memo.stats().flushes, 0u);
  EXPECT_GT(memo.stats().hits, 0u);
  EXPECT_EQ(plain.counts(), memoized.counts());
}

}  // namespace
}  // namespace ahbm::sim
