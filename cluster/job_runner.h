// The actor that runs one job and quits: spawned detached (its own thread, as a blocking
// simulation needs) by a worker for each job it takes, and by a client for each job it runs on
// its own cores. The job runs in a child process (sweep::ExecuteInChild), so a job that crashes
// is that job's result and the process goes on serving.
//
//   (job_atom, index, JobSpec bytes) -> (job_atom, index, ok, JobResult bytes | refusal)
//
// A spec that does not parse or whose chip fails validation is refused (ok false, one line);
// never a crash. The process has CAF's threads running, so the child is not a fork but a fresh
// `<this binary> __job` (sweep::UseJobProgram, set by the worker and the client): a fork
// copied the ASan allocator's lock held by another thread and hung (cluster_test under asan).
#ifndef AHBMSIM_CLUSTER_JOB_RUNNER_H_
#define AHBMSIM_CLUSTER_JOB_RUNNER_H_

#include "caf/actor.hpp"
#include "caf/actor_system.hpp"

namespace ahbm::cluster {

caf::actor SpawnJobRunner(caf::actor_system& system);

}  // namespace ahbm::cluster

#endif  // AHBMSIM_CLUSTER_JOB_RUNNER_H_
