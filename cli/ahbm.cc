// `ahbm`: the ahbmsim command line (DESIGN §6).
//   ahbm validate [--topology=F]   check a topology and print its one-screen summary
//   ahbm stream [--topology=F] ... run an injected command stream (no kernels) and report
//   ahbm run [--topology=F] [--workload=W] [--<workload field>=V ...] ...
//                                  run a workload's kernels (kernels/launch) and report
//   ahbm replay, diff, hbm, compare, sweep, milestone, worker, merge, slurm (see `ahbm help`)
//   ahbm help [command], ahbm <command> --help   a command's flags
//   ahbm version, ahbm --version                   version, git commit, build type
// Relative paths are taken from the current directory; the default topology, and a shipped
// topology or workload file named by its repository path (topology/small.textproto) that is
// not there, are read from the install (InstallPath).
// Exit codes, by the failure's kind (base/errors.h): 0 success, 2 bad input (one line naming
// the field or file and the reason), 3 kernel deadlock (naming each waiting PE), 4 a kernel's
// fault at run time (a command its PE refuses, an arena overflow), 70 the simulator's own bug
// (an invariant: a failed AHBM_CHECK, reported with the command line and commit, base/check.h,
// or a status of that kind), 1 anything else (a file not writable, a worker lost).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "actors/chip_sim.h"
#include "actors/inject.h"
#include "actors/models/hbm_patterns.h"
#include "actors/observe/chrome_trace.h"
#include "actors/observe/report.h"
#include "actors/observe/trace_diff.h"
#include "base/check.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "cluster/worker.h"
#include "sweep/job_pool.h"
#include "sweep/store.h"
#include "cli/flags.h"
#include "cli/slurm_command.h"
#include "cli/sweep_command.h"
#include "cli/version.h"
#include "kernels/launch/compare.h"
#include "kernels/launch/launch.h"
#include "kernels/launch/launcher.h"
#include "kernels/launch/workload_io.h"
#include "kernels/replay/replay.h"
#include "milestone/command.h"
#include "topology/ids.h"
#include "topology/loader.h"
#include "topology/summary.h"

namespace ahbm::cli {
namespace {

constexpr char kDefaultTopology[] = "topology/chip_4sip.textproto";
constexpr char kVersion[] = "0.1";

// "ahbm 0.1 (commit abc1234, opt build)": `ahbm version` and an internal error's bug report.
std::string VersionLine() {
  return absl::StrCat("ahbm ", kVersion, " (commit ", AHBM_GIT_COMMIT, ", ", AHBM_BUILD_TYPE,
                      " build)");
}
constexpr char kWorkspace[] = "ahbmsim";  // WORKSPACE's name: the runfiles directory

// The directories the install's files are read from, in order: the runfiles of `bazel run`
// and `bazel test` ($RUNFILES_DIR, $TEST_SRCDIR), then the runfiles tree Bazel builds beside
// the binary (<binary>.runfiles; /proc/self/exe resolves the .bazel/bin symlink), then beside
// the path it was started by, then the runfiles tree that path lies in. The runfiles hold the
// shipped topologies and workloads (cli/BUILD.bazel data) as links into the repository that
// built the binary.
std::vector<std::filesystem::path> InstallRoots(const char* argv0) {
  std::vector<std::filesystem::path> roots;
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = std::getenv(env); dir != nullptr && *dir != '\0') {
      roots.push_back(std::filesystem::path(dir) / kWorkspace);
    }
  }
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) roots.push_back(exe.string() + ".runfiles/" + kWorkspace);
  if (argv0 != nullptr) {
    const std::string started(argv0);
    roots.push_back(started + ".runfiles/" + kWorkspace);
    // Started from inside another target's runfiles tree (a test's data): that tree.
    if (const size_t at = started.rfind(".runfiles/"); at != std::string::npos) {
      roots.push_back(started.substr(0, at) + ".runfiles/" + kWorkspace);
    }
  }
  return roots;
}

std::vector<std::filesystem::path>& Roots() {
  static std::vector<std::filesystem::path> roots;
  return roots;
}

// A file the user named, or a default: the path as given when it is absolute or exists
// (relative to the current directory), else the install's copy of it when the install has
// one (a shipped topology or workload named by its repository path), else as given (the read
// then fails naming it).
std::string InstallPath(const std::string& path) {
  std::error_code error;
  if (path.empty() || std::filesystem::path(path).is_absolute() ||
      std::filesystem::exists(path, error)) {
    return path;
  }
  for (const std::filesystem::path& root : Roots()) {
    const std::filesystem::path candidate = root / path;
    if (std::filesystem::is_regular_file(candidate, error)) return candidate.string();
  }
  return path;
}

absl::StatusOr<pb::Chip> LoadTopologyFlag(const ParsedFlags& flags) {
  return topology::LoadTopologyFile(InstallPath(flags.GetOr("topology", kDefaultTopology)));
}
// `ahbm compare`'s default rows: the ADR kernels and the baselines that run in seconds at full
// scale; baseline_fanout_group (gate 3, minutes at full scale) is named with --variants.
// `ahbm compare` without --kernel.
constexpr pb::Kernel kCompareKernel = pb::DECODE;

