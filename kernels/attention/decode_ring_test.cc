// The decode reduce's chunked ring (ADR-0060 rev2 §4.4; reduce_tree.h kRing, decode.cc
// RingReduce) at either level: the schedule of a 4-rank ring derived by hand (every message's
// bytes, destination and order), parity against the float64 reference with every payload and
// merge form (bit for bit the same output across them), on empty ranks, mixed request lengths,
// causal T_q > 1, d < R and several KV heads per CUBE; timing mode gives data mode's op log;
// CheckDecodeCapacity's scratch count holds at its boundary.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "actors/chip_sim.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels::testing {  // decode_test_util.h
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Options {
  bool packed;
  bool fused;
  std::string Name() const {
    return std::string(packed ? "packed" : "triplet") + "+" + (fused ? "fused" : "primitive");
  }
};
constexpr Options kOptions[] = {{false, false}, {false, true}, {true, false}, {true, true}};

// One send of the op log: (destination PE, bytes).
using Message = std::pair<uint32_t, uint64_t>;

// Each sending PE's messages in issue order (op `send_ipcq` or `send_noc`), by global PE.
std::map<uint32_t, std::vector<Message>> Sends(const DecodeRun& run, const std::string& op) {
  std::map<uint32_t, std::vector<Message>> out;
  for (const pb::TraceRecord& r : run.sim->op_log().records()) {
    if (!r.has_op() || r.op().op() != op) continue;
    // unit "sip0.cube<c>.pe<p>.cpu" (small chip: 4 PEs a CUBE); label "to pe <n> msg <id>".
    const std::string& unit = r.op().unit_name();
    const size_t cube_at = unit.find(".cube") + 5, pe_at = unit.find(".pe") + 3;
    uint32_t cube = 0, pe = 0, dst = 0;
    EXPECT_TRUE(absl::SimpleAtoi(unit.substr(cube_at, unit.find('.', cube_at) - cube_at), &cube));
    EXPECT_TRUE(absl::SimpleAtoi(unit.substr(pe_at, unit.find('.', pe_at) - pe_at), &pe));
    const std::string& label = r.op().label();
    EXPECT_TRUE(absl::SimpleAtoi(label.substr(6, label.find(" msg") - 6), &dst)) << label;
    out[cube * 4 + pe].push_back({dst, r.op().bytes_written()});
  }
  return out;
}

size_t Count(const DecodeRun& run, const std::string& op, const std::string& unit) {
  size_t n = 0;
  for (const pb::TraceRecord& r : run.sim->op_log().records()) {
    if (r.has_op() && r.op().op() == op && r.op().unit_name().ends_with(unit)) ++n;
  }
  return n;
}

