#include "milestone/numerics.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kernels/launch/launch.h"
#include "topology/loader.h"

namespace ahbm::milestone {
namespace {

pb::Chip Small() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

// G = 4 as on the small chip's ring (C = G = 4 CUBEs of 4 PEs); microseconds per run.
constexpr NumericShape kTiny = {.h_q = 8, .h_kv = 2, .d = 64, .decode_s = 512, .prefill_s = 64};

TEST(NumericsTest, EveryVariantMatchesTheReferenceOnTheSmallChip) {
  const absl::StatusOr<std::vector<NumericCheck>> checks = RunNumericChecks(Small(), 2, kTiny);
  ASSERT_TRUE(checks.ok()) << checks.status();
  std::vector<std::string> names;
  for (const NumericCheck& c : *checks) {
    names.push_back(c.kernel + " " + c.variant);
    EXPECT_TRUE(c.ok) << c.kernel << " " << c.variant << ": " << c.max_abs_error << " > "
                      << c.tolerance << " " << c.note;
    EXPECT_TRUE(c.note.empty()) << c.note;
    // A kernel's bf16 output is never exact, so a zero error would mean nothing was compared.
    EXPECT_GT(c.max_abs_error, 0) << c.variant;
    // V is drawn from uniform(-2, 2) (kernels/attention/decode_launch.cc): 2e-2 x max |V| ~ 0.04.
    EXPECT_NEAR(c.tolerance, 0.04, 1e-3) << c.variant;
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "decode opt1", "decode opt3", "decode opt2", "decode opt2_lookahead",
                       "decode baseline_dot", "decode baseline_fanout",
                       "decode baseline_fanout_group", "decode baseline_rev1_tree",
                       "decode short_context", "decode auto", "prefill flash", "prefill ring",
                       "prefill short_context", "prefill baseline_dot", "prefill baseline_fanout",
                       "prefill auto"}));
  EXPECT_EQ((*checks)[0].shape, "H_q 8, H_kv 2, d 64, S 512");
  EXPECT_EQ((*checks)[6].shape, "H_q 8, H_kv 2, d 64, S 512, C 2, P 4");
  EXPECT_EQ((*checks)[10].shape, "H_q 8, H_kv 2, d 64, S 64");

  // One worker gives the same figures, bit for bit; the table fits 100 columns.
  const absl::StatusOr<std::vector<NumericCheck>> serial = RunNumericChecks(Small(), 1, kTiny);
  ASSERT_TRUE(serial.ok()) << serial.status();
  for (size_t i = 0; i < checks->size(); ++i) {
    EXPECT_EQ((*serial)[i].max_abs_error, (*checks)[i].max_abs_error) << i;
  }
  const std::string table = FormatNumericChecks(*checks);
  EXPECT_EQ(table, FormatNumericChecks(*serial));
  for (absl::string_view line : absl::StrSplit(table, '\n')) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_NE(table.find("decode   opt3 "), std::string::npos) << table;
  EXPECT_EQ(table.find("FAIL"), std::string::npos) << table;
}

// A real run's inputs and outputs, to spoil.
launch::LaunchResult Opt3Run() {
  std::vector<pb::Workload> w = NumericWorkloads(kTiny);
  absl::StatusOr<launch::LaunchResult> run = launch::RunWorkload(Small(), w[1], {});
  EXPECT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->runtime_status.ok()) << run->runtime_status;
  return *run;
}

TEST(NumericsTest, OnePerturbedElementFails) {
  launch::LaunchResult run = Opt3Run();
  const OutputError clean = CompareWithReference(run.inputs, run.outputs);
  EXPECT_TRUE(clean.ok()) << clean.max_abs_error;
  ASSERT_EQ(run.outputs.count("o"), 1u);
  run.outputs["o"].data[77] += 0.1f;  // 2.5 x the tolerance ~0.04
  const OutputError bad = CompareWithReference(run.inputs, run.outputs);
  EXPECT_FALSE(bad.ok());
  EXPECT_GT(bad.max_abs_error, 0.09);
  EXPECT_LT(bad.max_abs_error, 0.11);
  EXPECT_TRUE(bad.note.empty()) << bad.note;
}

TEST(NumericsTest, NaNFails) {
  launch::LaunchResult run = Opt3Run();
  run.outputs["o"].data[3] = std::numeric_limits<float>::quiet_NaN();
  const OutputError bad = CompareWithReference(run.inputs, run.outputs);
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(std::isinf(bad.max_abs_error));
}

TEST(NumericsTest, AMissingOrShortOutputFails) {
  launch::LaunchResult run = Opt3Run();
  launch::LaunchResult short_run = run;
  short_run.outputs["o"].data.pop_back();
  EXPECT_TRUE(std::isinf(CompareWithReference(short_run.inputs, short_run.outputs).max_abs_error));
  run.outputs.clear();
  const OutputError none = CompareWithReference(run.inputs, run.outputs);
  EXPECT_FALSE(none.ok());
  EXPECT_EQ(none.note, "0 outputs for 1 requests");
}

TEST(NumericsTest, ARefusedShapeNamesTheVariant) {
  NumericShape odd = kTiny;
  odd.h_kv = 3;  // 8 query heads do not split over 3 KV heads
  const absl::StatusOr<std::vector<NumericCheck>> checks = RunNumericChecks(Small(), 1, odd);
  ASSERT_FALSE(checks.ok());
  EXPECT_NE(checks.status().message().find("(numerical check, decode opt1)"), std::string::npos)
      << checks.status();
}

TEST(NumericsTest, AFailedCheckShowsItsNote) {
  const std::string table = FormatNumericChecks(
      {{"decode", "opt1", "H_q 8, H_kv 2, d 64, S 512", std::numeric_limits<double>::infinity(),
        0, false, "job 0: killed by signal 9 (Killed)"}});
  EXPECT_NE(table.find("inf"), std::string::npos) << table;
  EXPECT_NE(table.find("FAIL\n  job 0: killed by signal 9 (Killed)\n"), std::string::npos)
      << table;
}

}  // namespace
}  // namespace ahbm::milestone
