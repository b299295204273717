#include "sweep/job_pool.h"

#include <signal.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::sweep {
namespace {

pb::Chip SmallChip() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

// Decode on the small chip (4 PEs per CUBE): S {512, 2000, 4096} x {opt1, opt3, opt2}; job 4
// is refused (h_q 0).
std::vector<Job> DecodeJobs() {
  std::vector<Job> jobs;
  for (uint64_t s : {512, 2000, 4096}) {
    for (pb::Variant v : {pb::OPT1, pb::OPT3, pb::OPT2}) {
      Job job;
      job.chip = SmallChip();
      job.workload.set_kernel(pb::DECODE);
      job.workload.set_variant(v);
      job.workload.set_h_q(8);
      job.workload.set_h_kv(2);
      job.workload.set_p(4);
      job.workload.set_s(s);
      job.options.keep_op_log = false;
      jobs.push_back(job);
    }
  }
  jobs[4].workload.set_h_q(0);
  return jobs;
}

std::vector<std::string> Serialized(const std::vector<pb::JobResult>& results) {
  std::vector<std::string> out;
  for (const pb::JobResult& r : results) out.push_back(r.SerializeAsString());
  return out;
}

TEST(JobPool, OneAndThreeWorkersGiveTheSameBytesInJobOrder) {
  const std::vector<Job> jobs = DecodeJobs();
  const std::vector<pb::JobResult> one = JobPool(1).Run(jobs);
  const std::vector<pb::JobResult> three = JobPool(3).Run(jobs);
  ASSERT_EQ(one.size(), jobs.size());
  EXPECT_EQ(Serialized(one), Serialized(three));
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (i == 4) {
      EXPECT_EQ(JobStatus(one[i]).code(), absl::StatusCode::kInvalidArgument)
          << one[i].status_message();
      EXPECT_FALSE(one[i].has_report());
      continue;
    }
    EXPECT_TRUE(JobStatus(one[i]).ok()) << i << ": " << one[i].status_message();
    EXPECT_GT(one[i].report().latency_ps(), 0u);
  }
  // Job order: for each variant, S = 4096 (jobs 6..8) takes longer than S = 512 (jobs 0..2).
  for (size_t v = 0; v < 3; ++v) {
    EXPECT_LT(one[v].report().latency_ps(), one[6 + v].report().latency_ps());
  }
}

TEST(JobPool, TheResultIsTheRunsOwn) {
  std::vector<Job> jobs = DecodeJobs();
  jobs.resize(1);
  absl::StatusOr<launch::LaunchResult> direct =
      launch::RunWorkload(jobs[0].chip, jobs[0].workload, jobs[0].options);
  ASSERT_TRUE(direct.ok());
  const std::vector<pb::JobResult> pooled = JobPool(2).Run(jobs);
  EXPECT_EQ(pooled[0].report().SerializeAsString(), direct->report.SerializeAsString());
  EXPECT_EQ(pooled[0].reduce_rounds(), direct->reduce_rounds);
}

TEST(ForkEach, ACrashingOrKilledJobIsThatJobsError) {
  const auto work = [](size_t i) -> std::string {
    if (i == 1) std::abort();
    if (i == 2) raise(SIGKILL);
    if (i == 3) std::_Exit(7);
    // More than a pipe holds: the pool reads while the children write.
    return std::string(200000 + i, 'a' + static_cast<char>(i));
  };
  for (int workers : {1, 2, 4}) {
    const std::vector<absl::StatusOr<std::string>> r = ForkEach(5, workers, work);
    ASSERT_EQ(r.size(), 5u);
    ASSERT_TRUE(r[0].ok());
    EXPECT_EQ(*r[0], std::string(200000, 'a'));
    EXPECT_EQ(r[1].status().message(), "job 1: killed by signal 6 (Aborted)");
    EXPECT_EQ(r[2].status().message(), "job 2: killed by signal 9 (Killed)");
    EXPECT_EQ(r[3].status().message(), "job 3: exited with code 7");
    ASSERT_TRUE(r[4].ok());
    EXPECT_EQ(*r[4], std::string(200004, 'e'));
  }
}

TEST(JobPool, DefaultWorkersIsAtLeastOne) { EXPECT_GE(DefaultWorkers(), 1); }

}  // namespace
}  // namespace ahbm::sweep
