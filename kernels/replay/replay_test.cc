// Record a run (`--trace`), replay it on the same topology: the replay's own trace is
// byte-identical to the recorded one (header, launch, instances, calls, and every op, issue and
// stall record), and the report and run status are the same. Every kernel variant on the
// small chip, single- and multi-user, causal T_q, data mode, a kernel error and a deadlock.
#include "base/status_macros.h"
#include "kernels/replay/replay.h"

#include <cstdio>
#include <functional>
#include <regex>
#include <tuple>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "actors/observe/op_log.h"
#include "kernels/launch/launch.h"
#include "proto/workload.pb.h"
#include "topology/loader.h"

namespace ahbm::replay {
namespace {

pb::Chip Small() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

std::string TmpPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/", name);
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Case {
  std::string name;
  std::string workload;  // text proto
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ReplayTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReplayTest, SameTopologyGivesTheRecordedTraceAndReport) {
  const Case& c = GetParam();
  pb::Workload w;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.workload, &w)) << c.workload;
  launch::LaunchOptions options;
  options.trace_path = TmpPath(c.name + ".trace");
  absl::StatusOr<launch::LaunchResult> run = launch::RunWorkload(Small(), w, options);
  ASSERT_TRUE(run.ok()) << run.status();

  absl::StatusOr<RecordedTrace> trace = ReadTraceFile(options.trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_GT(trace->total_calls, 0u);
  ReplayOptions replay_options;
  replay_options.trace_out = TmpPath(c.name + ".replayed");
  absl::StatusOr<launch::LaunchResult> replayed = Replay(*trace, replay_options);
  ASSERT_TRUE(replayed.ok()) << replayed.status();

  EXPECT_EQ(replayed->runtime_status, run->runtime_status);
  EXPECT_GT(run->report.events(), 0u);
  // Replay runs in timing mode. A data-mode run sends each command's end as an event of its
  // own (values are applied then; PeScheduler::ReplyAhead), so only its event count differs.
  pb::Report want = run->report;
  if (w.data()) {
    EXPECT_GT(want.events(), replayed->report.events());
    want.set_events(replayed->report.events());
  }
  EXPECT_EQ(replayed->report.DebugString(), want.DebugString());
  EXPECT_EQ(replayed->reduce_rounds, run->reduce_rounds);
  EXPECT_EQ(replayed->level2_rounds, run->level2_rounds);
  EXPECT_EQ(replayed->level1_rounds, run->level1_rounds);
  EXPECT_EQ(replayed->ring_rotations, run->ring_rotations);
  const std::string recorded = FileBytes(options.trace_path);
  const std::string again = FileBytes(replay_options.trace_out);
  EXPECT_GT(recorded.size(), 500u);
  if (!w.data()) {
    EXPECT_TRUE(recorded == again) << "the replay's trace differs (" << recorded.size() << " vs "
                                   << again.size() << " bytes)";
  }
  // The in-memory op log too (what the Chrome trace reads); in data mode the trace's last
  // record, the report, has the event count that differs.
  ASSERT_EQ(replayed->op_log.size(), run->op_log.size());
  ASSERT_TRUE(run->op_log.back().has_report());
  if (w.data()) run->op_log.back().mutable_report()->set_events(replayed->report.events());
  for (size_t i = 0; i < run->op_log.size(); ++i) {
    ASSERT_EQ(replayed->op_log[i].SerializeAsString(), run->op_log[i].SerializeAsString())
        << "record " << i << ": " << run->op_log[i].ShortDebugString();
  }
  std::remove(options.trace_path.c_str());
  std::remove(replay_options.trace_out.c_str());
}

// The small chip: one SIP of 2x4 CUBEs of 2x2 PEs (P = 4).
INSTANTIATE_TEST_SUITE_P(
    EveryVariant, ReplayTest,
    ::testing::Values(
        Case{"decode_opt3_three_users", "kernel: DECODE variant: OPT3 h_q: 16 h_kv: 2 c: 4 p: 4 "
                                        "tile: 128 users: 3 request_lengths: [2048, 1500, 700]"},
        Case{"decode_opt1_causal_t_q_realistic",
             "kernel: DECODE variant: OPT1 h_q: 16 h_kv: 2 c: 4 p: 4 tile: 128 s: 1024 t_q: 3 "
             "issue_cost_profile: 'realistic'"},
        Case{"decode_opt2_two_users_data", "kernel: DECODE variant: OPT2 h_q: 8 h_kv: 2 c: 4 p: 4 "
                                           "tile: 64 s: 600 users: 2 data: true"},
        Case{"decode_opt2_packed_fused", "kernel: DECODE variant: OPT2 h_q: 8 h_kv: 1 c: 8 p: 4 "
                                         "tile: 64 s: 4096 reduce_payload: PACKED "
                                         "reduce_merge: FUSED"},
        Case{"decode_short_context", "kernel: DECODE variant: SHORT_CONTEXT h_q: 16 h_kv: 4 p: 4 "
                                     "kv_per_cube: 2 tile: 128 s: 512 users: 2"},
        Case{"decode_baseline_fanout", "kernel: DECODE variant: BASELINE_FANOUT h_q: 4 h_kv: 2 "
                                       "p: 4 s: 1024 users: 2"},
        Case{"decode_baseline_fanout_group", "kernel: DECODE variant: BASELINE_FANOUT_GROUP "
                                             "h_q: 8 h_kv: 2 c: 4 p: 4 s: 1024"},
        Case{"decode_baseline_rev1_tree", "kernel: DECODE variant: BASELINE_REV1_TREE h_q: 8 "
                                          "h_kv: 2 p: 4 tile: 128 s: 1024"},
        Case{"prefill_flash_causal_t_q", "kernel: PREFILL variant: FLASH h_q: 8 h_kv: 2 s: 300 "
                                         "t_q: 100"},
        Case{"prefill_ring_two_users", "kernel: PREFILL variant: RING p: 4 h_q: 8 h_kv: 2 "
                                       "users: 2 request_lengths: [300, 170]"},
        Case{"prefill_short_context", "kernel: PREFILL variant: SHORT_CONTEXT p: 4 h_q: 8 "
                                      "h_kv: 2 kv_per_cube: 1 s: 256"},
        Case{"prefill_baseline_fanout", "kernel: PREFILL variant: BASELINE_FANOUT p: 4 h_q: 4 "
                                        "h_kv: 2 s: 256 users: 2"},
        Case{"selftest_allreduce", "kernel: SELFTEST_ALLREDUCE vector_len: 300 cube: 2"},
        Case{"selftest_deadlock", "kernel: SELFTEST_DEADLOCK cube: 1"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// ---- what-if: replaying on another topology equals running the kernel there ----

// What a run did: every op, issue and stall record (the trace's header, launch, instance and
// call records describe the input, not the run).
std::vector<std::string> RunRecords(const std::vector<pb::TraceRecord>& records) {
  std::vector<std::string> out;
  for (const pb::TraceRecord& r : records) {
    if (r.has_op() || r.has_issue() || r.has_stall()) out.push_back(r.SerializeAsString());
  }
  return out;
}

struct WhatIf {
  std::string name;
  std::function<void(pb::Chip&)> change;
  std::string profile;  // "" : the workload's
};

class WhatIfTest : public ::testing::TestWithParam<std::tuple<Case, WhatIf>> {};

TEST_P(WhatIfTest, ReplayOnAnotherTopologyEqualsTheKernelRunThere) {
  const auto& [c, what_if] = GetParam();
  pb::Workload w;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.workload, &w)) << c.workload;
  pb::Chip other = Small();
  what_if.change(other);
  // The kernel, recorded on the small chip.
  launch::LaunchOptions options;
  options.trace_path = TmpPath(c.name + "." + what_if.name + ".trace");
  absl::StatusOr<launch::LaunchResult> recorded = launch::RunWorkload(Small(), w, options);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  // The kernel run directly on the other chip (and profile).
  pb::Workload direct_w = w;
  if (!what_if.profile.empty()) direct_w.set_issue_cost_profile(what_if.profile);
  options.trace_path = "";
  absl::StatusOr<launch::LaunchResult> direct = launch::RunWorkload(other, direct_w, options);
  ASSERT_TRUE(direct.ok()) << direct.status();
  // The recording replayed there.
  absl::StatusOr<RecordedTrace> trace = ReadTraceFile(TmpPath(c.name + "." + what_if.name + ".trace"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  ReplayOptions replay_options;
  replay_options.chip = other;
  replay_options.issue_cost_profile = what_if.profile;
  absl::StatusOr<launch::LaunchResult> replayed = Replay(*trace, replay_options);
  ASSERT_TRUE(replayed.ok()) << replayed.status();

  ASSERT_TRUE(direct->runtime_status.ok()) << direct->runtime_status;
  EXPECT_EQ(replayed->runtime_status, direct->runtime_status);
  const std::vector<std::string> want = RunRecords(direct->op_log);
  const std::vector<std::string> got = RunRecords(replayed->op_log);
  // The what-if changed the run (else the test would prove nothing) — but for flash prefill,
  // which sends no NOC message.
  if (!(what_if.name == "noc_latency_x2" && c.name.starts_with("prefill_flash"))) {
    EXPECT_NE(want, RunRecords(recorded->op_log));
  }
  // Several requests on one PE take its persistent TCM arena in the order their kernels
  // allocate, which follows the timing: on another topology the same buffers may get other TCM
  // addresses (never other times: a TCM access costs the same wherever it is). So the kernel's
  // stream itself depends on timing there, and multi-user cases compare TCM addresses masked.
  const bool mask_tcm = w.users() > 1 || w.request_lengths_size() > 1;
  const auto text = [mask_tcm](const std::string& bytes) {
    pb::TraceRecord r;
    r.ParseFromString(bytes);
    const std::string s = r.ShortDebugString();
    if (!mask_tcm) return s;
    static const std::regex kTcmAddr("(space: TCM (pe: [0-9]+ )?addr: )[0-9]+");
    return std::regex_replace(s, kTcmAddr, "$1_");
  };
  ASSERT_EQ(got.size(), want.size());
  size_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(text(got[i]), text(want[i])) << "record " << i;
    differ += got[i] != want[i];
  }
  if (!mask_tcm) {
    EXPECT_EQ(differ, 0u);
  }
  // The report too, roofline included: the communication critical path is priced on the
  // replay's chip (a decode's reduce moves with the NOC latency).
  EXPECT_EQ(replayed->report.DebugString(), direct->report.DebugString());
  if (what_if.name == "noc_latency_x2" && c.name.starts_with("decode")) {
    EXPECT_GT(replayed->report.roofline().comm_critical_path_ps(),
              recorded->report.roofline().comm_critical_path_ps());
  }
}

INSTANTIATE_TEST_SUITE_P(
    DecodeAndPrefill, WhatIfTest,
    ::testing::Combine(
        ::testing::Values(
            Case{"decode_opt3", "kernel: DECODE variant: OPT3 h_q: 16 h_kv: 2 c: 4 p: 4 tile: 128 "
                                "s: 2048"},
            Case{"decode_opt2_three_users", "kernel: DECODE variant: OPT2 h_q: 16 h_kv: 2 c: 4 "
                                            "p: 4 tile: 128 users: 3 "
                                            "request_lengths: [2048, 1500, 700]"},
            Case{"prefill_ring", "kernel: PREFILL variant: RING p: 4 h_q: 8 h_kv: 2 s: 512"},
            Case{"prefill_flash_two_users", "kernel: PREFILL variant: FLASH h_q: 8 h_kv: 2 "
                                            "users: 2 request_lengths: [300, 170]"}),
        ::testing::Values(
            WhatIf{"hbm_x2",
                   [](pb::Chip& chip) {
                     pb::HbmChannel& ch = *chip.mutable_sip()->mutable_cube()->mutable_hbm_channel();
                     ch.set_bytes_per_cycle(2 * ch.bytes_per_cycle());
                   },
                   ""},
            WhatIf{"noc_latency_x2",
                   [](pb::Chip& chip) {
                     pb::Link& link = *chip.mutable_sip()->mutable_noc()->mutable_link();
                     link.set_latency_cycles(2 * link.latency_cycles());
                   },
                   ""},
            WhatIf{"realistic_issue_costs", [](pb::Chip&) {}, "realistic"})),
    [](const ::testing::TestParamInfo<std::tuple<Case, WhatIf>>& info) {
      return std::get<0>(info.param).name + "_" + std::get<1>(info.param).name;
    });

// ---- guard rails: one line, InvalidArgument (DataLoss for a cut file) ----

// A small recorded trace's records.
std::vector<pb::TraceRecord> SmallTrace() {
  pb::Workload w;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "kernel: DECODE variant: OPT3 h_q: 8 h_kv: 1 c: 4 p: 4 tile: 128 s: 1024", &w));
  launch::LaunchOptions options;
  options.trace_path = TmpPath("guard.trace");
  EXPECT_TRUE(launch::RunWorkload(Small(), w, options).ok());
  std::ifstream in(options.trace_path, std::ios::binary);
  absl::StatusOr<std::vector<pb::TraceRecord>> records = observe::ReadOpLog(in);
  EXPECT_TRUE(records.ok()) << records.status();
  return *records;
}

absl::Status ReplayRecords(const std::vector<pb::TraceRecord>& records,
                           const ReplayOptions& options = {}) {
  const std::string path = TmpPath("guard.changed.trace");
  EXPECT_TRUE(observe::WriteOpLogFile(path, records).ok());
  absl::StatusOr<RecordedTrace> trace = ReadTraceFile(path);
  RETURN_IF_ERROR(trace.status());
  return Replay(*trace, options).status();
}

TEST(ReplayGuardRails, TheUnchangedTraceReplays) {
  EXPECT_TRUE(ReplayRecords(SmallTrace()).ok());
}

TEST(ReplayGuardRails, ANewerSchemaVersionIsRefused) {
  std::vector<pb::TraceRecord> records = SmallTrace();
  records[0].mutable_header()->set_schema_version(observe::kTraceSchemaVersion + 1);
  const absl::Status s = ReplayRecords(records);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr(absl::StrCat("schema_version: the trace is schema ", observe::kTraceSchemaVersion + 1, "; this build reads schema ", observe::kTraceSchemaVersion)));
}

