#include "milestone/plot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/subprocess.h"

namespace ahbm::milestone {
namespace {

namespace fs = std::filesystem;

struct Point {
  double x = 0;
  double y = 0;
};

struct Series {
  std::string title;
  std::vector<Point> points;
};

// What the data file holds: the series in first-seen order, and the categorical x's ticks.
struct PlotData {
  std::vector<Series> series;
  std::vector<std::string> x_ticks;  // categorical x only: tick i's label
};

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": cannot read"));
  return text.str();
}

absl::StatusOr<size_t> RequireColumn(const CsvTable& table, const std::string& csv_path,
                                     const std::string& name) {
  std::optional<size_t> column = table.Column(name);
  if (!column) {
    return absl::InvalidArgumentError(absl::StrCat(csv_path, ": no column \"", name, "\""));
  }
  return *column;
}

// Row r is CSV line r + 2 (the header is line 1).
absl::StatusOr<double> Number(const CsvTable& table, const std::string& csv_path, size_t row,
                              size_t column) {
  const std::string& text = table.rows[row][column];
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s line %d: %s: not a number (\"%s\")", csv_path, row + 2, table.header[column], text));
  }
  return value;
}

absl::StatusOr<PlotData> Collect(const PlotSpec& spec, const CsvTable& table,
                                 const std::string& csv_path) {
  absl::StatusOr<size_t> x = RequireColumn(table, csv_path, spec.x);
  RETURN_IF_ERROR(x.status());
  absl::StatusOr<size_t> y = RequireColumn(table, csv_path, spec.y);
  RETURN_IF_ERROR(y.status());
  std::vector<size_t> series_columns;
  for (const std::string& name : spec.series) {
    absl::StatusOr<size_t> column = RequireColumn(table, csv_path, name);
    RETURN_IF_ERROR(column.status());
    series_columns.push_back(*column);
  }
  if (spec.argmin_series && series_columns.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(csv_path, ": argmin_series needs exactly one series column"));
  }
  const std::optional<size_t> status = table.Column("status");

  PlotData data;
  std::map<std::string, size_t> series_index;  // title -> index in data.series
  std::map<std::string, size_t> tick_index;    // categorical x -> tick
  // argmin_series: per x (first-seen order), the least y so far and its series value.
  struct Best {
    double x = 0;
    double y = 0;
    double series_value = 0;
  };
  std::vector<Best> best;
  std::map<std::string, size_t> best_index;  // x cell -> index in best
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const std::vector<std::string>& row = table.rows[r];
    if (status && row[*status] != "ok") continue;
    double x_value = 0;
    if (spec.x_categorical) {
      auto [it, inserted] = tick_index.emplace(row[*x], data.x_ticks.size());
      if (inserted) data.x_ticks.push_back(row[*x]);
      x_value = static_cast<double>(it->second);
    } else {
      absl::StatusOr<double> parsed = Number(table, csv_path, r, *x);
      RETURN_IF_ERROR(parsed.status());
      x_value = *parsed;
    }
    absl::StatusOr<double> y_value = Number(table, csv_path, r, *y);
    RETURN_IF_ERROR(y_value.status());
    if (spec.argmin_series) {
      absl::StatusOr<double> series_value = Number(table, csv_path, r, series_columns[0]);
      RETURN_IF_ERROR(series_value.status());
      auto [it, inserted] = best_index.emplace(row[*x], best.size());
      if (inserted) {
        best.push_back({x_value, *y_value, *series_value});
      } else if (*y_value < best[it->second].y) {
        best[it->second].y = *y_value;
        best[it->second].series_value = *series_value;
      }
      continue;
    }
    std::vector<std::string> values;
    for (size_t column : series_columns) {
      if (!row[column].empty()) values.push_back(row[column]);  // a field the row leaves unset
    }
    std::string title = absl::StrJoin(values, ", ");
    auto [it, inserted] = series_index.emplace(title, data.series.size());
    if (inserted) data.series.push_back({title, {}});
    data.series[it->second].points.push_back({x_value, *y_value * spec.y_scale});
  }
  if (spec.argmin_series && !best.empty()) {
    Series series{absl::StrCat("best ", spec.series[0]), {}};
    for (const Best& b : best) series.points.push_back({b.x, b.series_value});
    data.series.push_back(std::move(series));
  }
  if (data.series.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(csv_path, ": no row with status ok to plot"));
  }
  if (!spec.x_categorical) {
    for (Series& series : data.series) {
      std::stable_sort(series.points.begin(), series.points.end(),
                       [](const Point& a, const Point& b) { return a.x < b.x; });
    }
  }
  return data;
}

