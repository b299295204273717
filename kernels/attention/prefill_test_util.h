// Test helpers shared by the prefill tests: run a prefill launch (timing or data mode), draw a
// batch's inputs, compare every request's output with the float64 causal reference.
#ifndef AHBMSIM_KERNELS_ATTENTION_PREFILL_TEST_UTIL_H_
#define AHBMSIM_KERNELS_ATTENTION_PREFILL_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/attention/prefill_launch.h"

namespace ahbm::kernels::testing {

using PrefillRun = KernelRun<PrefillLaunch>;

// The small topology's test shape (2x4 CUBEs of 2x2 PEs): H_q 4 of one KV head, d 32, S 96,
// 16-key and 16-row tiles; P = 4 (flash 1), the ring on a 2x2 CUBE group.
inline PrefillConfig SmallPrefill(PrefillVariant variant) {
  PrefillConfig cfg;
  cfg.variant = variant;
  cfg.h_q = 4;
  cfg.h_kv = 1;
  cfg.d = 32;
  cfg.s = 96;
  cfg.tile = 16;
  cfg.q_tile = 16;
  cfg.p = variant == PrefillVariant::kFlash ? 1 : 4;
  cfg.group_rows = variant == PrefillVariant::kRing ? 2 : 0;
  cfg.group_cols = variant == PrefillVariant::kRing ? 2 : 0;
  return cfg;
}

// Data mode when `inputs` is not empty; the zero issue-cost profile.
inline PrefillRun RunPrefill(const pb::Chip& chip, const PrefillConfig& cfg,
                             const std::vector<QkvInputs>& inputs) {
  return RunWith(chip, cfg, inputs, "zero", PrefillCubes, LaunchPrefill);
}

// Every request's inputs from one generator seeded `seed`, request by request.
inline std::vector<QkvInputs> PrefillInputs(const PrefillConfig& cfg, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<QkvInputs> in;
  for (uint32_t u = 0; u < cfg.users; ++u) in.push_back(RandomPrefillInputs(cfg, u, rng));
  return in;
}

// A data-mode run of `cfg`: every request within 2e-2 (max abs) of ReferencePrefill.
inline void ExpectPrefillParity(const pb::Chip& chip, const PrefillConfig& cfg,
                                const std::string& what, uint32_t seed = 7) {
  const std::vector<QkvInputs> in = PrefillInputs(cfg, seed);
  PrefillRun run = RunPrefill(chip, cfg, in);
  ASSERT_TRUE(run.status.ok()) << what << ": " << run.status;
  for (uint32_t u = 0; u < cfg.users; ++u) {
    absl::StatusOr<std::vector<float>> got = GatherPrefillOutput(*run.store, cfg, run.launch, u);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status();
    EXPECT_LE(MaxAbsError(*got, ReferencePrefill(cfg, u, in[u])), 2e-2) << what << " request " << u;
  }
}

}  // namespace ahbm::kernels::testing

#endif  // AHBMSIM_KERNELS_ATTENTION_PREFILL_TEST_UTIL_H_
