// The actor that runs one job and quits: spawned detached (its own thread, as a blocking
// simulation needs) by a worker for each job it takes, and by a client for each job it runs on
// its own cores. The job runs in a forked child (sweep::ExecuteInChild), so a job that crashes
// is that job's result and the process goes on serving.
//
//   (job_atom, index, JobSpec bytes) -> (job_atom, index, ok, JobResult bytes | refusal)
//
// A spec that does not parse or whose chip fails validation is refused (ok false, one line);
// never a crash. The fork happens in a process with CAF's threads running: the child only runs
// ExecuteJob (its own actor system, new threads) and writes to its pipe; glibc's and jemalloc's
// fork handlers keep the allocator usable, and no lock of CAF's is taken in the child.
#ifndef AHBMSIM_CLUSTER_JOB_RUNNER_H_
#define AHBMSIM_CLUSTER_JOB_RUNNER_H_

#include "caf/actor.hpp"
#include "caf/actor_system.hpp"

namespace ahbm::cluster {

caf::actor SpawnJobRunner(caf::actor_system& system);

}  // namespace ahbm::cluster

#endif  // AHBMSIM_CLUSTER_JOB_RUNNER_H_
