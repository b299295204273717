// A run's timeline read back from its op log (DESIGN §5), and its critical path: the chain of
// commands, messages, waits and CPU issue work that sets the latency (`ahbm diff`).
// Plain C++ over the trace protos and the chip's unit ids.
//
// Contract:
// - Timeline::Add takes the records of one op log in order (header first, as written); Finish
//   returns the timeline. A step is what a PE CPU put in flight: a scheduler command (its
//   scheduler OpRecord, with its IssueRecord's call key and depends_on), a send or a receive
//   (the CPU's send_*/recv_* OpRecords). Engine ops (GEMM, MATH, DMA units) attach to their
//   command: GEMM/MATH by cmd_id, DMA pieces by parent_cmd_id. CPU stall records are kept per
//   PE. Other records (calls, instances, stage_ipcq) are ignored; the report record is kept.
// - Step keys: with recorded calls (schema 3 `--trace`) a step's key is (instance, call index),
//   the same in any replay of the trace; without them (injected streams, plain op logs) it is
//   (pe, kind, n-th step of that kind on that PE in issue order).
// - CriticalPath walks back from the step that ends last (ties: lowest PE, then lowest key).
//   At a step it takes, of these, the release with the latest time (ties in this order):
//     data     a dependency (the command's own depends_on, or a receive it read): its end;
//     message  a receive's send: the send's issue time;
//     engine   one of the step's engine ops started exactly when another command's op on the
//              same unit ended, after the step was otherwise ready (its issue, its
//              dependencies, and its own ops on other units that had ended by then): that end;
//     issue    the step's issue time; the walk then follows the PE's CPU back: to the stall
//              that ended last at or before it on the same request (a `wait` link to the step
//              waited on; a queue wait has no step and continues on the CPU), or, when an
//              earlier issue on the PE came after that stall, to that issue (a `cpu` link:
//              issue cost). It ends at time 0 or when the CPU has nothing earlier.
//   Each link is one row: the edge kind, the step (or the CPU span), and [from_ps, to_ps]:
//   a step's row runs from its release to its end; consecutive `cpu` links merge into one row.
//   Rows are returned in time order (the first starts the run).
// - What held the path over a row (Link::held): the edge says how a step was released, not
//   what its row's time was spent on — from its release to its end the step itself runs (or
//   queues for the units it runs on). So a step's row is held by its own work: a receive by
//   "message" (the message in flight, or not yet sent), a send by "send", a command by the
//   engine kind its ops spent the most time on — "gemm", "math" or "dma" (ties in that order;
//   "run" for a command without engine ops). A CPU span is held by "cpu" (issue cost), a wait
//   row by "wait" (the CPU resuming after, or busy past, the step it waited on).
#ifndef AHBMSIM_ACTORS_OBSERVE_TIMELINE_H_
#define AHBMSIM_ACTORS_OBSERVE_TIMELINE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "proto/report.pb.h"
#include "proto/trace.pb.h"
#include "topology/ids.h"

namespace ahbm::observe {

// What a PE CPU put in flight.
struct Step {
  enum class Kind : uint8_t { kCommand, kSend, kRecv };
  Kind kind = Kind::kCommand;
  uint32_t pe = 0;
  uint32_t request_id = 0;
  uint64_t cmd_id = 0;      // commands and receives (the PE-local handle); 0 for sends
  uint64_t message_id = 0;  // sends and receives
  uint32_t instance = 0;    // with recorded calls
  uint64_t call = 0;        // call index + 1; 0 without recorded calls
  uint64_t ordinal = 0;     // n-th step of its kind on its PE, in issue order
  std::string op;           // "composite_gemm", "math_EXP", "send_noc", "recv_ipcq", ...
  std::string label;
  uint64_t issue_ps = 0, start_ps = 0, end_ps = 0;
  std::vector<uint64_t> depends_on;  // PE-local handles: scheduler deps and receives read

  // The key matching this step in another run of the same streams.
  std::tuple<int, uint64_t, uint64_t, uint64_t> Key() const;
  // "pe 3 i2 c17 composite_gemm cmd 9" (i/c only with recorded calls).
  std::string Name() const;
};

const char* StepKindName(Step::Kind kind);

// One engine op of a command.
struct EngineOp {
  uint32_t unit = 0;
  uint32_t step = 0;  // index into Timeline::steps
  uint64_t start_ps = 0, end_ps = 0;
};

struct Stall {
  uint32_t request_id = 0;
  uint64_t cmd_id = 0;  // 0: a queue or wait_all
  uint64_t from_ps = 0, to_ps = 0;
  std::string waits_on;
};

class Timeline {
 public:
  // `chip`: the topology the op log was recorded on (its unit ids).
  explicit Timeline(const pb::Chip& chip);

  void Add(const pb::TraceRecord& record);
  // Links the records; InvalidArgument when the log has no step at all.
  absl::Status Finish();

  const std::vector<Step>& steps() const { return steps_; }
  const std::optional<pb::Report>& report() const { return report_; }
  const pb::TraceHeader& header() const { return header_; }
  // The latest step end (0 without steps).
  uint64_t last_end_ps() const;
  // Index of the step with `key`, or -1.
  int64_t Find(const std::tuple<int, uint64_t, uint64_t, uint64_t>& key) const;

  struct Link {
    enum class Edge : uint8_t { kStart, kData, kMessage, kEngine, kIssue, kWait, kCpu };
    Edge edge = Edge::kStart;
    int64_t step = -1;  // -1: a CPU span (kCpu) on `pe`
    uint32_t pe = 0;
    uint64_t calls = 0;  // kCpu: issues merged into the row
    uint64_t from_ps = 0, to_ps = 0;
    std::string note;    // kWait: what the CPU waited on; kEngine: the unit
    std::string held;    // what held the path over [from_ps, to_ps] (see the contract)
  };
  std::vector<Link> CriticalPath() const;

 private:
  struct Cpu {
    std::vector<std::pair<uint64_t, uint32_t>> issues;  // (issue_ps, step), sorted at Finish
    std::vector<Stall> stalls;                          // sorted by to_ps at Finish
  };
  struct Release {
    Link::Edge edge = Link::Edge::kIssue;
    uint64_t at = 0;
    int64_t pred = -1;
    std::string note;
  };
  Release ReleaseOf(uint32_t s) const;
  // What step `s`'s own row is held by (the contract's Link::held for a step).
  std::string HeldBy(uint32_t s) const;
  int64_t StepOf(uint32_t pe, uint64_t handle) const;

  topology::ChipIndex index_;
  pb::TraceHeader header_;
  std::optional<pb::Report> report_;
  std::vector<Step> steps_;
  std::vector<EngineOp> ops_;                        // by unit, then start (at Finish)
  std::vector<std::vector<uint32_t>> ops_of_step_;   // indices into ops_
  absl::flat_hash_map<uint64_t, uint32_t> by_handle_;  // (pe << 40 | handle) -> step
  absl::flat_hash_map<uint64_t, uint32_t> send_of_message_;
  absl::flat_hash_map<uint64_t, std::pair<uint32_t, uint64_t>> issue_of_cmd_;  // call key
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> recv_deps_;  // receives a command read
  std::vector<std::tuple<uint32_t, uint64_t, uint32_t>> pending_engine_;  // unit, cmd, op index
  std::vector<Cpu> cpus_;
  absl::flat_hash_map<std::tuple<int, uint64_t, uint64_t, uint64_t>, uint32_t> by_key_;
};

}  // namespace ahbm::observe

#endif  // AHBMSIM_ACTORS_OBSERVE_TIMELINE_H_
