// One simulation job (a chip, a workload, launch options) and how it runs wherever it runs: a
// forked child of the job pool (job_pool.h), a remote worker (cluster/worker.h), each through
// ExecuteJob, so a job's result is the same bytes wherever it ran.
//
// Contract:
// - ExecuteJob(job, index) runs launch::RunWorkload and returns its pb::JobResult: the status
//   (RunWorkload's refusal with no report, else the run's runtime_status with the report of
//   what ran), LaunchResult's figures, the op log when keep_op_log. With reference_check (data
//   mode from the seed, no files) the outputs are compared with the reference attention
//   (reference_check.h) and only JobResult.reference comes back: a refusal or a failed run is
//   an infinite error whose note says why.
// - ToSpec: the job as a pb::JobSpec for another process; FailedPrecondition for a job that
//   reads or writes files (inputs_dir, outputs_dir, trace paths, save_inputs), which cannot
//   leave the machine. FromSpec: the receiving side's check, InvalidArgument "job: <why>" for a
//   chip that fails topology validation or an unknown call-memo mode; never a crash.
// - SpecDigest: 16 hex digits over the spec's deterministic serialization (store.h keys results
//   by it). SchemaDigest: over job.proto and every file it imports, so two builds whose
//   messages differ refuse to exchange jobs (cluster/worker.h's handshake).
#ifndef AHBMSIM_SWEEP_JOB_H_
#define AHBMSIM_SWEEP_JOB_H_

#include <cstddef>
#include <string>

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
  bool reference_check = false;  // data mode: JobResult.reference, no arrays (see above)
};

pb::JobResult ExecuteJob(const Job& job);

absl::StatusOr<pb::JobSpec> ToSpec(const Job& job);
absl::StatusOr<Job> FromSpec(const pb::JobSpec& spec);

std::string SpecDigest(const pb::JobSpec& spec);

// The status a JobResult holds — code, message and kind (base/errors.h), so a deadlock or a
// kernel's fault in a child or on a worker is still one here — and a result that is only one.
void SetJobStatus(const absl::Status& status, pb::JobResult* out);
absl::Status JobStatus(const pb::JobResult& result);
pb::JobResult FailedResult(const absl::Status& status);
std::string SchemaDigest();

}  // namespace ahbm::sweep

#endif  // AHBMSIM_SWEEP_JOB_H_
