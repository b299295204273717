#include "milestone/milestone.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace ahbm::milestone
