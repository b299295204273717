#include "kernels/launch/launch.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/chip_sim.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "kernels/launch/launcher.h"
#include "kernels/launch/workload_io.h"
#include "topology/ids.h"
#include "topology/mesh.h"

namespace ahbm::launch {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

std::map<pb::Kernel, std::unique_ptr<KernelLauncher>>& Registry() {
  static auto* const registry = new std::map<pb::Kernel, std::unique_ptr<KernelLauncher>>;
  return *registry;
}

// The workload's launcher, or "kernel: ..." naming the implemented ones.
absl::StatusOr<const KernelLauncher*> LauncherOf(const pb::Workload& w) {
  std::vector<std::string> implemented;
  for (const KernelLauncher* l : Launchers()) implemented.push_back(pb::Kernel_Name(l->kernel()));
  const std::string list = absl::StrJoin(implemented, ", ");
  if (w.kernel() == pb::KERNEL_UNSPECIFIED) {
    return Invalid(absl::StrCat("kernel: must be set (implemented: ", list, ")"));
  }
  const std::string name = pb::Kernel_Name(w.kernel());
  if (name.empty()) return Invalid(absl::StrCat("kernel: unknown value ", w.kernel()));
  const KernelLauncher* launcher = FindLauncher(w.kernel());
  if (launcher == nullptr) {
    return Invalid(absl::StrCat("kernel: ", name, " is not implemented yet (implemented: ", list,
                                ")"));
  }
  return launcher;
}

// Lookup, unused fields, explicit zeros, Prepare: the plan of a valid workload.
absl::StatusOr<std::unique_ptr<KernelPlan>> PlanOf(const pb::Chip& chip, const pb::Workload& w) {
  absl::StatusOr<const KernelLauncher*> launcher = LauncherOf(w);
  RETURN_IF_ERROR(launcher.status());
  RETURN_IF_ERROR(CheckUnusedWorkloadFields(w, pb::Kernel_Name(w.kernel()), (*launcher)->Fields()));
  RETURN_IF_ERROR(CheckGivenValues(w));
  return (*launcher)->Prepare(chip, w);
}

absl::Status WriteArrays(const std::string& dir, const NpyArrays& arrays) {
  for (const auto& [stem, array] : arrays) {
    RETURN_IF_ERROR(host::WriteNpy(host::NpyPath(dir, stem), array.shape, array.data));
  }
  return absl::OkStatus();
}

// Why LaunchOptions::one_group may not simulate `sets`' first set alone; "" when it may (the
// condition of launch.h).
std::string OneGroupRefusal(const pb::Chip& chip, const pb::Workload& w, const KernelPlan& plan,
                            const std::vector<std::vector<uint32_t>>& sets) {
  if (w.data()) return "data mode reads every set's outputs";
  if (std::string refusal = plan.OneGroupRefusal(); !refusal.empty()) return refusal;
  if (sets.size() < 2) return "the kernel uses one CUBE set: nothing to scale";
  const topology::ChipIndex index(chip);
  const topology::Mesh& mesh = index.cube_mesh();
  const auto offset = [&](const std::vector<uint32_t>& set, size_t i) {
    const topology::Coord a = mesh.CoordOf(index.CubeOf(set[0]).cube);
    const topology::Coord b = mesh.CoordOf(index.CubeOf(set[i]).cube);
    return std::pair<int64_t, int64_t>{int64_t{b.row} - a.row, int64_t{b.col} - a.col};
  };
  std::set<uint32_t> seen;
  for (const std::vector<uint32_t>& set : sets) {
    if (set.size() != sets[0].size()) return "the CUBE sets differ in size";
    for (size_t i = 0; i < set.size(); ++i) {
      if (!seen.insert(set[i]).second) return "the CUBE sets overlap";
      if (index.CubeOf(set[i]).sip != index.CubeOf(set[0]).sip) {
        return "a CUBE set spans SIPs (its messages would cross UCIe)";
      }
      if (offset(set, i) != offset(sets[0], i)) {
        return "the CUBE sets are not translates of one another";
      }
    }
  }
  const std::vector<uint32_t> cubes = plan.Cubes();
  if (seen != std::set<uint32_t>(cubes.begin(), cubes.end())) {
    return "the CUBE sets do not cover the kernel's CUBEs";
  }
  // X-Y routes between the first set's CUBEs stay inside it (no other set's router on them).
  const std::set<uint32_t> first(sets[0].begin(), sets[0].end());
  const uint32_t sip_base = index.CubeOf(sets[0][0]).sip * index.cubes_per_sip();
  for (uint32_t from : sets[0]) {
    for (uint32_t to : sets[0]) {
      uint32_t at = from - sip_base;
      for (topology::Dir dir : mesh.XyPath(from - sip_base, to - sip_base)) {
        at = *mesh.Neighbour(at, dir);
        if (!first.contains(sip_base + at)) {
          return "an X-Y route between a CUBE set's CUBEs leaves the set";
        }
      }
    }
  }
  return "";
}

}  // namespace

