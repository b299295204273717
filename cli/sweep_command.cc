#include "cli/sweep_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "cluster/placement.h"
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
  std::vector<FlagSpec> specs = {{"param",
           "a workload field (s, variant, c, ...) or a topology field path into ahbm.pb.Chip "
           "(sip.cube.pe.scheduler.max_inflight_composites); repeat for a grid, first outermost",
           "", false, /*repeated=*/true},
          {"values", "comma-separated values of the --param before it", "", false,
           /*repeated=*/true},
          {"out", "write the rows as CSV here (header: sweep/README.md)", ""},
          {"json", "write the rows as JSON here", ""},
          {"out_dir",
           "write sweep.csv and sweep.json here, and keep every job's result in its jobs/ "
           "(--resume, --shard, ahbm merge)",
           ""}};
  for (FlagSpec& flag : cluster::PlacementFlags()) specs.push_back(std::move(flag));
  return specs;
}

absl::Status RunSweep(const ParsedFlags& flags, const pb::Chip& chip, pb::Workload workload,
                      cluster::RunMode mode) {
  absl::StatusOr<std::vector<sweep::Param>> params = ParamsOf(flags);
  RETURN_IF_ERROR(params.status());
  const std::string out_dir = flags.GetOr("out_dir", "");
  if (!out_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(out_dir, error);
    if (error || !std::filesystem::is_directory(out_dir)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--out_dir: cannot create ", out_dir, error ? ": " + error.message() : ""));
    }
  }
  struct Output {
    std::string flag, path;
    bool json;
  };
  std::vector<Output> outputs;
  if (const auto path = flags.Get("out")) outputs.push_back({"out", *path, false});
  if (const auto path = flags.Get("json")) outputs.push_back({"json", *path, true});
  if (!out_dir.empty() && !flags.Get("shard")) {  // a shard writes its jobs/ store only
    outputs.push_back({"out_dir", (std::filesystem::path(out_dir) / "sweep.csv").string(), false});
    outputs.push_back({"out_dir", (std::filesystem::path(out_dir) / "sweep.json").string(), true});
  }
  for (const auto& [flag, path, json] : outputs) {
    RETURN_IF_ERROR(Writable(flag, path));
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
  RETURN_IF_ERROR(points.status());
  std::vector<sweep::Job> run;
  for (const sweep::Point& point : *points) {
    if (!point.refused.ok()) continue;
    sweep::Job job{point.chip, point.workload, {}};
    job.options.keep_op_log = false;
    job.options.one_group = true;  // exact where it applies (launch.h); events are the simulated
    run.push_back(std::move(job));
  }
  absl::StatusOr<std::unique_ptr<cluster::Placement>> placement =
      cluster::MakePlacement(flags, {.command = "sweep", .out_dir = out_dir, .mode = mode});
  RETURN_IF_ERROR(placement.status());
  // With workers, one line per finished job on stderr: how far, and the jobs per worker.
  size_t done = 0;
  const std::vector<pb::JobResult> results =
      (*placement)->runner().Run(run, [&](size_t, const pb::JobResult&) {
        ++done;
        if (const std::string note = (*placement)->ProgressNote(); !note.empty()) {
          std::fprintf(stderr, "sweep: %zu of %zu runs done; %s\n", done, run.size(),
                       note.c_str());
        }
      });
  if (absl::Status s = (*placement)->Finish(results); !s.ok() || (*placement)->partial()) {
    return s;  // a shard: its results are in the store, the rows come from `ahbm merge`
  }
  std::vector<sweep::Row> rows;
  size_t next = 0;
  for (const sweep::Point& point : *points) {
    rows.push_back(sweep::MakeRow(point, point.refused.ok() ? &results[next++] : nullptr));
  }
  const std::string csv = sweep::FormatCsv(*params, rows);
  const std::string json = sweep::FormatJson(*params, rows);
  for (const Output& output : outputs) {
    RETURN_IF_ERROR(Write(output.flag, output.path, output.json ? json : csv));
  }
  std::fputs(sweep::FormatTable(*params, rows).c_str(), stdout);
  return absl::OkStatus();
}

}  // namespace ahbm::cli
