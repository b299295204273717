#include "actors/observe/report.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/report.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::observe {
namespace {

using ::testing::HasSubstr;

struct Op {
  uint32_t unit;
  std::string name;
  uint64_t start_ps;
  uint64_t end_ps;
  uint64_t bytes_read;
  uint64_t bytes_written;
  uint64_t flops;
};

std::vector<pb::TraceRecord> Records(const std::vector<Op>& ops) {
  std::vector<pb::TraceRecord> records(1);
  records[0].mutable_header()->set_topology_name("small");
  for (const Op& op : ops) {
    pb::TraceRecord record;
    pb::OpRecord* r = record.mutable_op();
    r->set_seq(records.size() - 1);
    r->set_unit(op.unit);
    r->set_unit_name(op.name);
    r->set_start_ps(op.start_ps);
    r->set_end_ps(op.end_ps);
    r->set_bytes_read(op.bytes_read);
    r->set_bytes_written(op.bytes_written);
    r->set_flops(op.flops);
    records.push_back(record);
    pb::TraceRecord stall;  // ignored by BuildUnitStats
    stall.mutable_stall()->set_from_ps(0);
    stall.mutable_stall()->set_to_ps(1000000);
    records.push_back(stall);
  }
  return records;
}

// Busy time by brute force: the picoseconds covered by at least one of the unit's ops.
uint64_t CoveredPs(const std::vector<Op>& ops, uint32_t unit) {
  uint64_t horizon = 0;
  for (const Op& op : ops) horizon = std::max(horizon, op.end_ps);
  std::vector<bool> covered(horizon, false);
  for (const Op& op : ops) {
    if (op.unit != unit) continue;
    for (uint64_t t = op.start_ps; t < op.end_ps; ++t) covered[t] = true;
  }
  return std::count(covered.begin(), covered.end(), true);
}

// DMA commands that overlap, nest, touch end to start, and one of zero length; then a GEMM
// unit with a lower id that appears later.
const std::vector<Op> kOps = {
    {5, "sip0.cube0.pe0.dma", 0, 100, 256, 0, 0},
    {5, "sip0.cube0.pe0.dma", 50, 150, 256, 0, 0},
    {5, "sip0.cube0.pe0.dma", 150, 200, 0, 512, 0},
    {5, "sip0.cube0.pe0.dma", 300, 300, 64, 0, 0},
    {5, "sip0.cube0.pe0.dma", 400, 500, 128, 0, 0},
    {5, "sip0.cube0.pe0.dma", 420, 450, 128, 0, 0},
    {2, "sip0.cube0.pe0.gemm", 100, 460, 0, 0, 65536},
    {2, "sip0.cube0.pe0.gemm", 460, 470, 0, 0, 1024},
};

std::string KindOf(uint32_t unit) { return unit == 5 ? "dma" : "gemm"; }

TEST(BuildUnitStatsTest, UnionBusyTimeAndSumsPerUnitSortedById) {
  constexpr uint64_t kLatencyPs = 1000;
  const std::vector<pb::UnitStats> stats = BuildUnitStats(Records(kOps), kLatencyPs, KindOf);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].unit(), 2u);
  EXPECT_EQ(stats[1].unit(), 5u);
  for (const pb::UnitStats& s : stats) {
    SCOPED_TRACE(s.unit_name());
    uint64_t bytes_read = 0, bytes_written = 0, flops = 0, ops = 0;
    std::string name;
    for (const Op& op : kOps) {
      if (op.unit != s.unit()) continue;
      if (name.empty()) name = op.name;
      bytes_read += op.bytes_read;
      bytes_written += op.bytes_written;
      flops += op.flops;
      ++ops;
    }
    const uint64_t busy = CoveredPs(kOps, s.unit());
    EXPECT_EQ(s.unit_name(), name);
    EXPECT_EQ(s.kind(), KindOf(s.unit()));
    EXPECT_EQ(s.busy_ps(), busy);
    EXPECT_DOUBLE_EQ(s.utilisation(), static_cast<double>(busy) / kLatencyPs);
    EXPECT_EQ(s.bytes_read(), bytes_read);
    EXPECT_EQ(s.bytes_written(), bytes_written);
    EXPECT_EQ(s.flops(), flops);
    EXPECT_EQ(s.ops(), ops);
  }
}

