// JobPool: independent simulation jobs (a chip, a workload, LaunchOptions, each through
// launch::RunWorkload) on several processes at once (DESIGN §3: parallelism across runs, never
// inside one simulation).
//
// Contract:
// - Each job runs in a forked child, at most `workers` children at a time; the child sends its
//   result back over a pipe as a serialized pb::JobResult (proto/job.proto) and exits.
// - Results come back in JOB ORDER whatever the worker count and finishing order, and a job's
//   result depends only on the job: 1 and N workers give byte-identical results.
// - A job's failure is that job's result, never the pool's: RunWorkload's refusal (status, no
//   report), a failed run (runtime_status, report of what ran), or a child that crashed, was
//   killed or sent a result cut short (INTERNAL "job <i>: killed by signal 9 (Killed)", ...).
// - Data-mode inputs / outputs are not sent back; the op log is, when options.keep_op_log.
// - Call from a thread that may fork (the parent runs no simulation while children run);
//   stdout and stderr are flushed before each fork.
#ifndef AHBMSIM_SWEEP_JOB_POOL_H_
#define AHBMSIM_SWEEP_JOB_POOL_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/launch/launch.h"
#include "proto/job.pb.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::sweep {

struct Job {
  pb::Chip chip;  // must have passed topology Validate()
  pb::Workload workload;
  launch::LaunchOptions options;
};

// The machine's cores (std::thread::hardware_concurrency; 1 when unknown).
int DefaultWorkers();

class JobPool {
 public:
  // workers >= 1 (AHBM_CHECK).
  explicit JobPool(int workers = DefaultWorkers());
  int workers() const { return workers_; }

  // Called in the parent as each job finishes, in finishing order (which depends on the worker
  // count and the machine: for progress displays only, never for results).
  using Done = std::function<void(size_t index, const pb::JobResult& result)>;

  // results[i] is jobs[i]'s result.
  std::vector<pb::JobResult> Run(const std::vector<Job>& jobs, const Done& on_done = nullptr) const;

 private:
  int workers_;
};

// The job's status as JobResult holds it.
absl::Status JobStatus(const pb::JobResult& result);

// The pool's engine: work(i) for i in [0, n) each in a forked child (at most
// `workers` at once), returning the bytes the child's work returned, in index
// order; a child that dies or exits non-zero is INTERNAL "job <i>: <how>".
// `on_done(i, result)` (optional) runs in the parent as child i is reaped.
std::vector<absl::StatusOr<std::string>> ForkEach(
    size_t n, int workers, const std::function<std::string(size_t)>& work,
    const std::function<void(size_t, const absl::StatusOr<std::string>&)>& on_done = nullptr);

}  // namespace ahbm::sweep

#endif  // AHBMSIM_SWEEP_JOB_POOL_H_
