// The `ahbm milestone` command (cli/ahbm.cc registers it): the panels (milestone.h), the
// studies (studies.h), the engine timeline's runs (timeline.h) and the numerical checks
// (numerics.h), in that order, as one job list run where the placement flags say (--jobs,
// --workers, --shard, --resume: cluster/placement.h; every result kept in <out_dir>/jobs);
// then the tables, the answers and the
// checks on stdout, and the report folder --out_dir: milestone.json / .csv, sweep_<study>.csv
// with their plots (plot.h), timeline.csv / .svg, index.html (page.h) with the files' digests.
//
// Contract: a bad flag is InvalidArgument "--<flag>: <reason>" (exit 2), given before anything
// runs: --decode_context / --prefill_context 0 or not a number, --users outside 2..16, an
// unknown panel, variant or study, an --out_dir that cannot be created or written. Progress:
// after each run one line "milestone: <what> done, run i of n, <events/s> simulated events/s,
// ETA <s> s" over all the runs, redrawn in place (\r) when stderr is a terminal, one line each
// otherwise (wall-clock: stderr only, never in the files). The page's command line leaves out
// --out_dir and the placement flags, so it too is the same bytes wherever the jobs ran. With
// --shard only the store is written (`ahbm merge` writes the report). A numerical check that
// fails is INTERNAL (exit 1) after everything is written.
#ifndef AHBMSIM_MILESTONE_COMMAND_H_
#define AHBMSIM_MILESTONE_COMMAND_H_

#include <vector>

#include "absl/status/status.h"
#include "cli/flags.h"
#include "cluster/placement.h"
#include "milestone/milestone.h"
#include "proto/topology.pb.h"

namespace ahbm::milestone {

std::vector<cli::FlagSpec> MilestoneFlags();

// `chip`: the --topology flag's chip, loaded by the caller. `mode` (cluster/placement.h): `ahbm
// merge` — every job's result from --out_dir's store, nothing runs; `ahbm slurm` — every check
// made, the jobs counted, nothing runs.
absl::Status RunMilestoneCommand(const cli::ParsedFlags& flags, const pb::Chip& chip,
                                 const ToolInfo& tool, cluster::RunMode mode = {});

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_COMMAND_H_
