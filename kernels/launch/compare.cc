#include "kernels/launch/compare.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "kernels/launch/launch.h"
#include "kernels/launch/launcher.h"

namespace ahbm::launch {

namespace {

// The PE prefix of a unit name: "sip0.cube1.pe1.scheduler" -> "sip0.cube1.pe1".
std::string PeOfUnit(const std::string& unit) { return unit.substr(0, unit.rfind('.')); }

// The reduce's commands (see the header): every send and receive, and each PE's scheduler
// commands (merges, the normalise, the store) issued at or after its first receive.
uint64_t ReduceOps(const std::vector<pb::TraceRecord>& log) {
  std::map<std::string, uint64_t> first_recv;
  uint64_t ops = 0;
  for (const pb::TraceRecord& r : log) {
    if (!r.has_op() || !r.op().unit_name().ends_with(".cpu")) continue;
    const std::string& op = r.op().op();
    if (!op.starts_with("send_") && !op.starts_with("recv_")) continue;
    ++ops;
    if (!op.starts_with("recv_")) continue;
    const std::string pe = PeOfUnit(r.op().unit_name());
    const auto [it, fresh] = first_recv.try_emplace(pe, r.op().issue_ps());
    if (!fresh) it->second = std::min(it->second, r.op().issue_ps());
  }
  for (const pb::TraceRecord& r : log) {
    if (!r.has_op() || !r.op().unit_name().ends_with(".scheduler")) continue;
    const auto it = first_recv.find(PeOfUnit(r.op().unit_name()));
    if (it != first_recv.end() && r.op().issue_ps() >= it->second) ++ops;
  }
  return ops;
}

// The compare spec of the workload's kernel (empty rows: none).
CompareSpec SpecOf(const pb::Workload& w) {
  const KernelLauncher* launcher = FindLauncher(w.kernel());
  return launcher == nullptr ? CompareSpec{} : launcher->Compare();
}

// One row's workload: `variant`, the spec's row edits, timing mode.
pb::Workload RowWorkload(const CompareSpec& spec, pb::Workload w, pb::Variant variant) {
  w.set_variant(variant);
  if (spec.row) spec.row(w);
  w.set_data(false);
  w.clear_seed();
  return w;
}

absl::StatusOr<CompareRow> CompareOne(const pb::Chip& chip, const CompareSpec& spec,
                                      pb::Workload w, pb::Variant variant) {
  w = RowWorkload(spec, std::move(w), variant);
  LaunchOptions options;
  options.keep_op_log = spec.op_log;
  absl::StatusOr<LaunchResult> result = RunWorkload(chip, w, options);
  RETURN_IF_ERROR(result.status());
  if (!result->runtime_status.ok()) return result->runtime_status;
  CompareRow row;
  row.kernel = w.kernel();
  row.variant = variant;
  row.composites = result->composites;
  row.grid_composites = result->grid_composites;
  double gemm_max = 0, gemm_sum = 0;
  uint64_t gemm_pes = 0;
  for (const pb::PeRoofline& pe : result->report.roofline().pes()) {
    if (pe.gemm_tile_plan_ps() == 0) continue;
    gemm_max = std::max(gemm_max, static_cast<double>(pe.gemm_tile_plan_ps()));
    gemm_sum += static_cast<double>(pe.gemm_tile_plan_ps());
    ++gemm_pes;
  }
  row.balance = gemm_pes == 0 ? 0 : gemm_max / (gemm_sum / gemm_pes);
  row.payload = w.reduce_payload() == pb::PACKED ? pb::PACKED : pb::TRIPLET;
  row.merge = w.reduce_merge() == pb::FUSED ? pb::FUSED : pb::PRIMITIVE;
  row.reduce_ops = ReduceOps(result->op_log);
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
    if (u.kind() == "noc") row.noc_bytes += u.bytes_read();
  }
  row.kv_bytes = spec.op_log ? read - q_bytes : 0;
  row.reduce_rounds = result->reduce_rounds;
  return row;
}

}  // namespace

std::vector<pb::Kernel> CompareKernels() {
  std::vector<pb::Kernel> kernels;
  for (const KernelLauncher* l : Launchers()) {
    if (!l->Compare().rows.empty()) kernels.push_back(l->kernel());
  }
  return kernels;
}

