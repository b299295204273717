// `ahbm diff` (actors/observe/trace_diff.h, timeline.h): the critical path of a hand-built
// command stream with one engine-contention edge, and the diff of a recorded run against its
// replay with 2x HBM bandwidth, whose first diverging command is known by construction.
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/chip_sim.h"
#include "actors/inject.h"
#include "actors/observe/timeline.h"
#include "actors/observe/trace_diff.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/launch/launch.h"
#include "kernels/replay/replay.h"
#include "proto/workload.pb.h"
#include "topology/loader.h"

namespace ahbm {
namespace {

using observe::Timeline;
using Edge = Timeline::Link::Edge;
using sim::inject::Hbm;
using sim::inject::ProgramBuilder;
using sim::inject::Tcm;

pb::Chip Small() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

Timeline TimelineOf(const pb::Chip& chip, const std::vector<pb::TraceRecord>& records) {
  Timeline t(chip);
  for (const pb::TraceRecord& r : records) t.Add(r);
  EXPECT_TRUE(t.Finish().ok());
  return t;
}

// PE 0 of the small chip, every operand in TCM (no HBM traffic on the path):
//   cmd 1  load 64 KiB HBM -> TCM          a decoy: nothing reads it
//   cmd 2  composite [32, 512] . [512, 128]  8 GEMM tiles
//   cmd 3  composite [32, 64] . [64, 128]    1 GEMM tile: ready at once, but the GEMM engine
//                                            works on cmd 2's tiles until they end
//   cmd 4  MATH EXP of cmd 3's output        the CPU auto-waits on cmd 3 first
// By hand, the chain that sets the latency is: cmd 2 (issued first, no inputs) -> the GEMM
// engine -> cmd 3 -> the CPU's wait on cmd 3 -> cmd 4. The load, though issued first and
// long, is on no chain that ends last.
struct ContentionRun {
  std::vector<pb::TraceRecord> records;
  uint64_t gemm_end_of_2 = 0, gemm_start_of_3 = 0;
};

ContentionRun RunContention(const pb::Chip& chip, const std::string& profile) {
  ProgramBuilder b;
  const uint64_t load = b.Dma(Hbm(0, 0, pb::BF16, {32, 1024}), Tcm(0, 262144, pb::BF16, {32, 1024}));
  const uint64_t big = b.Composite(Tcm(0, 0, pb::BF16, {32, 512}), Tcm(0, 32768, pb::BF16, {512, 128}),
                                   Tcm(0, 163840, pb::FP32, {32, 128}));
  const uint64_t small = b.Composite(Tcm(0, 180224, pb::BF16, {32, 64}),
                                     Tcm(0, 184320, pb::BF16, {64, 128}),
                                     Tcm(0, 200704, pb::FP32, {32, 128}));
  b.Math(pb::EXP, {Tcm(0, 200704, pb::FP32, {32, 128})}, Tcm(0, 217088, pb::FP32, {32, 128}),
         {small});
  EXPECT_EQ(load, 1u);
  EXPECT_EQ(big, 2u);
  sim::ChipSimOptions options;
  options.cubes = {0};
  options.issue_cost_profile = profile;
  absl::StatusOr<std::unique_ptr<sim::ChipSim>> sim = sim::ChipSim::Create(chip, options);
  EXPECT_TRUE(sim.ok()) << sim.status();
  EXPECT_TRUE((*sim)->SetProgram(0, b.Build()).ok());
  EXPECT_TRUE((*sim)->Run().ok());
  ContentionRun run;
  run.records = (*sim)->TakeOpLogRecords();
  for (const pb::TraceRecord& r : run.records) {
    if (!r.has_op() || r.op().unit_name() != "sip0.cube0.pe0.gemm") continue;
    if (r.op().cmd_id() == 2) run.gemm_end_of_2 = r.op().end_ps();
    if (r.op().cmd_id() == 3) run.gemm_start_of_3 = r.op().start_ps();
  }
  return run;
}

void ExpectStep(const Timeline& t, const Timeline::Link& link, Edge edge, uint64_t cmd_id) {
  EXPECT_EQ(link.edge, edge);
  ASSERT_GE(link.step, 0);
  EXPECT_EQ(t.steps()[link.step].pe, 0u);
  EXPECT_EQ(t.steps()[link.step].cmd_id, cmd_id);
}

TEST(CriticalPath, HandBuiltStreamWithOneEngineContentionEdge) {
  const pb::Chip chip = Small();
  const ContentionRun run = RunContention(chip, "zero");
  ASSERT_GT(run.gemm_start_of_3, 0u);
  // The contention itself: cmd 3's tile starts the instant cmd 2's last tile ends.
  EXPECT_EQ(run.gemm_start_of_3, run.gemm_end_of_2);
  const Timeline t = TimelineOf(chip, run.records);
  const std::vector<Timeline::Link> path = t.CriticalPath();
  ASSERT_EQ(path.size(), 4u);
  ExpectStep(t, path[0], Edge::kIssue, 2);
  EXPECT_EQ(path[0].from_ps, 0u);
  EXPECT_EQ(path[0].to_ps, run.gemm_end_of_2);
  ExpectStep(t, path[1], Edge::kEngine, 3);
  EXPECT_EQ(path[1].from_ps, run.gemm_end_of_2);
  EXPECT_EQ(path[1].note, "sip0.cube0.pe0.gemm");
  const observe::Step& three = t.steps()[path[1].step];
  EXPECT_EQ(path[1].to_ps, three.end_ps);
  EXPECT_EQ(path[2].edge, Edge::kWait);
  EXPECT_EQ(path[2].from_ps, three.end_ps);
  ExpectStep(t, path[3], Edge::kIssue, 4);
  EXPECT_EQ(path[2].to_ps, t.steps()[path[3].step].issue_ps);
  EXPECT_EQ(path[3].to_ps, t.last_end_ps());
  // What held the path: cmd 2's GEMM tiles, cmd 3's tile behind them, the CPU's resume, the EXP.
  EXPECT_EQ(path[0].held, "gemm");
  EXPECT_EQ(path[1].held, "gemm");
  EXPECT_EQ(path[2].held, "wait");
  EXPECT_EQ(path[3].held, "math");
}

// With issue costs, the chain starts with the CPU issuing the load and cmd 2 (one merged row).
TEST(CriticalPath, IssueCostsStartTheChainOnTheCpu) {
  const pb::Chip chip = Small();
  const ContentionRun run = RunContention(chip, "realistic");
  const Timeline t = TimelineOf(chip, run.records);
  const std::vector<Timeline::Link> path = t.CriticalPath();
  ASSERT_EQ(path.size(), 5u);
  EXPECT_EQ(path[0].edge, Edge::kCpu);
  EXPECT_EQ(path[0].calls, 2u);  // the load's and cmd 2's issue cost
  EXPECT_EQ(path[0].from_ps, 0u);
  ExpectStep(t, path[1], Edge::kIssue, 2);
  EXPECT_EQ(path[0].to_ps, t.steps()[path[1].step].issue_ps);
  // load_cycles 16 + composite_cycles 48 at 1 GHz (topology/small.textproto "realistic").
  EXPECT_EQ(path[0].to_ps, 64000u);
  ExpectStep(t, path[2], Edge::kEngine, 3);
  EXPECT_EQ(path[2].from_ps, run.gemm_end_of_2);
  EXPECT_EQ(path[3].edge, Edge::kWait);
  ExpectStep(t, path[4], Edge::kIssue, 4);
}

// Records the small decode every test here uses as a trace at TempDir/name.
constexpr char kDecode[] = "kernel: DECODE variant: OPT3 h_q: 8 h_kv: 1 c: 2 p: 4 tile: 64 ";

std::string RecordDecode(const std::string& name, launch::LaunchResult* result = nullptr,
                         const std::string& fields = "s: 512", const pb::Chip& chip = Small()) {
  pb::Workload w;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kDecode + fields, &w));
  launch::LaunchOptions options;
  options.trace_path = absl::StrCat(::testing::TempDir(), "/", name);
  absl::StatusOr<launch::LaunchResult> r = launch::RunWorkload(chip, w, options);
  EXPECT_TRUE(r.ok()) << r.status();
  if (result != nullptr && r.ok()) *result = *std::move(r);
  return options.trace_path;
}

