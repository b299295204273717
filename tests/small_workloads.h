// The small chip and the small decode shape the cross-unit tests share (golden_test,
// report_stats_test). Paths are relative to the workspace (Bazel runfiles).
#ifndef AHBMSIM_TESTS_SMALL_WORKLOADS_H_
#define AHBMSIM_TESTS_SMALL_WORKLOADS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"
#include "topology/loader.h"

namespace ahbm::testing {

inline pb::Chip SmallChip() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

// h_q 8, h_kv 2 (G = 4), d 64, C 2, P 4, TILE 64 on topology/small; the variants that take no C
// (short context, AUTO, the one-CUBE baselines) or no tile (the fan-out baselines) get none.
inline pb::Workload SmallDecode(pb::Variant variant, uint64_t s, const std::string& profile) {
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_variant(variant);
  w.set_h_q(8);
  w.set_h_kv(2);
  w.set_d(64);
  w.set_s(s);
  if (variant != pb::SHORT_CONTEXT && variant != pb::AUTO && variant != pb::BASELINE_FANOUT &&
      variant != pb::BASELINE_REV1_TREE) {
    w.set_c(2);
  }
  w.set_p(4);
  if (variant != pb::BASELINE_FANOUT && variant != pb::BASELINE_FANOUT_GROUP) w.set_tile(64);
  w.set_issue_cost_profile(profile);
  return w;
}

}  // namespace ahbm::testing

#endif  // AHBMSIM_TESTS_SMALL_WORKLOADS_H_