// The kernel's compare rows (its launcher's CompareSpec, launcher.h).
launch::CompareSpec CompareSpecOf(pb::Kernel kernel) {
  const launch::KernelLauncher* launcher = launch::FindLauncher(kernel);
  return launcher == nullptr ? launch::CompareSpec{} : launcher->Compare();
}

// "opt1,opt3,opt2" (sep ",") or "opt1, opt3, opt2".
std::string VariantNames(const std::vector<pb::Variant>& variants, const char* sep) {
  std::vector<std::string> names;
  for (pb::Variant v : variants) names.push_back(absl::AsciiStrToLower(pb::Variant_Name(v)));
  return absl::StrJoin(names, sep);
}

struct Command {
  std::string name;
  std::string summary;
  std::vector<FlagSpec> flags;
  std::function<absl::Status(const ParsedFlags&)> run;
  size_t positional = 0;  // positional arguments it takes (ahbm diff A B)
  // When set, the flags its arguments parse with (`ahbm slurm sweep ...`: slurm's and sweep's);
  // `flags` are then what `ahbm help` shows.
  std::function<std::vector<FlagSpec>(const std::vector<std::string>&)> flags_for;
};

absl::Status RunValidate(const ParsedFlags& flags) {
  const std::string path = flags.GetOr("topology", kDefaultTopology);
  absl::StatusOr<pb::Chip> chip = LoadTopologyFlag(flags);
  RETURN_IF_ERROR(chip.status());
  std::fputs(topology::TopologySummary(*chip).c_str(), stdout);
  std::printf("%s: valid\n", path.c_str());
  return absl::OkStatus();
}

// --hbm_call_memo: on, off or verify (actors/models/hbm_call_memo.h).
absl::StatusOr<sim::HbmCallMemo::Mode> MemoFlag(const ParsedFlags& flags) {
  const std::string text = flags.GetOr("hbm_call_memo", "on");
  if (text == "on") return sim::HbmCallMemo::Mode::kOn;
  if (text == "off") return sim::HbmCallMemo::Mode::kOff;
  if (text == "verify") return sim::HbmCallMemo::Mode::kVerify;
  return absl::InvalidArgumentError(
      absl::StrCat("--hbm_call_memo: must be on, off or verify (got '", text, "')"));
}

// --units: the report table's unit rows — "summary" (per kind and the 10 busiest) or "all".
absl::StatusOr<observe::TableOptions> TableFlag(const ParsedFlags& flags) {
  const std::string text = flags.GetOr("units", "summary");
  observe::TableOptions options;
  if (text == "all") {
    options.units = observe::UnitRows::kAll;
  } else if (text != "summary") {
    return absl::InvalidArgumentError(
        absl::StrCat("--units: must be summary or all (got '", text, "')"));
  }
  return options;
}

absl::Status WriteFile(const std::string& flag, const std::string& path,
                       const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  if (!out) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot write ", path));
  return absl::OkStatus();
}

// --chrome_trace, --report_json, --report_csv: the files a run writes besides its op log.
absl::Status WriteRunFiles(const ParsedFlags& flags, const topology::ChipIndex& index,
                           const pb::Report& report, const std::vector<pb::TraceRecord>& records) {
  if (const auto file = flags.Get("chrome_trace")) {
    const std::string json = observe::ChromeTraceJson(records, [&](uint32_t pe) {
      const std::string cpu = index.Name(index.PeUnit(topology::UnitKind::kPeCpu, index.PeOf(pe)));
      return cpu.substr(0, cpu.rfind('.'));
    });
    RETURN_IF_ERROR(WriteFile("chrome_trace", *file, json));
  }
  if (const auto file = flags.Get("report_json")) {
    RETURN_IF_ERROR(WriteFile("report_json", *file, observe::ReportToJson(report)));
  }
  if (const auto file = flags.Get("report_csv")) {
    RETURN_IF_ERROR(WriteFile("report_csv", *file, observe::ReportToCsv(report)));
  }
  return absl::OkStatus();
}

