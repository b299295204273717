#include "actors/observe/op_log.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/delimited_message_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/trace.pb.h"

namespace ahbm::observe {
namespace {

using ::testing::HasSubstr;

pb::TraceHeader Header(bool per_tile_detail) {
  pb::TraceHeader header;
  header.set_schema_version(1);
  header.set_topology_name("small");
  header.set_topology_digest("abc123");
  header.set_workload_digest("def456");
  header.set_issue_cost_profile("realistic");
  header.set_per_tile_detail(per_tile_detail);
  return header;
}

pb::OpRecord Op(uint32_t unit, const std::string& name, uint64_t start_ps, uint64_t end_ps) {
  pb::OpRecord op;
  op.set_seq(999);  // overwritten by AddOp
  op.set_unit(unit);
  op.set_unit_name(name);
  op.set_op("dma_read");
  op.set_cmd_id(7);
  op.set_issue_ps(start_ps);
  op.set_start_ps(start_ps);
  op.set_end_ps(end_ps);
  op.set_bytes_read(4096);
  op.add_depends_on(3);
  op.add_depends_on(5);
  op.set_label("K(0)");
  return op;
}

pb::IssueRecord Issue() {
  pb::IssueRecord issue;
  issue.set_pe(2);
  issue.set_request_id(1);
  issue.set_cmd_id(7);
  issue.set_issue_ps(100);
  issue.add_depends_on(3);
  issue.set_blocking(true);
  issue.mutable_dma();
  return issue;
}

pb::StallRecord Stall() {
  pb::StallRecord stall;
  stall.set_pe(2);
  stall.set_request_id(1);
  stall.set_waits_on("cmd 7");
  stall.set_cmd_id(7);
  stall.set_from_ps(100);
  stall.set_to_ps(900);
  return stall;
}

// A header, three ops, an issue and a stall, interleaved.
void Fill(OpLog& log) {
  log.SetHeader(Header(/*per_tile_detail=*/true));
  log.AddOp(Op(10, "sip0.cube0.pe2.dma", 0, 500));
  log.AddIssue(Issue());
  log.AddOp(Op(10, "sip0.cube0.pe2.dma", 200, 900));
  log.AddStall(Stall());
  log.AddOp(Op(11, "sip0.cube0.pe2.gemm", 900, 1000));
}

void ExpectSameRecords(const std::vector<pb::TraceRecord>& got,
                       const std::vector<pb::TraceRecord>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got[i], want[i]))
        << "record " << i << ":\n"
        << got[i].DebugString() << "vs\n"
        << want[i].DebugString();
  }
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

TEST(OpLogTest, AssignsSeqInAppendOrderAndKeepsRecordOrder) {
  OpLog log;
  log.SetHeader(Header(/*per_tile_detail=*/false));
  EXPECT_EQ(log.AddOp(Op(10, "a", 0, 1)), 0u);
  log.AddIssue(Issue());
  EXPECT_EQ(log.AddOp(Op(10, "a", 1, 2)), 1u);
  log.AddStall(Stall());
  EXPECT_EQ(log.AddOp(Op(11, "b", 2, 3)), 2u);
  EXPECT_EQ(log.num_ops(), 3u);
  EXPECT_FALSE(log.per_tile_detail());

  const std::vector<pb::TraceRecord>& records = log.records();
  ASSERT_EQ(records.size(), 6u);
  EXPECT_TRUE(records[0].has_header());
  EXPECT_EQ(records[1].op().seq(), 0u);
  EXPECT_TRUE(records[2].has_issue());
  EXPECT_EQ(records[3].op().seq(), 1u);
  EXPECT_TRUE(records[4].has_stall());
  EXPECT_EQ(records[5].op().seq(), 2u);
  EXPECT_EQ(records[5].op().unit_name(), "b");
}