absl::StatusOr<std::vector<CompareRow>> Compare(const pb::Chip& chip, const pb::Workload& workload,
                                                const std::vector<pb::Variant>& variants) {
  const CompareSpec spec = SpecOf(workload);
  if (spec.check) {
    RETURN_IF_ERROR(spec.check(workload, variants));
  }
  // Every row is validated before any runs; a refusal names its row and the rows that fit.
  for (pb::Variant variant : variants) {
    const absl::Status s = ValidateWorkload(chip, RowWorkload(spec, workload, variant));
    if (s.ok()) continue;
    std::vector<std::string> fitting;
    for (pb::Variant other : variants) {
      if (ValidateWorkload(chip, RowWorkload(spec, workload, other)).ok()) {
        fitting.push_back(absl::AsciiStrToLower(pb::Variant_Name(other)));
      }
    }
    return WithMessage(
        s, absl::StrCat(s.message(), " (compare row ",
                               absl::AsciiStrToLower(pb::Variant_Name(variant)),
                               fitting.empty() ? ""
                                               : absl::StrCat("; --variants=",
                                                              absl::StrJoin(fitting, ","),
                                                              " leaves out what does not fit"),
                               ")"));
  }
  std::vector<CompareRow> rows;
  for (pb::Variant variant : variants) {
    absl::StatusOr<CompareRow> row = CompareOne(chip, spec, workload, variant);
    RETURN_IF_ERROR(row.status());
    rows.push_back(*std::move(row));
  }
  uint64_t reference = 0;
  for (const CompareRow& row : rows) {
    if (spec.ratio_to != pb::VARIANT_UNSPECIFIED && row.variant == spec.ratio_to) {
      reference = row.latency_ps;
    }
  }
  for (CompareRow& row : rows) {
    row.baseline_ratio = reference == 0 ? 0 : static_cast<double>(row.latency_ps) / reference;
  }
  return rows;
}

absl::StatusOr<std::vector<CompareRow>> CompareReduceOptions(
    const pb::Chip& chip, const pb::Workload& workload, const std::vector<pb::Variant>& variants) {
  const CompareSpec spec = SpecOf(workload);
  std::vector<CompareRow> rows;
  for (pb::Variant variant : variants) {
    for (pb::ReducePayload payload : {pb::TRIPLET, pb::PACKED}) {
      for (pb::ReduceMerge merge : {pb::PRIMITIVE, pb::FUSED}) {
        pb::Workload w = workload;
        w.set_reduce_payload(payload);
        w.set_reduce_merge(merge);
        absl::StatusOr<CompareRow> row = CompareOne(chip, spec, w, variant);
        RETURN_IF_ERROR(row.status());
        rows.push_back(*std::move(row));
      }
    }
  }
  return rows;
}

std::string FormatCompareTable(const pb::Chip& chip, const std::vector<CompareRow>& rows,
                               bool reduce_options) {
  std::string out;
  if (!rows.empty()) {
    absl::StrAppend(&out, "chip:      ", chip.name(), "\n");
    // The summary names the first row's variant: "decode OPT1: H_q ..." -> "decode: H_q ...".
    std::string summary = rows.front().report.workload_summary();
    if (const size_t colon = summary.find(": "); colon != std::string::npos) {
      summary = absl::StrCat(summary.substr(0, std::min(colon, summary.find(' '))),
                             summary.substr(colon));
    }
    absl::StrAppend(&out, "workload:  ", summary, "\n");
    absl::StrAppend(&out, "profile:   ", rows.front().report.issue_cost_profile(), "\n");
    absl::StrAppend(&out, "hbm:       ", rows.front().report.hbm_model(), "\n\n");
  }
  if (reduce_options) {
    absl::StrAppend(&out, absl::StrFormat("%-6s %-8s %-10s %11s %10s %10s %11s %7s %10s %6s %9s\n",
                                          "variant", "payload", "merge", "latency_ns", "sweep_ns",
                                          "reduce_ns", "roofline_ns", "x_roof", "reduce_ops",
                                          "rounds", "events"));
    for (const CompareRow& r : rows) {
      absl::StrAppend(
          &out, absl::StrFormat("%-6s %-8s %-10s %11.1f %10.1f %10.1f %11.1f %7.3f %10u %6u %9u\n",
                                absl::AsciiStrToLower(pb::Variant_Name(r.variant)),
                                absl::AsciiStrToLower(pb::ReducePayload_Name(r.payload)),
                                absl::AsciiStrToLower(pb::ReduceMerge_Name(r.merge)),
                                r.latency_ps / 1e3, r.sweep_ps / 1e3, r.reduce_ps / 1e3,
                                r.roofline_ps / 1e3, r.roofline_ratio, r.reduce_ops,
                                r.reduce_rounds, r.events));
    }
    return out;
  }
  if (!rows.empty() && rows.front().kernel == pb::PREFILL) {
    absl::StrAppend(&out, absl::StrFormat("%-16s %11s %11s %7s %7s  %-28s %10s %10s %9s %7s %9s\n",
                                          "variant", "latency_ns", "roofline_ns", "x_roof",
                                          "x_base", "binding", "composites", "full_grid",
                                          "noc_MiB", "balance", "events"));
    for (const CompareRow& r : rows) {
      const std::string x_base =
          r.baseline_ratio == 0 ? "-" : absl::StrFormat("%.3f", r.baseline_ratio);
      absl::StrAppend(
          &out, absl::StrFormat("%-16s %11.1f %11.1f %7.3f %7s  %-28s %10u %10u %9.2f %7.3f %9u\n",
                                absl::AsciiStrToLower(pb::Variant_Name(r.variant)),
                                r.latency_ps / 1e3, r.roofline_ps / 1e3, r.roofline_ratio, x_base,
                                r.binding, r.composites, r.grid_composites,
                                r.noc_bytes / 1048576.0, r.balance, r.events));
    }
    return out;
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