TEST(BuildUnitStatsTest, ZeroLatencyGivesZeroUtilisationAndNullKindGivesEmptyKind) {
  const std::vector<pb::UnitStats> stats = BuildUnitStats(Records(kOps), 0, nullptr);
  ASSERT_EQ(stats.size(), 2u);
  for (const pb::UnitStats& s : stats) {
    EXPECT_EQ(s.utilisation(), 0.0);
    EXPECT_EQ(s.kind(), "");
    EXPECT_GT(s.busy_ps(), 0u);
  }
}

TEST(TimeAtRateTest, CeilingThatIgnoresBinaryRoundingOfTheRate) {
  // 21 / 0.7 is 30.000000000000004 in doubles; the true quotient is 30.
  EXPECT_EQ(TimeAtRatePs(21, 0.7), 30u);
  EXPECT_EQ(TimeAtRatePs(22, 0.7), 32u);  // 31.43 -> 32
  EXPECT_EQ(TimeAtRatePs(2560, 0.256), 10000u);
  EXPECT_EQ(TimeAtRatePs(2561, 0.256), 10004u);  // 10003.906 -> 10004
  EXPECT_EQ(TimeAtRatePs(0, 0.0), 0u);
}

PeResourceUse Pe(uint32_t pe, uint64_t hbm_ps, uint64_t gemm_ps, uint64_t math_ps,
                 uint64_t cpu_ps) {
  PeResourceUse use;
  use.pe = pe;
  use.pe_name = absl::StrCat("sip0.cube0.pe", pe);
  use.hbm_bytes_per_ps = 0.256;
  use.hbm_bytes = hbm_ps * 256 / 1000;  // exact for multiples of 125 ps
  use.gemm_tile_plan_ps = gemm_ps;
  use.gemm_peak_flops_per_ps = 2.048;
  use.gemm_flops = gemm_ps * 2048 / 1000 / 2;  // half the plan: padding loss
  use.math_ps = math_ps;
  use.cpu_issue_ps = cpu_ps;
  return use;
}

struct BindingCase {
  std::string name;
  uint64_t hbm_ps, gemm_ps, math_ps, cpu_ps;
  std::string want_resource;
};

class PeRooflineTest : public ::testing::TestWithParam<BindingCase> {};

TEST_P(PeRooflineTest, MaxOfResourcesWithTieOrderHbmGemmMathCpu) {
  const BindingCase& c = GetParam();
  const PeResourceUse use = Pe(3, c.hbm_ps, c.gemm_ps, c.math_ps, c.cpu_ps);
  const pb::PeRoofline roofline = ComputePeRoofline(use);
  EXPECT_EQ(roofline.pe(), 3u);
  EXPECT_EQ(roofline.hbm_ps(), c.hbm_ps);
  EXPECT_EQ(roofline.gemm_tile_plan_ps(), c.gemm_ps);
  EXPECT_EQ(roofline.gemm_peak_ps(), TimeAtRatePs(use.gemm_flops, use.gemm_peak_flops_per_ps));
  EXPECT_EQ(roofline.math_ps(), c.math_ps);
  EXPECT_EQ(roofline.cpu_issue_ps(), c.cpu_ps);
  EXPECT_EQ(roofline.bound_ps(), std::max({c.hbm_ps, c.gemm_ps, c.math_ps, c.cpu_ps}));
  EXPECT_EQ(roofline.binding_resource(), absl::StrCat(use.pe_name, ".", c.want_resource));
}

