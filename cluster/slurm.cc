#include "cluster/slurm.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/subprocess.h"

namespace ahbm::cluster {
namespace {

namespace fs = std::filesystem;

// 'text' for the shell: single quotes, each ' as '\''.
std::string Quote(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// The sbatch options `ahbm slurm` sets itself, long and short, and the flag that sets each.
struct OwnedOption {
  std::string_view long_name;
  char short_name;
  std::string_view by;
};
constexpr OwnedOption kOwned[] = {
    {"array", 'a', "--tasks"},
    {"cpus-per-task", 'c', "--cpus_per_task"},
    {"partition", 'p', "--partition"},
    {"time", 't', "--time"},
    {"output", 'o', "ahbm slurm: <out_dir>/slurm/"},
    {"error", 'e', "ahbm slurm: <out_dir>/slurm/"},
    {"chdir", 'D', "ahbm slurm: the current folder"},
    {"job-name", 'J', "ahbm slurm: ahbm-<command>"},
    {"dependency", 'd', "ahbm slurm: the merge's afterok"},
    {"kill-on-invalid-dep", 0, "ahbm slurm: the merge"},
    {"wait", 'W', "ahbm slurm --wait"},
};

absl::Status CheckSbatchOption(const std::string& option) {
  const std::string what = absl::StrCat("--sbatch: '", absl::CEscape(option), "'");
  if (option.size() < 2 || option[0] != '-') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not an sbatch option (--name=value or -X value)"));
  }
  if (option.find_first_of("\n\r") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " holds a line break"));
  }
  const bool long_form = option[1] == '-';
  const std::string name =
      long_form ? option.substr(2, option.find_first_of("= ") - 2) : option.substr(1, 1);
  if (name.empty() || name[0] == '-' || name[0] == '=') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not an sbatch option (--name=value or -X value)"));
  }
  for (const OwnedOption& owned : kOwned) {
    if (long_form ? name == owned.long_name : name[0] == owned.short_name) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": --", std::string(owned.long_name), " is set by ",
                       std::string(owned.by)));
    }
  }
  return absl::OkStatus();
}

// "#SBATCH" lines both scripts share after their own: partition, time, the user's options.
std::string SharedOptions(const SlurmRequest& r) {
  std::string lines;
  if (!r.partition.empty()) absl::StrAppend(&lines, "#SBATCH --partition=", r.partition, "\n");
  if (!r.time.empty()) absl::StrAppend(&lines, "#SBATCH --time=", r.time, "\n");
  for (const std::string& option : r.sbatch_options) {
    absl::StrAppend(&lines, "#SBATCH ", option, "\n");
  }
  return lines;
}

// The lines that run `command_line` in the work folder and leave its exit code in `exit_file`
// (a shell word, may expand $task).
std::string RunAndRecord(const SlurmRequest& r, const std::string& command_line,
                         const std::string& exit_file) {
  return absl::StrCat("cd ", Quote(r.work_dir), " &&\n  ", command_line, "\nstatus=$?\n",
                      "echo \"$status\" > ", exit_file, "\nexit \"$status\"\n");
}

std::string ReadSmallFile(const fs::path& path, bool* found) {
  std::ifstream in(path, std::ios::binary);
  *found = static_cast<bool>(in);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first non-empty line sbatch or squeue wrote to stderr (else stdout), for a message.
std::string FirstLine(const ProgramResult& result) {
  for (const std::string* text : {&result.err, &result.out}) {
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
      return std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return result.How();
}

// RunProgram for a Slurm command: one missing here is the machine's state, not the input's.
absl::StatusOr<ProgramResult> RunSlurmCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<ProgramResult> result = RunProgram(argv);
  if (result.status().code() == absl::StatusCode::kNotFound) {
    return absl::FailedPreconditionError(absl::StrCat(
        result.status().message(), " (ahbm slurm needs Slurm's client commands here; --dry_run "
        "prints the scripts without them)"));
  }
  return result;
}

absl::StatusOr<std::string> Sbatch(const std::vector<std::string>& argv, const std::string& what) {
  ASSIGN_OR_RETURN(const ProgramResult result, RunSlurmCommand(argv));
  if (!result.ok()) {
    return absl::UnknownError(absl::StrCat("sbatch refused the ", what, ": ", FirstLine(result)));
  }
  // --parsable: "<id>" or "<id>;<cluster>".
  std::string id(absl::StripAsciiWhitespace(result.out));
  id = id.substr(0, id.find(';'));
  uint64_t number = 0;
  if (!absl::SimpleAtoi(id, &number)) {
    return absl::UnknownError(absl::StrCat("sbatch gave no job id for the ", what, " (printed '",
                                           absl::CEscape(result.out), "')"));
  }
  return id;
}

}  // namespace