// ahbm stream: every PE of the chosen CUBEs runs "DMA dma_bytes, then composite GEMM
// (m, k, n) x count" (actors/inject.h); prints the report table.
absl::Status RunStream(const ParsedFlags& flags) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFlag(flags);
  RETURN_IF_ERROR(chip.status());
  ASSIGN_OR_RETURN(const auto m, IntFlag(flags, "m", "8"));
  ASSIGN_OR_RETURN(const auto k, IntFlag(flags, "k", "128"));
  ASSIGN_OR_RETURN(const auto n, IntFlag(flags, "n", "256"));
  ASSIGN_OR_RETURN(const auto count, IntFlag(flags, "count", "64"));
  ASSIGN_OR_RETURN(const auto dma_bytes, IntFlag(flags, "dma_bytes", "1048576", /*zero_ok=*/true));
  ASSIGN_OR_RETURN(const auto per_tile_events, BoolFlag(flags, "per_tile_events"));
  ASSIGN_OR_RETURN(const auto per_tile_detail, BoolFlag(flags, "per_tile_detail"));
  ASSIGN_OR_RETURN(const auto table_options, TableFlag(flags));
  if (dma_bytes % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dma_bytes: must hold whole bf16 elements (got ", dma_bytes, ")"));
  }
  if (count > 1'000'000) {
    return absl::InvalidArgumentError(absl::StrCat("--count: at most 1000000 (got ", count, ")"));
  }
  sim::ChipSimOptions options;
  options.issue_cost_profile = flags.GetOr("profile", "");
  options.per_tile_events = per_tile_events;
  options.per_tile_detail = per_tile_detail;
  for (const absl::string_view part : absl::StrSplit(flags.GetOr("cubes", "0"), ',')) {
    uint32_t cube = 0;
    if (!absl::SimpleAtoi(part, &cube)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cubes: must be a comma-separated list of CUBE indices (got '", part, "')"));
    }
    options.cubes.push_back(cube);
  }
  options.workload_summary =
      absl::StrCat("stream: per PE, DMA ", dma_bytes, " B then composite GEMM (", m, ", ", k, ", ",
                   n, ") x ", count);
  std::unique_ptr<std::ofstream> trace;
  if (const auto file = flags.Get("trace")) {
    trace = std::make_unique<std::ofstream>(*file, std::ios::binary | std::ios::trunc);
    if (!*trace) return absl::InvalidArgumentError(absl::StrCat("--trace: cannot write ", *file));
    options.op_log_stream = trace.get();
  }
  absl::StatusOr<std::unique_ptr<sim::ChipSim>> created = sim::ChipSim::Create(*chip, options);
  RETURN_IF_ERROR(created.status());
  sim::ChipSim& sim = **created;
  // The stream's HBM footprint must fit the PE's region (checked per command as well).
  const uint32_t pes = chip->sip().cube().pes();
  for (uint32_t cube : options.cubes) {
    for (uint32_t p = 0; p < pes; ++p) {
      const uint32_t pe = cube * pes + p;
      RETURN_IF_ERROR(sim.SetProgram(pe, sim::inject::DmaThenGemmStream(pe, dma_bytes, m, k, n,
          static_cast<int>(count))));
    }
  }
  RETURN_IF_ERROR(sim.Run());
  if (trace) {
    trace->close();
    if (!*trace) return absl::InvalidArgumentError("--trace: write failed");
  }
  const pb::Report report = sim.BuildReport();
  std::fputs(observe::FormatReportTable(report, table_options).c_str(), stdout);
  return WriteRunFiles(flags, sim.context().index, report, sim.op_log().records());
}

// ahbm run: the workload from --workload (protobuf text format), overridden field by field by
// flags of the same name; runs it (launch::RunWorkload) and prints the report table. The
// report files are written even when the kernels fail (a deadlock's trace is the useful one).
// The workload of --workload (if any) with every workload-field flag applied.
absl::StatusOr<pb::Workload> WorkloadFromFlags(const ParsedFlags& flags) {
  pb::Workload workload;
  if (const auto file = flags.Get("workload")) {
    absl::StatusOr<pb::Workload> loaded = launch::LoadWorkloadFile(InstallPath(*file));
    RETURN_IF_ERROR(loaded.status());
    workload = *std::move(loaded);
  }
  for (const launch::WorkloadField& field : launch::WorkloadFields()) {
    const auto value = flags.Get(field.name);
    if (!value) continue;
    if (absl::Status s = launch::SetWorkloadField(workload, field.name, *value); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", std::string(s.message())));
    }
  }
  return workload;
}

absl::Status RunRun(const ParsedFlags& flags) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFlag(flags);
  RETURN_IF_ERROR(chip.status());
  absl::StatusOr<pb::Workload> workload_or = WorkloadFromFlags(flags);
  RETURN_IF_ERROR(workload_or.status());
  const pb::Workload& workload = *workload_or;
  ASSIGN_OR_RETURN(const auto per_tile_detail, BoolFlag(flags, "per_tile_detail"));
  ASSIGN_OR_RETURN(const auto save_inputs, BoolFlag(flags, "save_inputs"));
  ASSIGN_OR_RETURN(const auto table_options, TableFlag(flags));
  ASSIGN_OR_RETURN(const auto memo, MemoFlag(flags));
  ASSIGN_OR_RETURN(const auto one_group, BoolFlag(flags, "one_group"));
  launch::LaunchOptions options;
  options.hbm_call_memo = memo;
  options.one_group = one_group;
  options.save_inputs = save_inputs;
  options.inputs_dir = flags.GetOr("inputs_dir", "");
  options.outputs_dir = flags.GetOr("outputs_dir", "");
  options.trace_path = flags.GetOr("trace", "");
  options.message_trace_path = flags.GetOr("message_trace", "");
  options.per_tile_detail = per_tile_detail;
  options.keep_op_log = flags.Get("chrome_trace").has_value();  // only the Chrome trace reads it
  absl::StatusOr<launch::LaunchResult> result = launch::RunWorkload(*chip, workload, options);
  RETURN_IF_ERROR(result.status());
  RETURN_IF_ERROR(WriteRunFiles(flags, topology::ChipIndex(*chip), result->report, result->op_log));
  if (!result->runtime_status.ok()) return result->runtime_status;
  std::fputs(observe::FormatReportTable(result->report, table_options).c_str(), stdout);
  if (result->group_scale > 1) {
    std::printf("one group: CUBE set 1 of %u simulated (%llu events), the chip's figures scaled "
                "x%u\n",
                result->group_scale, static_cast<unsigned long long>(result->report.events()),
                result->group_scale);
  } else if (one_group) {
    std::printf("one group: not used (%s); the full chip was simulated\n",
                result->one_group_note.c_str());
  }
  if (const sim::HbmCallMemo::Stats& m = result->hbm_call_memo; m.calls > 0) {
    std::fprintf(stderr, "hbm call memo: %llu of %llu channel calls replayed\n",
                 static_cast<unsigned long long>(m.hits), static_cast<unsigned long long>(m.calls));
  }
  return absl::OkStatus();
}

