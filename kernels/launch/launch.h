// Launching a workload (proto/workload.proto) on a chip — the engine of `ahbm run` (DESIGN §4
// "Host/driver API", §6). RunWorkload is the one run path for every kernel; what differs per
// kernel is its launcher (launcher.h), registered by pb::Kernel: decode_run.cc (DECODE),
// selftest_run.cc (SELFTEST_*). A kernel without a launcher is refused as not implemented.
//
// Contract — validation (before anything is simulated), every error ONE line:
// - InvalidArgument "<field>: <reason>", e.g. "kernel: DECODE is not implemented yet",
//   "h_q: not used by SELFTEST_GEMM (got 64); leave it unset" (any set field outside the
//   launcher's Fields() and kernel, data, seed, issue_cost_profile), "d: must be > 0 (got 0);
//   ..." (a field given as 0 where 0 is no value, CheckGivenValues), then the launcher's own
//   checks (Prepare). LaunchOptions: inputs_dir / outputs_dir need data mode and a kernel with
//   inputs / outputs; save_inputs needs data mode, outputs_dir and no inputs_dir. An unknown
//   issue-cost profile is ChipSim's InvalidArgument.
// - Data-mode inputs from inputs_dir: a missing file is NotFound "<dir>/a.npy: no such file";
//   a wrong dtype or shape is InvalidArgument naming the file (host::ReadNpy / ExpectShape).
//   Without inputs_dir the launcher draws them from `seed`.
//
// Contract — the run: RunWorkload returns an error status only for bad input (above) or a
// failure to write a file; a run that fails inside the simulation returns a LaunchResult whose
// runtime_status says so, with the report and op log of what ran. Its kind (base/errors.h):
// deadlock ("deadlock: ..." naming each waiting PE), kernel fault (a kernel's error or arena
// overflow, a command its PE refused) or invariant (a data-plane failure on a checked command).
// Outputs are read (and written to outputs_dir) only when runtime_status is OK. Timing mode
// (data = false) moves no values and produces the same op log as data mode.
#ifndef AHBMSIM_KERNELS_LAUNCH_LAUNCH_H_
#define AHBMSIM_KERNELS_LAUNCH_LAUNCH_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/models/hbm_call_memo.h"
#include "kernels/host/npy.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::launch {

struct LaunchOptions {
  std::string inputs_dir;   // data mode: read the inputs' .npy files here (else from seed)
  std::string outputs_dir;  // data mode: write the outputs' .npy files here (else nowhere)
  std::string trace_path;   // stream the op log here (length-delimited TraceRecords)
  std::string message_trace_path;  // every delivered message here (pb::Envelope, delimited)
  bool per_tile_detail = false;  // op log: one record per tile op as well
  bool reply_ahead = true;       // ChipSimOptions::reply_ahead (false: tests of the shortcut)
  // The plan's CUBE islands are simulated one after another (KernelPlan::CubeSets; not with a
  // message trace or one_group); false keeps one heap (tests compare the two).
  bool islands = true;
  bool keep_op_log = true;       // false: LaunchResult::op_log holds only the header (big runs)
  // Data mode: also write the inputs generated from `seed` (LaunchResult::inputs, as the kernels
  // see them) into outputs_dir, so a run can be checked with any other tool. Needs outputs_dir
  // and no inputs_dir.
  bool save_inputs = false;
  // BANK HBM channels: the call memo's mode (ChipSimOptions::hbm_call_memo).
  sim::HbmCallMemo::Mode hbm_call_memo = sim::HbmCallMemo::Mode::kOn;
  // DESIGN §3: simulate only the plan's first CUBE set (a KV head's CUBE Group) when its sets
  // are interchangeable, and report the full chip: latency, events and the roofline's
  // communication path are the set's; every other set's units get the simulated set's stats
  // (ChipSimOptions::mirrors), so the per-kind sums and every PE's roofline equal the full
  // chip's (kernels/launch/one_group_test: every decode and prefill variant; short_context only
  // with kv_per_cube 1, more puts several KV heads on one CUBE). Per unit a twin's split may
  // differ (baseline_fanout puts its query row at a per-query-head offset: the same bytes on
  // another channel of the PE). The condition: timing mode, KernelPlan::OneGroupRefusal()
  // empty, at least two sets, disjoint, together Cubes(), each inside one SIP (nothing crosses
  // UCIe) and each a translate of the first in the SIP's CUBE mesh. Otherwise the full chip is
  // simulated and LaunchResult::one_group_note says why. An op log, trace or message trace
  // observes what is simulated — the first set's units (its header's cubes); a trace's
  // LaunchRecord carries group_scale and its replay mirrors the same sets. Observing does not
  // change the run: the report is the same with and without them (one_group_test,
  // op_log_observes_test).
  bool one_group = false;
};

struct LaunchResult {
  pb::Report report;
  std::vector<pb::TraceRecord> op_log;
  absl::Status runtime_status;  // KernelRuntime::Run()'s status
  // Data mode: the inputs as the kernels saw them (after rounding to the tensor's dtype) and
  // the outputs (runtime_status OK only), by file stem ("a", "b", "x", "o", "q3").
  std::map<std::string, host::NpyArray> inputs;
  std::map<std::string, host::NpyArray> outputs;
  // KernelPlan::ReduceRounds (DECODE: sequential reduce rounds of the static schedule,
  // decode_run.h).
  uint32_t reduce_rounds = 0;
  // KernelPlan::Level2Rounds / Level1Rounds (DECODE; their sum is reduce_rounds) and
  // RingRotations (PREFILL ring, baseline_dot); a trace's LaunchRecord carries them.
  uint32_t level2_rounds = 0;
  uint32_t level1_rounds = 0;
  uint32_t ring_rotations = 0;
  sim::HbmCallMemo::Stats hbm_call_memo;  // calls and hits of the BANK channels' call memo
  // PREFILL: GEMM composites the kernels issue (causal skip) and the full grid's count.
  uint64_t composites = 0;
  uint64_t grid_composites = 0;
  // CUBE islands the run was simulated as (1: one heap; LaunchOptions::islands).
  uint32_t islands = 1;
  // LaunchOptions::one_group: the CUBE sets the simulated one stood for (1: all were
  // simulated), and when one_group was asked but the full chip simulated, why.
  uint32_t group_scale = 1;
  std::string one_group_note;
};

// The chip a workload runs on: `chip` with the workload's max_inflight_composites (when
// given) as every PE scheduler's limit. RunWorkload and ValidateWorkload hand it to the
// launcher's Prepare and the simulation; a recorded trace holds it (and the workload), and a
// replay on another topology applies the workload's override there too (kernels/replay).
pb::Chip WorkloadChip(const pb::Chip& chip, const pb::Workload& workload);

// The validation part of RunWorkload (fields only; no files are read): lookup, unused fields,
// explicit zeros (CheckGivenValues), the launcher's Prepare.
[[nodiscard]] absl::Status ValidateWorkload(const pb::Chip& chip, const pb::Workload& workload);

// `chip` must have passed topology Validate() (topology::LoadTopologyFile does that).
[[nodiscard]] absl::StatusOr<LaunchResult> RunWorkload(const pb::Chip& chip,
                                                       const pb::Workload& workload,
                                                       const LaunchOptions& options);

}  // namespace ahbm::launch

#endif  // AHBMSIM_KERNELS_LAUNCH_LAUNCH_H_
