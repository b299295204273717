// The scripts `ahbm slurm` submits, run by bash without Slurm: a stand-in `ahbm` records the
// arguments it gets, so the quoting, the shard and the exit files are checked as the nodes
// would see them. The checks of the request, one refusal each.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/errors.h"
#include "cluster/slurm.h"
#include "gtest/gtest.h"

namespace ahbm::cluster {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void Write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

class SlurmScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = fs::path(tmp != nullptr ? tmp : "/tmp") / "slurm_script_test";
    fs::remove_all(root_);
    fs::create_directories(root_ / "work");
    fs::create_directories(root_ / "out" / "slurm");
    // The stand-in: one argument per line into args-<its first argument>, then exit as told.
    Write(root_ / "fake_ahbm",
          "#!/bin/bash\nprintf '%s\\n' \"$@\" > \"$PWD/args-$1\"\nexit ${FAKE_EXIT:-0}\n");
    fs::permissions(root_ / "fake_ahbm", fs::perms::owner_all);
    request_.command = "sweep";
    request_.args = {"--kernel=decode", "--param=s", "--values=1024,2048",
                     "--workload=it's a \"file\" $HOME `x`.textproto"};
    request_.jobs = 6;
    request_.ahbm = (root_ / "fake_ahbm").string();
    request_.work_dir = (root_ / "work").string();
    request_.out_dir = (root_ / "out").string();
    request_.tasks = 3;
  }

  // Runs `script` as Slurm would run array task `task` (or the merge: task < 0).
  int RunScript(const std::string& script, int task, int exit_code) {
    const fs::path path = root_ / "script.sh";
    Write(path, script);
    const std::string command =
        absl::StrCat("SLURM_ARRAY_TASK_ID=", task < 0 ? "" : std::to_string(task),
                     " FAKE_EXIT=", exit_code, " bash ", path.string(), " >/dev/null 2>&1");
    const int status = std::system(command.c_str());
    return WEXITSTATUS(status);
  }

  fs::path root_;
  SlurmRequest request_;
};

TEST_F(SlurmScriptTest, AnArrayTaskRunsItsShardWithTheArgumentsAsGiven) {
  ASSERT_TRUE(CheckSlurmRequest(request_).ok());
  request_.resume = true;
  request_.cpus_per_task = 4;
  EXPECT_EQ(RunScript(ArrayScript(request_), 1, 0), 0);
  const std::string out = request_.out_dir;
  EXPECT_EQ(Read(root_ / "work" / "args-sweep"),
            "sweep\n--kernel=decode\n--param=s\n--values=1024,2048\n"
            "--workload=it's a \"file\" $HOME `x`.textproto\n--jobs=4\n--resume\n--shard=1/3\n"
            "--out_dir=" + out + "/slurm/shards/1\n");
  EXPECT_EQ(Read(root_ / "out" / "slurm" / "task-1.exit"), "0\n");
  // A failing task: its exit code is the script's and its exit file's.
  EXPECT_EQ(RunScript(ArrayScript(request_), 2, 7), 7);
  EXPECT_EQ(Read(root_ / "out" / "slurm" / "task-2.exit"), "7\n");
}

TEST_F(SlurmScriptTest, TheArrayScriptAsksSlurmForWhatTheRequestSays) {
  request_.partition = "debug";
  request_.time = "0:30:00";
  request_.sbatch_options = {"--account=lab", "--qos=low"};
  request_.cpus_per_task = 2;
  const std::string script = ArrayScript(request_);
  const std::string out = request_.out_dir;
  for (const std::string& line :
       {std::string("#SBATCH --job-name=ahbm-sweep\n"), std::string("#SBATCH --array=0-2\n"),
        std::string("#SBATCH --cpus-per-task=2\n"),
        "#SBATCH --output=" + out + "/slurm/task-%a.log\n",
        std::string("#SBATCH --partition=debug\n#SBATCH --time=0:30:00\n"
                    "#SBATCH --account=lab\n#SBATCH --qos=low\n")}) {
    EXPECT_TRUE(absl::StrContains(script, line)) << line << "\n" << script;
  }
  EXPECT_EQ(script, ArrayScript(request_));  // the same bytes every time
  const std::string merge = MergeScript(request_);
  EXPECT_TRUE(absl::StrContains(merge, "#SBATCH --kill-on-invalid-dep=yes\n")) << merge;
  EXPECT_TRUE(absl::StrContains(merge, "#SBATCH --output=" + out + "/slurm/merge.log\n"));
  EXPECT_TRUE(absl::StrContains(merge, "#SBATCH --account=lab\n#SBATCH --qos=low\n"));
  EXPECT_FALSE(absl::StrContains(merge, "--array")) << merge;
  const std::vector<std::string> submit = SubmitCommands(request_);
  ASSERT_EQ(submit.size(), 2u);
  EXPECT_EQ(submit[0], "sbatch --parsable " + out + "/slurm/array.sbatch");
  EXPECT_EQ(submit[1], "sbatch --parsable --dependency=afterok:<array job id> " + out +
                           "/slurm/merge.sbatch");
}

