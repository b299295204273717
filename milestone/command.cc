#include "milestone/command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_replace.h"
#include "base/errors.h"
#include "actors/observe/op_log.h"
#include "base/status_macros.h"
#include "cluster/placement.h"
#include "kernels/launch/launch.h"
#include "milestone/numerics.h"
#include "milestone/page.h"
#include "milestone/plot.h"
#include "milestone/studies.h"
#include "milestone/timeline.h"
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

// One line on stderr over every run of the milestone (panels, studies, timeline, numerical
// checks): what finished, run i of n, simulated events/s, ETA; redrawn in place on a terminal,
// one line per run otherwise. Wall-clock figures appear here only, never in the files.
class ProgressLine {
 public:
  explicit ProgressLine(size_t total)
      : total_(total),
        tty_(isatty(fileno(stderr)) != 0),
        start_(std::chrono::steady_clock::now()) {}

  void Done(const std::string& what, uint64_t events, const std::string& note = "") {
    ++done_;
    events_ += events;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string eta =
        absl::StrFormat("%.0f s", elapsed / done_ * (total_ - std::min(done_, total_)));
    const std::string rate = elapsed <= 0 ? "-" : absl::StrFormat("%.3g", events_ / elapsed);
    const std::string line =
        absl::StrFormat("milestone: %s done, run %d of %d, %s simulated events/s, ETA %s%s",
                        what, done_, total_, rate, eta, note.empty() ? "" : "; " + note);
    if (tty_) {
      std::fprintf(stderr, "\r%-*s", static_cast<int>(std::max(width_, line.size())), line.c_str());
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    width_ = line.size();
    std::fflush(stderr);
  }
  uint64_t events() const { return events_; }
  void Finish() {
    if (tty_ && width_ > 0) std::fputs("\n", stderr);
    width_ = 0;
  }
  absl::Status Fail(absl::Status status) {
    Finish();
    return status;
  }

 private:
  size_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  size_t done_ = 0;
  uint64_t events_ = 0;
  size_t width_ = 0;
};

// The page's view of the run: the panels as the terminal tables show them (each panel's first
// issue-cost profile), the numerical checks, the run's identity.
PageInput PageOf(const cli::ParsedFlags& flags, const pb::Chip& chip, const ToolInfo& tool,
                 const std::vector<Row>& rows, const std::vector<NumericCheck>& checks) {
  PageInput page;
  page.title = "ahbm milestone: Llama3-70B GQA attention (ADR-0060)";
  page.command = "ahbm milestone";
  // Without --out_dir and where the jobs ran (--jobs, --workers, --shard, ...): none changes a
  // figure, and the page stays the same bytes wherever and on however many cores it is made.
  for (const auto& [name, value] : flags.values()) {
    if (name != "out_dir" && !cluster::IsPlacementFlag(name)) {
      absl::StrAppend(&page.command, " --", name, "=", value);
    }
  }
  page.version = tool.version;
  page.commit = tool.commit;
  page.topology_name = chip.name();
  page.topology_digest = observe::MessageDigest(chip);
  for (const Row& r : rows) {
    if (page.panels.empty() || page.panels.back().name != r.panel) {
      PagePanel panel;
      panel.name = r.panel;
      panel.s = r.workload.request_lengths_size() > 0
                    ? std::vector<uint64_t>(r.workload.request_lengths().begin(),
                                            r.workload.request_lengths().end())
                    : std::vector<uint64_t>{r.workload.s()};
      panel.profile = r.report.issue_cost_profile();
      page.panels.push_back(std::move(panel));
    }
    PagePanel& panel = page.panels.back();
    if (r.report.issue_cost_profile() != panel.profile) continue;
    PageRow row{r.variant,
                r.report.latency_ps() / 1e6,
                r.best_baseline_ratio,
                r.report.roofline_ratio(),
                r.ideal_ratio,
                r.report.roofline().binding_resource(),
                std::nullopt};
    if (r.report.request_latency_ps_size() > 1) {
      const RequestSpread spread = Spread(r.report);
      row.requests = RequestLatencyUs{spread.min / 1e6, spread.median / 1e6, spread.max / 1e6};
    }
    panel.rows.push_back(std::move(row));
    if (r.variant == "auto") panel.auto_pick = AutoPick(r.report);
  }
  for (const NumericCheck& c : checks) {
    page.checks.push_back(
        {c.kernel, c.variant, c.shape, c.max_abs_error, c.tolerance, c.ok, c.note});
  }
  return page;
}

}  // namespace

std::vector<cli::FlagSpec> MilestoneFlags() {
  std::vector<cli::FlagSpec> specs = {
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
  };
  for (cli::FlagSpec& flag : cluster::PlacementFlags()) specs.push_back(std::move(flag));
  return specs;
}

