// `ahbm sweep`: a grid of runs over workload and topology fields (sweep/grid.h), run on all
// cores (sweep/job_pool.h), one CSV row per point (sweep/README.md).
//
// Contract: --param=P --values=a,b,... pairs, in order (first param outermost); the workload
// and the chip come from the caller (--workload, the workload field flags, --topology). DECODE
// when the workload names no kernel, and the kernel's compare default `s` when neither the
// workload nor a --param gives one. Refused, each one line naming the flag: --values without
// a --param before it, a --param without --values, a parameter given twice or also given as
// its own flag, an unknown parameter, a value that does not parse, --jobs not a positive
// integer, an --out / --json / --out_dir that cannot be written (checked before anything runs),
// the placement flags (cluster/placement.h). A point that is refused or fails is a row with its
// status; the command still exits 0. --out_dir: sweep.csv and sweep.json there, each job's
// result in its jobs/ store; with --shard the run writes only the store (`ahbm merge` the rest).
#ifndef AHBM_CLI_SWEEP_COMMAND_H_
#define AHBM_CLI_SWEEP_COMMAND_H_

#include <vector>

#include "absl/status/status.h"
#include "cli/flags.h"
#include "cluster/placement.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::cli {

// --param, --values, --out, --json, --out_dir and where the jobs run (cluster/placement.h).
std::vector<FlagSpec> SweepFlags();

// `mode`: `ahbm merge` (every job's result from --out_dir's store, nothing runs) or `ahbm slurm`
// (every check made, the jobs counted, nothing runs) — cluster/placement.h.
absl::Status RunSweep(const ParsedFlags& flags, const pb::Chip& chip, pb::Workload workload,
                      cluster::RunMode mode = {});

}  // namespace ahbm::cli

#endif  // AHBM_CLI_SWEEP_COMMAND_H_
