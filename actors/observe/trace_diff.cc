#include "actors/observe/trace_diff.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/errors.h"
#include "base/text_escape.h"
#include "google/protobuf/text_format.h"
#include "actors/observe/op_log.h"
#include "google/protobuf/util/json_util.h"
#include "topology/validate.h"

namespace ahbm::observe {
namespace {

constexpr char kCallTag = static_cast<char>((pb::TraceRecord::kCallFieldNumber << 3) | 2);

absl::StatusOr<RunRecord> ReadTraceRun(const std::string& path, std::istream& in) {
  RunRecord run;
  run.name = path;
  OpLogReader reader(in);
  std::string bytes;
  pb::TraceRecord record;
  while (true) {
    // Calls are the replay's input, not what happened: skipped unread.
    absl::StatusOr<bool> more = reader.NextBytes(bytes, [](char first) { return first != kCallTag; });
    if (!more.ok()) return Annotate(more.status(), absl::StrCat(path, ": "));
    if (!*more) break;
    // A skipped call (empty bytes) before the header is a first record that is not one.
    if (bytes.empty() && run.timeline != nullptr) continue;
    if (!record.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(path, ": ", reader.where(), ": malformed"));
    }
    if (run.timeline == nullptr) {
      if (bytes.empty() || !record.has_header()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": the first record is not a header"));
      }
      if (record.header().schema_version() > kTraceSchemaVersion) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": schema_version: the trace is schema ", record.header().schema_version(),
            "; this build reads schema ", kTraceSchemaVersion));
      }
      if (!record.header().has_chip()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": an op log without its chip; record a trace with `ahbm run --trace`"));
      }
      // Validated when recorded; a file edited or damaged since must not reach the timeline.
      if (absl::Status s = topology::Validate(record.header().chip()); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": the header's chip: ", s.message()));
      }
      run.header = record.header();
      run.timeline = std::make_unique<Timeline>(record.header().chip());
    }
    run.timeline->Add(record);
  }
  if (run.timeline == nullptr) {
    return absl::DataLossError(absl::StrCat(path, ": empty (no header)"));
  }
  if (!run.timeline->report()) {
    return absl::DataLossError(absl::StrCat(
        path, ": ends without the report a recorded trace ends with (cut short?)"));
  }
  run.report = *run.timeline->report();
  if (absl::Status s = run.timeline->Finish(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return run;
}

// b - a with its sign, exact over the whole uint64 range ("+5", "-3", "0").
std::string Delta(uint64_t a, uint64_t b) {
  if (b == a) return "0";
  return b > a ? absl::StrCat("+", b - a) : absl::StrCat("-", a - b);
}

std::string Ratio(uint64_t a, uint64_t b) {
  return a == 0 ? "-" : absl::StrFormat("%.4f", static_cast<double>(b) / static_cast<double>(a));
}

const char* EdgeName(Timeline::Link::Edge edge) {
  switch (edge) {
    case Timeline::Link::Edge::kStart:
      return "start";
    case Timeline::Link::Edge::kData:
      return "data";
    case Timeline::Link::Edge::kMessage:
      return "message";
    case Timeline::Link::Edge::kEngine:
      return "engine";
    case Timeline::Link::Edge::kIssue:
      return "issue";
    case Timeline::Link::Edge::kWait:
      return "wait";
    case Timeline::Link::Edge::kCpu:
      return "cpu";
  }
  return "?";
}

struct KindTotals {
  uint32_t units = 0;
  uint64_t busy_ps = 0;
  double util_max = 0;
};

std::vector<std::pair<std::string, KindTotals>> ByKind(const pb::Report& report) {
  std::vector<std::pair<std::string, KindTotals>> out;
  for (const pb::UnitStats& u : report.units()) {
    auto it = std::find_if(out.begin(), out.end(), [&u](const auto& e) { return e.first == u.kind(); });
    if (it == out.end()) it = out.insert(out.end(), {u.kind(), KindTotals{}});
    ++it->second.units;
    it->second.busy_ps += u.busy_ps();
    it->second.util_max = std::max(it->second.util_max, u.utilisation());
  }
  return out;
}

}  // namespace

