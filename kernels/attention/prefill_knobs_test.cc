// The prefill kernels' pipeline and ring knobs (ADR-0060 rev2 §9.1, §9.4) and the blocking-dot
// baseline (§1), on the small topology (2x4 CUBEs of 2x2 PEs): data-mode parity with the float64
// causal reference for every lookahead, ring depth and message size (ragged tiles, T_q < S,
// empty ranks, mixed request lengths, T_q chunking), timing mode's op log equal to data mode's,
// the ring completing at every depth with sub-blocks larger than the NOC endpoint queue, the
// refusals naming their field, and what each form issues.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/errors.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/attention/prefill_launch.h"
#include "kernels/attention/prefill_test_util.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels {
namespace {

using testing::Load;
using testing::OpLogBytes;
using testing::PrefillRun;
using testing::RunPrefill;

// The shapes every form is held to: the small default, ragged tiles and C·P (S 101), chunked
// prefill (T_q 37 of 90), empty ranks (S 40 in blocks sized for 4096), a mixed-length batch,
// and (ring) T_q chunks of one tile.
std::vector<std::pair<std::string, PrefillConfig>> Shapes(PrefillVariant v) {
  std::vector<std::pair<std::string, PrefillConfig>> out;
  const PrefillConfig base = testing::SmallPrefill(v == PrefillVariant::kBaselineDot ? PrefillVariant::kRing : v);
  out.push_back({"default", base});
  out.back().second.variant = v;
  PrefillConfig c = out.back().second;
  c.s = 101;
  out.push_back({"ragged S 101", c});
  c = out.front().second;
  c.s = 90;
  c.t_q = 37;
  out.push_back({"T_q 37 of 90", c});
  c = out.front().second;
  c.s = 40;
  c.max_context = 4096;
  out.push_back({"empty ranks", c});
  c = out.front().second;
  c.s = 0;
  c.users = 3;
  c.request_lengths = {70, 33, 96};
  out.push_back({"batch 70, 33, 96", c});
  if (c.Ring()) {
    c = out.front().second;
    c.max_tiles_per_chunk = 1;
    out.push_back({"T_q chunks of one tile", c});
  }
  return out;
}

const char* Name(PrefillVariant v) {
  switch (v) {
    case PrefillVariant::kFlash:
      return "flash";
    case PrefillVariant::kShortContext:
      return "short";
    case PrefillVariant::kRing:
      return "ring";
    case PrefillVariant::kBaselineDot:
      return "baseline_dot";
    case PrefillVariant::kBaselineFanout:
      break;
  }
  return "baseline_fanout";
}

// Parity in data mode, and timing mode's op log byte-identical to data mode's.
void ExpectParityAndTiming(const pb::Chip& chip, const PrefillConfig& cfg, const std::string& what) {
  testing::ExpectPrefillParity(chip, cfg, what);
  PrefillRun timing = RunPrefill(chip, cfg, {});
  PrefillRun data = RunPrefill(chip, cfg, testing::PrefillInputs(cfg, 5));
  ASSERT_TRUE(timing.status.ok() && data.status.ok()) << what << ": " << timing.status << data.status;
  EXPECT_EQ(OpLogBytes(timing), OpLogBytes(data)) << what;
}

TEST(PrefillLookahead, ParityEveryValueVariantAndShape) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (PrefillVariant v : {PrefillVariant::kFlash, PrefillVariant::kShortContext, PrefillVariant::kRing}) {
    for (uint32_t lookahead : {0u, 1u, 2u, 3u}) {
      for (auto [shape, cfg] : Shapes(v)) {
        cfg.lookahead = lookahead;
        ExpectParityAndTiming(chip, cfg, absl::StrCat(Name(v), " lookahead ", lookahead, " ", shape));
      }
    }
  }
}

// The command stream: with lookahead L, pair k + L's Q·Kᵀ is issued before pair k's softmax —
// on the one PE of a flash prefill (S = T_q = 96, 4-token query tiles), the number of
// Q·Kᵀ composites issued ahead of the first softmax MATH op (REDUCE_MAX on Sj) is L + 1 (the
// folded pair's and L more), and 0 issues them one by one.
TEST(PrefillLookahead, QkIssuedAheadOfTheFirstSoftmax) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (uint32_t lookahead : {0u, 1u, 2u, 3u}) {
    PrefillConfig cfg = testing::SmallPrefill(PrefillVariant::kFlash);
    cfg.lookahead = lookahead;
    PrefillRun run = RunPrefill(chip, cfg, {});
    ASSERT_TRUE(run.status.ok()) << run.status;
    // Composites by issue order: Q·Kᵀ carries the scale epilogue, P·V none. Count the
    // composites issued before the first REDUCE_MAX starts.
    std::map<uint64_t, uint64_t> issue_of;  // cmd id -> issue ps
    for (const pb::TraceRecord& r : run.sim->op_log().records()) {
      if (r.has_issue()) issue_of[r.issue().cmd_id()] = r.issue().issue_ps();
    }
    uint64_t first_max = UINT64_MAX;
    std::set<uint64_t> composites;  // a composite may have several op records (its pieces)
    for (const pb::TraceRecord& r : run.sim->op_log().records()) {
      if (!r.has_op()) continue;
      if (r.op().op() == "math_REDUCE_MAX") first_max = std::min(first_max, r.op().start_ps());
      if (r.op().op() == "composite_gemm") composites.insert(r.op().cmd_id());
    }
    uint32_t before = 0;
    for (uint64_t id : composites) before += issue_of[id] < first_max;
    EXPECT_EQ(before, lookahead + 1) << "lookahead " << lookahead;
  }
}