bool RegisterLauncher(std::unique_ptr<KernelLauncher> launcher) {
  const pb::Kernel kernel = launcher->kernel();
  for (const std::string& field : launcher->Fields()) {
    AHBM_CHECK(pb::Workload::descriptor()->FindFieldByName(field) != nullptr)
        << pb::Kernel_Name(kernel) << " launcher: no workload field " << field;
  }
  const bool first = Registry().emplace(kernel, std::move(launcher)).second;
  AHBM_CHECK(first) << "two launchers for " << pb::Kernel_Name(kernel);
  return true;
}

std::unique_ptr<KernelLauncher> ReplaceLauncherForTest(std::unique_ptr<KernelLauncher> launcher) {
  std::unique_ptr<KernelLauncher>& slot = Registry()[launcher->kernel()];
  std::swap(slot, launcher);
  return launcher;
}

const KernelLauncher* FindLauncher(pb::Kernel kernel) {
  const auto it = Registry().find(kernel);
  return it == Registry().end() ? nullptr : it->second.get();
}

std::vector<const KernelLauncher*> Launchers() {
  std::vector<const KernelLauncher*> out;
  for (const auto& [kernel, launcher] : Registry()) out.push_back(launcher.get());
  return out;
}

absl::StatusOr<RequestBatch> RequestBatchOf(const pb::Workload& w, const std::string& length,
                                            const std::string& s_meaning) {
  RequestBatch b;
  b.users = w.has_users() ? w.users() : 1;
  b.s = w.s();
  if (w.request_lengths_size() > 0) {
    if (w.has_s()) {
      return absl::InvalidArgumentError(
          "s: leave it unset with request_lengths (each request has its own length)");
    }
    if (w.has_users() && w.users() != static_cast<uint32_t>(w.request_lengths_size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "users: ", w.users(), " but request_lengths lists ", w.request_lengths_size(), " requests"));
    }
    b.lengths.assign(w.request_lengths().begin(), w.request_lengths().end());
    b.users = static_cast<uint32_t>(b.lengths.size());
    for (uint64_t len : b.lengths) {
      if (len == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("request_lengths: every ", length, " must be > 0"));
      }
      b.s = std::max(b.s, len);
    }
  }
  if (b.s == 0) return absl::InvalidArgumentError(absl::StrCat("s: must be > 0 (", s_meaning, ")"));
  // Token counts past kMaxTokens overflow the placement's arithmetic long before any HBM
  // could hold them: refused here, naming the field.
  for (const auto& [field, tokens] :
       {std::pair<const char*, uint64_t>{w.request_lengths_size() > 0 ? "request_lengths" : "s", b.s},
        {"max_context", w.max_context()}}) {
    if (tokens > kMaxTokens) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", tokens,
                                                     " tokens are past what the simulator "
                                                     "places (at most 2^40 = ", kMaxTokens, ")"));
    }
  }
  return b;
}

absl::Status CheckDispatchFields(const pb::Workload& w) {
  if (w.has_kv_per_cube() && w.variant() != pb::SHORT_CONTEXT && w.variant() != pb::AUTO) {
    return absl::InvalidArgumentError("kv_per_cube: only the SHORT_CONTEXT and AUTO variants use it");
  }
  if (w.has_short_long_threshold() && w.variant() != pb::AUTO) {
    return absl::InvalidArgumentError("short_long_threshold: only the AUTO variant uses it");
  }
  return absl::OkStatus();
}

