// The report's plots (milestone/README.md "Report folder"): SVGs drawn by gnuplot
// (Debian's gnuplot-nox, tools/setup.sh) from a study's CSV, each with the script and data
// file that drew it left beside it, so anyone can re-plot or restyle it by hand.
//
// Contract (PlotSvg):
// - Reads the CSV (ParseCsv), keeps the rows whose `status` is "ok" (every row when the CSV
//   has no status column) and writes, beside the SVG (same directory, same stem):
//     <stem>.dat  the plotted points, one block per series (blocks separated by two blank
//                 lines, "# <series title>" first), columns x, y (categorical x: its tick index)
//                 — numbers as "%.10g", y already times PlotSpec::y_scale; numeric x sorted
//                 ascending within a series (stable), categorical x in first-seen order;
//     <stem>.gp   the gnuplot script (svg terminal 720x480, title, axis labels, log axes as
//                 asked, categorical x as named ticks, the legend titled with the series
//                 columns, each series titled with its values joined ", "); it names only
//                 <stem>.dat and <stem>.svg, so both files are the same bytes wherever the
//                 report is written;
//   then runs `gnuplot <stem>.gp` in that directory (fork/exec, no shell) and checks that the
//   SVG exists and is not empty. The SVG holds no date: one gnuplot version draws the same
//   bytes.
// - argmin_series: one series column (numeric); per x, in first-seen order, the series value
//   whose y is least (ties: the first row in CSV order); y is that value (no y_scale). The
//   data file then has one block, titled "best <series column>".
// - Errors, one line each: InvalidArgument "<csv>: no column \"<name>\"" for a missing x, y or
//   series column; "<csv> line <n>: <column>: not a number (\"<text>\")" for a numeric cell
//   that does not parse; "<csv>: argmin_series needs exactly one series column";
//   FailedPrecondition "<csv>: no row with status ok to plot"; NotFound "gnuplot not found:
//   tools/setup.sh installs gnuplot-nox" when no gnuplot is on PATH; Internal "gnuplot <gp>:
//   <its stderr's lines joined by " | ">" when gnuplot fails or the SVG is missing or empty; a
//   file that cannot be read or written: "<path>: cannot read" / "<path>: cannot write"; a
//   malformed CSV: "<csv> line <n>: <reason>" (ParseCsv).
#ifndef AHBMSIM_MILESTONE_PLOT_H_
#define AHBMSIM_MILESTONE_PLOT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "milestone/study.h"

namespace ahbm::milestone {

[[nodiscard]] absl::Status PlotSvg(const PlotSpec& spec, const std::string& csv_path,
                                   const std::string& svg_path);

// A study's i-th plot's file name (i from 0), as study.h names them: "sweep_<study>.svg",
// then "sweep_<study>_2.svg", "sweep_<study>_3.svg", ...
std::string PlotFileName(const std::string& study, size_t i);

// Every plot of `study` from <dir>/sweep_<name>.csv into <dir>/PlotFileName(name, i), in
// order; the SVG file names written (for the page). A CSV without an "ok" row draws nothing
// (every point refused or failed: the page then shows the answer's reason alone); any other
// error stops it, its message prefixed "study <name>: ".
absl::StatusOr<std::vector<std::string>> PlotStudy(const Study& study, const std::string& dir);

// Runs `gnuplot <script>` with the script's directory as the working directory (no shell);
// OK when gnuplot exits 0 and `svg_path` is then a non-empty file. Errors as PlotSvg's.
[[nodiscard]] absl::Status RunGnuplot(const std::string& script_path, const std::string& svg_path);

// `text` as a gnuplot double-quoted string literal (quotes included; \\ and \" escaped, line
// breaks as spaces).
std::string GnuplotString(const std::string& text);

// Writes `text` to `path` ("<path>: cannot write" on failure).
[[nodiscard]] absl::Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_PLOT_H_
