// Engine throughput (DESIGN §3): the ping / fan-in workload of bench/ping_fanin.h, ~1 M events,
// on the CAF engine and on a plain C++ heap. Run with
//   bazel run -c opt //bench:engine_bench
// Counters: events_per_s (deliveries per wall second), sim_ps_per_s (simulated picoseconds per
// wall second). Only event delivery is timed; engine setup and shutdown are not.
#include <cstdint>
#include <memory>

#include "bench/ping_fanin.h"
#include "benchmark/benchmark.h"

namespace ahbm::bench {
namespace {

constexpr uint32_t kHops = 12'700;  // 63 * (12700 + 1 + 3175) = 1'000'188 events

void Report(benchmark::State& state, const PingFanInResult& r, const PingFanInResult& expected,
            uint64_t iterations) {
  if (!(r == expected)) {
    state.SkipWithError("result differs from the plain-heap reference");
    return;
  }
  state.counters["events"] = benchmark::Counter(static_cast<double>(r.events));
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(r.events * iterations), benchmark::Counter::kIsRate);
  state.counters["sim_ps_per_s"] =
      benchmark::Counter(static_cast<double>(r.end_ps * iterations), benchmark::Counter::kIsRate);
}

void BM_PingFanIn_CafEngine(benchmark::State& state) {
  const PingFanInResult expected = RunOnPlainHeap(kHops);
  PingFanInResult r;
  for (auto _ : state) {
    state.PauseTiming();
    auto sim = std::make_unique<PingFanInOnEngine>(kHops);
    state.ResumeTiming();
    r = sim->Run();
    state.PauseTiming();
    sim.reset();
    state.ResumeTiming();
  }
  Report(state, r, expected, state.iterations());
}
BENCHMARK(BM_PingFanIn_CafEngine)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PingFanIn_PlainHeap(benchmark::State& state) {
  const PingFanInResult expected = RunOnPlainHeap(kHops);
  PingFanInResult r;
  for (auto _ : state) {
    r = RunOnPlainHeap(kHops);
    benchmark::DoNotOptimize(r);
  }
  Report(state, r, expected, state.iterations());
}
BENCHMARK(BM_PingFanIn_PlainHeap)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ahbm::bench
