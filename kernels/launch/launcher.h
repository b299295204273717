// One launcher per kernel: the per-kernel part of `ahbm run` / `ahbm compare`, registered by
// pb::Kernel. The shared path (launch.cc RunWorkload) does everything else once for all
// kernels: the registry lookup, the unused-field check, the data-mode checks of inputs_dir /
// outputs_dir / save_inputs, the trace file, ChipSimOptions, the MemoryStore, the
// KernelRuntime, the run and its deadlock status, the report, the .npy writes.
//
// Adding a kernel = one new file `kernels/launch/<kernel>_run.cc` (picked up by the BUILD glob;
// add its kernel library to the `launch` deps) that defines
//   class MyLauncher : public KernelLauncher  — kernel(), Fields(), Prepare(), maybe Compare()
//   class MyPlan : public KernelPlan          — what Prepare returns for one valid workload
// and ends with AHBM_REGISTER_LAUNCHER(MyLauncher). decode_run.cc is the example; the helpers
// at the end (RequestStem, ReadNpyInput, ReadQkvInputs, Bf16QkvArrays) give DESIGN §6's .npy
// conventions.
//
// The shared path's order (RunWorkload, launch.cc; also its error precedence): save_inputs's
// own checks → lookup ("kernel: ...") → set fields outside Fields() ("<field>: not used by
// <KERNEL> (got <v>); leave it unset") → explicit zeros (CheckGivenValues, workload_io.h:
// "<field>: must be > 0 (got 0); ...") → Prepare (defaults, validation, capacity: one-line
// InvalidArgument naming the field) → inputs_dir / outputs_dir checks (data mode; HasInputs /
// HasOutputs) → LoadInputs (data mode) → Cubes → CubeSets (islands, one_group) → the trace
// files → ChipSim over the CUBEs with Summary() → Launch → SeenInputs (data mode) → the rounds and
// counts, CommHops → Run → the report → Gather (data mode, run OK) → the .npy writes.
#ifndef AHBMSIM_KERNELS_LAUNCH_LAUNCHER_H_
#define AHBMSIM_KERNELS_LAUNCH_LAUNCHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/host/npy.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::launch {

// Host tensors by .npy file stem ("q", "k3", "o").
using NpyArrays = std::map<std::string, host::NpyArray>;

