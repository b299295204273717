// A job store: the finished jobs of one command in a folder, so a sweep interrupted part way
// resumes (--resume), a batch scheduler's shards each run a slice (--shard=i/n), and
// `ahbm merge` joins the slices into the report an unsharded run writes.
//
// Layout: <dir>/jobs/manifest.textproto (pb::StoreManifest: the command, its flags, the job
// list's length and digest, the shard, the build and schema digests) and one
// <dir>/jobs/<index>.result per finished job (pb::StoredResult: index, the JobSpec's digest,
// the JobResult; gzip-compressed), each written to a temporary name and renamed, so a killed
// run leaves whole files only.
//
// Contract (StoreRunner, around any Runner):
// - The command's jobs are numbered in order over every Run call (one list). A job is taken from
//   the store when `resume` (or `merge`) and <index>.result holds the same JobSpec digest; else,
//   when it is in the shard (index % count == shard, count 0: every job), it runs on the inner
//   runner and its result is stored as it arrives; else its result is ABORTED "job <i>: in
//   shard <k>/<n>" and is not stored. Under `merge` nothing runs: a job without a stored result
//   is ABORTED "job <i>: no result in the merged folders" and listed in missing().
// - A result that is ABORTED (a job not done: another shard's, or lost with every worker) is
//   never stored; every other result is, failures included (they are the job's answer).
// - Without `resume` the folder's old results are removed first (no mixing of two runs).
// - Results depend only on the jobs: a run taken from the store, resumed or merged equals an
//   uninterrupted one byte for byte.
#ifndef AHBMSIM_SWEEP_STORE_H_
#define AHBMSIM_SWEEP_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "sweep/job_pool.h"

namespace ahbm::sweep {

struct Shard {
  uint32_t index = 0;
  uint32_t count = 0;  // 0: not sharded
};

// "i/n" with 0 <= i < n: InvalidArgument "--shard: ..." otherwise.
absl::StatusOr<Shard> ParseShard(const std::string& text);

struct StoreOptions {
  std::string dir;  // the folder (its jobs/ subfolder is the store)
  bool resume = false;
  bool merge = false;  // run nothing: every result from the store
  Shard shard;
};

std::string StoreFolder(const std::string& dir);  // <dir>/jobs
absl::StatusOr<pb::StoreManifest> ReadManifest(const std::string& dir);
// Every <index>.result in <dir>/jobs (any order); DataLoss for a file that does not parse.
absl::StatusOr<std::vector<pb::StoredResult>> ReadResults(const std::string& dir);
absl::Status WriteStored(const std::string& dir, const pb::StoredResult& stored);

// `ahbm merge`: the shards' folders joined into <out_dir>/jobs. Each folder's manifest must
// name the same command, flags, job list, shard count, build and schema as the first
// (InvalidArgument naming the folder and the field otherwise), every shard 0..n-1 must be
// given once, and two folders may not hold different results for one job. Returns the first
// folder's manifest (the command to render). Missing results are found when the command runs.
absl::StatusOr<pb::StoreManifest> MergeStores(const std::vector<std::string>& dirs,
                                              const std::string& out_dir);

class StoreRunner : public Runner {
 public:
  // `manifest`: the command and its flags (the rest is filled in here). The folder is created
  // and, without resume or merge, emptied of old results; InvalidArgument "--out_dir: ..." when
  // it cannot be.
  static absl::StatusOr<std::unique_ptr<StoreRunner>> Create(Runner* inner,
                                                             StoreOptions options,
                                                             pb::StoreManifest manifest);

  std::vector<pb::JobResult> RunNamed(const std::vector<Job>& jobs,
                                      const std::vector<size_t>& names,
                                      const Done& on_done) override;

  const std::vector<size_t>& missing() const { return missing_; }  // merge: jobs not found
  size_t taken() const { return taken_; }                          // results from the store
  size_t ran() const { return ran_; }
  // The first store write that failed (the run goes on; the command reports it at the end).
  const absl::Status& write_status() const { return write_status_; }

 private:
  StoreRunner(Runner* inner, StoreOptions options, pb::StoreManifest manifest)
      : inner_(inner), options_(std::move(options)), manifest_(std::move(manifest)) {}

  Runner* inner_;
  StoreOptions options_;
  pb::StoreManifest manifest_;
  std::string list_digests_;  // every job's spec digest so far, in order
  size_t offset_ = 0;         // jobs numbered by earlier Run calls
  std::vector<size_t> missing_;
  size_t taken_ = 0, ran_ = 0;
  absl::Status write_status_;
};

}  // namespace ahbm::sweep

#endif  // AHBMSIM_SWEEP_STORE_H_
