#include "actors/observe/chrome_trace.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/trace.pb.h"

namespace ahbm::observe {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::testing::HasSubstr;

pb::TraceRecord OpRecord(uint32_t unit, const std::string& unit_name, const std::string& op,
                         const std::string& label, uint64_t start_ps, uint64_t end_ps) {
  pb::TraceRecord record;
  pb::OpRecord* r = record.mutable_op();
  r->set_unit(unit);
  r->set_unit_name(unit_name);
  r->set_op(op);
  r->set_label(label);
  r->set_cmd_id(100 + unit);
  r->set_request_id(1);
  r->set_start_ps(start_ps);
  r->set_end_ps(end_ps);
  r->set_bytes_read(unit * 3);
  r->set_bytes_written(unit * 5);
  r->set_flops(unit * 7);
  return record;
}

pb::TraceRecord StallRecord(uint32_t pe, const std::string& waits_on, uint64_t from_ps,
                            uint64_t to_ps) {
  pb::TraceRecord record;
  pb::StallRecord* r = record.mutable_stall();
  r->set_pe(pe);
  r->set_waits_on(waits_on);
  r->set_cmd_id(17);
  r->set_request_id(2);
  r->set_from_ps(from_ps);
  r->set_to_ps(to_ps);
  return record;
}

// A waits_on text that needs every kind of JSON escape.
const char kNastyWait[] = "queue \"in.W\" \\ \n\t\x01 µ";

constexpr uint32_t kPe = 26;
const char kPeName[] = "sip0.cube3.pe2";

// Ops on a PE (overlapping DMA commands, a GEMM), a CUBE router and a channel of CUBE 10, a
// stall of the PE, and records that are not drawn.
std::vector<pb::TraceRecord> Records() {
  std::vector<pb::TraceRecord> records;
  pb::TraceRecord header;
  header.mutable_header()->set_topology_name("small");
  header.mutable_header()->set_issue_cost_profile("zero");
  header.mutable_header()->set_schema_version(3);
  records.push_back(header);
  records.push_back(OpRecord(20, "sip0.cube3.pe2.dma", "dma_read", "K(0)", 1000, 5000));
  records.push_back(OpRecord(20, "sip0.cube3.pe2.dma", "dma_read", "", 2000, 3000));
  records.push_back(OpRecord(21, "sip0.cube3.pe2.gemm", "composite_gemm", "", 5000, 7123457));
  records.push_back(OpRecord(90, "sip0.cube2.noc", "noc_hop", "", 0, 100));
  records.push_back(OpRecord(95, "sip0.cube10.hbm3", "hbm_read", "", 1, 2));
  records.push_back(OpRecord(20, "sip0.cube3.pe2.dma", "dma_write", "O", 5000, 6000));
  records.push_back(StallRecord(kPe, kNastyWait, 1500, 4000));
  pb::TraceRecord issue;
  issue.mutable_issue()->set_pe(kPe);
  records.push_back(issue);
  uint64_t seq = 0;
  for (pb::TraceRecord& record : records) {
    if (record.has_op()) record.mutable_op()->set_seq(seq++);
  }
  return records;
}

std::string NamePe(uint32_t pe) {
  AHBM_CHECK(pe == kPe) << "unexpected pe " << pe;
  return kPeName;
}

const Value& Field(const Struct& s, const std::string& name) {
  const auto it = s.fields().find(name);
  AHBM_CHECK(it != s.fields().end()) << "no field " << name;
  return it->second;
}

// The parsed trace: track names by pid / (pid, tid), and the X events.
struct Parsed {
  Struct root;
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  std::map<int, int> process_sort;
  std::map<std::pair<int, int>, int> thread_sort;
  std::vector<Struct> events;  // "X" events in output order
};

Parsed Parse(const std::string& json) {
  Parsed parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &parsed.root);
  AHBM_CHECK(status.ok()) << status.ToString() << "\n" << json;
  for (const Value& v : Field(parsed.root, "traceEvents").list_value().values()) {
    const Struct& e = v.struct_value();
    const std::string ph = Field(e, "ph").string_value();
    const int pid = static_cast<int>(Field(e, "pid").number_value());
    const int tid = static_cast<int>(Field(e, "tid").number_value());
    const std::string name = Field(e, "name").string_value();
    if (ph == "X") {
      parsed.events.push_back(e);
      continue;
    }
    AHBM_CHECK(ph == "M") << "phase " << ph;
    const Struct& args = Field(e, "args").struct_value();
    if (name == "process_name") parsed.process[pid] = Field(args, "name").string_value();
    if (name == "thread_name") parsed.thread[{pid, tid}] = Field(args, "name").string_value();
    if (name == "process_sort_index") {
      parsed.process_sort[pid] = static_cast<int>(Field(args, "sort_index").number_value());
    }
    if (name == "thread_sort_index") {
      parsed.thread_sort[{pid, tid}] = static_cast<int>(Field(args, "sort_index").number_value());
    }
  }
  return parsed;
}

