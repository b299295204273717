// GQA decode on every legal shape (issue 9 acceptance; ADR-0060 rev2 §11 gates 1, 5, 6):
// empty ranks (S < C·P, max_context > S), causal T_q > 1 whose masked span crosses ranks,
// every variant and reduce topology, mixed-length multi-user batches under rotation, a check
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

constexpr DecodeVariant kVariants[] = {DecodeVariant::kOpt1, DecodeVariant::kOpt3,
                                       DecodeVariant::kOpt2};

const char* VariantName(DecodeVariant v) {
  return v == DecodeVariant::kOpt1 ? "opt1" : v == DecodeVariant::kOpt3 ? "opt3" : "opt2";
}

// Runs `cfg` in data mode for every variant and checks every request's output against the
// float64 reference on its own inputs.
void ExpectParity(const pb::Chip& chip, const DecodeConfig& base, const std::string& name) {
  std::vector<DecodeInputs> inputs;
  for (uint32_t u = 0; u < base.users; ++u) inputs.push_back(MakeInputs(base, 100 + u, u));
  for (DecodeVariant variant : kVariants) {
    DecodeConfig cfg = base;
    cfg.variant = variant;
    DecodeRun run = RunDecode(chip, cfg, inputs, "zero", /*keep_op_log=*/false);
    ASSERT_TRUE(run.status.ok()) << name << " " << VariantName(variant) << ": " << run.status;
    ExpectRequestsMatchReference(run, cfg, inputs, name + " " + VariantName(variant));
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
  DecodeInputs in = MakeInputs(cfg, 5);
  std::fill(in.q.data.begin(), in.q.data.end(), 0.0f);
  std::fill(in.v.data.begin(), in.v.data.end(), 0.0f);
  for (uint32_t h = 0; h < cfg.h_kv; ++h) {
    for (uint64_t pos = 0; pos < cfg.s; ++pos) in.v.data[(h * cfg.s + pos) * cfg.d + pos] = 1.0f;
  }
  for (DecodeVariant variant : kVariants) {
    cfg.variant = variant;
    DecodeRun run = RunDecode(chip, cfg, {in}, "zero", /*keep_op_log=*/false);
    ASSERT_TRUE(run.status.ok()) << run.status;
    absl::StatusOr<std::vector<float>> o = GatherDecodeOutput(*run.store, cfg, run.launch, 0);
    ASSERT_TRUE(o.ok()) << o.status();
    for (uint32_t hq = 0; hq < cfg.h_q; ++hq) {
      for (uint32_t t = 0; t < cfg.t_q; ++t) {
        const uint64_t visible = cfg.s - cfg.t_q + t + 1;
        for (uint32_t col = 0; col < cfg.d; ++col) {
          const float got = (*o)[(uint64_t{hq} * cfg.t_q + t) * cfg.d + col];
          const double want = col < visible ? 1.0 / visible : 0.0;
          ASSERT_NEAR(got, want, want / 128 + 1e-7)  // bf16: 8 significant bits
              << VariantName(variant) << " head " << hq << " t " << t << " col " << col;
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
  const std::vector<DecodeInputs> inputs = {MakeInputs(cfg, 11)};
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
    EXPECT_LE(MaxAbsError(*got, want), 2e-2) << VariantName(variant);
  }
}

// Gate 6: the sweep overlaps loads with compute — from the op log of a one-PE decode, the
// latency is below the serial sum of every DMA, GEMM and MATH command's duration.
TEST(DecodeOverlap, LatencyIsBelowTheSerialSumOfLoadsAndCompute) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 1, 4096, 1, 1);
  cfg.d = 128;
  cfg.tile = 256;
  for (DecodeVariant variant : kVariants) {
    cfg.variant = variant;
    DecodeRun run = RunDecode(chip, cfg, {});
    ASSERT_TRUE(run.status.ok()) << run.status;
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
    EXPECT_LT(end, serial) << VariantName(variant) << ": latency " << end << " ps, serial "
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
  const std::vector<DecodeInputs> inputs = {MakeInputs(cfg, 1, 0), MakeInputs(cfg, 2, 1)};
  for (DecodeVariant variant : kVariants) {
    cfg.variant = variant;
    DecodeRun timing = RunDecode(chip, cfg, {});
    DecodeRun again = RunDecode(chip, cfg, {});
    DecodeRun data = RunDecode(chip, cfg, inputs);
    ASSERT_TRUE(timing.status.ok() && again.status.ok() && data.status.ok()) << data.status;
    EXPECT_GT(OpLogBytes(timing).size(), 1000u);
    EXPECT_EQ(OpLogBytes(timing), OpLogBytes(again)) << VariantName(variant);
    EXPECT_EQ(OpLogBytes(timing), OpLogBytes(data)) << VariantName(variant);
  }
}

}  // namespace
}  // namespace ahbm::kernels::testing
