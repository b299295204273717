#include "milestone/page.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ahbm::milestone {
namespace {

constexpr char kStyle[] = R"(
body { font-family: sans-serif; font-size: 15px; margin: 24px 32px; color: #1a1a1a;
       max-width: 1440px; }
h1 { font-size: 24px; margin: 0 0 8px 0; }
h2 { font-size: 20px; border-bottom: 2px solid #3b6ea5; padding-bottom: 4px; margin-top: 32px; }
h3 { font-size: 16px; margin: 4px 0; }
nav a { margin-right: 16px; }
.run td { padding: 1px 12px 1px 0; }
.run td:first-child { color: #555; }
code { font-family: monospace; font-size: 14px; background: #f2f2f2; padding: 1px 4px; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 16px 28px; }
.panel { border: 1px solid #ccc; border-radius: 4px; padding: 8px 12px; }
.panels { grid-auto-flow: row dense; }
.wide { grid-column: 1 / -1; }
table.data { border-collapse: collapse; font-size: 14px; margin: 6px 0; }
table.data th { background: #e8eef5; text-align: left; padding: 3px 8px; }
table.data td { border-top: 1px solid #ddd; padding: 3px 8px; }
table.data td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.pick { font-size: 14px; color: #333; margin: 4px 0; }
.study { border: 1px solid #ccc; border-radius: 4px; padding: 8px 12px; }
.answer { font-size: 16px; font-weight: bold; color: #174a7c; margin: 6px 0; }
.plots { display: flex; flex-direction: column; gap: 12px; }
.plots a { width: 100%; }
.plots img { width: 100%; border: 1px solid #eee; }
.wide img { width: 100%; max-width: 1400px; border: 1px solid #eee; }
.bad { color: #b00020; font-weight: bold; }
.none { color: #777; font-style: italic; }
)";

std::string Ratio(double ratio) { return ratio > 0 ? absl::StrFormat("%.2f", ratio) : "-"; }

std::string Us(double us) { return absl::StrFormat("%.2f", us); }

void AppendRun(const PageInput& in, std::string* html) {
  absl::StrAppend(html, "<table class=\"run\">\n");
  auto line = [&](absl::string_view label, absl::string_view value, bool code) {
    absl::StrAppend(html, "<tr><td>", label, "</td><td>", code ? "<code>" : "", HtmlEscape(value),
                    code ? "</code>" : "", "</td></tr>\n");
  };
  line("command", in.command, /*code=*/true);
  line("tool", absl::StrCat(in.version, " (commit ", in.commit, ")"), /*code=*/false);
  line("topology", in.topology_name, /*code=*/false);
  line("topology digest", in.topology_digest, /*code=*/true);
  absl::StrAppend(html, "</table>\n");
}

void AppendPanel(const PagePanel& panel, std::string* html) {
  bool requests = false;
  for (const PageRow& row : panel.rows) requests |= row.requests.has_value();
  std::vector<std::string> s;
  for (uint64_t tokens : panel.s) s.push_back(absl::StrCat(tokens));
  absl::StrAppend(html, "<div class=\"panel", requests ? " wide" : "", "\" id=\"panel-",
                  HtmlEscape(panel.name), "\">\n<h3>",
                  HtmlEscape(panel.name), "</h3>\n");
  if (!s.empty()) {
    absl::StrAppend(html, "<div class=\"pick\">S = ", HtmlEscape(absl::StrJoin(s, ", ")),
                    " tokens",
                    panel.profile.empty() ? "" : ", issue cost " + HtmlEscape(panel.profile),
                    "</div>\n");
  }
  absl::StrAppend(html,
                  "<table class=\"data\">\n<tr><th>variant</th><th>latency (&micro;s)</th>"
                  "<th>&times; best base</th><th>&times; roof</th><th>&times; ideal</th>"
                  "<th>binding</th>",
                  requests ? "<th>requests min / med / max (&micro;s)</th>" : "", "</tr>\n");
  for (const PageRow& row : panel.rows) {
    absl::StrAppend(html, "<tr><td>", HtmlEscape(row.variant), "</td><td class=\"num\">",
                    Us(row.latency_us), "</td><td class=\"num\">", Ratio(row.x_base),
                    "</td><td class=\"num\">", Ratio(row.x_roof), "</td><td class=\"num\">",
                    Ratio(row.x_ideal), "</td><td>", HtmlEscape(row.binding), "</td>");
    if (requests) {
      absl::StrAppend(html, "<td class=\"num\">",
                      row.requests
                          ? absl::StrCat(Us(row.requests->min), " / ", Us(row.requests->median),
                                         " / ", Us(row.requests->max))
                          : "-",
                      "</td>");
    }
    absl::StrAppend(html, "</tr>\n");
  }
  absl::StrAppend(html, "</table>\n<div class=\"pick\">", HtmlEscape(panel.auto_pick),
                  "</div>\n</div>\n");
}

void AppendStudy(const PageStudy& study, std::string* html) {
  absl::StrAppend(html, "<div class=\"study\" id=\"study-", HtmlEscape(study.name), "\">\n<h3>",
                  HtmlEscape(study.adr), " &mdash; ", HtmlEscape(study.question), "</h3>\n",
                  "<div class=\"answer\">", HtmlEscape(study.answer), "</div>\n",
                  "<div class=\"pick\">", HtmlEscape(study.name), ": data <a href=\"",
                  HtmlEscape(study.csv), "\">", HtmlEscape(study.csv), "</a></div>\n");
  if (!study.svgs.empty()) {
    absl::StrAppend(html, "<div class=\"plots\">\n");
    for (const std::string& svg : study.svgs) {
      absl::StrAppend(html, "<a href=\"", HtmlEscape(svg), "\"><img src=\"", HtmlEscape(svg),
                      "\" alt=\"", HtmlEscape(study.name), " plot ", HtmlEscape(svg), "\"></a>\n");
    }
    absl::StrAppend(html, "</div>\n");
  }
  absl::StrAppend(html, "</div>\n");
}

void AppendChecks(const std::vector<PageCheck>& checks, std::string* html) {
  absl::StrAppend(html,
                  "<table class=\"data\">\n<tr><th>kernel</th><th>variant</th><th>shape</th>"
                  "<th>max error</th><th>tolerance</th><th>result</th></tr>\n");
  for (const PageCheck& check : checks) {
    absl::StrAppend(html, "<tr><td>", HtmlEscape(check.kernel), "</td><td>",
                    HtmlEscape(check.variant), "</td><td>", HtmlEscape(check.shape),
                    "</td><td class=\"num\">", absl::StrFormat("%.2e", check.max_abs_error),
                    "</td><td class=\"num\">", absl::StrFormat("%.2e", check.tolerance), "</td><td",
                    check.ok ? std::string(">ok")
                             : absl::StrCat(" class=\"bad\">FAIL", check.note.empty() ? "" : ": ",
                                            HtmlEscape(check.note)),
                    "</td></tr>\n");
  }
  absl::StrAppend(html, "</table>\n");
}

void AppendFiles(const std::vector<PageFile>& files, std::string* html) {
  absl::StrAppend(html, "<table class=\"data\">\n<tr><th>file</th><th>digest</th></tr>\n");
  for (const PageFile& file : files) {
    absl::StrAppend(html, "<tr><td><a href=\"", HtmlEscape(file.name), "\">", HtmlEscape(file.name),
                    "</a></td><td><code>", file.digest.empty() ? "-" : HtmlEscape(file.digest),
                    "</code></td></tr>\n");
  }
  absl::StrAppend(html, "</table>\n");
}

void AppendNone(absl::string_view what, std::string* html) {
  absl::StrAppend(html, "<p class=\"none\">", what, "</p>\n");
}

}  // namespace

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string IndexHtml(const PageInput& in) {
  std::string html;
  absl::StrAppend(&html,
                  "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=1400\">\n<title>",
                  HtmlEscape(in.title), "</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n");
  absl::StrAppend(&html, "<h1>", HtmlEscape(in.title), "</h1>\n");
  absl::StrAppend(&html,
                  "<nav><a href=\"#panels\">panels</a><a href=\"#answers\">answers (ADR &sect;9, "
                  "&sect;B)</a><a href=\"#timeline\">engine timeline</a><a href=\"#checks\">"
                  "numerical checks</a><a href=\"#files\">files and digests</a></nav>\n");
  AppendRun(in, &html);

  absl::StrAppend(&html, "<h2 id=\"panels\">Panels (ADR &sect;A): Llama3-70B attention</h2>\n");
  if (in.panels.empty()) {
    AppendNone("No panel was run.", &html);
  } else {
    absl::StrAppend(
        &html,
        "<p class=\"pick\">&times; best base: latency / the panel's fastest "
        "baseline_* row; &times; roof: latency / the row's own roofline bound; "
        "&times; ideal: latency / the ADR kernel's minimal K/V bytes and FLOPs on "
        "the most PEs any row of the panel uses, at their HBM and GEMM peaks (a wasteful "
        "baseline is not flattered).</p>\n"
        "<div class=\"grid panels\">\n");
    for (const PagePanel& panel : in.panels) AppendPanel(panel, &html);
    absl::StrAppend(&html, "</div>\n");
  }

  absl::StrAppend(&html,
                  "<h2 id=\"answers\">Answers to the ADR's open items (&sect;9, &sect;B)"
                  "</h2>\n");
  if (in.studies.empty()) {
    AppendNone("No study was run.", &html);
  } else {
    absl::StrAppend(&html, "<div class=\"grid\">\n");
    for (const PageStudy& study : in.studies) AppendStudy(study, &html);
    absl::StrAppend(&html, "</div>\n");
  }

  absl::StrAppend(&html,
                  "<h2 id=\"timeline\">Engine timeline (ADR &sect;5.6): the opt1 bubble, "
                  "and how opt3 and opt2 fill it</h2>\n");
  if (in.timeline_svg.empty()) {
    AppendNone("No timeline was drawn.", &html);
  } else {
    absl::StrAppend(&html,
                    "<p class=\"pick\">One PE's CPU, DMA, GEMM and MATH engines, one row of bars "
                    "per engine and variant: a gap in a GEMM row is time the tensor engine "
                    "waits.</p>\n<div class=\"wide\"><a href=\"",
                    HtmlEscape(in.timeline_svg), "\"><img src=\"", HtmlEscape(in.timeline_svg),
                    "\" alt=\"engine timeline\"></a></div>\n");
  }

  absl::StrAppend(&html,
                  "<h2 id=\"checks\">Numerical checks (data mode, float64 reference)"
                  "</h2>\n");
  if (in.checks.empty()) {
    AppendNone("No numerical check was run.", &html);
  } else {
    AppendChecks(in.checks, &html);
  }

  absl::StrAppend(&html, "<h2 id=\"files\">Files and digests</h2>\n");
  if (in.files.empty()) {
    AppendNone("No file listed.", &html);
  } else {
    AppendFiles(in.files, &html);
  }
  absl::StrAppend(&html, "</body>\n</html>\n");
  return html;
}

}  // namespace ahbm::milestone
