// The run's op log (DESIGN §5): every TraceRecord of a run, header first, kept in memory in
// append order and optionally streamed length-delimited (proto/trace.proto). Plain C++, no CAF.
//
// Contract:
// - SetHeader must be the first call and is called exactly once; AddOp/AddIssue/AddStall
//   before it, or a second SetHeader, fail an AHBM_CHECK (our bug, not the user's).
// - AddOp overwrites OpRecord.seq with 0, 1, 2, ... in AddOp call order and returns it; issue
//   and stall records do not consume seq numbers.
// - ReserveOp takes the next seq and the next place in the log for an op record whose content
//   is known only later (a DMA command's: its channels answer after its issue, at the same
//   instant); FillOp(seq, op) puts the record there, with that seq. Records added while a
//   reservation is unfilled wait behind it (neither kept nor streamed yet); once it is
//   filled they follow in their order. records(), TakeRecords() and Flush() CHECK that every
//   reservation is filled.
// - records() holds exactly what was appended, in append order; with a stream, the stream gets
//   the same records in the same order, each written by SerializeDelimitedToOstream as it is
//   appended (a varint size, then the serialized TraceRecord). Flush() flushes the stream and
//   returns the first write error (sticky), if any.
// - A valid op log (what ReadOpLog accepts and WriteOpLogFile writes): record 0 is a header,
//   no later record is a header, every record has its oneof set, op records have
//   start_ps <= end_ps and stall records from_ps <= to_ps. ReadOpLog reports the first
//   violation, truncation or malformed record in one message naming the 0-based record index
//   and its byte offset. An empty stream is an error (no header).
// - Event order (island runs, Engine::SetIslands): between BeginEventOrder and EndEventOrder,
//   records are held with an order key (`key`: the engine's order_key, the largest event key
//   its island has delivered so far, 0 before the first event). EndEventOrder writes them
//   stably sorted by it: the single heap's order. Why: the heap always delivers the smallest
//   pending key, and an island's pending events are the same with or without the others, so the
//   one-heap run interleaves the islands' delivery sequences by repeatedly taking the smaller
//   next key (a merge; one island's sequence is not sorted: a zero-delay cascade may send from
//   a lower unit id); that merge equals a stable sort by each event's prefix maximum.
//   Op records get their seq then; AddOp returns 0 meanwhile and ReserveOp a handle for FillOp.
//   A streamed log is written at EndEventOrder (its records are held until then).
#ifndef AHBMSIM_ACTORS_OBSERVE_OP_LOG_H_
#define AHBMSIM_ACTORS_OBSERVE_OP_LOG_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/message.h"
#include "proto/trace.pb.h"

namespace ahbm::observe {

class OpLog {
 public:
  // In memory only.
  OpLog() = default;
  // Also streams every record to `stream` (not owned; must outlive the OpLog; may be null).
  // With keep_records = false only the header stays in memory (records() then holds just it):
  // for big runs whose records are only streamed, or not needed at all.
  explicit OpLog(std::ostream* stream, bool keep_records = true)
      : stream_(stream), keep_records_(keep_records) {}
  OpLog(const OpLog&) = delete;
  OpLog& operator=(const OpLog&) = delete;

  void SetHeader(pb::TraceHeader header);
  // Returns the seq assigned to `op`.
  uint64_t AddOp(pb::OpRecord op);
  // See the contract: the seq of the reserved record, and the record put there.
  uint64_t ReserveOp();
  void FillOp(uint64_t seq, pb::OpRecord op);
  void AddIssue(pb::IssueRecord issue);
  void AddStall(pb::StallRecord stall);
  // A recorded trace's instances and calls (kernels/runtime: ChipSimOptions::record_calls).
  void AddLaunch(pb::LaunchRecord launch);
  void AddInstance(pb::InstanceRecord instance);
  void AddCall(pb::CallRecord call);
  // A recorded trace's last record.
  void AddReport(pb::Report report);

  const std::vector<pb::TraceRecord>& records() const {
    CheckNoneHeld();
    return records_;
  }
  // Moves the records out (the log is empty afterwards; streaming is unaffected).
  std::vector<pb::TraceRecord> TakeRecords() {
    CheckNoneHeld();
    return std::move(records_);
  }
  uint64_t num_ops() const { return next_seq_; }
  // The header's per_tile_detail; CHECK-fails before SetHeader.
  bool per_tile_detail() const;

  // Flushes the stream (no-op without one); the first write error seen so far, or OK.
  [[nodiscard]] absl::Status Flush();

