// Stable text renderings of a run's op log and report for the golden tests (tests/README.md):
// one line per op-log record, then the report — every number in clear, doubles with 17
// significant digits, so "byte-identical results" is a plain text comparison.
#ifndef AHBMSIM_TESTS_GOLDEN_RENDER_H_
#define AHBMSIM_TESTS_GOLDEN_RENDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/report.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::golden {

// One line (no '\n') per record: "header ...", "op ...", "issue ...", "stall ...".
std::string RenderRecord(const pb::TraceRecord& record);

// Appends one line per record to `out`, each ending in '\n'.
void RenderOpLog(const std::vector<pb::TraceRecord>& records, std::string& out);

// Appends the report: the header lines (topology, workload, profile, latency, events,
// roofline), one line per unit that has any non-zero counter (the count of the others in a
// line of its own) and one line per PE roofline.
void RenderReport(const pb::Report& report, std::string& out);

// The report's header lines only (latency, events, roofline), for digest-only cases.
void RenderReportHeader(const pb::Report& report, std::string& out);

// 64-bit FNV-1a of `text`, as 16 lower-case hex digits.
std::string Fnv1a64Hex(const std::string& text);

}  // namespace ahbm::golden

#endif  // AHBMSIM_TESTS_GOLDEN_RENDER_H_
