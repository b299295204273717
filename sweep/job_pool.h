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
#include "proto/job.pb.h"
#include "sweep/job.h"

namespace ahbm::sweep {

// Runs a list of jobs somewhere and returns their results in job order: the job pool here,
// cluster::ClusterRunner over remote workers, StoreRunner (store.h) around either.
class Runner {
 public:
  virtual ~Runner() = default;
  // Called as each job finishes, in finishing order (which depends on the workers and the
  // machine: for progress displays only, never for results).
  using Done = std::function<void(size_t index, const pb::JobResult& result)>;
  // results[i] is jobs[i]'s result; a job's failure is its result, never the runner's.
  std::vector<pb::JobResult> Run(const std::vector<Job>& jobs, const Done& on_done = nullptr) {
    std::vector<size_t> names(jobs.size());
    for (size_t i = 0; i < names.size(); ++i) names[i] = i;
    return RunNamed(jobs, names, on_done);
  }
  // As Run, with names[i] the number a failure of jobs[i] names ("job <names[i]>: ...") and
  // on_done's index (a part of a longer list: StoreRunner runs what its store lacks).
  virtual std::vector<pb::JobResult> RunNamed(const std::vector<Job>& jobs,
                                              const std::vector<size_t>& names,
                                              const Done& on_done) = 0;
};

// The machine's cores (std::thread::hardware_concurrency; 1 when unknown).
int DefaultWorkers();

class JobPool : public Runner {
 public:
  // workers >= 1 (AHBM_CHECK).
  explicit JobPool(int workers = DefaultWorkers());
  int workers() const { return workers_; }

  // `on_done` runs in the parent as each child is reaped.
  std::vector<pb::JobResult> RunNamed(const std::vector<Job>& jobs,
                                      const std::vector<size_t>& names,
                                      const Done& on_done) override;

 private:
  int workers_;
};

// One job in a child process (crash isolation for a process that must outlive its jobs, such
// as a worker): ExecuteJob's result, or how the child died ("job <index>: killed by signal 9
// (Killed)"), exactly as JobPool reports it. The child is a fork of this process unless
// UseJobProgram named a program, then a fresh process of it (posix_spawn).
pb::JobResult ExecuteInChild(const Job& job, size_t index);

// A fork copies only the calling thread, with every lock another thread held at that moment
// (an allocator's, CAF's): a process running CAF's threads (a worker, a client with workers)
// must not fork a simulation. It names a program instead — /proc/self/exe, the very binary
// running — and ExecuteInChild runs `<program> __job` with the JobSpec on its stdin and reads
// the JobResult from its stdout; that program's main calls JobChildMain() for "__job".
inline constexpr char kJobCommand[] = "__job";
void UseJobProgram(const std::string& program);
// Reads a pb::JobSpec from stdin, runs it, writes the pb::JobResult to stdout: exit 0; a spec
// that does not parse or does not validate: exit 2 with one line on stderr.
int JobChildMain();

// The pool's engine: work(i) for i in [0, n) each in a forked child (at most
// `workers` at once), returning the bytes the child's work returned, in index
// order; a child that dies or exits non-zero is INTERNAL "job <names[i]>: <how>" (names empty:
// i). `on_done(i, result)` (optional) runs in the parent as child i is reaped.
std::vector<absl::StatusOr<std::string>> ForkEach(
    size_t n, int workers, const std::function<std::string(size_t)>& work,
    const std::function<void(size_t, const absl::StatusOr<std::string>&)>& on_done = nullptr,
    const std::vector<size_t>& names = {});

}  // namespace ahbm::sweep

#endif  // AHBMSIM_SWEEP_JOB_POOL_H_
