// The hand-computed prefill timeline (DESIGN §4 "Every variant must be checkable
// against a hand-computed timeline"): a 2 x 2-tile flash prefill (ADR-0060 rev2 §5.4,
// PrefillVariant::kFlash, C = P = 1) on one PE of the default topology, profile `zero`, with a
// masked pair and a skipped one. Every command's start and end below is derived on paper from
// DESIGN §2 and §4 (as decode_timeline_test.cc does for decode); the derivation is in the
// comments. Times are in PE cycles (1 cycle = 1 ns at 1 GHz).
//
// Shapes: h_q = 8, h_kv = 1 (G = 8, M-folded: row t·8 + g), d = 128, S = T_q = 32 (queries at
// positions 0..31), q_tile = 128 rows = 16 tokens, tile = 16 keys. Query tiles q0 = tokens
// 0..15, q1 = 16..31; KV tiles k0 = keys 0..15, k1 = 16..31. Pairs (§5.4):
//   A = (q0, k0) masked (the diagonal)      (q0, k1) skipped (every key in q0's future)
//   B = (q1, k0) full                       C = (q1, k1) masked (the diagonal)
// A and C have the same key offset (k_pos − q_pos = 0), so the launcher places one mask in HBM
// and both masked pairs load it.
//
// The numbers used (asserted against the topology first, so a changed topology fails here):
//   HBM channel: 32 B/cycle, first byte after 100 cycles, 256 B interleave; 8 channels per PE.
//     A request granted at t holds the bus for bytes/32 cycles; done = t + 100 + bytes/32.
//     Each channel serves its requests FIFO in the order the DMA engine receives them, which
//     is command issue order (grant = max(arrival, bus free)).
//   GEMM: 8x128 array: a tile (m, k, n) takes k·⌈m/8⌉·⌈n/128⌉ cycles; +16 fill/drain when the
//     engine was idle before it.
//   MATH: 8 cycles start-up + elements/128 (exp, div: /32) [+7 for a reduction]; a composite
//     epilogue is one op costing the sum of its stages.
//   Scheduler tiles 32/64/128; up to 4 composites in flight (never more than 2 here); each
//   engine serves ready ops oldest first by (command issue seq, tile index).
//
// The command stream (prefill.cc Sweep: the next pair's Q·Kᵀ is issued before this pair's
// softmax; a query tile's state is set up at its first pair, stored after its last):
//    1 load Q(q0)           2 load mask          3 QK_A = Q(q0)·K0ᵀ, epilogue scale + mask
//    4 load Q(q1)           5 QK_B = Q(q1)·K0ᵀ, epilogue scale
//    6-8 FILL m, l, O       9-18 softmax of A    19 PV_A = P·V0    20 O += PV_A
//   21 O / l               22 store O(q0)
//   23 load mask           24 QK_C = Q(q1)·K1ᵀ, epilogue scale + mask
//   25-27 FILL m, l, O     28-37 softmax of B   38 PV_B = P·V0    39 O += PV_B
//   40-49 softmax of C     50 PV_C = P·V1       51 O += PV_C      52 O / l     53 store O(q1)
//
// Bytes per channel (every tensor is 256 B aligned and a multiple of 2 KiB, so all 8 channels
// carry the same share and finish together):
//   Q tile [128, 128] bf16 = 32 KiB: 4 KiB a channel, 128 bus cycles: done = grant + 228.
//   mask [128, 16] bf16 = 4 KiB, and V tile [16, 128] bf16 = 4 KiB (one piece, k = 16 < 64):
//     512 B a channel, 16 bus cycles: done = grant + 116.
//   K tile j [d = 128][16] bf16 (tile-major, 4 KiB), read as b[k = 128, n = 16] in two pieces
//     ki = 0, 1 of 64 x 16: 64 rows of 32 B at a 32 B stride, i.e. a dense 2 KiB: one 256 B
//     chunk a channel, 8 bus cycles: done = grant + 108.
//   stored O [128, 128] bf16 = 32 KiB: done = grant + 228.
//
// GEMM. Q·Kᵀ is (M, K, N) = (128, 128, 16): 4 m-tiles x 2 k-tiles of (32, 64, 16), each
// 64·4·1 = 256 cycles (2048 in all, 8x the peak's 256: N = 16 fills 16 of the 128 columns).
// Plan order (tile_plan.h): the four (mi, k0) tiles, then (mi, k1) for mi = 0..3, each followed
// by its output tile's epilogue; (mi, k1) waits for (mi, k0) (the accumulation chain). Every
// op of a composite also waits for its pending inputs (Q, the mask). The epilogue of a [32, 16]
// output tile (512 elements): SCALE 8 + 4 = 12, + ADD mask 12 = 24 on a masked pair.
// P·V is (128, 16, 128): 4 tiles (32, 16, 128) of 16·4·1 = 64 cycles, no epilogue (O fp32 in
// TCM).
//
// MATH (the CPU's ops block; Sj [128, 16] = 2048 elements, a column [128, 1], O [128, 128]):
//   softmax of a pair: REDUCE_MAX 8+16+7 = 31, MAXIMUM 9, SUB 24, EXP 8+64 = 72, SUB 9,
//   EXP [128, 1] 8+4 = 12, MUL l 9, REDUCE_SUM 31, ADD l 9, MUL O 8+128 = 136: 342 in all.
//   FILL m 9, l 9, O 136 (154); O += P·V 136; O / l: DIV 8 + 16384/32 = 520.
//
// The timeline.
//   t = 0: commands 1-5 leave the CPU at once (loads and composites do not block); QK_A and
//   QK_B are admitted on arrival and send their K pieces then. Channels: Q(q0) 0..128 -> 228,
//   mask 128..144 -> 244, QK_A's K0 pieces 144..152 -> 252 and 152..160 -> 260, Q(q1)
//   160..288 -> 388, QK_B's K0 pieces 288..296 -> 396 and 296..304 -> 404.
//   FILLs 0..9, 9..18, 18..154.
//   QK_A waits for Q(q0) (228), the mask (244) and its pieces: (0, k0) 252..524 (fill), (1, k0)
//   ..780, (2, k0) ..1036, (3, k0) ..1292; QK_B's tiles (ready at 404) are younger, so QK_A's
//   (mi, k1) follow: ..1548, ..1804, ..2060, ..2316, each then its epilogue (24) on the idle
//   MATH engine: 1548..1572, 1804..1828, 2060..2084, 2316..2340. QK_A = [144, 2340] (a
//   composite starts with its first operand byte on a bus).
//   QK_B's eight tiles follow back to back: 2316..4364, its (mi, k1) tiles ending 3596, 3852,
//   4108, 4364; epilogues (12) 3596..3608, 3852..3864, 4108..4120, 4364..4376 (the MATH
//   engine is idle then: the CPU waits for PV_A). QK_B = [288, 4376].
//   Softmax of A: REDUCE_MAX auto-waits for QK_A: 2340..2682 (the ten ops back to back).
//   PV_A issued at 2682: V0 on the bus 2682..2698 -> 2798; its tiles are ready then but QK_B's
//   older ones hold the GEMM ("hidden, not removed"): 4364..4428, ..4492, ..4556, ..4620.
//   PV_A = [2682, 4620]. O += PV_A 4620..4756 (auto-wait). q0 is done: O / l 4756..5276;
//   store 5276..5504.
//   At 5504 the CPU issues C's mask load (5504..5520 -> 5620) and QK_C (K1 pieces 5520..5528
//   -> 5628, 5528..5536 -> 5636), then the FILLs of q1's state: 5504..5513, ..5522, ..5658.
//   QK_C: the GEMM has been idle since 4620: (0, k0) 5628..5900 (fill), then 256 each: (mi, k1)
//   tiles end 6924, 7180, 7436, 7692; epilogues (24) 6924..6948, 7180..7204, 7436..7460,
//   7692..7716 (the CPU waits for PV_B). QK_C = [5520, 7716].
//   Softmax of B (QK_B done at 4376) 5658..6000. PV_B issued at 6000: V0 6000..6016 -> 6116;
//   its tiles wait behind QK_C's: 7692..7948. PV_B = [6000, 7948]. O += PV_B 7948..8084.
//   Softmax of C 8084..8426. PV_C issued at 8426: V1 8426..8442 -> 8542; the GEMM has been idle
//   since 7948: 8542..8622 (fill), ..8686, ..8750, ..8814. PV_C = [8426, 8814].
//   O += PV_C 8814..8950; O / l 8950..9470; store 9470..9698. Latency 9698.
//   (This table found a scheduler bug: QK_A and QK_B were admitted only once the instant's DMA
//   replies were in, so Q(q1)'s load took the channels ahead of QK_A's K pieces and everything
//   from QK_A on came 128 cycles late. Composites are now admitted on arrival.)
//
// Lookahead 2 (PrefillShape::lookahead, ADR §9.1), the same prefill: QK_A and QK_B are issued
// before the loop, QK_C before A's softmax (mask buffer 2 of 3). The command stream:
//    1 load Q(q0)   2 load mask   3 QK_A   4 load Q(q1)   5 QK_B   6 load mask   7 QK_C
//    8-10 FILL m, l, O   11-20 softmax of A   21 PV_A   22 O += PV_A   23 O / l   24 store O(q0)
//   25-27 FILL m, l, O   28-37 softmax of B   38 PV_B   39 O += PV_B
//   40-49 softmax of C   50 PV_C   51 O += PV_C   52 O / l   53 store O(q1)
//   t = 0: commands 1-7 leave the CPU at once; channels as above, then the second mask
//   304..320 -> 420 and QK_C's K1 pieces 320..328 -> 428, 328..336 -> 436. FILLs 0..154.
//   QK_A and QK_B exactly as above: QK_A = [144, 2340], QK_B's tiles 2316..4364, QK_B =
//   [288, 4376]. Softmax of A 2340..2682; PV_A issued at 2682 (V0 2682..2698 -> 2798).
//   QK_C (issued at 0) is older than PV_A, so its eight tiles take the GEMM after QK_B's:
//   4364..6412, (mi, k1) tiles ending 5644, 5900, 6156, 6412, epilogues (24) 5644..5668,
//   5900..5924, 6156..6180, 6412..6436 (the CPU waits for PV_A). QK_C = [320, 6436].
//   PV_A's tiles follow: 6412..6476, ..6540, ..6604, ..6668. PV_A = [2682, 6668].
//   O += PV_A 6668..6804; O / l 6804..7324; store 7324..7552.
//   FILLs of q1's state 7552..7561, ..7570, ..7706 (nothing left to issue ahead). Softmax of
//   B 7706..8048. PV_B issued at 8048: V0 8048..8064 -> 8164; the GEMM has been idle since
//   6668: 8164..8244 (fill), ..8308, ..8372, ..8436. PV_B = [8048, 8436]. O += PV_B 8436..8572.
//   Softmax of C (QK_C done at 6436) 8572..8914. PV_C issued at 8914: V1 8914..8930 -> 9030;
//   9030..9110 (fill), ..9174, ..9238, ..9302. PV_C = [8914, 9302]. O += PV_C 9302..9438;
//   O / l 9438..9958; store 9958..10186. Latency 10186: 488 cycles later than lookahead 1.
//   QK_C, issued first, goes ahead of PV_A on the GEMM (oldest first), so q0's P·V, divide and
//   store wait 2048 cycles behind it; what lookahead 2 saves (the GEMM idle 4620..5628 above)
//   comes back as the GEMM's fill and idle time behind B's and C's softmax.
//
// Where it loses time: the GEMM does 3 x 2048 cycles of Q·Kᵀ for 3 x 256 of useful work (a
// 16-key tile, chosen to make the grid 2 x 2; the default tile is 128 keys), and it idles
// 4620..5628 while the CPU divides and stores q0 before it issues QK_C.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/chip_sim.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/attention/prefill_launch.h"
#include "kernels/runtime/runtime.h"
#include "proto/trace.pb.h"
#include "topology/loader.h"