absl::StatusOr<RunRecord> ReadRun(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  int first = in.peek();
  while (first == ' ' || first == '\n' || first == '\t' || first == '\r') {
    in.get();
    first = in.peek();
  }
  if (first != '{') return ReadTraceRun(path, in);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  RunRecord run;
  run.name = path;
  pb::Report report;
  google::protobuf::util::JsonParseOptions options;
  if (auto s = google::protobuf::util::JsonStringToMessage(text, &report, options);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a report JSON (",
                     PrintableAscii(std::string(s.message())), ")"));
  }
  // An empty object, or a JSON of something else, parses as an empty report.
  const std::pair<bool, const char*> needed[] = {
      {!report.topology_name().empty(), "topology_name"},
      {!report.workload_summary().empty(), "workload_summary"},
      {!report.issue_cost_profile().empty(), "issue_cost_profile"},
      {report.latency_ps() > 0, "latency_ps"},
      {report.units_size() > 0, "units"},
      {report.roofline().bound_ps() > 0, "roofline.bound_ps"}};
  for (const auto& [present, field] : needed) {
    if (!present) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": not a run's report: no ", field, " (write one with --report_json)"));
    }
  }
  run.report = std::move(report);
  return run;
}

namespace {

// The workload fields that change a run's timing or values but not its streams.
pb::Workload StreamsOf(pb::Workload workload) {
  workload.clear_issue_cost_profile();
  workload.clear_data();
  workload.clear_seed();
  return workload;
}

// "1 SIP(s) of 2x4 CUBEs of 2x2 PEs, 8 channels per PE, CUBEs 0,1": what a replay must keep.
std::string Geometry(const pb::TraceHeader& h) {
  const pb::Sip& sip = h.chip().sip();
  return absl::StrCat(h.chip().sips(), " SIP(s) of ", sip.cube_mesh().rows(), "x",
                      sip.cube_mesh().cols(), " CUBEs of ", sip.cube().pe_mesh().rows(), "x",
                      sip.cube().pe_mesh().cols(), " PEs, ", sip.cube().pe().hbm_channels(),
                      " channels per PE, CUBEs ", absl::StrJoin(h.cubes(), ","));
}

// The first line of A's text format that B lacks ("A has s: 512"), else B's that A lacks.
std::string FirstDifference(const google::protobuf::Message& a,
                            const google::protobuf::Message& b) {
  std::string ta, tb;
  google::protobuf::TextFormat::PrintToString(a, &ta);
  google::protobuf::TextFormat::PrintToString(b, &tb);
  const std::vector<std::string> la = absl::StrSplit(ta, '\n', absl::SkipEmpty());
  const std::vector<std::string> lb = absl::StrSplit(tb, '\n', absl::SkipEmpty());
  for (const std::string& line : la) {
    if (std::find(lb.begin(), lb.end(), line) == lb.end()) return absl::StrCat("A has ", line);
  }
  for (const std::string& line : lb) {
    if (std::find(la.begin(), la.end(), line) == la.end()) return absl::StrCat("B has ", line);
  }
  return "the same fields in another order";
}

}  // namespace

absl::Status CheckSameStreams(const RunRecord& a, const RunRecord& b) {
  const auto refuse = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(b.name, ": not a run of ", a.name, "'s streams: ", what,
                     " (diff compares a run with its replay or another profile; --force compares "
                     "anyway)"));
  };
  if (a.header && b.header) {
    const pb::Workload wa = StreamsOf(a.header->workload());
    const pb::Workload wb = StreamsOf(b.header->workload());
    if (wa.SerializeAsString() != wb.SerializeAsString()) {
      return refuse(absl::StrCat("another workload (", FirstDifference(wa, wb), ")"));
    }
    const std::string ga = Geometry(*a.header);
    const std::string gb = Geometry(*b.header);
    if (ga != gb) return refuse(absl::StrCat("another chip geometry (", gb, "; A: ", ga, ")"));
    return absl::OkStatus();
  }
  const pb::Report& ra = *a.report;
  const pb::Report& rb = *b.report;
  if (ra.workload_summary() != rb.workload_summary()) {
    return refuse(absl::StrCat("another workload ('", rb.workload_summary(), "'; A: '",
                               ra.workload_summary(), "')"));
  }
  bool same_units = ra.units_size() == rb.units_size();
  for (int i = 0; same_units && i < ra.units_size(); ++i) {
    same_units = ra.units(i).unit_name() == rb.units(i).unit_name();
  }
  if (!same_units) {
    return refuse(absl::StrCat("another chip (", rb.units_size(), " units on ", rb.topology_name(),
                               "; A: ", ra.units_size(), " on ", ra.topology_name(), ")"));
  }
  return absl::OkStatus();
}