TEST(ReplayGuardRails, ATruncatedFileIsDataLossNamingTheRecord) {
  SmallTrace();
  const std::string bytes = FileBytes(TmpPath("guard.trace"));
  const std::string path = TmpPath("guard.cut.trace");
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 7);
  const absl::Status s = ReadTraceFile(path).status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("truncated"));
}

TEST(ReplayGuardRails, AnotherGeometryIsRefused) {
  pb::Chip other = Small();
  other.mutable_sip()->mutable_cube_mesh()->set_cols(2);
  ReplayOptions options;
  options.chip = other;
  const absl::Status s = ReplayRecords(SmallTrace(), options);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("topology: the trace's streams need 1 SIPs of 2x4 CUBEs of 2x2 "
                                   "PEs, 8 HBM channels per PE; this topology has 1 SIPs of 2x2"));
}

// The launch's CUBE sets must be CUBEs the recording simulated; a one-group recording must
// list its group_scale sets, of equal size, and have simulated the first.
TEST(ReplayGuardRails, CubeSetsTheRecordingDidNotSimulateAreRefused) {
  std::vector<pb::TraceRecord> records = SmallTrace();
  for (pb::TraceRecord& r : records) {
    if (!r.has_header()) continue;
    r.mutable_header()->clear_cubes();
    r.mutable_header()->add_cubes(0);  // only CUBE 0 simulated
  }
  absl::Status s = ReplayRecords(records);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("trace: a CUBE set lists CUBE "));
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("which the recording did not simulate"));

  records = SmallTrace();
  for (pb::TraceRecord& r : records) {
    if (r.has_launch()) r.mutable_launch()->set_group_scale(3);
  }
  s = ReplayRecords(records);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("trace: a one-group recording of 3 CUBE sets must list that "
                                   "many sets of equal size on the chip and simulate the first"));
}

