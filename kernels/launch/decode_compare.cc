#include "kernels/launch/decode_compare.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/launch/decode_run.h"
#include "kernels/launch/launch.h"

namespace ahbm::launch {

absl::StatusOr<std::vector<CompareRow>> CompareDecode(const pb::Chip& chip,
                                                      const pb::Workload& workload,
                                                      const std::vector<pb::Variant>& variants) {
  std::vector<CompareRow> rows;
  for (pb::Variant variant : variants) {
    pb::Workload w = workload;
    w.set_kernel(pb::DECODE);
    w.set_variant(variant);
    w.set_data(false);
    w.clear_seed();
    absl::StatusOr<LaunchResult> result = RunDecodeWorkload(chip, w, LaunchOptions{});
    if (!result.ok()) return result.status();
    if (!result->runtime_status.ok()) return result->runtime_status;
    CompareRow row;
    row.variant = variant;
    row.report = result->report;
    row.latency_ps = result->report.latency_ps();
    row.roofline_ps = result->report.roofline().bound_ps();
    row.roofline_ratio = result->report.roofline_ratio();
    row.binding = result->report.roofline().binding_resource();
    row.events = result->report.events();
    uint64_t q_bytes = 0;
    for (const pb::TraceRecord& r : result->op_log) {
      if (!r.has_op() || !r.op().unit_name().ends_with(".scheduler")) continue;
      const std::string& op = r.op().op();
      if (op == "composite_gemm" || op == "softmax_pv" || op == "dot") {
        row.sweep_ps = std::max(row.sweep_ps, r.op().end_ps());
      }
      if (op == "dma_load") q_bytes += r.op().bytes_read();
    }
    row.reduce_ps = row.latency_ps - std::min(row.latency_ps, row.sweep_ps);
    uint64_t read = 0;
    for (const pb::UnitStats& u : result->report.units()) {
      if (u.kind() == "dma") read += u.bytes_read();
    }
    row.kv_bytes = read - q_bytes;
    row.reduce_rounds = result->reduce_rounds;
    rows.push_back(std::move(row));
  }
  uint64_t baseline = 0;
  for (const CompareRow& row : rows) {
    if (row.variant == pb::BASELINE_FANOUT) baseline = row.latency_ps;
  }
  for (CompareRow& row : rows) {
    row.baseline_ratio = baseline == 0 ? 0 : static_cast<double>(row.latency_ps) / baseline;
  }
  return rows;
}

std::string FormatCompareTable(const pb::Chip& chip, const std::vector<CompareRow>& rows) {
  std::string out;
  if (!rows.empty()) {
    absl::StrAppend(&out, "chip:      ", chip.name(), "\n");
    // The summary names the first row's variant: "decode OPT1: H_q ..." -> "decode: H_q ...".
    std::string summary = rows.front().report.workload_summary();
    if (const size_t colon = summary.find(": "); colon != std::string::npos) {
      summary = absl::StrCat("decode", summary.substr(colon));
    }
    absl::StrAppend(&out, "workload:  ", summary, "\n");
    absl::StrAppend(&out, "profile:   ", rows.front().report.issue_cost_profile(), "\n\n");
  }
  // The variant column fits the longest name, baseline_fanout_group (21).
  absl::StrAppend(&out, absl::StrFormat("%-21s %11s %10s %10s %11s %7s %7s  %-26s %9s %6s %9s\n",
                                        "variant", "latency_ns", "sweep_ns", "reduce_ns",
                                        "roofline_ns", "x_roof", "x_base", "binding", "kv_MiB",
                                        "rounds", "events"));
  for (const CompareRow& r : rows) {
    std::string name = absl::AsciiStrToLower(pb::Variant_Name(r.variant));
    // No baseline row: no ratio to it ("-").
    const std::string x_base =
        r.baseline_ratio == 0 ? "-" : absl::StrFormat("%.3f", r.baseline_ratio);
    absl::StrAppend(
        &out, absl::StrFormat("%-21s %11.1f %10.1f %10.1f %11.1f %7.3f %7s  %-26s %9.2f %6u %9u\n",
                              name, r.latency_ps / 1e3, r.sweep_ps / 1e3, r.reduce_ps / 1e3,
                              r.roofline_ps / 1e3, r.roofline_ratio, x_base, r.binding,
                              r.kv_bytes / 1048576.0, r.reduce_rounds, r.events));
  }
  return out;
}

}  // namespace ahbm::launch