// A reserved op keeps its place and seq; what comes after it waits (also on the stream) until
// it is filled, and two reservations may be filled in either order.
TEST(OpLogTest, AReservedOpKeepsItsPlaceAndHoldsBackWhatFollows) {
  std::ostringstream stream;
  OpLog log(&stream);
  log.SetHeader(Header(/*per_tile_detail=*/false));
  const size_t header_bytes = stream.str().size();
  EXPECT_EQ(log.AddOp(Op(10, "a", 0, 1)), 0u);
  const uint64_t first = log.ReserveOp();
  const uint64_t second = log.ReserveOp();
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(second, 2u);
  EXPECT_EQ(log.AddOp(Op(11, "b", 1, 2)), 3u);
  log.AddIssue(Issue());
  const size_t before_fill = stream.str().size();
  EXPECT_GT(before_fill, header_bytes);  // op 0 was streamed
  log.FillOp(second, Op(12, "d", 0, 5));
  EXPECT_EQ(stream.str().size(), before_fill);  // op 1 is still missing: nothing more written
  log.FillOp(first, Op(12, "c", 0, 4));

  const std::vector<pb::TraceRecord>& records = log.records();
  ASSERT_EQ(records.size(), 6u);
  EXPECT_EQ(records[1].op().seq(), 0u);
  EXPECT_EQ(records[2].op().seq(), 1u);
  EXPECT_EQ(records[2].op().unit_name(), "c");
  EXPECT_EQ(records[3].op().seq(), 2u);
  EXPECT_EQ(records[3].op().unit_name(), "d");
  EXPECT_EQ(records[4].op().seq(), 3u);
  EXPECT_EQ(records[4].op().unit_name(), "b");
  EXPECT_TRUE(records[5].has_issue());
  ASSERT_TRUE(log.Flush().ok());
  std::istringstream in(stream.str());
  absl::StatusOr<std::vector<pb::TraceRecord>> read = ReadOpLog(in);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameRecords(*read, records);
}

// Island runs: records added island by island come out by their order key (records of one
// event in the order added), op seqs numbered in that order, reservations filled in place; the
// stream gets them at EndEventOrder, records added before it (key 0) first.
TEST(OpLogTest, EventOrderWritesRecordsStablySortedByOrderKey) {
  std::ostringstream stream;
  OpLog log(&stream);
  log.SetHeader(Header(/*per_tile_detail=*/false));
  OpLog::EventKey key = 0;
  log.BeginEventOrder([&key] { return key; });
  EXPECT_TRUE(log.in_event_order());
  log.AddIssue(Issue());  // key 0: before any event
  key = 10;               // island 0's order keys: 10, 30
  const uint64_t handle = log.ReserveOp();
  log.AddOp(Op(1, "a10", 0, 1));
  key = 30;
  log.AddOp(Op(1, "a30", 0, 1));
  key = 20;  // island 1's order keys: 20, 40
  log.AddOp(Op(2, "b20 first", 0, 1));
  log.AddOp(Op(2, "b20 second", 0, 1));
  key = 40;
  log.AddOp(Op(2, "b40", 0, 1));
  log.FillOp(handle, Op(1, "a10 reserved", 0, 2));
  const size_t header_bytes = stream.str().size();
  log.EndEventOrder();
  EXPECT_FALSE(log.in_event_order());
  EXPECT_GT(stream.str().size(), header_bytes);  // written at the end
  log.AddOp(Op(3, "after", 0, 1));

  const std::vector<pb::TraceRecord>& records = log.records();
  std::vector<std::string> names;
  for (size_t i = 2; i < records.size(); ++i) {
    EXPECT_EQ(records[i].op().seq(), i - 2) << i;
    names.push_back(records[i].op().unit_name());
  }
  EXPECT_TRUE(records[1].has_issue());
  EXPECT_EQ(names, (std::vector<std::string>{"a10 reserved", "a10", "b20 first", "b20 second",
                                             "a30", "b40", "after"}));
  EXPECT_EQ(log.num_ops(), 7u);
  ASSERT_TRUE(log.Flush().ok());
  std::istringstream in(stream.str());
  absl::StatusOr<std::vector<pb::TraceRecord>> read = ReadOpLog(in);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameRecords(*read, records);
}

TEST(OpLogDeathTest, EventOrderNeedsItsEndAndEveryReservationFilled) {
  OpLog log;
  log.SetHeader(Header(false));
  log.BeginEventOrder([] { return OpLog::EventKey{5}; });
  log.ReserveOp();
  EXPECT_DEATH(log.records(), "held in event order");
  EXPECT_DEATH(log.EndEventOrder(), "a reserved op record was never filled");
}

TEST(OpLogTest, PerTileDetailComesFromTheHeader) {
  OpLog log;
  log.SetHeader(Header(/*per_tile_detail=*/true));
  EXPECT_TRUE(log.per_tile_detail());
}

TEST(OpLogTest, StreamRoundTrip) {
  std::stringstream stream;
  OpLog log(&stream);
  Fill(log);
  ASSERT_TRUE(log.Flush().ok());

  absl::StatusOr<std::vector<pb::TraceRecord>> read = ReadOpLog(stream);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameRecords(*read, log.records());
}

TEST(OpLogTest, StreamIsExactlyTheDelimitedRecords) {
  std::ostringstream stream;
  OpLog log(&stream);
  Fill(log);
  ASSERT_TRUE(log.Flush().ok());
  std::ostringstream want;
  for (const pb::TraceRecord& record : log.records()) {
    const std::string bytes = record.SerializeAsString();
    // Each record here is shorter than 128 bytes: a one-byte varint length.
    ASSERT_LT(bytes.size(), 128u);
    want << static_cast<char>(bytes.size()) << bytes;
  }
  EXPECT_EQ(stream.str(), want.str());
}

