// GQA decode on every legal shape (ADR-0060 rev2 §11 gates 1, 5, 6):
// empty ranks (S < C·P, max_context > S), causal T_q > 1 whose masked span crosses ranks,
// every variant, issue-ahead depth, one-shot and reduce topology, mixed-length multi-user batches under rotation, a check
// that needs no reference (Q = 0, one-hot V), long sweeps in data mode, load/compute overlap.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/decode_test_util.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels::testing {  // decode_test_util.h
namespace {

// Every decode form: the variants, opt3's and opt2_lookahead's issue-ahead depths 0 .. 3 (the
// small chip admits 4 composites), and one-shot (one tile of B keys per rank).
struct Form {
  const char* name;
  DecodeVariant variant;
  uint32_t lookahead = 1;
  bool one_shot = false;
};

constexpr Form kForms[] = {
    {"opt1", DecodeVariant::kOpt1},
    {"opt3", DecodeVariant::kOpt3},
    {"opt2", DecodeVariant::kOpt2},
    {"opt3_lookahead0", DecodeVariant::kOpt3, 0},
    {"opt3_lookahead2", DecodeVariant::kOpt3, 2},
    {"opt3_lookahead3", DecodeVariant::kOpt3, 3},
    {"opt2_lookahead0", DecodeVariant::kOpt2Lookahead, 0},
    {"opt2_lookahead", DecodeVariant::kOpt2Lookahead, 1},
    {"opt2_lookahead2", DecodeVariant::kOpt2Lookahead, 2},
    {"opt2_lookahead3", DecodeVariant::kOpt2Lookahead, 3},
    {"baseline_dot", DecodeVariant::kBaselineDot},
    {"one_shot_opt1", DecodeVariant::kOpt1, 1, true},
    {"one_shot_opt3", DecodeVariant::kOpt3, 1, true},
    {"one_shot_opt2", DecodeVariant::kOpt2, 1, true},
};

// `base` in `form` (one-shot: the tile is the largest KV block, as ahbm run sets it).
DecodeConfig WithForm(DecodeConfig cfg, const Form& form) {
  cfg.variant = form.variant;
  cfg.lookahead = form.lookahead;
  cfg.one_shot = form.one_shot;
  if (form.one_shot) cfg.tile = static_cast<uint32_t>(OneShotTile(cfg));
  return cfg;
}

// Runs `cfg` in data mode in every form and checks every request's output against the
// float64 reference on its own inputs.
void ExpectParity(const pb::Chip& chip, const DecodeConfig& base, const std::string& name) {
  std::vector<QkvInputs> inputs;
  for (uint32_t u = 0; u < base.users; ++u) inputs.push_back(MakeInputs(base, 100 + u, u));
  for (const Form& form : kForms) {
    const DecodeConfig cfg = WithForm(base, form);
    DecodeRun run = RunDecode(chip, cfg, inputs, "zero", /*keep_op_log=*/false);
    ASSERT_TRUE(run.status.ok()) << name << " " << form.name << ": " << run.status;
    ExpectRequestsMatchReference(run, cfg, inputs, name + " " + form.name);
  }
}

// opt2_lookahead issues opt2's commands in another order: the same numerics, so every
// request's output is bit-identical to opt2's (empty ranks, causal T_q = 4, mixed lengths).
TEST(DecodeOpt2Lookahead, OutputsAreBitIdenticalToOpt2) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig base = Small(8, 2, 0, 2, 4);
  base.tile = 16;
  base.max_context = 1200;
  base.request_lengths = {5, 300, 1000};
  base.users = 3;
  base.s = 1000;
  base.t_q = 4;
  base.packed_payload = true;
  base.fused_merge = true;
  std::vector<QkvInputs> inputs;
  for (uint32_t u = 0; u < base.users; ++u) inputs.push_back(MakeInputs(base, 200 + u, u));
  DecodeConfig opt2 = base;
  opt2.variant = DecodeVariant::kOpt2;
  DecodeRun want_run = RunDecode(chip, opt2, inputs, "zero", /*keep_op_log=*/false);
  ASSERT_TRUE(want_run.status.ok()) << want_run.status;
  for (uint32_t lookahead : {1u, 2u, 3u}) {
    DecodeConfig cfg = base;
    cfg.variant = DecodeVariant::kOpt2Lookahead;
    cfg.lookahead = lookahead;
    DecodeRun run = RunDecode(chip, cfg, inputs, "zero", /*keep_op_log=*/false);
    ASSERT_TRUE(run.status.ok()) << run.status;
    for (uint32_t u = 0; u < base.users; ++u) {
      absl::StatusOr<std::vector<float>> want = GatherDecodeOutput(*want_run.store, opt2, want_run.launch, u);
      absl::StatusOr<std::vector<float>> got = GatherDecodeOutput(*run.store, cfg, run.launch, u);
      ASSERT_TRUE(want.ok() && got.ok());
      EXPECT_EQ(*got, *want) << "lookahead " << lookahead << " request " << u;
    }
  }
}

