// Reply ahead (PeScheduler::ReplyAhead, actors/README.md "Declared shortcuts") equals the message
// path it shortcuts: the scheduler reads its PE CPU's state (CpuProbe::QuietUntil) to answer a
// blocking command at once, delayed to its end, instead of waking at the end to send its
// EngineWork and Completion. With ChipSimOptions::reply_ahead off it never does. Every golden
// case but the full-chip ones (one full-chip decode instead) and random workloads run both ways:
// the op logs, the reports but their `events` and the launch facts must be identical, and reply
// ahead may only save events.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"
#include "proto/workload.pb.h"
#include "tests/golden_cases.h"
#include "tests/random_diff.h"
#include "tests/random_workload.h"
#include "topology/loader.h"

namespace ahbm::golden {
namespace {

using google::protobuf::util::MessageDifferencer;

// Random workloads run both ways (the random differential test's generator, timing mode).
constexpr uint64_t kRandomSeeds = 200;

// Expects `with` (reply ahead) and `without` equal but their event counts, with(events) <=
// without(events); returns the events saved.
uint64_t ExpectSameButEvents(const std::string& name, const Outcome& with, const Outcome& without) {
  EXPECT_EQ(with.extra, without.extra) << name;
  EXPECT_EQ(with.records.size(), without.records.size()) << name;
  for (size_t i = 0; i < with.records.size() && i < without.records.size(); ++i) {
    if (!MessageDifferencer::Equals(with.records[i], without.records[i])) {
      ADD_FAILURE() << name << ": op log record " << i
                    << " differs:\n  with reply ahead:    " << with.records[i].ShortDebugString()
                    << "\n  without reply ahead: " << without.records[i].ShortDebugString();
      break;
    }
  }
  pb::Report a = with.report, b = without.report;
  EXPECT_LE(a.events(), b.events()) << name;
  const uint64_t saved = a.events() <= b.events() ? b.events() - a.events() : 0;
  a.clear_events();
  b.clear_events();
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(a, b)) << name << ": reports differ beyond events:\n" << diff;
  return saved;
}

class ReplyAheadGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReplyAheadGoldenTest, SameResultsFewerOrEqualEvents) {
  const Case& c = GetParam();
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(c.topology);
  ASSERT_TRUE(chip.ok()) << chip.status();
  RunKnobs off;
  off.reply_ahead = false;
  absl::StatusOr<Outcome> with = c.run(*chip, RunKnobs());
  absl::StatusOr<Outcome> without = c.run(*chip, off);
  ASSERT_TRUE(with.ok()) << c.name << ": " << with.status();
  ASSERT_TRUE(without.ok()) << c.name << ": " << without.status();
  ExpectSameButEvents(c.name, *with, *without);
}

INSTANTIATE_TEST_SUITE_P(Cases, ReplyAheadGoldenTest, ::testing::ValuesIn(KnobCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(ReplyAheadRandomTest, SameResultsFewerOrEqualEvents) {
  const testing::TestChips chips = testing::LoadTestChips();
  uint64_t saved = 0, ran = 0;
  for (uint64_t seed = 0; seed < kRandomSeeds; ++seed) {
    const testing::RandomCase rc = testing::RandomWorkload(seed);
    const pb::Chip& chip = rc.bank_hbm ? chips.bank : chips.fifo;
    const std::string name =
        absl::StrCat("seed ", seed, " (ahbm run ", testing::RunFlags(rc.workload), ")");
    RunKnobs off;
    off.reply_ahead = false;
    absl::StatusOr<Outcome> with = LaunchOutcome(chip, rc.workload, RunKnobs());
    absl::StatusOr<Outcome> without = LaunchOutcome(chip, rc.workload, off);
    ASSERT_EQ(with.ok(), without.ok()) << name;
    if (!with.ok()) {  // a refusal (random_diff_test holds it to a capacity one): the same
      EXPECT_EQ(with.status(), without.status()) << name;
      continue;
    }
    ++ran;
    saved += ExpectSameButEvents(name, *with, *without);
  }
  EXPECT_GT(ran, kRandomSeeds / 2);
  EXPECT_GT(saved, 0u);  // the switch does something
}

}  // namespace
}  // namespace ahbm::golden