absl::Status RunMilestoneCommand(const cli::ParsedFlags& flags, const pb::Chip& chip,
                                 const ToolInfo& tool, cluster::RunMode mode) {
  Options options;
  absl::StatusOr<uint64_t> decode = Number(flags, "decode_context", options.decode_context);
  RETURN_IF_ERROR(decode.status());
  absl::StatusOr<uint64_t> prefill = Number(flags, "prefill_context", options.prefill_context);
  RETURN_IF_ERROR(prefill.status());
  absl::StatusOr<uint64_t> users = Number(flags, "users", options.users);
  RETURN_IF_ERROR(users.status());
  options.decode_context = *decode;
  options.prefill_context = *prefill;
  if (*users > 16) {  // checked again with the panels (milestone.cc); here before narrowing
    return absl::InvalidArgumentError(
        absl::StrCat("--users: the multi-user panels run 2 to 16 requests (got ", *users, ")"));
  }
  options.users = static_cast<uint32_t>(*users);
  ASSIGN_OR_RETURN(options.quick, cli::BoolFlag(flags, "quick"));
  if (const std::optional<std::string> panels = flags.Get("panels")) {
    options.panels = absl::StrSplit(*panels, ',');
  }
  if (const std::optional<std::string> variants = flags.Get("variants")) {
    options.variants = absl::StrSplit(*variants, ',');
  }
  options.issue_cost_profiles = IssueCostProfiles(chip);  // decode under each (§9.6)
  absl::StatusOr<std::vector<Job>> jobs = BuildJobs(options);
  RETURN_IF_ERROR(jobs.status());
  absl::StatusOr<std::vector<Study>> all_studies =
      BuildStudies(chip, StudyOptions{.quick = options.quick});
  RETURN_IF_ERROR(all_studies.status());
  absl::StatusOr<std::vector<Study>> studies =
      SelectStudies(*std::move(all_studies), flags.GetOr("studies", "all"));
  RETURN_IF_ERROR(studies.status());

  // The report folder is checked before the runs (minutes) start.
  const std::filesystem::path out_dir = flags.GetOr("out_dir", "report");
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error || !std::filesystem::is_directory(out_dir)) {
    return absl::InvalidArgumentError(absl::StrCat("--out_dir: cannot create ", out_dir.string(),
                                                   error ? ": " + error.message() : ""));
  }
  const std::filesystem::path probe = out_dir / ".milestone_probe";
  RETURN_IF_ERROR(WriteFile(probe, ""));
  std::filesystem::remove(probe, error);

  const std::vector<TimelineJob> timeline_jobs = TimelineJobs(chip);
  // Every run is validated before any runs (a study's refused point is a row), so a chip that
  // cannot host one is refused before minutes of runs.
  RETURN_IF_ERROR(ValidateJobs(chip, *jobs));
  for (const TimelineJob& t : timeline_jobs) {
    if (absl::Status s = launch::ValidateWorkload(chip, t.job.workload); !s.ok()) {
      return WithMessage(s, absl::StrCat(s.message(), " (milestone timeline ", t.label, ")"));
    }
  }
  const std::vector<pb::Workload> numeric_workloads = NumericWorkloads({});
  if (absl::Status s = ValidateNumericWorkloads(chip, numeric_workloads); !s.ok()) {
    return WithMessage(s,
                        absl::StrReplaceAll(s.message(), {{"(numerical check, ",
                                                           "(milestone numerical check "}}));
  }

  // Every run of the milestone in one list (panels, studies, timeline, numerical checks), so
  // they share the cores and the workers (cluster/placement.h) and a job store numbers them
  // the same way in every run: --resume and --shard / `ahbm merge` rest on that.
  std::vector<sweep::Job> all = PanelPoolJobs(chip, *jobs);
  std::vector<std::string> labels;
  for (const Job& job : *jobs) {
    labels.push_back(absl::StrCat(
        job.panel, " ", absl::AsciiStrToLower(pb::Variant_Name(job.workload.variant())),
        job.workload.has_issue_cost_profile() ? " " + job.workload.issue_cost_profile() : ""));
  }
  std::vector<std::string> job_study;
  for (sweep::Job& job : StudyPoolJobs(*studies, &job_study)) all.push_back(std::move(job));
  for (const std::string& study : job_study) labels.push_back(absl::StrCat("study ", study));
  for (const TimelineJob& t : timeline_jobs) {
    all.push_back(t.job);
    labels.push_back(absl::StrCat("timeline ", t.label));
  }
  for (sweep::Job& job : NumericPoolJobs(chip, numeric_workloads)) all.push_back(std::move(job));
  labels.resize(all.size(), "numerical check");

  absl::StatusOr<std::unique_ptr<cluster::Placement>> placement = cluster::MakePlacement(
      flags, {.command = "milestone", .out_dir = out_dir.string(), .mode = mode});
  RETURN_IF_ERROR(placement.status());
  ProgressLine line(all.size());
  const std::vector<pb::JobResult> results =
      (*placement)->runner().Run(all, [&](size_t i, const pb::JobResult& result) {
        line.Done(labels[i], result.report().events(), (*placement)->ProgressNote());
      });
  line.Finish();
  if (absl::Status s = (*placement)->Finish(results); !s.ok() || (*placement)->partial()) {
    return s;  // a shard: its results are in the store, the report comes from `ahbm merge`
  }
  const auto part = [&results](size_t& at, size_t n) {
    std::vector<pb::JobResult> out(results.begin() + at, results.begin() + at + n);
    at += n;
    return out;
  };
  size_t at = 0;
  const std::vector<pb::JobResult> panel_results = part(at, jobs->size());
  const std::vector<pb::JobResult> study_results = part(at, job_study.size());
  const std::vector<pb::JobResult> timeline_results = part(at, timeline_jobs.size());
  const std::vector<pb::JobResult> numeric_results = part(at, numeric_workloads.size());

  // The panels (ADR §A).
  absl::StatusOr<std::vector<Row>> rows = RowsFrom(chip, *jobs, panel_results);
  RETURN_IF_ERROR(rows.status());
  RETURN_IF_ERROR(WriteFile(out_dir / "milestone.csv", ToCsv(chip, *rows, tool)));
  RETURN_IF_ERROR(WriteFile(out_dir / "milestone.json", ToJson(chip, *rows, tool)));
  // The studies (ADR §9, §B): each answer from its CSV.
  absl::StatusOr<std::vector<StudyOutcome>> outcomes =
      OutcomesFrom(*studies, study_results, out_dir);
  RETURN_IF_ERROR(outcomes.status());
  // One PE's engines under opt1, opt3 and opt2 (ADR §5.6), from their op logs.
  absl::StatusOr<std::vector<TimelineRun>> timeline =
      TimelineRunsFrom(timeline_jobs, timeline_results);
  RETURN_IF_ERROR(timeline.status());
  // Each kernel once in data mode against the float64 reference.
  const std::vector<NumericCheck> checks_list = ChecksFrom(numeric_workloads, numeric_results);
  const std::vector<NumericCheck>* checks = &checks_list;

  // stdout after the progress line is done (on a terminal it shares the screen).
  std::fputs(FormatTables(*rows).c_str(), stdout);
  if (!studies->empty()) std::printf("\n%s", FormatAnswers(*outcomes).c_str());
  std::printf("\n%s", FormatNumericChecks(*checks).c_str());

  // The report folder: plots, the timeline, the page.
  std::vector<PageStudy> page_studies;
  for (size_t i = 0; i < studies->size(); ++i) {
    const Study& study = (*studies)[i];
    const StudyOutcome& outcome = (*outcomes)[i];
    absl::StatusOr<std::vector<std::string>> svgs = PlotStudy(study, out_dir.string());
    RETURN_IF_ERROR(svgs.status());
    page_studies.push_back({study.name, study.adr, study.question,
                            outcome.answer.ok()
                                ? *outcome.answer
                                : absl::StrCat("no answer: ", outcome.answer.status().message()),
                            absl::StrCat("sweep_", study.name, ".csv"), *svgs});
  }
  RETURN_IF_ERROR(TimelineSvg(*timeline, (out_dir / "timeline.csv").string(),
      (out_dir / "timeline.svg").string()));
  PageInput page = PageOf(flags, chip, tool, *rows, *checks);
  page.studies = std::move(page_studies);
  page.timeline_svg = "timeline.svg";
  std::vector<std::string> files = {"milestone.csv", "milestone.json", "timeline.csv"};
  for (const Study& study : *studies) files.push_back(absl::StrCat("sweep_", study.name, ".csv"));
  for (const std::string& name : files) {
    std::ifstream in(out_dir / name, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    page.files.push_back({name, observe::BytesDigest(bytes)});
  }
  RETURN_IF_ERROR(WriteFile(out_dir / "index.html", IndexHtml(page)));
  std::printf("\nwrote %s: index.html (open it first), milestone.json, milestone.csv, %zu "
              "sweep_*.csv with their plots, timeline.svg\n",
              out_dir.c_str(), outcomes->size());

  // A kernel that computes a wrong answer fails the run, after the report shows which.
  for (const NumericCheck& c : *checks) {
    if (!c.ok) {
      return absl::InternalError(absl::StrCat(
          "numerical check: ", c.kernel, " ", c.variant, " max error ", c.max_abs_error,
          " above the tolerance ", c.tolerance, c.note.empty() ? "" : " (" + c.note + ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ahbm::milestone
