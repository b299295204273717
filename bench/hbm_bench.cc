// One HBM pseudo-channel's bank model (actors/models/hbm_bank_model.h) on issue 13's access
// patterns, per refresh mode: the fraction of peak and the read latency, next to Ramulator 2's
// measurement (HBM3 6400 Mbps, FR-FCFS, 32-entry read buffer). `ahbm hbm` prints the same.
#include <string>

#include "actors/models/hbm_patterns.h"
#include "benchmark/benchmark.h"

namespace ahbm::sim {
namespace {

constexpr double kTckNs = 0.625;
constexpr uint64_t kBursts = 200000;

void BM_Pattern(benchmark::State& state, std::string pattern, HbmBankTiming::Refresh refresh) {
  HbmBankTiming t;
  t.refresh = refresh;
  HbmPatternResult r;
  for (auto _ : state) {
    absl::StatusOr<HbmPatternResult> got = RunHbmPattern(t, pattern, kBursts);
    if (!got.ok()) {
      state.SkipWithError(std::string(got.status().message()).c_str());
      return;
    }
    r = *got;
  }
  state.counters["pct_of_peak"] = 100 * r.fraction_of_peak;
  state.counters["lat_mean_ns"] = r.mean_latency_cycles * kTckNs;
  state.counters["lat_max_ns"] = r.max_latency_cycles * kTckNs;
  state.counters["bursts_per_s"] =
      benchmark::Counter(static_cast<double>(kBursts), benchmark::Counter::kIsIterationInvariantRate);
}

void Register() {
  const std::pair<const char*, HbmBankTiming::Refresh> modes[] = {
      {"off", HbmBankTiming::Refresh::kNone},
      {"all_bank", HbmBankTiming::Refresh::kAllBank},
      {"per_bank", HbmBankTiming::Refresh::kPerBank}};
  for (const std::string& p : HbmPatternNames()) {
    for (const auto& [name, mode] : modes) {
      benchmark::RegisterBenchmark((p + "/" + name).c_str(), BM_Pattern, p, mode)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

const bool registered = (Register(), true);

}  // namespace
}  // namespace ahbm::sim
