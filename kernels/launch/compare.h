// `ahbm compare`: the variants of one kernel on one workload, in timing mode, as one table —
// latency, sweep and reduce time, roofline bound and ratio, ratio to the launcher's reference
// row (decode: baseline_fanout), binding resource, K/V bytes read, reduce rounds, events. The
// kernel's launcher (launcher.h) gives its CompareSpec: default rows, reference row,
// --reduce_options rows, default s, its checks (decode's: decode_run.h).
//
// Contract: each row is RunWorkload of the workload with `variant` replaced and the spec's
// `row` applied (after the spec's `check`, plain comparison only; Compare validates every
// row before it runs any, and a refusal ends "(compare row <variant>; --variants=<the rows
// that fit> leaves out what does not fit)"); sweep_ps is the end of the
// last GEMM-bearing command (composite_gemm, softmax_pv, dot) of any PE, reduce_ps = latency -
// sweep; kv_bytes = bytes the DMA engines read minus the dma_load bytes (the Q loads);
// reduce_rounds = LaunchResult::reduce_rounds. Deterministic: no wall-clock figure is part of
// a row.
// reduce_ops = the commands (sends, receives, MATH ops, lse_merge, the store) each PE issues
// at or after its first receive, plus every send and receive, summed over PEs (single-user
// decode: exactly the reduce's commands).
// PREFILL rows: latency, roofline bound and ratio, ratio to flash, binding resource, composites
// issued / full grid, NOC MiB, balance, events (the row fields above).
// Reduce options (`ahbm compare --reduce_options`): CompareReduceOptions runs each variant with
// reduce_payload {TRIPLET, PACKED} x reduce_merge {PRIMITIVE, FUSED}, in that order (variant
// outermost).
#ifndef AHBMSIM_KERNELS_LAUNCH_COMPARE_H_
#define AHBMSIM_KERNELS_LAUNCH_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::launch {

struct CompareRow {
  pb::Kernel kernel = pb::KERNEL_UNSPECIFIED;
  pb::Variant variant = pb::VARIANT_UNSPECIFIED;
  pb::ReducePayload payload = pb::TRIPLET;
  pb::ReduceMerge merge = pb::PRIMITIVE;
  uint64_t reduce_ops = 0;
  uint64_t latency_ps = 0;
  uint64_t sweep_ps = 0;
  uint64_t reduce_ps = 0;
  uint64_t roofline_ps = 0;
  double roofline_ratio = 0;
  double baseline_ratio = 0;  // latency / the reference row's (0 without one)
  std::string binding;
  uint64_t kv_bytes = 0;
  uint32_t reduce_rounds = 0;
  uint64_t events = 0;
  // PREFILL (a run without op log; sweep, reduce and kv columns stay 0): GEMM composites issued
  // and the full grid's count (LaunchResult), bytes over the NOC links (the report's noc units),
  // and balance = the busiest PE's GEMM tile-plan time / the mean over the PEs with GEMM work
  // (the report's per-PE roofline).
  uint64_t composites = 0;
  uint64_t grid_composites = 0;
  uint64_t noc_bytes = 0;
  double balance = 0;
  pb::Report report;
};

// The kernels whose launcher has compare rows, in pb::Kernel order.
std::vector<pb::Kernel> CompareKernels();

// Runs `variants` in order on `workload` (its kernel must be one of CompareKernels(); timing
// mode forced).
absl::StatusOr<std::vector<CompareRow>> Compare(const pb::Chip& chip, const pb::Workload& workload,
                                                const std::vector<pb::Variant>& variants);

// `variants` x {TRIPLET, PACKED} x {PRIMITIVE, FUSED}; the workload's own reduce_payload and
// reduce_merge are replaced.
absl::StatusOr<std::vector<CompareRow>> CompareReduceOptions(
    const pb::Chip& chip, const pb::Workload& workload, const std::vector<pb::Variant>& variants);

// `reduce_options`: the rows carry payload / merge / reduce_ops columns.
std::string FormatCompareTable(const pb::Chip& chip, const std::vector<CompareRow>& rows,
                               bool reduce_options = false);

}  // namespace ahbm::launch

#endif  // AHBMSIM_KERNELS_LAUNCH_COMPARE_H_