INSTANTIATE_TEST_SUITE_P(
    Bindings, PeRooflineTest,
    ::testing::Values(BindingCase{"hbm", 1000, 500, 250, 125, "hbm"},
                      BindingCase{"gemm", 500, 1000, 250, 125, "gemm"},
                      BindingCase{"math", 500, 250, 1000, 125, "math"},
                      BindingCase{"cpu", 500, 250, 125, 1000, "cpu"},
                      BindingCase{"tie_hbm_gemm", 1000, 1000, 250, 125, "hbm"},
                      BindingCase{"tie_gemm_math", 500, 1000, 1000, 125, "gemm"},
                      BindingCase{"tie_math_cpu", 500, 250, 1000, 1000, "math"},
                      BindingCase{"tie_gemm_cpu", 500, 1000, 250, 1000, "gemm"},
                      BindingCase{"idle", 0, 0, 0, 0, "hbm"}),
    [](const ::testing::TestParamInfo<BindingCase>& info) { return info.param.name; });

TEST(PeRooflineTest, GemmPeakIsInformativeOnly) {
  PeResourceUse use = Pe(0, 1000, 500, 0, 0);
  use.gemm_flops = 1000000;  // at peak it would take far longer than anything else
  const pb::PeRoofline roofline = ComputePeRoofline(use);
  EXPECT_EQ(roofline.gemm_peak_ps(), TimeAtRatePs(use.gemm_flops, use.gemm_peak_flops_per_ps));
  EXPECT_GT(roofline.gemm_peak_ps(), roofline.bound_ps());
  EXPECT_EQ(roofline.bound_ps(), 1000u);
  EXPECT_EQ(roofline.binding_resource(), "sip0.cube0.pe0.hbm");
}

// The communication critical path is another lower bound of the latency, not a term to add:
// PE work and messages overlap (report.cc), so the bound is the larger of the two.
TEST(RooflineTest, PesSortedTiesGoToTheLowestPeAndCommIsAnotherBound) {
  const std::vector<PeResourceUse> pes = {Pe(5, 0, 2000, 0, 0), Pe(3, 2000, 0, 0, 0),
                                          Pe(4, 1000, 0, 0, 0)};
  constexpr uint64_t kComm = 700;
  const pb::Roofline roofline = ComputeRoofline(pes, kComm);
  ASSERT_EQ(roofline.pes_size(), 3);
  EXPECT_EQ(roofline.pes(0).pe(), 3u);
  EXPECT_EQ(roofline.pes(1).pe(), 4u);
  EXPECT_EQ(roofline.pes(2).pe(), 5u);
  EXPECT_EQ(roofline.comm_critical_path_ps(), kComm);
  EXPECT_EQ(roofline.bound_ps(), 2000u);
  EXPECT_EQ(roofline.binding_resource(), "sip0.cube0.pe3.hbm");
}

TEST(RooflineTest, CommBindsOnlyWhenStrictlyLongerThanThePePart) {
  const std::vector<PeResourceUse> pes = {Pe(0, 1000, 0, 0, 0), Pe(1, 0, 0, 500, 0)};
  const pb::Roofline equal = ComputeRoofline(pes, 1000);
  EXPECT_EQ(equal.bound_ps(), 1000u);
  EXPECT_EQ(equal.binding_resource(), "sip0.cube0.pe0.hbm");
  const pb::Roofline longer = ComputeRoofline(pes, 1001);
  EXPECT_EQ(longer.bound_ps(), 1001u);
  EXPECT_EQ(longer.binding_resource(), "communication critical path");
}

TEST(RooflineTest, WithoutPesTheBoundIsTheCommunicationPathAlone) {
  EXPECT_EQ(ComputeRoofline({}, 0).binding_resource(), "");
  EXPECT_EQ(ComputeRoofline({}, 0).bound_ps(), 0u);
  EXPECT_EQ(ComputeRoofline({}, 5).binding_resource(), "communication critical path");
}

