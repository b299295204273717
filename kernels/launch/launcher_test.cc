// The launcher registry (launcher.h) with a toy PREFILL launcher standing in for the real one
// during each test (ReplaceLauncherForTest): what a new kernel's `<kernel>_run.cc` gets from the
// shared path (launch.cc) — the
// kernel list in messages, the unused-field check from Fields(), inputs_dir / outputs_dir /
// save_inputs, the .npy writes, the report's workload line, `ahbm compare`'s kernel list.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/host/npy.h"
#include "kernels/launch/compare.h"
#include "kernels/launch/launch.h"
#include "kernels/launch/launcher.h"
#include "topology/loader.h"

namespace ahbm::launch {
namespace {

using ::testing::ElementsAre;

// q.npy [2, s] in, o.npy = 2 q out; no kernel instance (nothing is simulated).
class ToyPlan final : public KernelPlan {
 public:
  explicit ToyPlan(const pb::Workload& w) : w_(w) {}
  std::vector<uint32_t> Cubes() const override { return {0}; }
  std::string Summary() const override { return "prefill FLASH: toy"; }
  absl::Status LoadInputs(const std::string& inputs_dir, uint64_t seed) override {
    if (!inputs_dir.empty()) {
      absl::StatusOr<host::NpyArray> q = ReadNpyInput(inputs_dir, "q", {2, w_.s()});
      RETURN_IF_ERROR(q.status());
      q_ = *std::move(q);
      return absl::OkStatus();
    }
    q_.shape = {2, w_.s()};
    for (uint64_t i = 0; i < 2 * w_.s(); ++i) q_.data.push_back(float(seed + i));
    return absl::OkStatus();
  }
  absl::Status Launch(kernels::KernelRuntime&, kernels::MemoryStore*) override {
    return absl::OkStatus();
  }
  absl::StatusOr<NpyArrays> SeenInputs(const kernels::MemoryStore&) const override {
    return NpyArrays{{"q", q_}};
  }
  absl::StatusOr<NpyArrays> Gather(const kernels::MemoryStore&) const override {
    host::NpyArray o = q_;
    for (float& x : o.data) x *= 2;
    return NpyArrays{{"o", o}};
  }
  uint32_t ReduceRounds() const override { return 7; }

 private:
  const pb::Workload w_;
  host::NpyArray q_;
};

class ToyPrefillLauncher final : public KernelLauncher {
 public:
  pb::Kernel kernel() const override { return pb::PREFILL; }
  std::vector<std::string> Fields() const override { return {"variant", "s"}; }
  absl::StatusOr<std::unique_ptr<KernelPlan>> Prepare(const pb::Chip&,
                                                      const pb::Workload& w) const override {
    if (w.s() == 0) return absl::InvalidArgumentError("s: must be > 0");
    return std::make_unique<ToyPlan>(w);
  }
  CompareSpec Compare() const override { return {.rows = {pb::FLASH}}; }
};

// The toy stands in for the real PREFILL launcher for the length of each test.
class Launcher : public ::testing::Test {
 protected:
  void SetUp() override { real_ = ReplaceLauncherForTest(std::make_unique<ToyPrefillLauncher>()); }
  void TearDown() override {
    if (real_ != nullptr) ReplaceLauncherForTest(std::move(real_));
  }
  std::unique_ptr<KernelLauncher> real_;
};

pb::Chip Small() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

pb::Workload Toy() {
  pb::Workload w;
  w.set_kernel(pb::PREFILL);
  w.set_variant(pb::FLASH);
  w.set_s(3);
  return w;
}

TEST_F(Launcher, RegistryListsEveryKernelInEnumOrder) {
  std::vector<pb::Kernel> kernels;
  for (const KernelLauncher* l : Launchers()) kernels.push_back(l->kernel());
  EXPECT_THAT(kernels, ElementsAre(pb::DECODE, pb::PREFILL, pb::SELFTEST_GEMM,
                                   pb::SELFTEST_ALLREDUCE, pb::SELFTEST_DEADLOCK,
                                   pb::SELFTEST_ARENA_OVERFLOW));
  EXPECT_THAT(CompareKernels(), ElementsAre(pb::DECODE, pb::PREFILL));
  pb::Workload w;
  EXPECT_EQ(ValidateWorkload(Small(), w).message(),
            "kernel: must be set (implemented: DECODE, PREFILL, SELFTEST_GEMM, "
            "SELFTEST_ALLREDUCE, SELFTEST_DEADLOCK, SELFTEST_ARENA_OVERFLOW)");
}

TEST_F(Launcher, TheSharedPathChecksFieldsAndModes) {
  const pb::Chip chip = Small();
  pb::Workload w = Toy();
  w.set_h_q(8);
  EXPECT_EQ(ValidateWorkload(chip, w).message(),
            "h_q: not used by PREFILL (got 8); leave it unset");
  w = Toy();
  w.clear_s();
  EXPECT_EQ(ValidateWorkload(chip, w).message(), "s: must be > 0");
  LaunchOptions options;
  options.outputs_dir = "/tmp";
  EXPECT_EQ(RunWorkload(chip, Toy(), options).status().message(),
            "outputs_dir: needs data mode (the workload's data is false)");
}

TEST_F(Launcher, TheSharedPathRunsAndWritesTheArrays) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(root ? root : "/tmp") + "/toy_prefill";
  std::filesystem::create_directories(dir);
  pb::Workload w = Toy();
  w.set_data(true);
  w.set_seed(10);
  LaunchOptions options;
  options.outputs_dir = dir;
  options.save_inputs = true;
  absl::StatusOr<LaunchResult> r = RunWorkload(Small(), w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->runtime_status.ok()) << r->runtime_status;
  EXPECT_EQ(r->report.workload_summary(), "prefill FLASH: toy");
  EXPECT_EQ(r->reduce_rounds, 7u);
  EXPECT_THAT(r->inputs.at("q").data, ElementsAre(10, 11, 12, 13, 14, 15));
  absl::StatusOr<host::NpyArray> o = host::ReadNpy(dir + "/o.npy");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_THAT(o->shape, ElementsAre(2, 3));
  EXPECT_THAT(o->data, ElementsAre(20, 22, 24, 26, 28, 30));
  // The saved input reads back through inputs_dir.
  options = LaunchOptions{};
  options.inputs_dir = dir;
  r = RunWorkload(Small(), w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->outputs.at("o").data, ElementsAre(20, 22, 24, 26, 28, 30));
}

}  // namespace
}  // namespace ahbm::launch