// Level-2 ring of P = 4 on the small chip's 2x2 PE mesh, one CUBE (C = 1), G = 2 rows, d = 10.
//
// The ring (reduce_tree.h): the snake 0 1 3 2 closes in one hop; the Level-2 root is PE 0 (the
// 2x2 rectangle's centre, ties lowest), last on the cycle: positions k = 0 1 2 3 are PEs
// 1 3 2 0, each sending to the next (1 -> 3 -> 2 -> 0 -> 1).
// Chunks of d = 10 over R = 4: widths 3 3 2 2 (columns 0-2, 3-5, 6-7, 8-9).
// Reduce-scatter, steps t = 0 1 2: position k sends chunk (k - t) mod 4:
//   PE 1 (k 0): chunks 0 3 2    PE 3 (k 1): 1 0 3    PE 2 (k 2): 2 1 0    PE 0 (k 3): 3 2 1
// and ends holding chunk k + 1 (PE 0, the root: chunk 0). Gather: each non-root sends its
// chunk, then forwards what reaches it: PE 1: 1; PE 3: 2, then 1; PE 2: 3, then 2, 1.
// Triplet bytes (fp32, 2 rows): m and l 8 B each; chunk O 2 x 3 x 4 = 24 B or 2 x 2 x 4 = 16 B;
// the gather moves only O. Packed: one [m | l | O_c] message of 2 x (w + 2) x 4 = 40 or 32 B.
TEST(ChunkedRing, FourRankScheduleByHand) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(2, 1, 1000, 1, 4);
  cfg.d = 10;
  cfg.level2 = ReduceShape::kRing;
  const uint32_t next[4] = {1, 3, 0, 2};  // PE p sends to next[p] (1 -> 3 -> 2 -> 0 -> 1)
  const std::map<uint32_t, std::vector<int>> chunks = {  // chunks sent, scatter then gather
      {1, {0, 3, 2, /*gather*/ 1}},
      {3, {1, 0, 3, /*gather*/ 2, 1}},
      {2, {2, 1, 0, /*gather*/ 3, 2, 1}},
      {0, {3, 2, 1}}};
  const uint64_t width[4] = {3, 3, 2, 2};
  for (const Options& o : kOptions) {
    cfg.packed_payload = o.packed;
    cfg.fused_merge = o.fused;
    DecodeRun run = RunDecode(chip, cfg, {MakeInputs(cfg, 5)});
    ASSERT_TRUE(run.status.ok()) << o.Name() << ": " << run.status;
    ExpectRequestsMatchReference(run, cfg, {MakeInputs(cfg, 5)}, o.Name());
    EXPECT_EQ(run.launch.level2_rounds, 6u) << o.Name();  // 2 (R - 1)
    const std::map<uint32_t, std::vector<Message>> got = Sends(run, "send_ipcq");
    for (const auto& [pe, sent] : chunks) {
      std::vector<Message> want;
      for (size_t i = 0; i < sent.size(); ++i) {
        const uint64_t w = width[sent[i]];
        const bool scatter = i < 3;
        if (o.packed) {
          want.push_back({next[pe], 2 * (w + 2) * 4});
          continue;
        }
        if (scatter) want.insert(want.end(), {{next[pe], 8}, {next[pe], 8}});
        want.push_back({next[pe], 2 * w * 4});
      }
      EXPECT_THAT(got.count(pe) ? got.at(pe) : std::vector<Message>{}, ElementsAreArray(want))
          << o.Name() << " pe " << pe;
    }
    EXPECT_EQ(Count(run, "send_noc", ".cpu"), 0u);
    // One merge per scatter step and rank: 4 x 3 lse_merge commands when fused.
    EXPECT_EQ(Count(run, "lse_merge", ".scheduler"), o.fused ? 12u : 0u) << o.Name();
    // Copies: the root puts chunk 0's O and the 3 gathered chunks into its O; packed, every
    // rank first copies its own chunk (m, l and O's columns: 2) and the root chunk 0's m, l.
    EXPECT_EQ(Count(run, "math_COPY", ".scheduler"), o.packed ? 4u * 2 + 1 + 4 : 4u) << o.Name();
  }
}

// Level-1 ring of C = 4 CUBEs (P = 1): the same schedule over the NOC between CUBE roots; every
// CUBE sends 3 scatter chunks and the non-roots 1, 2, 3 gathered ones: 3 x 4 + 6 = 18 chunk
// messages (triplet: the scatter's 3 messages each).
TEST(ChunkedRing, LevelOneOverTheNoc) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(2, 1, 1000, 4, 1);
  cfg.level1 = ReduceShape::kRing;
  for (const Options& o : kOptions) {
    cfg.packed_payload = o.packed;
    cfg.fused_merge = o.fused;
    DecodeRun run = RunDecode(chip, cfg, {MakeInputs(cfg, 6)});
    ASSERT_TRUE(run.status.ok()) << o.Name() << ": " << run.status;
    ExpectRequestsMatchReference(run, cfg, {MakeInputs(cfg, 6)}, o.Name());
    EXPECT_EQ(run.launch.level1_rounds, 6u);
    EXPECT_EQ(Count(run, "send_noc", ".cpu"), o.packed ? 18u : 3u * 12 + 6) << o.Name();
    EXPECT_EQ(Count(run, "send_ipcq", ".cpu"), 0u);
    // Each chunk of d = 64 over 4 is 16 columns: 2 x 16 x 4 = 128 B of O (packed 144 B).
    for (const auto& [pe, sent] : Sends(run, "send_noc")) {
      for (const Message& m : sent) {
        EXPECT_TRUE(o.packed ? m.second == 144 : (m.second == 8 || m.second == 128))
            << o.Name() << " pe " << pe << " " << m.second << " B";
      }
    }
  }
}