// Two instances of one (request, stream) on one PE could not tell their messages apart: a
// trace that has them (here instance 1 moved onto instance 0's PE) is refused.
TEST(ReplayGuardRails, TwoInstancesOfOneRequestAndStreamOnAPeAreRefused) {
  std::vector<pb::TraceRecord> records = SmallTrace();
  uint32_t pe0 = 0;
  for (pb::TraceRecord& r : records) {
    if (!r.has_instance()) continue;
    if (r.instance().instance() == 0) pe0 = r.instance().pe();
    if (r.instance().instance() == 1) r.mutable_instance()->set_pe(pe0);
  }
  const absl::Status s = ReplayRecords(records);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr(absl::StrCat("trace: instance 1: pe ", pe0)));
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("a second kernel instance of request 0, stream 0"));
}

TEST(ReplayGuardRails, AWaitOnACallThatDoesNotExistIsRefused) {
  std::vector<pb::TraceRecord> records = SmallTrace();
  // Instance 0's third call becomes a wait on its eighth.
  for (pb::TraceRecord& r : records) {
    if (r.has_call() && r.call().instance() == 0 && r.call().index() == 2) {
      pb::CallRecord wait;
      wait.set_instance(0);
      wait.set_index(2);
      wait.set_kind(pb::CallRecord::WAIT);
      wait.set_wait_on(8);
      *r.mutable_call() = wait;
    }
  }
  const absl::Status s = ReplayRecords(records);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("instance 0 call 2: wait on call 7, which is not an earlier call of it"));
}

