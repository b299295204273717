// Replay of a recorded trace (DESIGN §5; `ahbm run --trace=F` records, `ahbm replay` replays):
// every kernel instance's recorded `tl` calls run again on the PE CPUs, without kernel code.
//
// Contract:
// - ReadTrace reads the trace as a stream (observe::OpLogReader, one record at a time) and keeps
//   only what replay needs: the header (schema 2, with the chip, the workload and the CUBEs
//   simulated), the LaunchRecord, the InstanceRecords and each instance's CallRecords. Op,
//   issue and stall records are skipped. Errors are one line, InvalidArgument unless the file
//   is cut short or malformed (DataLoss): another schema version ("schema_version: ..."), a
//   header whose chip fails topology Validate ("<where>: the header's chip: ..."), a
//   trace without calls (an op log of a run without --trace, or of a build before schema 2),
//   a call of an unknown instance, calls out of order. Calls stay serialized until replayed.
// - Replay simulates the trace on its own chip, or on `chip` with the recorded workload's
//   max_inflight_composites applied as a run does (launch::WorkloadChip; a what-if: any timing number may
//   differ; the geometry the streams need — SIPs, CUBE mesh, PE mesh, channels per PE — must
//   not: InvalidArgument "topology: ..."), with the trace's issue-cost profile unless one is
//   given. Each instance replays its calls in order through Tl::Replay: issue times come from
//   the simulation (dependencies, waits, issue costs), never from the recording; scratch
//   scopes close where they closed; a recorded kernel error stops the instance there. On the
//   same chip the op log and the report equal the recorded run's.
// - The report's workload line and the LaunchResult extras come from the LaunchRecord; the
//   roofline's communication critical path is its legs (comm_hops) priced on the replay's chip,
//   so a what-if's roofline is that chip's (launch::CommCriticalPathPs).
// - A trace whose instances have no call is refused (InvalidArgument "trace: ... no call to
//   replay"), never reported as 0 cycles.
// - Without an op log (keep_op_log false, no trace_out) the run is split into the recorded
//   launch's islands (LaunchRecord.cube_sets, as `ahbm run` does).
// - A call's references (inputs, wait) are checked when its instance reaches it: a bad one
//   stops the replay with InvalidArgument naming the instance and call.
// - A replayed command the PE refuses is the input's error (base/errors.h: exit 2), as the
//   trace is; a recorded kernel error replays as the kernel fault it was.
#ifndef AHBMSIM_KERNELS_REPLAY_REPLAY_H_
#define AHBMSIM_KERNELS_REPLAY_REPLAY_H_

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/launch/launch.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::replay {

struct RecordedTrace {
  pb::TraceHeader header;
  pb::LaunchRecord launch;
  std::vector<pb::InstanceRecord> instances;              // by instance number
  // The calls, serialized (pb::CallRecord) back to back in `call_bytes`: a full-chip trace
  // has millions, and parsed messages would take several times the memory (replay parses
  // each into one reused message as its instance reaches it).
  struct CallSpan {
    uint64_t offset = 0;
    uint32_t size = 0;
  };
  std::string call_bytes;
  std::vector<std::vector<CallSpan>> calls;  // by instance, in call order
  uint64_t total_calls = 0;
  std::optional<pb::Report> report;  // the recorded run's (the trace's last record)
  // Call `index` of `instance`, parsed into `out`; false if its bytes are not a CallRecord.
  bool Call(uint32_t instance, uint64_t index, pb::CallRecord& out) const;
};

absl::StatusOr<RecordedTrace> ReadTrace(std::istream& in);
absl::StatusOr<RecordedTrace> ReadTraceFile(const std::string& path);

struct ReplayOptions {
  std::optional<pb::Chip> chip;    // validated; default: the trace's
  std::string issue_cost_profile;  // default: the trace's
  std::string trace_out;           // also record this replay as a trace here
  std::string message_trace;       // every delivered message here (pb::Envelope)
  bool keep_op_log = true;
};

absl::StatusOr<launch::LaunchResult> Replay(const RecordedTrace& trace,
                                            const ReplayOptions& options);

}  // namespace ahbm::replay

#endif  // AHBMSIM_KERNELS_REPLAY_REPLAY_H_