// "process / thread" of an X event.
std::string TrackOf(const Parsed& parsed, const Struct& e) {
  const int pid = static_cast<int>(Field(e, "pid").number_value());
  const int tid = static_cast<int>(Field(e, "tid").number_value());
  return absl::StrCat(parsed.process.at(pid), " / ", parsed.thread.at({pid, tid}));
}

TEST(PeOrCubePrefixTest, PeUnitsCubeUnitsAndOthers) {
  EXPECT_EQ(PeOrCubePrefix("sip0.cube3.pe2.gemm"), "sip0.cube3.pe2");
  EXPECT_EQ(PeOrCubePrefix("sip0.cube3.pe2.ipcq.E"), "sip0.cube3.pe2");
  EXPECT_EQ(PeOrCubePrefix("sip0.cube3.pe2.cpu"), "sip0.cube3.pe2");
  EXPECT_EQ(PeOrCubePrefix("sip0.cube2.noc"), "sip0.cube2");
  EXPECT_EQ(PeOrCubePrefix("sip1.cube0.hbm12"), "sip1.cube0");
  EXPECT_EQ(PeOrCubePrefix("sip1.ucie"), "sip1");
  EXPECT_EQ(PeOrCubePrefix("sip0.cube3.pe2"), "sip0.cube3.pe2");
  EXPECT_EQ(PeOrCubePrefix("host"), "host");
  EXPECT_EQ(PeOrCubePrefix("sipX.cube1.pe0.dma"), "sipX.cube1.pe0.dma");
}

TEST(NaturalLessTest, DigitRunsCompareAsNumbers) {
  EXPECT_TRUE(NaturalLess("sip0.cube2", "sip0.cube10"));
  EXPECT_FALSE(NaturalLess("sip0.cube10", "sip0.cube2"));
  EXPECT_TRUE(NaturalLess("sip0.cube2", "sip0.cube2.pe0"));
  EXPECT_TRUE(NaturalLess("sip0.cube2.pe7", "sip0.cube3"));
  EXPECT_TRUE(NaturalLess("sip0.cube9.pe0", "sip1.cube0"));
  EXPECT_FALSE(NaturalLess("a", "a"));
  // Equal numbers with different leading zeros still get a strict order.
  EXPECT_NE(NaturalLess("pe01", "pe1"), NaturalLess("pe1", "pe01"));
}

TEST(ChromeTraceTest, ProcessesAndThreadsAreNumberedInTheDocumentedOrder) {
  const Parsed parsed = Parse(ChromeTraceJson(Records(), NamePe));
  const std::map<int, std::string> want_process = {
      {1, "sip0.cube2"}, {2, "sip0.cube3.pe2"}, {3, "sip0.cube10"}};
  EXPECT_EQ(parsed.process, want_process);
  const std::map<std::pair<int, int>, std::string> want_thread = {
      {{1, 1}, "noc"},    {{2, 1}, "cpu stalls"}, {{2, 2}, "dma"},
      {{2, 3}, "dma #1"}, {{2, 4}, "gemm"},       {{3, 1}, "hbm3"}};
  EXPECT_EQ(parsed.thread, want_thread);
  for (const auto& [pid, name] : want_process) EXPECT_EQ(parsed.process_sort.at(pid), pid);
  for (const auto& [key, name] : want_thread) EXPECT_EQ(parsed.thread_sort.at(key), key.second);
}

