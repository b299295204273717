// Prefill kernels (ADR-0060 rev2 §5.4, §5.5, §11 gates 1, 3, 4, 8): parity with the float64
// causal reference, causal skip counted by brute force, the ring's structure, balance and
// determinism, on the small topology (2x4 CUBEs of 2x2 PEs).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
using testing::PrefillRun;
using testing::RunPrefill;

PrefillConfig Small(PrefillVariant variant) { return testing::SmallPrefill(variant); }

void ExpectParity(const pb::Chip& chip, const PrefillConfig& cfg, const std::string& what) {
  testing::ExpectPrefillParity(chip, cfg, what);
}

TEST(PrefillParity, FlashRingShortEverySplitRaggedAndChunked) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (PrefillVariant v : {PrefillVariant::kFlash, PrefillVariant::kShortContext, PrefillVariant::kRing}) {
    const std::string name = v == PrefillVariant::kFlash ? "flash" : v == PrefillVariant::kRing ? "ring" : "short";
    ExpectParity(chip, Small(v), name);
    PrefillConfig ragged = Small(v);
    ragged.s = 101;  // not a multiple of the tile, nor of C·P
    ExpectParity(chip, ragged, name + " ragged");
    PrefillConfig chunked = Small(v);
    chunked.s = 90;
    chunked.t_q = 37;  // chunked prefill: the last 37 positions
    ExpectParity(chip, chunked, name + " t_q < S");
    for (QuerySplit split : {QuerySplit::kContiguous, QuerySplit::kStriped}) {
      PrefillConfig c = Small(v);
      c.query_split = split;
      ExpectParity(chip, c, name + " split " + std::to_string(static_cast<int>(split)));
    }
  }
}

// Shapes a new user reaches first: one key, one query, fewer query tiles than PEs, KV blocks
// sized for a longer cache (empty ranks), more KV heads per CUBE than keys, a batch of one-key
// and single-query requests.
TEST(PrefillParity, EdgeShapes) {
  const pb::Chip chip = Load("topology/small.textproto");
  const auto with = [](PrefillVariant v, uint64_t s, uint32_t t_q) {
    PrefillConfig c = Small(v);
    c.s = s;
    c.t_q = t_q;
    return c;
  };
  ExpectParity(chip, with(PrefillVariant::kRing, 1, 0), "ring S 1");
  ExpectParity(chip, with(PrefillVariant::kRing, 5, 1), "ring T_q 1");
  ExpectParity(chip, with(PrefillVariant::kRing, 100, 3), "ring T_q 3 < P");
  ExpectParity(chip, with(PrefillVariant::kFlash, 1, 0), "flash S 1");
  ExpectParity(chip, with(PrefillVariant::kShortContext, 2, 0), "short S 2 < P");
  PrefillConfig big_cache = with(PrefillVariant::kRing, 40, 0);
  big_cache.max_context = 4096;
  ExpectParity(chip, big_cache, "ring max_context 4096");
  PrefillConfig two_heads = with(PrefillVariant::kShortContext, 3, 0);
  two_heads.h_q = 8;
  two_heads.h_kv = 2;
  two_heads.kv_per_cube = 2;
  ExpectParity(chip, two_heads, "short kv_per_cube 2");
  PrefillConfig batch = with(PrefillVariant::kRing, 0, 1);
  batch.users = 3;
  batch.request_lengths = {1, 17, 64};
  ExpectParity(chip, batch, "ring batch T_q 1");
  // G = 1 (as many KV heads as query heads): a ring of one CUBE, no slots, nothing received
  // (the launch once looked up slots it had not made: a crash).
  PrefillConfig one_cube = with(PrefillVariant::kRing, 0, 0);
  one_cube.h_q = 2;
  one_cube.h_kv = 2;
  one_cube.p = 1;
  one_cube.group_rows = 0;
  one_cube.group_cols = 0;
  one_cube.users = 2;
  one_cube.request_lengths = {138, 58};
  ExpectParity(chip, one_cube, "ring C = 1");
}

TEST(PrefillParity, MultiUserMixedLengths) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (PrefillVariant v : {PrefillVariant::kFlash, PrefillVariant::kShortContext, PrefillVariant::kRing}) {
    PrefillConfig cfg = Small(v);
    cfg.users = 3;
    cfg.s = 0;
    cfg.request_lengths = {70, 33, 96};
    ExpectParity(chip, cfg, "users");
  }
}