struct ShapeCase {
  uint64_t s;
  uint32_t t_q;
  ReduceShape reduce;
};

std::string CaseName(const ::testing::TestParamInfo<ShapeCase>& info) {
  const char* reduce = info.param.reduce == ReduceShape::kTree    ? "tree"
                       : info.param.reduce == ReduceShape::kChain ? "chain"
                                                                  : "ring";
  return "s" + std::to_string(info.param.s) + "_tq" + std::to_string(info.param.t_q) + "_" + reduce;
}

class EmptyAndCausalRanks : public ::testing::TestWithParam<ShapeCase> {};

// C = 2, P = 4 (8 ranks), max_context = 4·S: at S = 1, 5, 7 most ranks hold no keys; with
// T_q = 4 the hidden keys S - 3 .. S - 1 of the causal queries span several ranks.
TEST_P(EmptyAndCausalRanks, MatchTheReference) {
  const ShapeCase& c = GetParam();
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 2, c.s, 2, 4);
  cfg.max_context = 4 * c.s;
  cfg.t_q = c.t_q;
  cfg.level1 = cfg.level2 = c.reduce;
  ExpectParity(chip, cfg, CaseName({c, 0}));
}

std::vector<ShapeCase> ShapeCases() {
  std::vector<ShapeCase> out;
  for (ReduceShape reduce : {ReduceShape::kTree, ReduceShape::kChain, ReduceShape::kRing}) {
    for (uint64_t s : {1u, 5u, 7u}) {  // C·P - 1 = 7
      for (uint32_t t_q : {1u, 4u}) {
        if (t_q <= s) out.push_back({s, t_q, reduce});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Decode, EmptyAndCausalRanks, ::testing::ValuesIn(ShapeCases()), CaseName);

// The causal span crosses a rank boundary and a ragged tile: S = 130 over 8 ranks (B = 17,
// tiles of 8, 8 and 1 keys), T_q = 16 hides keys 115 .. 129 from the first queries, which
// rank 6 (keys 102 .. 118) and rank 7 (119 .. 129) share. Also the short-context kernel.
TEST(DecodeCausal, MaskedSpanCrossesRanksAndRaggedTiles) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 2, 130, 2, 4);
  cfg.tile = 8;
  cfg.t_q = 16;
  ExpectParity(chip, cfg, "crossing");
  DecodeConfig short_cfg = Small(8, 2, 130, 1, 4);
  short_cfg.kv_per_cube = 2;
  short_cfg.t_q = 16;
  short_cfg.tile = 16;
  ExpectParity(chip, short_cfg, "short_context");
}

// A decode batch of mixed lengths under rotation (the default): every request its own KV,
// placement and output; T_q = 1 and causal T_q = 4.
TEST(DecodeMultiUser, MixedLengthsUnderRotation) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (uint32_t t_q : {1u, 4u}) {
    DecodeConfig cfg = Small(8, 2, 0, 2, 4);
    cfg.tile = 128;
    cfg.request_lengths = {7, 300, 1000, 2049};
    cfg.users = 4;
    cfg.s = 2049;
    cfg.t_q = t_q;
    ASSERT_TRUE(cfg.rotate_by_request);
    ExpectParity(chip, cfg, "batch t_q " + std::to_string(t_q));
  }
}

// No reference needed: with Q = 0 every visible key scores the same, and V row `pos` one-hot
// on column `pos` makes O[t] = 1 / (S - T_q + t + 1) on columns 0 .. S - T_q + t and 0
// elsewhere (exact up to the bf16 output rounding).
TEST(DecodeCausal, ZeroQueryAndOneHotValuesGiveTheUniformWeights) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 2, 40, 2, 4);
  cfg.max_context = 160;
  cfg.t_q = 4;
  cfg.tile = 8;
  QkvInputs in = MakeInputs(cfg, 5);
  std::fill(in.q.data.begin(), in.q.data.end(), 0.0f);
  std::fill(in.v.data.begin(), in.v.data.end(), 0.0f);
  for (uint32_t h = 0; h < cfg.h_kv; ++h) {
    for (uint64_t pos = 0; pos < cfg.s; ++pos) in.v.data[(h * cfg.s + pos) * cfg.d + pos] = 1.0f;
  }
  for (const Form& form : kForms) {
    const DecodeConfig fcfg = WithForm(cfg, form);
    DecodeRun run = RunDecode(chip, fcfg, {in}, "zero", /*keep_op_log=*/false);
    ASSERT_TRUE(run.status.ok()) << form.name << ": " << run.status;
    absl::StatusOr<std::vector<float>> o = GatherDecodeOutput(*run.store, fcfg, run.launch, 0);
    ASSERT_TRUE(o.ok()) << o.status();
    for (uint32_t hq = 0; hq < cfg.h_q; ++hq) {
      for (uint32_t t = 0; t < cfg.t_q; ++t) {
        const uint64_t visible = cfg.s - cfg.t_q + t + 1;
        for (uint32_t col = 0; col < cfg.d; ++col) {
          const float got = (*o)[(uint64_t{hq} * cfg.t_q + t) * cfg.d + col];
          const double want = col < visible ? 1.0 / visible : 0.0;
          ASSERT_NEAR(got, want, want / 128 + 1e-7)  // bf16: 8 significant bits
              << form.name << " head " << hq << " t " << t << " col " << col;
        }
      }
    }
  }
}