struct Case {
  std::string name;
  DecodeConfig cfg;
};

DecodeConfig Rings(DecodeConfig cfg, bool l2, bool l1) {
  if (l2) cfg.level2 = ReduceShape::kRing;
  if (l1) cfg.level1 = ReduceShape::kRing;
  return cfg;
}

class ChunkedRingParity : public ::testing::TestWithParam<Case> {};

// Every variant and reduce option against the float64 reference; the options compute the same
// fp32 ops in the same order, so their outputs are bit-identical.
TEST_P(ChunkedRingParity, MatchesTheReferenceInEveryForm) {
  const Case& c = GetParam();
  const pb::Chip chip = Load("topology/small.textproto");
  const std::vector<QkvInputs> inputs = BatchInputs(c.cfg, 11);
  for (DecodeVariant variant : {DecodeVariant::kOpt1, DecodeVariant::kOpt3, DecodeVariant::kOpt2}) {
    std::vector<std::vector<float>> first;
    for (const Options& o : kOptions) {
      DecodeConfig cfg = c.cfg;
      cfg.variant = variant;
      cfg.packed_payload = o.packed;
      cfg.fused_merge = o.fused;
      const std::string what = c.name + " variant " + std::to_string(int(variant)) + " " + o.Name();
      DecodeRun run = RunDecode(chip, cfg, inputs);
      ASSERT_TRUE(run.status.ok()) << what << ": " << run.status;
      ExpectRequestsMatchReference(run, cfg, inputs, what);
      for (uint32_t u = 0; u < cfg.users; ++u) {
        absl::StatusOr<std::vector<float>> got = GatherDecodeOutput(*run.store, cfg, run.launch, u);
        ASSERT_TRUE(got.ok()) << got.status();
        if (first.size() <= u) {
          first.push_back(*got);
        } else {
          EXPECT_EQ(*got, first[u]) << what << " user " << u;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, ChunkedRingParity,
    ::testing::Values(
        Case{"l2_ring_c2_p4", Rings(Small(8, 2, 1000, 2, 4), true, false)},
        Case{"l1_ring_c4_p2", Rings(Small(4, 1, 777, 4, 2), false, true)},
        Case{"both_rings_c4_p4_ragged", Rings(Small(8, 1, 1501, 4, 4), true, true)},
        Case{"l1_ring_c8_p1", Rings(Small(8, 1, 900, 8, 1), false, true)},
        Case{"d_below_r_both_rings",  // d = 3 over R = 4: chunks of 1 1 1 0 columns
             [] {
               DecodeConfig cfg = Rings(Small(8, 1, 300, 4, 4), true, true);
               cfg.d = 3;
               return cfg;
             }()},
        Case{"d1_both_rings",  // one column: chunk 0 alone carries O
             [] {
               DecodeConfig cfg = Rings(Small(4, 1, 200, 4, 4), true, true);
               cfg.d = 1;
               return cfg;
             }()},
        Case{"empty_ranks_s5_max20",  // C·P = 8 ranks of B = 3: ranks 2..7 hold no key
             [] {
               DecodeConfig cfg = Rings(Small(8, 2, 5, 2, 4), true, true);
               cfg.max_context = 20;
               return cfg;
             }()},
        Case{"mixed_lengths_three_users",
             [] {
               DecodeConfig cfg = Rings(Small(8, 2, 500, 2, 4), true, true);
               cfg.users = 3;
               cfg.request_lengths = {137, 500, 3};
               return cfg;
             }()},
        Case{"causal_tq5",
             [] {
               DecodeConfig cfg = Rings(Small(8, 1, 300, 4, 4), true, true);
               cfg.t_q = 5;
               return cfg;
             }()},
        Case{"short_context_kv2_l2_ring",  // two KV heads on each CUBE: Level-2 only
             [] {
               DecodeConfig cfg = Rings(Small(16, 4, 900, 1, 4), true, false);
               cfg.kv_per_cube = 2;
               return cfg;
             }()}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Twice the same op log, and timing mode gives data mode's.
TEST(ChunkedRing, DeterministicAndTimingEqualsData) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (const Options& o : kOptions) {
    DecodeConfig cfg = Rings(Small(8, 2, 1000, 2, 4), true, true);
    cfg.d = 3;  // Level-2 chunks of 1 1 1 0 columns (one skipped), Level-1 of 2 1
    cfg.packed_payload = o.packed;
    cfg.fused_merge = o.fused;
    DecodeRun first = RunDecode(chip, cfg, {});
    DecodeRun second = RunDecode(chip, cfg, {});
    ASSERT_TRUE(first.status.ok() && second.status.ok()) << o.Name();
    EXPECT_EQ(OpLogBytes(first), OpLogBytes(second)) << o.Name();
    DecodeRun data = RunDecode(chip, cfg, {MakeInputs(cfg, 3)});
    ASSERT_TRUE(data.status.ok()) << o.Name() << ": " << data.status;
    EXPECT_EQ(OpLogBytes(first), OpLogBytes(data)) << o.Name();
  }
}

// A Level-2 ring that does not close in one IPCQ hop (P = 4 on the full chip's 2x4 mesh is a
// 1x4 row) is refused naming level2_reduce; over the NOC any group shape runs.
TEST(ChunkedRing, OpenIpcqCycleIsRefused) {
  const pb::Chip chip = Load("topology/chip_4sip.textproto");
  DecodeConfig cfg = Rings(Small(8, 1, 1000, 1, 4), true, false);
  DecodeRun run = RunDecode(chip, cfg, {});
  EXPECT_THAT(std::string(run.status.message()),
              HasSubstr("level2_reduce: the ring over a 1x4 PE rectangle has a link that is not "
                        "one IPCQ hop"));
}

// CheckDecodeCapacity counts the ring's scratch: at the largest d it accepts the run fits the
// scratch arena; one column more is refused, naming d.
TEST(ChunkedRing, CapacityHoldsAtTheBoundary) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (const Options& o : kOptions) {
    DecodeConfig cfg = Rings(Small(32, 1, 64, 4, 4), true, true);
    cfg.t_q = 64;  // 2048 rows: the reduce's chunks, not a KV tile, fill the scratch arena
    cfg.tile = 16;
    cfg.packed_payload = o.packed;
    cfg.fused_merge = o.fused;
    // The largest d the check accepts, by bisection.
    uint32_t lo = 1, hi = 512;
    while (hi - lo > 1) {
      cfg.d = (lo + hi) / 2;
      (CheckDecodeCapacity(chip, cfg).ok() ? lo : hi) = cfg.d;
    }
    cfg.d = hi;
    const absl::Status refused = CheckDecodeCapacity(chip, cfg);
    EXPECT_THAT(std::string(refused.message()), HasSubstr("scratch arena")) << o.Name();
    cfg.d = lo;
    DecodeRun run = RunDecode(chip, cfg, {});
    EXPECT_TRUE(run.status.ok()) << o.Name() << " d " << lo << ": " << run.status;
  }
}

}  // namespace
}  // namespace ahbm::kernels::testing
