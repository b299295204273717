// A run's report (DESIGN §2 roofline, §5): per-unit stats from the op log, the roofline bound
// and its binding resource, and the report printed as a text table, JSON and CSV.
// Plain C++, no CAF.
//
// Contract:
// - BuildUnitStats: one UnitStats per unit that has at least one op record, sorted by unit id.
//   busy_ps = length of the union of the unit's [start_ps, end_ps) intervals (overlapping
//   commands, e.g. a DMA engine's, count once; empty intervals count 0);
//   utilisation = busy_ps / latency_ps (0 when latency_ps is 0; not clamped: ops past the
//   kernel latency give > 1); bytes_read, bytes_written, flops = sums; ops = count;
//   unit_name = the unit's first op record's; kind = kind_of(unit) ("" when kind_of is null).
//   Non-op records are ignored. An op with end_ps < start_ps fails an AHBM_CHECK.
// - TimeAtRatePs(amount, per_ps) = ceil(amount / per_ps), except that a quotient within a
//   relative 1e-9 of an integer is that integer (a rate like 0.7 B/ps is not exact in binary,
//   and 21 / 0.7 must give 30, not 31). 0 when amount is 0; a rate <= 0 with amount > 0 fails
//   an AHBM_CHECK (the topology was not validated).
// - PE roofline: hbm_ps = TimeAtRatePs(hbm_bytes, hbm_bytes_per_ps); gemm_peak_ps =
//   TimeAtRatePs(gemm_flops, gemm_peak_flops_per_ps) (informative only: plan - peak is the
//   padding loss); bound_ps = max(hbm_ps, gemm_tile_plan_ps, math_ps, cpu_issue_ps);
//   binding_resource = "<pe_name>.<r>" for the first r in the order hbm, gemm, math, cpu whose
//   time equals bound_ps (so an idle PE names ".hbm").
// - ComputeRoofline: pes sorted by pe (duplicate pe ids fail an AHBM_CHECK);
//   pe_part = max PE bound_ps (0 without PEs), the binding PE is the lowest pe id reaching it;
//   bound_ps = max(pe_part, comm_critical_path_ps) — a lower bound of the latency (each term
//   is; a sum is not, as PE work and messages overlap: the derivation is in report.cc);
//   binding_resource =
//   "communication critical path" when comm_critical_path_ps > pe_part (strictly), else the
//   binding PE's binding_resource, else "" (no PEs and no communication).
// - RooflineRatio = latency_ps / bound_ps (0 when bound_ps is 0).
// - Printing is deterministic (fixed formats, C locale, input order = report order):
//   FormatReportTable: header lines (topology, workload, profile, latency in ps/ns/µs, events,
//   roofline bound + ratio + binding resource + communication critical path; when HBM was
//   used, "hbm bytes:" the channels' bytes = the DMAs' hbm_useful_bytes + chunk waste, i.e.
//   hbm_charged_bytes - hbm_useful_bytes), then
//   - UnitRows::kAll: a blank line, the unit table (unit, kind, busy_ps, util %, bytes_read,
//     bytes_written, flops, ops; every unit in report order), a blank line, the per-PE
//     roofline table (every PE);
//   - UnitRows::kSummary (default; a full chip has thousands of units): a blank line, a title
//     and one row per unit kind in order of first appearance (kind, units, util mean %, util
//     max %, busiest = the name of the kind's unit with the largest busy_ps, ties the lowest
//     id, summed bytes_read, bytes_written, flops, ops); a blank line, a title and the unit
//     table of the `busiest` units (busy_ps descending, ties by report order); a blank line, a
//     title and the PE table of the `busiest` highest bound_ps (ties by pe).
//   Columns are separated by two spaces, text left-aligned, numbers right-aligned, no trailing
//   spaces, every line ends in '\n'.
//   ReportToJson: protobuf JSON with proto field names, primitive fields always printed,
//   indented (uint64 fields are JSON strings, per the proto3 JSON mapping).
//   ReportToCsv: header "unit,unit_name,kind,busy_ps,utilisation,bytes_read,bytes_written,
//   flops,ops", then one row per unit in report order; utilisation as a fraction with 6
//   decimals; fields quoted per RFC 4180 when they contain , " or a line break.
#ifndef AHBMSIM_ACTORS_OBSERVE_REPORT_H_
#define AHBMSIM_ACTORS_OBSERVE_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "proto/report.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::observe {

// Maps a unit id to its kind name (topology::UnitKindName(ChipIndex::KindOf(id))).
using UnitKindOf = std::function<std::string(uint32_t unit)>;

std::vector<pb::UnitStats> BuildUnitStats(const std::vector<pb::TraceRecord>& records,
                                          uint64_t latency_ps, const UnitKindOf& kind_of);

// What one PE used over the run, for its roofline terms.
struct PeResourceUse {
  uint32_t pe = 0;              // global PE index
  std::string pe_name;          // "sip0.cube3.pe2"
  uint64_t hbm_bytes = 0;       // bytes the PE's HBM channels moved (any requester, whole chunks)
  double hbm_bytes_per_ps = 0;  // peak bandwidth of the PE's channels
  uint64_t gemm_tile_plan_ps = 0;
  uint64_t gemm_flops = 0;
  double gemm_peak_flops_per_ps = 0;
  uint64_t math_ps = 0;
  uint64_t cpu_issue_ps = 0;
};

uint64_t TimeAtRatePs(uint64_t amount, double per_ps);

pb::PeRoofline ComputePeRoofline(const PeResourceUse& pe);

pb::Roofline ComputeRoofline(const std::vector<PeResourceUse>& pes, uint64_t comm_critical_path_ps);

double RooflineRatio(uint64_t latency_ps, uint64_t bound_ps);

enum class UnitRows { kSummary, kAll };
struct TableOptions {
  UnitRows units = UnitRows::kSummary;
  size_t busiest = 10;  // kSummary: rows of the busiest-unit and PE tables
};

std::string FormatReportTable(const pb::Report& report, const TableOptions& options = {});
std::string ReportToJson(const pb::Report& report);
std::string ReportToCsv(const pb::Report& report);

}  // namespace ahbm::observe

#endif  // AHBMSIM_ACTORS_OBSERVE_REPORT_H_
