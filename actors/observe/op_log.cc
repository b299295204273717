#include "actors/observe/op_log.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/errors.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/delimited_message_util.h"

namespace ahbm::observe {
namespace {

const char* RecordKindName(pb::TraceRecord::RecordCase record_case) {
  switch (record_case) {
    case pb::TraceRecord::kHeader:
      return "header";
    case pb::TraceRecord::kOp:
      return "op";
    case pb::TraceRecord::kIssue:
      return "issue";
    case pb::TraceRecord::kStall:
      return "stall";
    case pb::TraceRecord::kInstance:
      return "instance";
    case pb::TraceRecord::kCall:
      return "call";
    case pb::TraceRecord::kLaunch:
      return "launch";
    case pb::TraceRecord::kReport:
      return "report";
    case pb::TraceRecord::RECORD_NOT_SET:
      return "empty";
  }
  return "?";
}

// The invariant violation of record `index`, as a message without location, or "".
std::string RecordProblem(const pb::TraceRecord& record, size_t index) {
  const pb::TraceRecord::RecordCase kind = record.record_case();
  if (kind == pb::TraceRecord::RECORD_NOT_SET) return "has no record set";
  if (index == 0 && kind != pb::TraceRecord::kHeader) {
    return absl::StrCat("is a '", RecordKindName(kind), "' record; the header must come first");
  }
  if (index > 0 && kind == pb::TraceRecord::kHeader) return "is a second header";
  if (kind == pb::TraceRecord::kOp && record.op().end_ps() < record.op().start_ps()) {
    return absl::StrCat("(op seq ", record.op().seq(), ") ends at ", record.op().end_ps(),
                        " ps before it starts at ", record.op().start_ps(), " ps");
  }
  if (kind == pb::TraceRecord::kStall && record.stall().to_ps() < record.stall().from_ps()) {
    return absl::StrCat("(stall) ends at ", record.stall().to_ps(), " ps before it starts at ",
                        record.stall().from_ps(), " ps");
  }
  return "";
}

absl::Status OpenError(const std::string& what, const std::string& path, int error_number,
                       absl::StatusCode fallback) {
  const std::string message = absl::StrCat("cannot open op log file '", path, "' ", what);
  if (error_number == 0) return absl::Status(fallback, message);
  return absl::ErrnoToStatus(error_number, message);
}

}  // namespace

void OpLog::SetHeader(pb::TraceHeader header) {
  AHBM_CHECK(records_.empty()) << "OpLog::SetHeader called after " << records_.size()
                               << " records: the header must be the first and only header";
  pb::TraceRecord record;
  *record.mutable_header() = std::move(header);
  Append(std::move(record));
}

uint64_t OpLog::AddOp(pb::OpRecord op) {
  if (event_key_) {  // numbered at EndEventOrder
    pb::TraceRecord record;
    *record.mutable_op() = std::move(op);
    Append(std::move(record));
    return 0;
  }
  const uint64_t seq = next_seq_++;
  op.set_seq(seq);
  pb::TraceRecord record;
  *record.mutable_op() = std::move(op);
  Append(std::move(record));
  return seq;
}

uint64_t OpLog::ReserveOp() {
  AHBM_CHECK(appended_ > 0) << "OpLog: an op record was reserved before SetHeader";
  if (event_key_) {
    keyed_.push_back(Keyed{event_key_(), pb::TraceRecord()});
    return keyed_.size() - 1;
  }
  const uint64_t seq = next_seq_++;
  held_.emplace_back();
  held_seq_.push_back(seq);
  return seq;
}

void OpLog::FillOp(uint64_t seq, pb::OpRecord op) {
  if (event_key_) {
    AHBM_CHECK(seq < keyed_.size() && !keyed_[seq].record.has_op() &&
               keyed_[seq].record.record_case() == pb::TraceRecord::RECORD_NOT_SET)
        << "OpLog: op handle " << seq << " was not reserved or is filled twice";
    *keyed_[seq].record.mutable_op() = std::move(op);
    return;
  }
  size_t i = 0;
  while (i < held_seq_.size() && held_seq_[i] != seq) ++i;
  AHBM_CHECK(i < held_seq_.size() && !held_[i].has_op())
      << "OpLog: op " << seq << " was not reserved or is filled twice";
  op.set_seq(seq);
  *held_[i].mutable_op() = std::move(op);
  while (!held_.empty() && (held_seq_.front() == UINT64_MAX || held_.front().has_op())) {
    pb::TraceRecord record = std::move(held_.front());
    held_.pop_front();
    held_seq_.pop_front();
    Write(std::move(record));
  }
}

void OpLog::CheckNoneHeld() const {
  AHBM_CHECK(!event_key_) << "OpLog: records are held in event order (EndEventOrder not called)";
  AHBM_CHECK(held_.empty()) << "OpLog: " << held_.size()
                            << " records wait behind an unfilled op reservation";
}

void OpLog::AddIssue(pb::IssueRecord issue) { Add(std::move(issue), &pb::TraceRecord::mutable_issue); }

void OpLog::AddStall(pb::StallRecord stall) { Add(std::move(stall), &pb::TraceRecord::mutable_stall); }

void OpLog::AddInstance(pb::InstanceRecord instance) { Add(std::move(instance), &pb::TraceRecord::mutable_instance); }

void OpLog::AddLaunch(pb::LaunchRecord launch) { Add(std::move(launch), &pb::TraceRecord::mutable_launch); }

void OpLog::AddCall(pb::CallRecord call) { Add(std::move(call), &pb::TraceRecord::mutable_call); }
void OpLog::AddReport(pb::Report report) { Add(std::move(report), &pb::TraceRecord::mutable_report); }

std::string MessageDigest(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return BytesDigest(bytes);
}

std::string BytesDigest(std::string_view bytes) {
  uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

bool OpLog::per_tile_detail() const {
  AHBM_CHECK(!records_.empty()) << "OpLog::per_tile_detail before SetHeader";
  return records_.front().header().per_tile_detail();
}

void OpLog::Append(pb::TraceRecord record) {
  AHBM_CHECK(appended_ > 0 || record.has_header())
      << "OpLog: a '" << RecordKindName(record.record_case())
      << "' record was added before SetHeader; the header must be first";
  if (event_key_) {
    keyed_.push_back(Keyed{event_key_(), std::move(record)});
    return;
  }
  if (!held_.empty()) {
    held_.push_back(std::move(record));
    held_seq_.push_back(UINT64_MAX);
    return;
  }
  Write(std::move(record));
}

void OpLog::Write(pb::TraceRecord record) {
  if (stream_ != nullptr && stream_status_.ok() &&
      !google::protobuf::util::SerializeDelimitedToOstream(record, stream_)) {
    stream_status_ = absl::DataLossError(
        absl::StrCat("writing op log record ", appended_, " to the stream failed"));
  }
  ++appended_;
  if (keep_records_ || record.has_header()) records_.push_back(std::move(record));
}

void OpLog::BeginEventOrder(std::function<EventKey()> key) {
  AHBM_CHECK(appended_ > 0) << "OpLog::BeginEventOrder before SetHeader";
  AHBM_CHECK(!event_key_ && held_.empty()) << "OpLog::BeginEventOrder: already ordering, or "
                                           << held_.size() << " records held";
  event_key_ = std::move(key);
}

void OpLog::EndEventOrder() {
  AHBM_CHECK(event_key_) << "OpLog::EndEventOrder without BeginEventOrder";
  event_key_ = nullptr;
  std::vector<Keyed> keyed = std::move(keyed_);
  keyed_.clear();
  std::vector<uint32_t> order(keyed.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&keyed](uint32_t a, uint32_t b) { return keyed[a].key < keyed[b].key; });
  for (uint32_t i : order) {
    pb::TraceRecord& record = keyed[i].record;
    AHBM_CHECK(record.record_case() != pb::TraceRecord::RECORD_NOT_SET)
        << "OpLog::EndEventOrder: a reserved op record was never filled";
    if (record.has_op()) record.mutable_op()->set_seq(next_seq_++);
    Write(std::move(record));
  }
}

absl::Status OpLog::Flush() {
  CheckNoneHeld();
  if (stream_ != nullptr && stream_status_.ok() && !stream_->flush()) {
    stream_status_ = absl::DataLossError("flushing the op log stream failed");
  }
  return stream_status_;
}

absl::Status ValidateOpLog(const std::vector<pb::TraceRecord>& records) {
  if (records.empty()) return absl::InvalidArgumentError("op log is empty: it has no header");
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string problem = RecordProblem(records[i], i);
    if (!problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("op log record ", i, " ", problem));
    }
  }
  return absl::OkStatus();
}

