// The pre-ADR prefill baseline (prefill_baseline.h, `--variant=baseline_fanout`): parity with the
// float64 causal reference (S not a multiple of the tile, T_q < S, several messages per tile, T_q
// chunks, a multi-user batch of mixed lengths, Llama's d and tiles), its dots (no causal skip:
// the full grid), the fan-out's rounds from the op log's IPCQ sends, determinism. Small
// topology: 2x4 CUBEs of 2x2 PEs (P = 4: ⌈3/2⌉ = 2 rounds, one block from the successor).
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "actors/chip_sim.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/attention/prefill_launch.h"
#include "kernels/attention/prefill_test_util.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels {
namespace {

using testing::Load;
using testing::OpLogBytes;
using testing::MaxAbsError;
using testing::PrefillRun;
using testing::RunPrefill;

// 4 query heads of one KV head (G = 4): 4 CUBEs, each head's KV copied to its CUBE; P = 4.
PrefillConfig Small() { return testing::SmallPrefill(PrefillVariant::kBaselineFanout); }

void ExpectParity(const pb::Chip& chip, const PrefillConfig& cfg, const std::string& what) {
  testing::ExpectPrefillParity(chip, cfg, what, 11);
}

// One shape of the parity table: on `topology`, the small config changed as listed (0: kept).
struct Shape {
  const char* what;
  const char* topology;
  uint32_t h_q, p;
  uint64_t s;
  uint32_t t_q;
  std::vector<uint64_t> lengths;  // one request each (s = 0)
  uint64_t max_context;
  uint64_t message_bytes;
};

TEST(PrefillBaselineParity, RaggedTqMessagesEmptyRanksUsersEightRanks) {
  const char* small = "topology/small.textproto";
  const std::vector<Shape> shapes = {
      {"S 96", small, 0, 0, 96, 0, {}, 0, 0},
      {"S 101: not a multiple of the tile, nor of P", small, 0, 0, 101, 0, {}, 0, 0},
      {"T_q 37 < S 90: ranks hold 10, 10, 10, 7 query rows", small, 0, 0, 90, 37, {}, 0, 0},
      {"T_q 3 < P: rank 3 only forwards", small, 0, 0, 50, 3, {}, 0, 0},
      // A K tile (32 x 16 bf16 = 1 KiB) in 4 messages, V too.
      {"256 B messages", small, 0, 0, 101, 0, {}, 0, 256},
      {"S 3: one rank empty, the others one key", small, 0, 0, 3, 0, {}, 0, 0},
      {"3 requests of mixed lengths", small, 0, 0, 0, 0, {70, 33, 96}, 0, 0},
      // Blocks sized for 128: the shorter requests leave ranks empty.
      {"3 requests, T_q 20, max_context 128", small, 0, 0, 0, 20, {70, 33, 96}, 128, 0},
      // chip_2sip's 2x4 PE mesh: 4 rounds from the predecessor, 3 from the successor, so both
      // directions forward.
      {"P 8, 2 requests", "topology/chip_2sip.textproto", 2, 8, 0, 0, {301, 150}, 0, 0},
      {"P 8, 2 requests, T_q 45", "topology/chip_2sip.textproto", 2, 8, 0, 45, {301, 150}, 0, 0},
  };
  std::map<std::string, pb::Chip> chips;
  for (const Shape& sh : shapes) {
    if (!chips.contains(sh.topology)) chips[sh.topology] = Load(sh.topology);
    PrefillConfig cfg = Small();
    if (sh.h_q != 0) cfg.h_q = sh.h_q;
    if (sh.p != 0) cfg.p = sh.p;
    cfg.s = sh.s;
    cfg.t_q = sh.t_q;
    cfg.request_lengths = sh.lengths;
    cfg.users = sh.lengths.empty() ? 1 : static_cast<uint32_t>(sh.lengths.size());
    cfg.max_context = sh.max_context;
    cfg.fanout_message_bytes = sh.message_bytes;
    ExpectParity(chips[sh.topology], cfg, sh.what);
  }
}

// T_q chunks: a persistent arena holding one query tile's Q and state beyond the fixed buffers,
// so the fan-out runs once per query tile.
TEST(PrefillBaselineParity, TqChunksWhenStatesOutgrowTheArena) {
  pb::Chip chip = Load("topology/small.textproto");
  pb::Tcm& tcm = *chip.mutable_sip()->mutable_cube()->mutable_pe()->mutable_tcm();
  // Fixed: 5 K / V tile pairs (2 x 1 KiB each) + mask 512 + 64; a query tile: Q 1 KiB, m, m, l
  // (64 B each), O 2 KiB. 10816 + 3264 = 14080 fits one tile, not two (17344).
  tcm.set_total_bytes(tcm.scratch_bytes() + 15000);
  PrefillConfig cfg = Small();  // 24 query rows per rank: 2 tiles
  const std::vector<QkvInputs> in = testing::PrefillInputs(cfg, 5);
  PrefillRun run = RunPrefill(chip, cfg, in);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.launch.chunks, 2u);
  EXPECT_EQ(run.launch.tiles_per_chunk, 1u);
  absl::StatusOr<std::vector<float>> got = GatherPrefillOutput(*run.store, cfg, run.launch, 0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_LE(MaxAbsError(*got, ReferencePrefill(cfg, 0, in[0])), 2e-2);
}

// Llama3-70B's d and tiles (d 128, 128-key and 128-row tiles: a K / V tile 32 KiB, one message
// each), two requests sharing every PE (IPCQ demultiplexing); one query head (data mode's fp32
// GEMMs are slow).
TEST(PrefillBaselineParity, LlamaTilesTwoRequests) {
  const pb::Chip chip = Load("topology/small.textproto");
  PrefillConfig cfg = Small();
  cfg.h_q = 1;
  cfg.d = 128;
  cfg.tile = 128;
  cfg.q_tile = 128;
  cfg.users = 2;
  cfg.s = 0;
  cfg.request_lengths = {700, 420};
  cfg.t_q = 300;
  ExpectParity(chip, cfg, "d 128");
}

// K / V tiles of 256 keys x d 64 (32 KiB) travel in two 16 KiB IPCQ chunks; with realistic
// issue costs a receive is posted while a tile's last chunk arrives (each chunk popped once).
// Two requests of mixed lengths, the whole prompt as queries, against the float64 reference.
TEST(PrefillBaselineParity, TilesOfTwoIpcqChunksWithRealisticIssueCosts) {
  const pb::Chip chip = Load("topology/small.textproto");
  PrefillConfig cfg = Small();
  cfg.h_q = 1;
  cfg.d = 64;
  cfg.tile = 256;
  cfg.q_tile = 100;  // as the CLI balances 300 query rows per rank
  cfg.users = 2;
  cfg.s = 0;
  cfg.request_lengths = {1200, 800};
  const std::vector<QkvInputs> in = testing::PrefillInputs(cfg, 13);
  PrefillRun run = testing::RunWith(chip, cfg, in, "realistic", PrefillCubes, LaunchPrefill);
  ASSERT_TRUE(run.status.ok()) << run.status;
  for (uint32_t u = 0; u < cfg.users; ++u) {
    absl::StatusOr<std::vector<float>> got = GatherPrefillOutput(*run.store, cfg, run.launch, u);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_LE(MaxAbsError(*got, ReferencePrefill(cfg, u, in[u])), 2e-2) << "request " << u;
  }
}

// ---- structure, from the op log ----

// Blocking dots issued (the GEMM engine's records of distinct commands).
uint64_t Dots(const PrefillRun& run) {
  std::set<std::pair<std::string, uint64_t>> issued;
  for (const pb::TraceRecord& r : run.sim->op_log().records()) {
    if (!r.has_op() || !absl::StrContains(r.op().unit_name(), "gemm")) continue;
    const std::string& unit = r.op().unit_name();
    issued.insert({unit.substr(0, unit.rfind('.')), r.op().cmd_id()});
  }
  return issued.size();
}

// No causal skip: 2 dots for every (query tile, KV tile) pair of every block, wholly future
// ones included, counted by brute force over positions.
TEST(PrefillBaselineStructure, DotsAreTheFullGrid) {
  const pb::Chip chip = Load("topology/small.textproto");
  PrefillConfig cfg = Small();
  cfg.s = 101;
  cfg.t_q = 77;
  PrefillRun run = RunPrefill(chip, cfg, {});
  ASSERT_TRUE(run.status.ok()) << run.status;
  const uint64_t P = cfg.p, B = (cfg.s + P - 1) / P, qb = (cfg.t_q + P - 1) / P;
  uint64_t pairs = 0, future = 0;
  for (uint64_t r = 0; r < P; ++r) {  // query rows of rank r, tiles of q_tile
    for (uint64_t t0 = r * qb; t0 < std::min<uint64_t>(cfg.t_q, (r + 1) * qb); t0 += cfg.q_tile) {
      for (uint64_t blk = 0; blk < P; ++blk) {
        for (uint64_t k0 = blk * B; k0 < std::min(cfg.s, (blk + 1) * B); k0 += cfg.tile) {
          ++pairs;
          future += k0 > cfg.s - cfg.t_q + std::min<uint64_t>({cfg.t_q, (r + 1) * qb, t0 + cfg.q_tile}) - 1;
        }
      }
    }
  }
  EXPECT_GT(future, 0u);
  EXPECT_EQ(Dots(run), 2 * pairs * cfg.h_q);
  EXPECT_EQ(run.launch.composites, 2 * pairs * cfg.h_q);
  EXPECT_EQ(run.launch.grid_composites, run.launch.composites);
}

// The fan-out: every rank sends a = ⌈(P − 1) / 2⌉ blocks' bytes to its ring successor and
// b = ⌊(P − 1) / 2⌋ to its predecessor, each an IPCQ neighbour in its CUBE, and receives P − 1
// blocks; nothing else travels. Full blocks of 2 KV tiles (S = 2·tile·P).
void ExpectFanoutRounds(const pb::Chip& chip, uint32_t p, uint32_t rounds_next, uint32_t rounds_prev) {
  PrefillConfig cfg = Small();
  cfg.h_q = 2;
  cfg.p = p;
  cfg.s = 2 * cfg.tile * p;
  cfg.users = 2;
  PrefillRun run = RunPrefill(chip, cfg, {});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.launch.fanout_rounds, rounds_next);
  const uint64_t block_bytes = (cfg.s / cfg.p) * cfg.d * 2 * 2;  // K and V
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint64_t> sent;  // (src, dst, request)
  std::map<std::pair<std::string, uint32_t>, uint64_t> received;     // (CPU, request): messages
  uint64_t other = 0;
  for (const pb::TraceRecord& r : run.sim->op_log().records()) {
    if (r.has_issue() && r.issue().has_send()) {
      const pb::LinkChunk& c = r.issue().send();
      sent[{c.src_pe(), c.dst_pe(), c.request_id()}] += c.bytes();
    }
    if (!r.has_op()) continue;
    if (r.op().op() == "recv_ipcq") ++received[{r.op().unit_name(), r.op().request_id()}];
    other += r.op().op() == "send_noc" || r.op().op() == "recv_noc";
  }
  EXPECT_EQ(other, 0u);
  const uint32_t per_cube = chip.sip().cube().pes();
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> per_rank;  // (src, request)
  for (const auto& [key, bytes] : sent) {
    const auto [src, dst, request] = key;
    EXPECT_EQ(src / per_cube, dst / per_cube) << "inside one CUBE";
    per_rank[{src, request}].push_back(bytes);
  }
  EXPECT_EQ(per_rank.size(), cfg.h_q * cfg.p * cfg.users);
  uint32_t rounds = 0;
  for (auto& [rank, bytes] : per_rank) {
    std::sort(bytes.begin(), bytes.end());
    ASSERT_EQ(bytes.size(), 2u) << "pe " << rank.first;
    EXPECT_EQ(bytes[0], rounds_prev * block_bytes);
    EXPECT_EQ(bytes[1], rounds_next * block_bytes);
    rounds = std::max<uint32_t>(rounds, static_cast<uint32_t>(bytes[1] / block_bytes));
  }
  EXPECT_EQ(rounds, run.launch.fanout_rounds);
  // One message per K tile and per V tile (1 KiB each, under the queue): P − 1 blocks x 2 x 2.
  EXPECT_EQ(received.size(), cfg.h_q * cfg.p * cfg.users);
  for (const auto& [instance, n] : received) EXPECT_EQ(n, (p - 1) * 2u * 2u) << instance.first;
}

