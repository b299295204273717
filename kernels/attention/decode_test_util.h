// Test helpers shared by the decode tests: load a topology, run a decode launch (timing or data
// mode), compare with the float64 reference.
#ifndef AHBMSIM_KERNELS_ATTENTION_DECODE_TEST_UTIL_H_
#define AHBMSIM_KERNELS_ATTENTION_DECODE_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/chip_sim.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "proto/trace.pb.h"
#include "topology/loader.h"

namespace ahbm::kernels::testing {

inline pb::Chip Load(const std::string& path) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(path);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

// The unit numbers the hand-computed timelines (decode_timeline_test, prefill_timeline_test)
// are derived from: a changed topology fails here, not in a table. Check HasFatalFailure().
inline void AssertTimelineNumbers(const pb::Chip& chip) {
  const pb::Cube& cube = chip.sip().cube();
  ASSERT_EQ(cube.hbm_channel().bytes_per_cycle(), 32u);
  ASSERT_EQ(cube.hbm_channel().first_byte_latency_cycles(), 100u);
  ASSERT_EQ(cube.hbm_channel().interleave_bytes(), 256u);
  ASSERT_EQ(cube.pe().hbm_channels(), 8u);
  ASSERT_EQ(cube.pe().gemm().array_rows(), 8u);
  ASSERT_EQ(cube.pe().gemm().array_cols(), 128u);
  ASSERT_EQ(cube.pe().gemm().fill_drain_cycles(), 16u);
  ASSERT_EQ(cube.pe().math().lanes_per_cycle(), 128u);
  ASSERT_EQ(cube.pe().math().transcendental_per_cycle(), 32u);
  ASSERT_EQ(cube.pe().math().reduction_extra_cycles(), 7u);
  ASSERT_EQ(cube.pe().math().startup_cycles(), 8u);
  ASSERT_EQ(cube.pe().scheduler().tile_m(), 32u);
  ASSERT_EQ(cube.pe().scheduler().tile_k(), 64u);
  ASSERT_EQ(cube.pe().scheduler().tile_n(), 128u);
  ASSERT_EQ(cube.pe().scheduler().max_inflight_composites(), 4u);
  ASSERT_EQ(cube.pe().clock_mhz(), 1000u);
}

// Request u's inputs, Q, K ~ N(0, 1), V ~ U(-2, 2) (§11), from its own seed.
inline QkvInputs MakeInputs(const DecodeConfig& cfg, uint32_t seed, uint32_t user = 0) {
  std::mt19937_64 rng(seed);
  return RandomDecodeInputs(cfg, user, rng);
}

// Every request's inputs from one generator seeded `seed`, request by request.
inline std::vector<QkvInputs> BatchInputs(const DecodeConfig& cfg, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<QkvInputs> inputs;
  for (uint32_t u = 0; u < cfg.users; ++u) inputs.push_back(RandomDecodeInputs(cfg, u, rng));
  return inputs;
}

// A launched and finished run: the simulator, the data store (data mode), the runtime, what
// the launcher returned (DecodeLaunch, PrefillLaunch) and Run()'s status.
template <class Launch>
struct KernelRun {
  std::unique_ptr<sim::ChipSim> sim;
  std::unique_ptr<MemoryStore> store;
  std::unique_ptr<KernelRuntime> runtime;
  Launch launch;
  absl::Status status;
};
using DecodeRun = KernelRun<DecodeLaunch>;

// `launch` places and adds the kernels (LaunchDecode, a baseline's or the prefill launcher);
// `cubes` the CUBEs it uses. Data mode when `inputs` is not empty.
template <class Config, class CubesFn, class LaunchFn>
auto RunWith(const pb::Chip& chip, const Config& cfg, const std::vector<QkvInputs>& inputs,
             const std::string& profile, CubesFn cubes_fn, LaunchFn launch_fn,
             bool keep_op_log = true) {
  using Launch = typename decltype(launch_fn(chip, cfg, std::declval<KernelRuntime&>(),
                                             nullptr, inputs))::value_type;
  KernelRun<Launch> run;
  absl::StatusOr<std::vector<uint32_t>> cubes = cubes_fn(chip, cfg);
  if (!cubes.ok()) {
    run.status = cubes.status();
    return run;
  }
  sim::ChipSimOptions options;
  options.cubes = *cubes;
  options.issue_cost_profile = profile;
  options.keep_op_log = keep_op_log;
  auto created = sim::ChipSim::Create(chip, options);
  EXPECT_TRUE(created.ok()) << created.status();
  run.sim = std::move(*created);
  if (!inputs.empty()) run.store = std::make_unique<MemoryStore>(chip);
  run.runtime = std::make_unique<KernelRuntime>(run.sim.get(), run.store.get());
  auto launch = launch_fn(chip, cfg, *run.runtime, run.store.get(), inputs);
  if (!launch.ok()) {
    run.status = launch.status();
    return run;
  }
  run.launch = *launch;
  run.status = run.runtime->Run();
  return run;
}

inline DecodeRun RunDecode(const pb::Chip& chip, const DecodeConfig& cfg,
                           const std::vector<QkvInputs>& inputs,
                           const std::string& profile = "zero", bool keep_op_log = true) {
  return RunWith(chip, cfg, inputs, profile, DecodeCubes, LaunchDecode, keep_op_log);
}

// The run's op log, serialised (byte-identical logs are identical runs).
template <class Launch>
std::string OpLogBytes(const KernelRun<Launch>& run) {
  std::string bytes;
  for (const pb::TraceRecord& r : run.sim->op_log().records()) bytes += r.SerializeAsString();
  return bytes;
}

// Largest |got - want|; +inf when a value is NaN or the sizes differ (so a NaN always fails).
inline double MaxAbsError(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(double(got[i]) - want[i]);
    if (std::isnan(e)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, e);
  }
  return worst;
}

// A data-mode run's output of every request against the float64 reference on its inputs.
inline void ExpectRequestsMatchReference(const DecodeRun& run, const DecodeConfig& cfg,
                                         const std::vector<QkvInputs>& inputs,
                                         const std::string& what) {
  for (uint32_t u = 0; u < cfg.users; ++u) {
    absl::StatusOr<std::vector<float>> got = GatherDecodeOutput(*run.store, cfg, run.launch, u);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status();
    EXPECT_LE(MaxAbsError(*got, ReferenceDecode(cfg, inputs[u])), 2e-2) << what << " request " << u;
  }
}

inline DecodeConfig Small(uint32_t h_q, uint32_t h_kv, uint64_t s, uint32_t c, uint32_t p) {
  DecodeConfig cfg;
  cfg.h_q = h_q;
  cfg.h_kv = h_kv;
  cfg.d = 64;
  cfg.s = s;
  cfg.c = c;
  cfg.p = p;
  cfg.tile = 64;
  return cfg;
}

}  // namespace ahbm::kernels::testing

#endif  // AHBMSIM_KERNELS_ATTENTION_DECODE_TEST_UTIL_H_