// ahbm replay: a recorded trace's kernel calls run again without kernel code (replay.h), on
// the trace's topology or another (what-if timing; the same geometry).
absl::Status RunReplay(const ParsedFlags& flags) {
  const std::string trace_path = flags.GetOr("trace", "");
  if (trace_path.empty()) return absl::InvalidArgumentError("--trace: the trace to replay is required");
  ASSIGN_OR_RETURN(const auto table_options, TableFlag(flags));
  absl::StatusOr<replay::RecordedTrace> trace = replay::ReadTraceFile(trace_path);
  RETURN_IF_ERROR(trace.status());
  replay::ReplayOptions options;
  if (const auto path = flags.Get("topology")) {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(InstallPath(*path));
    RETURN_IF_ERROR(chip.status());
    options.chip = *chip;
  }
  options.issue_cost_profile = flags.GetOr("issue_cost_profile", "");
  options.trace_out = flags.GetOr("trace_out", "");
  options.message_trace = flags.GetOr("message_trace", "");
  options.keep_op_log = flags.Get("chrome_trace").has_value();
  absl::StatusOr<launch::LaunchResult> result = replay::Replay(*trace, options);
  RETURN_IF_ERROR(result.status());
  const pb::Chip& chip = options.chip ? *options.chip : trace->header.chip();
  RETURN_IF_ERROR(WriteRunFiles(flags, topology::ChipIndex(chip), result->report, result->op_log));
  if (!result->runtime_status.ok()) return result->runtime_status;
  std::fputs(observe::FormatReportTable(result->report, table_options).c_str(), stdout);
  return absl::OkStatus();
}

// ahbm diff A B: two traces (or reports) of the same streams compared (observe/trace_diff.h).
absl::Status RunDiff(const ParsedFlags& flags) {
  if (flags.positional().size() != 2) {
    return absl::InvalidArgumentError(
        "give two runs, `ahbm diff A B` (traces from --trace/--trace_out or reports from "
        "--report_json)");
  }
  ASSIGN_OR_RETURN(const auto rows, IntFlag(flags, "path_rows", "40"));
  absl::StatusOr<observe::RunRecord> a = observe::ReadRun(flags.positional()[0]);
  RETURN_IF_ERROR(a.status());
  absl::StatusOr<observe::RunRecord> b = observe::ReadRun(flags.positional()[1]);
  RETURN_IF_ERROR(b.status());
  ASSIGN_OR_RETURN(const auto force, BoolFlag(flags, "force"));
  if (!force) {
    RETURN_IF_ERROR(observe::CheckSameStreams(*a, *b));
  }
  std::fputs(observe::FormatDiff(*a, *b, rows).c_str(), stdout);
  return absl::OkStatus();
}