std::string DataText(const PlotData& data) {
  std::string text;
  for (size_t i = 0; i < data.series.size(); ++i) {
    if (i > 0) text += "\n\n";
    std::string title = data.series[i].title;  // one comment line, whatever the CSV held
    std::replace_if(
        title.begin(), title.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    absl::StrAppend(&text, "# ", title, "\n");
    for (const Point& p : data.series[i].points) {
      absl::StrAppendFormat(&text, "%.10g %.10g\n", p.x, p.y);
    }
  }
  return text;
}

// A log y axis over the data with 5 % of its span (in log terms, at least 5 %) as margin, and
// tics at 1-2-5 times a power of ten inside it — or finer mantissas over a narrow range — so
// even a range within one decade has labelled tics. False (gnuplot's own range) without positive
// data.
bool AppendLogYAxis(const PlotData& data, std::string* s) {
  double lo = 0;
  double hi = 0;
  for (const Series& series : data.series) {
    for (const Point& p : series.points) {
      if (p.y <= 0) continue;
      lo = lo == 0 ? p.y : std::min(lo, p.y);
      hi = std::max(hi, p.y);
    }
  }
  if (lo == 0) return false;
  const double margin = std::max(1.05, std::pow(hi / lo, 0.05));
  lo /= margin;
  hi *= margin;
  // Mantissa sets from coarse to fine; the first that puts 3 tics inside the range.
  std::vector<std::vector<double>> sets = {{1, 2, 5}, {1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9}};
  for (double step : {0.5, 0.2, 0.1}) {
    std::vector<double>& mantissas = sets.emplace_back();
    for (int i = 0; i * step < 9 - 1e-9; ++i) mantissas.push_back(1 + i * step);
  }
  std::vector<double> ticks;
  for (const std::vector<double>& mantissas : sets) {
    ticks.clear();
    for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= std::ceil(std::log10(hi));
         ++e) {
      for (double m : mantissas) {
        const double tick = m * std::pow(10.0, e);
        if (tick >= lo && tick <= hi) ticks.push_back(tick);
      }
    }
    if (ticks.size() >= 3) break;
  }
  absl::StrAppendFormat(s, "set yrange [%.6g:%.6g]\n", lo, hi);
  std::vector<std::string> labels;
  for (double tick : ticks) labels.push_back(absl::StrFormat("%.6g", tick));
  if (!labels.empty()) absl::StrAppend(s, "set ytics (", absl::StrJoin(labels, ", "), ")\n");
  return true;
}

std::string ScriptText(const PlotSpec& spec, const PlotData& data, const std::string& stem,
                       const std::string& svg_name) {
  std::string s;
  absl::StrAppend(&s, "# Drawn by ahbm milestone (milestone/plot.h); re-plot: gnuplot ", stem,
                  ".gp\n");
  absl::StrAppend(&s,
                  "set terminal svg size 720,480 noenhanced font 'sans,13' background "
                  "'#ffffff'\n");
  absl::StrAppend(&s, "set output ", GnuplotString(svg_name), "\n");
  absl::StrAppend(&s, "set title ", GnuplotString(spec.title), "\n");
  absl::StrAppend(&s, "set xlabel ", GnuplotString(spec.x_label), "\n");
  absl::StrAppend(&s, "set ylabel ", GnuplotString(spec.y_label), "\n");
  s += "set grid\n";
  s += "set key outside right top box\n";
  const std::string key_title =
      spec.argmin_series ? std::string() : absl::StrJoin(spec.series, ", ");
  if (!key_title.empty()) absl::StrAppend(&s, "set key title ", GnuplotString(key_title), "\n");
  if (spec.log_x && !spec.x_categorical) s += "set logscale x 2\n";
  // Ranges end at the data (plus a margin), not at the next tic: a log axis rounded out to
  // whole decades would flatten a 20 % difference into a straight line.
  s += "set autoscale noextend\n";
  bool y_range_set = false;
  if (spec.log_y && !spec.argmin_series) {
    s += "set logscale y 10\n";
    y_range_set = AppendLogYAxis(data, &s);
  }
  const std::string y_offsets = y_range_set ? "0, 0" : "graph 0.05, graph 0.05";
  if (spec.x_categorical) {
    std::vector<std::string> ticks;
    bool long_label = false;
    for (size_t i = 0; i < data.x_ticks.size(); ++i) {
      ticks.push_back(absl::StrCat(GnuplotString(data.x_ticks[i]), " ", i));
      long_label |= data.x_ticks[i].size() > 8;
    }
    absl::StrAppend(&s, "set xtics (", absl::StrJoin(ticks, ", "), ")",
                    long_label ? " rotate by -30" : "", "\n");
    absl::StrAppendFormat(&s, "set xrange [-0.5:%g]\n", data.x_ticks.size() - 0.5);
    absl::StrAppend(&s, "set offsets 0, 0, ", y_offsets, "\n");
  } else {
    // A few distinct x values (contexts, depths, sizes): a tic at each, nothing between.
    std::set<double> xs;
    for (const Series& series : data.series) {
      for (const Point& p : series.points) xs.insert(p.x);
    }
    if (xs.size() <= 12) {
      std::vector<std::string> ticks;
      for (double x : xs) ticks.push_back(absl::StrFormat("%.10g", x));
      absl::StrAppend(&s, "set xtics (", absl::StrJoin(ticks, ", "), ")\n");
    }
    // Room so the first and last points are not drawn on the frame.
    absl::StrAppend(&s, "set offsets graph 0.03, graph 0.03, ", y_offsets, "\n");
  }
  std::vector<std::string> plots;
  for (size_t i = 0; i < data.series.size(); ++i) {
    plots.push_back(absl::StrCat(GnuplotString(stem + ".dat"), " index ", i,
                                 " using 1:2 with linespoints lw 2 pt 7 ps 0.8 title ",
                                 GnuplotString(data.series[i].title)));
  }
  absl::StrAppend(&s, "plot ", absl::StrJoin(plots, ", \\\n     "), "\n");
  return s;
}

}  // namespace

