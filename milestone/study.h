// A study: one of the ADR's open tuning questions (§9, §B) as runs, a CSV, a plot and a one-line
// answer that code derives from the CSV alone (so the answer can be checked against a hand-made
// CSV, and re-derived from a report folder without simulating).
//
// Contract:
// - A study's runs are sweep::Points over `params` (one or several grids whose parameters are
//   the same columns); its CSV is sweep::FormatCsv(params, rows) in point order, written as
//   sweep_<name>.csv in the report folder, its plots sweep_<name>.svg,
//   sweep_<name>_2.svg, ... (PlotSpec).
// - `answer` reads only the CSV (ParseCsv): OK with one line (no line break) such as
//   "best C: 8 for S >= 16384, 4 below", or InvalidArgument naming the column that is missing
//   or unreadable. Refused or failed rows (status != "ok") are skipped, never read as 0.
#ifndef AHBMSIM_MILESTONE_STUDY_H_
#define AHBMSIM_MILESTONE_STUDY_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sweep/grid.h"

namespace ahbm::milestone {

// A CSV as base/text_escape.h's CsvField writes it (RFC 4180): the header row, then rows of the
// same width.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // The column's index, or nullopt.
  std::optional<size_t> Column(std::string_view name) const;
};

// InvalidArgument "line <n>: <reason>" for an unterminated quote or a row of another width.
absl::StatusOr<CsvTable> ParseCsv(std::string_view text);

// What a study's SVG shows: `y` against `x`, one line (with points) per distinct value of the
// `series` columns (joined "a, b"; one line when empty), from the study's CSV, rows with status
// "ok" only. Axis labels carry units; the legend names the series.
struct PlotSpec {
  std::string title;
  std::string x;        // CSV column; numeric, or categorical (each distinct value one tick, in
  bool x_categorical = false;  // first-seen order)
  std::string x_label;  // "context S (tokens)"
  bool log_x = false;
  std::string y = "latency_ps";
  std::string y_label = "latency (us)";
  double y_scale = 1e-6;  // plotted: value * y_scale
  bool log_y = false;
  std::vector<std::string> series;
  // "Best of" plot: per x, the value of the (one, numeric) series column whose y is least,
  // e.g. best C vs S; y_label then names the series column ("best C").
  bool argmin_series = false;
};

struct Study {
  std::string name;      // file stem: sweep_<name>.csv / .svg; [a-z0-9_]
  std::string adr;       // "§9.2, §4.4"
  std::string question;  // one line: "Which reduce topology per level?"
  std::vector<sweep::Param> params;
  std::vector<sweep::Point> points;
  std::vector<PlotSpec> plots;  // sweep_<name>.svg, then sweep_<name>_2.svg, ...
  std::function<absl::StatusOr<std::string>(const CsvTable&)> answer;
};

struct StudyOptions {
  bool quick = false;  // a subset (fewer points, smaller shapes) for --quick
};

// Every study, in report order, on `chip` (the milestone's topology). Refused points stay
// (sweep::Point::refused) and become rows whose status says why.
absl::StatusOr<std::vector<Study>> BuildStudies(const pb::Chip& chip, const StudyOptions& options);

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_STUDY_H_
