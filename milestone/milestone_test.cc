#include "milestone/milestone.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/launch/launch.h"
#include "topology/loader.h"

namespace ahbm::milestone {
namespace {

using ::testing::HasSubstr;

// Fields of a CSV line (RFC 4180 quotes).
size_t CsvFields(const std::string& line) {
  size_t fields = 1;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) ++fields;
  }
  return fields;
}

// The fields of a CSV line (RFC 4180 quotes removed).
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

TEST(BuildJobs, PanelsVariantsAndTheMix) {
  absl::StatusOr<std::vector<Job>> jobs = BuildJobs(Options{});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  // decode: 9 variants single-user, 8 multi-user (no baseline_fanout_group); prefill: 6 each.
  ASSERT_EQ(jobs->size(), 9u + 8u + 6u + 6u);
  EXPECT_EQ(jobs->front().panel, "single_user_decode");
  EXPECT_EQ(jobs->front().workload.s(), 131072u);
  EXPECT_EQ(jobs->front().workload.h_q(), 64u);
  EXPECT_EQ(jobs->back().panel, "multi_user_prefill");
  EXPECT_EQ(jobs->back().workload.variant(), pb::AUTO);
  EXPECT_THAT(jobs->back().workload.request_lengths(),
              ::testing::ElementsAre(8192u, 4096u, 2048u, 1024u));
  const Job& multi_decode = (*jobs)[9];
  EXPECT_EQ(multi_decode.panel, "multi_user_decode");
  EXPECT_THAT(multi_decode.workload.request_lengths(),
              ::testing::ElementsAre(131072u, 65536u, 32768u, 16384u));
  for (const Job& job : *jobs) {
    EXPECT_FALSE(job.panel.starts_with("multi") &&
                 job.workload.variant() == pb::BASELINE_FANOUT_GROUP);
  }
}

TEST(BuildJobs, MixFloorAndQuick) {
  Options options;
  options.decode_context = 4096;
  options.users = 4;
  options.panels = {"multi_user_decode"};
  absl::StatusOr<std::vector<Job>> jobs = BuildJobs(options);
  ASSERT_TRUE(jobs.ok());
  EXPECT_THAT(jobs->front().workload.request_lengths(),
              ::testing::ElementsAre(4096u, 2048u, 1024u, 1024u));
  options.quick = true;
  options.panels = {};
  jobs = BuildJobs(options);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 8u + 8u + 6u + 6u);
  EXPECT_EQ(jobs->front().workload.s(), 4096u);
}

TEST(BuildJobs, VariantsKeepEachPanelsOwn) {
  Options options;
  options.variants = {"ring", "opt3"};
  absl::StatusOr<std::vector<Job>> jobs = BuildJobs(options);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 4u);
  EXPECT_EQ((*jobs)[0].panel, "single_user_decode");
  EXPECT_EQ((*jobs)[0].workload.variant(), pb::OPT3);
  EXPECT_EQ((*jobs)[1].panel, "multi_user_decode");
  EXPECT_EQ((*jobs)[2].workload.variant(), pb::RING);
  EXPECT_EQ((*jobs)[3].panel, "multi_user_prefill");
}

TEST(BuildJobs, Refusals) {
  Options options;
  options.decode_context = 0;
  EXPECT_EQ(BuildJobs(options).status().message(), "--decode_context: must be > 0 (got 0)");
  options = Options{};
  options.users = 1;
  EXPECT_THAT(BuildJobs(options).status().message(), HasSubstr("--users: "));
  options = Options{};
  options.panels = {"single_user_decode", "nope"};
  EXPECT_THAT(BuildJobs(options).status().message(), HasSubstr("--panels: unknown panel 'nope'"));
  options.panels = {};
  options.variants = {"opt3", "nope"};
  EXPECT_THAT(BuildJobs(options).status().message(),
              HasSubstr("--variants: unknown variant 'nope'; one of opt1, opt3"));
  options.variants = {"opt3"};
  options.panels = {"single_user_prefill"};
  EXPECT_THAT(BuildJobs(options).status().message(), HasSubstr("--variants: none of them runs"));
}

