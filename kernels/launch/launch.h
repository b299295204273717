// Launching a workload (proto/workload.proto) on a chip: validate it, place and write the
// inputs (data mode), add one kernel instance per participating PE, run, read the outputs —
// the engine of `ahbm run` (DESIGN §4 "Host/driver API", §6). Implemented kernels so far: the
// self-tests (kernels/selftest/selftest.h); DECODE and PREFILL are refused as not implemented.
//
// Contract — validation (before anything is simulated), every error ONE line:
// - InvalidArgument "<field>: <reason>", e.g. "gemm_m must be > 0 (got 0)",
//   "cube: 99 is outside the chip's 8 CUBEs", "kernel: DECODE is not implemented yet",
//   "h_q: not used by SELFTEST_GEMM (got 64); leave it unset". A kernel uses `kernel`, `data`,
//   `seed`, `issue_cost_profile` and its own fields: SELFTEST_GEMM gemm_m/k/n and cube,
//   SELFTEST_ALLREDUCE vector_len and cube, SELFTEST_DEADLOCK cube; any other non-zero field is
//   refused. Shapes must fit the PE (TCM arenas, HBM region); the all-reduce needs an IPCQ ring
//   over the CUBE's PE mesh (selftest::SnakeRing), the deadlock demo at least 2 PEs per CUBE.
//   LaunchOptions: inputs_dir / outputs_dir need data mode and a kernel with inputs / outputs.
//   An unknown issue-cost profile is ChipSim's InvalidArgument.
// - Data-mode inputs from inputs_dir: a missing file is NotFound "<dir>/a.npy: no such file";
//   a wrong dtype or shape is InvalidArgument naming the file (host::ReadNpy / ExpectShape).
//   Without inputs_dir the inputs come from `seed`: std::mt19937_64(seed), uniform(-1, 1) in
//   float, drawn in row-major order of each input in the order listed below, then rounded by
//   the store to the tensor's dtype.
//
// Contract — the kernels (P = PEs per CUBE; only CUBE `cube` is simulated):
//   SELFTEST_GEMM       on PE 0 of the CUBE: a.npy [M, K] and b.npy [K, N] (bf16 in its HBM),
//                       out o.npy [M, N] (fp32).
//   SELFTEST_ALLREDUCE  on every PE of the CUBE: x.npy [P, vector_len] (row p = PE p's vector,
//                       fp32 in its HBM), out o.npy [P, vector_len] (row p = what PE p holds:
//                       the sum of all rows). Ring order: SnakeRing over the PE mesh.
//   SELFTEST_DEADLOCK   on every PE of the CUBE: a receive from its first IPCQ neighbour in the
//                       order N, S, E, W; nobody sends. No inputs, no outputs.
//   HBM addresses: host::HbmAllocator, inputs then outputs, in the order listed.
//
// Contract — the run: RunWorkload returns an error status only for bad input (above) or a
// failure to write a file; a run that fails inside the simulation (a deadlock —
// FailedPrecondition "deadlock: ..." naming each waiting PE — or a kernel / command error)
// returns a LaunchResult whose runtime_status says so, with the report and op log of what ran.
// Outputs are read (and written to outputs_dir) only when runtime_status is OK. Timing mode
// (data = false) moves no values and produces the same op log as data mode.
#ifndef AHBMSIM_KERNELS_LAUNCH_LAUNCH_H_
#define AHBMSIM_KERNELS_LAUNCH_LAUNCH_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  bool per_tile_detail = false;  // op log: one record per tile op as well
  bool keep_op_log = true;       // false: LaunchResult::op_log holds only the header (big runs)
  // Data mode: also write the inputs generated from `seed` (LaunchResult::inputs, as the kernels
  // see them) into outputs_dir, so a run can be checked with any other tool. Needs outputs_dir
  // and no inputs_dir.
  bool save_inputs = false;
};

struct LaunchResult {
  pb::Report report;
  std::vector<pb::TraceRecord> op_log;
  absl::Status runtime_status;  // KernelRuntime::Run()'s status
  // Data mode: the inputs as the kernels saw them (after rounding to the tensor's dtype) and
  // the outputs (runtime_status OK only), by file stem ("a", "b", "x", "o").
  std::map<std::string, host::NpyArray> inputs;
  std::map<std::string, host::NpyArray> outputs;
  // DECODE: sequential reduce rounds of the static schedule (Level-2 + Level-1; the baselines:
  // baseline_fanout P − 1, baseline_fanout_group C·P − 1, baseline_rev1_tree ⌈log₂P⌉).
  uint32_t reduce_rounds = 0;
};

// The validation part of RunWorkload (fields only; no files are read).
[[nodiscard]] absl::Status ValidateWorkload(const pb::Chip& chip, const pb::Workload& workload);

// `chip` must have passed topology Validate() (topology::LoadTopologyFile does that).
[[nodiscard]] absl::StatusOr<LaunchResult> RunWorkload(const pb::Chip& chip,
                                                       const pb::Workload& workload,
                                                       const LaunchOptions& options);

}  // namespace ahbm::launch

#endif  // AHBMSIM_KERNELS_LAUNCH_LAUNCH_H_