TEST(PrefillRingDepth, ParityEveryDepthAndMessageSize) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (uint32_t depth : {1u, 2u, 3u, 4u}) {
    for (uint64_t message : {uint64_t{16} << 10, uint64_t{256}, uint64_t{16}}) {
      for (auto [shape, cfg] : Shapes(PrefillVariant::kRing)) {
        cfg.ring_depth = depth;
        cfg.ring_message_bytes = message;
        ExpectParityAndTiming(chip, cfg, absl::StrCat("ring depth ", depth, " message ", message, " ", shape));
      }
    }
  }
}

// Sub-blocks larger than the receiver's NOC endpoint queue: at S = 96 a PE's sub-block is 6 keys,
// K and V 384 B each, against a 256 B queue. Every depth completes and stays exact (depth 1 with
// its single slot receiving while it streams the held sub-block from HBM).
TEST(PrefillRingDepth, SubBlocksLargerThanTheEndpointQueue) {
  pb::Chip chip = Load("topology/small.textproto");
  chip.mutable_sip()->mutable_noc()->set_endpoint_queue_bytes(256);
  for (uint32_t depth : {1u, 2u, 3u, 4u}) {
    PrefillConfig cfg = testing::SmallPrefill(PrefillVariant::kRing);
    cfg.ring_depth = depth;
    cfg.ring_message_bytes = 256;
    ExpectParityAndTiming(chip, cfg, absl::StrCat("queue 256 B, depth ", depth));
  }
  // At scale: 8 CUBEs, d 128, S 2048 — sub-blocks of 64 keys, K and V 16 KiB each, four times
  // a 4 KiB endpoint queue; every depth completes, and a deeper ring is never later than depth 1.
  chip.mutable_sip()->mutable_noc()->set_endpoint_queue_bytes(4096);
  std::map<uint32_t, uint64_t> latency;
  for (uint32_t depth : {1u, 2u, 3u, 4u}) {
    PrefillConfig cfg;
    cfg.h_q = 8;
    cfg.h_kv = 1;
    cfg.d = 128;
    cfg.s = 2048;
    cfg.p = 4;
    cfg.tile = 128;
    cfg.q_tile = 128;
    cfg.ring_depth = depth;
    cfg.ring_message_bytes = 4096;
    PrefillRun run = testing::RunWith(chip, cfg, {}, "zero", PrefillCubes, LaunchPrefill,
                                      /*keep_op_log=*/false);
    ASSERT_TRUE(run.status.ok()) << "depth " << depth << ": " << run.status;
    latency[depth] = run.sim->BuildReport().latency_ps();
  }
  for (uint32_t depth : {2u, 3u, 4u}) EXPECT_LE(latency[depth], latency[1]) << "depth " << depth;
  // Why depth 1 streams from HBM rather than sending out of its one slot before receiving into
  // it: that order (ring_send_first) leaves every PE blocked in a send.
  PrefillConfig first;
  first.h_q = 8;
  first.h_kv = 1;
  first.d = 128;
  first.s = 2048;
  first.p = 4;
  first.ring_depth = 1;
  first.ring_message_bytes = 4096;
  first.ring_send_first = true;
  PrefillRun stuck = testing::RunWith(chip, first, {}, "zero", PrefillCubes, LaunchPrefill,
                                      /*keep_op_log=*/false);
  EXPECT_EQ(KindOf(stuck.status), ErrorKind::kDeadlock) << stuck.status;
  EXPECT_TRUE(std::string(stuck.status.message()).starts_with("deadlock")) << stuck.status;
}

TEST(PrefillBaselineDot, ParityEveryShape) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (auto [shape, cfg] : Shapes(PrefillVariant::kBaselineDot)) {
    ExpectParityAndTiming(chip, cfg, absl::StrCat("baseline_dot ", shape));
    cfg.ring_depth = 1;
    cfg.ring_message_bytes = 64;
    ExpectParityAndTiming(chip, cfg, absl::StrCat("baseline_dot depth 1 ", shape));
  }
}

