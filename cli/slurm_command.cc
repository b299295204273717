#include "cli/slurm_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "cluster/slurm.h"

namespace ahbm::cli {
namespace {

namespace fs = std::filesystem;

const SubmittableCommand* Find(const std::vector<SubmittableCommand>& commands,
                               const std::string& name) {
  for (const SubmittableCommand& command : commands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

bool IsOwnFlag(const std::string& name) {
  for (const FlagSpec& spec : SlurmFlags()) {
    if (spec.name == name && name != "out_dir") return true;
  }
  return false;
}

// The flags the array replaces, each with why.
absl::Status RefusePlacementFlags(const ParsedFlags& flags, const std::string& command) {
  struct Refused {
    const char* flag;
    const char* why;
  };
  static constexpr Refused kRefused[] = {
      {"jobs", "each task runs --cpus_per_task jobs at once"},
      {"shard", "ahbm slurm gives each array task its shard"},
      {"workers", "the array's tasks run on the cluster's nodes, not on workers"},
      {"local", "only with --workers, which ahbm slurm does not take"},
      {"worker_timeout", "only with --workers, which ahbm slurm does not take"},
      {"tls_cert", "only with --workers, which ahbm slurm does not take"},
      {"tls_key", "only with --workers, which ahbm slurm does not take"},
      {"tls_ca", "only with --workers, which ahbm slurm does not take"},
      {"out", "the merge writes sweep.csv and sweep.json into --out_dir"},
      {"json", "the merge writes sweep.csv and sweep.json into --out_dir"},
  };
  for (const Refused& refused : kRefused) {
    if (flags.Get(refused.flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", refused.flag, ": not with ahbm slurm ", command, " (", refused.why,
                       ")"));
    }
  }
  return absl::OkStatus();
}

// The command's flags as its store's manifest sees them (no placement flag, no output), minus
// ours (--resume and --out_dir the scripts add).
std::vector<std::string> CommandArgs(const ParsedFlags& flags) {
  std::vector<std::string> args;
  for (std::string& arg : cluster::CommandArgs(flags)) {
    if (!IsOwnFlag(arg.substr(2, arg.find('=') - 2))) args.push_back(std::move(arg));
  }
  return args;
}

// --ahbm: a path (absolute from here on; it must be an executable file) or a bare name the
// nodes find on their PATH. Default: this executable.
absl::StatusOr<std::string> AhbmFlag(const ParsedFlags& flags) {
  const std::optional<std::string> given = flags.Get("ahbm");
  if (given && given->find('/') == std::string::npos) return *given;
  std::error_code error;
  const fs::path path = given ? fs::absolute(*given, error) : fs::read_symlink("/proc/self/exe",
                                                                                error);
  if (error || !fs::is_regular_file(path, error) || access(path.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ahbm: ", given ? *given : "/proc/self/exe", " is not an executable file"));
  }
  return path.lexically_normal().string();
}

void PrintSubmitted(const cluster::SlurmRequest& r, const cluster::SlurmJobs& jobs) {
  std::fputs(absl::StrCat("ahbm slurm: ", r.command, ": ", r.jobs, " jobs in ", r.tasks,
                          " array tasks of ", r.cpus_per_task, " CPU",
                          r.cpus_per_task == 1 ? "" : "s", "\narray job ", jobs.array_id,
                          ": tasks 0-", r.tasks - 1, ", logs ",
                          cluster::SlurmFile(r, "task-<i>.log"), "\n")
                 .c_str(),
             stdout);
  std::printf("merge job %s: once every task exited 0 (afterok), log %s\n",
              jobs.merge_id.c_str(), cluster::SlurmFile(r, "merge.log").c_str());
  std::printf("report: %s (when merge job %s has ended)\n", r.out_dir.c_str(),
              jobs.merge_id.c_str());
  std::fflush(stdout);
}

// The request from the flags, its job count from a planned run of the command.
absl::StatusOr<cluster::SlurmRequest> RequestOf(const ParsedFlags& flags,
                                                const SubmittableCommand& command) {
  RETURN_IF_ERROR(RefusePlacementFlags(flags, command.name));
  cluster::SlurmRequest r;
  r.command = command.name;
  const std::optional<std::string> out_dir = flags.Get("out_dir");
  if (!out_dir && command.name == "sweep") {
    return absl::InvalidArgumentError(
        "--out_dir: required (the folder every node reaches: the shards, the logs, the report)");
  }
  std::error_code error;
  r.out_dir = fs::absolute(out_dir.value_or("report"), error).lexically_normal().string();
  while (r.out_dir.size() > 1 && r.out_dir.back() == '/') r.out_dir.pop_back();
  r.work_dir = fs::current_path(error).string();
  if (error) return absl::UnavailableError("cannot read the current folder");
  if (!flags.Get("tasks")) {
    return absl::InvalidArgumentError(
        "--tasks: required (the array's size: one shard of the job list per task)");
  }
  ASSIGN_OR_RETURN(r.tasks, IntFlag(flags, "tasks", ""));
  ASSIGN_OR_RETURN(r.cpus_per_task, IntFlag(flags, "cpus_per_task", "1"));
  ASSIGN_OR_RETURN(r.resume, BoolFlag(flags, "resume"));
  ASSIGN_OR_RETURN(r.ahbm, AhbmFlag(flags));
  r.partition = flags.GetOr("partition", "");
  r.time = flags.GetOr("time", "");
  for (const auto& [name, value] : flags.repeated()) {
    if (name == "sbatch") r.sbatch_options.push_back(value);
  }
  r.args = CommandArgs(flags);
  // The command checks its flags and builds its job list as a task will; nothing runs.
  std::vector<std::string> planned = r.args;
  planned.push_back("--out_dir=" + r.out_dir);
  planned.push_back("--shard=0/1");  // any shard: the plan counts the whole list
  planned.push_back(absl::StrCat("--jobs=", std::min<uint64_t>(r.cpus_per_task, 1024)));
  if (r.resume) planned.push_back("--resume");
  ASSIGN_OR_RETURN(const ParsedFlags parsed, ParseFlags(command.name, command.flags, planned));
  RETURN_IF_ERROR(command.run(parsed, {.plan = &r.jobs}));
  RETURN_IF_ERROR(cluster::CheckSlurmRequest(r));
  return r;
}

}  // namespace

std::vector<FlagSpec> SlurmFlags() {
  return {
      {"tasks", "array tasks: task i runs shard i/N of the job list (required)", ""},
      {"cpus_per_task", "CPUs each task asks for, and the jobs it runs at once", "1"},
      {"partition", "the partition both jobs go to", "the cluster's default"},
      {"time", "each job's time limit (minutes, H:MM:SS, D-HH:MM:SS)", "the partition's"},
      {"sbatch", "one more #SBATCH option for both jobs, e.g. --sbatch=--account=lab; repeat",
       "", false, /*repeated=*/true},
      {"ahbm",
       "the ahbm the jobs run: a path every node reaches, or a name on the nodes' PATH",
       "this executable"},
      {"out_dir",
       "the report folder, which every node must reach at the same path; shards, scripts and "
       "logs in its slurm/ (a sweep must name it)",
       "report"},
      {"wait", "wait for both jobs; exit as the array did (a failed task's exit code)", "false",
       /*boolean=*/true},
      {"dry_run", "check the flags, print the scripts and the sbatch commands, submit nothing",
       "false", /*boolean=*/true},
  };
}

std::vector<FlagSpec> SlurmFlagsFor(const std::vector<SubmittableCommand>& commands,
                                    const std::vector<std::string>& args) {
  // The command is the first argument that is not a flag, wherever it stands.
  const auto named = std::find_if(args.begin(), args.end(), [](const std::string& arg) {
    return arg.rfind("--", 0) != 0;
  });
  const SubmittableCommand* command = named == args.end() ? nullptr : Find(commands, *named);
  std::vector<FlagSpec> specs;
  if (command != nullptr) specs = command->flags;
  for (FlagSpec& own : SlurmFlags()) {
    const bool shared = std::any_of(specs.begin(), specs.end(),
                                    [&](const FlagSpec& s) { return s.name == own.name; });
    // Only --out_dir means the same to both; another shared name would be ambiguous.
    AHBM_CHECK(!shared || own.name == "out_dir") << "ahbm slurm's --" << own.name
                                                  << " is also a flag of " << command->name;
    if (!shared) specs.push_back(std::move(own));
  }
  return specs;
}

absl::Status RunSlurm(const ParsedFlags& flags, const std::vector<SubmittableCommand>& commands) {
  std::vector<std::string> names;
  for (const SubmittableCommand& command : commands) names.push_back(command.name);
  const std::string which = absl::StrJoin(names, " or ");
  if (flags.positional().size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("give the command to submit: ahbm slurm ", which, " --tasks=N [flags]"));
  }
  const SubmittableCommand* command = Find(commands, flags.positional()[0]);
  if (command == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", flags.positional()[0], "': ahbm slurm submits ", which));
  }
  ASSIGN_OR_RETURN(const cluster::SlurmRequest request, RequestOf(flags, *command));
  ASSIGN_OR_RETURN(const bool dry_run, BoolFlag(flags, "dry_run"));
  ASSIGN_OR_RETURN(const bool wait, BoolFlag(flags, "wait"));
  if (dry_run) {
    std::printf("# %s\n%s\n# %s\n%s\n# submit:\n%s\n",
                cluster::SlurmFile(request, "array.sbatch").c_str(),
                cluster::ArrayScript(request).c_str(),
                cluster::SlurmFile(request, "merge.sbatch").c_str(),
                cluster::MergeScript(request).c_str(),
                absl::StrJoin(cluster::SubmitCommands(request), "\n").c_str());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const cluster::SlurmJobs jobs, cluster::Submit(request));
  PrintSubmitted(request, jobs);
  if (!wait) return absl::OkStatus();
  RETURN_IF_ERROR(cluster::Wait(request, jobs));
  std::printf("merge job %s done: the report is in %s\n", jobs.merge_id.c_str(),
              request.out_dir.c_str());
  return absl::OkStatus();
}

}  // namespace ahbm::cli