TEST(PrefillBaselineStructure, FanoutRoundsFromIpcqSends) {
  ExpectFanoutRounds(Load("topology/small.textproto"), 4, 2, 1);
  ExpectFanoutRounds(Load("topology/chip_2sip.textproto"), 8, 4, 3);
}

// Twice → byte-identical op log; timing and data mode → the same op log.
TEST(PrefillBaselineStructure, Deterministic) {
  const pb::Chip chip = Load("topology/small.textproto");
  PrefillConfig cfg = Small();
  cfg.s = 101;
  cfg.t_q = 60;
  cfg.users = 2;
  PrefillRun a = RunPrefill(chip, cfg, {});
  PrefillRun b = RunPrefill(chip, cfg, {});
  PrefillRun c = RunPrefill(chip, cfg, testing::PrefillInputs(cfg, 3));
  ASSERT_TRUE(a.status.ok() && b.status.ok() && c.status.ok()) << a.status << b.status << c.status;
  EXPECT_GT(OpLogBytes(a).size(), 1000u);
  EXPECT_EQ(OpLogBytes(a), OpLogBytes(b));
  EXPECT_EQ(OpLogBytes(a), OpLogBytes(c));
}

TEST(PrefillBaselineStructure, RefusesWhatItCannotRun) {
  const pb::Chip chip = Load("topology/small.textproto");
  PrefillConfig cfg = Small();
  cfg.c = 2;
  EXPECT_EQ(PrefillCubes(chip, cfg).status().message(),
            "c: baseline_fanout keeps each query head in one CUBE (C = 1)");
  cfg = Small();
  cfg.h_q = 16;  // 16 query heads need 16 CUBEs; small has 8
  cfg.h_kv = 2;
  EXPECT_TRUE(absl::StartsWith(PrefillCubes(chip, cfg).status().message(), "h_q: "));
}

}  // namespace
}  // namespace ahbm::kernels