OpLogReader::OpLogReader(std::istream& in) : in_(in), input_(&in) {}

std::string OpLogReader::where() const {
  return absl::StrCat("op log record ", record_index_, " (byte offset ", record_offset_, ")");
}

absl::StatusOr<bool> OpLogReader::NextBytes(std::string& bytes, bool (*keep)(char first)) {
  // Bytes consumed so far: each CodedInputStream backs up what it buffered but did not read.
  record_offset_ = input_.ByteCount();
  record_index_ = index_;
  google::protobuf::io::CodedInputStream coded(&input_);
  const void* data = nullptr;
  int available = 0;
  if (!coded.GetDirectBufferPointer(&data, &available)) {  // clean end of stream
    if (in_.bad()) {
      return absl::DataLossError(absl::StrCat("op log: read error after ", index_, " records"));
    }
    if (index_ == 0) return absl::InvalidArgumentError("op log is empty: it has no header");
    return false;
  }
  uint32_t size = 0;
  if (!coded.ReadVarint32(&size)) {
    return absl::DataLossError(absl::StrCat(where(), ": truncated or malformed length prefix"));
  }
  if (size > static_cast<uint32_t>(INT_MAX)) {
    return absl::DataLossError(absl::StrCat(where(), ": malformed length prefix ", size));
  }
  const auto truncated = [&] {
    return absl::DataLossError(absl::StrCat(where(), ": truncated: its length prefix says ", size,
                                            " bytes but the stream ends first"));
  };
  bytes.clear();
  if (keep != nullptr && size > 0 && coded.GetDirectBufferPointer(&data, &available) &&
      !keep(*static_cast<const char*>(data))) {
    if (!coded.Skip(static_cast<int>(size))) return truncated();
  } else if (!coded.ReadString(&bytes, static_cast<int>(size))) {
    return truncated();
  }
  ++index_;
  return true;
}

