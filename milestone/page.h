// The report's front page, report/index.html: the page a person opens first (milestone/README.md
// "Report folder"). Plain data in, one self-contained HTML5 document out.
//
// Contract (IndexHtml):
// - Sections in this order: the run (command, tool version and commit, topology and its
//   digest), the panels (ADR §A: one table per panel — variant, latency, x best baseline,
//   x roofline, x ideal, binding resource, and per-request min / median / max when a row has
//   them — and AUTO's pick), the answers to the ADR's open items (§9, §B: each study's ADR
//   section, question, answer, its CSV linked and its plots), the engine timeline (ADR §5.6),
//   the numerical checks, the files and their digests. A section with no data says so in one
//   line.
// - Self-contained: inline CSS, no script, nothing fetched from the network; plots are <img>
//   elements naming the SVG files beside the page (relative names, as given). Every text from
//   the input is HTML-escaped (& < > " ').
// - Deterministic: the same input gives the same bytes (no clock, no environment); numbers are
//   printed with fixed formats (latency "%.2f" us, ratios "%.2f", errors "%.2e").
// - Laid out for a 1400 px wide window: panels two per row, studies two per row (each with its
//   plots one under the other).
#ifndef AHBMSIM_MILESTONE_PAGE_H_
#define AHBMSIM_MILESTONE_PAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ahbm::milestone {

// A multi-user row's per-request latencies.
struct RequestLatencyUs {
  double min = 0;
  double median = 0;
  double max = 0;
};

struct PageRow {
  std::string variant;
  double latency_us = 0;
  // Ratios; 0 means none and is shown as "-" (a panel without a baseline has no x_base).
  double x_base = 0;   // latency / the panel's fastest baseline
  double x_roof = 0;   // latency / the row's roofline bound
  double x_ideal = 0;  // latency / the panel's ideal (the ADR kernel's minimal work)
  std::string binding;
  std::optional<RequestLatencyUs> requests;
};

struct PagePanel {
  std::string name;         // "single_user_decode"
  std::vector<uint64_t> s;  // the request lengths (tokens)
  std::string profile;      // the rows' issue-cost profile ("" not shown)
  std::vector<PageRow> rows;
  std::string auto_pick;  // "AUTO picks opt3: ..."
};

struct PageStudy {
  std::string name;      // sweep_<name>.csv
  std::string adr;       // "§9.2, §4.4"
  std::string question;  // "Which reduce topology per level?"
  std::string answer;    // the answer line (or why there is none)
  std::string csv;       // file name beside the page
  std::vector<std::string> svgs;
};

// A numerical check (milestone/numerics.h NumericCheck).
struct PageCheck {
  std::string kernel;
  std::string variant;
  std::string shape;  // "H_q 64, H_kv 8, d 128, S 2048"
  double max_abs_error = 0;
  double tolerance = 0;
  bool ok = false;
  std::string note;  // why not ok, when the error does not say it (shown after FAIL)
};

struct PageFile {
  std::string name;
  std::string digest;  // empty: not given
};

struct PageInput {
  std::string title;    // "ahbm milestone: Llama3-70B attention (ADR-0060)"
  std::string command;  // the command line that made the report
  std::string version;
  std::string commit;
  std::string topology_name;
  std::string topology_digest;
  std::vector<PagePanel> panels;
  std::vector<PageStudy> studies;
  std::string timeline_svg;  // empty: no timeline
  std::vector<PageCheck> checks;
  std::vector<PageFile> files;
};

std::string IndexHtml(const PageInput& input);

// `text` with & < > " ' as HTML character references.
std::string HtmlEscape(absl::string_view text);

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_PAGE_H_