// ahbm hbm: one pseudo-channel's bank model on the calibration's access patterns
// (hbm_patterns.h).
absl::Status RunHbm(const ParsedFlags& flags) {
  std::vector<std::string> patterns = sim::HbmPatternNames();
  const std::string pattern = flags.GetOr("pattern", "all");
  if (pattern != "all") {
    if (std::find(patterns.begin(), patterns.end(), pattern) == patterns.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--pattern: unknown '", pattern, "' (want ",
                                                     absl::StrJoin(patterns, ", "), " or all)"));
    }
    patterns = {pattern};
  }
  const std::vector<std::pair<std::string, sim::HbmBankTiming::Refresh>> all_modes = {
      {"none", sim::HbmBankTiming::Refresh::kNone},
      {"all_bank", sim::HbmBankTiming::Refresh::kAllBank},
      {"per_bank", sim::HbmBankTiming::Refresh::kPerBank}};
  std::vector<std::pair<std::string, sim::HbmBankTiming::Refresh>> modes;
  const std::string refresh = flags.GetOr("refresh", "all");
  for (const auto& m : all_modes) {
    if (refresh == "all" || refresh == m.first) modes.push_back(m);
  }
  if (modes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--refresh: unknown '", refresh, "' (want none, all_bank, per_bank or all)"));
  }
  ASSIGN_OR_RETURN(const auto bursts, IntFlag(flags, "bursts", "200000"));
  // Ramulator 2's HBM3 6400 Mbps part, or a topology's BANK channel.
  sim::HbmBankTiming timing;
  double tck_ns = 0.625;
  std::string part = "Ramulator 2 HBM3_6400Mbps";
  if (const auto path = flags.Get("topology")) {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(InstallPath(*path));
    RETURN_IF_ERROR(chip.status());
    const pb::HbmChannel& hbm = chip->sip().cube().hbm_channel();
    if (hbm.model() != pb::BANK) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--topology: ", *path, " times HBM with the FIFO; the patterns need model: BANK"));
    }
    timing = sim::BankTimingOf(hbm);
    tck_ns = 1000.0 / hbm.clock_mhz();
    part = absl::StrCat(chip->name(), "'s channel");
  }
  std::printf("%s (tCK %.3f ns, %u B bursts, %s, %u-entry queue), %llu bursts per pattern\n",
              part.c_str(), tck_ns, timing.burst_bytes,
              timing.scheduler == sim::HbmBankTiming::Scheduler::kFcfs ? "FCFS" : "FR-FCFS",
              timing.queue_depth, static_cast<unsigned long long>(bursts));
  std::printf("%-16s %-9s %8s %14s %13s\n", "pattern", "refresh", "of peak", "latency mean",
              "latency max");
  for (const std::string& p : patterns) {
    for (const auto& [name, mode] : modes) {
      sim::HbmBankTiming t = timing;
      t.refresh = mode;
      absl::StatusOr<sim::HbmPatternResult> r = sim::RunHbmPattern(t, p, bursts);
      if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat("--", r.status().message()));
      std::printf("%-16s %-9s %7.1f%% %11.1f ns %10.1f ns\n", p.c_str(), name.c_str(),
                  100 * r->fraction_of_peak, r->mean_latency_cycles * tck_ns,
                  r->max_latency_cycles * tck_ns);
    }
  }
  return absl::OkStatus();
}

// ahbm compare: every decode variant and the baseline on one DECODE workload (timing mode),
// as one table (launch::Compare; rows and defaults from the kernel's launcher, decode_run.h).
// --reduce_options: opt1/opt3/opt2 x reduce_payload x reduce_merge (CompareReduceOptions).
absl::Status RunCompare(const ParsedFlags& flags) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFlag(flags);
  RETURN_IF_ERROR(chip.status());
  absl::StatusOr<pb::Workload> workload = WorkloadFromFlags(flags);
  RETURN_IF_ERROR(workload.status());
  const std::vector<pb::Kernel> kernels = launch::CompareKernels();
  if (workload->kernel() != pb::KERNEL_UNSPECIFIED &&
      std::find(kernels.begin(), kernels.end(), workload->kernel()) == kernels.end()) {
    std::vector<std::string> names;
    for (pb::Kernel k : kernels) names.push_back(pb::Kernel_Name(k));
    return absl::InvalidArgumentError(
        absl::StrCat("--kernel: compare runs ", absl::StrJoin(names, ", "), " only"));
  }
  if (workload->has_variant()) {
    return absl::InvalidArgumentError("--variant: compare runs every variant; use --variants");
  }
  if (workload->data()) return absl::InvalidArgumentError("--data: compare runs in timing mode");
  if (workload->kernel() == pb::KERNEL_UNSPECIFIED) workload->set_kernel(kCompareKernel);
  const launch::CompareSpec spec = CompareSpecOf(workload->kernel());
  if (!workload->has_s() && workload->request_lengths_size() == 0 && spec.default_s != 0) {
    workload->set_s(spec.default_s);  // a given s, 0 too, is the run's to use or refuse
  }
  const absl::StatusOr<bool> by_options_or = BoolFlag(flags, "reduce_options");
  RETURN_IF_ERROR(by_options_or.status());
  const bool by_options = *by_options_or;
  std::vector<pb::Variant> variants;
  const std::string default_variants =
      VariantNames(by_options ? spec.reduce_option_rows : spec.rows, ",");
  for (const absl::string_view name :
       absl::StrSplit(flags.GetOr("variants", default_variants), ',')) {
    pb::Variant v;
    if (!pb::Variant_Parse(absl::AsciiStrToUpper(std::string(name)), &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--variants: unknown variant '", std::string(name), "'"));
    }
    variants.push_back(v);
  }
  if (by_options) {
    if (workload->reduce_payload() != pb::REDUCE_PAYLOAD_UNSPECIFIED ||
        workload->reduce_merge() != pb::REDUCE_MERGE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          "--reduce_options: runs every reduce_payload x reduce_merge; do not set either");
    }
    std::vector<pb::Variant> allowed = spec.reduce_option_rows;
    std::sort(allowed.begin(), allowed.end());
    for (pb::Variant v : variants) {
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--variants: ", absl::AsciiStrToLower(pb::Variant_Name(v)),
            " has no ADR reduce; --reduce_options takes ", VariantNames(allowed, ", ")));
      }
    }
  }
  absl::StatusOr<std::vector<launch::CompareRow>> rows =
      by_options ? launch::CompareReduceOptions(*chip, *workload, variants)
                 : launch::Compare(*chip, *workload, variants);
  RETURN_IF_ERROR(rows.status());
  std::fputs(launch::FormatCompareTable(*chip, *rows, by_options).c_str(), stdout);
  return absl::OkStatus();
}

