// `ahbm diff A B` (DESIGN §6): what changed between two runs of the same streams — a run and
// its what-if replay, two profiles, two topologies.
//
// Contract:
// - ReadRun reads a recorded trace (`--trace`, `--trace_out`; streamed, call records skipped)
//   or a report JSON (`--report_json`; a file whose first non-blank byte is '{'). A trace gives
//   its report (the last record of a schema-3 recording) and its Timeline; a report only the
//   report. Errors name the file: NotFound, DataLoss (cut or malformed), InvalidArgument (an op
//   log without the chip, a chip that fails topology Validate, a trace without its report, a
//   JSON without a report's topology_name, workload_summary, issue_cost_profile, latency_ps,
//   units or roofline.bound_ps).
// - CheckSameStreams refuses (InvalidArgument, one line naming B and what differs) two runs
//   that are not of the same streams: two traces whose workloads differ in any field but
//   issue_cost_profile, data and seed (which change timing or values, not the streams), or whose
//   chips differ in geometry (SIPs, CUBE mesh, PE mesh, channels per PE) or simulated CUBEs —
//   the rules of a what-if replay; otherwise (a report on either side) reports whose
//   workload_summary or unit names differ.
// - FirstDivergence matches the steps of two timelines by Step::Key and, for each matched pair,
//   finds the first of issue_ps, start_ps, end_ps that differs; the divergence is the pair whose
//   differing field has the smallest min(A, B) value (ties: A's lower key) — the moment the two
//   timelines part. nullopt when no matched step differs.
// - FormatDiff prints, in this order: each run's name and workload line; latency A, B, delta and
//   ratio B/A; the roofline bound and ratio; per unit kind (in A's report order) the units,
//   summed busy_ps A and B, the delta and the largest utilisation of each; the steps matched,
//   only in A, only in B, differing, and the first divergence; each run's critical path
//   (Timeline::CriticalPath), at most `max_path_rows` rows each (the rows that span the most
//   time are kept, in time order; a line says how many were left out): the time summed by what
//   held the path (Link::held), then per row its span, what held it, the link that released
//   its step and the step. What a report alone
//   cannot give (steps, critical path) is said in one line. Deterministic text.
#ifndef AHBMSIM_ACTORS_OBSERVE_TRACE_DIFF_H_
#define AHBMSIM_ACTORS_OBSERVE_TRACE_DIFF_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/observe/timeline.h"
#include "proto/report.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::observe {

struct RunRecord {
  std::string name;  // the path given
  std::optional<pb::Report> report;
  std::optional<pb::TraceHeader> header;  // traces only
  std::unique_ptr<Timeline> timeline;     // traces only
};

absl::StatusOr<RunRecord> ReadRun(const std::string& path);

[[nodiscard]] absl::Status CheckSameStreams(const RunRecord& a, const RunRecord& b);

struct Divergence {
  int64_t a_step = -1, b_step = -1;
  std::string field;  // "issue_ps", "start_ps" or "end_ps"
  uint64_t a_ps = 0, b_ps = 0;
};

struct StepMatch {
  uint64_t matched = 0, only_a = 0, only_b = 0, differing = 0;
  std::optional<Divergence> first;
};

StepMatch MatchSteps(const Timeline& a, const Timeline& b);

std::string FormatCriticalPath(const Timeline& t, size_t max_rows);
std::string FormatDiff(const RunRecord& a, const RunRecord& b, size_t max_path_rows);

}  // namespace ahbm::observe

#endif  // AHBMSIM_ACTORS_OBSERVE_TRACE_DIFF_H_