TEST_F(SlurmScriptTest, TheMergeJoinsEveryShardIntoTheReportFolder) {
  EXPECT_EQ(RunScript(MergeScript(request_), -1, 0), 0);
  const std::string out = request_.out_dir;
  EXPECT_EQ(Read(root_ / "work" / "args-merge"),
            "merge\n" + out + "/slurm/shards/0\n" + out + "/slurm/shards/1\n" + out +
                "/slurm/shards/2\n--out_dir=" + out + "\n");
  EXPECT_EQ(Read(root_ / "out" / "slurm" / "merge.exit"), "0\n");
  EXPECT_EQ(RunScript(MergeScript(request_), -1, 2), 2);
  EXPECT_EQ(Read(root_ / "out" / "slurm" / "merge.exit"), "2\n");
}

TEST_F(SlurmScriptTest, EachBadRequestIsRefusedNamingItsFlag) {
  struct Case {
    void (*change)(SlurmRequest&);
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](SlurmRequest& r) { r.tasks = 0; },
       "--tasks: must be from 1 to the 6 jobs of this sweep (one shard per task; got 0)"},
      {[](SlurmRequest& r) { r.tasks = 7; },
       "--tasks: must be from 1 to the 6 jobs of this sweep (one shard per task; got 7)"},
      {[](SlurmRequest& r) { r.cpus_per_task = 1025; },
       "--cpus_per_task: must be from 1 to 1024 (got 1025)"},
      {[](SlurmRequest& r) { r.partition = "a b"; },
       "--partition: must be partition names (letters, digits, '_', '-', '.'; comma-separated; "
       "got 'a b')"},
      {[](SlurmRequest& r) { r.time = "1h"; },
       "--time: must be a Slurm time limit (minutes, H:MM:SS, D-HH:MM:SS or UNLIMITED; got "
       "'1h')"},
      {[](SlurmRequest& r) { r.sbatch_options = {"account=lab"}; },
       "--sbatch: 'account=lab' is not an sbatch option (--name=value or -X value)"},
      {[](SlurmRequest& r) { r.sbatch_options = {"--"}; },
       "--sbatch: '--' is not an sbatch option (--name=value or -X value)"},
      {[](SlurmRequest& r) { r.sbatch_options = {"--comment=a\nb"}; },
       "--sbatch: '--comment=a\\nb' holds a line break"},
      {[](SlurmRequest& r) { r.sbatch_options = {"--array=0-9"}; },
       "--sbatch: '--array=0-9': --array is set by --tasks"},
      {[](SlurmRequest& r) { r.sbatch_options = {"-t 10"}; },
       "--sbatch: '-t 10': --time is set by --time"},
      {[](SlurmRequest& r) { r.sbatch_options = {"--dependency=afterok:1"}; },
       "--sbatch: '--dependency=afterok:1': --dependency is set by ahbm slurm: the merge's "
       "afterok"},
      {[](SlurmRequest& r) { r.out_dir = "/shared/my report"; },
       "--out_dir: '/shared/my report' holds whitespace, a quote, '%' or '\\', which an #SBATCH "
       "line cannot carry"},
      {[](SlurmRequest& r) { r.out_dir = "/shared/100%"; },
       "--out_dir: '/shared/100%' holds whitespace, a quote, '%' or '\\', which an #SBATCH "
       "line cannot carry"},
  };
  for (const Case& c : cases) {
    SlurmRequest r = request_;
    c.change(r);
    const absl::Status status = CheckSlurmRequest(r);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(status.message(), c.message);
    EXPECT_EQ(ExitCodeOf(status), kExitBadInput);
  }
  SlurmRequest fine = request_;
  fine.tasks = 6;
  fine.partition = "gpu,cpu-long";
  fine.time = "1-12:00:00";
  fine.sbatch_options = {"--account=lab", "-q low", "--exclusive"};
  EXPECT_TRUE(CheckSlurmRequest(fine).ok()) << CheckSlurmRequest(fine);
}