TEST(RooflineDeathTest, DuplicatePeIsABug) {
  EXPECT_DEATH(ComputeRoofline({Pe(1, 0, 0, 0, 0), Pe(1, 0, 0, 0, 0)}, 0), "appears twice");
}

TEST(RooflineTest, RatioIsLatencyOverBoundAndZeroWithoutABound) {
  EXPECT_DOUBLE_EQ(RooflineRatio(1500, 1000), 1.5);
  EXPECT_EQ(RooflineRatio(1500, 0), 0.0);
}

pb::Report SampleReport() {
  pb::Report report;
  report.set_topology_name("small");
  report.set_workload_summary("decode B=1 S=4096, G=8");
  report.set_issue_cost_profile("realistic");
  report.set_latency_ps(1234567);
  report.set_events(0);  // a zero that JSON must still print
  for (const pb::UnitStats& s : BuildUnitStats(Records(kOps), report.latency_ps(), KindOf)) {
    *report.add_units() = s;
  }
  *report.mutable_roofline() = ComputeRoofline({Pe(0, 1000, 500, 0, 0), Pe(1, 0, 0, 0, 0)}, 250);
  report.set_roofline_ratio(RooflineRatio(report.latency_ps(), report.roofline().bound_ps()));
  return report;
}

std::vector<std::string> Lines(const std::string& text) {
  EXPECT_EQ(text.back(), '\n');
  return absl::StrSplit(text.substr(0, text.size() - 1), '\n');
}

TEST(FormatReportTableTest, AllUnitsHeaderLinesUnitTableAndPeTable) {
  const pb::Report report = SampleReport();
  const std::string table = FormatReportTable(report, TableOptions{UnitRows::kAll});
  const std::vector<std::string> lines = Lines(table);
  const uint64_t latency = report.latency_ps();
  const uint64_t bound = report.roofline().bound_ps();
  ASSERT_GE(lines.size(), 7u);
  EXPECT_EQ(lines[0], "topology:  " + report.topology_name());
  EXPECT_EQ(lines[1], "workload:  " + report.workload_summary());
  EXPECT_EQ(lines[2], "profile:   " + report.issue_cost_profile());
  EXPECT_EQ(lines[3],
            absl::StrFormat("latency:   %d ps = %d.%03d ns = %d.%06d µs", latency, latency / 1000,
                            latency % 1000, latency / 1000000, latency % 1000000));
  EXPECT_EQ(lines[4], absl::StrCat("events:    ", report.events()));
  EXPECT_EQ(lines[5],
            absl::StrFormat("roofline:  bound %d ps = %d.%03d ns, ratio %.3f, binding %s", bound,
                            bound / 1000, bound % 1000, static_cast<double>(latency) / bound,
                            report.roofline().binding_resource()));
  EXPECT_EQ(lines[6], absl::StrCat("           communication critical path ",
                                   report.roofline().comm_critical_path_ps(), " ps"));
  EXPECT_EQ(lines[7], "");

  // Unit table: header + one row per unit, cells as expected, all lines equally long (the
  // last column is right-aligned), no trailing spaces anywhere.
  const size_t first = 8;
  const std::vector<std::string> header = absl::StrSplit(lines[first], ' ', absl::SkipEmpty());
  EXPECT_EQ(header, (std::vector<std::string>{"unit", "kind", "busy_ps", "util", "%", "bytes_read",
                                              "bytes_written", "flops", "ops"}));
  for (int u = 0; u < report.units_size(); ++u) {
    const pb::UnitStats& s = report.units(u);
    const std::string& line = lines[first + 1 + u];
    const std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    EXPECT_EQ(cells, (std::vector<std::string>{
                         s.unit_name(), s.kind(), absl::StrCat(s.busy_ps()),
                         absl::StrFormat("%.2f", 100.0 * s.busy_ps() / latency),
                         absl::StrCat(s.bytes_read()), absl::StrCat(s.bytes_written()),
                         absl::StrCat(s.flops()), absl::StrCat(s.ops())}));
    EXPECT_EQ(line.size(), lines[first].size());
  }
  const size_t pe_header = first + 1 + report.units_size() + 1;
  ASSERT_EQ(lines[pe_header - 1], "");
  EXPECT_THAT(lines[pe_header], HasSubstr("gemm_tile_plan_ps"));
  ASSERT_EQ(lines.size(), pe_header + 1 + report.roofline().pes_size());
  for (int p = 0; p < report.roofline().pes_size(); ++p) {
    const pb::PeRoofline& pe = report.roofline().pes(p);
    const std::vector<std::string> cells =
        absl::StrSplit(lines[pe_header + 1 + p], ' ', absl::SkipEmpty());
    EXPECT_EQ(cells, (std::vector<std::string>{
                         absl::StrCat(pe.pe()), absl::StrCat(pe.hbm_ps()),
                         absl::StrCat(pe.gemm_tile_plan_ps()), absl::StrCat(pe.gemm_peak_ps()),
                         absl::StrCat(pe.math_ps()), absl::StrCat(pe.cpu_issue_ps()),
                         absl::StrCat(pe.bound_ps()), pe.binding_resource()}));
  }
  for (const std::string& line : lines) {
    EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing space: '" << line << "'";
  }
}

