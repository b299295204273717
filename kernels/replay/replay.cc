#include "kernels/replay/replay.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/errors.h"
#include "actors/chip_sim.h"
#include "actors/observe/op_log.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "kernels/launch/launcher.h"
#include "kernels/runtime/runtime.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"
#include "topology/ids.h"
#include "topology/validate.h"

namespace ahbm::replay {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// "2 SIPs of 4x4 CUBEs of 2x4 PEs, 8 HBM channels per PE": what the streams are bound to.
std::string Geometry(const pb::Chip& chip) {
  return absl::StrCat(chip.sips(), " SIPs of ", chip.sip().cube_mesh().rows(), "x",
                      chip.sip().cube_mesh().cols(), " CUBEs of ", chip.sip().cube().pe_mesh().rows(),
                      "x", chip.sip().cube().pe_mesh().cols(), " PEs, ",
                      chip.sip().cube().pe().hbm_channels(), " HBM channels per PE");
}

// A call's references to earlier calls of its instance must exist.
absl::Status CheckReferences(const pb::CallRecord& r) {
  const auto check = [&r](uint64_t call, const char* what) -> absl::Status {
    if (call > r.index()) {  // call index + 1; 0 is none
      return Invalid(absl::StrCat("trace: instance ", r.instance(), " call ", r.index(), ": ", what,
                                  " call ", call - 1, ", which is not an earlier call of it"));
    }
    return absl::OkStatus();
  };
  for (const pb::InputGroup& g : r.inputs()) {
    for (uint64_t p : g.producers()) {
      RETURN_IF_ERROR(check(p, "an input of"));
    }
  }
  return check(r.wait_on(), "wait on");
}

// One instance's recorded calls, issued again in order (Tl::Replay). A call naming a call that
// is not an earlier one of its instance stops it and sets `bad` (the trace is bad input).
kernels::Task<void> ReplayCalls(kernels::Tl& tl, const RecordedTrace* trace, uint32_t instance,
                                absl::Status* bad) {
  kernels::PeRuntime& rt = *tl.runtime();
  kernels::Instance& inst = *tl.instance();
  const uint64_t n = trace->calls[instance].size();
  std::vector<uint64_t> handles(n + 1, 0);  // by call index + 1
  pb::CallRecord r;
  for (uint64_t i = 0; i < n; ++i) {
    absl::Status s = trace->Call(instance, i, r)
                         ? CheckReferences(r)
                         : absl::DataLossError(absl::StrCat("trace: call ", i, " of instance ",
                                                            instance, " is not a CallRecord"));
    if (!s.ok()) {
      if (bad->ok()) *bad = s;
      co_return;
    }
    switch (r.kind()) {
      case pb::CallRecord::SCOPE_ENTER:
        inst.scratch_top = r.scope_mark();
        rt.EnterScope(inst);
        break;
      case pb::CallRecord::SCOPE_LEAVE:
        inst.scratch_top = r.scope_top();
        rt.LeaveScope(inst, r.scope_mark());
        break;
      case pb::CallRecord::KERNEL_ERROR:
        throw kernels::KernelError(r.error());
      default: {
        const kernels::Tensor result = co_await tl.Replay(r, handles);
        handles[r.index() + 1] = result.producer();
      }
    }
  }
}

// The recorded launch's CUBE sets (launch::IslandsOf merges them).
std::vector<std::vector<uint32_t>> CubeSets(const pb::LaunchRecord& launch) {
  std::vector<std::vector<uint32_t>> sets;
  for (const pb::CubeSet& set : launch.cube_sets()) {
    sets.emplace_back(set.cubes().begin(), set.cubes().end());
  }
  return sets;
}

// The first byte of a serialized TraceRecord: its oneof field's tag (field << 3 | LEN).
constexpr char Tag(int field) { return static_cast<char>(field << 3 | 2); }

}  // namespace

