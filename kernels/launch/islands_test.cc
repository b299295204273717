// CUBE islands (KernelPlan::CubeSets, Engine::SetIslands): a run without an op log simulates
// each CUBE Group on its own, one after the other. Every kernel variant, single- and
// multi-user, timing and data mode, on the small chip with more than one island: the report
// (latency, events, every unit's busy time and bytes, the roofline), the run status and the
// outputs equal the single-heap run's exactly.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/launch/launch.h"
#include "proto/workload.pb.h"
#include "topology/loader.h"

namespace ahbm::launch {
namespace {

struct Case {
  std::string name;
  std::string workload;  // text proto
  uint32_t islands;      // how many the small chip's run splits into
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

LaunchResult RunCase(const Case& c, bool islands) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  pb::Workload w;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(c.workload, &w)) << c.workload;
  LaunchOptions options;
  options.keep_op_log = false;
  options.islands = islands;
  absl::StatusOr<LaunchResult> r = RunWorkload(*chip, w, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : LaunchResult{};
}

class IslandsTest : public ::testing::TestWithParam<Case> {};

TEST_P(IslandsTest, SameReportStatusAndOutputsAsOneHeap) {
  const Case& c = GetParam();
  const LaunchResult one = RunCase(c, false);
  const LaunchResult split = RunCase(c, true);
  EXPECT_EQ(one.islands, 1u);
  EXPECT_EQ(split.islands, c.islands);
  EXPECT_TRUE(one.runtime_status.ok()) << one.runtime_status;
  EXPECT_EQ(split.runtime_status, one.runtime_status);
  EXPECT_GT(one.report.events(), 0u);
  EXPECT_EQ(split.report.DebugString(), one.report.DebugString());
  ASSERT_EQ(split.outputs.size(), one.outputs.size());
  for (const auto& [name, array] : one.outputs) {
    EXPECT_EQ(split.outputs.at(name).data, array.data) << name;
  }
}

// The small chip: one SIP of 2x4 CUBEs of 2x2 PEs (P = 4).
INSTANTIATE_TEST_SUITE_P(
    EveryVariant, IslandsTest,
    ::testing::Values(
        Case{"decode_opt3_two_groups_three_users",
             "kernel: DECODE variant: OPT3 h_q: 16 h_kv: 2 c: 4 p: 4 tile: 128 users: 3 "
             "request_lengths: [2048, 1500, 700]",
             2},
        Case{"decode_opt1_causal_t_q", "kernel: DECODE variant: OPT1 h_q: 16 h_kv: 2 c: 4 p: 4 "
                                       "tile: 128 s: 1024 t_q: 3",
             2},
        Case{"decode_opt2_data", "kernel: DECODE variant: OPT2 h_q: 8 h_kv: 2 c: 4 p: 4 tile: 64 "
                                 "s: 600 users: 2 data: true",
             2},
        Case{"decode_short_context_two_heads_per_cube",
             "kernel: DECODE variant: SHORT_CONTEXT h_q: 16 h_kv: 4 p: 4 kv_per_cube: 2 tile: 128 "
             "s: 512 users: 2",
             2},
        Case{"decode_baseline_fanout", "kernel: DECODE variant: BASELINE_FANOUT h_q: 4 h_kv: 2 "
                                       "p: 4 s: 1024 users: 2",
             4},
        Case{"decode_baseline_fanout_group",
             "kernel: DECODE variant: BASELINE_FANOUT_GROUP h_q: 8 h_kv: 2 c: 4 p: 4 s: 1024",
             2},
        Case{"decode_baseline_rev1_tree", "kernel: DECODE variant: BASELINE_REV1_TREE h_q: 8 "
                                          "h_kv: 2 p: 4 tile: 128 s: 1024",
             2},
        Case{"prefill_flash", "kernel: PREFILL variant: FLASH h_q: 8 h_kv: 2 s: 300", 2},
        Case{"prefill_ring_two_users_data",
             "kernel: PREFILL variant: RING p: 4 h_q: 8 h_kv: 2 users: 2 request_lengths: [300, 170] "
             "data: true",
             2},
        Case{"prefill_short_context", "kernel: PREFILL variant: SHORT_CONTEXT p: 4 h_q: 8 h_kv: 2 "
                                      "kv_per_cube: 1 s: 256",
             2},
        Case{"prefill_baseline_fanout", "kernel: PREFILL variant: BASELINE_FANOUT p: 4 h_q: 4 h_kv: 2 "
                                        "s: 256 users: 2",
             4}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace ahbm::launch
