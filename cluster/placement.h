// Where a command's jobs run, from its flags: this machine's cores (--jobs), `ahbm worker`s
// (--workers, --local, --worker_timeout, the --tls_ files), a slice of the list (--shard), the
// results already in the output folder (--resume) — and the job store that makes the last two
// possible (sweep/store.h). `ahbm sweep` and `ahbm milestone` take these flags; none of them
// changes a figure of the output.
//
// Contract:
// - MakePlacement checks the flags before anything runs (one line naming the flag): --jobs a
//   positive integer, --worker_timeout a positive number of seconds, --shard i/n, --local
//   false only with --workers, --shard and --resume only with an output folder, workers
//   reached and accepting this build (cluster_runner.h).
// - RunMode::plan (`ahbm slurm`): the flag checks above, then a runner that only counts the
//   jobs; no pool, worker or store is made, partial() is true and Finish is OK.
// - runner(): runs the jobs where the flags say, through the store in `out_dir` when there is
//   one: every finished result is kept there, so an interrupted run resumes.
// - Finish(results): after the run, OK, or: Unavailable naming the jobs no worker was left to
//   run; NotFound naming the jobs a merge found no result for; the store's write error. On
//   stderr: the jobs per worker, the jobs re-run, and for a shard what it ran and where its
//   results are. partial(): this run was one shard (the command writes no report).
#ifndef AHBMSIM_CLUSTER_PLACEMENT_H_
#define AHBMSIM_CLUSTER_PLACEMENT_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "proto/job.pb.h"
#include "sweep/job_pool.h"
#include "sweep/store.h"

namespace ahbm::cluster {

class ClusterRunner;

// --jobs, --workers, --local, --worker_timeout, --tls_cert, --tls_key, --tls_ca, --shard,
// --resume.
std::vector<cli::FlagSpec> PlacementFlags();
bool IsPlacementFlag(std::string_view name);

// --jobs: simulations at once on this machine, 1 to 1024 (default its cores); InvalidArgument
// "--jobs: must be an integer from 1 to 1024 (got '<text>')". Also `ahbm worker`'s --jobs.
absl::StatusOr<int> JobsFlag(const cli::ParsedFlags& flags);

// What a command does with its job list, beyond what its flags say.
struct RunMode {
  bool merge = false;      // `ahbm merge`: every result from the store, nothing runs
  size_t* plan = nullptr;  // `ahbm slurm`: every flag checked, the job count stored here;
                           // nothing runs, no store is opened (partial(): no report)
};

struct PlacementRequest {
  std::string command;  // "sweep", "milestone": the store's manifest
  std::string out_dir;  // "" : no store (then no --shard, no --resume)
  RunMode mode;
};

class Placement {
 public:
  ~Placement();
  sweep::Runner& runner() { return *top_; }
  bool partial() const { return shard_.count > 0 || planner_ != nullptr; }
  absl::Status Finish(const std::vector<pb::JobResult>& results) const;
  // For a progress line while the jobs run: "jobs per worker: 127.0.0.1:4001 5, local 3" with
  // --workers, "" otherwise.
  std::string ProgressNote() const;

 private:
  friend absl::StatusOr<std::unique_ptr<Placement>> MakePlacement(const cli::ParsedFlags&,
                                                                  const PlacementRequest&);
  Placement() = default;
  std::unique_ptr<sweep::JobPool> pool_;
  std::unique_ptr<ClusterRunner> cluster_;
  std::unique_ptr<sweep::StoreRunner> store_;
  std::unique_ptr<sweep::Runner> planner_;  // RunMode::plan
  sweep::Runner* top_ = nullptr;
  sweep::Shard shard_;
  std::string out_dir_;
};

absl::StatusOr<std::unique_ptr<Placement>> MakePlacement(const cli::ParsedFlags& flags,
                                                        const PlacementRequest& request);

// The manifest's view of the command line: every flag but the placement flags and the outputs
// (--out_dir, --out, --json), as "--name=value" in the order given.
std::vector<std::string> CommandArgs(const cli::ParsedFlags& flags);

}  // namespace ahbm::cluster

#endif  // AHBMSIM_CLUSTER_PLACEMENT_H_