// Every row of a kernel's critical path lies in [0, latency], in time order, and the last ends
// at the last step's end; a multi-CUBE decode's path crosses PEs through messages.
TEST(CriticalPath, ADecodeRunsPathIsOrderedAndCrossesPes) {
  launch::LaunchResult r;
  const std::string path_of_trace = RecordDecode("decode.trace", &r);
  absl::StatusOr<observe::RunRecord> run = observe::ReadRun(path_of_trace);
  ASSERT_TRUE(run.ok()) << run.status();
  const Timeline& t = *run->timeline;
  const std::vector<Timeline::Link> path = t.CriticalPath();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path.front().from_ps, 0u);
  EXPECT_EQ(path.back().to_ps, t.last_end_ps());
  EXPECT_EQ(path.back().to_ps, r.report.latency_ps());
  bool message = false;
  for (size_t i = 0; i < path.size(); ++i) {
    EXPECT_LE(path[i].from_ps, path[i].to_ps) << i;
    if (i > 0) {
      EXPECT_LE(path[i - 1].to_ps, path[i].from_ps) << i;
    }
    message = message || path[i].edge == Edge::kMessage;
  }
  EXPECT_TRUE(message);
}

// With a zero issue cost nothing on the path is CPU issue work: every row is held by a
// step's own work (loads, GEMM and MATH commands, messages) or a CPU wait, and the rows
// cover the run. Under the realistic profile the CPU's issue cost shows as `cpu`.
TEST(CriticalPath, RowsAreHeldByWhatTheStepsDid) {
  for (const std::string profile : {"zero", "realistic"}) {
    launch::LaunchResult r;
    const std::string path_of_trace = RecordDecode(absl::StrCat(profile, ".trace"), &r,
                     absl::StrCat("s: 512 issue_cost_profile: \"", profile, "\""));
    absl::StatusOr<observe::RunRecord> run = observe::ReadRun(path_of_trace);
    ASSERT_TRUE(run.ok()) << run.status();
    const Timeline& t = *run->timeline;
    std::map<std::string, uint64_t> by_held;
    for (const Timeline::Link& l : t.CriticalPath()) {
      by_held[l.held] += l.to_ps - l.from_ps;
      if (l.step >= 0) {
        const observe::Step& step = t.steps()[l.step];
        if (step.op == "dma_load") {
          EXPECT_EQ(l.held, "dma") << step.Name();
        }
        if (step.kind == observe::Step::Kind::kRecv) {
          EXPECT_EQ(l.held, "message") << step.Name();
        }
      }
    }
    uint64_t total = 0;
    for (const auto& [held, ps] : by_held) {
      EXPECT_TRUE(held == "dma" || held == "gemm" || held == "math" || held == "message" ||
                  held == "send" || held == "wait" || held == "cpu")
          << profile << ": " << held;
      total += ps;
    }
    EXPECT_EQ(total, r.report.latency_ps()) << profile;
    EXPECT_GT(by_held["dma"], 0u) << profile;
    EXPECT_GT(by_held["message"], 0u) << profile;
    if (profile == "zero") {
      EXPECT_EQ(by_held.count("cpu"), 0u);
    } else {
      EXPECT_GT(by_held["cpu"], 0u);
    }
    const std::string text = observe::FormatCriticalPath(t, 10);
    const std::string summary = text.substr(0, text.find('\n'));
    EXPECT_NE(summary.find("time by what held it:"), std::string::npos) << summary;
    EXPECT_EQ(summary.find("issue"), std::string::npos) << summary;
  }
}

