// The self-test launchers (kernels/selftest/selftest.h), P = PEs per CUBE; only CUBE `cube`
// is simulated. Contract:
//   SELFTEST_GEMM       fields gemm_m/k/n (> 0), cube. On PE 0 of the CUBE: a.npy [M, K] and
//                       b.npy [K, N] (bf16 in its HBM), out o.npy [M, N] (fp32); A and out
//                       must fit the TCM scratch arena, A, B and out the PE's HBM region.
//   SELFTEST_ALLREDUCE  fields vector_len (> 0), cube. On every PE of the CUBE: x.npy
//                       [P, vector_len] (row p = PE p's vector, fp32 in its HBM), out o.npy
//                       [P, vector_len] (row p = what PE p holds: the sum of all rows). Ring
//                       order: SnakeRing over the PE mesh (refused without one); one vector must
//                       fit the scratch arena, two the persistent arena.
//   SELFTEST_DEADLOCK   field cube. On every PE of the CUBE (at least 2): a receive from its
//                       first IPCQ neighbour in the order N, S, E, W; nobody sends. No inputs,
//                       no outputs.
//   SELFTEST_ARENA_OVERFLOW field cube. On PE 0 of the CUBE: a scratch allocation one 64-byte
//                       block larger than the scratch arena (the run fails: a kernel fault).
//                       No inputs, no outputs.
//   Errors: "cube: 99 is outside the chip's 8 CUBEs", "gemm_m: must be > 0 (got 0)", ...
//   Inputs from the seed: std::mt19937_64(seed), uniform(-1, 1) in float, drawn in row-major
//   order of each input in the order listed, then rounded by the store to the tensor's dtype.
//   HBM addresses: host::HbmAllocator, inputs then outputs, in the order listed.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/host/placement.h"
#include "kernels/launch/launcher.h"
#include "kernels/selftest/selftest.h"
#include "topology/ids.h"
#include "topology/mesh.h"

namespace ahbm::launch {
namespace {

using U128 = unsigned __int128;

// TCM allocations of the kernel runtime are 64-byte aligned (kernels/runtime/runtime.cc).
constexpr uint64_t kTcmAlign = 64;

U128 AlignUp(U128 v, uint64_t align) { return (v + align - 1) / align * align; }

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::Status Positive(const std::string& field, uint64_t value) {
  if (value == 0) return Invalid(absl::StrCat(field, ": must be > 0 (got 0)"));
  return absl::OkStatus();
}

absl::Status CheckCube(const pb::Chip& chip, const pb::Workload& w) {
  const topology::ChipIndex index(chip);
  if (w.cube() >= index.num_cubes()) {
    return Invalid(absl::StrCat("cube: ", w.cube(), " is outside the chip's ", index.num_cubes(),
                                " CUBEs"));
  }
  return absl::OkStatus();
}

// One tensor the host places.
struct HostTensor {
  std::string name;
  std::vector<uint64_t> shape;
  pb::DType dtype = pb::FP32;
  bool row_wise = false;  // over the CUBE's PEs (axis 0), else on PE 0
};

using Instances = std::vector<std::pair<uint32_t, kernels::KernelFn>>;

// What the self-tests share: one CUBE, `inputs` then outputs placed in that order, inputs
// uniform(-1, 1) from the seed, one instance per participating PE (request 0).
class SelftestPlan : public KernelPlan {
 public:
  SelftestPlan(const pb::Chip& chip, const pb::Workload& w, std::vector<HostTensor> tensors,
               size_t inputs)
      : w_(w), index_(chip), tensors_(std::move(tensors)), inputs_(inputs), allocator_(chip) {
    const topology::CubeId c = index_.CubeOf(w.cube());
    for (uint32_t p = 0; p < index_.pes_per_cube(); ++p) {
      pes_.push_back(index_.GlobalPe(topology::PeId{c.sip, c.cube, p}));
    }
  }

  std::vector<uint32_t> Cubes() const override { return {w_.cube()}; }
  bool HasInputs() const override { return inputs_ > 0; }
  bool HasOutputs() const override { return tensors_.size() > inputs_; }

  absl::Status LoadInputs(const std::string& inputs_dir, uint64_t seed) override {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (size_t i = 0; i < inputs_; ++i) {
      const HostTensor& t = tensors_[i];
      if (!inputs_dir.empty()) {
        absl::StatusOr<host::NpyArray> array = ReadNpyInput(inputs_dir, t.name, t.shape);
        RETURN_IF_ERROR(array.status());
        arrays_[t.name] = std::move(*array);
        continue;
      }
      host::NpyArray array;
      array.shape = t.shape;
      uint64_t elements = 1;
      for (uint64_t d : t.shape) elements *= d;
      array.data.resize(elements);
      for (float& v : array.data) v = uniform(rng);
      arrays_[t.name] = std::move(array);
    }
    return absl::OkStatus();
  }