StepMatch MatchSteps(const Timeline& a, const Timeline& b) {
  StepMatch m;
  std::vector<bool> b_matched(b.steps().size(), false);
  for (uint32_t i = 0; i < a.steps().size(); ++i) {
    const Step& x = a.steps()[i];
    const int64_t j = b.Find(x.Key());
    if (j < 0) {
      ++m.only_a;
      continue;
    }
    b_matched[j] = true;
    ++m.matched;
    const Step& y = b.steps()[j];
    const std::pair<const char*, std::pair<uint64_t, uint64_t>> fields[] = {
        {"issue_ps", {x.issue_ps, y.issue_ps}},
        {"start_ps", {x.start_ps, y.start_ps}},
        {"end_ps", {x.end_ps, y.end_ps}}};
    for (const auto& [name, v] : fields) {
      if (v.first == v.second) continue;
      ++m.differing;
      const uint64_t at = std::min(v.first, v.second);
      const bool earlier =
          !m.first || at < std::min(m.first->a_ps, m.first->b_ps) ||
          (at == std::min(m.first->a_ps, m.first->b_ps) && x.Key() < a.steps()[m.first->a_step].Key());
      if (earlier) m.first = Divergence{i, j, name, v.first, v.second};
      break;
    }
  }
  for (bool matched : b_matched) m.only_b += matched ? 0 : 1;
  return m;
}

std::string FormatCriticalPath(const Timeline& t, size_t max_rows) {
  const std::vector<Timeline::Link> path = t.CriticalPath();
  std::vector<size_t> keep(path.size());
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = i;
  if (keep.size() > max_rows) {
    std::stable_sort(keep.begin(), keep.end(), [&path](size_t x, size_t y) {
      return path[x].to_ps - path[x].from_ps > path[y].to_ps - path[y].from_ps;
    });
    keep.resize(max_rows);
    std::sort(keep.begin(), keep.end());
  }
  std::map<std::string, uint64_t> by_held;
  for (const Timeline::Link& l : path) by_held[l.held] += l.to_ps - l.from_ps;
  std::string out = absl::StrCat("  ", path.size(), " links, ", path.empty() ? 0 : path.front().from_ps,
                                 " .. ", path.empty() ? 0 : path.back().to_ps,
                                 " ps; time by what held it:");
  for (const auto& [held, ps] : by_held) absl::StrAppend(&out, " ", held, " ", ps);
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, absl::StrFormat("  %14s  %14s  %12s  %-7s  %-7s  %s\n", "from_ps", "to_ps",
                                        "span_ps", "held", "link", "what"));
  for (size_t i : keep) {
    const Timeline::Link& l = path[i];
    std::string what;
    if (l.step >= 0) {
      what = t.steps()[l.step].Name();
      if (!l.note.empty()) absl::StrAppend(&what, " (after ", l.note, ")");
    } else if (l.edge == Timeline::Link::Edge::kWait) {
      what = absl::StrCat("pe ", l.pe, " cpu waits: ", l.note);
    } else {
      what = absl::StrCat("pe ", l.pe, " cpu issues ", l.calls, l.calls == 1 ? " call" : " calls");
    }
    absl::StrAppend(&out, absl::StrFormat("  %14d  %14d  %12d  %-7s  %-7s  %s\n", l.from_ps,
                                          l.to_ps, l.to_ps - l.from_ps, l.held, EdgeName(l.edge),
                                          what));
  }
  if (keep.size() < path.size()) {
    absl::StrAppend(&out, "  (", path.size() - keep.size(), " shorter links not shown)\n");
  }
  return out;
}

