#include "actors/observe/report.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"
#include "base/interval_union.h"
#include "base/text_escape.h"
#include "google/protobuf/util/json_util.h"

namespace ahbm::observe {
namespace {

// ps as "<ps / 10^digits>.<digits digits>", exactly.
std::string Scaled(uint64_t ps, int digits) {
  uint64_t scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  return absl::StrFormat("%d.%0*d", ps / scale, digits, ps % scale);
}

// A text table: two spaces between columns, no trailing spaces.
class Table {
 public:
  // `right[i]`: column i is right-aligned.
  Table(std::vector<std::string> header, std::vector<bool> right) : right_(std::move(right)) {
    AHBM_CHECK(header.size() == right_.size()) << "table header/alignment mismatch";
    rows_.push_back(std::move(header));
  }
  void Add(std::vector<std::string> row) {
    AHBM_CHECK(row.size() == right_.size()) << "table row has " << row.size() << " cells";
    rows_.push_back(std::move(row));
  }
  void AppendTo(std::string* out) const {
    std::vector<size_t> width(right_.size(), 0);
    for (const auto& row : rows_) {
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (const auto& row : rows_) {
      std::string line;
      for (size_t c = 0; c < row.size(); ++c) {
        if (c > 0) line.append("  ");
        const std::string pad(width[c] - row[c].size(), ' ');
        if (right_[c]) {
          absl::StrAppend(&line, pad, row[c]);
        } else {
          absl::StrAppend(&line, row[c], pad);
        }
      }
      line.erase(line.find_last_not_of(' ') + 1);
      absl::StrAppend(out, line, "\n");
    }
  }

 private:
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace

std::vector<pb::UnitStats> BuildUnitStats(const std::vector<pb::TraceRecord>& records,
                                          uint64_t latency_ps, const UnitKindOf& kind_of) {
  struct Acc {
    pb::UnitStats stats;
    std::vector<std::pair<uint64_t, uint64_t>> intervals;
  };
  std::map<uint32_t, Acc> units;
  for (const pb::TraceRecord& record : records) {
    if (!record.has_op()) continue;
    const pb::OpRecord& op = record.op();
    AHBM_CHECK(op.end_ps() >= op.start_ps())
        << "op seq " << op.seq() << " ends before it starts; validate the op log first";
    auto [it, inserted] = units.try_emplace(op.unit());
    Acc& acc = it->second;
    if (inserted) {
      acc.stats.set_unit(op.unit());
      acc.stats.set_unit_name(op.unit_name());
    }
    acc.intervals.emplace_back(op.start_ps(), op.end_ps());
    acc.stats.set_bytes_read(acc.stats.bytes_read() + op.bytes_read());
    acc.stats.set_bytes_written(acc.stats.bytes_written() + op.bytes_written());
    acc.stats.set_flops(acc.stats.flops() + op.flops());
    acc.stats.set_ops(acc.stats.ops() + 1);
  }
  std::vector<pb::UnitStats> out;
  out.reserve(units.size());
  for (auto& [unit, acc] : units) {
    const uint64_t busy = UnionLength(std::move(acc.intervals));
    acc.stats.set_busy_ps(busy);
    acc.stats.set_utilisation(
        latency_ps == 0 ? 0.0 : static_cast<double>(busy) / static_cast<double>(latency_ps));
    if (kind_of) acc.stats.set_kind(kind_of(unit));
    out.push_back(std::move(acc.stats));
  }
  return out;
}

uint64_t TimeAtRatePs(uint64_t amount, double per_ps) {
  if (amount == 0) return 0;
  AHBM_CHECK(per_ps > 0) << "rate " << per_ps << " per ps for " << amount
                         << " (the topology was not validated)";
  const double quotient = static_cast<double>(amount) / per_ps;
  AHBM_CHECK(quotient < 1.8e19) << amount << " at " << per_ps << " per ps overflows ps";
  const double nearest = std::nearbyint(quotient);
  if (std::fabs(quotient - nearest) <= 1e-9 * std::max(1.0, quotient)) {
    return static_cast<uint64_t>(nearest);
  }
  return static_cast<uint64_t>(std::ceil(quotient));
}

pb::PeRoofline ComputePeRoofline(const PeResourceUse& pe) {
  pb::PeRoofline out;
  out.set_pe(pe.pe);
  out.set_hbm_ps(TimeAtRatePs(pe.hbm_bytes, pe.hbm_bytes_per_ps));
  out.set_gemm_tile_plan_ps(pe.gemm_tile_plan_ps);
  out.set_gemm_peak_ps(TimeAtRatePs(pe.gemm_flops, pe.gemm_peak_flops_per_ps));
  out.set_math_ps(pe.math_ps);
  out.set_cpu_issue_ps(pe.cpu_issue_ps);
  // Tie order: hbm, gemm, math, cpu — the first reaching the maximum binds.
  const std::pair<uint64_t, const char*> terms[] = {
      {out.hbm_ps(), "hbm"},
      {out.gemm_tile_plan_ps(), "gemm"},
      {out.math_ps(), "math"},
      {out.cpu_issue_ps(), "cpu"},
  };
  const auto* binding = &terms[0];
  for (const auto& term : terms) {
    if (term.first > binding->first) binding = &term;
  }
  out.set_bound_ps(binding->first);
  out.set_binding_resource(absl::StrCat(pe.pe_name, ".", binding->second));
  return out;
}

pb::Roofline ComputeRoofline(const std::vector<PeResourceUse>& pes,
                             uint64_t comm_critical_path_ps) {
  std::vector<const PeResourceUse*> sorted;
  sorted.reserve(pes.size());
  for (const PeResourceUse& pe : pes) sorted.push_back(&pe);
  std::sort(sorted.begin(), sorted.end(),
            [](const PeResourceUse* a, const PeResourceUse* b) { return a->pe < b->pe; });
  pb::Roofline out;
  const pb::PeRoofline* binding_pe = nullptr;
  for (size_t i = 0; i < sorted.size(); ++i) {
    AHBM_CHECK(i == 0 || sorted[i - 1]->pe != sorted[i]->pe)
        << "pe " << sorted[i]->pe << " appears twice in the roofline input";
    *out.add_pes() = ComputePeRoofline(*sorted[i]);
  }
  for (const pb::PeRoofline& pe : out.pes()) {
    if (binding_pe == nullptr || pe.bound_ps() > binding_pe->bound_ps()) binding_pe = &pe;
  }
  // The bound (DESIGN §2 "roofline") must never exceed a simulated latency, so it is a maximum
  // of terms each of which the run cannot beat, never a sum of terms that may overlap:
  // - a PE resource term (ComputePeRoofline): the PE's HBM channels move at most their peak
  //   bandwidth, its GEMM engine runs one tile at a time, its MATH engine's busy time and its
  //   CPU's issue time are spent inside [0, latency]; each is <= latency on its own;
  // - the communication critical path: the chain of reduce messages (each round sent after the
  //   previous one arrived), each paying at least its link's latency and serialisation; the
  //   chain fits inside [0, latency] too.
  // Adding the two (the earlier rule) assumed no PE work overlaps the messages; in the
  // simulator a rank's sweep and another rank's reduce messages do overlap, and the sum then
  // exceeded the simulated latency (baseline_fanout_group). The max keeps the bound a bound.
  const uint64_t pe_part = binding_pe == nullptr ? 0 : binding_pe->bound_ps();
  out.set_comm_critical_path_ps(comm_critical_path_ps);
  out.set_bound_ps(std::max(pe_part, comm_critical_path_ps));
  if (comm_critical_path_ps > pe_part) {
    out.set_binding_resource("communication critical path");
  } else if (binding_pe != nullptr) {
    out.set_binding_resource(binding_pe->binding_resource());
  }
  return out;
}

double RooflineRatio(uint64_t latency_ps, uint64_t bound_ps) {
  if (bound_ps == 0) return 0.0;
  return static_cast<double>(latency_ps) / static_cast<double>(bound_ps);
}

namespace {

void AppendUnitTable(const std::vector<const pb::UnitStats*>& rows, std::string* out) {
  Table units({"unit", "kind", "busy_ps", "util %", "bytes_read", "bytes_written", "flops", "ops"},
              {false, false, true, true, true, true, true, true});
  for (const pb::UnitStats* unit : rows) {
    units.Add({unit->unit_name(), unit->kind(), absl::StrCat(unit->busy_ps()),
               absl::StrFormat("%.2f", 100.0 * unit->utilisation()),
               absl::StrCat(unit->bytes_read()), absl::StrCat(unit->bytes_written()),
               absl::StrCat(unit->flops()), absl::StrCat(unit->ops())});
  }
  units.AppendTo(out);
}

void AppendPeTable(const std::vector<const pb::PeRoofline*>& rows, std::string* out) {
  Table pes({"pe", "hbm_ps", "gemm_tile_plan_ps", "gemm_peak_ps", "math_ps", "cpu_issue_ps",
             "bound_ps", "binding"},
            {true, true, true, true, true, true, true, false});
  for (const pb::PeRoofline* pe : rows) {
    pes.Add({absl::StrCat(pe->pe()), absl::StrCat(pe->hbm_ps()),
             absl::StrCat(pe->gemm_tile_plan_ps()), absl::StrCat(pe->gemm_peak_ps()),
             absl::StrCat(pe->math_ps()), absl::StrCat(pe->cpu_issue_ps()),
             absl::StrCat(pe->bound_ps()), pe->binding_resource()});
  }
  pes.AppendTo(out);
}

// One row per unit kind, kinds in order of first appearance.
void AppendKindTable(const pb::Report& report, std::string* out) {
  struct Kind {
    std::string name;
    uint64_t units = 0;
    double util_sum = 0, util_max = 0;
    const pb::UnitStats* busiest = nullptr;
    uint64_t bytes_read = 0, bytes_written = 0, flops = 0, ops = 0;
  };
  std::vector<Kind> kinds;
  for (const pb::UnitStats& unit : report.units()) {
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const Kind& k) { return k.name == unit.kind(); });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), Kind{unit.kind()});
    ++it->units;
    it->util_sum += unit.utilisation();
    it->util_max = std::max(it->util_max, unit.utilisation());
    if (it->busiest == nullptr || unit.busy_ps() > it->busiest->busy_ps()) it->busiest = &unit;
    it->bytes_read += unit.bytes_read();
    it->bytes_written += unit.bytes_written();
    it->flops += unit.flops();
    it->ops += unit.ops();
  }
  Table table({"kind", "units", "util mean %", "util max %", "busiest", "bytes_read",
               "bytes_written", "flops", "ops"},
              {false, true, true, true, false, true, true, true, true});
  for (const Kind& k : kinds) {
    table.Add({k.name.empty() ? "-" : k.name, absl::StrCat(k.units),
               absl::StrFormat("%.2f", 100.0 * k.util_sum / static_cast<double>(k.units)),
               absl::StrFormat("%.2f", 100.0 * k.util_max), k.busiest->unit_name(),
               absl::StrCat(k.bytes_read), absl::StrCat(k.bytes_written), absl::StrCat(k.flops),
               absl::StrCat(k.ops)});
  }
  table.AppendTo(out);
}

}  // namespace

