#include "cli/sweep_command.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/launch/launcher.h"
#include "sweep/grid.h"
#include "sweep/job_pool.h"

namespace ahbm::cli {

namespace {

// The --param / --values pairs in command-line order.
absl::StatusOr<std::vector<sweep::Param>> ParamsOf(const ParsedFlags& flags) {
  std::vector<sweep::Param> params;
  bool open = false;  // the last --param has no --values yet
  for (const auto& [name, value] : flags.repeated()) {
    if (name == "param") {
      if (open) {
        return absl::InvalidArgumentError(
            absl::StrCat("--param: ", params.back().name, " has no --values after it"));
      }
      for (const sweep::Param& p : params) {
        if (p.name == value) {
          return absl::InvalidArgumentError(absl::StrCat("--param: ", value, " given twice"));
        }
      }
      if (flags.Get(value)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--param: ", value, " is also given as --", value, "; give one"));
      }
      params.push_back({value, {}});
      open = true;
      continue;
    }
    if (!open) {
      return absl::InvalidArgumentError("--values: given without a --param before it");
    }
    params.back().values = absl::StrSplit(value, ',');
    open = false;
  }
  if (open) {
    return absl::InvalidArgumentError(
        absl::StrCat("--param: ", params.back().name, " has no --values after it"));
  }
  if (params.empty()) {
    return absl::InvalidArgumentError("--param: give at least one (--param=s --values=...)");
  }
  return params;
}

// Truncates `path` now, so a file that cannot be written is refused before anything runs.
absl::Status Writable(const std::string& flag, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot write ", path));
  return absl::OkStatus();
}

absl::Status Write(const std::string& flag, const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

std::vector<FlagSpec> SweepFlags() {
  return {{"param",
           "a workload field (s, variant, c, ...) or a topology field path into ahbm.pb.Chip "
           "(sip.cube.pe.scheduler.max_inflight_composites); repeat for a grid, first outermost",
           "", false, /*repeated=*/true},
          {"values", "comma-separated values of the --param before it", "", false,
           /*repeated=*/true},
          {"out", "write the rows as CSV here (header: sweep/README.md)", ""},
          {"json", "write the rows as JSON here", ""},
          {"jobs", "simulations at once (processes)",
           absl::StrCat(sweep::DefaultWorkers(), " (the machine's cores)")}};
}

absl::Status RunSweep(const ParsedFlags& flags, const pb::Chip& chip, pb::Workload workload) {
  absl::StatusOr<std::vector<sweep::Param>> params = ParamsOf(flags);
  if (!params.ok()) return params.status();
  int jobs = sweep::DefaultWorkers();
  if (const auto text = flags.Get("jobs")) {
    if (!absl::SimpleAtoi(*text, &jobs) || jobs < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--jobs: must be a positive integer (got '", *text, "')"));
    }
  }
  for (const char* flag : {"out", "json"}) {
    if (const auto path = flags.Get(flag)) {
      if (absl::Status s = Writable(flag, *path); !s.ok()) return s;
    }
  }
  if (workload.kernel() == pb::KERNEL_UNSPECIFIED) workload.set_kernel(pb::DECODE);
  bool s_swept = false;
  for (const sweep::Param& p : *params) s_swept |= p.name == "s";
  if (const launch::KernelLauncher* launcher = launch::FindLauncher(workload.kernel());
      launcher != nullptr && !s_swept && !workload.has_s() &&
      workload.request_lengths_size() == 0 && launcher->Compare().default_s != 0) {
    workload.set_s(launcher->Compare().default_s);
  }
  absl::StatusOr<std::vector<sweep::Point>> points = sweep::BuildGrid(chip, workload, *params);
  if (!points.ok()) return points.status();
  std::vector<sweep::Job> run;
  for (const sweep::Point& point : *points) {
    if (!point.refused.ok()) continue;
    sweep::Job job{point.chip, point.workload, {}};
    job.options.keep_op_log = false;
    job.options.one_group = true;  // exact where it applies (launch.h); events are the simulated
    run.push_back(std::move(job));
  }
  const std::vector<pb::JobResult> results = sweep::JobPool(jobs).Run(run);
  std::vector<sweep::Row> rows;
  size_t next = 0;
  for (const sweep::Point& point : *points) {
    rows.push_back(sweep::MakeRow(point, point.refused.ok() ? &results[next++] : nullptr));
  }
  if (const auto path = flags.Get("out")) {
    if (absl::Status s = Write("out", *path, sweep::FormatCsv(*params, rows)); !s.ok()) return s;
  }
  if (const auto path = flags.Get("json")) {
    if (absl::Status s = Write("json", *path, sweep::FormatJson(*params, rows)); !s.ok()) {
      return s;
    }
  }
  std::fputs(sweep::FormatTable(*params, rows).c_str(), stdout);
  return absl::OkStatus();
}

}  // namespace ahbm::cli
