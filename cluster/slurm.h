// `ahbm slurm`: a sweep or the milestone as a Slurm job array — array task i runs shard i/n of
// the job list (--shard, sweep/store.h) into its own folder — and `ahbm merge` as one more job
// that runs only when every task exited 0 (--dependency=afterok, --kill-on-invalid-dep=yes).
// Every file lives under the report folder, which every node must reach at the same path:
//
//   <out_dir>/slurm/array.sbatch, merge.sbatch   the two scripts (sbatch can take them by hand)
//   <out_dir>/slurm/shards/<i>/                  task i's shard: its jobs/ store
//   <out_dir>/slurm/task-<i>.log, task-<i>.exit  task i's output; its exit code once it ended
//   <out_dir>/slurm/merge.log, merge.exit        the merge's
//   <out_dir>/                                   the report the merge writes
//
// Contract:
// - CheckSlurmRequest refuses, with InvalidArgument naming the flag: --tasks outside 1 .. the
//   job count (a task per shard, no empty shard), --cpus_per_task outside 1..1024, a --partition
//   or --time sbatch would not take, an --sbatch option that is not an option, holds a line
//   break or sets what `ahbm slurm` sets itself (naming the flag that does), and an --out_dir
//   that the scripts' #SBATCH lines cannot carry (whitespace, a quote, '%', '\').
// - ArrayScript / MergeScript are pure: the same request gives the same bytes. Every argument
//   of the commands they run is shell-quoted.
// - Submit writes the scripts (removing a previous submission's exit files), submits the
//   array with `sbatch --parsable`, then the merge with --dependency=afterok:<array id>.
//   NotFound when sbatch is not on PATH; Unknown with sbatch's own words when it refuses
//   (a merge it refuses cancels the array first: nothing is left half submitted).
// - Wait polls `squeue` until neither job is pending or running — cancelling a merge left
//   pending on a dependency the array can no longer satisfy — then judges by the exit files:
//   OK when every task and the merge exited 0. Otherwise one line naming every task that
//   failed (its shard, its exit code or that it left none: cancelled, out of time, node lost)
//   and whether the merge ran, carrying the highest failed exit code (WithExitCode; 1 for a
//   task without one), as `sbatch --wait` exits.
#ifndef AHBMSIM_CLUSTER_SLURM_H_
#define AHBMSIM_CLUSTER_SLURM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ahbm::cluster {

struct SlurmRequest {
  std::string command;            // "sweep" or "milestone"
  std::vector<std::string> args;  // its flags as "--name=value", no placement or output flag
  size_t jobs = 0;                // the length of its job list (cluster::RunMode::plan)
  std::string ahbm;               // the executable the jobs run: a path on every node, or a
                                  // name on their PATH
  std::string work_dir;           // absolute: the folder the jobs run in (relative paths in args)
  std::string out_dir;            // absolute: the report folder
  uint64_t tasks = 0;             // array tasks, one shard each
  uint64_t cpus_per_task = 1;     // each task's CPUs and its --jobs
  bool resume = false;            // each task takes its shard's results already stored
  std::string partition;          // "": the cluster's default
  std::string time;               // "": the partition's default time limit
  std::vector<std::string> sbatch_options;  // more #SBATCH options, in order, for both jobs
};

absl::Status CheckSlurmRequest(const SlurmRequest& request);

// <out_dir>/slurm/<name>.
std::string SlurmFile(const SlurmRequest& request, const std::string& name);

std::string ArrayScript(const SlurmRequest& request);
std::string MergeScript(const SlurmRequest& request);
// The two sbatch commands Submit runs, for --dry_run (the merge's names "<array job id>").
std::vector<std::string> SubmitCommands(const SlurmRequest& request);

struct SlurmJobs {
  std::string array_id;
  std::string merge_id;
};

absl::StatusOr<SlurmJobs> Submit(const SlurmRequest& request);

// `poll`: the interval between two squeue calls in the first minute; 5× it until the tenth,
// 30× it after that.
absl::Status Wait(const SlurmRequest& request, const SlurmJobs& jobs,
                  absl::Duration poll = absl::Seconds(1));

}  // namespace ahbm::cluster

#endif  // AHBMSIM_CLUSTER_SLURM_H_