namespace ahbm::kernels {
namespace {

using Span = std::pair<uint64_t, uint64_t>;  // start, end (cycles)

struct Row {
  std::string what;  // the command as the op log names it (composites: QK+mask, QK, PV)
  Span span;
};
using Table = std::map<uint64_t, Row>;  // by cmd id

// The softmax of one pair, in issue order: op and cycles.
const std::pair<const char*, uint64_t> kSoftmax[] = {
    {"REDUCE_MAX", 31}, {"MAXIMUM", 9}, {"SUB", 24}, {"EXP", 72},         {"SUB", 9},
    {"EXP", 12},        {"MUL", 9},     {"REDUCE_SUM", 31}, {"ADD", 9}, {"MUL", 136}};

// Appends the ten softmax ops from `at` (cmd ids from `id`); returns their end.
uint64_t Softmax(Table& t, uint64_t& id, uint64_t at) {
  for (const auto& [op, cycles] : kSoftmax) {
    t[id++] = {op, {at, at + cycles}};
    at += cycles;
  }
  return at;
}

// Appends FILL m, l, O from `at`; returns their end.
uint64_t Fills(Table& t, uint64_t& id, uint64_t at) {
  for (uint64_t cycles : {9, 9, 136}) {
    t[id++] = {"FILL", {at, at + cycles}};
    at += cycles;
  }
  return at;
}

Table Expected() {
  Table t;
  t[1] = {"load", {0, 228}};        // Q(q0)
  t[2] = {"load", {128, 244}};      // the mask
  t[3] = {"QK+mask", {144, 2340}};  // QK_A
  t[4] = {"load", {160, 388}};      // Q(q1)
  t[5] = {"QK", {288, 4376}};       // QK_B
  uint64_t id = 6;
  Fills(t, id, 0);                                  // 6-8: 0..154
  const uint64_t pv_a = Softmax(t, id, 2340);       // 9-18: 2340..2682
  t[id++] = {"PV", {pv_a, 4620}};                   // 19: PV_A
  t[id++] = {"ADD", {4620, 4756}};                  // 20: O += PV_A
  t[id++] = {"DIV", {4756, 5276}};                  // 21: O / l
  t[id++] = {"store", {5276, 5504}};                // 22: O(q0)
  t[id++] = {"load", {5504, 5620}};                 // 23: the mask again
  t[id++] = {"QK+mask", {5520, 7716}};              // 24: QK_C
  const uint64_t fold_b = Fills(t, id, 5504);       // 25-27: 5504..5658
  const uint64_t pv_b = Softmax(t, id, fold_b);     // 28-37: 5658..6000
  t[id++] = {"PV", {pv_b, 7948}};                   // 38: PV_B
  t[id++] = {"ADD", {7948, 8084}};                  // 39
  const uint64_t pv_c = Softmax(t, id, 8084);       // 40-49: 8084..8426
  t[id++] = {"PV", {pv_c, 8814}};                   // 50: PV_C
  t[id++] = {"ADD", {8814, 8950}};                  // 51
  t[id++] = {"DIV", {8950, 9470}};                  // 52
  t[id++] = {"store", {9470, 9698}};                // 53: O(q1)
  return t;
}

// Lookahead 2 (derived in the header).
Table ExpectedLookahead2() {
  Table t;
  t[1] = {"load", {0, 228}};        // Q(q0)
  t[2] = {"load", {128, 244}};      // the mask
  t[3] = {"QK+mask", {144, 2340}};  // QK_A
  t[4] = {"load", {160, 388}};      // Q(q1)
  t[5] = {"QK", {288, 4376}};       // QK_B
  t[6] = {"load", {304, 420}};      // the mask again
  t[7] = {"QK+mask", {320, 6436}};  // QK_C
  uint64_t id = 8;
  Fills(t, id, 0);                                  // 8-10: 0..154
  const uint64_t pv_a = Softmax(t, id, 2340);       // 11-20: 2340..2682
  t[id++] = {"PV", {pv_a, 6668}};                   // 21: PV_A
  t[id++] = {"ADD", {6668, 6804}};                  // 22: O += PV_A
  t[id++] = {"DIV", {6804, 7324}};                  // 23: O / l
  t[id++] = {"store", {7324, 7552}};                // 24: O(q0)
  const uint64_t fold_b = Fills(t, id, 7552);       // 25-27: 7552..7706
  const uint64_t pv_b = Softmax(t, id, fold_b);     // 28-37: 7706..8048
  t[id++] = {"PV", {pv_b, 8436}};                   // 38: PV_B
  t[id++] = {"ADD", {8436, 8572}};                  // 39
  const uint64_t pv_c = Softmax(t, id, 8572);       // 40-49: 8572..8914
  t[id++] = {"PV", {pv_c, 9302}};                   // 50: PV_C
  t[id++] = {"ADD", {9302, 9438}};                  // 51
  t[id++] = {"DIV", {9438, 9958}};                  // 52
  t[id++] = {"store", {9958, 10186}};               // 53: O(q1)
  return t;
}

class PrefillTimeline : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip_fifo.textproto");
    ASSERT_TRUE(chip.ok()) << chip.status();
    chip_ = *chip;
    // The numbers the derivation uses.
    testing::AssertTimelineNumbers(chip_);
  }