absl::Status CheckSlurmRequest(const SlurmRequest& r) {
  if (r.tasks < 1 || r.tasks > r.jobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tasks: must be from 1 to the ", r.jobs, " jobs of this ", r.command,
                     " (one shard per task; got ", r.tasks, ")"));
  }
  if (r.cpus_per_task < 1 || r.cpus_per_task > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpus_per_task: must be from 1 to 1024 (got ", r.cpus_per_task, ")"));
  }
  if (!r.partition.empty() &&
      !std::all_of(r.partition.begin(), r.partition.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.' || c == ',';
      })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--partition: must be partition names (letters, digits, '_', '-', '.'; comma-separated; "
        "got '",
        absl::CEscape(r.partition), "')"));
  }
  if (!r.time.empty() && r.time != "UNLIMITED" &&
      !std::all_of(r.time.begin(), r.time.end(),
                   [](char c) { return absl::ascii_isdigit(c) || c == ':' || c == '-'; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--time: must be a Slurm time limit (minutes, H:MM:SS, D-HH:MM:SS or UNLIMITED; got '",
        absl::CEscape(r.time), "')"));
  }
  for (const std::string& option : r.sbatch_options) RETURN_IF_ERROR(CheckSbatchOption(option));
  if (r.out_dir.find_first_of(" \t\n\r'\"%\\") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out_dir: '", absl::CEscape(r.out_dir),
        "' holds whitespace, a quote, '%' or '\\', which an #SBATCH line cannot carry"));
  }
  return absl::OkStatus();
}

std::string SlurmFile(const SlurmRequest& r, const std::string& name) {
  return absl::StrCat(r.out_dir, "/slurm/", name);
}

std::string ArrayScript(const SlurmRequest& r) {
  std::string s = absl::StrCat(
      "#!/bin/bash\n# ahbm slurm: the ", r.jobs, " jobs of `ahbm ", r.command, "` as ", r.tasks,
      " array tasks; task i runs shard i/", r.tasks, " into ", SlurmFile(r, "shards/<i>"),
      ".\n# Then merge.sbatch (--dependency=afterok:<this array's job id>) writes the report.\n");
  absl::StrAppend(&s, "#SBATCH --job-name=ahbm-", r.command, "\n#SBATCH --array=0-",
                  r.tasks - 1, "\n#SBATCH --cpus-per-task=", r.cpus_per_task,
                  "\n#SBATCH --output=", SlurmFile(r, "task-%a.log"), "\n", SharedOptions(r));
  absl::StrAppend(&s, "task=$SLURM_ARRAY_TASK_ID\n");
  std::string command = absl::StrCat(Quote(r.ahbm), " ", r.command, " \\\n");
  for (const std::string& arg : r.args) absl::StrAppend(&command, "    ", Quote(arg), " \\\n");
  absl::StrAppend(&command, "    --jobs=", r.cpus_per_task, r.resume ? " --resume" : "",
                  " \"--shard=$task/", r.tasks, "\" \\\n    ",
                  Quote(absl::StrCat("--out_dir=", SlurmFile(r, "shards/"))), "\"$task\"");
  absl::StrAppend(&s, RunAndRecord(r, command,
                                   absl::StrCat(Quote(SlurmFile(r, "task-")), "\"$task\".exit")));
  return s;
}