std::string PlotFileName(const std::string& study, size_t i) {
  return i == 0 ? absl::StrCat("sweep_", study, ".svg")
                : absl::StrCat("sweep_", study, "_", i + 1, ".svg");
}

absl::StatusOr<std::vector<std::string>> PlotStudy(const Study& study, const std::string& dir) {
  const std::string csv = (fs::path(dir) / absl::StrCat("sweep_", study.name, ".csv")).string();
  std::vector<std::string> svgs;
  for (size_t i = 0; i < study.plots.size(); ++i) {
    const std::string svg = PlotFileName(study.name, i);
    const absl::Status s = PlotSvg(study.plots[i], csv, (fs::path(dir) / svg).string());
    if (absl::IsFailedPrecondition(s)) continue;  // no row ran: nothing to draw
    if (!s.ok()) {
      return Annotate(s, absl::StrCat("study ", study.name, ": "));
    }
    svgs.push_back(svg);
  }
  return svgs;
}

std::string GnuplotString(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += (c == '\n' || c == '\r') ? ' ' : c;
  }
  quoted += '"';
  return quoted;
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

absl::Status RunGnuplot(const std::string& script_path, const std::string& svg_path) {
  std::optional<std::string> gnuplot = FindOnPath("gnuplot");
  if (!gnuplot) {
    return absl::NotFoundError("gnuplot not found: tools/setup.sh installs gnuplot-nox");
  }
  const fs::path script(script_path);
  std::string dir = script.parent_path().string();
  if (dir.empty()) dir = ".";
  const std::string script_name = script.filename().string();
  int err_pipe[2];
  if (pipe(err_pipe) != 0) return absl::InternalError("gnuplot: pipe failed");
  const pid_t pid = fork();
  if (pid < 0) {
    close(err_pipe[0]);
    close(err_pipe[1]);
    return absl::InternalError("gnuplot: fork failed");
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[0]);
    close(err_pipe[1]);
    const int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
      dup2(null_fd, STDOUT_FILENO);
    }
    if (chdir(dir.c_str()) != 0) _exit(126);
    char* const argv[] = {const_cast<char*>("gnuplot"), const_cast<char*>(script_name.c_str()),
                          nullptr};
    execv(gnuplot->c_str(), argv);
    _exit(127);
  }
  close(err_pipe[1]);
  std::string stderr_text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(err_pipe[0], buffer, sizeof buffer);
    if (n > 0) {
      stderr_text.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(err_pipe[0]);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  // gnuplot's complaint in one line: its stderr's non-blank lines joined.
  std::vector<absl::string_view> lines = absl::StrSplit(stderr_text, '\n', absl::SkipWhitespace());
  const std::string complaint = absl::StrJoin(lines, " | ");
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    const std::string how = WIFSIGNALED(wait_status)
                                ? absl::StrCat("killed by signal ", WTERMSIG(wait_status))
                                : absl::StrCat("exit status ", WEXITSTATUS(wait_status));
    return absl::InternalError(
        absl::StrCat("gnuplot ", script_path, ": ", complaint.empty() ? how : complaint));
  }
  struct stat svg_stat;
  if (stat(svg_path.c_str(), &svg_stat) != 0 || svg_stat.st_size == 0) {
    return absl::InternalError(absl::StrCat("gnuplot ", script_path, ": wrote no ", svg_path,
                                            complaint.empty() ? "" : ": ", complaint));
  }
  return absl::OkStatus();
}

absl::Status PlotSvg(const PlotSpec& spec, const std::string& csv_path,
                     const std::string& svg_path) {
  absl::StatusOr<std::string> csv_text = ReadTextFile(csv_path);
  RETURN_IF_ERROR(csv_text.status());
  absl::StatusOr<CsvTable> table = ParseCsv(*csv_text);
  if (!table.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(csv_path, " ", table.status().message()));
  }
  absl::StatusOr<PlotData> data = Collect(spec, *table, csv_path);
  RETURN_IF_ERROR(data.status());

  const fs::path svg(svg_path);
  const std::string stem = svg.stem().string();
  const fs::path dir = svg.parent_path();
  const std::string dat_path = (dir / (stem + ".dat")).string();
  const std::string gp_path = (dir / (stem + ".gp")).string();
  RETURN_IF_ERROR(WriteTextFile(dat_path, DataText(*data)));
  RETURN_IF_ERROR(WriteTextFile(gp_path, ScriptText(spec, *data, stem, svg.filename().string())));
  // A stale SVG must not pass for this run's.
  std::error_code ignored;
  fs::remove(svg, ignored);
  return RunGnuplot(gp_path, svg_path);
}

}  // namespace ahbm::milestone