// The ring's placement and causal skip with blocking dots: as many GEMMs as the ring's
// composites (2 per visible pair), every one a `dot`, none a composite; and slower.
TEST(PrefillBaselineDot, BlockingDotsInPlaceOfTheRingsComposites) {
  const pb::Chip chip = Load("topology/small.textproto");
  PrefillConfig ring = testing::SmallPrefill(PrefillVariant::kRing);
  PrefillConfig dot = ring;
  dot.variant = PrefillVariant::kBaselineDot;
  PrefillRun a = RunPrefill(chip, ring, {});
  PrefillRun b = RunPrefill(chip, dot, {});
  ASSERT_TRUE(a.status.ok() && b.status.ok()) << a.status << b.status;
  EXPECT_EQ(a.launch.composites, b.launch.composites);
  // Commands by op name (a command may have several op records: its pieces).
  // Command ids are per PE: key by the unit's PE ("sip0.cube3.pe2") and the id.
  std::map<std::string, std::set<std::pair<std::string, uint64_t>>> cmds_a, cmds_b;
  const auto key = [](const pb::OpRecord& op) {
    return std::pair(op.unit_name().substr(0, op.unit_name().rfind('.')), op.cmd_id());
  };
  for (const pb::TraceRecord& r : a.sim->op_log().records()) {
    if (r.has_op()) cmds_a[r.op().op()].insert(key(r.op()));
  }
  for (const pb::TraceRecord& r : b.sim->op_log().records()) {
    if (r.has_op()) cmds_b[r.op().op()].insert(key(r.op()));
  }
  std::map<std::string, uint64_t> ops_a, ops_b;
  for (const auto& [op, ids] : cmds_a) ops_a[op] = ids.size();
  for (const auto& [op, ids] : cmds_b) ops_b[op] = ids.size();
  EXPECT_EQ(ops_a["composite_gemm"], a.launch.composites);
  EXPECT_EQ(ops_a["dot"], 0u);
  EXPECT_EQ(ops_b["composite_gemm"], 0u);
  EXPECT_EQ(ops_b["dot"], b.launch.composites);
  // Scale (and the masks' ADD) moved from the composite epilogue to MATH: one SCALE per Q·Kᵀ.
  EXPECT_EQ(ops_b["math_SCALE"], b.launch.composites / 2);
  EXPECT_GT(b.sim->BuildReport().latency_ps(), a.sim->BuildReport().latency_ps());
}

absl::Status Refusal(const pb::Chip& chip, const PrefillConfig& cfg) {
  return PrefillCubes(chip, cfg).status();
}

void ExpectRefused(const pb::Chip& chip, const PrefillConfig& cfg, const std::string& field) {
  const absl::Status s = Refusal(chip, cfg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field << ": " << s;
  EXPECT_TRUE(std::string(s.message()).starts_with(field + ": ")) << s;
  EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos) << s;
}

TEST(PrefillKnobs, BadValuesNameTheirField) {
  const pb::Chip chip = Load("topology/small.textproto");
  PrefillConfig cfg = testing::SmallPrefill(PrefillVariant::kRing);
  for (uint32_t depth : {0u, 5u}) {
    PrefillConfig c = cfg;
    c.ring_depth = depth;
    ExpectRefused(chip, c, "ring_depth");
  }
  PrefillConfig zero = cfg;
  zero.ring_message_bytes = 0;
  ExpectRefused(chip, zero, "ring_message_bytes");
  PrefillConfig big = cfg;
  big.ring_message_bytes = chip.sip().noc().endpoint_queue_bytes() + 1;
  ExpectRefused(chip, big, "ring_message_bytes");
  big.ring_message_bytes = chip.sip().noc().endpoint_queue_bytes();
  EXPECT_TRUE(Refusal(chip, big).ok());
  // max_inflight_composites 4: lookahead 3 is the most.
  PrefillConfig ahead = testing::SmallPrefill(PrefillVariant::kFlash);
  ahead.lookahead = 4;
  ExpectRefused(chip, ahead, "lookahead");
  ahead.lookahead = 3;
  EXPECT_TRUE(Refusal(chip, ahead).ok());
  for (PrefillVariant v : {PrefillVariant::kBaselineDot, PrefillVariant::kBaselineFanout}) {
    PrefillConfig b = testing::SmallPrefill(PrefillVariant::kRing);
    b.variant = v;
    if (v == PrefillVariant::kBaselineFanout) b.group_rows = b.group_cols = 0;
    EXPECT_TRUE(Refusal(chip, b).ok()) << Name(v) << ": " << Refusal(chip, b);
    b.lookahead = 0;
    ExpectRefused(chip, b, "lookahead");
  }
  // The TCM counts lookahead + 1 Q, Sj and mask buffers: a flash instance that fits with
  // lookahead 1 (d 128, 128-row query tiles, 2048-key tiles) does not with 3.
  PrefillConfig tcm = testing::SmallPrefill(PrefillVariant::kFlash);
  tcm.h_q = 8;
  tcm.d = 128;
  tcm.s = 4096;
  tcm.t_q = 16;
  tcm.tile = 1024;
  tcm.q_tile = 128;
  PrefillRun fits = RunPrefill(chip, tcm, {});
  EXPECT_TRUE(fits.status.ok()) << fits.status;
  tcm.lookahead = 3;
  PrefillRun full = RunPrefill(chip, tcm, {});
  EXPECT_TRUE(std::string(full.status.message()).starts_with("lookahead: ")) << full.status;
}

}  // namespace
}  // namespace ahbm::kernels