  // Runs the prefill; fills every scheduler command's row, issue times, the composites'
  // commands and their spans on the GEMM and MATH units.
  void Run(std::optional<uint32_t> lookahead = std::nullopt) {
    PrefillConfig cfg;
    cfg.lookahead = lookahead;
    cfg.variant = PrefillVariant::kFlash;
    cfg.h_q = 8;
    cfg.h_kv = 1;
    cfg.d = 128;
    cfg.s = 32;
    cfg.c = 1;
    cfg.p = 1;
    cfg.tile = 16;
    cfg.q_tile = 128;
    sim::ChipSimOptions options;
    absl::StatusOr<std::vector<uint32_t>> cubes = PrefillCubes(chip_, cfg);
    ASSERT_TRUE(cubes.ok()) << cubes.status();
    options.cubes = *cubes;
    options.issue_cost_profile = "zero";
    absl::StatusOr<std::unique_ptr<sim::ChipSim>> created = sim::ChipSim::Create(chip_, options);
    ASSERT_TRUE(created.ok()) << created.status();
    std::unique_ptr<sim::ChipSim> sim = std::move(*created);
    KernelRuntime runtime(sim.get(), nullptr);
    absl::StatusOr<PrefillLaunch> launch = LaunchPrefill(chip_, cfg, runtime, nullptr, {});
    ASSERT_TRUE(launch.ok()) << launch.status();
    EXPECT_EQ(launch->composites, 6u);        // 3 visible pairs x (Q·Kᵀ, P·V)
    EXPECT_EQ(launch->grid_composites, 8u);   // the full 2 x 2 grid
    ASSERT_TRUE(runtime.Run().ok());
    for (const pb::TraceRecord& r : sim->op_log().records()) {
      if (!r.has_issue()) continue;
      const pb::IssueRecord& is = r.issue();
      issue_[is.cmd_id()] = is.issue_ps() / 1000;
      if (is.has_composite()) composite_[is.cmd_id()] = is.composite();
      if (is.has_dma()) dma_[is.cmd_id()] = is.dma();
    }
    for (const pb::TraceRecord& r : sim->op_log().records()) {
      if (!r.has_op()) continue;
      const pb::OpRecord& op = r.op();
      const Span span = {op.start_ps() / 1000, op.end_ps() / 1000};
      const std::string& unit = op.unit_name();
      if (unit.ends_with(".scheduler")) {
        got_[op.cmd_id()] = {What(op), span};
      } else if (unit.ends_with(".gemm")) {
        gemm_[op.cmd_id()] = span;
      } else if (unit.ends_with(".math") && composite_.contains(op.cmd_id())) {
        epilogue_[op.cmd_id()] = span;
      }
    }
    latency_ = sim->latency().value() / 1000;
  }

