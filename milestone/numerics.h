// The milestone's numerical check panel: every decode and prefill variant the panels run (and
// short_context for decode) once in data mode at a reduced shape on the milestone's chip, its
// output against the float64 reference attention (tests/attention_reference.h: written from the
// definition, sharing no code with the kernels) — the numbers behind the timing panels are the
// ADR's attention (ADR §A; the merge of partial (m, l, O), §4).
//
// Contract:
// - NumericWorkloads(shape): decode opt1, opt3, opt2, opt2_lookahead, baseline_dot,
//   baseline_fanout, baseline_fanout_group, baseline_rev1_tree, short_context, auto at
//   S = decode_s, then prefill flash, ring, short_context, baseline_dot, baseline_fanout, auto
//   at S = prefill_s (T_q = S); one request, data mode, seed kSeed, every other field the
//   kernel's default — except baseline_fanout_group, which runs C 2, P 4 (its all-to-all over
//   the full chip's C*P = 64 ranks takes ~60 s CPU; 8 ranks test the same code).
// - The error is the random differential test's (tests/random_diff.h): the largest
//   |O - O_ref| over every output element, against testing::kAttentionTolerance x
//   max(1, max |V|). A NaN or Inf in an output, a missing output or a size mismatch is an
//   infinite error (not ok).
// - RunNumericChecks validates every workload first (a refusal is returned, one line naming
//   the variant); then runs each as a job with reference_check (sweep/job.h: where the job
//   runs, it computes its error and sends back the figures only): results in workload order,
//   the same for any worker count. A run that fails inside the simulation or a child that
//   crashes is that check's failure (ok false, `note` says why), not the panel's.
#ifndef AHBMSIM_MILESTONE_NUMERICS_H_
#define AHBMSIM_MILESTONE_NUMERICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/host/npy.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"
#include "proto/job.pb.h"
#include "sweep/job.h"
#include "sweep/reference_check.h"

namespace ahbm::milestone {

inline constexpr uint64_t kSeed = 1;

// Llama3-70B's heads at small S: ~21 s CPU for the 16 runs on topology/chip_4sip
// (milestone/README.md).
struct NumericShape {
  uint32_t h_q = 64, h_kv = 8, d = 128;
  uint64_t decode_s = 2048;
  uint64_t prefill_s = 128;
};

std::vector<pb::Workload> NumericWorkloads(const NumericShape& shape);

using sweep::CompareWithReference;
using sweep::OutputError;

struct NumericCheck {
  std::string kernel;   // "decode", "prefill"
  std::string variant;  // lower case, as the panels name it
  std::string shape;    // "H_q 64, H_kv 8, d 128, S 2048" (", C 2, P 4" when set)
  double max_abs_error = 0;
  double tolerance = 0;
  bool ok = false;
  std::string note;  // why not ok, when the error does not say it
};

// `on_done(done, n)` (optional) as each check's child is reaped, for a progress display.
absl::StatusOr<std::vector<NumericCheck>> RunNumericChecks(
    const pb::Chip& chip, int workers, const NumericShape& shape = {},
    const std::function<void(size_t done, size_t n)>& on_done = nullptr);

// RunNumericChecks in steps (command.cc runs every job of the milestone in one list): the
// refusal of a workload the chip cannot run, the jobs (JobOptions.reference_check), the checks
// from their results in workload order.
absl::Status ValidateNumericWorkloads(const pb::Chip& chip,
                                      const std::vector<pb::Workload>& workloads);
std::vector<sweep::Job> NumericPoolJobs(const pb::Chip& chip,
                                        const std::vector<pb::Workload>& workloads);
std::vector<NumericCheck> ChecksFrom(const std::vector<pb::Workload>& workloads,
                                     const std::vector<pb::JobResult>& results);

// The panel as a table of at most 100 columns, a failing row's note on the line below it.
std::string FormatNumericChecks(const std::vector<NumericCheck>& checks);

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_NUMERICS_H_