// A small panel by hand on the small chip: ratios, table width, CSV and JSON shape.
TEST(RunJobs, RatiosTableAndFiles) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  std::vector<Job> jobs;
  for (pb::Variant v : {pb::OPT3, pb::BASELINE_DOT, pb::BASELINE_REV1_TREE, pb::AUTO}) {
    pb::Workload w;
    w.set_kernel(pb::DECODE);
    w.set_variant(v);
    w.set_h_q(kHq);
    w.set_h_kv(kHkv);
    w.set_d(kD);
    w.set_s(4096);
    jobs.push_back({"single_user_decode", w});
  }
  std::vector<size_t> seen;
  absl::StatusOr<std::vector<Row>> rows =
      RunJobs(*chip, jobs, [&](const Job&, size_t done, size_t n, uint64_t) {
        EXPECT_EQ(n, 4u);
        seen.push_back(done);
      }, /*workers=*/2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(seen, ::testing::ElementsAre(1, 2, 3, 4));
  ASSERT_EQ(rows->size(), 4u);
  // Rows in job order whatever the worker count: one worker gives the same reports.
  absl::StatusOr<std::vector<Row>> one = RunJobs(*chip, jobs, nullptr, /*workers=*/1);
  ASSERT_TRUE(one.ok()) << one.status();
  for (size_t i = 0; i < rows->size(); ++i) {
    EXPECT_EQ((*one)[i].variant, (*rows)[i].variant);
    EXPECT_EQ((*one)[i].report.SerializeAsString(), (*rows)[i].report.SerializeAsString()) << i;
  }
  const uint64_t best = std::min((*rows)[1].report.latency_ps(), (*rows)[2].report.latency_ps());
  for (const Row& r : *rows) {
    EXPECT_DOUBLE_EQ(r.best_baseline_ratio, static_cast<double>(r.report.latency_ps()) / best);
    EXPECT_EQ(r.kv_min_bytes, 2u * 8 * 4096 * 128 * 2);
    EXPECT_EQ(r.min_flops, 4u * 64 * 4096 * 128);
    EXPECT_GT(r.ideal_ps, 0u);
    EXPECT_GE(r.ideal_ratio, 1.0) << r.variant;
  }
  const std::string table = FormatTables(*rows);
  for (absl::string_view line : absl::StrSplit(table, '\n')) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_THAT(table, HasSubstr("pick: AUTO -> OPT3"));

  const ToolInfo tool{"0.1", "abc"};
  const std::vector<std::string> csv = absl::StrSplit(ToCsv(*chip, *rows, tool), '\n');
  ASSERT_EQ(csv.size(), 6u);  // header, 4 rows, ""
  const size_t columns = CsvFields(csv[0]);
  EXPECT_THAT(csv[0], HasSubstr("latency_ps,"));
  EXPECT_THAT(csv[0], HasSubstr(",w_request_lengths,"));
  EXPECT_THAT(csv[0], HasSubstr(",topology_digest,workload_digest"));
  for (size_t i = 1; i < 5; ++i) {
    EXPECT_EQ(CsvFields(csv[i]), columns) << csv[i];
  }
  const std::string json = ToJson(*chip, *rows, tool);
  EXPECT_THAT(json,
              HasSubstr(absl::StrCat("\"latency_ps\": ", (*rows)[0].report.latency_ps(), ",")));
  EXPECT_THAT(json, HasSubstr("\"w_s\": 4096,"));
  EXPECT_THAT(json, HasSubstr("\"tool_commit\": \"abc\""));
}

