// `ahbm milestone` (the README's main job): the four Llama3-70B attention panels
// {single_user, multi_user} x {decode, prefill} (H_q 64, H_kv 8, d 128; ADR §A), every variant
// against the pre-ADR baselines, one table per panel and a report folder (milestone.json,
// milestone.csv).
//
// Contract:
// - Jobs (BuildJobs): the runs as data, built before anything runs, in panel order
//   single_user_decode, multi_user_decode, single_user_prefill, multi_user_prefill (those
//   named by `panels`), each panel's variants in kDecodeVariants / kPrefillVariants order,
//   then AUTO (which kernel AUTO picks and why: its workload summary). Single-user panels run
//   S = the context; multi-user panels run users requests with request_lengths S, S/2, S/4,
//   ... (request r: S >> r, at least 1024 tokens (decode) / 128 (prefill)). Timing mode.
//   Decode panels run their variants once per Options::issue_cost_profiles (§9.6): all under
//   the first (issue_cost_profile unset: the topology's default), then all under the next
//   (set), ...; prefill under the topology's default. baseline_fanout_group (minutes at full
//   scale, and more per user) runs in single_user_decode only, and not with quick.
// - quick: decode S 4096, prefill S 512, users 2, no baseline_fanout_group (CI, a first look).
// - Every job is validated (launch::ValidateWorkload) before any runs; then each runs through
//   launch::RunWorkload (keep_op_log = false, one_group = true: a workload symmetric across
//   CUBE sets simulates one set; Row::group_scale). A refusal or a failed run ends the milestone
//   with that status, its message ending "(milestone panel <panel>, variant <variant>)".
// - Row figures: latency, roofline bound and ratio, x best baseline = latency / the fastest
//   baseline_* row of the panel, ideal = max(K/V bytes / HBM bandwidth, FLOPs / bf16 peak) of
//   the ADR kernel's minimum on the most PEs any row of the panel uses (PEs whose GEMM did
//   work; peaks as topology/summary.h computes them), one ideal per panel, so a wasteful
//   baseline — or one that leaves PEs idle — is not flattered by its own roofline: decode
//   K/V bytes = sum over requests of 2 * H_kv * S_r * d * 2 (bf16 K and V, each read once),
//   FLOPs = sum of 4 * H_q * S_r * d (Q.K^T and P.V); prefill K/V bytes likewise, FLOPs =
//   sum of 4 * H_q * d * S_r (S_r + 1) / 2 (causal). x ideal = latency / ideal. x best
//   baseline compares rows of one issue-cost profile. Per-kind utilisation: mean and max over
//   the kind's units of the report's utilisation.
// - Request latency (Report.request_latency_ps: when each request's O was written; its max is
//   the latency): min, median (Spread) and max, and the list. Cross-rank bytes = bytes between
//   ranks: the IPCQ queues' sent bytes (one hop each) + the NOC routers' delivered bytes (once
//   per message at its destination, whatever its hops; UCIe crossings are NOC messages) — the
//   reduce's partials, the ring's K/V, the baselines' fan-out, everything the kernels send.
//   Reduce rounds: total, Level-2 and Level-1 (decode; prefill baseline_fanout's total is its
//   fan-out rounds); ring rotations (prefill ring, baseline_dot: C - 1 per query chunk, the
//   causal skip drops compute only). CPU: issues (pe_cpu ops: commands, sends and receive
//   posts) and stall (UnitStats.stall_ps: its instances' real waits), sum and max over PEs.
// - Output is deterministic: no wall-clock figure is in a row, the table, the JSON or the CSV
//   (the progress lines on stderr only).
#ifndef AHBMSIM_MILESTONE_MILESTONE_H_
#define AHBMSIM_MILESTONE_MILESTONE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/job.pb.h"
#include "proto/workload.pb.h"
#include "sweep/job.h"

