#include "actors/models/ipcq_model.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <ostream>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

// The shipped chip's IPCQ: every expectation below is computed from these numbers.
pb::Ipcq ShippedIpcq() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_2sip.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? chip->sip().cube().ipcq() : pb::Ipcq();
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

struct Numbers {
  uint64_t period_ps;
  uint64_t bw;       // bytes per cycle
  uint64_t latency;  // cycles
  uint64_t chunk;    // bytes
  uint64_t queue;    // bytes

  SimTime Cyc(uint64_t cycles) const { return SimTime(cycles * period_ps); }
  // Serialisation of one chunk of `bytes`, in cycles.
  uint64_t Ser(uint64_t bytes) const { return CeilDiv(bytes, bw); }
  // The chunk sizes of a message of `bytes`.
  std::vector<uint64_t> Chunks(uint64_t bytes) const {
    std::vector<uint64_t> sizes;
    for (uint64_t left = bytes; left > 0; left -= std::min(left, chunk)) {
      sizes.push_back(std::min(left, chunk));
    }
    return sizes;
  }
};

Numbers NumbersOf(const pb::Ipcq& q) {
  return Numbers{1'000'000 / q.link().clock_mhz(), q.link().bytes_per_cycle(),
                 q.link().latency_cycles(), q.chunk_bytes(), q.queue_bytes()};
}

// A receiver that has posted its recv: pops every chunk the moment it arrives, and pops in
// arrival order until nothing is in flight. Returns every chunk that departed, in order.
std::vector<IpcqChunk> DrainStreaming(IpcqModel& q, std::vector<IpcqChunk> departed) {
  std::vector<IpcqChunk> all;
  std::deque<IpcqChunk> in_flight(departed.begin(), departed.end());
  while (!in_flight.empty()) {
    const IpcqChunk chunk = in_flight.front();
    in_flight.pop_front();
    all.push_back(chunk);
    const IpcqPopResult pop = q.Pop(chunk.arrive, chunk.message_id, chunk.bytes);
    in_flight.insert(in_flight.end(), pop.departed.begin(), pop.departed.end());
  }
  return all;
}

// --- One chunk: latency + N / bandwidth -------------------------------------------------------

class SingleChunkTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SingleChunkTest, ArrivesAfterSerialisationPlusLatency) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  const uint64_t n = GetParam();
  ASSERT_LE(n, k.chunk);
  for (const uint64_t ready_cycle : {uint64_t{0}, uint64_t{9}}) {
    IpcqModel q(config);
    const SimTime ready = k.Cyc(ready_cycle);
    const IpcqSendResult sent = q.Send(ready, /*message_id=*/1, Bytes(n));
    ASSERT_EQ(sent.departed.size(), 1u);
    const IpcqChunk& c = sent.departed[0];
    EXPECT_EQ(c.bytes, Bytes(n));
    EXPECT_TRUE(c.last);
    EXPECT_EQ(c.depart, ready);
    EXPECT_EQ(c.link_free, ready + k.Cyc(k.Ser(n)));
    EXPECT_EQ(c.arrive, ready + k.Cyc(k.Ser(n) + k.latency)) << n << " bytes";
    EXPECT_EQ(sent.blocked_bytes, Bytes(0));
    EXPECT_EQ(sent.accepted, ready);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, SingleChunkTest,
                         ::testing::Values(1, 63, 64, 65, 1000, 4096, 16383, 16384));

TEST(IpcqModelTest, ReadyBetweenEdgesDepartsAtTheNextEdge) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  IpcqModel q(config);
  const SimTime ready = k.Cyc(3) + SimTime(k.period_ps / 2);
  const IpcqSendResult sent = q.Send(ready, /*message_id=*/1, Bytes(k.bw));
  ASSERT_EQ(sent.departed.size(), 1u);
  EXPECT_EQ(sent.departed[0].depart, k.Cyc(4));
  EXPECT_EQ(sent.departed[0].arrive, k.Cyc(4 + 1 + k.latency));
}

// --- Several chunks pipeline: the link streams them back to back ------------------------------

class MultiChunkTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(MultiChunkTest, ChunksPipeline) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  const uint64_t n = GetParam();
  ASSERT_LE(n, k.queue) << "fits the queue: no credit wait";
  IpcqModel q(config);
  const SimTime ready = k.Cyc(5);
  const IpcqSendResult sent = q.Send(ready, /*message_id=*/7, Bytes(n));
  const std::vector<uint64_t> sizes = k.Chunks(n);
  ASSERT_EQ(sent.departed.size(), sizes.size());
  uint64_t cycle = 5;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const IpcqChunk& c = sent.departed[i];
    EXPECT_EQ(c.index, i);
    EXPECT_EQ(c.bytes, Bytes(sizes[i]));
    EXPECT_EQ(c.last, i + 1 == sizes.size());
    EXPECT_EQ(c.depart, k.Cyc(cycle)) << "chunk " << i;
    cycle += k.Ser(sizes[i]);
    EXPECT_EQ(c.arrive, k.Cyc(cycle + k.latency)) << "chunk " << i;
  }
  // The whole message: latency once plus every chunk's serialisation — not once per chunk.
  uint64_t serialisation = 0;
  for (uint64_t s : sizes) serialisation += k.Ser(s);
  EXPECT_EQ(sent.departed.back().arrive, ready + k.Cyc(serialisation + k.latency));
  EXPECT_EQ(sent.accepted, sent.departed.back().depart);
  EXPECT_EQ(q.stats().sent_bytes, Bytes(n));
  EXPECT_EQ(q.stats().link_busy, k.Cyc(serialisation));
  EXPECT_EQ(q.stats().credit_stall, SimTime(0));
}

INSTANTIATE_TEST_SUITE_P(Sizes, MultiChunkTest,
                         ::testing::Values(16385, 32768, 4 * 16384 + 100, 100000, 262144));

// --- A message larger than the queue ---------------------------------------------------------

TEST(IpcqModelTest, LargerThanQueueStallsWithoutPops) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  const uint64_t n = 2 * k.queue + 1000;
  IpcqModel q(config);
  EXPECT_TRUE(q.WouldBlock(Bytes(n)));
  EXPECT_FALSE(q.WouldBlock(Bytes(k.queue)));
  const IpcqSendResult sent = q.Send(SimTime(0), /*message_id=*/1, Bytes(n));
  EXPECT_EQ(sent.departed.size(), k.queue / k.chunk);
  EXPECT_EQ(sent.blocked_bytes, Bytes(n - k.queue));
  EXPECT_FALSE(sent.accepted.has_value());
  EXPECT_EQ(q.blocked_bytes(), Bytes(n - k.queue));
  // Popping everything that arrived is not enough to complete the message...
  const IpcqPopResult pop = q.Pop(sent.departed.back().arrive, /*message_id=*/1, Bytes(k.queue));
  EXPECT_EQ(pop.popped, Bytes(k.queue));
  EXPECT_FALSE(pop.message_complete);
  // ...but it lets the next queue-full through, at the credit return.
  EXPECT_EQ(pop.credit_return, sent.departed.back().arrive + k.Cyc(k.latency));
  ASSERT_EQ(pop.departed.size(), k.queue / k.chunk);
  EXPECT_EQ(pop.departed[0].depart, pop.credit_return);
}

TEST(IpcqModelTest, LargerThanQueueCompletesWhenReceiverPopsAsChunksArrive) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  const uint64_t n = 2 * k.queue + 1000;
  const std::vector<uint64_t> sizes = k.Chunks(n);
  // The first chunk's credit is back (one serialisation and two latencies after it left) before
  // the sender has used the whole queue, so with a streaming receiver the link never waits.
  ASSERT_LT(k.Ser(k.chunk) + 2 * k.latency, (k.queue / k.chunk) * k.Ser(k.chunk));
  IpcqModel q(config);
  const SimTime ready = k.Cyc(2);
  const IpcqSendResult sent = q.Send(ready, /*message_id=*/1, Bytes(n));
  const std::vector<IpcqChunk> all = DrainStreaming(q, sent.departed);
  ASSERT_EQ(all.size(), sizes.size());
  uint64_t serialisation = 0;
  for (uint64_t s : sizes) serialisation += k.Ser(s);
  EXPECT_EQ(all.back().arrive, ready + k.Cyc(serialisation + k.latency));
  EXPECT_EQ(q.stats().credit_stall, SimTime(0));
  EXPECT_EQ(q.pending_messages(), 0u);
  EXPECT_EQ(q.blocked_bytes(), Bytes(0));
}

