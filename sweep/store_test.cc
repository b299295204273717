#include "sweep/store.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::sweep {
namespace {

// Runs nothing: each job's result names its workload's s (or, with `lose`, is ABORTED as a
// job no worker was left for), and the runner counts the jobs.
class FakeRunner : public Runner {
 public:
  std::vector<pb::JobResult> RunNamed(const std::vector<Job>& jobs,
                                      const std::vector<size_t>& names,
                                      const Done& on_done) override {
    std::vector<pb::JobResult> out;
    for (size_t i = 0; i < jobs.size(); ++i) {
      pb::JobResult r = lose ? FailedResult(absl::AbortedError("not done: no worker left"))
                             : pb::JobResult();
      if (!lose) r.set_status_message(std::to_string(jobs[i].workload.s()));
      ran.push_back(names[i]);
      if (on_done) on_done(names[i], r);
      out.push_back(r);
    }
    return out;
  }
  std::vector<size_t> ran;
  bool lose = false;
};

std::vector<Job> Jobs(size_t n) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  std::vector<Job> jobs;
  for (size_t i = 0; i < n; ++i) {
    Job job{*chip, {}, {}};
    job.workload.set_s(1000 + i);
    jobs.push_back(job);
  }
  return jobs;
}

std::string TempDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

pb::StoreManifest Manifest() {
  pb::StoreManifest m;
  m.set_command("sweep");
  m.add_args("--s=1");
  return m;
}

TEST(ParseShardTest, AcceptsIOfN) {
  ASSERT_TRUE(ParseShard("2/3").ok());
  EXPECT_EQ(ParseShard("2/3")->index, 2u);
  EXPECT_EQ(ParseShard("2/3")->count, 3u);
  for (const char* bad : {"3/3", "1/0", "1", "a/3", "1/3/4", "-1/3", ""}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseShard(bad).status())) << bad;
  }
}

TEST(StoreRunnerTest, ShardsRunTheirSliceAndMergeEqualsOneRun) {
  const std::vector<Job> jobs = Jobs(7);
  const std::string whole = TempDir("whole");
  FakeRunner fake;
  auto runner = StoreRunner::Create(&fake, {whole, false, false, {}}, Manifest());
  ASSERT_TRUE(runner.ok()) << runner.status();
  const std::vector<pb::JobResult> expected = (*runner)->Run(jobs);
  EXPECT_EQ(fake.ran.size(), 7u);

  std::vector<std::string> dirs;
  for (uint32_t i = 0; i < 3; ++i) {
    dirs.push_back(TempDir("shard" + std::to_string(i)));
    FakeRunner shard_fake;
    auto shard = StoreRunner::Create(&shard_fake, {dirs.back(), false, false, {i, 3}}, Manifest());
    ASSERT_TRUE(shard.ok());
    const std::vector<pb::JobResult> part = (*shard)->Run(jobs);
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (j % 3 == i) {
        EXPECT_EQ(part[j].status_message(), expected[j].status_message());
      } else {
        EXPECT_EQ(part[j].status_code(), static_cast<int>(absl::StatusCode::kAborted));
      }
    }
    std::vector<size_t> want;
    for (size_t j = i; j < jobs.size(); j += 3) want.push_back(j);
    EXPECT_EQ(shard_fake.ran, want);
  }
  const std::string merged = TempDir("merged");
  absl::StatusOr<pb::StoreManifest> manifest = MergeStores(dirs, merged);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->command(), "sweep");
  FakeRunner none;
  auto merge = StoreRunner::Create(&none, {merged, true, true, {}}, Manifest());
  ASSERT_TRUE(merge.ok());
  const std::vector<pb::JobResult> joined = (*merge)->Run(jobs);
  EXPECT_TRUE(none.ran.empty());
  EXPECT_TRUE((*merge)->missing().empty());
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(joined[j].SerializeAsString(), expected[j].SerializeAsString()) << j;
  }
}

