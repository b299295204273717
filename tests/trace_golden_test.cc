// Checked-in traces (tests/traces/<case>.trace, recorded by `ahbm run --trace` on the small
// chip) replayed against checked-in reports: on the recorded topology (<case>.report.json, and
// the replay's trace equals the checked-in one byte for byte) and on the same chip with every
// HBM channel twice as fast (<case>.hbm_x2.report.json). A trace format change that old traces
// cannot follow fails here first, not in a user's hands.
//
//   bazel test //tests:trace_golden_test
//   bazel run //tests:trace_golden_test -- --update   replay the traces, rewrite the reports
//   bazel run //tests:trace_golden_test -- --record   record the traces again (a new schema),
//                                                     then rewrite the reports
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/observe/report.h"
#include "base/status_macros.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/launch/launch.h"
#include "kernels/replay/replay.h"
#include "proto/workload.pb.h"
#include "topology/loader.h"

namespace ahbm {
namespace {

struct Case {
  std::string name;
  std::string workload;  // recorded on topology/small.textproto (--record)
};

// Small on purpose (each trace well under 200 KB): a decode with a 2-level reduce and two
// users, a ring prefill, and a one-CUBE baseline.
std::vector<Case> Cases() {
  return {
      {"decode_opt2_two_users",
       "kernel: DECODE variant: OPT2 h_q: 8 h_kv: 1 c: 2 p: 4 tile: 64 s: 300 users: 2"},
      {"prefill_ring", "kernel: PREFILL variant: RING c: 2 p: 2 h_q: 2 h_kv: 1 s: 32 tile: 8"},
      {"decode_baseline_fanout",
       "kernel: DECODE variant: BASELINE_FANOUT h_q: 2 h_kv: 1 p: 4 s: 256"},
  };
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

pb::Chip Small() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

pb::Chip TwiceTheHbm(pb::Chip chip) {
  pb::HbmChannel* ch = chip.mutable_sip()->mutable_cube()->mutable_hbm_channel();
  ch->set_bytes_per_cycle(2 * ch->bytes_per_cycle());
  return chip;
}

// The reports of replaying `trace_path` on its own chip and on TwiceTheHbm; the first replay's
// trace goes to `trace_out`.
absl::StatusOr<std::pair<std::string, std::string>> ReplayReports(const std::string& trace_path,
                                                                  const std::string& trace_out) {
  absl::StatusOr<replay::RecordedTrace> trace = replay::ReadTraceFile(trace_path);
  RETURN_IF_ERROR(trace.status());
  replay::ReplayOptions same;
  same.trace_out = trace_out;
  same.keep_op_log = false;
  absl::StatusOr<launch::LaunchResult> a = replay::Replay(*trace, same);
  RETURN_IF_ERROR(a.status());
  replay::ReplayOptions fast;
  fast.chip = TwiceTheHbm(trace->header.chip());
  fast.keep_op_log = false;
  absl::StatusOr<launch::LaunchResult> b = replay::Replay(*trace, fast);
  RETURN_IF_ERROR(b.status());
  return std::make_pair(observe::ReportToJson(a->report), observe::ReportToJson(b->report));
}

class TraceGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(TraceGoldenTest, ReplaysToTheCheckedInReports) {
  const Case& c = GetParam();
  const std::string base = absl::StrCat("tests/traces/", c.name);
  const std::string out = absl::StrCat(::testing::TempDir(), "/", c.name, ".replayed");
  absl::StatusOr<std::pair<std::string, std::string>> reports =
      ReplayReports(base + ".trace", out);
  ASSERT_TRUE(reports.ok()) << reports.status()
                            << " (a new trace schema? bazel run //tests:trace_golden_test -- --record)";
  const std::string hint = " (bazel run //tests:trace_golden_test -- --update)";
  EXPECT_EQ(reports->first, ReadFile(base + ".report.json")) << c.name << hint;
  EXPECT_EQ(reports->second, ReadFile(base + ".hbm_x2.report.json")) << c.name << hint;
  const std::string checked_in = ReadFile(base + ".trace");
  EXPECT_GT(checked_in.size(), 1000u);
  EXPECT_LT(checked_in.size(), 200u * 1024);
  EXPECT_TRUE(ReadFile(out) == checked_in) << c.name << ": the replay's trace differs";
  // The what-if moves the latency (the checked-in numbers are not the same report twice).
  EXPECT_NE(reports->first, reports->second);
}

INSTANTIATE_TEST_SUITE_P(Traces, TraceGoldenTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

int Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();
  if (!out) {
    std::cerr << "cannot write " << path << "\n";
    return 1;
  }
  std::cout << "wrote " << path << " (" << bytes.size() << " bytes)\n";
  return 0;
}

int Update(bool record) {
  const char* root = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (root == nullptr || *root == '\0') {
    std::cerr << "--update/--record need `bazel run //tests:trace_golden_test -- --update`\n";
    return 2;
  }
  for (const Case& c : Cases()) {
    const std::string base = absl::StrCat(root, "/tests/traces/", c.name);
    if (record) {
      pb::Workload w;
      if (!google::protobuf::TextFormat::ParseFromString(c.workload, &w)) return 2;
      launch::LaunchOptions options;
      options.trace_path = base + ".trace";
      options.keep_op_log = false;
      absl::StatusOr<launch::LaunchResult> r = launch::RunWorkload(Small(), w, options);
      if (!r.ok() || !r->runtime_status.ok()) {
        std::cerr << c.name << ": " << (r.ok() ? r->runtime_status : r.status()) << "\n";
        return 1;
      }
      std::cout << "recorded " << options.trace_path << "\n";
    }
    absl::StatusOr<std::pair<std::string, std::string>> reports =
        ReplayReports(base + ".trace", absl::StrCat(::testing::TempDir(), "/", c.name, ".replayed"));
    if (!reports.ok()) {
      std::cerr << c.name << ": " << reports.status() << "\n";
      return 1;
    }
    if (Write(base + ".report.json", reports->first) != 0) return 1;
    if (Write(base + ".hbm_x2.report.json", reports->second) != 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ahbm

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc == 2 && (std::string(argv[1]) == "--update" || std::string(argv[1]) == "--record")) {
    return ahbm::Update(std::string(argv[1]) == "--record");
  }
  if (argc > 1) {
    std::cerr << "unknown argument " << argv[1] << " (--update or --record)\n";
    return 2;
  }
  return RUN_ALL_TESTS();
}
