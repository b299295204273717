// `ahbm slurm <sweep|milestone> --tasks=N [--cpus_per_task=C] [--partition=P] [--time=T]
// [--sbatch=OPTION ...] [--ahbm=PATH] [--out_dir=D] [--wait] [--dry_run] [its flags]`: the
// command's job list as a Slurm job array, one shard per task, and the merge as a job after it
// (cluster/slurm.h; README "Running on a Slurm cluster").
//
// Contract: the command's flags are checked here as the command checks them — the whole job
// list is built (cluster::RunMode::plan), nothing runs — so a bad flag is refused at
// submission in the command's own words, never in a task's log. Refused as well, one line
// each: no command or another command; the placement flags, which the array replaces (--jobs:
// --cpus_per_task; --shard; --workers and the rest); a sweep's --out / --json (the merge writes
// sweep.csv and sweep.json into --out_dir, which a sweep must name); --tasks missing or more
// than the jobs; an --ahbm path that is not an executable file; and CheckSlurmRequest's. The
// job ids, the logs and the report folder go to stdout; --wait then waits and exits as Wait
// says (the highest failed task's exit code); --dry_run prints the scripts and the sbatch
// commands and submits nothing (it still creates --out_dir, as the command's checks do).
#ifndef AHBM_CLI_SLURM_COMMAND_H_
#define AHBM_CLI_SLURM_COMMAND_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/flags.h"
#include "cluster/placement.h"

namespace ahbm::cli {

// A command `ahbm slurm` can submit: its name, flags, and a run of it in a RunMode.
struct SubmittableCommand {
  std::string name;
  std::vector<FlagSpec> flags;
  std::function<absl::Status(const ParsedFlags&, cluster::RunMode)> run;
};

// `ahbm slurm`'s own flags (`ahbm help slurm`).
std::vector<FlagSpec> SlurmFlags();
// The flags `ahbm slurm ...` parses: its own and those of the command its first argument that
// is not a flag names (before or after the flags).
std::vector<FlagSpec> SlurmFlagsFor(const std::vector<SubmittableCommand>& commands,
                                    const std::vector<std::string>& args);

absl::Status RunSlurm(const ParsedFlags& flags, const std::vector<SubmittableCommand>& commands);

}  // namespace ahbm::cli

#endif  // AHBM_CLI_SLURM_COMMAND_H_