  // See the contract: hold records in event-key order from now on, then write them.
  using EventKey = unsigned __int128;
  void BeginEventOrder(std::function<EventKey()> key);
  void EndEventOrder();
  bool in_event_order() const { return static_cast<bool>(event_key_); }

 private:
  void Append(pb::TraceRecord record);
  // Keeps and streams `record` (Append's work once nothing holds it back).
  void Write(pb::TraceRecord record);
  void CheckNoneHeld() const;
  // Appends `r` as the TraceRecord field `field` returns.
  template <class R>
  void Add(R r, R* (pb::TraceRecord::*field)()) {
    pb::TraceRecord record;
    *(record.*field)() = std::move(r);
    Append(std::move(record));
  }

  std::ostream* stream_ = nullptr;
  bool keep_records_ = true;
  uint64_t appended_ = 0;  // records appended (kept or not)
  std::vector<pb::TraceRecord> records_;
  uint64_t next_seq_ = 0;
  // Records from the first unfilled reservation on, in order (a reservation: an op record
  // without `op` set yet), and the seq of each reservation's place.
  std::deque<pb::TraceRecord> held_;
  std::deque<uint64_t> held_seq_;  // parallel to held_: the op seq, or UINT64_MAX
  // Event order: the key source, and the records held with their event's key (a reservation is
  // an op record without `op`, its handle its index here).
  std::function<EventKey()> event_key_;
  struct Keyed {
    EventKey key;
    pb::TraceRecord record;
  };
  std::vector<Keyed> keyed_;
  absl::Status stream_status_;
};

// The trace schema this build writes and reads (TraceHeader.schema_version). 2: the header
// carries the chip, workload and digests of a recorded trace; Instance and Call records.
// 3: DMA pieces name their command, sends/receives their message, a recorded trace's issue,
// send and receive records their call; the report ends a recorded trace.
inline constexpr uint32_t kTraceSchemaVersion = 3;

// A message's digest (TraceHeader topology_digest / workload_digest): 16 hex digits of the
// 64-bit FNV-1a hash of its deterministic serialization.
std::string MessageDigest(const google::protobuf::Message& message);
// 64-bit FNV-1a of `bytes`, as 16 lower-case hex digits (MessageDigest's hash).
std::string BytesDigest(std::string_view bytes);

// Checks the op log invariants above (no I/O); InvalidArgument naming the record index.
[[nodiscard]] absl::Status ValidateOpLog(const std::vector<pb::TraceRecord>& records);

// Reads a length-delimited op log record by record (a stream: nothing but the current record is
// held). Next: true with the next record, false at the clean end, or the error ReadOpLog
// describes (naming the record index and byte offset); an empty stream is an error.
class OpLogReader {
 public:
  explicit OpLogReader(std::istream& in);
  absl::StatusOr<bool> Next(pb::TraceRecord& record);
  // The next record's serialized bytes, unparsed and unchecked (the framing errors only): for
  // readers that parse only some records. With `keep`, a record whose first byte (its oneof
  // field's tag) it rejects is skipped unread and `bytes` left empty (replay skips op records).
  absl::StatusOr<bool> NextBytes(std::string& bytes, bool (*keep)(char first) = nullptr);
  uint64_t records_read() const { return index_; }
  // "op log record 7 (byte offset 1234)": the last record read, for messages.
  std::string where() const;

 private:
  std::istream& in_;
  google::protobuf::io::IstreamInputStream input_;
  uint64_t index_ = 0;
  uint64_t record_index_ = 0;
  int64_t record_offset_ = 0;
  std::string bytes_;
};

// Reads a whole length-delimited op log. DataLoss on truncated or malformed input,
// InvalidArgument on an invariant violation.
[[nodiscard]] absl::StatusOr<std::vector<pb::TraceRecord>> ReadOpLog(std::istream& in);

// Writes `records` (validated first) length-delimited to `path`, replacing the file.
[[nodiscard]] absl::Status WriteOpLogFile(const std::string& path,
                                          const std::vector<pb::TraceRecord>& records);

// NotFound naming `path` when the file cannot be opened; otherwise as ReadOpLog, prefixed with
// the path.
[[nodiscard]] absl::StatusOr<std::vector<pb::TraceRecord>> ReadOpLogFile(const std::string& path);

}  // namespace ahbm::observe

#endif  // AHBMSIM_ACTORS_OBSERVE_OP_LOG_H_