std::string FormatReportTable(const pb::Report& report, const TableOptions& options) {
  std::string out;
  const pb::Roofline& roofline = report.roofline();
  absl::StrAppend(&out, "topology:  ", report.topology_name(), "\n");
  absl::StrAppend(&out, "workload:  ", report.workload_summary(), "\n");
  absl::StrAppend(&out, "profile:   ", report.issue_cost_profile(), "\n");
  if (!report.hbm_model().empty()) absl::StrAppend(&out, "hbm:       ", report.hbm_model(), "\n");
  absl::StrAppend(&out, "latency:   ", report.latency_ps(),
                  " ps = ", Scaled(report.latency_ps(), 3),
                  " ns = ", Scaled(report.latency_ps(), 6), " µs\n");
  absl::StrAppend(&out, "events:    ", report.events(), "\n");
  absl::StrAppend(&out, "roofline:  bound ", roofline.bound_ps(),
                  " ps = ", Scaled(roofline.bound_ps(), 3), " ns, ratio ",
                  absl::StrFormat("%.3f", report.roofline_ratio()), ", binding ",
                  roofline.binding_resource().empty() ? "-" : roofline.binding_resource(), "\n");
  absl::StrAppend(&out, "           communication critical path ", roofline.comm_critical_path_ps(),
                  " ps\n");
  // The HBM traffic: the DMAs' tensors, and what the channels moved for them (whole chunks).
  uint64_t useful = 0, charged = 0, channels = 0;
  for (const pb::UnitStats& unit : report.units()) {
    useful += unit.hbm_useful_bytes();
    charged += unit.hbm_charged_bytes();
    if (unit.kind() == "hbm_channel") channels += unit.bytes_read() + unit.bytes_written();
  }
  if (charged + channels > 0) {
    absl::StrAppend(&out, "hbm bytes: ", channels, " on the channels = ", useful,
                    " of DMA tensors + ", charged - useful,
                    " chunk waste (runs shorter than a DMA chunk pay for it whole)\n");
  }

  std::vector<const pb::UnitStats*> units;
  for (const pb::UnitStats& unit : report.units()) units.push_back(&unit);
  std::vector<const pb::PeRoofline*> pes;
  for (const pb::PeRoofline& pe : roofline.pes()) pes.push_back(&pe);
  if (options.units == UnitRows::kAll) {
    out.append("\n");
    AppendUnitTable(units, &out);
    out.append("\n");
    AppendPeTable(pes, &out);
    return out;
  }
  // Summary: per kind, the busiest units (busy_ps, ties by unit id), the highest PE bounds.
  absl::StrAppend(&out, "\nunit kinds (", units.size(),
                  " units with ops; every unit: --units=all, --report_json, --report_csv):\n");
  AppendKindTable(report, &out);
  std::stable_sort(units.begin(), units.end(), [](const pb::UnitStats* a, const pb::UnitStats* b) {
    return a->busy_ps() > b->busy_ps();
  });
  units.resize(std::min(units.size(), options.busiest));
  absl::StrAppend(&out, "\n", units.size(), " busiest units:\n");
  AppendUnitTable(units, &out);
  std::stable_sort(pes.begin(), pes.end(), [](const pb::PeRoofline* a, const pb::PeRoofline* b) {
    return a->bound_ps() > b->bound_ps();
  });
  const size_t all_pes = pes.size();
  pes.resize(std::min(pes.size(), options.busiest));
  absl::StrAppend(&out, "\nPE roofline, ", pes.size(), " highest bounds of ", all_pes, " PEs:\n");
  AppendPeTable(pes, &out);
  return out;
}

std::string ReportToJson(const pb::Report& report) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  // protobuf 3.21 returns its own util::Status, not absl::Status.
  const auto status = google::protobuf::util::MessageToJsonString(report, &json, options);
  AHBM_CHECK(status.ok()) << "Report to JSON: " << status.ToString();
  return json;
}

std::string ReportToCsv(const pb::Report& report) {
  std::string out = "unit,unit_name,kind,busy_ps,utilisation,bytes_read,bytes_written,flops,ops\n";
  for (const pb::UnitStats& unit : report.units()) {
    absl::StrAppend(&out, unit.unit(), ",", CsvField(unit.unit_name()), ",", CsvField(unit.kind()),
                    ",", unit.busy_ps(), ",", absl::StrFormat("%.6f", unit.utilisation()), ",",
                    unit.bytes_read(), ",", unit.bytes_written(), ",", unit.flops(), ",",
                    unit.ops(), "\n");
  }
  return out;
}

}  // namespace ahbm::observe