std::string MergeScript(const SlurmRequest& r) {
  std::string s = absl::StrCat(
      "#!/bin/bash\n# ahbm slurm: joins the ", r.tasks, " shards of `ahbm ", r.command,
      "` into the report in ", r.out_dir, " (ahbm merge).\n# Submitted with "
      "--dependency=afterok:<the array's job id>: it runs only when every task exited 0.\n");
  absl::StrAppend(&s, "#SBATCH --job-name=ahbm-", r.command, "-merge\n",
                  "#SBATCH --kill-on-invalid-dep=yes\n#SBATCH --output=",
                  SlurmFile(r, "merge.log"), "\n", SharedOptions(r));
  absl::StrAppend(&s, "shards=()\nfor ((i = 0; i < ", r.tasks, "; i++)); do shards+=(",
                  Quote(SlurmFile(r, "shards/")), "\"$i\"); done\n");
  const std::string command = absl::StrCat(Quote(r.ahbm), " merge \"${shards[@]}\" ",
                                           Quote(absl::StrCat("--out_dir=", r.out_dir)));
  absl::StrAppend(&s, RunAndRecord(r, command, Quote(SlurmFile(r, "merge.exit"))));
  return s;
}

std::vector<std::string> SubmitCommands(const SlurmRequest& r) {
  return {absl::StrCat("sbatch --parsable ", SlurmFile(r, "array.sbatch")),
          absl::StrCat("sbatch --parsable --dependency=afterok:<array job id> ",
                       SlurmFile(r, "merge.sbatch"))};
}

absl::StatusOr<SlurmJobs> Submit(const SlurmRequest& r) {
  const fs::path dir = SlurmFile(r, "");
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("--out_dir: cannot create ", dir.string(), ": ", error.message()));
  }
  // A previous submission's exit codes would be read as this one's.
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".exit")) fs::remove(entry.path(), error);
  }
  for (const auto& [name, text] : {std::pair{"array.sbatch", ArrayScript(r)},
                                   std::pair{"merge.sbatch", MergeScript(r)}}) {
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      return absl::PermissionDeniedError(absl::StrCat((dir / name).string(), ": cannot write"));
    }
  }
  SlurmJobs jobs;
  ASSIGN_OR_RETURN(jobs.array_id,
                   Sbatch({"sbatch", "--parsable", SlurmFile(r, "array.sbatch")}, "array"));
  absl::StatusOr<std::string> merge =
      Sbatch({"sbatch", "--parsable", absl::StrCat("--dependency=afterok:", jobs.array_id),
              SlurmFile(r, "merge.sbatch")},
             "merge job");
  if (!merge.ok()) {
    (void)RunProgram({"scancel", jobs.array_id});  // best effort: its own failure adds nothing
    return WithMessage(merge.status(), absl::StrCat(merge.status().message(), "; array job ",
                                                    jobs.array_id, " cancelled"));
  }
  jobs.merge_id = *merge;
  return jobs;
}

namespace {

// squeue's view of the two jobs: whether any array task is still pending or running, and
// whether the merge waits on a dependency that can no longer be satisfied.
struct QueueState {
  bool any = false;
  bool array_active = false;
  bool merge_stuck = false;
};

absl::StatusOr<QueueState> Queue(const SlurmJobs& jobs) {
  ASSIGN_OR_RETURN(const ProgramResult result,
                   RunSlurmCommand({"squeue", "-h", "-j", jobs.array_id + "," + jobs.merge_id,
                                    "-o", "%i|%T|%r"}));
  QueueState state;
  if (!result.ok()) {
    // Both records already purged (MinJobAge): nothing left to wait for.
    if (absl::StrContains(result.err, "Invalid job id")) return state;
    return absl::UnavailableError(absl::StrCat("squeue: ", FirstLine(result)));
  }
  for (absl::string_view line : absl::StrSplit(result.out, '\n', absl::SkipWhitespace())) {
    const std::vector<std::string> fields = absl::StrSplit(line, '|');
    if (fields.size() < 3) continue;
    state.any = true;
    const std::string& id = fields[0];
    if (id == jobs.merge_id) {
      state.merge_stuck = fields[2] == "DependencyNeverSatisfied";
    } else if (id == jobs.array_id || absl::StartsWith(id, jobs.array_id + "_")) {
      state.array_active = true;
    }
  }
  return state;
}

// The exit code a job's script left, or nullopt when it left none.
std::optional<int> ExitCode(const std::string& path) {
  bool found = false;
  const std::string text = ReadSmallFile(path, &found);
  int code = 0;
  if (!found || !absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &code)) return std::nullopt;
  return code;
}

}  // namespace