// §11 gate 4: GEMM composites = 2 x the (query tile, KV tile) pairs with a visible key,
// counted here over positions, not with the kernel's helpers.
TEST(PrefillCausalSkip, CompositesEqualVisiblePairs) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (PrefillVariant v : {PrefillVariant::kFlash, PrefillVariant::kRing}) {
    PrefillConfig cfg = Small(v);
    cfg.s = 101;
    cfg.t_q = 77;
    PrefillRun run = RunPrefill(chip, cfg, {});
    ASSERT_TRUE(run.status.ok()) << run.status;
    const uint64_t S = cfg.s, Tq = cfg.t_q;
    const uint32_t g = v == PrefillVariant::kRing ? 1 : cfg.G();
    const uint64_t tokens = cfg.q_tile / g;
    const uint32_t heads = v == PrefillVariant::kRing ? cfg.h_q : cfg.h_kv;
    // KV tiles: flash, the head's keys from 0 by tile; ring, each rank's block by tile.
    const uint32_t ranks = v == PrefillVariant::kRing ? cfg.C() * cfg.P() : 1;
    const uint64_t block = (S + ranks - 1) / ranks;
    uint64_t visible = 0, grid = 0;
    for (uint64_t t0 = 0; t0 < Tq; t0 += tokens) {
      const uint64_t t1 = std::min(Tq, t0 + tokens);
      for (uint64_t r = 0; r < ranks; ++r) {
        for (uint64_t k0 = r * block; k0 < std::min(S, (r + 1) * block); k0 += cfg.tile) {
          const uint64_t k1 = std::min({S, (r + 1) * block, k0 + cfg.tile});
          bool any = false;
          for (uint64_t t = t0; t < t1; ++t) {
            for (uint64_t k = k0; k < k1; ++k) any = any || k <= S - Tq + t;
          }
          visible += any;
          ++grid;
        }
      }
    }
    // Distinct commands (PE, cmd id): the scheduler and the GEMM engine each log one.
    std::set<std::pair<std::string, uint64_t>> issued;
    for (const pb::TraceRecord& r : run.sim->op_log().records()) {
      if (!r.has_op() || r.op().op() != "composite_gemm") continue;
      const std::string& unit = r.op().unit_name();
      issued.insert({unit.substr(0, unit.rfind('.')), r.op().cmd_id()});
    }
    const uint64_t composites = issued.size();
    EXPECT_EQ(composites, 2 * visible * heads);
    EXPECT_EQ(run.launch.composites, composites);
    EXPECT_EQ(run.launch.grid_composites, 2 * grid * heads);
    EXPECT_LT(composites, 2 * grid * heads);
  }
}

TEST(PrefillDeterminism, TwiceIdenticalOpLog) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (PrefillVariant v : {PrefillVariant::kFlash, PrefillVariant::kShortContext, PrefillVariant::kRing}) {
    PrefillConfig cfg = Small(v);
    PrefillRun a = RunPrefill(chip, cfg, {});
    PrefillRun b = RunPrefill(chip, cfg, testing::PrefillInputs(cfg, 3));  // data mode: the same timing
    ASSERT_TRUE(a.status.ok() && b.status.ok()) << a.status << b.status;
    EXPECT_EQ(OpLogBytes(a), OpLogBytes(b));
  }
}

TEST(PrefillSplit, ZigzagAndStripedBalanceCausalWork) {
  const std::vector<std::vector<uint32_t>> z = SplitQueryTiles(16, 4, QuerySplit::kZigzag);
  EXPECT_EQ(z[0], (std::vector<uint32_t>{0, 7, 8, 15}));
  EXPECT_EQ(z[3], (std::vector<uint32_t>{3, 4, 11, 12}));
  const std::vector<std::vector<uint32_t>> c = SplitQueryTiles(10, 4, QuerySplit::kContiguous);
  EXPECT_EQ(c[0], (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(c[3], (std::vector<uint32_t>{8, 9}));
  const std::vector<std::vector<uint32_t>> s = SplitQueryTiles(6, 4, QuerySplit::kStriped);
  EXPECT_EQ(s[1], (std::vector<uint32_t>{1, 5}));
}

}  // namespace
}  // namespace ahbm::kernels