uint32_t RequestsOf(const pb::Workload& w) {
  if (w.request_lengths_size() > 0) return static_cast<uint32_t>(w.request_lengths_size());
  return w.has_users() ? w.users() : 1;
}

std::string RequestStem(uint32_t users, const std::string& name, uint32_t u) {
  return users == 1 ? name : absl::StrCat(name, u);
}

absl::StatusOr<host::NpyArray> ReadNpyInput(const std::string& dir, const std::string& stem,
                                            const std::vector<uint64_t>& shape) {
  const std::string path = host::NpyPath(dir, stem);
  absl::StatusOr<host::NpyArray> array = host::ReadNpy(path);
  RETURN_IF_ERROR(array.status());
  RETURN_IF_ERROR(host::ExpectShape(path, *array, shape));
  RETURN_IF_ERROR(host::ExpectFinite(path, *array));
  return array;
}

uint64_t CommCriticalPathPs(const pb::Chip& chip, const std::vector<pb::CommHop>& hops) {
  uint64_t total = 0;
  for (const pb::CommHop& hop : hops) {
    AHBM_CHECK(hop.link() == pb::CommHop::IPCQ || hop.link() == pb::CommHop::NOC)
        << "communication hop without its link";
    const pb::Link& link = hop.link() == pb::CommHop::IPCQ ? chip.sip().cube().ipcq().link()
                                                           : chip.sip().noc().link();
    const uint64_t bw = link.bytes_per_cycle();
    uint64_t cycles = link.latency_cycles();
    for (uint64_t bytes : hop.message_bytes()) cycles += (bytes + bw - 1) / bw;
    total += hop.rounds() * cycles * (1'000'000 / link.clock_mhz());
  }
  return total;
}