// The workload's bool fields (data, no_rotation) are boolean flags: a bare --data is true.
void MarkBooleanWorkloadFlags(std::vector<FlagSpec>& flags) {
  for (FlagSpec& flag : flags) {
    const google::protobuf::FieldDescriptor* field =
        pb::Workload::descriptor()->FindFieldByName(flag.name);
    if (field != nullptr && field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_BOOL) {
      flag.boolean = true;
    }
  }
}

std::vector<FlagSpec> CompareFlags() {
  std::vector<FlagSpec> flags = {
      {"topology", "chip config, protobuf text format (ahbm.pb.Chip)", kDefaultTopology},
      {"variants", "comma-separated variants of the kernel, in table order (prefill: "
                   "flash,short_context,ring,baseline_fanout)",
       VariantNames(CompareSpecOf(kCompareKernel).rows, ",")},
      {"reduce_options",
       "each variant x reduce_payload {triplet, packed} x reduce_merge {primitive, fused} "
       "(default variants then opt1,opt3,opt2)",
       "false", /*boolean=*/true},
      {"workload", "DECODE or PREFILL workload, protobuf text format; flags below override it",
       ""}};
  for (const launch::WorkloadField& field : launch::WorkloadFields()) {
    flags.push_back({field.name, field.help,
                     field.name == "s" ? absl::StrCat(CompareSpecOf(kCompareKernel).default_s)
                                       : ""});
  }
  MarkBooleanWorkloadFlags(flags);
  return flags;
}

// ahbm sweep (cli/sweep_command.h): the chip and workload as `ahbm run` reads them.
absl::Status RunSweepCommand(const ParsedFlags& flags, cluster::RunMode mode = {}) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFlag(flags);
  RETURN_IF_ERROR(chip.status());
  absl::StatusOr<pb::Workload> workload = WorkloadFromFlags(flags);
  RETURN_IF_ERROR(workload.status());
  return RunSweep(flags, *chip, *std::move(workload), mode);
}

absl::Status RunMilestone(const ParsedFlags& flags, cluster::RunMode mode = {}) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFlag(flags);
  RETURN_IF_ERROR(chip.status());
  return milestone::RunMilestoneCommand(flags, *chip, {kVersion, AHBM_GIT_COMMIT}, mode);
}

std::vector<FlagSpec> SweepCommandFlags();

// ahbm merge DIR... --out_dir=D (sweep/store.h MergeStores): the shards' stores joined, then
// their command run from the joined store (nothing simulated), writing its report into D.
absl::Status RunMerge(const ParsedFlags& flags) {
  const std::optional<std::string> out_dir = flags.Get("out_dir");
  if (!out_dir || out_dir->empty()) {
    return absl::InvalidArgumentError("--out_dir: required (the folder the report goes to)");
  }
  absl::StatusOr<pb::StoreManifest> manifest = sweep::MergeStores(flags.positional(), *out_dir);
  RETURN_IF_ERROR(manifest.status());
  std::vector<std::string> args(manifest->args().begin(), manifest->args().end());
  args.push_back("--out_dir=" + *out_dir);
  const bool sweep = manifest->command() == "sweep";
  if (!sweep && manifest->command() != "milestone") {
    return absl::InvalidArgumentError(
        absl::StrCat("the folders hold jobs of '", manifest->command(),
                     "', which merge does not know"));
  }
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(
      manifest->command(), sweep ? SweepCommandFlags() : milestone::MilestoneFlags(), args);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the manifest's flags: ", parsed.status().message()));
  }
  const cluster::RunMode merge{.merge = true};
  return sweep ? RunSweepCommand(*parsed, merge) : RunMilestone(*parsed, merge);
}

// What `ahbm slurm` submits (cli/slurm_command.h).
const std::vector<SubmittableCommand>& Submittable() {
  static const std::vector<SubmittableCommand> commands = {
      {"sweep", SweepCommandFlags(),
       [](const ParsedFlags& flags, cluster::RunMode mode) {
         return RunSweepCommand(flags, mode);
       }},
      {"milestone", milestone::MilestoneFlags(),
       [](const ParsedFlags& flags, cluster::RunMode mode) { return RunMilestone(flags, mode); }},
  };
  return commands;
}

std::vector<FlagSpec> SweepCommandFlags() {
  std::vector<FlagSpec> flags = SweepFlags();
  flags.push_back(
      {"topology", "chip config, protobuf text format (ahbm.pb.Chip)", kDefaultTopology});
  flags.push_back({"workload", "workload, protobuf text format; flags below override it", ""});
  for (const launch::WorkloadField& field : launch::WorkloadFields()) {
    flags.push_back({field.name, field.help, ""});
  }
  MarkBooleanWorkloadFlags(flags);
  return flags;
}