// Recorded run A on the small chip, its replay B with every HBM channel twice as fast.
// By construction: every PE's first call is its Q load (HBM -> TCM, issued at t = 0), the run's
// first HBM access; nothing before it touches HBM, so its end is the first time to move, on
// every PE at once; ties go to the lowest key, instance 0's call 0. By hand: 2048 B of Q over
// the PE's 8 channels, 100 cycles to the first byte, 32 B/cycle per channel at 1 GHz:
// A = 100 + 2048 / 256 = 108 ns; B (64 B/cycle) = 100 + 2048 / 512 = 104 ns.
TEST(TraceDiff, ARunAgainstItsReplayWithTwiceTheHbmBandwidth) {
  const std::string recorded = RecordDecode("a.trace");
  absl::StatusOr<replay::RecordedTrace> trace = replay::ReadTraceFile(recorded);
  ASSERT_TRUE(trace.ok()) << trace.status();
  replay::ReplayOptions what_if;
  pb::Chip fast = Small();
  fast.mutable_sip()->mutable_cube()->mutable_hbm_channel()->set_bytes_per_cycle(64);
  what_if.chip = fast;
  what_if.trace_out = absl::StrCat(::testing::TempDir(), "/b.trace");
  ASSERT_TRUE(replay::Replay(*trace, what_if).ok());

  absl::StatusOr<observe::RunRecord> a = observe::ReadRun(recorded);
  absl::StatusOr<observe::RunRecord> b = observe::ReadRun(what_if.trace_out);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const observe::StepMatch m = observe::MatchSteps(*a->timeline, *b->timeline);
  EXPECT_EQ(m.only_a, 0u);
  EXPECT_EQ(m.only_b, 0u);
  EXPECT_EQ(m.matched, a->timeline->steps().size());
  EXPECT_GT(m.differing, 0u);
  ASSERT_TRUE(m.first.has_value());
  const observe::Step& first = a->timeline->steps()[m.first->a_step];
  EXPECT_EQ(first.instance, 0u);
  EXPECT_EQ(first.call, 1u);  // call index 0
  EXPECT_EQ(first.op, "dma_load");
  EXPECT_EQ(m.first->field, "end_ps");
  EXPECT_EQ(m.first->a_ps, 108000u);
  EXPECT_EQ(m.first->b_ps, 104000u);

  // A run against itself: nothing differs.
  const observe::StepMatch same = observe::MatchSteps(*a->timeline, *a->timeline);
  EXPECT_EQ(same.differing, 0u);
  EXPECT_FALSE(same.first.has_value());

  EXPECT_TRUE(observe::CheckSameStreams(*a, *b).ok()) << observe::CheckSameStreams(*a, *b);

  const std::string text = observe::FormatDiff(*a, *b, 10);
  EXPECT_NE(text.find("first divergence at 104000 ps: pe 0 i0 c0 dma_load cmd 1: end_ps 108000 "
                      "-> 104000 (-4000)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(absl::StrCat("latency_ps", std::string(18 - 10, ' '))), std::string::npos);
  EXPECT_NE(text.find("hbm_channel"), std::string::npos);
  EXPECT_NE(text.find("critical path of B"), std::string::npos);
}

// Two unrelated runs diffed to "848 matched" steps with exit 0: runs of other streams are
// refused, naming what differs; other profiles and a what-if chip of the same geometry are not.
TEST(TraceDiff, RunsOfOtherStreamsAreRefused) {
  const std::string base = RecordDecode("base.trace");
  const std::string other_s = RecordDecode("other_s.trace", nullptr, "s: 256");
  const std::string realistic =
      RecordDecode("realistic.trace", nullptr, "s: 512 issue_cost_profile: \"realistic\"");
  pb::Chip two_sips = Small();
  two_sips.set_sips(2);
  const std::string bigger = RecordDecode("bigger.trace", nullptr, "s: 512", two_sips);
  pb::Chip four_channels = Small();  // per PE: the units differ, not the workload line
  four_channels.mutable_sip()->mutable_cube()->set_hbm_pseudo_channels(16);
  four_channels.mutable_sip()->mutable_cube()->mutable_pe()->set_hbm_channels(4);
  absl::StatusOr<observe::RunRecord> e =
      observe::ReadRun(RecordDecode("channels.trace", nullptr, "s: 512", four_channels));
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<observe::RunRecord> a = observe::ReadRun(base);
  absl::StatusOr<observe::RunRecord> b = observe::ReadRun(other_s);
  absl::StatusOr<observe::RunRecord> c = observe::ReadRun(realistic);
  absl::StatusOr<observe::RunRecord> d = observe::ReadRun(bigger);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  const absl::Status workload = observe::CheckSameStreams(*a, *b);
  EXPECT_TRUE(absl::IsInvalidArgument(workload)) << workload;
  EXPECT_EQ(workload.message(),
            absl::StrCat(other_s, ": not a run of ", base, "'s streams: another workload (A has "
                         "s: 512) (diff compares a run with its replay or another profile; "
                         "--force compares anyway)"));
  EXPECT_TRUE(observe::CheckSameStreams(*a, *c).ok()) << observe::CheckSameStreams(*a, *c);
  const absl::Status chip = observe::CheckSameStreams(*a, *d);
  EXPECT_TRUE(absl::IsInvalidArgument(chip)) << chip;
  EXPECT_NE(chip.message().find("another chip geometry (2 SIP(s) of 2x4 CUBEs of 2x2 PEs, 8 "
                                "channels per PE, CUBEs 0,1; A: 1 SIP(s) of"),
            std::string::npos)
      << chip;

  // Reports alone: the workload line and the units.
  observe::RunRecord ra{base, a->report, std::nullopt, nullptr};
  observe::RunRecord rb{other_s, b->report, std::nullopt, nullptr};
  observe::RunRecord rc{realistic, c->report, std::nullopt, nullptr};
  observe::RunRecord re{"channels.json", e->report, std::nullopt, nullptr};
  EXPECT_NE(observe::CheckSameStreams(ra, rb).message().find("another workload ('"),
            std::string::npos);
  EXPECT_TRUE(observe::CheckSameStreams(ra, rc).ok()) << observe::CheckSameStreams(ra, rc);
  EXPECT_NE(observe::CheckSameStreams(ra, re).message().find("another chip (79 units on small; "
                                                            "A: 111 on small)"),
            std::string::npos)
      << observe::CheckSameStreams(ra, re);
}

// `{}` (or any JSON that is no report) read as an empty report and diffed with exit 0.
TEST(TraceDiff, AJsonWithoutAReportsFieldsIsRefused) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/empty.json");
  {
    std::ofstream out(path);
    out << "{}\n";
  }
  absl::StatusOr<observe::RunRecord> run = observe::ReadRun(path);
  EXPECT_TRUE(absl::IsInvalidArgument(run.status())) << run.status();
  EXPECT_EQ(run.status().message(),
            absl::StrCat(path, ": not a run's report: no topology_name (write one with "
                         "--report_json)"));
}

TEST(TraceDiff, ACutTraceIsRefused) {
  pb::Workload w;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "kernel: DECODE variant: OPT1 h_q: 8 h_kv: 1 c: 2 p: 4 tile: 64 s: 256", &w));
  launch::LaunchOptions options;
  options.trace_path = absl::StrCat(::testing::TempDir(), "/cut.trace");
  options.keep_op_log = true;
  absl::StatusOr<launch::LaunchResult> r = launch::RunWorkload(Small(), w, options);
  ASSERT_TRUE(r.ok());
  // Everything but the final report record, cut at a record boundary.
  std::vector<pb::TraceRecord> records = r->op_log;
  ASSERT_TRUE(records.back().has_report());
  records.pop_back();
  const std::string path = absl::StrCat(::testing::TempDir(), "/cut2.trace");
  ASSERT_TRUE(observe::WriteOpLogFile(path, records).ok());
  absl::StatusOr<observe::RunRecord> run = observe::ReadRun(path);
  EXPECT_TRUE(absl::IsDataLoss(run.status())) << run.status();
  EXPECT_NE(run.status().message().find("ends without the report"), std::string::npos);
}

}  // namespace
}  // namespace ahbm