std::vector<std::vector<uint32_t>> IslandsOf(const std::vector<std::vector<uint32_t>>& sets,
                                             const std::vector<uint32_t>& cubes) {
  if (sets.empty()) return {};
  // Union-find over CUBE indices; each root ends up the smallest CUBE of its island.
  std::map<uint32_t, uint32_t> parent;
  for (uint32_t c : cubes) parent[c] = c;
  const auto find = [&parent](uint32_t c) {
    while (parent.at(c) != c) c = parent[c] = parent.at(parent.at(c));
    return c;
  };
  for (const std::vector<uint32_t>& set : sets) {
    for (uint32_t c : set) {
      const uint32_t a = find(set.front()), b = find(c);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  }
  std::map<uint32_t, std::vector<uint32_t>> by_root;
  for (const auto& [c, unused] : parent) by_root[find(c)].push_back(c);
  std::vector<std::vector<uint32_t>> islands;
  for (auto& [root, members] : by_root) islands.push_back(std::move(members));
  return islands;
}

pb::Chip WorkloadChip(const pb::Chip& chip, const pb::Workload& w) {
  pb::Chip out = chip;
  if (w.has_max_inflight_composites()) {
    out.mutable_sip()->mutable_cube()->mutable_pe()->mutable_scheduler()->set_max_inflight_composites(
        w.max_inflight_composites());
  }
  return out;
}

namespace {

// save_inputs needs data mode, somewhere to write and generated inputs.
absl::Status CheckSaveInputs(bool data, const LaunchOptions& options) {
  if (!options.save_inputs) return absl::OkStatus();
  if (!data) return Invalid("save_inputs: needs data mode (the workload's data is false)");
  if (options.outputs_dir.empty()) {
    return Invalid("save_inputs: needs outputs_dir (where to write)");
  }
  if (!options.inputs_dir.empty()) {
    return Invalid("save_inputs: the inputs come from inputs_dir; nothing is generated to save");
  }
  return absl::OkStatus();
}

// inputs_dir / outputs_dir need data mode and a kernel that has inputs / outputs.
absl::Status CheckDataDirs(const pb::Workload& w, const LaunchOptions& options,
                           const KernelPlan& plan) {
  for (const auto& [flag, dir, has] :
       {std::tuple<std::string, std::string, bool>{"inputs_dir", options.inputs_dir,
                                                   plan.HasInputs()},
        {"outputs_dir", options.outputs_dir, plan.HasOutputs()}}) {
    if (dir.empty()) continue;
    if (!w.data()) {
      return Invalid(absl::StrCat(flag, ": needs data mode (the workload's data is false)"));
    }
    if (!has) return Invalid(absl::StrCat(flag, ": ", pb::Kernel_Name(w.kernel()), " has none"));
  }
  return absl::OkStatus();
}

// The kernel's own counts (reduce rounds, ring rotations, composites) into the result.
void CopyPlanCounts(const KernelPlan& plan, LaunchResult& result) {
  result.reduce_rounds = plan.ReduceRounds();
  result.level2_rounds = plan.Level2Rounds();
  result.level1_rounds = plan.Level1Rounds();
  result.ring_rotations = plan.RingRotations();
  result.composites = plan.Composites();
  result.grid_composites = plan.GridComposites();
}

// A recorded trace's launch record: what the replay needs besides the calls.
pb::LaunchRecord LaunchRecordOf(const LaunchResult& result, const std::string& workload_summary,
                                const std::vector<pb::CommHop>& comm_hops,
                                const std::vector<std::vector<uint32_t>>& sets) {
  pb::LaunchRecord launch;
  launch.set_workload_summary(workload_summary);
  launch.mutable_comm_hops()->Assign(comm_hops.begin(), comm_hops.end());
  launch.set_reduce_rounds(result.reduce_rounds);
  launch.set_level2_rounds(result.level2_rounds);
  launch.set_level1_rounds(result.level1_rounds);
  launch.set_ring_rotations(result.ring_rotations);
  launch.set_composites(result.composites);
  launch.set_grid_composites(result.grid_composites);
  for (const std::vector<uint32_t>& set : sets) {
    launch.add_cube_sets()->mutable_cubes()->Assign(set.begin(), set.end());
  }
  if (result.group_scale > 1) launch.set_group_scale(result.group_scale);
  return launch;
}

// Closes an output file (`stream` may be null: none was asked for); a failed write is named.
absl::Status CloseStream(std::ofstream* stream, const std::string& flag, const std::string& path) {
  if (stream == nullptr) return absl::OkStatus();
  stream->close();
  if (!*stream) return Invalid(absl::StrCat(flag, ": write to ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateWorkload(const pb::Chip& chip, const pb::Workload& w) {
  return PlanOf(WorkloadChip(chip, w), w).status();
}

absl::StatusOr<LaunchResult> RunWorkload(const pb::Chip& given_chip, const pb::Workload& w,
                                         const LaunchOptions& options) {
  const pb::Chip chip = WorkloadChip(given_chip, w);  // outlives the plan, which refers to it
  const bool data = w.data();
  RETURN_IF_ERROR(CheckSaveInputs(data, options));
  absl::StatusOr<std::unique_ptr<KernelPlan>> plan_or = PlanOf(chip, w);
  RETURN_IF_ERROR(plan_or.status());
  KernelPlan& plan = **plan_or;
  RETURN_IF_ERROR(CheckDataDirs(w, options, plan));
  if (data) {
    RETURN_IF_ERROR(plan.LoadInputs(options.inputs_dir, w.seed()));
  }

  // The simulation of the kernel's CUBEs, its op log streamed to trace_path.
  std::unique_ptr<std::ofstream> trace;
  sim::ChipSimOptions sim_options;
  sim_options.issue_cost_profile = w.issue_cost_profile();
  sim_options.per_tile_detail = options.per_tile_detail;
  sim_options.reply_ahead = options.reply_ahead;
  sim_options.keep_op_log = options.keep_op_log;
  sim_options.hbm_call_memo = options.hbm_call_memo;
  sim_options.cubes = plan.Cubes();
  LaunchResult result;
  ASSIGN_OR_RETURN(const std::vector<std::vector<uint32_t>> sets, plan.CubeSets());
  if (options.one_group) {
    result.one_group_note = OneGroupRefusal(chip, w, plan, sets);
  }
  const bool one_group = options.one_group && result.one_group_note.empty();
  if (one_group) {
    sim_options.cubes = sets[0];
    sim_options.mirrors.assign(sets.begin() + 1, sets.end());
    result.group_scale = static_cast<uint32_t>(sets.size());
  }
  std::unique_ptr<std::ofstream> message_trace;
  if (!options.message_trace_path.empty()) {
    message_trace = std::make_unique<std::ofstream>(options.message_trace_path,
                                                    std::ios::binary | std::ios::trunc);
    if (!*message_trace) {
      return Invalid(absl::StrCat("message_trace: cannot write ", options.message_trace_path));
    }
    sim_options.message_trace_stream = message_trace.get();
  }
  // CUBE Groups exchange no message: simulate them one after another (an op log keeps the
  // single heap's order; a message trace records deliveries as they happen, so it takes one;
  // a one-group run simulates one group).
  if (options.islands && !message_trace && !one_group) {
    sim_options.islands = IslandsOf(sets, sim_options.cubes);
  }
  sim_options.workload_summary = plan.Summary();
  if (!options.trace_path.empty()) {
    trace = std::make_unique<std::ofstream>(options.trace_path, std::ios::binary | std::ios::trunc);
    if (!*trace) return Invalid(absl::StrCat("trace: cannot write ", options.trace_path));
    sim_options.op_log_stream = trace.get();
    sim_options.record_calls = true;  // a trace is replayable (kernels/replay)
    sim_options.workload = w;
  }
  absl::StatusOr<std::unique_ptr<sim::ChipSim>> created = sim::ChipSim::Create(chip, sim_options);
  RETURN_IF_ERROR(created.status());
  std::unique_ptr<sim::ChipSim> sim = std::move(*created);
  std::unique_ptr<kernels::MemoryStore> store;
  if (data) store = std::make_unique<kernels::MemoryStore>(chip);
  kernels::KernelRuntime runtime(sim.get(), store.get());
  if (one_group) runtime.KeepOnlyCubes({sets[0].begin(), sets[0].end()});
  RETURN_IF_ERROR(plan.Launch(runtime, store.get()));

  if (data) {
    absl::StatusOr<NpyArrays> seen = plan.SeenInputs(*store);
    RETURN_IF_ERROR(seen.status());
    result.inputs = std::move(*seen);
  }
  CopyPlanCounts(plan, result);
  result.islands = sim->engine().islands();
  const std::vector<pb::CommHop> comm_hops = plan.CommHops();
  if (sim_options.record_calls) {
    sim->context().op_log->AddLaunch(
        LaunchRecordOf(result, sim_options.workload_summary, comm_hops, sets));
  }
  result.runtime_status = runtime.Run();
  result.report = sim->BuildReport(CommCriticalPathPs(chip, comm_hops));
  for (uint64_t ps : runtime.RequestLatencyPs(RequestsOf(w))) {
    result.report.add_request_latency_ps(ps);
  }
  result.hbm_call_memo = sim->hbm_call_memo_stats();
  if (sim_options.record_calls) sim->context().op_log->AddReport(result.report);
  RETURN_IF_ERROR(CloseStream(trace.get(), "trace", options.trace_path));
  RETURN_IF_ERROR(CloseStream(message_trace.get(), "message_trace", options.message_trace_path));
  result.op_log = sim->TakeOpLogRecords();
  if (result.runtime_status.ok() && data) {
    absl::StatusOr<NpyArrays> outputs = plan.Gather(*store);
    RETURN_IF_ERROR(outputs.status());
    result.outputs = std::move(*outputs);
    if (!options.outputs_dir.empty()) {
      RETURN_IF_ERROR(WriteArrays(options.outputs_dir, result.outputs));
    }
  }
  if (options.save_inputs) {
    RETURN_IF_ERROR(WriteArrays(options.outputs_dir, result.inputs));
  }
  return result;
}

}  // namespace ahbm::launch