std::vector<FlagSpec> RunFlags() {
  std::vector<FlagSpec> flags = {
      {"topology", "chip config, protobuf text format (ahbm.pb.Chip)", kDefaultTopology},
      {"workload", "workload, protobuf text format (ahbm.pb.Workload); flags below override it",
       ""},
      {"inputs_dir", "data mode: read the inputs' .npy files here (default: from seed)", ""},
      {"outputs_dir", "data mode: write the outputs' .npy files here", ""},
      {"save_inputs", "data mode: also write the inputs generated from seed into outputs_dir",
       "false", /*boolean=*/true},
      {"per_tile_detail", "op log: one record per tile op as well", "false", /*boolean=*/true},
      {"trace",
       "record a replayable trace here: the op log and every kernel call (length-delimited "
       "ahbm.pb.TraceRecord; ahbm replay)",
       ""},
      {"message_trace",
       "write every message the engine delivers here (length-delimited ahbm.pb.Envelope: time, "
       "source, sequence, destination, the command)",
       ""},
      {"chrome_trace", "write a Chrome trace / Perfetto JSON here", ""},
      {"report_json", "write the report as JSON here", ""},
      {"report_csv", "write the per-unit stats as CSV here (every unit)", ""},
      {"units", "report table: summary (per unit kind, the 10 busiest units) or all", "summary"},
      {"hbm_call_memo",
       "BANK HBM channels: replay repeated channel calls from a memo (on; the same results), "
       "simulate every one (off), or both and check (verify)",
       "on"},
      {"one_group",
       "simulate one CUBE Group when every group does the same work and scale the chip's "
       "figures (DESIGN §3; otherwise the full chip, saying why); a trace or Chrome trace then "
       "records the simulated group",
       "false", /*boolean=*/true}};
  for (const launch::WorkloadField& field : launch::WorkloadFields()) {
    flags.push_back({field.name, field.help, ""});
  }
  MarkBooleanWorkloadFlags(flags);
  return flags;
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"validate",
       "check a topology config and print its summary (units, peak bandwidth and FLOP/s)",
       {{"topology", "chip config, protobuf text format (ahbm.pb.Chip)", kDefaultTopology}},
       RunValidate},
      {"stream",
       "run an injected command stream on every PE of some CUBEs (no kernels) and print the report",
       {{"topology", "chip config, protobuf text format (ahbm.pb.Chip)", kDefaultTopology},
        {"cubes", "comma-separated global CUBE indices whose PEs run the stream", "0"},
        {"dma_bytes", "bytes each PE first loads from HBM (0: none)", "1048576"},
        {"m", "composite GEMM rows (A is [m, k] bf16 in TCM)", "8"},
        {"k", "composite GEMM depth (B is [k, n] bf16 in HBM)", "128"},
        {"n", "composite GEMM columns (out is [m, n] fp32 in TCM)", "256"},
        {"count", "composites per PE", "64"},
        {"profile", "PE CPU issue-cost profile (default: the chip's default)", ""},
        {"per_tile_events", "step the schedulers tile by tile (same results, more events)", "false",
         /*boolean=*/true},
        {"per_tile_detail", "op log: one record per tile op as well", "false", /*boolean=*/true},
        {"trace", "write the op log here (length-delimited ahbm.pb.TraceRecord)", ""},
        {"chrome_trace", "write a Chrome trace / Perfetto JSON here", ""},
        {"report_json", "write the report as JSON here", ""},
        {"report_csv", "write the per-unit stats as CSV here (every unit)", ""},
        {"units", "report table: summary (per unit kind, the 10 busiest units) or all",
         "summary"}},
       RunStream},
      {"run",
       "run a workload's kernels (decode, prefill, selftest_gemm, selftest_allreduce, "
       "selftest_deadlock, selftest_arena_overflow) and print the report",
       RunFlags(), RunRun},
      {"replay",
       "run a recorded trace's kernel calls again (no kernel code), here or on another topology",
       {{"trace", "the trace to replay (written by `ahbm run --trace`)", ""},
        {"topology", "what-if chip config (default: the trace's own; same geometry)", ""},
        {"issue_cost_profile", "PE CPU issue-cost profile (default: the trace's)", ""},
        {"trace_out", "record this replay as a trace here", ""},
        {"message_trace", "write every message the engine delivers here (ahbm.pb.Envelope)", ""},
        {"chrome_trace", "write a Chrome trace / Perfetto JSON here", ""},
        {"report_json", "write the report as JSON here", ""},
        {"report_csv", "write the per-unit stats as CSV here (every unit)", ""},
        {"units", "report table: summary (per unit kind, the 10 busiest units) or all",
         "summary"}},
       RunReplay},
      {"hbm",
       "one HBM pseudo-channel's bank model on access patterns: fraction of peak, latency",
       {{"pattern", "seq_bank_group, seq_row, kv_banks, kv_same_bank, streams8 or all", "all"},
        {"refresh", "none, all_bank, per_bank or all", "all"},
        {"bursts", "32 B bursts per pattern", "200000"},
        {"topology", "time a BANK channel of this chip config (default: Ramulator 2's HBM3 6400)",
         ""}},
       RunHbm},
      {"diff",
       "A B: two runs of the same streams compared: latency, busy time per unit kind, the first "
       "diverging command, each critical path",
       {{"path_rows", "critical-path rows shown per run (the longest, in time order)", "40"},
        {"force",
         "compare runs of other workloads or chip geometries too (refused by default: their "
         "steps do not correspond)",
         "false", /*boolean=*/true}},
       RunDiff, /*positional=*/2},
      {"compare",
       "Llama3-70B decode (or --kernel=prefill): every variant and the pre-ADR baselines on one "
       "workload, one table",
       CompareFlags(), RunCompare},
      {"sweep",
       "a grid of runs over workload and topology fields, on all cores or workers: one CSV row "
       "per point",
       SweepCommandFlags(), [](const ParsedFlags& flags) { return RunSweepCommand(flags); }},
      {"worker",
       "serve simulation jobs to `ahbm sweep` / `ahbm milestone` --workers (mutual TLS off "
       "loopback)",
       cluster::WorkerFlags(), cluster::RunWorker},
      {"merge",
       "DIR...: join the folders of a --shard=i/n run into the report an unsharded run writes",
       {{"out_dir", "the folder the report goes to (required)", ""}},
       RunMerge, /*positional=*/4096},
      {"milestone",
       "the main job: Llama3-70B's four panels (single/multi-user x decode/prefill), every "
       "variant against the baselines, report files",
       milestone::MilestoneFlags(), [](const ParsedFlags& flags) { return RunMilestone(flags); }},
      {"slurm",
       "sweep|milestone: its jobs as a Slurm job array (one --shard per task) and the merge as a "
       "job after it",
       SlurmFlags(), [](const ParsedFlags& flags) { return RunSlurm(flags, Submittable()); },
       /*positional=*/1,
       [](const std::vector<std::string>& args) { return SlurmFlagsFor(Submittable(), args); }},
  };
  return commands;
}