  // "load" / "store", "QK+mask" / "QK" / "PV" (by epilogue), or the MATH op's name.
  std::string What(const pb::OpRecord& op) const {
    if (op.op() == "dma_load") return "load";
    if (op.op() == "dma_store") return "store";
    if (op.op() == "composite_gemm") {
      const pb::CompositeCmd& c = composite_.at(op.cmd_id());
      if (c.epilogue_size() == 0) return "PV";
      return c.epilogue_size() == 2 ? "QK+mask" : "QK";
    }
    const std::string prefix = "math_";
    return op.op().starts_with(prefix) ? op.op().substr(prefix.size()) : op.op();
  }

  pb::Chip chip_;
  Table got_;
  std::map<uint64_t, uint64_t> issue_;                 // cmd -> issue time
  std::map<uint64_t, pb::CompositeCmd> composite_;     // as issued
  std::map<uint64_t, pb::DmaCmd> dma_;
  std::map<uint64_t, Span> gemm_, epilogue_;           // composites on the GEMM / MATH unit
  uint64_t latency_ = 0;
};

TEST_F(PrefillTimeline, EveryCommandAsDerivedOnPaper) {
  Run();
  const Table want = Expected();
  ASSERT_EQ(got_.size(), want.size());
  for (const auto& [id, row] : want) {
    ASSERT_TRUE(got_.contains(id)) << "cmd " << id;
    EXPECT_EQ(got_.at(id).what, row.what) << "cmd " << id;
    EXPECT_EQ(got_.at(id).span, row.span) << "cmd " << id << " (" << row.what << ")";
  }
  EXPECT_EQ(latency_, 9698u);
}