TEST(ChromeTraceTest, EachRecordBecomesOneCompleteEventOnItsTrack) {
  const std::vector<pb::TraceRecord> records = Records();
  const Parsed parsed = Parse(ChromeTraceJson(records, NamePe));

  // Expected track per drawn record, in record order. Overlap decides the DMA lane: record 2
  // starts inside record 1, record 6 starts exactly when record 1 ends.
  const std::vector<std::pair<size_t, std::string>> want = {
      {1, "sip0.cube3.pe2 / dma"},       {2, "sip0.cube3.pe2 / dma #1"},
      {3, "sip0.cube3.pe2 / gemm"},      {4, "sip0.cube2 / noc"},
      {5, "sip0.cube10 / hbm3"},         {6, "sip0.cube3.pe2 / dma"},
      {7, "sip0.cube3.pe2 / cpu stalls"}};
  ASSERT_EQ(parsed.events.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const pb::TraceRecord& record = records[want[i].first];
    const Struct& e = parsed.events[i];
    SCOPED_TRACE(absl::StrCat("record ", want[i].first));
    EXPECT_EQ(TrackOf(parsed, e), want[i].second);
    const Struct& args = Field(e, "args").struct_value();
    uint64_t start_ps = 0;
    uint64_t end_ps = 0;
    if (record.has_op()) {
      const pb::OpRecord& op = record.op();
      start_ps = op.start_ps();
      end_ps = op.end_ps();
      EXPECT_EQ(Field(e, "name").string_value(), op.label().empty() ? op.op() : op.label());
      EXPECT_EQ(Field(e, "cat").string_value(), "op");
      EXPECT_EQ(Field(args, "op").string_value(), op.op());
      EXPECT_EQ(Field(args, "seq").number_value(), static_cast<double>(op.seq()));
      EXPECT_EQ(Field(args, "cmd_id").number_value(), static_cast<double>(op.cmd_id()));
      EXPECT_EQ(Field(args, "bytes_read").number_value(), static_cast<double>(op.bytes_read()));
      EXPECT_EQ(Field(args, "bytes_written").number_value(),
                static_cast<double>(op.bytes_written()));
      EXPECT_EQ(Field(args, "flops").number_value(), static_cast<double>(op.flops()));
    } else {
      const pb::StallRecord& stall = record.stall();
      start_ps = stall.from_ps();
      end_ps = stall.to_ps();
      EXPECT_EQ(Field(e, "name").string_value(), stall.waits_on());
      EXPECT_EQ(Field(e, "cat").string_value(), "stall");
      EXPECT_EQ(Field(args, "cmd_id").number_value(), static_cast<double>(stall.cmd_id()));
    }
    EXPECT_EQ(Field(e, "ts").number_value(), static_cast<double>(start_ps) / 1e6);
    EXPECT_EQ(Field(e, "dur").number_value(), static_cast<double>(end_ps - start_ps) / 1e6);
  }
}

TEST(ChromeTraceTest, TimesArePrintedExactlyToThePicosecond) {
  const std::vector<pb::TraceRecord> records = Records();
  const std::string json = ChromeTraceJson(records, NamePe);
  for (const pb::TraceRecord& record : records) {
    if (!record.has_op()) continue;
    const uint64_t start = record.op().start_ps();
    const uint64_t dur = record.op().end_ps() - start;
    EXPECT_THAT(json, HasSubstr(absl::StrFormat("\"ts\":%d.%06d,\"dur\":%d.%06d", start / 1000000,
                                                start % 1000000, dur / 1000000, dur % 1000000)));
  }
}

TEST(ChromeTraceTest, HeaderGoesToOtherData) {
  const std::vector<pb::TraceRecord> records = Records();
  const Parsed parsed = Parse(ChromeTraceJson(records, NamePe));
  const Struct& other = Field(parsed.root, "otherData").struct_value();
  EXPECT_EQ(Field(other, "topology_name").string_value(), records[0].header().topology_name());
  EXPECT_EQ(Field(other, "issue_cost_profile").string_value(),
            records[0].header().issue_cost_profile());
  EXPECT_EQ(Field(parsed.root, "displayTimeUnit").string_value(), "ns");
}

TEST(ChromeTraceTest, StallsWithoutANamerGoOnAProcessNamedByPeIndex) {
  const Parsed parsed = Parse(ChromeTraceJson(Records()));
  const Struct& stall = parsed.events.back();
  EXPECT_EQ(TrackOf(parsed, stall), absl::StrCat("pe", kPe, " / cpu stalls"));
}

TEST(ChromeTraceTest, DeterministicAndEmptyInputIsValid) {
  EXPECT_EQ(ChromeTraceJson(Records(), NamePe), ChromeTraceJson(Records(), NamePe));
  const Parsed empty = Parse(ChromeTraceJson({}));
  EXPECT_TRUE(empty.events.empty());
  EXPECT_TRUE(empty.process.empty());
}

}  // namespace
}  // namespace ahbm::observe
