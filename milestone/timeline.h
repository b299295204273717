// The report's engine timeline (ADR TL;DR opt1 / opt3 / opt2, §5.6): one PE's CPU stalls and
// DMA, GEMM and MATH engines over a short decode, one row of bars per engine per run, so the
// opt1 bubble (the GEMM idle while softmax runs on MATH) and how opt3 and opt2 fill it can be
// seen side by side.
//
// Contract:
// - TimelineJobs: the runs to draw, as sweep::Jobs for the job pool — decode opt1, opt3, opt2
//   (in that order) at the milestone's shape (H_q 64, H_kv 8, d 128) with S = 2048 on one PE
//   per KV head (C = 1, P = 1: 8 tiles of 256, no reduction), timing mode, the topology's
//   issue-cost profile, keep_op_log = true, one_group = false (the timeline draws every CUBE).
//   The PE drawn is global PE 0 ("sip0.cube0.pe0": KV head 0's).
// - TimelineSvg writes the CSV (header "run,engine,start_ns,end_ns"; rows by run in `runs`
//   order, then engine in the order "CPU stall", "DMA", "GEMM", "MATH", then start, then end;
//   times in ns with three decimals) and, beside the SVG, <stem>.dat and <stem>.gp, then runs
//   gnuplot (plot.h's RunGnuplot). A run's rows: its op records on <pe_name>.dma, .gemm and
//   .math, and its stall records of `pe` (the CPU waiting). The window is [0, the latest end
//   of any run's rows]: the runs share one time axis. Same inputs, same bytes.
// - Errors: InvalidArgument "timeline: no run to draw"; "timeline run <label>: no DMA, GEMM or MATH
// op on <pe_name>" for a
//   run with nothing to draw (or an empty op log); a file that cannot be written and gnuplot's
//   errors as PlotSvg's.
#ifndef AHBMSIM_MILESTONE_TIMELINE_H_
#define AHBMSIM_MILESTONE_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"
#include "sweep/job_pool.h"

namespace ahbm::milestone {

struct TimelineRun {
  std::string label;                    // "opt1"
  std::vector<pb::TraceRecord> op_log;  // the run's op log (LaunchResult / JobResult)
  std::string pe_name;                  // the PE drawn: its units' name prefix, "sip0.cube0.pe0"
  uint32_t pe = 0;                      // the same PE's global index (its CPU's stall records)
};

struct TimelineJob {
  std::string label;
  sweep::Job job;
  std::string pe_name;
  uint32_t pe = 0;
};

// The decode runs the report's timeline draws, on `chip` (see above).
std::vector<TimelineJob> TimelineJobs(const pb::Chip& chip);

// The runs to draw from the job pool's results for TimelineJobs (results[i] is jobs[i]'s): the
// first job that was refused or failed is an error "timeline run <label>: <its status>".
absl::StatusOr<std::vector<TimelineRun>> TimelineRunsFrom(
    const std::vector<TimelineJob>& jobs, const std::vector<pb::JobResult>& results);

[[nodiscard]] absl::Status TimelineSvg(const std::vector<TimelineRun>& runs,
                                       const std::string& csv_path, const std::string& svg_path);

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_TIMELINE_H_