std::string FormatDiff(const RunRecord& a, const RunRecord& b, size_t max_path_rows) {
  std::string out;
  for (const RunRecord* r : {&a, &b}) {
    absl::StrAppend(&out, r == &a ? "A: " : "B: ", r->name, "\n   ",
                    r->report ? r->report->workload_summary() : "", "; topology ",
                    r->report ? r->report->topology_name() : "?", ", profile ",
                    r->report ? r->report->issue_cost_profile() : "?", "\n");
  }
  const pb::Report& ra = *a.report;
  const pb::Report& rb = *b.report;
  absl::StrAppend(&out, "\n", absl::StrFormat("%-18s  %16s  %16s  %14s  %8s\n", "", "A", "B",
                                              "B - A", "B / A"));
  auto row = [&out](const std::string& name, uint64_t x, uint64_t y) {
    absl::StrAppend(&out, absl::StrFormat("%-18s  %16d  %16d  %14s  %8s\n", name, x, y,
                                          Delta(x, y), Ratio(x, y)));
  };
  row("latency_ps", ra.latency_ps(), rb.latency_ps());
  row("roofline bound_ps", ra.roofline().bound_ps(), rb.roofline().bound_ps());
  absl::StrAppend(&out, absl::StrFormat("%-18s  %16.4f  %16.4f\n", "x roofline",
                                        ra.roofline_ratio(), rb.roofline_ratio()));
  absl::StrAppend(&out, absl::StrFormat("%-18s  %16s  %16s\n", "binding",
                                        ra.roofline().binding_resource(),
                                        rb.roofline().binding_resource()));
  absl::StrAppend(&out, "\nbusy time by unit kind (summed over the kind's units):\n",
                  absl::StrFormat("%-12s  %6s  %16s  %16s  %14s  %8s  %10s  %10s\n", "kind",
                                  "units", "A busy_ps", "B busy_ps", "B - A", "B / A",
                                  "A util max", "B util max"));
  const auto kinds_b = ByKind(rb);
  for (const auto& [kind, ta] : ByKind(ra)) {
    KindTotals tb;
    for (const auto& [k, t] : kinds_b) {
      if (k == kind) tb = t;
    }
    absl::StrAppend(&out, absl::StrFormat("%-12s  %6d  %16d  %16d  %14s  %8s  %9.1f%%  %9.1f%%\n",
                                          kind, ta.units, ta.busy_ps, tb.busy_ps,
                                          Delta(ta.busy_ps, tb.busy_ps), Ratio(ta.busy_ps, tb.busy_ps),
                                          100 * ta.util_max, 100 * tb.util_max));
  }
  for (const auto& [kind, tb] : kinds_b) {
    bool in_a = false;
    for (const pb::UnitStats& u : ra.units()) in_a = in_a || u.kind() == kind;
    if (!in_a) {
      absl::StrAppend(&out, absl::StrFormat("%-12s  %6d  %16d  %16d  %14s  %8s  %10s  %9.1f%%\n",
                                            kind, tb.units, 0, tb.busy_ps, Delta(0, tb.busy_ps),
                                            "-", "-", 100 * tb.util_max));
    }
  }
  if (a.timeline == nullptr || b.timeline == nullptr) {
    absl::StrAppend(&out, "\nsteps and critical paths: need two traces (`ahbm run --trace`), "
                          "not reports\n");
    return out;
  }
  const StepMatch m = MatchSteps(*a.timeline, *b.timeline);
  absl::StrAppend(&out, "\nsteps (commands, sends, receives): ", m.matched, " matched, ", m.only_a,
                  " only in A, ", m.only_b, " only in B, ", m.differing, " with other times\n");
  if (m.first) {
    const Step& x = a.timeline->steps()[m.first->a_step];
    absl::StrAppend(&out, "first divergence at ", std::min(m.first->a_ps, m.first->b_ps),
                    " ps: ", x.Name(), ": ", m.first->field, " ", m.first->a_ps, " -> ",
                    m.first->b_ps, " (", Delta(m.first->a_ps, m.first->b_ps), ")\n");
  } else {
    absl::StrAppend(&out, "no matched step has other times\n");
  }
  absl::StrAppend(&out, "\ncritical path of A:\n", FormatCriticalPath(*a.timeline, max_path_rows));
  absl::StrAppend(&out, "\ncritical path of B:\n", FormatCriticalPath(*b.timeline, max_path_rows));
  return out;
}

}  // namespace ahbm::observe