// 13 units of two kinds (busy_ps with ties) and 12 PEs: the summary lists per kind, the 10
// busiest units and the 10 highest PE bounds.
pb::Report ManyUnitsReport() {
  pb::Report report = SampleReport();
  report.clear_units();
  report.set_latency_ps(1000);
  const uint64_t busy[13] = {100, 900, 300, 900, 60, 700, 0, 800, 200, 600, 400, 1000, 500};
  for (uint32_t u = 0; u < 13; ++u) {
    pb::UnitStats* s = report.add_units();
    s->set_unit(u);
    s->set_kind(u % 3 == 0 ? "gemm" : "dma");
    s->set_unit_name(absl::StrCat("u", u, ".", s->kind()));
    s->set_busy_ps(busy[u]);
    s->set_utilisation(busy[u] / 1000.0);
    s->set_bytes_read(u);
    s->set_bytes_written(2 * u);
    s->set_flops(u % 3 == 0 ? 100 : 0);
    s->set_ops(1);
  }
  std::vector<PeResourceUse> pes;
  for (uint32_t p = 0; p < 12; ++p) pes.push_back(Pe(p, (p * 7) % 12 * 100, 0, 0, 0));
  *report.mutable_roofline() = ComputeRoofline(pes, 0);
  return report;
}

