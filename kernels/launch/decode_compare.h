// The decode comparison (issue "GQA decode kernels", item 7; the README's main job until the
// milestone bench exists): every decode variant and the baselines (kernels/attention/
// baseline.h) on one workload, in timing mode, as one table — latency, sweep and reduce time,
// roofline bound and ratio, ratio to baseline_fanout, binding resource, K/V bytes read, reduce
// rounds, events. Any variant list works; each baseline named gets its row.
//
// Contract: each row is RunDecodeWorkload of the workload with `variant` replaced
// (short_long_threshold kept for AUTO only, and refused when AUTO is not listed); sweep_ps is
// the end of the last GEMM-bearing command (P·V composite, softmax_pv, dot) of any rank,
// reduce_ps = latency - sweep; kv_bytes = bytes the DMA engines read minus the Q loads;
// reduce_rounds = sequential message rounds (Level-2 + Level-1; baseline_fanout P − 1,
// baseline_fanout_group C·P − 1, baseline_rev1_tree ⌈log₂P⌉). Deterministic: no wall-clock
// figure is part of a row.
// reduce_ops = the commands (sends, receives, MATH ops, lse_merge, the store) each PE issues
// at or after the end of its own last GEMM-bearing command, summed over PEs (single-user
// workloads: exactly the reduce's commands).
// Reduce options (`ahbm compare --reduce_options`): CompareDecodeReduceOptions runs each
// variant with reduce_payload {TRIPLET, PACKED} x reduce_merge {PRIMITIVE, FUSED}, in that
// order (variant outermost); the roofline is the same for all four (decode_run.h).
#ifndef AHBMSIM_KERNELS_LAUNCH_DECODE_COMPARE_H_
#define AHBMSIM_KERNELS_LAUNCH_DECODE_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::launch {

struct CompareRow {
  pb::Variant variant = pb::VARIANT_UNSPECIFIED;
  pb::ReducePayload payload = pb::TRIPLET;
  pb::ReduceMerge merge = pb::PRIMITIVE;
  uint64_t reduce_ops = 0;
  uint64_t latency_ps = 0;
  uint64_t sweep_ps = 0;
  uint64_t reduce_ps = 0;
  uint64_t roofline_ps = 0;
  double roofline_ratio = 0;
  double baseline_ratio = 0;  // latency / baseline latency (0 without a baseline row)
  std::string binding;
  uint64_t kv_bytes = 0;
  uint32_t reduce_rounds = 0;
  uint64_t events = 0;
  pb::Report report;
};

// Runs `variants` in order on `workload` (kernel DECODE, timing mode forced).
absl::StatusOr<std::vector<CompareRow>> CompareDecode(const pb::Chip& chip,
                                                      const pb::Workload& workload,
                                                      const std::vector<pb::Variant>& variants);

// `variants` x {TRIPLET, PACKED} x {PRIMITIVE, FUSED}; the workload's own reduce_payload and
// reduce_merge are replaced.
absl::StatusOr<std::vector<CompareRow>> CompareDecodeReduceOptions(
    const pb::Chip& chip, const pb::Workload& workload, const std::vector<pb::Variant>& variants);

// `reduce_options`: the rows carry payload / merge / reduce_ops columns.
std::string FormatCompareTable(const pb::Chip& chip, const std::vector<CompareRow>& rows,
                               bool reduce_options = false);

}  // namespace ahbm::launch

#endif  // AHBMSIM_KERNELS_LAUNCH_DECODE_COMPARE_H_