TEST(StoreRunnerTest, MergeRefusesAMissingShardAndAMissingResult) {
  const std::vector<Job> jobs = Jobs(4);
  std::vector<std::string> dirs;
  for (uint32_t i = 0; i < 2; ++i) {
    dirs.push_back(TempDir("m" + std::to_string(i)));
    FakeRunner fake;
    auto shard = StoreRunner::Create(&fake, {dirs.back(), false, false, {i, 2}}, Manifest());
    ASSERT_TRUE(shard.ok());
    (*shard)->Run(jobs);
  }
  const absl::Status missing_shard = MergeStores({dirs[0]}, TempDir("m_out1")).status();
  EXPECT_EQ(missing_shard.message(), "shard 1/2 missing");
  EXPECT_TRUE(absl::IsInvalidArgument(MergeStores({dirs[0], dirs[0]}, TempDir("m_o")).status()));
  std::filesystem::remove(std::filesystem::path(StoreFolder(dirs[1])) / "3.result");
  const std::string out = TempDir("m_out2");
  ASSERT_TRUE(MergeStores(dirs, out).ok());
  FakeRunner none;
  auto merge = StoreRunner::Create(&none, {out, true, true, {}}, Manifest());
  ASSERT_TRUE(merge.ok());
  const std::vector<pb::JobResult> joined = (*merge)->Run(jobs);
  EXPECT_EQ((*merge)->missing(), std::vector<size_t>{3});
  EXPECT_EQ(joined[3].status_code(), static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_TRUE(none.ran.empty());
}

TEST(StoreRunnerTest, ResumeRunsOnlyWhatIsMissingOrChanged) {
  std::vector<Job> jobs = Jobs(5);
  const std::string dir = TempDir("resume");
  {
    FakeRunner fake;
    auto runner = StoreRunner::Create(&fake, {dir, false, false, {}}, Manifest());
    ASSERT_TRUE(runner.ok());
    (*runner)->Run(jobs);
  }
  std::filesystem::remove(std::filesystem::path(StoreFolder(dir)) / "1.result");
  jobs[3].workload.set_s(9999);  // a changed job is not taken from the store
  FakeRunner fake;
  auto runner = StoreRunner::Create(&fake, {dir, true, false, {}}, Manifest());
  ASSERT_TRUE(runner.ok());
  const std::vector<pb::JobResult> results = (*runner)->Run(jobs);
  EXPECT_EQ(fake.ran, (std::vector<size_t>{1, 3}));
  EXPECT_EQ((*runner)->taken(), 3u);
  EXPECT_EQ(results[3].status_message(), "9999");
  EXPECT_EQ(results[4].status_message(), "1004");
}

TEST(StoreRunnerTest, WithoutResumeOldResultsAreRemoved) {
  const std::vector<Job> jobs = Jobs(3);
  const std::string dir = TempDir("fresh");
  FakeRunner first;
  ASSERT_TRUE(StoreRunner::Create(&first, {dir, false, false, {}}, Manifest()).value()->Run(jobs)
                  .size() == 3);
  FakeRunner second;
  auto again = StoreRunner::Create(&second, {dir, false, false, {}}, Manifest());
  ASSERT_TRUE(again.ok());
  (*again)->Run(jobs);
  EXPECT_EQ(second.ran.size(), 3u);
  EXPECT_EQ((*again)->taken(), 0u);
}

TEST(StoreRunnerTest, AbortedResultsAreNotStored) {
  FakeRunner losing;
  losing.lose = true;
  const std::string dir = TempDir("aborted");
  auto runner = StoreRunner::Create(&losing, {dir, false, false, {}}, Manifest());
  ASSERT_TRUE(runner.ok());
  (*runner)->Run(Jobs(2));
  absl::StatusOr<std::vector<pb::StoredResult>> stored = ReadResults(dir);
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
}

TEST(JobSpecTest, RoundTripsAndRefusesWhatCannotLeaveTheMachine) {
  Job job = Jobs(1)[0];
  job.options.one_group = true;
  job.options.keep_op_log = false;
  job.reference_check = true;
  absl::StatusOr<pb::JobSpec> spec = ToSpec(job);
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<Job> back = FromSpec(*spec);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->options.one_group);
  EXPECT_FALSE(back->options.keep_op_log);
  EXPECT_TRUE(back->reference_check);
  EXPECT_EQ(SpecDigest(*ToSpec(*back)), SpecDigest(*spec));
  job.options.outputs_dir = "/tmp/x";
  EXPECT_TRUE(absl::IsFailedPrecondition(ToSpec(job).status()));
  pb::JobSpec broken = *spec;
  broken.mutable_chip()->set_sips(0);
  EXPECT_TRUE(absl::IsInvalidArgument(FromSpec(broken).status()));
  broken = *spec;
  broken.mutable_options()->set_hbm_call_memo(7);
  EXPECT_TRUE(absl::IsInvalidArgument(FromSpec(broken).status()));
  EXPECT_EQ(SchemaDigest().size(), 16u);
  EXPECT_EQ(SchemaDigest(), SchemaDigest());
}

}  // namespace
}  // namespace ahbm::sweep