// One validated workload of one kernel, from Prepare to Gather. The shared path calls, in order:
// HasInputs / HasOutputs, LoadInputs (data mode), Cubes, CubeSets, Summary, Launch, SeenInputs
// (data mode), ReduceRounds / Level2Rounds / Level1Rounds / RingRotations / Composites /
// GridComposites, CommHops, then (the run OK, data mode) Gather.
class KernelPlan {
 public:
  virtual ~KernelPlan() = default;
  // The global CUBEs the ChipSim builds (ChipSimOptions::cubes).
  virtual std::vector<uint32_t> Cubes() const = 0;
  // The report's workload line, "decode OPT3: H_q 64, ...; timing mode".
  virtual std::string Summary() const = 0;
  // false: inputs_dir (outputs_dir) is refused with "<flag>: <KERNEL> has none".
  virtual bool HasInputs() const { return true; }
  virtual bool HasOutputs() const { return true; }
  // Data mode only, before the simulation exists: read the inputs from `inputs_dir`
  // (ReadNpyInput) or, when it is empty, draw them from `seed`; keep them in the plan.
  virtual absl::Status LoadInputs(const std::string& inputs_dir, uint64_t seed) = 0;
  // Place the tensors (store non-null in data mode: write the loaded inputs) and add every
  // kernel instance to `runtime`.
  virtual absl::Status Launch(kernels::KernelRuntime& runtime, kernels::MemoryStore* store) = 0;
  // Data mode, after Launch: the inputs as the kernels see them (rounded to their dtype).
  virtual absl::StatusOr<NpyArrays> SeenInputs(const kernels::MemoryStore& store) const = 0;
  // Data mode, after a run whose status is OK: the outputs.
  virtual absl::StatusOr<NpyArrays> Gather(const kernels::MemoryStore& store) const = 0;
  // Report extras, after Launch: the legs of the communication critical path the roofline adds
  // (CommCriticalPathPs prices them on a chip) and LaunchResult::reduce_rounds.
  virtual std::vector<pb::CommHop> CommHops() const { return {}; }
  virtual uint32_t ReduceRounds() const { return 0; }
  // DECODE: ReduceRounds' two levels apart (Level-2 inside a CUBE, Level-1 across the group).
  virtual uint32_t Level2Rounds() const { return 0; }
  virtual uint32_t Level1Rounds() const { return 0; }
  // PREFILL ring (and baseline_dot, its placement): the sequential K/V rotations of a rank —
  // C - 1 per query chunk; the causal skip drops compute, not rotations.
  virtual uint32_t RingRotations() const { return 0; }
  // LaunchResult::composites / grid_composites (prefill's causal skip), after Launch.
  virtual uint64_t Composites() const { return 0; }
  virtual uint64_t GridComposites() const { return 0; }
  // Sets of Cubes() whose kernel instances exchange messages only among themselves (a KV
  // head's CUBE Group; a CUBE in no set talks to no other). Empty: unknown, one island. A run
  // without an op log simulates the merged sets as Engine islands, one after the other (the
  // same results; 512 PEs at once do not fit the host's caches, one CUBE Group does). Fails
  // as the kernel's placement does (the run is refused).
  virtual absl::StatusOr<std::vector<std::vector<uint32_t>>> CubeSets() const {
    return std::vector<std::vector<uint32_t>>{};
  }
  // LaunchOptions::one_group (launch.h): empty when every set of CubeSets() does the same work
  // placed the same way (set k's i-th CUBE does what set 0's i-th does: every KV head sees the
  // same requests, with the same rotation inside its group), shown equal to the full chip by
  // kernels/launch/one_group_test; otherwise why one set may not stand for the others.
  virtual std::string OneGroupRefusal() const {
    return "the kernel does not declare its CUBE sets alike";
  }
};

// The communication critical path of `hops` on `chip`, in ps: per round, the link's latency
// plus each message's bytes at the link's bandwidth (whole cycles per message), at its clock.
uint64_t CommCriticalPathPs(const pb::Chip& chip, const std::vector<pb::CommHop>& hops);

// The islands of `cubes` (ChipSimOptions::islands): `sets` merged where they share a CUBE,
// every CUBE in no set alone, ordered by their smallest CUBE. Empty when `sets` is.
std::vector<std::vector<uint32_t>> IslandsOf(const std::vector<std::vector<uint32_t>>& sets,
                                             const std::vector<uint32_t>& cubes);

// `ahbm compare` for a kernel (compare.h). Empty `rows`: the kernel has no comparison.
struct CompareSpec {
  std::vector<pb::Variant> rows;                  // default rows, in table order
  pb::Variant ratio_to = pb::VARIANT_UNSPECIFIED;  // x_base column: latency / this row's
  // --reduce_options: its default rows and the only variants it takes (empty: not offered).
  std::vector<pb::Variant> reduce_option_rows;
  uint64_t default_s = 0;  // `s` when the workload leaves it unset (0: none)
  // Before a plain comparison runs: the workload against the listed variants (may be empty).
  std::function<absl::Status(const pb::Workload&, const std::vector<pb::Variant>&)> check;
  // One row's workload (variant already set): clear what that variant does not use.
  std::function<void(pb::Workload&)> row;
  // Keep each row's op log (decode's sweep / reduce / kv columns read it; prefill's columns come
  // from the report, and a full-chip prefill's op log runs to millions of records).
  bool op_log = true;
};

