// The random differential test (tests/README.md): seeded random decode and prefill workloads on
// the small chip, each in data mode against the float64 reference and in timing mode against
// data mode (random_diff.h).
//
//   bazel test //tests:random_diff_test                       # the CI share: seeds [0, kCiSeeds)
//   bazel run -c opt //tests:random_diff_test -- --seeds=5000 --start=0   # more, with a summary
//
// With --seeds the binary runs seeds [start, start + seeds) outside gtest, prints each failure
// with the `ahbm run` line that reproduces it, then one summary line; it exits 1 if any failed.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/random_diff.h"

namespace ahbm::testing {
namespace {

// Seeds every `bazel test` runs.
constexpr uint64_t kCiSeeds = 400;

// Seeds that once failed, by what they found (kept whatever kCiSeeds is).
const std::map<std::string, uint64_t>& Regressions() {
  static const auto* seeds = new std::map<std::string, uint64_t>{};
  return *seeds;
}

void Expect(const TestChips& chips, uint64_t seed) {
  const CaseResult r = RunCaseIsolated(chips, seed);
  EXPECT_NE(r.kind, CaseResult::Kind::kFailed) << "seed " << seed << ": " << r.what << "\n  "
                                               << r.command;
}

TEST(RandomDiff, Regressions) {
  const TestChips chips = LoadTestChips();
  for (const auto& [name, seed] : Regressions()) {
    SCOPED_TRACE(name);
    Expect(chips, seed);
  }
}

TEST(RandomDiff, CiSeeds) {
  const TestChips chips = LoadTestChips();
  uint32_t refused = 0;
  for (uint64_t seed = 0; seed < kCiSeeds; ++seed) {
    const CaseResult r = RunCaseIsolated(chips, seed);
    if (r.kind == CaseResult::Kind::kRefusedCapacity) ++refused;
    EXPECT_NE(r.kind, CaseResult::Kind::kFailed) << "seed " << seed << ": " << r.what << "\n  "
                                                 << r.command;
  }
  // The generator makes runnable workloads: capacity refusals stay the exception.
  EXPECT_LT(refused, kCiSeeds / 10);
}

// --seeds=N [--start=K] [--verbose]: runs outside gtest; returns the exit code.
int RunSeeds(uint64_t start, uint64_t count, bool verbose) {
  const TestChips chips = LoadTestChips();
  uint64_t passed = 0, refused = 0, failed = 0;
  std::map<std::string, uint64_t> refusals;  // by field
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t seed = start; seed < start + count; ++seed) {
    const CaseResult r = RunCaseIsolated(chips, seed);
    switch (r.kind) {
      case CaseResult::Kind::kPassed:
        ++passed;
        break;
      case CaseResult::Kind::kRefusedCapacity:
        ++refused;
        ++refusals[r.what.substr(0, r.what.find(':'))];
        if (verbose) std::cout << "seed " << seed << " refused: " << r.what << "\n";
        break;
      case CaseResult::Kind::kFailed:
        ++failed;
        std::cout << "seed " << seed << " FAILED: " << r.what << "\n  " << r.command << "\n"
                  << std::flush;
        break;
    }
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "seeds " << start << ".." << start + count - 1 << ": " << passed << " passed, "
            << refused << " refused (capacity:";
  for (const auto& [field, n] : refusals) std::cout << " " << field << " " << n;
  std::cout << "), " << failed << " failed; " << s << " s\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ahbm::testing

int main(int argc, char** argv) {
  uint64_t seeds = 0, start = 0;
  bool verbose = false;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--seeds=")) {
      if (!absl::SimpleAtoi(arg.substr(8), &seeds) || seeds == 0) {
        std::cerr << "--seeds: must be a positive integer (got " << arg.substr(8) << ")\n";
        return 2;
      }
    } else if (absl::StartsWith(arg, "--start=")) {
      if (!absl::SimpleAtoi(arg.substr(8), &start)) {
        std::cerr << "--start: must be a non-negative integer (got " << arg.substr(8) << ")\n";
        return 2;
      }
    } else if (arg == "--verbose") {
      verbose = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (seeds > 0) {
    return ahbm::testing::RunSeeds(start, seeds, verbose);
  }
  int rest_argc = static_cast<int>(rest.size());
  ::testing::InitGoogleTest(&rest_argc, rest.data());
  return RUN_ALL_TESTS();
}