// A pop takes what the receiver names, not everything that has arrived by its time: a receiver
// that decides at chunk 0's arrival to pop at a later `t` (its receive is posted then), with
// chunk 1 - the last - arriving in between, pops chunk 0 at t, then chunk 1 at t when it sees it
// arrive; the message completes at the second pop, which therefore still finds it at the head.
TEST(IpcqModelTest, APopTakesOnlyTheChunksItNames) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  IpcqModel q(config);
  const IpcqSendResult sent = q.Send(SimTime(0), /*message_id=*/1, Bytes(2 * k.chunk));
  ASSERT_EQ(sent.departed.size(), 2u);
  const SimTime t = sent.departed[1].arrive + k.Cyc(1);
  const IpcqPopResult first = q.Pop(t, /*message_id=*/1, Bytes(k.chunk));
  EXPECT_EQ(first.popped, Bytes(k.chunk));
  EXPECT_FALSE(first.message_complete);
  const IpcqPopResult second = q.Pop(t, /*message_id=*/1, Bytes(k.chunk));
  EXPECT_TRUE(second.message_complete);
  EXPECT_EQ(second.credit_return, first.credit_return);
  EXPECT_EQ(q.pending_messages(), 0u);
}

// Popping a chunk before it has arrived is a receiver bug.
TEST(IpcqModelTest, PoppingAChunkBeforeItArrivesFails) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  IpcqModel q(config);
  const IpcqSendResult sent = q.Send(SimTime(0), /*message_id=*/1, Bytes(k.chunk));
  EXPECT_DEATH(q.Pop(sent.departed[0].arrive - k.Cyc(1), /*message_id=*/1, Bytes(k.chunk)),
               "the next chunk arrives at");
}

// A queue of one chunk: every chunk waits for the previous one's credit, which comes back one
// latency after the receiver pops it on arrival: chunks leave every ser + 2 * latency cycles.
TEST(IpcqModelTest, OneChunkQueueWaitsForEachCredit) {
  pb::Ipcq config = ShippedIpcq();
  config.set_queue_bytes(config.chunk_bytes());
  const Numbers k = NumbersOf(config);
  const uint64_t chunks = 5;
  IpcqModel q(config);
  const IpcqSendResult sent = q.Send(SimTime(0), /*message_id=*/1, Bytes(chunks * k.chunk));
  ASSERT_EQ(sent.departed.size(), 1u);
  const std::vector<IpcqChunk> all = DrainStreaming(q, sent.departed);
  ASSERT_EQ(all.size(), chunks);
  const uint64_t ser = k.Ser(k.chunk);
  for (uint64_t i = 0; i < chunks; ++i) {
    EXPECT_EQ(all[i].depart, k.Cyc(i * (ser + 2 * k.latency))) << "chunk " << i;
  }
  EXPECT_EQ(all.back().arrive, k.Cyc((chunks - 1) * (ser + 2 * k.latency) + ser + k.latency));
  EXPECT_EQ(q.stats().credit_stall, k.Cyc((chunks - 1) * 2 * k.latency));
}

// --- No credit: the send blocks until the receiver pops ---------------------------------------

struct BlockCase {
  uint64_t second_ready_cycle;  // when the blocked message is ready
  uint64_t pop_delay_ps;        // pop this long after the queue-full has arrived
  friend std::ostream& operator<<(std::ostream& os, const BlockCase& c) {
    return os << "ready cycle " << c.second_ready_cycle << ", pop delay " << c.pop_delay_ps << "ps";
  }
};