// A kernel that threw after issuing records KERNEL_ERROR where it threw: the replayed instance
// stops there, the run reports that error (not the deadlock of the PEs that wait for it), and
// a recording of the replay holds the same call.
TEST(ReplayKernelError, ARecordedKernelErrorStopsItsInstanceThere) {
  std::vector<pb::TraceRecord> records = SmallTrace();
  // Instance 5 throws at its tenth call, after its first nine were issued.
  for (pb::TraceRecord& r : records) {
    if (r.has_call() && r.call().instance() == 5 && r.call().index() == 9) {
      pb::CallRecord error;
      error.set_instance(5);
      error.set_index(9);
      error.set_kind(pb::CallRecord::KERNEL_ERROR);
      error.set_error("pe 5: injected kernel error");
      *r.mutable_call() = error;
    }
  }
  const std::string path = TmpPath("kernel_error.trace");
  ASSERT_TRUE(observe::WriteOpLogFile(path, records).ok());
  absl::StatusOr<RecordedTrace> trace = ReadTraceFile(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ReplayOptions options;
  options.trace_out = TmpPath("kernel_error.replayed");
  absl::StatusOr<launch::LaunchResult> replayed = Replay(*trace, options);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_FALSE(replayed->runtime_status.ok());
  EXPECT_THAT(std::string(replayed->runtime_status.message()),
              ::testing::HasSubstr("pe 5: injected kernel error"));
  // Instance 5 issued its first nine calls and nothing after the error.
  uint64_t calls_of_5 = 0;
  bool error_recorded = false;
  for (const pb::TraceRecord& r : replayed->op_log) {
    if (!r.has_call() || r.call().instance() != 5) continue;
    ++calls_of_5;
    error_recorded = error_recorded || (r.call().kind() == pb::CallRecord::KERNEL_ERROR &&
                                        r.call().index() == 9 &&
                                        r.call().error() == "pe 5: injected kernel error");
  }
  EXPECT_EQ(calls_of_5, 10u);
  EXPECT_TRUE(error_recorded);
}

TEST(ReplayGuardRails, ATraceWithoutCallsIsNeverZeroCycles) {
  std::vector<pb::TraceRecord> records = SmallTrace();
  std::erase_if(records, [](const pb::TraceRecord& r) { return r.has_call(); });
  const absl::Status s = ReplayRecords(records);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("no call to replay"));
}

TEST(ReplayGuardRails, AnOpLogWithoutRecordedCallsIsRefused) {
  std::vector<pb::TraceRecord> records = SmallTrace();
  std::erase_if(records, [](const pb::TraceRecord& r) { return r.has_launch(); });
  const absl::Status s = ReplayRecords(records);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("record one with `ahbm run --trace`"));
}

}  // namespace
}  // namespace ahbm::replay