// The engine spans of the derivation: each composite's first and last tile on the GEMM, and
// its epilogues on the MATH engine.
TEST_F(PrefillTimeline, EngineSpansAsDerived) {
  Run();
  const std::map<uint64_t, Span> gemm = {{3, {252, 2316}},  {5, {2316, 4364}},
                                         {19, {4364, 4620}}, {24, {5628, 7692}},
                                         {38, {7692, 7948}}, {50, {8542, 8814}}};
  EXPECT_EQ(gemm_, gemm);
  const std::map<uint64_t, Span> epilogue = {{3, {1548, 2340}}, {5, {3596, 4376}},
                                             {24, {6924, 7716}}};
  EXPECT_EQ(epilogue_, epilogue);
}

// The causal structure: three Q·Kᵀ — A and B on K tile 0, C on K tile 1; none on (q0, k1) —
// the masked ones add the mask both mask loads bring from one place in HBM, and the CPU ran
// ahead: QK_A and QK_B left it at 0, QK_C before q1's state was set up.
TEST_F(PrefillTimeline, MaskedAndSkippedPairs) {
  Run();
  const pb::CompositeCmd& qk_a = composite_.at(3);
  const pb::CompositeCmd& qk_b = composite_.at(5);
  const pb::CompositeCmd& qk_c = composite_.at(24);
  EXPECT_EQ(qk_a.b().addr(), qk_b.b().addr());
  EXPECT_EQ(qk_c.b().addr(), qk_a.b().addr() + 128 * 16 * 2);  // the next [128][16] bf16 K tile
  EXPECT_NE(qk_a.a().addr(), qk_b.a().addr());                   // Q(q0), Q(q1): two buffers
  EXPECT_EQ(qk_b.a().addr(), qk_c.a().addr());                   // Q(q1) loaded once
  ASSERT_EQ(qk_a.epilogue_size(), 2);
  ASSERT_EQ(qk_c.epilogue_size(), 2);
  EXPECT_EQ(qk_a.epilogue(1).operand().addr(), dma_.at(2).dst().addr());
  EXPECT_EQ(qk_c.epilogue(1).operand().addr(), dma_.at(23).dst().addr());
  EXPECT_EQ(dma_.at(2).src().addr(), dma_.at(23).src().addr());  // one mask for offset 0
  EXPECT_EQ(composite_.at(19).b().addr(), composite_.at(38).b().addr());  // V0 twice
  EXPECT_EQ(composite_.at(50).b().addr(), composite_.at(19).b().addr() + 16 * 128 * 2);
  for (uint64_t cmd : {1, 2, 3, 4, 5}) EXPECT_EQ(issue_.at(cmd), 0u) << cmd;
  EXPECT_EQ(issue_.at(24), 5504u);
  EXPECT_EQ(issue_.at(25), 5504u);
}