absl::StatusOr<bool> OpLogReader::Next(pb::TraceRecord& record) {
  absl::StatusOr<bool> more = NextBytes(bytes_);
  if (!more.ok() || !*more) return more;
  record.Clear();
  if (!record.ParseFromString(bytes_)) {
    return absl::DataLossError(absl::StrCat(where(), ": malformed: its ", bytes_.size(),
                                            " bytes are not a TraceRecord"));
  }
  const std::string problem = RecordProblem(record, index_ - 1);
  if (!problem.empty()) return absl::InvalidArgumentError(absl::StrCat(where(), " ", problem));
  return true;
}

absl::StatusOr<std::vector<pb::TraceRecord>> ReadOpLog(std::istream& in) {
  std::vector<pb::TraceRecord> records;
  OpLogReader reader(in);
  while (true) {
    pb::TraceRecord record;
    absl::StatusOr<bool> more = reader.Next(record);
    RETURN_IF_ERROR(more.status());
    if (!*more) return records;
    records.push_back(std::move(record));
  }
}

absl::Status WriteOpLogFile(const std::string& path, const std::vector<pb::TraceRecord>& records) {
  if (absl::Status valid = ValidateOpLog(records); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not writing op log file '", path, "': ", valid.message()));
  }
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out.is_open()) {
    return OpenError("for writing", path, errno, absl::StatusCode::kUnavailable);
  }
  for (size_t i = 0; i < records.size(); ++i) {
    if (!google::protobuf::util::SerializeDelimitedToOstream(records[i], &out)) {
      return absl::DataLossError(
          absl::StrCat("writing record ", i, " to op log file '", path, "' failed"));
    }
  }
  out.close();
  if (out.fail()) {
    return absl::DataLossError(absl::StrCat("closing op log file '", path, "' failed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<pb::TraceRecord>> ReadOpLogFile(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) return OpenError("for reading", path, errno, absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<pb::TraceRecord>> records = ReadOpLog(in);
  if (!records.ok()) {
    return Annotate(records.status(), absl::StrCat(path, ": "));
  }
  return records;
}

}  // namespace ahbm::observe
