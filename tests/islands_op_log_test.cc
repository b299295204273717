// A kernel run keeps the same op log simulated as CUBE islands or as one heap (actors/README.md
// "Observation"): every record byte for byte, the report (events included) and the launch facts.
// It holds because records go back into the single heap's order (OpLog event order) and message
// ids are drawn by each sending PE alone (kernels::MessageId) — with the chip-wide counter
// drawn in handler order that this replaced, the logs differed in message ids. Every golden case
// that splits into islands and random workloads.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"
#include "tests/golden_cases.h"
#include "tests/random_diff.h"
#include "tests/random_workload.h"
#include "topology/loader.h"

namespace ahbm::golden {
namespace {

constexpr uint64_t kRandomSeeds = 150;

void ExpectSameLog(const std::string& name, const Outcome& islands, const Outcome& one_heap) {
  EXPECT_EQ(one_heap.islands, 1u) << name;
  EXPECT_EQ(islands.extra, one_heap.extra) << name;
  ASSERT_EQ(islands.records.size(), one_heap.records.size()) << name;
  for (size_t i = 0; i < islands.records.size(); ++i) {
    if (islands.records[i].SerializeAsString() != one_heap.records[i].SerializeAsString()) {
      ADD_FAILURE() << name << ": op log record " << i << " differs:\n  islands:  "
                    << islands.records[i].ShortDebugString()
                    << "\n  one heap: " << one_heap.records[i].ShortDebugString();
      break;
    }
  }
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(islands.report, one_heap.report))
      << name << ": reports differ:\n" << diff;
}

// Every golden case; those that run as one island have nothing to compare and are only counted.
TEST(IslandsOpLogGoldenTest, SameOpLogAsOneHeap) {
  uint64_t split_runs = 0;
  for (const Case& c : AllCases()) {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(c.topology);
    ASSERT_TRUE(chip.ok()) << chip.status();
    absl::StatusOr<Outcome> split = c.run(*chip, RunKnobs());
    ASSERT_TRUE(split.ok()) << c.name << ": " << split.status();
    if (split->islands < 2) continue;
    ++split_runs;
    RunKnobs one_heap;
    one_heap.islands = false;
    absl::StatusOr<Outcome> one = c.run(*chip, one_heap);
    ASSERT_TRUE(one.ok()) << c.name << ": " << one.status();
    ExpectSameLog(c.name, *split, *one);
  }
  EXPECT_GT(split_runs, 40u);  // 44 today: decode, prefill, the full-chip cases
}

TEST(IslandsOpLogRandomTest, SameOpLogAsOneHeap) {
  const testing::TestChips chips = testing::LoadTestChips();
  uint64_t split_runs = 0;
  for (uint64_t seed = 0; seed < kRandomSeeds; ++seed) {
    const testing::RandomCase rc = testing::RandomWorkload(seed);
    const pb::Chip& chip = rc.bank_hbm ? chips.bank : chips.fifo;
    const std::string name =
        absl::StrCat("seed ", seed, " (ahbm run ", testing::RunFlags(rc.workload), ")");
    RunKnobs one_heap;
    one_heap.islands = false;
    absl::StatusOr<Outcome> split = LaunchOutcome(chip, rc.workload, RunKnobs());
    absl::StatusOr<Outcome> one = LaunchOutcome(chip, rc.workload, one_heap);
    ASSERT_EQ(split.ok(), one.ok()) << name;
    if (!split.ok()) {
      EXPECT_EQ(split.status(), one.status()) << name;
      continue;
    }
    if (split->islands < 2) continue;
    ++split_runs;
    ExpectSameLog(name, *split, *one);
  }
  EXPECT_GT(split_runs, 10u);  // the generator makes multi-group runs
}

}  // namespace
}  // namespace ahbm::golden