TEST_F(PrefillTimeline, LookaheadTwoEveryCommandAsDerivedOnPaper) {
  Run(/*lookahead=*/2);
  const Table want = ExpectedLookahead2();
  ASSERT_EQ(got_.size(), want.size());
  for (const auto& [id, row] : want) {
    ASSERT_TRUE(got_.contains(id)) << "cmd " << id;
    EXPECT_EQ(got_.at(id).what, row.what) << "cmd " << id;
    EXPECT_EQ(got_.at(id).span, row.span) << "cmd " << id << " (" << row.what << ")";
  }
  EXPECT_EQ(latency_, 10186u);
  const std::map<uint64_t, Span> gemm = {{3, {252, 2316}},   {5, {2316, 4364}},
                                         {7, {4364, 6412}},  {21, {6412, 6668}},
                                         {38, {8164, 8436}}, {50, {9030, 9302}}};
  EXPECT_EQ(gemm_, gemm);
  const std::map<uint64_t, Span> epilogue = {{3, {1548, 2340}}, {5, {3596, 4376}},
                                             {7, {5644, 6436}}};
  EXPECT_EQ(epilogue_, epilogue);
  for (uint64_t cmd : {1, 2, 3, 4, 5, 6, 7}) EXPECT_EQ(issue_.at(cmd), 0u) << cmd;
  // Three Sj and mask buffers: QK_C's mask is not QK_A's buffer.
  EXPECT_NE(dma_.at(6).dst().addr(), dma_.at(2).dst().addr());
  EXPECT_EQ(dma_.at(6).src().addr(), dma_.at(2).src().addr());
}

}  // namespace
}  // namespace ahbm::kernels
