// One HBM pseudo-channel's bank model (actors/models/hbm_bank_model.h) on the calibration's access
// patterns, per refresh mode: the fraction of peak and the read latency, next to Ramulator 2's
// measurement (HBM3 6400 Mbps, FR-FCFS, 32-entry read buffer). `ahbm hbm` prints the same.
// DecodeCalls: a decode sweep's channel calls (hbm_call_memo.h), with the call memo off / on.
#include <string>
#include <vector>

#include "actors/models/hbm_call_memo.h"
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

// One channel's share of a decode sweep: per tile an 8 KiB K call and an 8 KiB V call (32 chunks
// of 256 B each, V 64 KiB after K), a tile every 600 cycles — faster than the channel serves
// one (1024 cycles of data), so calls also meet a busy channel.
void BM_DecodeCalls(benchmark::State& state, HbmCallMemo::Mode mode, HbmBankTiming::Refresh refresh) {
  constexpr uint64_t kTiles = 2000, kChunks = 32, kVBursts = 2048;
  HbmBankTiming t;
  t.refresh = refresh;
  uint64_t last_done = 0, hits = 0;
  for (auto _ : state) {
    HbmBankModel model(t);
    HbmCallMemo memo(mode);
    std::vector<uint64_t> k(kChunks), v(kChunks);
    for (uint64_t tile = 0; tile < kTiles; ++tile) {
      for (uint64_t c = 0; c < kChunks; ++c) {
        k[c] = tile * kChunks * 8 + c * 8;
        v[c] = kVBursts + k[c];
      }
      memo.Serve(model, pb::BANK_GROUP_FIRST, tile * 600, k, 8, false);
      last_done = memo.Serve(model, pb::BANK_GROUP_FIRST, tile * 600, v, 8, false).last_done;
    }
    hits = memo.stats().hits;
  }
  state.counters["pct_of_peak"] =
      100.0 * static_cast<double>(2 * kTiles * kChunks * 8 * t.t_burst) / static_cast<double>(last_done);
  state.counters["hit_pct"] = 100.0 * static_cast<double>(hits) / (2.0 * kTiles);
  state.counters["bursts_per_s"] = benchmark::Counter(static_cast<double>(2 * kTiles * kChunks * 8),
                                                      benchmark::Counter::kIsIterationInvariantRate);
}

void Register() {
  for (const auto& [name, mode] : {std::pair{"off", HbmCallMemo::Mode::kOff},
                                   std::pair{"on", HbmCallMemo::Mode::kOn}}) {
    for (const auto& [refresh_name, refresh] :
         {std::pair{"off", HbmBankTiming::Refresh::kNone},
          std::pair{"all_bank", HbmBankTiming::Refresh::kAllBank}}) {
      benchmark::RegisterBenchmark(
          (std::string("DecodeCalls/memo:") + name + "/refresh:" + refresh_name).c_str(),
          BM_DecodeCalls, mode, refresh)
          ->Unit(benchmark::kMillisecond);
    }
  }
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
