// `ahbm run --kernel=decode` with the baselines (decode_run.h, through RunWorkload): the variant
// switch, the rounds the report counts, data mode against the float64 reference, the fields
// they refuse.
#include <cmath>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/launch/decode_run.h"
#include "kernels/launch/launch.h"
#include "topology/loader.h"

namespace ahbm::launch {
namespace {

pb::Workload Small(pb::Variant variant) {
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_variant(variant);
  w.set_h_q(8);
  w.set_h_kv(2);
  w.set_d(64);
  w.set_s(333);
  if (variant == pb::BASELINE_FANOUT_GROUP) w.set_c(2);  // the others keep a head in one CUBE
  w.set_p(4);
  if (variant == pb::BASELINE_REV1_TREE) w.set_tile(64);  // the fan-out ones have no KV tile
  w.set_data(true);
  w.set_seed(5);
  return w;
}

TEST(DecodeBaselineRun, EachBaselineMatchesTheReferenceAndCountsItsRounds) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  const struct {
    pb::Variant variant;
    uint32_t rounds;  // P − 1, C·P − 1, ⌈log₂P⌉
  } cases[] = {{pb::BASELINE_FANOUT, 3}, {pb::BASELINE_FANOUT_GROUP, 7}, {pb::BASELINE_REV1_TREE, 2}};
  for (const auto& c : cases) {
    const pb::Workload w = Small(c.variant);
    absl::StatusOr<LaunchResult> result = RunWorkload(*chip, w, LaunchOptions{});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->runtime_status.ok()) << result->runtime_status;
    EXPECT_EQ(result->reduce_rounds, c.rounds) << pb::Variant_Name(c.variant);
    EXPECT_NE(result->report.workload_summary().find(pb::Variant_Name(c.variant)), std::string::npos);
    absl::StatusOr<kernels::DecodeConfig> cfg = DecodeConfigOf(*chip, w);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    EXPECT_EQ(cfg->c, c.variant == pb::BASELINE_FANOUT_GROUP ? 2u : 1u);
    kernels::QkvInputs in{result->inputs.at("q"), result->inputs.at("k"), result->inputs.at("v")};
    const std::vector<float> want = kernels::ReferenceDecode(*cfg, in);
    const std::vector<float>& got = result->outputs.at("o").data;
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double e = std::abs(double(got[i]) - want[i]);
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    }
    EXPECT_LE(worst, 2e-2) << pb::Variant_Name(c.variant);
  }
}

TEST(DecodeBaselineRun, RefusesWhatTheyCannotRun) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  for (pb::Variant v : {pb::BASELINE_FANOUT, pb::BASELINE_FANOUT_GROUP, pb::BASELINE_REV1_TREE}) {
    pb::Workload w = Small(v);
    w.set_t_q(2);
    EXPECT_EQ(DecodeConfigOf(*chip, w).status().message(),
              "t_q: the baselines decode one token (t_q = 1)");
  }
  for (pb::Variant v : {pb::BASELINE_FANOUT, pb::BASELINE_FANOUT_GROUP}) {
    pb::Workload w = Small(v);
    w.set_tile(64);  // a value given is a value used or refused
    EXPECT_EQ(DecodeConfigOf(*chip, w).status().message(),
              absl::StrCat("tile: ", pb::Variant_Name(v),
                           " reads each rank's whole KV block with one blocking dot for q·Kᵀ "
                           "and one for P·V; it has no KV tile (leave tile unset)"));
  }
  pb::Workload w = Small(pb::BASELINE_REV1_TREE);
  w.set_h_q(18);
  w.set_h_kv(9);  // 9 KV heads, one CUBE each; the small chip has 8
  EXPECT_EQ(DecodeConfigOf(*chip, w).status().message(),
            "h_kv: 9 KV heads need 9 CUBE Groups of C = 1; SIPs 0.. have 8");
  w = Small(pb::BASELINE_FANOUT);
  w.set_h_q(16);  // 16 query heads, one CUBE each
  EXPECT_EQ(DecodeConfigOf(*chip, w).status().message(),
            "h_q: this baseline puts one head per CUBE: 16 heads need 16 CUBEs from SIP 0, the "
            "chip has 8");
}

// The fan-out baselines' TCM and first-send check (decode_run.cc CheckBaselineTcm): each case
// is refused before the run naming its field (it used to overflow the scratch arena or
// deadlock at run time), and the largest value that passes runs to completion.
TEST(DecodeBaselineRun, RefusesWhatOverflowsTcmOrTheQueueAndRunsTheLargestThatFits) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  const struct {
    pb::Variant variant;
    uint32_t h_q, c, users;
    uint64_t s;
    uint32_t too_big, fits;  // d
    const char* message;
  } cases[] = {
      // m, l and O of d = 65536 are 262152 B, the IPCQ queue 262144 B: every rank waited on
      // its first send.
      {pb::BASELINE_FANOUT, 8, 1, 1, 1000, 65536, 65534,
       "d: BASELINE_FANOUT sends each rank's m, l and O (262152 B at d = 65536) to its ring "
       "successor before it receives; they exceed the 262144 B queue, so every rank would wait "
       "on its send; at most d = 65534 fits"},
      // Four requests share a PE's 1 MiB scratch: a fan-out step's received O and O·sb.
      {pb::BASELINE_FANOUT, 8, 1, 4, 1000, 32768, 32704,
       "users: 4 request(s) = 4 BASELINE_FANOUT instances on pe 0 (sip0.cube0.pe0) need "
       "262528 B of TCM scratch each; the arena gives each 262081 B"},
      // G = 8 instances (one per query row) on each PE.
      {pb::BASELINE_FANOUT_GROUP, 8, 2, 1, 1000, 16384, 16320,
       "h_q: 1 request(s) x G = 8 = 8 BASELINE_FANOUT_GROUP instances on pe 0 (sip0.cube0.pe0) "
       "need 131456 B of TCM scratch each; the arena gives each 131009 B"},
  };
  for (const auto& c : cases) {
    pb::Workload w;
    w.set_kernel(pb::DECODE);
    w.set_variant(c.variant);
    w.set_h_q(c.h_q);
    w.set_h_kv(1);
    w.set_p(4);
    if (c.c > 1) w.set_c(c.c);
    w.set_users(c.users);
    w.set_s(c.s);
    w.set_d(c.too_big);
    EXPECT_EQ(DecodeConfigOf(*chip, w).status().message(), c.message);
    w.set_d(c.fits);
    absl::StatusOr<LaunchResult> result = RunWorkload(*chip, w, LaunchOptions{});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result->runtime_status.ok()) << result->runtime_status;
  }
  // The one-shot block's scores: 500000 keys per rank.
  pb::Workload w = Small(pb::BASELINE_FANOUT);
  w.set_h_kv(1);
  w.set_s(2000000);
  EXPECT_EQ(DecodeConfigOf(*chip, w).status().message(),
            "s: one BASELINE_FANOUT instance on pe 0 (sip0.cube0.pe0) needs 5000000 B of the TCM "
            "scratch arena (the block's scores, a fan-out step's received m, l, O and merge "
            "temporaries) at d = 64, 500000 keys per rank; it holds 1048513 B");
}

}  // namespace
}  // namespace ahbm::launch