// Submit and Wait against stand-ins for sbatch, squeue and scancel first on PATH: each records
// its arguments; sbatch numbers jobs from 41 (or refuses, as told), squeue prints the queue
// file's lines once, as a job that then ends.
class FakeSlurmTest : public SlurmScriptTest {
 protected:
  void SetUp() override {
    SlurmScriptTest::SetUp();
    bin_ = root_ / "bin";
    fs::create_directories(bin_);
    Tool("sbatch",
         "echo \"$@\" >> \"$D/sbatch.calls\"\n"
         "n=$(cat \"$D/next\" 2>/dev/null || echo 41)\n"
         "if [[ $n == \"${FAKE_SBATCH_REFUSE:-}\" ]]; then\n"
         "  echo 'sbatch: error: Batch job submission failed: Invalid partition name' >&2\n"
         "  exit 1\nfi\n"
         "echo $((n + 1)) > \"$D/next\"\necho \"$n;ahbmtest\"\n");
    Tool("squeue", "echo \"$@\" >> \"$D/squeue.calls\"\n"
                   "if [[ -f $D/queue ]]; then cat \"$D/queue\"; rm \"$D/queue\"; fi\n");
    Tool("scancel", "echo \"$@\" >> \"$D/scancel.calls\"\n");
    old_path_ = std::getenv("PATH");
    setenv("PATH", (bin_.string() + ":" + old_path_).c_str(), 1);
    setenv("D", root_.c_str(), 1);
    unsetenv("FAKE_SBATCH_REFUSE");
  }
  void TearDown() override { setenv("PATH", old_path_.c_str(), 1); }

  void Tool(const std::string& name, const std::string& body) {
    Write(bin_ / name, "#!/bin/bash\n" + body);
    fs::permissions(bin_ / name, fs::perms::owner_all);
  }
  void Exit(const std::string& name, const std::string& code) {
    Write(root_ / "out" / "slurm" / name, code + "\n");
  }

  fs::path bin_;
  std::string old_path_;
};

TEST_F(FakeSlurmTest, SubmitSendsTheArrayThenTheMergeAfterIt) {
  Exit("task-0.exit", "3");  // a previous submission's: removed
  absl::StatusOr<SlurmJobs> jobs = Submit(request_);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->array_id, "41");
  EXPECT_EQ(jobs->merge_id, "42");
  const std::string out = request_.out_dir;
  EXPECT_EQ(Read(root_ / "sbatch.calls"),
            "--parsable " + out + "/slurm/array.sbatch\n--parsable --dependency=afterok:41 " +
                out + "/slurm/merge.sbatch\n");
  EXPECT_EQ(Read(root_ / "out" / "slurm" / "array.sbatch"), ArrayScript(request_));
  EXPECT_EQ(Read(root_ / "out" / "slurm" / "merge.sbatch"), MergeScript(request_));
  EXPECT_FALSE(fs::exists(root_ / "out" / "slurm" / "task-0.exit"));
}