TEST(OpLogTest, FileRoundTrip) {
  OpLog log;
  Fill(log);
  const std::string path = TempPath("round_trip.oplog");
  ASSERT_TRUE(WriteOpLogFile(path, log.records()).ok());
  absl::StatusOr<std::vector<pb::TraceRecord>> read = ReadOpLogFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameRecords(*read, log.records());
}

TEST(OpLogTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = TempPath("no_such_dir/missing.oplog");
  absl::StatusOr<std::vector<pb::TraceRecord>> read = ReadOpLogFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));
}

TEST(OpLogTest, TruncatedStreamNamesTheRecord) {
  std::ostringstream stream;
  OpLog log(&stream);
  Fill(log);
  ASSERT_TRUE(log.Flush().ok());
  const std::string full = stream.str();
  const size_t last = log.records().size() - 1;
  const size_t last_size = log.records()[last].ByteSizeLong();
  // Every byte of the last record's body but one: its length prefix promises more.
  const size_t last_offset = full.size() - last_size - 1;
  std::istringstream truncated(full.substr(0, full.size() - 1));
  absl::StatusOr<std::vector<pb::TraceRecord>> read = ReadOpLog(truncated);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr(absl::StrCat("record ", last, " (byte offset ", last_offset, ")")));
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("truncated"));
}

TEST(OpLogTest, TruncatedFileNamesPathAndRecord) {
  OpLog log;
  Fill(log);
  const std::string path = TempPath("truncated.oplog");
  ASSERT_TRUE(WriteOpLogFile(path, log.records()).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes.substr(0, bytes.size() - 3);
  }
  absl::StatusOr<std::vector<pb::TraceRecord>> read = ReadOpLogFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr(absl::StrCat("record ", log.records().size() - 1)));
}

TEST(OpLogTest, GarbledRecordIsMalformed) {
  std::ostringstream stream;
  OpLog log(&stream);
  log.SetHeader(Header(/*per_tile_detail=*/false));
  ASSERT_TRUE(log.Flush().ok());
  // Record 1: 3 bytes of field 1 (header) as a length-delimited field claiming 100 bytes.
  const std::string garbled = stream.str() + std::string("\x03\x0a\x64\x00", 4);
  std::istringstream in(garbled);
  absl::StatusOr<std::vector<pb::TraceRecord>> read = ReadOpLog(in);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("record 1"));
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("malformed"));
}

TEST(OpLogTest, ReaderRejectsALogWithoutHeaderFirst) {
  pb::TraceRecord op;
  *op.mutable_op() = Op(10, "a", 0, 1);
  std::stringstream stream;
  ASSERT_TRUE(google::protobuf::util::SerializeDelimitedToOstream(op, &stream));
  absl::StatusOr<std::vector<pb::TraceRecord>> read = ReadOpLog(stream);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("record 0"));
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("header must come first"));
}

TEST(OpLogTest, ReaderRejectsAnEmptyStream) {
  std::istringstream empty;
  EXPECT_EQ(ReadOpLog(empty).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OpLogTest, ValidateRejectsSecondHeaderAndBackwardsOps) {
  OpLog log;
  Fill(log);
  std::vector<pb::TraceRecord> records = log.records();
  ASSERT_TRUE(ValidateOpLog(records).ok());

  std::vector<pb::TraceRecord> two_headers = records;
  two_headers.push_back(records[0]);
  EXPECT_THAT(std::string(ValidateOpLog(two_headers).message()),
              HasSubstr(absl::StrCat("record ", records.size(), " is a second header")));

  std::vector<pb::TraceRecord> backwards = records;
  backwards[1].mutable_op()->set_start_ps(backwards[1].op().end_ps() + 1);
  EXPECT_THAT(std::string(ValidateOpLog(backwards).message()), HasSubstr("record 1"));
  EXPECT_FALSE(WriteOpLogFile(TempPath("backwards.oplog"), backwards).ok());
}

TEST(OpLogDeathTest, RecordBeforeHeaderIsABug) {
  EXPECT_DEATH(
      {
        OpLog log;
        log.AddOp(Op(10, "a", 0, 1));
      },
      "header must be first");
}

TEST(OpLogDeathTest, SecondHeaderIsABug) {
  EXPECT_DEATH(
      {
        OpLog log;
        log.SetHeader(Header(/*per_tile_detail=*/false));
        log.SetHeader(Header(/*per_tile_detail=*/false));
      },
      "first and only header");
}

}  // namespace
}  // namespace ahbm::observe