class NoCreditTest : public ::testing::TestWithParam<BlockCase> {};

TEST_P(NoCreditTest, DepartsAtPopPlusCreditReturnLatency) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  const BlockCase c = GetParam();
  IpcqModel q(config);
  const IpcqSendResult full = q.Send(SimTime(0), /*message_id=*/1, Bytes(k.queue));
  ASSERT_EQ(full.blocked_bytes, Bytes(0));
  EXPECT_TRUE(q.WouldBlock(Bytes(1)));

  const IpcqSendResult blocked =
      q.Send(k.Cyc(c.second_ready_cycle), /*message_id=*/2, Bytes(k.chunk));
  EXPECT_TRUE(blocked.departed.empty());
  EXPECT_EQ(blocked.blocked_bytes, Bytes(k.chunk));
  EXPECT_FALSE(blocked.accepted.has_value());

  const SimTime pop_time = full.departed.back().arrive + SimTime(c.pop_delay_ps);
  const IpcqPopResult pop = q.Pop(pop_time, /*message_id=*/1, Bytes(k.queue));
  EXPECT_EQ(pop.popped, Bytes(k.queue));
  EXPECT_TRUE(pop.message_complete);
  // Pops are taken at the link's next clock edge; the credit needs one latency to come back.
  const uint64_t pop_edge_ps = CeilDiv(pop_time.value(), k.period_ps) * k.period_ps;
  const SimTime expected_depart = SimTime(pop_edge_ps) + k.Cyc(k.latency);
  EXPECT_EQ(pop.credit_return, expected_depart);
  ASSERT_EQ(pop.departed.size(), 1u);
  EXPECT_EQ(pop.departed[0].message_id, 2u);
  EXPECT_EQ(pop.departed[0].depart, expected_depart);
  EXPECT_EQ(pop.departed[0].arrive, expected_depart + k.Cyc(k.Ser(k.chunk) + k.latency));
  EXPECT_FALSE(q.WouldBlock(Bytes(k.queue - k.chunk)));
  EXPECT_EQ(q.blocked_bytes(), Bytes(0));
}

INSTANTIATE_TEST_SUITE_P(Cases, NoCreditTest,
                         ::testing::Values(BlockCase{0, 0}, BlockCase{100, 0},
                                           BlockCase{0, 1'000'000}, BlockCase{3, 1500}));

// Credit already on its way back does not block, it delays: the chunk leaves at its return.
TEST(IpcqModelTest, CreditInTransitDelaysWithoutBlocking) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  IpcqModel q(config);
  const IpcqSendResult full = q.Send(SimTime(0), /*message_id=*/1, Bytes(k.queue));
  const SimTime pop_time = full.departed.back().arrive;
  const IpcqPopResult pop = q.Pop(pop_time, /*message_id=*/1, Bytes(k.queue));
  EXPECT_FALSE(q.WouldBlock(Bytes(k.queue)));
  const IpcqSendResult next = q.Send(pop_time, /*message_id=*/2, Bytes(k.chunk));
  ASSERT_EQ(next.departed.size(), 1u);
  EXPECT_EQ(next.departed[0].depart, pop_time + k.Cyc(k.latency));
  EXPECT_EQ(next.accepted, pop_time + k.Cyc(k.latency));
  EXPECT_TRUE(pop.departed.empty());
}

// Messages are FIFO: a small message behind a blocked one waits even though a chunk of its size
// would have credit (tie-break: Send call order).
TEST(IpcqModelTest, LaterMessageNeverOvertakesABlockedOne) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  IpcqModel q(config);
  const IpcqSendResult first = q.Send(SimTime(0), /*message_id=*/1, Bytes(k.queue - k.chunk / 2));
  ASSERT_EQ(first.blocked_bytes, Bytes(0));
  const IpcqSendResult big = q.Send(SimTime(0), /*message_id=*/2, Bytes(k.chunk));
  EXPECT_EQ(big.blocked_bytes, Bytes(k.chunk));
  const IpcqSendResult small = q.Send(SimTime(0), /*message_id=*/3, Bytes(1));
  EXPECT_TRUE(small.departed.empty()) << "1 byte has credit but must stay behind message 2";
  const IpcqPopResult pop =
      q.Pop(first.departed.back().arrive, /*message_id=*/1, Bytes(k.queue - k.chunk / 2));
  ASSERT_EQ(pop.departed.size(), 2u);
  EXPECT_EQ(pop.departed[0].message_id, 2u);
  EXPECT_EQ(pop.departed[1].message_id, 3u);
  EXPECT_EQ(pop.departed[1].depart, pop.departed[0].link_free);
}