absl::StatusOr<RecordedTrace> ReadTrace(std::istream& in) {
  RecordedTrace trace;
  observe::OpLogReader reader(in);
  std::string bytes;
  pb::TraceRecord parsed;
  bool launch = false;
  while (true) {
    // Op, issue and stall records are what the recorded run did, not replay input: skipped
    // unread (most of a trace's bytes).
    absl::StatusOr<bool> more = reader.NextBytes(bytes, [](char first) {
      return first != Tag(pb::TraceRecord::kOpFieldNumber) &&
             first != Tag(pb::TraceRecord::kIssueFieldNumber) &&
             first != Tag(pb::TraceRecord::kStallFieldNumber);
    });
    RETURN_IF_ERROR(more.status());
    if (!*more) break;
    if (reader.records_read() == 1 &&
        (bytes.empty() || bytes[0] != Tag(pb::TraceRecord::kHeaderFieldNumber))) {
      return Invalid(absl::StrCat(reader.where(), ": the first record is not a header"));
    }
    if (bytes.empty()) continue;  // skipped
    if (bytes[0] == Tag(pb::TraceRecord::kCallFieldNumber)) {
      // A call: its instance and index only (fields 1 and 2, serialized first; absent when 0).
      // The rest is parsed, and its references checked, when its instance replays it.
      google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
      uint32_t size = 0;
      in.ReadTag();
      if (!in.ReadVarint32(&size) || size != bytes.size() - in.CurrentPosition()) {
        return absl::DataLossError(absl::StrCat(reader.where(), ": malformed call record"));
      }
      const int start = in.CurrentPosition();
      uint64_t instance = 0, index = 0;
      for (uint32_t tag = in.ReadTag(); tag == (1 << 3) || tag == (2 << 3); tag = in.ReadTag()) {
        if (!in.ReadVarint64(tag == (1 << 3) ? &instance : &index)) {
          return absl::DataLossError(absl::StrCat(reader.where(), ": malformed call record"));
        }
      }
      if (instance >= trace.calls.size()) {
        return Invalid(absl::StrCat("trace: a call of instance ", instance,
                                    ", which has no instance record"));
      }
      std::vector<RecordedTrace::CallSpan>& calls = trace.calls[instance];
      if (index != calls.size()) {
        return Invalid(absl::StrCat("trace: instance ", instance, " call ", index,
                                    " out of order (expected ", calls.size(), ")"));
      }
      calls.push_back({trace.call_bytes.size(), size});
      trace.call_bytes.append(bytes, static_cast<size_t>(start), size);
      ++trace.total_calls;
      continue;
    }
    pb::TraceRecord* record = &parsed;
    if (!record->ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(reader.where(), ": malformed: its ", bytes.size(),
                                              " bytes are not a TraceRecord"));
    }
    switch (record->record_case()) {
      case pb::TraceRecord::kHeader:
        if (reader.records_read() != 1) {
          return Invalid(absl::StrCat(reader.where(), ": a second header"));
        }
        trace.header = record->header();
        if (trace.header.schema_version() != observe::kTraceSchemaVersion) {
          return Invalid(absl::StrCat("schema_version: the trace is schema ",
                                      trace.header.schema_version(), "; this build reads schema ",
                                      observe::kTraceSchemaVersion));
        }
        // The chip was validated when recorded; a file edited or damaged since must not reach
        // the simulation unchecked. (An op log without a chip is refused below: no calls.)
        if (absl::Status s = trace.header.has_chip() ? topology::Validate(trace.header.chip())
                                                     : absl::OkStatus();
            !s.ok()) {
          return Invalid(absl::StrCat(reader.where(), ": the header's chip: ", s.message()));
        }
        break;
      case pb::TraceRecord::kLaunch:
        trace.launch = record->launch();
        for (const pb::CommHop& hop : trace.launch.comm_hops()) {
          if (hop.link() != pb::CommHop::IPCQ && hop.link() != pb::CommHop::NOC) {
            return Invalid(absl::StrCat(reader.where(), ": a communication hop over link ",
                                        static_cast<int>(hop.link()), " (want IPCQ or NOC)"));
          }
        }
        launch = true;
        break;
      case pb::TraceRecord::kInstance:
        if (record->instance().instance() != trace.instances.size()) {
          return Invalid(absl::StrCat("trace: instance record ", record->instance().instance(),
                                      " out of order (expected ", trace.instances.size(), ")"));
        }
        trace.instances.push_back(record->instance());
        trace.calls.emplace_back();
        break;
      case pb::TraceRecord::kReport:
        trace.report = std::move(*record->mutable_report());
        break;
      default:
        return Invalid(absl::StrCat(reader.where(), ": not a trace record"));
    }
  }
  if (!trace.header.has_chip() || !launch) {
    return Invalid(
        "trace: no recorded calls (an op log without them); record one with `ahbm run --trace`");
  }
  if (!trace.report) {
    return absl::DataLossError(absl::StrCat(
        "trace: ends after ", reader.records_read(), " records without the report a recording "
        "ends with (cut short?)"));
  }
  return trace;
}

