#include "kernels/replay/replay.h"

#include <fstream>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/chip_sim.h"
#include "actors/observe/op_log.h"
#include "kernels/launch/launcher.h"
#include "kernels/runtime/runtime.h"
#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"
#include "topology/ids.h"

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
      if (absl::Status s = check(p, "an input of"); !s.ok()) return s;
    }
  }
  return check(r.wait_on(), "wait on");
}

// One instance's recorded calls, issued again in order (Tl::Replay).
kernels::Task<void> ReplayCalls(kernels::Tl& tl, const std::vector<pb::CallRecord>* calls) {
  kernels::KernelRuntime& rt = *tl.runtime();
  kernels::Instance& inst = *tl.instance();
  std::vector<uint64_t> handles(calls->size() + 1, 0);  // by call index + 1
  for (const pb::CallRecord& r : *calls) {
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

// Islands: each instance's CUBE joined with the CUBEs of the PEs it messages over the NOC.
std::vector<std::vector<uint32_t>> CubeSets(const RecordedTrace& trace,
                                            const topology::ChipIndex& index) {
  std::vector<std::vector<uint32_t>> sets;
  for (size_t i = 0; i < trace.instances.size(); ++i) {
    const uint32_t pes = index.pes_per_cube();
    std::vector<uint32_t> set = {trace.instances[i].pe() / pes};
    for (const pb::CallRecord& r : trace.calls[i]) {
      if ((r.kind() == pb::CallRecord::SEND || r.kind() == pb::CallRecord::RECV) &&
          !r.peer_ipcq()) {
        set.push_back(r.peer_pe() / pes);
      }
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

}  // namespace

absl::StatusOr<RecordedTrace> ReadTrace(std::istream& in) {
  RecordedTrace trace;
  observe::OpLogReader reader(in);
  pb::TraceRecord record;
  bool launch = false;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    switch (record.record_case()) {
      case pb::TraceRecord::kHeader:
        trace.header = std::move(*record.mutable_header());
        if (trace.header.schema_version() != observe::kTraceSchemaVersion) {
          return Invalid(absl::StrCat("schema_version: the trace is schema ",
                                      trace.header.schema_version(), "; this build reads schema ",
                                      observe::kTraceSchemaVersion));
        }
        break;
      case pb::TraceRecord::kLaunch:
        trace.launch = std::move(*record.mutable_launch());
        launch = true;
        break;
      case pb::TraceRecord::kInstance:
        if (record.instance().instance() != trace.instances.size()) {
          return Invalid(absl::StrCat("trace: instance record ", record.instance().instance(),
                                      " out of order (expected ", trace.instances.size(), ")"));
        }
        trace.instances.push_back(std::move(*record.mutable_instance()));
        trace.calls.emplace_back();
        break;
      case pb::TraceRecord::kCall: {
        pb::CallRecord& r = *record.mutable_call();
        if (r.instance() >= trace.calls.size()) {
          return Invalid(absl::StrCat("trace: a call of instance ", r.instance(),
                                      ", which has no instance record"));
        }
        std::vector<pb::CallRecord>& calls = trace.calls[r.instance()];
        if (r.index() != calls.size()) {
          return Invalid(absl::StrCat("trace: instance ", r.instance(), " call ", r.index(),
                                      " out of order (expected ", calls.size(), ")"));
        }
        if (absl::Status s = CheckReferences(r); !s.ok()) return s;
        calls.push_back(std::move(r));
        ++trace.total_calls;
        break;
      }
      default:
        break;  // op, issue and stall records: what the recorded run did, not replay input
    }
  }
  if (!trace.header.has_chip() || !launch) {
    return Invalid(
        "trace: no recorded calls (an op log without them); record one with `ahbm run --trace`");
  }
  return trace;
}

absl::StatusOr<RecordedTrace> ReadTraceFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("trace: cannot read ", path));
  absl::StatusOr<RecordedTrace> trace = ReadTrace(in);
  if (!trace.ok()) {
    return absl::Status(trace.status().code(), absl::StrCat(path, ": ", trace.status().message()));
  }
  return trace;
}

absl::StatusOr<launch::LaunchResult> Replay(const RecordedTrace& trace,
                                            const ReplayOptions& options) {
  const pb::Chip& chip = options.chip ? *options.chip : trace.header.chip();
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
  if (!options.keep_op_log && out == nullptr) {
    std::vector<uint32_t> cubes = sim_options.cubes;
    if (cubes.empty()) {
      for (uint32_t c = 0; c < index.num_cubes(); ++c) cubes.push_back(c);
    }
    sim_options.islands = launch::IslandsOf(CubeSets(trace, index), cubes);
  }
  absl::StatusOr<std::unique_ptr<sim::ChipSim>> created = sim::ChipSim::Create(chip, sim_options);
  if (!created.ok()) return created.status();
  std::unique_ptr<sim::ChipSim> sim = std::move(*created);
  launch::LaunchResult result;
  {
    kernels::KernelRuntime runtime(sim.get(), nullptr);
    for (size_t i = 0; i < trace.instances.size(); ++i) {
      const std::vector<pb::CallRecord>* calls = &trace.calls[i];
      absl::Status s = runtime.AddKernel(
          trace.instances[i].pe(), trace.instances[i].request_id(),
          [calls](kernels::Tl& tl) { return ReplayCalls(tl, calls); });
      if (!s.ok()) return s;
    }
    if (sim_options.record_calls) sim->context().op_log->AddLaunch(trace.launch);
    result.reduce_rounds = trace.launch.reduce_rounds();
    result.composites = trace.launch.composites();
    result.grid_composites = trace.launch.grid_composites();
    result.islands = sim->engine().islands();
    result.runtime_status = runtime.Run();
    result.report = sim->BuildReport(trace.launch.comm_critical_path_ps());
  }
  if (out) {
    out->close();
    if (!*out) return Invalid(absl::StrCat("trace_out: write to ", options.trace_out, " failed"));
  }
  result.op_log = sim->TakeOpLogRecords();
  return result;
}

}  // namespace ahbm::replay
