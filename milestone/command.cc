#include "milestone/command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "milestone/studies.h"
#include "sweep/job_pool.h"

namespace ahbm::milestone {

namespace {

absl::StatusOr<uint64_t> Number(const cli::ParsedFlags& flags, const std::string& name,
                                uint64_t fallback) {
  const std::optional<std::string> text = flags.Get(name);
  if (!text) return fallback;
  uint64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": not a number (got ", *text, ")"));
  }
  if (value == 0)
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be > 0 (got 0)"));
  return value;
}

absl::Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    return absl::InvalidArgumentError(absl::StrCat("--out_dir: cannot write ", path.string()));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<cli::FlagSpec> MilestoneFlags() {
  return {
      {"topology", "chip config, protobuf text format (ahbm.pb.Chip)",
       "topology/chip_4sip.textproto"},
      {"decode_context", "decode context S, tokens (multi-user: the longest request)", "131072"},
      {"prefill_context", "prefill context S, tokens (multi-user: the longest request)", "8192"},
      {"users", "multi-user panels: requests S, S/2, S/4, ... (2 to 16)", "4"},
      {"panels",
       "comma-separated panels (single_user_decode, multi_user_decode, "
       "single_user_prefill, multi_user_prefill)",
       "all four"},
      {"variants",
       "comma-separated variants to run (lower case, e.g. opt3,ring,baseline_dot); each panel "
       "keeps the ones it has",
       "every variant"},
      {"out_dir", "write milestone.json and milestone.csv here", "report"},
      {"quick", "a first look: decode S 4096, prefill S 512, users 2, no baseline_fanout_group",
       "false", /*boolean=*/true},
      {"studies",
       "the ADR §9 / §B studies to run (comma-separated names, all, none; milestone/README.md)",
       "all"},
      {"jobs", "simulations at once, one process each (the output does not depend on it)",
       "the machine's cores"},
  };
}

absl::Status RunMilestoneCommand(const cli::ParsedFlags& flags, const pb::Chip& chip,
                                 const ToolInfo& tool) {
  Options options;
  absl::StatusOr<uint64_t> decode = Number(flags, "decode_context", options.decode_context);
  if (!decode.ok()) return decode.status();
  absl::StatusOr<uint64_t> prefill = Number(flags, "prefill_context", options.prefill_context);
  if (!prefill.ok()) return prefill.status();
  absl::StatusOr<uint64_t> users = Number(flags, "users", options.users);
  if (!users.ok()) return users.status();
  options.decode_context = *decode;
  options.prefill_context = *prefill;
  options.users = static_cast<uint32_t>(std::min<uint64_t>(*users, 1u << 20));
  options.quick = flags.GetOr("quick", "false") == "true";
  absl::StatusOr<uint64_t> workers = Number(flags, "jobs", sweep::DefaultWorkers());
  if (!workers.ok()) return workers.status();
  if (const std::optional<std::string> panels = flags.Get("panels")) {
    options.panels = absl::StrSplit(*panels, ',');
  }
  if (const std::optional<std::string> variants = flags.Get("variants")) {
    options.variants = absl::StrSplit(*variants, ',');
  }
  options.issue_cost_profiles = IssueCostProfiles(chip);  // decode under each (§9.6)
  absl::StatusOr<std::vector<Job>> jobs = BuildJobs(options);
  if (!jobs.ok()) return jobs.status();
  absl::StatusOr<std::vector<Study>> all_studies =
      BuildStudies(chip, StudyOptions{.quick = options.quick});
  if (!all_studies.ok()) return all_studies.status();
  absl::StatusOr<std::vector<Study>> studies =
      SelectStudies(*std::move(all_studies), flags.GetOr("studies", "all"));
  if (!studies.ok()) return studies.status();

  // The report folder is checked before the runs (minutes) start.
  const std::filesystem::path out_dir = flags.GetOr("out_dir", "report");
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error || !std::filesystem::is_directory(out_dir)) {
    return absl::InvalidArgumentError(absl::StrCat("--out_dir: cannot create ", out_dir.string(),
                                                   error ? ": " + error.message() : ""));
  }
  const std::filesystem::path probe = out_dir / ".milestone_probe";
  if (absl::Status s = WriteFile(probe, ""); !s.ok()) return s;
  std::filesystem::remove(probe, error);

  const bool tty = isatty(fileno(stderr)) != 0;
  const auto start = std::chrono::steady_clock::now();
  size_t last = 0;
  auto progress = [&](const Job& job, size_t done, size_t n, uint64_t events) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string eta = absl::StrFormat("%.0f s", elapsed / done * (n - done));
    const std::string rate = elapsed <= 0 ? "-" : absl::StrFormat("%.3g", events / elapsed);
    const std::string line = absl::StrFormat(
        "milestone: %s %s%s done, run %d of %d, %s simulated events/s, ETA %s", job.panel,
        absl::AsciiStrToLower(pb::Variant_Name(job.workload.variant())),
        job.workload.has_issue_cost_profile() ? " " + job.workload.issue_cost_profile() : "", done,
        n, rate, eta);
    if (tty) {
      std::fprintf(stderr, "\r%-*s", static_cast<int>(std::max(last, line.size())), line.c_str());
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    last = line.size();
    std::fflush(stderr);
  };
  absl::StatusOr<std::vector<Row>> rows =
      RunJobs(chip, *jobs, progress, static_cast<int>(std::min<uint64_t>(*workers, 256)));
  if (tty) std::fputs("\n", stderr);
  if (!rows.ok()) return rows.status();

  std::fputs(FormatTables(*rows).c_str(), stdout);
  if (absl::Status s = WriteFile(out_dir / "milestone.csv", ToCsv(chip, *rows, tool)); !s.ok()) {
    return s;
  }
  if (absl::Status s = WriteFile(out_dir / "milestone.json", ToJson(chip, *rows, tool)); !s.ok()) {
    return s;
  }
  if (studies->empty()) {
    std::printf("\nwrote %s and %s\n", (out_dir / "milestone.json").c_str(),
                (out_dir / "milestone.csv").c_str());
    return absl::OkStatus();
  }

  // The studies (ADR §9, §B): all their runs in one pool, then each answer from its CSV.
  const auto studies_start = std::chrono::steady_clock::now();
  last = 0;
  auto study_progress = [&](const std::string& study, size_t done, size_t n, uint64_t events) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - studies_start).count();
    const std::string eta = absl::StrFormat("%.0f s", elapsed / done * (n - done));
    const std::string rate = elapsed <= 0 ? "-" : absl::StrFormat("%.3g", events / elapsed);
    const std::string line =
        absl::StrFormat("studies: %s done, run %d of %d, %s simulated events/s, ETA %s", study,
                        done, n, rate, eta);
    if (tty) {
      std::fprintf(stderr, "\r%-*s", static_cast<int>(std::max(last, line.size())), line.c_str());
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    last = line.size();
    std::fflush(stderr);
  };
  absl::StatusOr<std::vector<StudyOutcome>> outcomes = RunStudies(
      *studies, out_dir, static_cast<int>(std::min<uint64_t>(*workers, 256)), study_progress);
  if (tty) std::fputs("\n", stderr);
  if (!outcomes.ok()) return outcomes.status();
  std::printf("\n%s", FormatAnswers(*outcomes).c_str());
  std::printf("\nwrote %s, %s and %zu sweep_*.csv\n", (out_dir / "milestone.json").c_str(),
              (out_dir / "milestone.csv").c_str(), outcomes->size());
  return absl::OkStatus();
}

}  // namespace ahbm::milestone
