#include "milestone/timeline.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "milestone/test_files.h"
#include "kernels/launch/launch.h"
#include "milestone/study.h"
#include "sweep/job_pool.h"
#include "topology/loader.h"

namespace ahbm::milestone {
namespace {

namespace fs = std::filesystem;


double Number(const std::string& text) {
  double value = 0;
  EXPECT_TRUE(absl::SimpleAtod(text, &value)) << text;
  return value;
}

// The three timeline runs, simulated here on the small chip (8 KV heads on 8 CUBEs, one PE
// each) with their op logs: what the milestone runs in its job pool.
class TimelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
    ASSERT_TRUE(chip.ok()) << chip.status();
    runs_ = new std::vector<TimelineRun>;
    for (const TimelineJob& job : TimelineJobs(*chip)) {
      ASSERT_TRUE(job.job.options.keep_op_log);
      absl::StatusOr<launch::LaunchResult> result =
          launch::RunWorkload(job.job.chip, job.job.workload, job.job.options);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_TRUE(result->runtime_status.ok()) << result->runtime_status;
      runs_->push_back({job.label, std::move(result->op_log), job.pe_name, job.pe});
    }
  }
  static void TearDownTestSuite() { delete runs_; }
  static std::vector<TimelineRun>* runs_;
};
std::vector<TimelineRun>* TimelineTest::runs_ = nullptr;

TEST_F(TimelineTest, JobsAreOpt1Opt3Opt2) {
  ASSERT_EQ(runs_->size(), 3u);
  EXPECT_EQ((*runs_)[0].label, "opt1");
  EXPECT_EQ((*runs_)[1].label, "opt3");
  EXPECT_EQ((*runs_)[2].label, "opt2");
}

TEST_F(TimelineTest, CsvRowsAreOnePesEnginesInOrderInsideTheWindow) {
  const std::string dir = TestDir("rows");
  ASSERT_TRUE(TimelineSvg(*runs_, dir + "/timeline.csv", dir + "/timeline.svg").ok());
  absl::StatusOr<CsvTable> table = ParseCsv(Read(dir + "/timeline.csv"));
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->header, (std::vector<std::string>{"run", "engine", "start_ns", "end_ns"}));
  ASSERT_FALSE(table->rows.empty());

  const std::map<std::string, int> run_order = {{"opt1", 0}, {"opt3", 1}, {"opt2", 2}};
  const std::map<std::string, int> engine_order = {
      {"CPU stall", 0}, {"DMA", 1}, {"GEMM", 2}, {"MATH", 3}};
  std::set<std::pair<std::string, std::string>> seen;
  std::tuple<int, int, double, double> last{-1, -1, 0, 0};
  double window = 0;
  for (const std::vector<std::string>& row : table->rows) {
    ASSERT_TRUE(run_order.count(row[0])) << row[0];
    ASSERT_TRUE(engine_order.count(row[1])) << row[1];
    const double start = Number(row[2]);
    const double end = Number(row[3]);
    EXPECT_LE(0, start);
    EXPECT_LE(start, end);
    const std::tuple<int, int, double, double> key{run_order.at(row[0]), engine_order.at(row[1]),
                                                   start, end};
    EXPECT_LE(last, key) << "rows by run, engine, start, end";
    last = key;
    seen.insert({row[0], row[1]});
    window = std::max(window, end);
  }
  // Every run has its DMA, GEMM and MATH rows (the CPU stalls too: opt1 waits on each Sj).
  for (const char* run : {"opt1", "opt3", "opt2"}) {
    for (const char* engine : {"DMA", "GEMM", "MATH"}) {
      EXPECT_TRUE(seen.count({run, engine})) << run << " " << engine;
    }
  }
  EXPECT_TRUE(seen.count({"opt1", "CPU stall"}));
  // The window is the latest end; the script's x range is that window.
  EXPECT_TRUE(absl::StrContains(Read(dir + "/timeline.gp"),
                                absl::StrFormat("set xrange [0:%.3f]", window)));
  const std::string svg = Read(dir + "/timeline.svg");
  EXPECT_TRUE(absl::StrContains(svg, "opt1 GEMM"));
  EXPECT_TRUE(absl::StrContains(svg, "opt2 MATH"));
  EXPECT_TRUE(absl::StrContains(svg, "time (ns)"));
}

