// GQA decode (ADR-0060 rev2 §11 gates): numeric parity against a float64 reference on
// bf16-rounded inputs for every variant and geometry, and the reduce structure.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/chip_sim.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "topology/loader.h"

namespace ahbm::kernels {
namespace {

pb::Chip Load(const std::string& path) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(path);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

// Q, K ~ N(0, 1), V ~ U(-2, 2) (§11).
DecodeInputs MakeInputs(const DecodeConfig& cfg, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  DecodeInputs in;
  in.q.shape = {cfg.h_q, cfg.t_q, cfg.d};
  in.k.shape = in.v.shape = {cfg.h_kv, cfg.s, cfg.d};
  for (uint64_t i = 0; i < uint64_t{cfg.h_q} * cfg.t_q * cfg.d; ++i) in.q.data.push_back(normal(rng));
  for (uint64_t i = 0; i < uint64_t{cfg.h_kv} * cfg.s * cfg.d; ++i) in.k.data.push_back(normal(rng));
  for (uint64_t i = 0; i < uint64_t{cfg.h_kv} * cfg.s * cfg.d; ++i) in.v.data.push_back(uniform(rng));
  return in;
}

struct DecodeRun {
  std::unique_ptr<sim::ChipSim> sim;
  std::unique_ptr<MemoryStore> store;
  std::unique_ptr<KernelRuntime> runtime;
  DecodeLaunch launch;
  absl::Status status;
};

DecodeRun RunDecode(const pb::Chip& chip, const DecodeConfig& cfg,
                    const std::vector<DecodeInputs>& inputs, const std::string& profile = "zero") {
  DecodeRun run;
  absl::StatusOr<std::vector<uint32_t>> cubes = DecodeCubes(chip, cfg);
  EXPECT_TRUE(cubes.ok()) << cubes.status();
  sim::ChipSimOptions options;
  options.cubes = *cubes;
  options.issue_cost_profile = profile;
  auto created = sim::ChipSim::Create(chip, options);
  EXPECT_TRUE(created.ok()) << created.status();
  run.sim = std::move(*created);
  if (!inputs.empty()) run.store = std::make_unique<MemoryStore>(chip);
  run.runtime = std::make_unique<KernelRuntime>(run.sim.get(), run.store.get());
  absl::StatusOr<DecodeLaunch> launch = LaunchDecode(chip, cfg, *run.runtime, run.store.get(), inputs);
  EXPECT_TRUE(launch.ok()) << launch.status();
  if (!launch.ok()) {
    run.status = launch.status();
    return run;
  }
  run.launch = *launch;
  run.status = run.runtime->Run();
  return run;
}

double MaxAbsError(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
  return worst;
}

struct ParityCase {
  std::string name;
  std::string topology;
  DecodeConfig cfg;
};

class DecodeParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(DecodeParity, MatchesTheFloat64Reference) {
  const ParityCase& c = GetParam();
  const pb::Chip chip = Load(c.topology);
  std::vector<DecodeInputs> inputs;
  for (uint32_t u = 0; u < c.cfg.users; ++u) inputs.push_back(MakeInputs(c.cfg, 100 + u));
  for (DecodeVariant variant : {DecodeVariant::kOpt1, DecodeVariant::kOpt3, DecodeVariant::kOpt2}) {
    DecodeConfig cfg = c.cfg;
    cfg.variant = variant;
    DecodeRun run = RunDecode(chip, cfg, inputs);
    ASSERT_TRUE(run.status.ok()) << c.name << " variant " << int(variant) << ": " << run.status;
    for (uint32_t u = 0; u < cfg.users; ++u) {
      absl::StatusOr<std::vector<float>> got = GatherDecodeOutput(*run.store, cfg, run.launch, u);
      ASSERT_TRUE(got.ok()) << got.status();
      const std::vector<float> want = ReferenceDecode(cfg, inputs[u]);
      EXPECT_LE(MaxAbsError(*got, want), 2e-2) << c.name << " variant " << int(variant) << " user " << u;
    }
  }
}

DecodeConfig Small(uint32_t h_q, uint32_t h_kv, uint64_t s, uint32_t c, uint32_t p) {
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

INSTANTIATE_TEST_SUITE_P(
    Geometries, DecodeParity,
    ::testing::Values(
        ParityCase{"no_sp", "topology/small.textproto", Small(8, 1, 300, 1, 1)},
        ParityCase{"pe_sp", "topology/small.textproto", Small(8, 2, 700, 1, 4)},
        ParityCase{"sp_c2_p4", "topology/small.textproto", Small(8, 2, 1000, 2, 4)},
        ParityCase{"sp_c4_p2_ragged", "topology/small.textproto", Small(4, 1, 777, 4, 2)},
        ParityCase{"multi_user", "topology/small.textproto",
                   [] {
                     DecodeConfig cfg = Small(8, 2, 500, 2, 4);
                     cfg.users = 2;
                     return cfg;
                   }()},
        ParityCase{"gqa_tq8", "topology/small.textproto",
                   [] {
                     DecodeConfig cfg = Small(4, 1, 400, 1, 2);
                     cfg.t_q = 8;  // G·T_q = 32 > ... rows
                     return cfg;
                   }()}),
    [](const ::testing::TestParamInfo<ParityCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ahbm::kernels