// The multi-user panels on the small chip, decode under both of its issue-cost profiles: the
// rows' figures, the requests' order for the documented mix (request r: S >> r), the table and
// the CSV / JSON numbers.
TEST(RunJobs, MultiUserFiguresAndProfiles) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_THAT(IssueCostProfiles(*chip), ::testing::ElementsAre("zero", "realistic"));
  Options options;
  options.decode_context = 4096;
  options.prefill_context = 512;
  options.users = 3;
  options.panels = {"multi_user_decode", "multi_user_prefill"};
  options.issue_cost_profiles = IssueCostProfiles(*chip);
  absl::StatusOr<std::vector<Job>> jobs = BuildJobs(options);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u * 8 + 6);  // decode twice, without baseline_fanout_group
  EXPECT_FALSE((*jobs)[0].workload.has_issue_cost_profile());
  EXPECT_EQ((*jobs)[8].workload.issue_cost_profile(), "realistic");
  // The small chip hosts not every baseline at H_q 64 (baseline_fanout needs a CUBE per head).
  std::erase_if(*jobs,
                [&](const Job& j) { return !launch::ValidateWorkload(*chip, j.workload).ok(); });
  ASSERT_GE(jobs->size(), 2u * 6 + 4);
  absl::StatusOr<std::vector<Row>> rows = RunJobs(*chip, *jobs, nullptr, /*workers=*/2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  for (const Row& r : *rows) {
    SCOPED_TRACE(absl::StrCat(r.panel, " ", r.variant, " ", r.report.issue_cost_profile()));
    const auto& req = r.report.request_latency_ps();
    ASSERT_EQ(req.size(), 3);
    const RequestSpread spread = Spread(r.report);
    EXPECT_EQ(spread.max, r.report.latency_ps());
    EXPECT_LE(spread.min, spread.median);
    EXPECT_LE(spread.median, spread.max);
    if (r.panel == "multi_user_decode") {
      // Measured here (H_q 64, H_kv 8: one CUBE per KV head): opt2 and opt2_lookahead keep the
      // PE CPUs busy, so their request-id priority decides and the longest request (0) ends
      // first; the others end the shortest request first (kernels/launch/report_figures_test
      // shows another shape where the id order wins for them too).
      if (r.variant.starts_with("opt2")) {
        EXPECT_EQ(spread.min, req[0]);
      } else {
        EXPECT_TRUE(std::is_sorted(req.rbegin(), req.rend()));
        EXPECT_EQ(spread.min, req[2]);
      }
      if (r.variant == "opt3") {
        EXPECT_EQ(r.reduce_rounds, r.level2_rounds + r.level1_rounds);
      }
      EXPECT_EQ(r.ring_rotations, 0u);
    } else {
      EXPECT_EQ(req[0], r.report.latency_ps());  // prefill: the longest prompt ends last
      EXPECT_EQ(r.level2_rounds + r.level1_rounds, 0u);
      if (r.variant == "ring") {
        EXPECT_GT(r.ring_rotations, 0u);
      }
    }
  }
  // Each decode variant under both profiles; the realistic one costs issue time.
  size_t pairs = 0;
  for (const Row& zero : *rows) {
    if (zero.panel != "multi_user_decode" || zero.report.issue_cost_profile() != "zero") continue;
    for (const Row& realistic : *rows) {
      if (realistic.panel != zero.panel || realistic.variant != zero.variant ||
          realistic.report.issue_cost_profile() != "realistic") {
        continue;
      }
      ++pairs;
      EXPECT_GT(realistic.report.latency_ps(), zero.report.latency_ps()) << zero.variant;
    }
  }
  EXPECT_GE(pairs, 6u);
  const std::string table = FormatTables(*rows);
  for (absl::string_view line : absl::StrSplit(table, '\n')) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_THAT(table, HasSubstr("realistic_us"));
  EXPECT_THAT(table, HasSubstr("requests min / median / max us: "));
  // The realistic rows are a column, not rows of their own: one line per variant.
  const std::vector<std::string> lines = absl::StrSplit(table, '\n');
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.starts_with("opt3 "); }),
            1);

  const ToolInfo tool{"0.1", "abc"};
  const std::vector<std::string> csv = absl::StrSplit(ToCsv(*chip, *rows, tool), '\n');
  ASSERT_EQ(csv.size(), rows->size() + 2);
  const std::vector<std::string> header = SplitCsv(csv[0]);
  const auto column = [&](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  for (const char* name :
       {"request_latency_min_ps", "request_latency_median_ps", "request_latency_max_ps",
        "request_latency_ps", "ipcq_bytes", "noc_bytes", "cross_rank_bytes",
        "reduce_rounds_level2", "reduce_rounds_level1", "ring_rotations", "cpu_ops_sum",
        "cpu_ops_max", "cpu_stall_ps_sum", "cpu_stall_ps_max", "comm_critical_path_ps",
        "issue_cost_profile"}) {
    EXPECT_LT(column(name), static_cast<long>(header.size())) << name;
  }
  const Row& r0 = (*rows)[0];
  const std::vector<std::string> first = SplitCsv(csv[1]);
  ASSERT_EQ(first.size(), header.size());
  const RequestSpread s0 = Spread(r0.report);
  EXPECT_EQ(first[column("request_latency_min_ps")], absl::StrCat(s0.min));
  EXPECT_EQ(first[column("request_latency_median_ps")], absl::StrCat(s0.median));
  EXPECT_EQ(first[column("request_latency_ps")],
            absl::StrJoin(r0.report.request_latency_ps(), ";"));
  EXPECT_EQ(first[column("cross_rank_bytes")],
            absl::StrCat(std::stoull(first[column("ipcq_bytes")]) +
                         std::stoull(first[column("noc_bytes")])));
  EXPECT_NE(first[column("cpu_ops_sum")], "0");
  EXPECT_NE(first[column("cross_rank_bytes")], "0");
  const std::string json = ToJson(*chip, *rows, tool);
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"request_latency_ps\": [",
                                           absl::StrJoin(r0.report.request_latency_ps(), ","),
                                           "], ")));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"request_latency_median_ps\": ", s0.median, ",")));
  EXPECT_THAT(json, HasSubstr("\"issue_cost_profile\": \"realistic\""));
}

TEST(Spread, MedianOfAnEvenCountIsTheLowerMiddle) {
  pb::Report report;
  for (uint64_t ps : {40, 10, 30, 20}) report.add_request_latency_ps(ps);
  const RequestSpread s = Spread(report);
  EXPECT_EQ(s.min, 10u);
  EXPECT_EQ(s.median, 20u);
  EXPECT_EQ(s.max, 40u);
  report.add_request_latency_ps(25);
  EXPECT_EQ(Spread(report).median, 25u);
  EXPECT_EQ(Spread(pb::Report()).max, 0u);
}

}  // namespace
}  // namespace ahbm::milestone
