// The op log only observes (actors/README.md "Observation"): keeping one changes nothing the
// run simulates. Every golden case but the full-chip ones (the first full-chip decode instead)
// and random workloads run with an op log and without: the reports (events included) and the
// launch facts must be identical; so must one-group runs of every golden case. Before the PE
// scheduler carried a DMA command's record on its Completion, an op log cost a kernel run the
// reply-ahead shortcut of its blocking loads.
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "tests/golden_cases.h"
#include "tests/random_diff.h"
#include "tests/random_workload.h"
#include "topology/loader.h"

namespace ahbm::golden {
namespace {

constexpr uint64_t kRandomSeeds = 150;

void ExpectSameRun(const std::string& name, const Outcome& logged, const Outcome& unlogged) {
  EXPECT_EQ(logged.extra, unlogged.extra) << name;
  EXPECT_GT(logged.records.size(), 1u) << name << ": the op log was not kept";
  EXPECT_EQ(unlogged.records.size(), 1u) << name << ": only the header without an op log";
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(logged.report, unlogged.report))
      << name << ": the op log changed the report:\n" << diff;
}

class OpLogObservesGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(OpLogObservesGoldenTest, SameReportWithAndWithoutAnOpLog) {
  const Case& c = GetParam();
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(c.topology);
  ASSERT_TRUE(chip.ok()) << chip.status();
  RunKnobs unlogged;
  unlogged.keep_op_log = false;
  absl::StatusOr<Outcome> with = c.run(*chip, RunKnobs());
  absl::StatusOr<Outcome> without = c.run(*chip, unlogged);
  ASSERT_TRUE(with.ok()) << c.name << ": " << with.status();
  ASSERT_TRUE(without.ok()) << c.name << ": " << without.status();
  ExpectSameRun(c.name, *with, *without);
}

INSTANTIATE_TEST_SUITE_P(Cases, OpLogObservesGoldenTest, ::testing::ValuesIn(KnobCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// One-group runs (launch.h one_group) too: the op log observes the simulated group (its
// header lists those CUBEs) and the report is the same without it. Every case that runs one
// group is counted.
TEST(OpLogObservesOneGroupTest, SameReportWithAndWithoutAnOpLog) {
  uint32_t one_group = 0;
  for (const Case& c : KnobCases()) {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(c.topology);
    ASSERT_TRUE(chip.ok()) << chip.status();
    RunKnobs logged, unlogged;
    logged.one_group = unlogged.one_group = true;
    unlogged.keep_op_log = false;
    absl::StatusOr<Outcome> with = c.run(*chip, logged);
    absl::StatusOr<Outcome> without = c.run(*chip, unlogged);
    ASSERT_TRUE(with.ok()) << c.name << ": " << with.status();
    ASSERT_TRUE(without.ok()) << c.name << ": " << without.status();
    ExpectSameRun(c.name, *with, *without);
    EXPECT_EQ(with->group_scale, without->group_scale) << c.name;
    if (with->group_scale == 1) continue;
    ++one_group;
    ASSERT_TRUE(with->records[0].has_header());
    EXPECT_GT(with->records[0].header().cubes_size(), 0) << c.name << ": the CUBEs observed";
  }
  std::printf("%u cases ran one group\n", one_group);
  EXPECT_GT(one_group, 30u);  // 33 at this writing
}

TEST(OpLogObservesRandomTest, SameReportWithAndWithoutAnOpLog) {
  const testing::TestChips chips = testing::LoadTestChips();
  uint64_t ran = 0;
  for (uint64_t seed = 0; seed < kRandomSeeds; ++seed) {
    const testing::RandomCase rc = testing::RandomWorkload(seed);
    const pb::Chip& chip = rc.bank_hbm ? chips.bank : chips.fifo;
    const std::string name =
        absl::StrCat("seed ", seed, " (ahbm run ", testing::RunFlags(rc.workload), ")");
    RunKnobs unlogged;
    unlogged.keep_op_log = false;
    absl::StatusOr<Outcome> with = LaunchOutcome(chip, rc.workload, RunKnobs());
    absl::StatusOr<Outcome> without = LaunchOutcome(chip, rc.workload, unlogged);
    ASSERT_EQ(with.ok(), without.ok()) << name;
    if (!with.ok()) {
      EXPECT_EQ(with.status(), without.status()) << name;
      continue;
    }
    ++ran;
    ExpectSameRun(name, *with, *without);
  }
  EXPECT_GT(ran, kRandomSeeds / 2);
}

}  // namespace
}  // namespace ahbm::golden
