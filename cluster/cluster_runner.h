// ClusterRunner: a sweep::Runner that spreads jobs over `ahbm worker`s (worker.h) and this
// machine's cores, and merges the results in job order.
//
// Contract:
// - Create connects to every worker and passes its hello (protocol.h). A worker that cannot be
//   reached is left out with a line on stderr; one that refuses this client (another build or
//   schema) is InvalidArgument "--workers: <host:port> refused this client: <why>"; with no
//   worker reached and no local slots, Unavailable "--workers: none reached (...)".
// - RunNamed hands each worker as many jobs at once as its hello offered and the local cores
//   `local_slots` jobs; every request is timed (`timeout`) and every worker monitored. A worker
//   that dies, drops its connection or does not answer in time is lost: its jobs in flight go
//   back to the front of the queue and run elsewhere (a line on stderr names them), and any
//   late answer from it is ignored. When no worker and no local slot is left, every job not
//   done is ABORTED "job <i>: not done: no worker left (<each loss>)".
// - A result is the job's own (sweep::ExecuteJob where it ran): the same bytes as a local run.
//   A worker's refusal of a job (malformed, too big) is that job's INTERNAL failure.
// - Summary(): jobs per worker and local, and the jobs re-run after a loss.
#ifndef AHBMSIM_CLUSTER_CLUSTER_RUNNER_H_
#define AHBMSIM_CLUSTER_CLUSTER_RUNNER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/tls.h"
#include "sweep/job_pool.h"

namespace caf {
class actor_system;
class actor_system_config;
}  // namespace caf

namespace ahbm::cluster {

struct ClusterOptions {
  std::vector<std::string> workers;  // host:port
  int local_slots = 0;               // jobs at once on this machine (0: workers only)
  // One job's answer; reaching a worker and its hello: the smaller of this and 30 s.
  std::chrono::milliseconds timeout{600000};
  TlsFiles tls;
};

class ClusterRunner : public sweep::Runner {
 public:
  static absl::StatusOr<std::unique_ptr<ClusterRunner>> Create(const ClusterOptions& options);
  ~ClusterRunner() override;

  std::vector<pb::JobResult> RunNamed(const std::vector<sweep::Job>& jobs,
                                      const std::vector<size_t>& names,
                                      const Done& on_done) override;

  std::string Summary() const;
  // The jobs each worker (and "local") has answered so far: "127.0.0.1:4001 5, local 3".
  std::string Tally() const;

  struct Impl;

 private:
  explicit ClusterRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::vector<std::pair<size_t, std::string>> reruns_;  // each re-run job and the worker lost
};

}  // namespace ahbm::cluster

#endif  // AHBMSIM_CLUSTER_CLUSTER_RUNNER_H_
