#include "milestone/timeline.h"

#include <algorithm>
#include <filesystem>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/errors.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "base/text_escape.h"
#include "milestone/plot.h"

namespace ahbm::milestone {
namespace {

// The rows of one run, top to bottom; a bar's engine is its index here.
constexpr const char* kEngines[] = {"CPU stall", "DMA", "GEMM", "MATH"};
constexpr int kNumEngines = 4;

struct Bar {
  size_t run = 0;
  int engine = 0;
  uint64_t start_ps = 0;
  uint64_t end_ps = 0;
  friend bool operator<(const Bar& a, const Bar& b) {
    return std::tie(a.run, a.engine, a.start_ps, a.end_ps) <
           std::tie(b.run, b.engine, b.start_ps, b.end_ps);
  }
};

// The engine of a unit named "<pe_name>.<dma|gemm|math>", or -1.
int EngineOf(const std::string& unit_name, const std::string& pe_name) {
  if (unit_name.size() <= pe_name.size() + 1 || !absl::StartsWith(unit_name, pe_name) ||
      unit_name[pe_name.size()] != '.') {
    return -1;
  }
  const absl::string_view kind = absl::string_view(unit_name).substr(pe_name.size() + 1);
  if (kind == "dma") return 1;
  if (kind == "gemm") return 2;
  if (kind == "math") return 3;
  return -1;
}

std::string Ns(uint64_t ps) { return absl::StrFormat("%.3f", ps / 1000.0); }

// Row y of (run, engine): runs top to bottom, a blank row between runs.
int RowY(size_t run, int engine, size_t runs) {
  return static_cast<int>((runs - 1 - run) * (kNumEngines + 1)) + (kNumEngines - 1 - engine);
}

std::string Script(const std::vector<TimelineRun>& runs, uint64_t window_ps,
                   const std::string& stem, const std::string& svg_name) {
  const int rows = static_cast<int>(runs.size()) * (kNumEngines + 1) - 1;
  std::string s;
  absl::StrAppend(&s, "# Drawn by ahbm milestone (milestone/timeline.h); re-plot: gnuplot ", stem,
                  ".gp\n");
  absl::StrAppendFormat(&s,
                        "set terminal svg size 1200,%d noenhanced font 'sans,13' background "
                        "'#ffffff'\n",
                        140 + 26 * rows);
  absl::StrAppend(&s, "set output ", GnuplotString(svg_name), "\n");
  std::vector<std::string> labels;
  for (const TimelineRun& run : runs) labels.push_back(run.label);
  absl::StrAppend(&s, "set title ",
                  GnuplotString(absl::StrCat("engine timeline of ", runs.front().pe_name, ": ",
                                             absl::StrJoin(labels, ", "))),
                  "\n");
  s += "set xlabel \"time (ns)\"\n";
  absl::StrAppendFormat(&s, "set xrange [0:%s]\n", Ns(window_ps));
  absl::StrAppendFormat(&s, "set yrange [-0.7:%d.7]\n", rows - 1);
  std::vector<std::string> ticks;
  for (size_t r = 0; r < runs.size(); ++r) {
    for (int e = 0; e < kNumEngines; ++e) {
      ticks.push_back(absl::StrCat(GnuplotString(absl::StrCat(runs[r].label, " ", kEngines[e])),
                                   " ", RowY(r, e, runs.size())));
    }
  }
  absl::StrAppend(&s, "set ytics (", absl::StrJoin(ticks, ", "), ")\n");
  s += "set grid xtics\n";
  s += "set key outside right top box title \"engine\"\n";
  // A white border tells back-to-back ops apart.
  s += "set style fill solid 0.85 border lc rgb \"white\"\n";
  std::vector<std::string> plots;
  for (int e = 0; e < kNumEngines; ++e) {
    // x y xlow xhigh ylow yhigh
    plots.push_back(absl::StrCat(GnuplotString(stem + ".dat"), " index ", e,
                                 " using (($1+$2)/2):3:1:2:($3-0.38):($3+0.38) with boxxyerror"
                                 " title ",
                                 GnuplotString(kEngines[e])));
  }
  absl::StrAppend(&s, "plot ", absl::StrJoin(plots, ", \\\n     "), "\n");
  return s;
}

}  // namespace

std::vector<TimelineJob> TimelineJobs(const pb::Chip& chip) {
  std::vector<TimelineJob> jobs;
  for (const auto& [label, variant] :
       {std::pair{"opt1", pb::OPT1}, std::pair{"opt3", pb::OPT3}, std::pair{"opt2", pb::OPT2}}) {
    TimelineJob job;
    job.label = label;
    job.pe_name = "sip0.cube0.pe0";
    job.pe = 0;
    job.job.chip = chip;
    pb::Workload& w = job.job.workload;
    w.set_kernel(pb::DECODE);
    w.set_variant(variant);
    w.set_h_q(64);  // Llama3-70B attention (milestone.h kHq, kHkv, kD)
    w.set_h_kv(8);
    w.set_d(128);
    w.set_s(2048);
    w.set_c(1);
    w.set_p(1);
    job.job.options.keep_op_log = true;
    job.job.options.one_group = false;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

absl::StatusOr<std::vector<TimelineRun>> TimelineRunsFrom(
    const std::vector<TimelineJob>& jobs, const std::vector<pb::JobResult>& results) {
  AHBM_CHECK(jobs.size() == results.size())
      << jobs.size() << " jobs, " << results.size() << " results";
  std::vector<TimelineRun> runs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (absl::Status s = sweep::JobStatus(results[i]); !s.ok()) {
      return Annotate(s, absl::StrCat("timeline run ", jobs[i].label, ": "));
    }
    runs.push_back(
        {jobs[i].label,
         std::vector<pb::TraceRecord>(results[i].op_log().begin(), results[i].op_log().end()),
         jobs[i].pe_name, jobs[i].pe});
  }
  return runs;
}

absl::Status TimelineSvg(const std::vector<TimelineRun>& runs, const std::string& csv_path,
                         const std::string& svg_path) {
  if (runs.empty()) return absl::InvalidArgumentError("timeline: no run to draw");
  std::vector<Bar> bars;
  for (size_t r = 0; r < runs.size(); ++r) {
    const TimelineRun& run = runs[r];
    bool engine_op = false;
    for (const pb::TraceRecord& record : run.op_log) {
      if (record.has_op()) {
        const int engine = EngineOf(record.op().unit_name(), run.pe_name);
        if (engine < 0) continue;
        engine_op = true;
        bars.push_back({r, engine, record.op().start_ps(), record.op().end_ps()});
      } else if (record.has_stall() && record.stall().pe() == run.pe) {
        bars.push_back({r, 0, record.stall().from_ps(), record.stall().to_ps()});
      }
    }
    if (!engine_op) {
      return absl::InvalidArgumentError(
          absl::StrCat("timeline run ", run.label, ": no DMA, GEMM or MATH op on ", run.pe_name));
    }
  }
  std::sort(bars.begin(), bars.end());
  uint64_t window_ps = 0;
  for (const Bar& bar : bars) window_ps = std::max(window_ps, bar.end_ps);

  std::string csv = "run,engine,start_ns,end_ns\n";
  for (const Bar& bar : bars) {
    absl::StrAppend(&csv, CsvField(runs[bar.run].label), ",", kEngines[bar.engine], ",",
                    Ns(bar.start_ps), ",", Ns(bar.end_ps), "\n");
  }
  // The data file: one block per engine (one colour and legend entry each), every run's bars.
  std::string dat;
  for (int e = 0; e < kNumEngines; ++e) {
    if (e > 0) dat += "\n\n";
    absl::StrAppend(&dat, "# ", kEngines[e], ": start_ns end_ns row\n");
    bool any = false;
    for (const Bar& bar : bars) {
      if (bar.engine != e) continue;
      any = true;
      absl::StrAppend(&dat, Ns(bar.start_ps), " ", Ns(bar.end_ps), " ",
                      RowY(bar.run, e, runs.size()), "\n");
    }
    // gnuplot refuses an empty block: a zero-width bar at 0 keeps the legend entry.
    if (!any) absl::StrAppend(&dat, "0 0 ", RowY(0, e, runs.size()), "\n");
  }

  const std::filesystem::path svg(svg_path);
  const std::string stem = svg.stem().string();
  const std::filesystem::path dir = svg.parent_path();
  const std::string gp_path = (dir / (stem + ".gp")).string();
  RETURN_IF_ERROR(WriteTextFile(csv_path, csv));
  RETURN_IF_ERROR(WriteTextFile((dir / (stem + ".dat")).string(), dat));
  RETURN_IF_ERROR(WriteTextFile(gp_path, Script(runs, window_ps, stem, svg.filename())));
  std::error_code ignored;
  std::filesystem::remove(svg, ignored);
  return RunGnuplot(gp_path, svg_path);
}

}  // namespace ahbm::milestone