namespace {

// Until squeue shows neither job pending or running.
absl::Status WaitForQueue(const SlurmJobs& jobs, absl::Duration poll) {
  const absl::Time start = absl::Now();
  int squeue_failures = 0;
  bool cancelled_merge = false;
  for (;;) {
    absl::StatusOr<QueueState> state = Queue(jobs);
    if (!state.ok()) {
      if (++squeue_failures >= 10) return state.status();  // the controller stays away
    } else {
      squeue_failures = 0;
      if (!state->any) return absl::OkStatus();
      if (!state->array_active && state->merge_stuck && !cancelled_merge) {
        (void)RunProgram({"scancel", jobs.merge_id});  // it can never run; squeue tells the rest
        cancelled_merge = true;
      }
    }
    // Gentle on the controller over a long wait: 1×, 5× and 30× the interval.
    const absl::Duration waited = absl::Now() - start;
    const absl::Duration interval =
        waited < absl::Minutes(1) ? poll : waited < absl::Minutes(10) ? poll * 5 : poll * 30;
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(interval));
  }
}

// What the exit files say once both jobs have left the queue.
struct Outcome {
  std::vector<std::string> failed;  // "task <i> (shard <i>/<n>) exited <k>", ...
  std::string log;                  // the one failed task's log, or the pattern
  int worst = 0;                    // the highest failed task's exit code (1: it left none)
  bool task_left_none = false;
  std::optional<int> merged;        // the merge's exit code, if it ran

  // A file a job wrote on another node may show here a little later (a shared file system's
  // attribute cache): worth reading again before it counts as missing.
  bool MayBeLate() const { return task_left_none || (failed.empty() && !merged); }
};

Outcome ReadOutcome(const SlurmRequest& r) {
  Outcome o;
  for (uint64_t i = 0; i < r.tasks; ++i) {
    const std::optional<int> code = ExitCode(SlurmFile(r, absl::StrCat("task-", i, ".exit")));
    if (code == 0) continue;
    o.failed.push_back(absl::StrCat(
        "task ", i, " (shard ", i, "/", r.tasks, ") ",
        code ? absl::StrCat("exited ", *code)
             : "left no exit code (cancelled, out of time or its node lost)"));
    o.worst = std::max(o.worst, code.value_or(1));
    o.task_left_none |= !code;
    o.log = SlurmFile(r, o.failed.size() == 1 ? absl::StrCat("task-", i, ".log") : "task-<i>.log");
  }
  o.merged = ExitCode(SlurmFile(r, "merge.exit"));
  return o;
}

}  // namespace

absl::Status Wait(const SlurmRequest& r, const SlurmJobs& jobs, absl::Duration poll) {
  RETURN_IF_ERROR(WaitForQueue(jobs, poll));
  Outcome o = ReadOutcome(r);
  for (int again = 0; again < 3 && o.MayBeLate(); ++again) {
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(poll));
    o = ReadOutcome(r);
  }
  if (!o.failed.empty()) {
    return WithExitCode(
        absl::UnknownError(absl::StrCat(
            "array job ", jobs.array_id, ": ", absl::StrJoin(o.failed, ", "), " (log ", o.log,
            "); merge job ", jobs.merge_id, o.merged ? " ran anyway" : " not run",
            "; submit again with --resume to run only the jobs without a result")),
        o.worst);
  }
  if (o.merged != 0) {
    return WithExitCode(
        absl::UnknownError(absl::StrCat(
            "merge job ", jobs.merge_id, " ",
            o.merged ? absl::StrCat("exited ", *o.merged)
                     : "left no exit code (cancelled, out of time or its node lost)",
            " (log ", SlurmFile(r, "merge.log"), ")")),
        o.merged.value_or(1));
  }
  return absl::OkStatus();
}

}  // namespace ahbm::cluster