namespace ahbm::milestone {

inline constexpr uint32_t kHq = 64, kHkv = 8, kD = 128;  // Llama3-70B attention

struct Options {
  uint64_t decode_context = 131072;
  uint64_t prefill_context = 8192;
  uint32_t users = 4;
  bool quick = false;
  std::vector<std::string> panels;    // empty: all four
  std::vector<std::string> variants;  // lower case; empty: every variant of each panel
  // Decode panels run every variant once per profile listed (IssueCostProfiles), the first
  // being the tables'; empty: the topology's default profile only (the workload leaves
  // issue_cost_profile unset).
  std::vector<std::string> issue_cost_profiles;
};

// The panel names, in run order.
const std::vector<std::string>& PanelNames();

// The chip's issue-cost profiles (ADR-0064, §9.6): its default first, then the others in
// topology order ("zero", "realistic" on every shipped topology).
std::vector<std::string> IssueCostProfiles(const pb::Chip& chip);

struct Job {
  std::string panel;
  pb::Workload workload;
};

// InvalidArgument "--<flag>: <reason>" for a bad option (context 0, users 0 or > 16, an unknown
// panel or variant, variants that leave no run). `variants` keeps each panel's rows of those
// variants (a panel with none is left out).
absl::StatusOr<std::vector<Job>> BuildJobs(const Options& options);

struct Row {
  std::string panel;
  std::string variant;  // lower case; "auto"
  pb::Workload workload;
  pb::Report report;
  uint32_t reduce_rounds = 0;  // Level-2 + Level-1 (decode); prefill baseline_fanout: fan-out
  uint32_t level2_rounds = 0;
  uint32_t level1_rounds = 0;
  uint32_t ring_rotations = 0;
  uint64_t composites = 0;
  // LaunchOptions::one_group: the CUBE sets one simulated set stood for (1: the whole chip was
  // simulated); the report's events are the simulated set's.
  uint32_t group_scale = 1;
  uint64_t kv_min_bytes = 0;  // the ADR kernel's minimal K/V bytes (see above)
  uint64_t min_flops = 0;
  uint32_t ideal_pes = 0;
  uint64_t ideal_ps = 0;
  double best_baseline_ratio = 0;  // 0: no baseline in the panel
  double ideal_ratio = 0;
};

// The requests' latency (Report.request_latency_ps): min, median (an even count: the lower of
// the two middle values) and max; zeros when the report has none.
struct RequestSpread {
  uint64_t min = 0, median = 0, max = 0;
};
RequestSpread Spread(const pb::Report& report);

// Called as each job finishes (in finishing order): the job, how many are done (1 .. n), n,
// and the simulated events of the finished jobs.
using Progress = std::function<void(const Job& job, size_t done, size_t n, uint64_t events)>;

// launch::ValidateWorkload of every job; the first refusal, its message ending
// "(milestone panel <panel>, variant <variant>)".
absl::Status ValidateJobs(const pb::Chip& chip, const std::vector<Job>& jobs);

// Runs the jobs on `workers` processes at once (sweep::JobPool; rows in job order whatever the
// worker count; LaunchOptions one_group: a CUBE Group stands for the chip where the kernel
// allows, the same figures) and fills the rows' ratios.
absl::StatusOr<std::vector<Row>> RunJobs(const pb::Chip& chip, const std::vector<Job>& jobs,
                                         const Progress& progress, int workers);
// RunJobs in two steps, for a command that runs every job of the milestone in one list
// (command.cc): the panels' simulation jobs, then the rows from their results (in job order).
std::vector<sweep::Job> PanelPoolJobs(const pb::Chip& chip, const std::vector<Job>& jobs);
absl::StatusOr<std::vector<Row>> RowsFrom(const pb::Chip& chip, const std::vector<Job>& jobs,
                                          const std::vector<pb::JobResult>& results);

// AUTO's pick as its report says it: "AUTO -> OPT3 (S 131072 >= threshold 2049)".
std::string AutoPick(const pb::Report& report);

// The terminal tables (<= 100 columns): per panel its rows under the panel's first profile,
// with one column of the next profile's latency when the panel ran one ("realistic_us"), the
// requests' latency min / median / max under each multi-user row, and AUTO's pick.
std::string FormatTables(const std::vector<Row>& rows);

struct ToolInfo {
  std::string version;
  std::string commit;
};

std::string ToCsv(const pb::Chip& chip, const std::vector<Row>& rows, const ToolInfo& tool);
std::string ToJson(const pb::Chip& chip, const std::vector<Row>& rows, const ToolInfo& tool);

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_MILESTONE_H_
