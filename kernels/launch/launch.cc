#include "kernels/launch/launch.h"

#include "kernels/launch/decode_run.h"
#include "kernels/launch/workload_io.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <map>
#include <random>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/chip_sim.h"
#include "kernels/host/placement.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "kernels/selftest/selftest.h"
#include "topology/ids.h"
#include "topology/mesh.h"

namespace ahbm::launch {
namespace {

using U128 = unsigned __int128;

// TCM allocations of the kernel runtime are 64-byte aligned (kernels/runtime/runtime.cc).
constexpr uint64_t kTcmAlign = 64;

U128 AlignUp(U128 v, uint64_t align) { return (v + align - 1) / align * align; }

// What each implemented kernel reads from the workload and the .npy files it takes and gives.
struct KernelSpec {
  pb::Kernel kernel;
  std::vector<std::string> fields;   // kernel-specific workload fields it uses
  std::vector<std::string> inputs;   // .npy stems, in generation / allocation order
  std::vector<std::string> outputs;
};

const std::vector<KernelSpec>& Specs() {
  static const auto* const specs = new std::vector<KernelSpec>{
      {pb::SELFTEST_GEMM, {"gemm_m", "gemm_k", "gemm_n", "cube"}, {"a", "b"}, {"o"}},
      {pb::SELFTEST_ALLREDUCE, {"vector_len", "cube"}, {"x"}, {"o"}},
      {pb::SELFTEST_DEADLOCK, {"cube"}, {}, {}},
  };
  return *specs;
}

const KernelSpec* SpecOf(pb::Kernel kernel) {
  for (const KernelSpec& spec : Specs()) {
    if (spec.kernel == kernel) return &spec;
  }
  return nullptr;
}

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::Status CheckKernel(const pb::Workload& w) {
  const std::string name = pb::Kernel_Name(w.kernel());
  std::vector<std::string> implemented = {"DECODE"};
  for (const KernelSpec& spec : Specs()) implemented.push_back(pb::Kernel_Name(spec.kernel));
  if (w.kernel() == pb::KERNEL_UNSPECIFIED) {
    return Invalid(absl::StrCat("kernel: must be set (implemented: ",
                                absl::StrJoin(implemented, ", "), ")"));
  }
  if (name.empty()) return Invalid(absl::StrCat("kernel: unknown value ", w.kernel()));
  if (SpecOf(w.kernel()) == nullptr) {
    return Invalid(absl::StrCat("kernel: ", name, " is not implemented yet (implemented: ",
                                absl::StrJoin(implemented, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::Status Positive(const std::string& field, uint64_t value) {
  if (value == 0) return Invalid(absl::StrCat(field, " must be > 0 (got 0)"));
  return absl::OkStatus();
}

std::vector<uint32_t> PesOfCube(const topology::ChipIndex& index, uint32_t cube) {
  const topology::CubeId c = index.CubeOf(cube);
  std::vector<uint32_t> pes;
  for (uint32_t p = 0; p < index.pes_per_cube(); ++p) {
    pes.push_back(index.GlobalPe(topology::PeId{c.sip, c.cube, p}));
  }
  return pes;
}

// The IPCQ neighbour a SELFTEST_DEADLOCK PE receives from: the first of N, S, E, W.
topology::Dir FirstNeighbour(const topology::Mesh& mesh, uint32_t pe_in_cube) {
  for (topology::Dir dir : topology::kAllDirs) {
    if (mesh.Neighbour(pe_in_cube, dir)) return dir;
  }
  return topology::Dir::kNorth;  // unreachable: validation requires >= 2 PEs
}

// One tensor the host places: inputs and outputs of a kernel.
struct HostTensor {
  std::string name;
  std::vector<uint64_t> shape;
  pb::DType dtype = pb::FP32;
  bool row_wise = false;  // over the CUBE's PEs (axis 0), else on `pes` replicated
};

// The kernel's tensors: inputs, then outputs (the spec's order).
std::vector<HostTensor> TensorsOf(const pb::Workload& w, uint32_t pes) {
  switch (w.kernel()) {
    case pb::SELFTEST_GEMM:
      return {{"a", {w.gemm_m(), w.gemm_k()}, pb::BF16, false},
              {"b", {w.gemm_k(), w.gemm_n()}, pb::BF16, false},
              {"o", {w.gemm_m(), w.gemm_n()}, pb::FP32, false}};
    case pb::SELFTEST_ALLREDUCE:
      return {{"x", {pes, w.vector_len()}, pb::FP32, true},
              {"o", {pes, w.vector_len()}, pb::FP32, true}};
    default:
      return {};
  }
}

std::string Summary(const pb::Workload& w, const topology::ChipIndex& index,
                    const std::vector<uint32_t>& pes) {
  const std::string mode = w.data() ? "data mode" : "timing mode";
  const std::string cube = absl::StrCat("CUBE ", w.cube());
  switch (w.kernel()) {
    case pb::SELFTEST_GEMM:
      return absl::StrCat("selftest_gemm: out [", w.gemm_m(), ", ", w.gemm_n(), "] = A [",
                          w.gemm_m(), ", ", w.gemm_k(), "] · B [", w.gemm_k(), ", ", w.gemm_n(),
                          "] on ", host::PeName(index, pes[0]), "; ", mode);
    case pb::SELFTEST_ALLREDUCE:
      return absl::StrCat("selftest_allreduce: ring all-reduce of ", w.vector_len(),
                          " fp32 over IPCQ, ", pes.size(), " PEs of ", cube, "; ", mode);
    case pb::SELFTEST_DEADLOCK:
      return absl::StrCat("selftest_deadlock: every PE of ", cube,
                          " receives from a neighbour that never sends; ", mode);
    default:
      return "";
  }
}

}  // namespace

absl::Status ValidateWorkload(const pb::Chip& chip, const pb::Workload& w) {
  if (w.kernel() == pb::DECODE) return DecodeConfigOf(chip, w).status();
  if (absl::Status s = CheckKernel(w); !s.ok()) return s;
  const KernelSpec& spec = *SpecOf(w.kernel());
  if (absl::Status s = CheckUnusedWorkloadFields(w, pb::Kernel_Name(spec.kernel), spec.fields);
      !s.ok()) {
    return s;
  }
  const topology::ChipIndex index(chip);
  if (w.cube() >= index.num_cubes()) {
    return Invalid(absl::StrCat("cube: ", w.cube(), " is outside the chip's ", index.num_cubes(),
                                " CUBEs"));
  }
  const pb::Tcm& tcm = chip.sip().cube().pe().tcm();
  const uint64_t scratch = tcm.scratch_bytes();
  const uint64_t persistent = tcm.total_bytes() - tcm.scratch_bytes();
  const uint64_t region = chip.sip().cube().hbm_bytes() / chip.sip().cube().pes();
  const topology::Mesh& mesh = index.pe_mesh();
  switch (w.kernel()) {
    case pb::SELFTEST_GEMM: {
      for (const auto& [field, value] : {std::pair<std::string, uint64_t>{"gemm_m", w.gemm_m()},
                                         {"gemm_k", w.gemm_k()},
                                         {"gemm_n", w.gemm_n()}}) {
        if (absl::Status s = Positive(field, value); !s.ok()) return s;
      }
      const U128 m = w.gemm_m(), k = w.gemm_k(), n = w.gemm_n();
      const U128 a = m * k * 2, b = k * n * 2, out = m * n * 4;
      if (AlignUp(a, kTcmAlign) + out > scratch) {
        return Invalid(absl::StrCat(
            "gemm_m, gemm_k, gemm_n: A [", w.gemm_m(), ", ", w.gemm_k(), "] bf16 and out [",
            w.gemm_m(), ", ", w.gemm_n(), "] fp32 do not fit the PE's TCM scratch arena (",
            scratch, " B)"));
      }
      const uint64_t align = host::HbmAllocator::kDefaultAlign;
      if (AlignUp(a, align) + AlignUp(b, align) + out > region) {
        return Invalid(absl::StrCat("gemm_k, gemm_n: B [", w.gemm_k(), ", ", w.gemm_n(),
                                    "] bf16 with A and out does not fit the PE's HBM region (",
                                    region, " B)"));
      }
      break;
    }
    case pb::SELFTEST_ALLREDUCE: {
      if (absl::Status s = Positive("vector_len", w.vector_len()); !s.ok()) return s;
      if (!kernels::selftest::SnakeRing(mesh.rows(), mesh.cols())) {
        return Invalid(absl::StrCat("kernel: SELFTEST_ALLREDUCE needs a ring over IPCQ "
                                    "neighbours; the chip's ",
                                    mesh.rows(), "x", mesh.cols(), " PE mesh has none"));
      }
      const U128 bytes = U128{w.vector_len()} * 4;
      if (bytes > scratch || AlignUp(bytes, kTcmAlign) + bytes > persistent) {
        return Invalid(absl::StrCat(
            "vector_len: ", w.vector_len(), " fp32 elements do not fit the PE's TCM (one vector "
            "in the ", scratch, " B scratch arena, two in the ", persistent,
            " B persistent arena)"));
      }
      break;
    }
    case pb::SELFTEST_DEADLOCK:
      if (mesh.size() < 2) {
        return Invalid(absl::StrCat(
            "kernel: SELFTEST_DEADLOCK needs at least 2 PEs per CUBE (the chip has ", mesh.size(),
            ")"));
      }
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

// The kernel's own run (RunWorkload adds save_inputs around it).
static absl::StatusOr<LaunchResult> RunKernelWorkload(const pb::Chip& chip, const pb::Workload& w,
                                                      const LaunchOptions& options);

absl::StatusOr<LaunchResult> RunWorkload(const pb::Chip& chip, const pb::Workload& w,
                                         const LaunchOptions& options) {
  if (options.save_inputs) {
    if (!w.data()) return Invalid("save_inputs: needs data mode (the workload's data is false)");
    if (options.outputs_dir.empty()) return Invalid("save_inputs: needs outputs_dir (where to write)");
    if (!options.inputs_dir.empty()) {
      return Invalid("save_inputs: the inputs come from inputs_dir; nothing is generated to save");
    }
  }
  absl::StatusOr<LaunchResult> result = RunKernelWorkload(chip, w, options);
  if (!result.ok() || !options.save_inputs) return result;
  for (const auto& [name, array] : result->inputs) {
    if (absl::Status s = host::WriteNpy(host::NpyPath(options.outputs_dir, name), array.shape,
                                        array.data);
        !s.ok()) {
      return s;
    }
  }
  return result;
}

static absl::StatusOr<LaunchResult> RunKernelWorkload(const pb::Chip& chip, const pb::Workload& w,
                                                      const LaunchOptions& options) {
  if (w.kernel() == pb::DECODE) return RunDecodeWorkload(chip, w, options);
  if (absl::Status s = ValidateWorkload(chip, w); !s.ok()) return s;
  const KernelSpec& spec = *SpecOf(w.kernel());
  const std::string kernel_name = pb::Kernel_Name(w.kernel());
  const bool data = w.data();
  for (const auto& [flag, dir, names] :
       {std::tuple<std::string, std::string, const std::vector<std::string>*>{
            "inputs_dir", options.inputs_dir, &spec.inputs},
        {"outputs_dir", options.outputs_dir, &spec.outputs}}) {
    if (dir.empty()) continue;
    if (!data) {
      return Invalid(absl::StrCat(flag, ": needs data mode (the workload's data is false)"));
    }
    if (names->empty()) return Invalid(absl::StrCat(flag, ": ", kernel_name, " has none"));
  }

  const topology::ChipIndex index(chip);
  const std::vector<uint32_t> pes = PesOfCube(index, w.cube());
  const std::vector<HostTensor> tensors = TensorsOf(w, static_cast<uint32_t>(pes.size()));

  // Data-mode inputs: from inputs_dir, else from the seed.
  std::map<std::string, host::NpyArray> arrays;
  if (data) {
    std::mt19937_64 rng(w.seed());
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      const HostTensor& t = tensors[i];
      if (!options.inputs_dir.empty()) {
        const std::string path = host::NpyPath(options.inputs_dir, t.name);
        absl::StatusOr<host::NpyArray> array = host::ReadNpy(path);
        if (!array.ok()) return array.status();
        if (absl::Status s = host::ExpectShape(path, *array, t.shape); !s.ok()) return s;
        arrays[t.name] = std::move(*array);
      } else {
        host::NpyArray array;
        array.shape = t.shape;
        uint64_t elements = 1;
        for (uint64_t d : t.shape) elements *= d;
        array.data.resize(elements);
        for (float& v : array.data) v = uniform(rng);
        arrays[t.name] = std::move(array);
      }
    }
  }

  // The simulation of the kernel's CUBE, its op log streamed to trace_path.
  std::unique_ptr<std::ofstream> trace;
  sim::ChipSimOptions sim_options;
  sim_options.issue_cost_profile = w.issue_cost_profile();
  sim_options.per_tile_detail = options.per_tile_detail;
  sim_options.keep_op_log = options.keep_op_log;
  sim_options.cubes = {w.cube()};
  sim_options.workload_summary = Summary(w, index, pes);
  if (!options.trace_path.empty()) {
    trace = std::make_unique<std::ofstream>(options.trace_path, std::ios::binary | std::ios::trunc);
    if (!*trace) return Invalid(absl::StrCat("trace: cannot write ", options.trace_path));
    sim_options.op_log_stream = trace.get();
  }
  absl::StatusOr<std::unique_ptr<sim::ChipSim>> created = sim::ChipSim::Create(chip, sim_options);
  if (!created.ok()) return created.status();
  std::unique_ptr<sim::ChipSim> sim = std::move(*created);
  std::unique_ptr<kernels::MemoryStore> store;
  if (data) store = std::make_unique<kernels::MemoryStore>(chip);

  // Placement: inputs then outputs.
  LaunchResult result;
  host::HbmAllocator allocator(chip);
  std::map<std::string, host::PlacedTensor> placed;
  for (const HostTensor& t : tensors) {
    const std::vector<uint32_t> first = {pes[0]};
    absl::StatusOr<host::PlacedTensor> p =
        t.row_wise ? host::PlaceRowWise(allocator, t.name, t.shape, t.dtype, 0, pes)
                   : host::PlaceReplicated(allocator, t.name, t.shape, t.dtype, first);
    if (!p.ok()) return p.status();
    placed.emplace(t.name, std::move(*p));
  }
  if (data) {
    for (const std::string& name : spec.inputs) {
      if (absl::Status s = host::Scatter(*store, placed.at(name), arrays.at(name)); !s.ok()) {
        return s;
      }
      absl::StatusOr<std::vector<float>> seen = host::Gather(*store, placed.at(name));
      if (!seen.ok()) return seen.status();
      result.inputs[name] = host::NpyArray{placed.at(name).shape(), std::move(*seen)};
    }
  }

  // One kernel instance per participating PE (request 0).
  kernels::KernelRuntime runtime(sim.get(), store.get());
  const topology::Mesh& mesh = index.pe_mesh();
  const auto addr = [&](const std::string& name, size_t shard) {
    return placed.at(name).shards().at(shard).ref.addr();
  };
  std::vector<std::pair<uint32_t, kernels::KernelFn>> instances;
  switch (w.kernel()) {
    case pb::SELFTEST_GEMM: {
      kernels::selftest::GemmArgs args;
      args.a_addr = addr("a", 0);
      args.b_addr = addr("b", 0);
      args.out_addr = addr("o", 0);
      args.m = w.gemm_m();
      args.k = w.gemm_k();
      args.n = w.gemm_n();
      instances.emplace_back(pes[0], [args](kernels::Tl& tl) {
        return kernels::selftest::Gemm(tl, args);
      });
      break;
    }
    case pb::SELFTEST_ALLREDUCE: {
      const std::vector<uint32_t> ring = *kernels::selftest::SnakeRing(mesh.rows(), mesh.cols());
      const size_t p_count = ring.size();
      for (size_t i = 0; i < p_count; ++i) {
        const uint32_t p = ring[i];
        kernels::selftest::AllReduceArgs args;
        args.in_addr = addr("x", p);
        args.out_addr = addr("o", p);
        args.n = w.vector_len();
        args.steps = static_cast<uint32_t>(p_count - 1);
        if (p_count > 1) {
          args.next = kernels::selftest::DirTo(mesh, p, ring[(i + 1) % p_count]);
          args.prev = kernels::selftest::DirTo(mesh, p, ring[(i + p_count - 1) % p_count]);
        }
        instances.emplace_back(pes[p], [args](kernels::Tl& tl) {
          return kernels::selftest::AllReduce(tl, args);
        });
      }
      break;
    }
    case pb::SELFTEST_DEADLOCK:
      for (uint32_t p = 0; p < pes.size(); ++p) {
        const topology::Dir from = FirstNeighbour(mesh, p);
        instances.emplace_back(pes[p], [from](kernels::Tl& tl) {
          return kernels::selftest::Deadlock(tl, from);
        });
      }
      break;
    default:
      break;
  }
  std::sort(instances.begin(), instances.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [pe, fn] : instances) {
    if (absl::Status s = runtime.AddKernel(pe, 0, std::move(fn)); !s.ok()) return s;
  }

  result.runtime_status = runtime.Run();
  if (trace) {
    trace->close();
    if (!*trace) return Invalid(absl::StrCat("trace: write to ", options.trace_path, " failed"));
  }
  result.report = sim->BuildReport();
  result.op_log = sim->TakeOpLogRecords();
  if (!result.runtime_status.ok() || !data) return result;

  for (const std::string& name : spec.outputs) {
    absl::StatusOr<std::vector<float>> values = host::Gather(*store, placed.at(name));
    if (!values.ok()) return values.status();
    host::NpyArray array{placed.at(name).shape(), std::move(*values)};
    if (!options.outputs_dir.empty()) {
      if (absl::Status s = host::WriteNpy(host::NpyPath(options.outputs_dir, name), array.shape,
                                          array.data);
          !s.ok()) {
        return s;
      }
    }
    result.outputs[name] = std::move(array);
  }
  return result;
}

}  // namespace ahbm::launch