TEST(FormatReportTableTest, SummaryPerKindTheBusiestUnitsAndTheHighestPeBounds) {
  const pb::Report report = ManyUnitsReport();
  const std::string table = FormatReportTable(report);
  EXPECT_EQ(FormatReportTable(report, TableOptions{}), table);  // summary is the default
  const std::vector<std::string> lines = Lines(table);
  ASSERT_EQ(lines.size(), 7u + 1 + 4 + 1 + 12 + 1 + 12);
  EXPECT_EQ(lines[7], "");
  EXPECT_EQ(lines[8],
            "unit kinds (13 units with ops; every unit: --units=all, --report_json, --report_csv):");
  const auto cells = [&](size_t i) -> std::vector<std::string> {
    return absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
  };
  EXPECT_EQ(cells(9), (std::vector<std::string>{"kind", "units", "util", "mean", "%", "util",
                                                "max", "%", "busiest", "bytes_read",
                                                "bytes_written", "flops", "ops"}));
  // gemm: units 0, 3, 6, 9, 12 (busy 100, 900, 0, 600, 500); dma: the other 8.
  EXPECT_EQ(cells(10), (std::vector<std::string>{"gemm", "5", "42.00", "90.00", "u3.gemm", "30",
                                                 "60", "500", "5"}));
  EXPECT_EQ(cells(11), (std::vector<std::string>{"dma", "8", "54.50", "100.00", "u11.dma", "48",
                                                 "96", "0", "8"}));
  EXPECT_EQ(lines[12], "");
  EXPECT_EQ(lines[13], "10 busiest units:");
  std::vector<std::string> names;
  for (size_t i = 15; i < 25; ++i) names.push_back(cells(i)[0]);
  // busy_ps descending; the tie at 900 in unit order (1 before 3).
  EXPECT_EQ(names, (std::vector<std::string>{"u11.dma", "u1.dma", "u3.gemm", "u7.dma", "u5.dma",
                                             "u9.gemm", "u12.gemm", "u10.dma", "u2.dma",
                                             "u8.dma"}));
  EXPECT_EQ(cells(15), (std::vector<std::string>{"u11.dma", "dma", "1000", "100.00", "11", "22",
                                                 "0", "1"}));
  EXPECT_EQ(lines[25], "");
  EXPECT_EQ(lines[26], "PE roofline, 10 highest bounds of 12 PEs:");
  EXPECT_THAT(lines[27], HasSubstr("gemm_tile_plan_ps"));
  std::vector<std::string> pes;
  for (size_t i = 28; i < 38; ++i) pes.push_back(cells(i)[0]);
  // hbm = (p * 7 % 12) * 100: 11 for p = 5, 10 for p = 10, ... 0 for p = 0 (left out).
  EXPECT_EQ(pes, (std::vector<std::string>{"5", "10", "3", "8", "1", "6", "11", "4", "9", "2"}));
  for (const std::string& line : lines) {
    EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing space: '" << line << "'";
  }
  // Fewer units than `busiest`: every one is listed.
  const std::string few = FormatReportTable(SampleReport(), TableOptions{UnitRows::kSummary, 10});
  EXPECT_THAT(few, HasSubstr("\n2 busiest units:\n"));
  EXPECT_THAT(few, HasSubstr("\nPE roofline, 2 highest bounds of 2 PEs:\n"));
}

TEST(ReportToCsvTest, HeaderThenOneRowPerUnit) {
  const pb::Report report = SampleReport();
  std::string want = "unit,unit_name,kind,busy_ps,utilisation,bytes_read,bytes_written,flops,ops\n";
  for (const pb::UnitStats& s : report.units()) {
    want += absl::StrFormat("%d,%s,%s,%d,%.6f,%d,%d,%d,%d\n", s.unit(), s.unit_name(), s.kind(),
                            s.busy_ps(), static_cast<double>(s.busy_ps()) / report.latency_ps(),
                            s.bytes_read(), s.bytes_written(), s.flops(), s.ops());
  }
  EXPECT_EQ(ReportToCsv(report), want);
}

TEST(ReportToCsvTest, QuotesFieldsThatNeedIt) {
  pb::Report report;
  pb::UnitStats* s = report.add_units();
  s->set_unit_name("a,\"b\"");
  EXPECT_THAT(ReportToCsv(report), HasSubstr(",\"a,\"\"b\"\"\","));
}

TEST(ReportToJsonTest, RoundTripsWithProtoFieldNamesAndZeros) {
  const pb::Report report = SampleReport();
  const std::string json = ReportToJson(report);
  EXPECT_THAT(json, HasSubstr("\"latency_ps\""));
  EXPECT_THAT(json, HasSubstr("\"comm_critical_path_ps\""));
  EXPECT_THAT(json, HasSubstr("\"events\": \"0\""));
  pb::Report parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, report))
      << parsed.DebugString() << "vs\n"
      << report.DebugString();
  EXPECT_EQ(ReportToJson(report), json);
}

}  // namespace
}  // namespace ahbm::observe