bool RecordedTrace::Call(uint32_t instance, uint64_t index, pb::CallRecord& out) const {
  const CallSpan& span = calls[instance][index];
  return out.ParseFromArray(call_bytes.data() + span.offset, static_cast<int>(span.size));
}

absl::StatusOr<RecordedTrace> ReadTraceFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("trace: cannot read ", path));
  absl::StatusOr<RecordedTrace> trace = ReadTrace(in);
  if (!trace.ok()) {
    return Annotate(trace.status(), absl::StrCat(path, ": "));
  }
  return trace;
}

namespace {

// The recorded CUBE sets as the recording simulated them: a one-group recording's first set
// with the others mirrored; otherwise the sets as islands, one after another (one heap with a
// message trace). InvalidArgument for sets the recording cannot have made.
absl::Status SimulateRecordedSets(const RecordedTrace& trace, const topology::ChipIndex& index,
                                  bool message_trace, sim::ChipSimOptions& sim_options) {
  // A one-group recording: the first CUBE set simulated, the others mirrored, as recorded.
  const std::vector<std::vector<uint32_t>> sets = CubeSets(trace.launch);
  if (trace.launch.group_scale() > 1) {
    const bool listed =
        sets.size() == trace.launch.group_scale() &&
        std::vector<uint32_t>(trace.header.cubes().begin(), trace.header.cubes().end()) ==
            sets[0] &&
        std::all_of(sets.begin(), sets.end(), [&](const std::vector<uint32_t>& set) {
          return set.size() == sets[0].size() &&
                 std::all_of(set.begin(), set.end(),
                             [&](uint32_t c) { return c < index.num_cubes(); });
        });
    if (!listed) {
      return Invalid(absl::StrCat("trace: a one-group recording of ", trace.launch.group_scale(),
                                  " CUBE sets must list that many sets of equal size on the chip "
                                  "and simulate the first"));
    }
    sim_options.mirrors.assign(sets.begin() + 1, sets.end());
  }
  // The recorded run's CUBE Groups, one after another (the op log keeps the single heap's
  // order; a message trace takes one heap; a one-group run simulated one group).
  if (!message_trace && sim_options.mirrors.empty()) {
    std::vector<uint32_t> cubes = sim_options.cubes;
    if (cubes.empty()) {
      for (uint32_t c = 0; c < index.num_cubes(); ++c) cubes.push_back(c);
    }
    const std::set<uint32_t> simulated(cubes.begin(), cubes.end());
    for (const std::vector<uint32_t>& set : sets) {
      for (uint32_t c : set) {
        if (!simulated.contains(c)) {
          return Invalid(absl::StrCat("trace: a CUBE set lists CUBE ", c,
                                      ", which the recording did not simulate"));
        }
      }
    }
    sim_options.islands = launch::IslandsOf(sets, cubes);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<launch::LaunchResult> Replay(const RecordedTrace& trace,
                                            const ReplayOptions& options) {
  // The recorded chip holds the workload's max_inflight_composites; a what-if chip gets it too.
  const pb::Chip chip = options.chip ? launch::WorkloadChip(*options.chip, trace.header.workload())
                                     : trace.header.chip();
  if (Geometry(chip) != Geometry(trace.header.chip())) {
    return Invalid(absl::StrCat("topology: the trace's streams need ", Geometry(trace.header.chip()),
                                "; this topology has ", Geometry(chip)));
  }
  if (trace.total_calls == 0) {
    return Invalid("trace: its kernel instances made no call: no call to replay (not 0 cycles)");
  }
  const topology::ChipIndex index(chip);
  for (const pb::InstanceRecord& inst : trace.instances) {
    if (inst.pe() >= index.num_pes()) {
      return Invalid(absl::StrCat("trace: instance ", inst.instance(), " on pe ", inst.pe(),
                                  ", which the topology does not have"));
    }
  }

  sim::ChipSimOptions sim_options;
  sim_options.issue_cost_profile = options.issue_cost_profile.empty()
                                       ? trace.header.issue_cost_profile()
                                       : options.issue_cost_profile;
  sim_options.per_tile_detail = trace.header.per_tile_detail();
  sim_options.keep_op_log = options.keep_op_log;
  sim_options.cubes.assign(trace.header.cubes().begin(), trace.header.cubes().end());
  sim_options.workload_summary = trace.launch.workload_summary();
  std::unique_ptr<std::ofstream> out;
  if (!options.trace_out.empty()) {
    out = std::make_unique<std::ofstream>(options.trace_out, std::ios::binary | std::ios::trunc);
    if (!*out) return Invalid(absl::StrCat("trace_out: cannot write ", options.trace_out));
    sim_options.op_log_stream = out.get();
    sim_options.record_calls = true;
    sim_options.workload = trace.header.workload();
  }
  std::unique_ptr<std::ofstream> messages;
  if (!options.message_trace.empty()) {
    messages = std::make_unique<std::ofstream>(options.message_trace, std::ios::binary | std::ios::trunc);
    if (!*messages) return Invalid(absl::StrCat("message_trace: cannot write ", options.message_trace));
    sim_options.message_trace_stream = messages.get();
  }
  RETURN_IF_ERROR(SimulateRecordedSets(trace, index, messages != nullptr, sim_options));
  absl::StatusOr<std::unique_ptr<sim::ChipSim>> created = sim::ChipSim::Create(chip, sim_options);
  RETURN_IF_ERROR(created.status());
  std::unique_ptr<sim::ChipSim> sim = std::move(*created);
  launch::LaunchResult result;
  absl::Status bad;  // a call with a reference the trace cannot hold
  {
    // The commands come from the trace file, not from kernel code: a refused one is the input's
    // fault (an edited trace, or a what-if chip that cannot hold them), not a kernel's.
    kernels::KernelRuntime runtime(sim.get(), nullptr, ErrorKind::kInput);
    for (size_t i = 0; i < trace.instances.size(); ++i) {
      const uint32_t instance = static_cast<uint32_t>(i);
      absl::Status s = runtime.AddKernel(
          trace.instances[i].pe(), trace.instances[i].request_id(), trace.instances[i].stream(),
          [&trace, instance, &bad](kernels::Tl& tl) {
            return ReplayCalls(tl, &trace, instance, &bad);
          });
      if (!s.ok()) {
        return Annotate(s, absl::StrCat("trace: instance ", instance, ": "));
      }
    }
    if (sim_options.record_calls) sim->context().op_log->AddLaunch(trace.launch);
    result.reduce_rounds = trace.launch.reduce_rounds();
    result.level2_rounds = trace.launch.level2_rounds();
    result.level1_rounds = trace.launch.level1_rounds();
    result.ring_rotations = trace.launch.ring_rotations();
    result.composites = trace.launch.composites();
    result.grid_composites = trace.launch.grid_composites();
    result.islands = sim->engine().islands();
    result.runtime_status = runtime.Run();
    // The roofline's communication critical path, priced on the replay's chip (a what-if's own).
    result.report = sim->BuildReport(launch::CommCriticalPathPs(
        chip, {trace.launch.comm_hops().begin(), trace.launch.comm_hops().end()}));
    const uint32_t requests = launch::RequestsOf(trace.header.workload());
    for (uint64_t ps : runtime.RequestLatencyPs(requests)) {
      result.report.add_request_latency_ps(ps);
    }
    if (sim_options.record_calls) sim->context().op_log->AddReport(result.report);
  }
  RETURN_IF_ERROR(bad);
  if (messages) {
    messages->close();
    if (!*messages) return Invalid(absl::StrCat("message_trace: write to ", options.message_trace, " failed"));
  }
  if (out) {
    out->close();
    if (!*out) return Invalid(absl::StrCat("trace_out: write to ", options.trace_out, " failed"));
  }
  result.op_log = sim->TakeOpLogRecords();
  return result;
}

}  // namespace ahbm::replay
