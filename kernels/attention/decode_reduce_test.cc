// The decode reduce's options (ADR-0060 rev2 §4): reduce_payload PACKED
// ([m | l | O] as one message) and reduce_merge FUSED (one lse_merge command per merge).
// Every variant with every option matches the float64 reference, on empty and ragged ranks too,
// bit for bit the same output as the ADR's triplet + primitive reduce (the same fp32 ops), with
// one message / one merge command per tree edge, fewer commands and a shorter reduce, and a
// byte-identical op log on rerun and between timing and data mode.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/chip_sim.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels::testing {  // decode_test_util.h
namespace {

struct Options {
  bool packed;
  bool fused;
  std::string Name() const {
    return std::string(packed ? "packed" : "triplet") + "+" + (fused ? "fused" : "primitive");
  }
};
constexpr Options kOptions[] = {{false, false}, {false, true}, {true, false}, {true, true}};
constexpr DecodeVariant kVariants[] = {DecodeVariant::kOpt1, DecodeVariant::kOpt3,
                                       DecodeVariant::kOpt2};

struct Case {
  std::string name;
  DecodeConfig cfg;
};

class ReduceOptionsParity : public ::testing::TestWithParam<Case> {};

TEST_P(ReduceOptionsParity, MatchesTheReferenceAndTheAdrReduceBitForBit) {
  const Case& c = GetParam();
  const pb::Chip chip = Load("topology/small.textproto");
  const std::vector<QkvInputs> inputs = BatchInputs(c.cfg, 7);
  std::vector<std::vector<float>> want;
  for (const QkvInputs& in : inputs) want.push_back(ReferenceDecode(c.cfg, in));
  for (DecodeVariant variant : kVariants) {
    std::vector<std::vector<float>> adr;  // per user: triplet + primitive, the first option
    for (const Options& o : kOptions) {
      DecodeConfig cfg = c.cfg;
      cfg.variant = variant;
      cfg.packed_payload = o.packed;
      cfg.fused_merge = o.fused;
      const std::string what = c.name + " variant " + std::to_string(int(variant)) + " " + o.Name();
      DecodeRun run = RunDecode(chip, cfg, inputs);
      ASSERT_TRUE(run.status.ok()) << what << ": " << run.status;
      for (uint32_t u = 0; u < cfg.users; ++u) {
        absl::StatusOr<std::vector<float>> got = GatherDecodeOutput(*run.store, cfg, run.launch, u);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_LE(MaxAbsError(*got, want[u]), 2e-2) << what << " user " << u;  // NaN: +inf
        if (adr.size() <= u) {
          adr.push_back(*got);
        } else {
          EXPECT_EQ(*got, adr[u]) << what << " user " << u << ": not bit-identical to triplet + primitive";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, ReduceOptionsParity,
    ::testing::Values(
        Case{"sp_c2_p4", Small(8, 2, 1000, 2, 4)},
        Case{"sp_c4_p2_ragged", Small(4, 1, 777, 4, 2)},
        Case{"empty_ranks_s5_max20",  // C·P = 8 ranks of B = 3: ranks 2..7 hold no key
             [] {
               DecodeConfig cfg = Small(8, 2, 5, 2, 4);
               cfg.max_context = 20;
               return cfg;
             }()},
        Case{"one_key", Small(8, 2, 1, 2, 4)},
        // Two rotated requests of their own lengths (receives match by request).
        Case{"multi_user",
             [] {
               DecodeConfig cfg = Small(8, 2, 500, 2, 4);
               cfg.users = 2;
               cfg.request_lengths = {137, 500};
               return cfg;
             }()},
        Case{"chain_l2_ring_l1",
             [] {
               DecodeConfig cfg = Small(8, 1, 1500, 4, 4);
               cfg.level2 = ReduceShape::kChain;
               cfg.level1 = ReduceShape::kRing;
               return cfg;
             }()}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// ---- structure and timing (timing mode) ----

// Op records named `op` on units whose name ends with `unit` (".cpu", ".scheduler").
size_t Count(const DecodeRun& run, const std::string& op, const std::string& unit = ".cpu") {
  size_t n = 0;
  for (const pb::TraceRecord& r : run.sim->op_log().records()) {
    if (r.has_op() && r.op().op() == op && r.op().unit_name().ends_with(unit)) ++n;
  }
  return n;
}

// The tree of C = 4 CUBEs x P = 4 PEs has 4·3 IPCQ edges and 3 NOC edges. Triplet: three
// messages per edge; packed: one. Primitive: 11 MATH ops per edge; fused: one lse_merge.
// Packed: the sweep's state is sent from where it lies (no copy). Packed + fused ends the reduce
// earlier than the ADR's triplet + primitive, in both profiles.
TEST(ReduceOptionsStructure, OneMessageAndOneMergePerEdge) {
  const pb::Chip chip = Load("topology/small.textproto");
  const size_t ipcq_edges = 4 * 3, noc_edges = 3;
  // 16 ranks of 192 or 256 keys: 3 or 4 tiles of 64 (opt1/opt3 end on either m buffer).
  for (const auto& [profile, s] : {std::pair<std::string, uint64_t>{"zero", 3072}, {"zero", 4096},
                                   {"realistic", 3072}}) {
    const DecodeConfig base = Small(8, 1, s, 4, 4);
    for (DecodeVariant variant : kVariants) {
      uint64_t adr_latency = 0;
      for (const Options& o : kOptions) {
        DecodeConfig cfg = base;
        cfg.variant = variant;
        cfg.packed_payload = o.packed;
        cfg.fused_merge = o.fused;
        const std::string what = profile + " S " + std::to_string(s) + " variant " +
                                 std::to_string(int(variant)) + " " + o.Name();
        DecodeRun run = RunDecode(chip, cfg, {}, profile);
        ASSERT_TRUE(run.status.ok()) << what << ": " << run.status;
        const size_t per_edge = o.packed ? 1 : 3;
        EXPECT_EQ(Count(run, "send_ipcq"), per_edge * ipcq_edges) << what;
        EXPECT_EQ(Count(run, "send_noc"), per_edge * noc_edges) << what;
        EXPECT_EQ(Count(run, "recv_ipcq"), per_edge * ipcq_edges) << what;
        EXPECT_EQ(Count(run, "lse_merge", ".scheduler"), o.fused ? ipcq_edges + noc_edges : 0u)
            << what;
        EXPECT_EQ(Count(run, "math_COPY", ".scheduler"), 0u) << what;  // the state is sent in place
        const uint64_t latency = run.sim->latency().value();
        if (!o.packed && !o.fused) {
          adr_latency = latency;
        } else if (o.packed && o.fused) {
          EXPECT_LT(latency, adr_latency) << what;
        }
      }
    }
  }
}

// Every variant and option twice: byte-identical op logs; and timing mode gives the op log of
// data mode.
TEST(ReduceOptionsStructure, DeterministicAndTimingEqualsData) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (DecodeVariant variant : kVariants) {
    for (const Options& o : kOptions) {
      DecodeConfig cfg = Small(8, 2, 1000, 2, 4);
      cfg.variant = variant;
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
}

}  // namespace
}  // namespace ahbm::kernels::testing