// --- Determinism and the queue bound ----------------------------------------------------------

// A fixed pseudo-random script: sends of assorted sizes; a receiver that pops a message once its
// last chunk has arrived, and streams (pops what has arrived) a message larger than the queue.
struct ScriptLog {
  std::vector<IpcqChunk> chunks;  // in the order they got their departure
  std::vector<std::pair<SimTime, Bytes>> credit_returns;
};

ScriptLog RunScript(const pb::Ipcq& config) {
  const Numbers k = NumbersOf(config);
  IpcqModel q(config);
  ScriptLog log;
  uint64_t state = 12345;
  auto next = [&state](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  struct Pending {
    uint64_t id;
    uint64_t chunks;
    std::vector<IpcqChunk> seen;
    size_t popped = 0;  // of `seen`
  };
  std::deque<Pending> pending;
  auto record = [&](const std::vector<IpcqChunk>& chunks) {
    for (const IpcqChunk& c : chunks) {
      log.chunks.push_back(c);
      for (Pending& p : pending) {
        if (p.id == c.message_id) p.seen.push_back(c);
      }
    }
  };
  SimTime now(0);
  for (uint64_t id = 1; id <= 40; ++id) {
    now += k.Cyc(next(2000));
    const uint64_t bytes = 1 + next(3 * k.queue / 2);
    pending.push_back(Pending{id, CeilDiv(bytes, k.chunk), {}});
    record(q.Send(now, id, Bytes(bytes)).departed);
    while (!pending.empty() && !pending.front().seen.empty()) {
      Pending& head = pending.front();
      if (head.seen.size() < head.chunks && head.chunks * k.chunk <= k.queue) break;
      if (head.popped == head.seen.size()) break;
      now = std::max(now, head.seen.back().arrive);
      Bytes bytes;
      for (; head.popped < head.seen.size(); ++head.popped) bytes += head.seen[head.popped].bytes;
      const IpcqPopResult pop = q.Pop(now, head.id, bytes);
      log.credit_returns.push_back({pop.credit_return, pop.popped});
      record(pop.departed);
      if (pop.message_complete) pending.pop_front();
    }
  }
  return log;
}

TEST(IpcqModelTest, SameScriptSameTimesAndCreditNeverOverdrawn) {
  const pb::Ipcq config = ShippedIpcq();
  const Numbers k = NumbersOf(config);
  const ScriptLog first = RunScript(config);
  const ScriptLog second = RunScript(config);
  ASSERT_GT(first.chunks.size(), 40u);
  EXPECT_EQ(first.chunks, second.chunks);
  EXPECT_EQ(first.credit_returns, second.credit_returns);
  for (size_t i = 0; i < first.chunks.size(); ++i) {
    const IpcqChunk& c = first.chunks[i];
    // One link: no chunk leaves before the previous one is out.
    if (i > 0) {
      EXPECT_GE(c.depart, first.chunks[i - 1].link_free) << "chunk " << i;
    }
    // Credit: bytes sent by this departure minus credit back by then fit the queue.
    uint64_t outstanding = 0;
    for (size_t j = 0; j <= i; ++j) outstanding += first.chunks[j].bytes.value();
    for (const auto& [at, bytes] : first.credit_returns) {
      if (at <= c.depart) outstanding -= bytes.value();
    }
    EXPECT_LE(outstanding, k.queue) << "chunk " << i;
  }
}

}  // namespace
}  // namespace ahbm::sim