// The opt1 bubble (ADR §5.6): the GEMM idles while the CPU waits on Sj and softmax runs, so
// its busy share of the run is the lowest of the three; opt3 and opt2 fill it.
TEST_F(TimelineTest, Opt1LeavesTheGemmIdleLongest) {
  const std::string dir = TestDir("bubble");
  ASSERT_TRUE(TimelineSvg(*runs_, dir + "/timeline.csv", dir + "/timeline.svg").ok());
  absl::StatusOr<CsvTable> table = ParseCsv(Read(dir + "/timeline.csv"));
  ASSERT_TRUE(table.ok());
  std::map<std::string, double> gemm_busy, run_end;
  for (const std::vector<std::string>& row : table->rows) {
    run_end[row[0]] = std::max(run_end[row[0]], Number(row[3]));
    if (row[1] == "GEMM") gemm_busy[row[0]] += Number(row[3]) - Number(row[2]);
  }
  const double opt1 = gemm_busy["opt1"] / run_end["opt1"];
  EXPECT_LT(opt1, gemm_busy["opt3"] / run_end["opt3"]);
  EXPECT_LT(opt1, gemm_busy["opt2"] / run_end["opt2"]);
  EXPECT_LT(run_end["opt2"], run_end["opt1"]);
}

TEST_F(TimelineTest, SameRunsSameFiles) {
  const std::string a = TestDir("same_a");
  const std::string b = TestDir("same_b");
  ASSERT_TRUE(TimelineSvg(*runs_, a + "/t.csv", a + "/t.svg").ok());
  ASSERT_TRUE(TimelineSvg(*runs_, b + "/t.csv", b + "/t.svg").ok());
  for (const char* file : {"/t.csv", "/t.dat", "/t.gp", "/t.svg"}) {
    EXPECT_EQ(Read(a + file), Read(b + file)) << file;
  }
}

// The job pool's path: the same op logs come back through pb::JobResult.
TEST_F(TimelineTest, RunsFromTheJobPool) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok());
  const std::vector<TimelineJob> jobs = TimelineJobs(*chip);
  std::vector<sweep::Job> pool_jobs;
  for (const TimelineJob& job : jobs) pool_jobs.push_back(job.job);
  std::vector<pb::JobResult> results = sweep::JobPool(/*workers=*/1).Run(pool_jobs);
  absl::StatusOr<std::vector<TimelineRun>> runs = TimelineRunsFrom(jobs, results);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), runs_->size());
  for (size_t i = 0; i < runs->size(); ++i) {
    EXPECT_EQ((*runs)[i].label, (*runs_)[i].label);
    ASSERT_EQ((*runs)[i].op_log.size(), (*runs_)[i].op_log.size());
    for (size_t r = 0; r < (*runs)[i].op_log.size(); ++r) {
      ASSERT_EQ((*runs)[i].op_log[r].SerializeAsString(), (*runs_)[i].op_log[r].SerializeAsString())
          << (*runs)[i].label << " record " << r;
    }
  }
  results[1].set_status_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
  results[1].set_status_message("s: too long");
  EXPECT_EQ(TimelineRunsFrom(jobs, results).status().message(), "timeline run opt3: s: too long");
}

TEST_F(TimelineTest, RunWithoutThePesOpsIsRefused) {
  std::vector<TimelineRun> runs = {(*runs_)[0]};
  runs[0].pe_name = "sip9.cube0.pe0";
  const std::string dir = TestDir("refused");
  EXPECT_EQ(TimelineSvg(runs, dir + "/t.csv", dir + "/t.svg").message(),
            "timeline run opt1: no DMA, GEMM or MATH op on sip9.cube0.pe0");
  EXPECT_EQ(TimelineSvg({}, dir + "/t.csv", dir + "/t.svg").message(), "timeline: no run to draw");
}

}  // namespace
}  // namespace ahbm::milestone