std::string Usage() {
  std::string out = "usage: ahbm <command> [--flag=value ...]\n\ncommands:\n";
  for (const Command& command : Commands()) {
    absl::StrAppend(&out, "  ", command.name, std::string(12 - command.name.size(), ' '),
                    command.summary, "\n");
  }
  absl::StrAppend(&out, "  help        this text, or 'ahbm help <command>' (ahbm <command> --help) "
                       "for its flags\n",
                  "  version     the version, git commit and build type (also --version)\n");
  absl::StrAppend(&out,
                  "\nRelative paths are taken from the current directory; the default topology "
                  "and the shipped\nfiles (topology/*.textproto, kernels/selftest/*.textproto) "
                  "are read from the install\nwhen they are not there.\n");
  return out;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

int Help(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(Usage().c_str(), stdout);
    return kExitOk;
  }
  const Command* command = FindCommand(args[0]);
  if (command == nullptr) {
    std::fprintf(stderr, "ahbm: unknown command '%s'\n", args[0].c_str());
    return kExitBadInput;
  }
  std::printf("ahbm %s: %s\n\nflags:\n%s", command->name.c_str(), command->summary.c_str(),
              FlagsHelp(command->flags).c_str());
  if (command->flags_for) {
    std::printf("\nand the flags of the command it submits (ahbm help sweep, ahbm help "
                "milestone)\n");
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  // A failed internal check (AHBM_CHECK) names this run in its bug report.
  SetBugReportContext(absl::StrJoin(std::vector<std::string>(argv, argv + argc), " "),
                      VersionLine());
  Roots() = InstallRoots(argv[0]);
  if (argc < 2) {
    std::fputs(Usage().c_str(), stderr);
    return kExitBadInput;
  }
  const std::string name = argv[1];
  // A job run by a worker or a client with workers in a fresh process (sweep/job_pool.h).
  if (name == sweep::kJobCommand && argc == 2) return sweep::JobChildMain();
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (name == "help" || name == "--help" || name == "-h") return Help(args);
  if (name == "version" || name == "--version") {
    std::printf("%s\n", VersionLine().c_str());
    return kExitOk;
  }
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    std::fprintf(stderr, "ahbm: unknown command '%s' (see 'ahbm help')\n", name.c_str());
    return kExitBadInput;
  }
  if (std::any_of(args.begin(), args.end(),
                  [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    return Help({name});
  }
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(name, command->flags_for ? command->flags_for(args) : command->flags, args,
                 command->positional);
  absl::Status status = flags.ok() ? command->run(*flags) : flags.status();
  if (status.ok()) return kExitOk;
  const std::string message(status.message());
  // One line whatever the message quotes from the input (the libraries escape what they quote;
  // this is the last guard of the one-line contract).
  const std::string line = absl::StrReplaceAll(message, {{"\n", "\\n"}, {"\r", "\\r"}});
  std::fprintf(stderr, "ahbm %s: %s\n", name.c_str(), line.c_str());
  return ExitCodeOf(status);  // by the status's kind (base/errors.h)
}

}  // namespace
}  // namespace ahbm::cli

int main(int argc, char** argv) { return ahbm::cli::Main(argc, argv); }