  absl::Status Launch(kernels::KernelRuntime& runtime, kernels::MemoryStore* store) override {
    const std::vector<uint32_t> first = {pes_[0]};
    for (const HostTensor& t : tensors_) {
      absl::StatusOr<host::PlacedTensor> p =
          t.row_wise ? host::PlaceRowWise(allocator_, t.name, t.shape, t.dtype, 0, pes_)
                     : host::PlaceReplicated(allocator_, t.name, t.shape, t.dtype, first);
      RETURN_IF_ERROR(p.status());
      placed_.emplace(t.name, std::move(*p));
    }
    if (store != nullptr) {
      for (size_t i = 0; i < inputs_; ++i) {
        const std::string& name = tensors_[i].name;
        RETURN_IF_ERROR(host::Scatter(*store, placed_.at(name), arrays_.at(name)));
      }
    }
    Instances instances = MakeInstances();
    std::sort(instances.begin(), instances.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [pe, fn] : instances) {
      RETURN_IF_ERROR(runtime.AddKernel(pe, 0, std::move(fn)));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<NpyArrays> SeenInputs(const kernels::MemoryStore& store) const override {
    return Read(store, 0, inputs_);
  }
  absl::StatusOr<NpyArrays> Gather(const kernels::MemoryStore& store) const override {
    return Read(store, inputs_, tensors_.size());
  }

 protected:
  virtual Instances MakeInstances() const = 0;

  uint64_t Addr(const std::string& name, size_t shard) const {
    return placed_.at(name).shards().at(shard).ref.addr();
  }
  std::string Mode() const { return w_.data() ? "data mode" : "timing mode"; }

  pb::Workload w_;
  topology::ChipIndex index_;
  std::vector<uint32_t> pes_;

 private:
  absl::StatusOr<NpyArrays> Read(const kernels::MemoryStore& store, size_t from,
                                 size_t to) const {
    NpyArrays out;
    for (size_t i = from; i < to; ++i) {
      const host::PlacedTensor& t = placed_.at(tensors_[i].name);
      absl::StatusOr<std::vector<float>> values = host::Gather(store, t);
      RETURN_IF_ERROR(values.status());
      out[tensors_[i].name] = host::NpyArray{t.shape(), std::move(*values)};
    }
    return out;
  }

  std::vector<HostTensor> tensors_;
  size_t inputs_;
  host::HbmAllocator allocator_;
  NpyArrays arrays_;
  std::map<std::string, host::PlacedTensor> placed_;
};

class GemmPlan final : public SelftestPlan {
 public:
  GemmPlan(const pb::Chip& chip, const pb::Workload& w)
      : SelftestPlan(chip, w,
                     {{"a", {w.gemm_m(), w.gemm_k()}, pb::BF16},
                      {"b", {w.gemm_k(), w.gemm_n()}, pb::BF16},
                      {"o", {w.gemm_m(), w.gemm_n()}, pb::FP32}},
                     2) {}
  std::string Summary() const override {
    return absl::StrCat("selftest_gemm: out [", w_.gemm_m(), ", ", w_.gemm_n(), "] = A [",
                        w_.gemm_m(), ", ", w_.gemm_k(), "] · B [", w_.gemm_k(), ", ",
                        w_.gemm_n(), "] on ", host::PeName(index_, pes_[0]), "; ", Mode());
  }

 private:
  Instances MakeInstances() const override {
    kernels::selftest::GemmArgs args;
    args.a_addr = Addr("a", 0);
    args.b_addr = Addr("b", 0);
    args.out_addr = Addr("o", 0);
    args.m = w_.gemm_m();
    args.k = w_.gemm_k();
    args.n = w_.gemm_n();
    Instances out;
    out.emplace_back(pes_[0], [args](kernels::Tl& tl) { return kernels::selftest::Gemm(tl, args); });
    return out;
  }
};

class GemmLauncher final : public KernelLauncher {
 public:
  pb::Kernel kernel() const override { return pb::SELFTEST_GEMM; }
  std::vector<std::string> Fields() const override { return {"gemm_m", "gemm_k", "gemm_n", "cube"}; }
  absl::StatusOr<std::unique_ptr<KernelPlan>> Prepare(const pb::Chip& chip,
                                                      const pb::Workload& w) const override {
    RETURN_IF_ERROR(CheckCube(chip, w));
    for (const auto& [field, value] : {std::pair<std::string, uint64_t>{"gemm_m", w.gemm_m()},
                                       {"gemm_k", w.gemm_k()},
                                       {"gemm_n", w.gemm_n()}}) {
      RETURN_IF_ERROR(Positive(field, value));
    }
    const pb::Tcm& tcm = chip.sip().cube().pe().tcm();
    const uint64_t region = chip.sip().cube().hbm_bytes() / chip.sip().cube().pes();
    const U128 m = w.gemm_m(), k = w.gemm_k(), n = w.gemm_n();
    const U128 a = m * k * 2, b = k * n * 2, out = m * n * 4;
    if (AlignUp(a, kTcmAlign) + out > tcm.scratch_bytes()) {
      return Invalid(absl::StrCat(
          "gemm_m, gemm_k, gemm_n: A [", w.gemm_m(), ", ", w.gemm_k(), "] bf16 and out [",
          w.gemm_m(), ", ", w.gemm_n(), "] fp32 do not fit the PE's TCM scratch arena (",
          tcm.scratch_bytes(), " B)"));
    }
    const uint64_t align = host::HbmAllocator::kDefaultAlign;
    if (AlignUp(a, align) + AlignUp(b, align) + out > region) {
      return Invalid(absl::StrCat("gemm_k, gemm_n: B [", w.gemm_k(), ", ", w.gemm_n(),
                                  "] bf16 with A and out does not fit the PE's HBM region (",
                                  region, " B)"));
    }
    return std::make_unique<GemmPlan>(chip, w);
  }
};

class AllReducePlan final : public SelftestPlan {
 public:
  AllReducePlan(const pb::Chip& chip, const pb::Workload& w)
      : SelftestPlan(chip, w, Tensors(chip, w), 1) {}
  std::string Summary() const override {
    return absl::StrCat("selftest_allreduce: ring all-reduce of ", w_.vector_len(),
                        " fp32 over IPCQ, ", pes_.size(), " PEs of CUBE ", w_.cube(), "; ",
                        Mode());
  }

 private:
  static std::vector<HostTensor> Tensors(const pb::Chip& chip, const pb::Workload& w) {
    const uint64_t pes = chip.sip().cube().pes();
    return {{"x", {pes, w.vector_len()}, pb::FP32, true},
            {"o", {pes, w.vector_len()}, pb::FP32, true}};
  }
  Instances MakeInstances() const override {
    const topology::Mesh& mesh = index_.pe_mesh();
    const std::vector<uint32_t> ring = *kernels::selftest::SnakeRing(mesh.rows(), mesh.cols());
    const size_t p_count = ring.size();
    Instances out;
    for (size_t i = 0; i < p_count; ++i) {
      const uint32_t p = ring[i];
      kernels::selftest::AllReduceArgs args;
      args.in_addr = Addr("x", p);
      args.out_addr = Addr("o", p);
      args.n = w_.vector_len();
      args.steps = static_cast<uint32_t>(p_count - 1);
      if (p_count > 1) {
        args.next = kernels::selftest::DirTo(mesh, p, ring[(i + 1) % p_count]);
        args.prev = kernels::selftest::DirTo(mesh, p, ring[(i + p_count - 1) % p_count]);
      }
      out.emplace_back(pes_[p], [args](kernels::Tl& tl) {
        return kernels::selftest::AllReduce(tl, args);
      });
    }
    return out;
  }
};

class AllReduceLauncher final : public KernelLauncher {
 public:
  pb::Kernel kernel() const override { return pb::SELFTEST_ALLREDUCE; }
  std::vector<std::string> Fields() const override { return {"vector_len", "cube"}; }
  absl::StatusOr<std::unique_ptr<KernelPlan>> Prepare(const pb::Chip& chip,
                                                      const pb::Workload& w) const override {
    RETURN_IF_ERROR(CheckCube(chip, w));
    RETURN_IF_ERROR(Positive("vector_len", w.vector_len()));
    const topology::ChipIndex index(chip);
    const topology::Mesh& mesh = index.pe_mesh();
    if (!kernels::selftest::SnakeRing(mesh.rows(), mesh.cols())) {
      return Invalid(absl::StrCat("kernel: SELFTEST_ALLREDUCE needs a ring over IPCQ "
                                  "neighbours; the chip's ",
                                  mesh.rows(), "x", mesh.cols(), " PE mesh has none"));
    }
    const pb::Tcm& tcm = chip.sip().cube().pe().tcm();
    const uint64_t scratch = tcm.scratch_bytes();
    const uint64_t persistent = tcm.total_bytes() - tcm.scratch_bytes();
    const U128 bytes = U128{w.vector_len()} * 4;
    if (bytes > scratch || AlignUp(bytes, kTcmAlign) + bytes > persistent) {
      return Invalid(absl::StrCat(
          "vector_len: ", w.vector_len(), " fp32 elements do not fit the PE's TCM (one vector "
          "in the ", scratch, " B scratch arena, two in the ", persistent,
          " B persistent arena)"));
    }
    return std::make_unique<AllReducePlan>(chip, w);
  }
};

// The IPCQ neighbour a SELFTEST_DEADLOCK PE receives from: the first of N, S, E, W.
topology::Dir FirstNeighbour(const topology::Mesh& mesh, uint32_t pe_in_cube) {
  for (topology::Dir dir : topology::kAllDirs) {
    if (mesh.Neighbour(pe_in_cube, dir)) return dir;
  }
  return topology::Dir::kNorth;  // unreachable: validation requires >= 2 PEs
}

class DeadlockPlan final : public SelftestPlan {
 public:
  DeadlockPlan(const pb::Chip& chip, const pb::Workload& w) : SelftestPlan(chip, w, {}, 0) {}
  std::string Summary() const override {
    return absl::StrCat("selftest_deadlock: every PE of CUBE ", w_.cube(),
                        " receives from a neighbour that never sends; ", Mode());
  }

 private:
  Instances MakeInstances() const override {
    Instances out;
    for (uint32_t p = 0; p < pes_.size(); ++p) {
      const topology::Dir from = FirstNeighbour(index_.pe_mesh(), p);
      out.emplace_back(pes_[p], [from](kernels::Tl& tl) {
        return kernels::selftest::Deadlock(tl, from);
      });
    }
    return out;
  }
};

class DeadlockLauncher final : public KernelLauncher {
 public:
  pb::Kernel kernel() const override { return pb::SELFTEST_DEADLOCK; }
  std::vector<std::string> Fields() const override { return {"cube"}; }
  absl::StatusOr<std::unique_ptr<KernelPlan>> Prepare(const pb::Chip& chip,
                                                      const pb::Workload& w) const override {
    RETURN_IF_ERROR(CheckCube(chip, w));
    const topology::ChipIndex index(chip);
    const uint32_t pes = index.pe_mesh().size();
    if (pes < 2) {
      return Invalid(absl::StrCat(
          "kernel: SELFTEST_DEADLOCK needs at least 2 PEs per CUBE (the chip has ", pes, ")"));
    }
    return std::make_unique<DeadlockPlan>(chip, w);
  }
};

class ArenaOverflowPlan final : public SelftestPlan {
 public:
  ArenaOverflowPlan(const pb::Chip& chip, const pb::Workload& w)
      : SelftestPlan(chip, w, {}, 0),
        floats_((chip.sip().cube().pe().tcm().scratch_bytes() + kTcmAlign) / 4) {}
  std::string Summary() const override {
    return absl::StrCat("selftest_arena_overflow: PE 0 of CUBE ", w_.cube(),
                        " allocates past its scratch arena; ", Mode());
  }

 private:
  Instances MakeInstances() const override {
    Instances out;
    out.emplace_back(pes_[0], [floats = floats_](kernels::Tl& tl) {
      return kernels::selftest::ArenaOverflow(tl, floats);
    });
    return out;
  }

  uint64_t floats_;  // one 64-byte block more than the scratch arena holds
};

class ArenaOverflowLauncher final : public KernelLauncher {
 public:
  pb::Kernel kernel() const override { return pb::SELFTEST_ARENA_OVERFLOW; }
  std::vector<std::string> Fields() const override { return {"cube"}; }
  absl::StatusOr<std::unique_ptr<KernelPlan>> Prepare(const pb::Chip& chip,
                                                      const pb::Workload& w) const override {
    RETURN_IF_ERROR(CheckCube(chip, w));
    return std::make_unique<ArenaOverflowPlan>(chip, w);
  }
};

}  // namespace

AHBM_REGISTER_LAUNCHER(GemmLauncher);
AHBM_REGISTER_LAUNCHER(AllReduceLauncher);
AHBM_REGISTER_LAUNCHER(DeadlockLauncher);
AHBM_REGISTER_LAUNCHER(ArenaOverflowLauncher);

}  // namespace ahbm::launch