class KernelLauncher {
 public:
  virtual ~KernelLauncher() = default;
  virtual pb::Kernel kernel() const = 0;
  // The workload fields this kernel reads besides kernel, data, seed, issue_cost_profile
  // (names as in workload.proto, checked at registration). Any other set field is refused.
  virtual std::vector<std::string> Fields() const = 0;
  // Defaults and validation of `w` (fields only, no files): the plan, or InvalidArgument
  // "<field>: <reason>" (one line). `chip` outlives the plan.
  virtual absl::StatusOr<std::unique_ptr<KernelPlan>> Prepare(const pb::Chip& chip,
                                                              const pb::Workload& w) const = 0;
  virtual CompareSpec Compare() const { return {}; }
};

// The registry. RegisterLauncher checks (AHBM_CHECK) one launcher per kernel and that every
// Fields() name is a workload field; returns true (for the static registration below).
bool RegisterLauncher(std::unique_ptr<KernelLauncher> launcher);
// Tests only: puts `launcher` in place of its kernel's launcher (or none) and returns that one
// (nullptr when there was none); hand it back the same way to restore the registry.
std::unique_ptr<KernelLauncher> ReplaceLauncherForTest(std::unique_ptr<KernelLauncher> launcher);
// nullptr when `kernel` has no launcher.
const KernelLauncher* FindLauncher(pb::Kernel kernel);
// Every registered launcher, in pb::Kernel order.
std::vector<const KernelLauncher*> Launchers();

// The requests of a workload (DESIGN §6): request_lengths' count, else users, else 1.
uint32_t RequestsOf(const pb::Workload& w);

// Helpers for the .npy conventions of DESIGN §6.
// Request u's stem: `name` for one request, `name<u>` for several ("q", "q3").
std::string RequestStem(uint32_t users, const std::string& name, uint32_t u);
// <dir>/<stem>.npy with exactly `shape` and finite values (NotFound / InvalidArgument naming
// the file, and the first non-finite element's index).
absl::StatusOr<host::NpyArray> ReadNpyInput(const std::string& dir, const std::string& stem,
                                            const std::vector<uint64_t>& shape);

// The request batch of DESIGN §6 (decode, prefill): `users` and `s`, or request_lengths (one
// length per request: s must be unset, users unset or their count; s = the longest; s and
// max_context at most kMaxTokens). `length`
// names a length in the messages ("context length", "prompt length"); `s_meaning` says what s
// is ("the context length, new token included").
// The longest context, prompt or max_context RequestBatchOf takes (2^40 tokens: more than
// any chip's HBM holds; past it the placement's arithmetic would overflow).
inline constexpr uint64_t kMaxTokens = uint64_t{1} << 40;
struct RequestBatch {
  uint32_t users = 1;
  uint64_t s = 0;
  std::vector<uint64_t> lengths;  // empty: every request has length s
};
absl::StatusOr<RequestBatch> RequestBatchOf(const pb::Workload& w, const std::string& length,
                                            const std::string& s_meaning);
// kv_per_cube (SHORT_CONTEXT, AUTO) and short_long_threshold (AUTO) with another variant.
absl::Status CheckDispatchFields(const pb::Workload& w);

// The attention inputs of DESIGN §6 (decode, prefill): per request u, q [H_q, T_q, d] and k, v
// [H_kv, S_u, d] in q.npy / k.npy / v.npy, or q<u>.npy ... with several requests. `Qkv` is a
// struct with host::NpyArray members q, k, v (kernels::QkvInputs).
template <class Qkv>
absl::StatusOr<std::vector<Qkv>> ReadQkvInputs(
    const std::string& dir, uint32_t users,
    const std::function<std::vector<uint64_t>(uint32_t u)>& q_shape,
    const std::function<std::vector<uint64_t>(uint32_t u)>& kv_shape) {
  std::vector<Qkv> out;
  for (uint32_t u = 0; u < users; ++u) {
    Qkv in;
    for (auto [stem, array] : {std::pair<const char*, host::NpyArray*>{"q", &in.q},
                               {"k", &in.k},
                               {"v", &in.v}}) {
      absl::StatusOr<host::NpyArray> read = ReadNpyInput(
          dir, RequestStem(users, stem, u), *stem == 'q' ? q_shape(u) : kv_shape(u));
      RETURN_IF_ERROR(read.status());
      *array = *std::move(read);
    }
    out.push_back(std::move(in));
  }
  return out;
}
// The same inputs as the kernels see them (bf16-rounded), by stem: KernelPlan::SeenInputs.
template <class Qkv>
NpyArrays Bf16QkvArrays(uint32_t users, const std::vector<Qkv>& inputs) {
  const auto bf16 = [](host::NpyArray a) {
    for (float& x : a.data) x = kernels::RoundToBf16(x);
    return a;
  };
  NpyArrays out;
  for (uint32_t u = 0; u < inputs.size(); ++u) {
    out[RequestStem(users, "q", u)] = bf16(inputs[u].q);
    out[RequestStem(users, "k", u)] = bf16(inputs[u].k);
    out[RequestStem(users, "v", u)] = bf16(inputs[u].v);
  }
  return out;
}