// Gate 5 (ADR-0063) in data mode: a 128-tile sweep on one PE whose temporaries overflow the
// 1 MiB scratch arena without scopes matches the reference with them.
TEST(DecodeLongContext, ScopedSweepMatchesTheReference) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 1, 32768, 1, 1);
  cfg.d = 128;
  cfg.tile = 256;
  const std::vector<QkvInputs> inputs = {MakeInputs(cfg, 11)};
  const std::vector<float> want = ReferenceDecode(cfg, inputs[0]);
  for (DecodeVariant variant : {DecodeVariant::kOpt1, DecodeVariant::kOpt3}) {
    cfg.variant = variant;
    cfg.scratch_scope = false;
    const absl::Status overflow = RunDecode(chip, cfg, {}, "zero", false).status;
    EXPECT_NE(std::string(overflow.message()).find("scratch arena overflow"), std::string::npos)
        << overflow;
    cfg.scratch_scope = true;
    DecodeRun run = RunDecode(chip, cfg, inputs, "zero", false);
    ASSERT_TRUE(run.status.ok()) << run.status;
    absl::StatusOr<std::vector<float>> got = GatherDecodeOutput(*run.store, cfg, run.launch, 0);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_LE(MaxAbsError(*got, want), 2e-2) << int(variant);
  }
}

// Gate 6: the sweep overlaps loads with compute — from the op log of a one-PE decode, the
// latency is below the serial sum of every DMA, GEMM and MATH command's duration.
TEST(DecodeOverlap, LatencyIsBelowTheSerialSumOfLoadsAndCompute) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 1, 4096, 1, 1);
  cfg.d = 128;
  cfg.tile = 256;
  for (const Form& form : kForms) {
    // baseline_dot waits on every load and dot: what it shows is the missing overlap.
    if (form.variant == DecodeVariant::kBaselineDot) continue;
    const DecodeConfig fcfg = WithForm(cfg, form);
    DecodeRun run = RunDecode(chip, fcfg, {});
    ASSERT_TRUE(run.status.ok()) << form.name << ": " << run.status;
    uint64_t serial = 0, end = 0;
    std::map<std::string, uint64_t> by_engine;
    for (const pb::TraceRecord& r : run.sim->op_log().records()) {
      if (!r.has_op()) continue;
      const pb::OpRecord& op = r.op();
      end = std::max<uint64_t>(end, op.end_ps());
      const std::string& unit = op.unit_name();
      const std::string engine = unit.substr(unit.rfind('.') + 1);
      if (engine == "dma" || engine == "gemm" || engine == "math") {
        serial += op.end_ps() - op.start_ps();
        by_engine[engine] += op.end_ps() - op.start_ps();
      }
    }
    EXPECT_GT(by_engine["dma"], 0u);
    EXPECT_GT(by_engine["gemm"], 0u);
    EXPECT_GT(by_engine["math"], 0u);
    EXPECT_LT(end, serial) << form.name << ": latency " << end << " ps, serial "
                           << serial << " ps";
  }
}

// Empty ranks and causal masks change values, never the command stream: timing mode (no
// values) and data mode give byte-identical op logs, and a rerun gives the same bytes.
TEST(DecodeCausal, EmptyRanksAndMasksKeepTheCommandStream) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 2, 5, 2, 4);
  cfg.max_context = 20;
  cfg.t_q = 4;
  cfg.users = 2;
  cfg.request_lengths = {5, 13};
  const std::vector<QkvInputs> inputs = {MakeInputs(cfg, 1, 0), MakeInputs(cfg, 2, 1)};
  for (const Form& form : kForms) {
    const DecodeConfig fcfg = WithForm(cfg, form);
    DecodeRun timing = RunDecode(chip, fcfg, {});
    DecodeRun again = RunDecode(chip, fcfg, {});
    DecodeRun data = RunDecode(chip, fcfg, inputs);
    ASSERT_TRUE(timing.status.ok() && again.status.ok() && data.status.ok()) << data.status;
    EXPECT_GT(OpLogBytes(timing).size(), 1000u);
    EXPECT_EQ(OpLogBytes(timing), OpLogBytes(again)) << form.name;
    EXPECT_EQ(OpLogBytes(timing), OpLogBytes(data)) << form.name;
  }
}

}  // namespace
}  // namespace ahbm::kernels::testing
