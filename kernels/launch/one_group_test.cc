// One-group runs (LaunchOptions::one_group, DESIGN §3): on the full chip (chip_4sip), a
// workload whose CUBE sets are alike simulates its first set only and reports the full chip.
// For every decode and prefill variant (single- and multi-user; short_context with one KV
// head per CUBE) the report — latency, the per-kind sums of every unit counter, every PE's
// roofline — equals the full-chip run's exactly; only the events count differs, and it is
// much smaller. Where the condition fails the full chip is simulated and the note says why.
// Per unit the stats need not match: baseline_fanout reads and writes its query row at a
// per-query-head offset, so its CUBEs' channels split the same bytes differently.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/launch/launch.h"
#include "kernels/replay/replay.h"
#include "proto/trace.pb.h"
#include "topology/ids.h"
#include "proto/workload.pb.h"
#include "topology/loader.h"

namespace ahbm::launch {
namespace {

struct Case {
  std::string name;
  std::string workload;  // text proto
  uint32_t sets;         // the CUBE sets the one simulated stands for
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

LaunchResult RunOn(const std::string& topology, const std::string& workload, bool one_group,
                 bool keep_op_log = false, const std::string& trace_path = "") {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(topology);
  EXPECT_TRUE(chip.ok()) << chip.status();
  pb::Workload w;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(workload, &w)) << workload;
  LaunchOptions options;
  options.keep_op_log = keep_op_log;
  options.one_group = one_group;
  options.trace_path = trace_path;
  absl::StatusOr<LaunchResult> r = RunWorkload(*chip, w, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : LaunchResult{};
}

// Per unit kind, the sums of every counter (busy, work, bytes, FLOPs, ops, CPU stall).
std::map<std::string, std::vector<uint64_t>> PerKind(const pb::Report& report) {
  std::map<std::string, std::vector<uint64_t>> out;
  for (const pb::UnitStats& u : report.units()) {
    std::vector<uint64_t>& sums = out[u.kind()];
    sums.resize(9);
    uint32_t i = 0;
    for (uint64_t v : {u.busy_ps(), u.work_ps(), u.bytes_read(), u.bytes_written(), u.flops(),
                       u.ops(), u.hbm_useful_bytes(), u.hbm_charged_bytes(), u.stall_ps()}) {
      sums[i++] += v;
    }
  }
  return out;
}

class OneGroupTest : public ::testing::TestWithParam<Case> {};

TEST_P(OneGroupTest, SameReportAsTheFullChipForFewerEvents) {
  const Case& c = GetParam();
  const LaunchResult full = RunOn("topology/chip_4sip.textproto", c.workload, false);
  const LaunchResult one = RunOn("topology/chip_4sip.textproto", c.workload, true);
  ASSERT_TRUE(full.runtime_status.ok()) << full.runtime_status;
  ASSERT_TRUE(one.runtime_status.ok()) << one.runtime_status;
  EXPECT_EQ(full.group_scale, 1u);
  EXPECT_EQ(one.group_scale, c.sets) << one.one_group_note;
  EXPECT_EQ(one.one_group_note, "");
  // One set of N simulated: about 1/N of the events (the BANK call memo hits differ).
  EXPECT_LT(one.report.events() * (c.sets / 2), full.report.events());
  EXPECT_EQ(PerKind(one.report), PerKind(full.report));
  EXPECT_EQ(one.report.units_size(), full.report.units_size());
  // Latency, each request's latency, roofline (every PE's), summary: the rest of the report.
  pb::Report a = full.report, b = one.report;
  for (pb::Report* r : {&a, &b}) {
    r->clear_events();
    r->clear_units();
  }
  EXPECT_GT(a.latency_ps(), 0u);
  EXPECT_EQ(b.DebugString(), a.DebugString());
  EXPECT_EQ(one.reduce_rounds, full.reduce_rounds);
  EXPECT_EQ(one.level2_rounds, full.level2_rounds);
  EXPECT_EQ(one.level1_rounds, full.level1_rounds);
  EXPECT_EQ(one.ring_rotations, full.ring_rotations);
  EXPECT_EQ(one.composites, full.composites);
}

// chip_4sip: 4 SIPs of 4x4 CUBEs of 2x4 PEs; Llama3-70B's H_q 64, H_kv 8 (the defaults).
INSTANTIATE_TEST_SUITE_P(
    FullChip, OneGroupTest,
    ::testing::Values(
        Case{"decode_opt3", "kernel: DECODE variant: OPT3 s: 8192", 8},
        Case{"decode_opt3_mixed_users",
             "kernel: DECODE variant: OPT3 request_lengths: [4096, 1000, 2500]", 8},
        Case{"decode_opt1", "kernel: DECODE variant: OPT1 s: 8192", 8},
        Case{"decode_opt2", "kernel: DECODE variant: OPT2 s: 8192", 8},
        Case{"decode_opt2_lookahead", "kernel: DECODE variant: OPT2_LOOKAHEAD s: 8192", 8},
        Case{"decode_baseline_dot", "kernel: DECODE variant: BASELINE_DOT s: 8192", 8},
        Case{"decode_auto_long", "kernel: DECODE variant: AUTO s: 131072", 8},
        Case{"prefill_ring", "kernel: PREFILL variant: RING s: 1024", 8},
        Case{"decode_baseline_fanout", "kernel: DECODE variant: BASELINE_FANOUT s: 1024", 64},
        Case{"decode_short_context", "kernel: DECODE variant: SHORT_CONTEXT kv_per_cube: 1 s: 1024",
             8},
        Case{"prefill_short_context",
             "kernel: PREFILL variant: SHORT_CONTEXT kv_per_cube: 1 s: 512", 8},
        Case{"decode_baseline_rev1_tree_two_users",
             "kernel: DECODE variant: BASELINE_REV1_TREE s: 1024 users: 2", 8},
        Case{"prefill_flash", "kernel: PREFILL variant: FLASH s: 512", 8},
        Case{"prefill_baseline_dot", "kernel: PREFILL variant: BASELINE_DOT s: 512", 8},
        Case{"prefill_baseline_fanout", "kernel: PREFILL variant: BASELINE_FANOUT s: 512", 64},
        Case{"decode_baseline_fanout_group",
             "kernel: DECODE variant: BASELINE_FANOUT_GROUP s: 1024", 8}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Refused: the full chip is simulated and the note says why (small chip: cheap).
TEST(OneGroupRefusalTest, FullChipWithTheReason) {
  const std::string small = "topology/small.textproto";
  const std::string opt3 = "kernel: DECODE variant: OPT3 h_q: 16 h_kv: 2 c: 4 p: 4 s: 1024";
  for (const auto& [workload, keep_op_log, note] :
       {std::tuple<std::string, bool, std::string>{
            opt3 + " data: true", false, "data mode reads every set's outputs"},
        {"kernel: DECODE variant: SHORT_CONTEXT h_q: 16 h_kv: 4 p: 4 kv_per_cube: 2 s: 512",
         false, "kv_per_cube > 1 puts several KV heads on one CUBE"},
        {"kernel: DECODE variant: OPT3 h_q: 8 h_kv: 1 c: 4 p: 4 s: 1024", false,
         "the kernel uses one CUBE set: nothing to scale"}}) {
    const LaunchResult one = RunOn(small, workload, true, keep_op_log);
    const LaunchResult full = RunOn(small, workload, false, keep_op_log);
    EXPECT_EQ(one.one_group_note, note) << workload;
    EXPECT_EQ(one.group_scale, 1u) << workload;
    EXPECT_EQ(one.report.DebugString(), full.report.DebugString()) << workload;
  }
}

// The records of the units and PEs of `cubes` (the header and the rest dropped), `seq` cleared.
std::vector<std::string> RecordsOf(const std::vector<pb::TraceRecord>& log,
                                   const std::set<uint32_t>& cubes, const pb::Chip& chip) {
  const topology::ChipIndex index(chip);
  const auto in = [&](int64_t cube) { return cube >= 0 && cubes.contains(cube); };
  std::vector<std::string> out;
  for (pb::TraceRecord r : log) {
    bool keep = false;
    if (r.has_op()) {
      keep = in(index.GlobalCubeOfUnit(topology::UnitId(r.op().unit())));
      r.mutable_op()->clear_seq();
    } else if (r.has_issue()) {
      keep = in(r.issue().pe() / index.pes_per_cube());
    } else if (r.has_stall()) {
      keep = in(r.stall().pe() / index.pes_per_cube());
    }
    if (keep) out.push_back(r.ShortDebugString());
  }
  return out;
}

// An op log observes what a one-group run simulates and changes nothing: the report is the
// one without an op log; the records are the full chip's records of the first set's units, in
// the same order. Traced, the run replays to the same report (the replay mirrors the sets).
TEST(OneGroupOpLogTest, AnOpLogObservesTheSimulatedGroup) {
  const std::string small = "topology/small.textproto";
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(small);
  ASSERT_TRUE(chip.ok()) << chip.status();
  for (const std::string workload :
       {"kernel: DECODE variant: OPT3 h_q: 16 h_kv: 2 c: 4 p: 4 s: 1024 users: 2",
        "kernel: PREFILL variant: RING h_q: 8 h_kv: 2 p: 4 s: 256"}) {
    const LaunchResult plain = RunOn(small, workload, true);
    const LaunchResult logged = RunOn(small, workload, true, /*keep_op_log=*/true);
    const LaunchResult full = RunOn(small, workload, false, /*keep_op_log=*/true);
    ASSERT_TRUE(logged.runtime_status.ok()) << logged.runtime_status;
    EXPECT_EQ(logged.one_group_note, "") << workload;
    EXPECT_EQ(logged.group_scale, 2u) << workload;
    EXPECT_EQ(logged.report.DebugString(), plain.report.DebugString()) << workload;
    ASSERT_FALSE(logged.op_log.empty());
    ASSERT_TRUE(logged.op_log[0].has_header());
    const std::set<uint32_t> first(logged.op_log[0].header().cubes().begin(),
                                   logged.op_log[0].header().cubes().end());
    const std::vector<std::string> ours = RecordsOf(logged.op_log, first, *chip);
    EXPECT_GT(ours.size(), 100u) << workload;
    EXPECT_EQ(ours, RecordsOf(full.op_log, first, *chip)) << workload;
    // Nothing outside the first set was observed; its op records are numbered 0, 1, ...
    uint64_t seq = 0;
    for (const pb::TraceRecord& r : logged.op_log) {
      if (r.has_op()) EXPECT_EQ(r.op().seq(), seq++) << workload;
    }
    const auto observed = [](const pb::TraceRecord& r) {
      return r.has_op() || r.has_issue() || r.has_stall();
    };
    EXPECT_EQ(static_cast<size_t>(
                  std::count_if(logged.op_log.begin(), logged.op_log.end(), observed)),
              ours.size());

    const std::string path = std::string(getenv("TEST_TMPDIR")) + "/one_group.trace";
    const LaunchResult traced = RunOn(small, workload, true, /*keep_op_log=*/false, path);
    EXPECT_EQ(traced.report.DebugString(), plain.report.DebugString()) << workload;
    absl::StatusOr<replay::RecordedTrace> trace = replay::ReadTraceFile(path);
    ASSERT_TRUE(trace.ok()) << trace.status();
    EXPECT_EQ(trace->launch.group_scale(), 2u);
    replay::ReplayOptions replay_options;
    replay_options.keep_op_log = false;
    absl::StatusOr<LaunchResult> replayed = replay::Replay(*trace, replay_options);
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    ASSERT_TRUE(replayed->runtime_status.ok()) << replayed->runtime_status;
    EXPECT_EQ(replayed->report.DebugString(), plain.report.DebugString()) << workload;
  }
}

}  // namespace
}  // namespace ahbm::launch