// A plan of an attention kernel (decode, prefill): inputs q / k / v per request (DESIGN §6:
// read from inputs_dir or drawn from the seed, request by request), seen bf16-rounded, and one
// output o [H_q, T_q, d] per request. The kernel gives the shapes, the draw and the gather.
class QkvPlan : public KernelPlan {
 public:
  absl::Status LoadInputs(const std::string& inputs_dir, uint64_t seed) override {
    if (!inputs_dir.empty()) {
      absl::StatusOr<std::vector<kernels::QkvInputs>> read =
          ReadQkvInputs<kernels::QkvInputs>(
              inputs_dir, Users(), [this](uint32_t u) { return QShape(u); },
              [this](uint32_t u) { return KvShape(u); });
      RETURN_IF_ERROR(read.status());
      inputs_ = *std::move(read);
      return absl::OkStatus();
    }
    std::mt19937_64 rng(seed);
    for (uint32_t u = 0; u < Users(); ++u) inputs_.push_back(Draw(u, rng));
    return absl::OkStatus();
  }
  // bf16-rounded (so a float64 reference needs no rounding).
  absl::StatusOr<NpyArrays> SeenInputs(const kernels::MemoryStore&) const override {
    return Bf16QkvArrays(Users(), inputs_);
  }
  absl::StatusOr<NpyArrays> Gather(const kernels::MemoryStore& store) const override {
    NpyArrays out;
    for (uint32_t u = 0; u < Users(); ++u) {
      absl::StatusOr<std::vector<float>> o = GatherOutput(store, u);
      RETURN_IF_ERROR(o.status());
      out[RequestStem(Users(), "o", u)] = host::NpyArray{QShape(u), std::move(*o)};
    }
    return out;
  }

 protected:
  virtual uint32_t Users() const = 0;
  virtual std::vector<uint64_t> QShape(uint32_t u) const = 0;   // [H_q, T_q, d]; o's too
  virtual std::vector<uint64_t> KvShape(uint32_t u) const = 0;  // [H_kv, S_u, d]
  virtual kernels::QkvInputs Draw(uint32_t u, std::mt19937_64& rng) const = 0;
  virtual absl::StatusOr<std::vector<float>> GatherOutput(const kernels::MemoryStore& store,
                                                          uint32_t u) const = 0;
  std::vector<kernels::QkvInputs> inputs_;
};

}  // namespace ahbm::launch

#define AHBM_LAUNCH_CONCAT_INNER(a, b) a##b
#define AHBM_LAUNCH_CONCAT(a, b) AHBM_LAUNCH_CONCAT_INNER(a, b)
// At namespace scope in the launcher's .cc (the `launch` library is alwayslink, so the linker
// keeps it): AHBM_REGISTER_LAUNCHER(PrefillLauncher);
#define AHBM_REGISTER_LAUNCHER(Class)                                            \
  [[maybe_unused]] static const bool AHBM_LAUNCH_CONCAT(kRegistered, Class) = \
      ::ahbm::launch::RegisterLauncher(std::make_unique<Class>())

#endif  // AHBMSIM_KERNELS_LAUNCH_LAUNCHER_H_