TEST_F(FakeSlurmTest, ARefusedMergeCancelsTheArray) {
  setenv("FAKE_SBATCH_REFUSE", "42", 1);
  absl::StatusOr<SlurmJobs> jobs = Submit(request_);
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.status().message(),
            "sbatch refused the merge job: sbatch: error: Batch job submission failed: Invalid "
            "partition name; array job 41 cancelled");
  EXPECT_EQ(ExitCodeOf(jobs.status()), kExitOther);
  EXPECT_EQ(Read(root_ / "scancel.calls"), "41\n");
  // The next submission's array (42: a refused job takes no number) refused: nothing to cancel.
  EXPECT_EQ(Submit(request_).status().message(),
            "sbatch refused the array: sbatch: error: Batch job submission failed: Invalid "
            "partition name");
  EXPECT_EQ(Read(root_ / "scancel.calls"), "41\n");
}

TEST_F(FakeSlurmTest, WaitSaysOkWhenEveryTaskAndTheMergeExitedZero) {
  Write(root_ / "queue", "41_[1-2]|PENDING|None\n41_0|RUNNING|None\n42|PENDING|Dependency\n");
  for (const char* name : {"task-0.exit", "task-1.exit", "task-2.exit", "merge.exit"}) {
    Exit(name, "0");
  }
  EXPECT_TRUE(Wait(request_, {"41", "42"}, absl::Milliseconds(1)).ok());
  // Once with the jobs queued, once with none.
  EXPECT_EQ(Read(root_ / "squeue.calls"), "-h -j 41,42 -o %i|%T|%r\n-h -j 41,42 -o %i|%T|%r\n");
  EXPECT_FALSE(fs::exists(root_ / "scancel.calls"));
}

TEST_F(FakeSlurmTest, WaitNamesEachFailedTaskAndPassesTheHighestCodeOn) {
  Exit("task-0.exit", "0");
  Exit("task-1.exit", "7");
  Exit("task-2.exit", "2");
  const absl::Status status = Wait(request_, {"41", "42"}, absl::Milliseconds(1));
  const std::string out = request_.out_dir;
  EXPECT_EQ(status.message(),
            "array job 41: task 1 (shard 1/3) exited 7, task 2 (shard 2/3) exited 2 (log " + out +
                "/slurm/task-<i>.log); merge job 42 not run; submit again with --resume to run "
                "only the jobs without a result");
  EXPECT_EQ(ExitCodeOf(status), 7);
}

TEST_F(FakeSlurmTest, WaitCancelsAMergeTheArrayCanNoLongerRelease) {
  // The array has ended; the merge waits on a dependency never satisfied (a cluster without
  // kill_invalid_depend honoured): Wait cancels it rather than wait forever.
  Write(root_ / "queue", "42|PENDING|DependencyNeverSatisfied\n");
  Exit("task-0.exit", "0");
  Exit("task-2.exit", "0");  // task 1 left none: its shell was killed
  const absl::Status status = Wait(request_, {"41", "42"}, absl::Milliseconds(1));
  EXPECT_EQ(Read(root_ / "scancel.calls"), "42\n");
  const std::string out = request_.out_dir;
  EXPECT_EQ(status.message(),
            "array job 41: task 1 (shard 1/3) left no exit code (cancelled, out of time or its "
            "node lost) (log " + out + "/slurm/task-1.log); merge job 42 not run; submit again "
            "with --resume to run only the jobs without a result");
  EXPECT_EQ(ExitCodeOf(status), 1);
}

TEST_F(FakeSlurmTest, WaitNamesAFailedMerge) {
  for (const char* name : {"task-0.exit", "task-1.exit", "task-2.exit"}) Exit(name, "0");
  Exit("merge.exit", "2");
  const absl::Status status = Wait(request_, {"41", "42"}, absl::Milliseconds(1));
  EXPECT_EQ(status.message(),
            "merge job 42 exited 2 (log " + request_.out_dir + "/slurm/merge.log)");
  EXPECT_EQ(ExitCodeOf(status), 2);
}

TEST_F(FakeSlurmTest, WithoutSlurmOnThePathSubmitSaysSoAsTheMachinesState) {
  setenv("PATH", "/nonexistent", 1);
  const absl::Status status = Submit(request_).status();
  EXPECT_EQ(status.message(),
            "sbatch: not found on PATH (ahbm slurm needs Slurm's client commands here; "
            "--dry_run prints the scripts without them)");
  EXPECT_EQ(ExitCodeOf(status), kExitOther);
}

}  // namespace
}  // namespace ahbm::cluster
