// Engine throughput (DESIGN §3). Run with
//   bazel run -c opt //bench:engine_bench
// (a) the ping / fan-in workload of bench/ping_fanin.h, ~1 M events, on the CAF engine and on a
//     plain C++ heap;
// (b) a composite-GEMM stream on one CUBE of the full-scale chip: every PE runs
//     "DMA 1 MiB, then composite GEMM (32, 256, 256) x 64" (actors/inject.h), with the closed
//     form (default) and with per-tile stepping;
// (c) the fixed cost of a full-chip simulation (BM_ChipSimCreateShutdown): ChipSim::Create of
//     every CUBE, an empty program on every PE CPU, Run (the actors initialize, every CPU
//     starts and finishes: one event per PE) and teardown, all timed.
// Counters: events (deliveries of one run), events_per_s (deliveries per wall second),
// sim_ns_per_s (simulated ns per wall second). In (a) and (b) only event delivery is timed,
// engine setup and shutdown are not; (c) has its own counters. BM_PingFanIn_CafVsHeap runs the
// two ping engines alternately in each iteration and reports both rates and caf_to_heap, their
// ratio in the same run (the speed goal: >= 0.2). See bench/README.md for running and
// comparing commits.
#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "actors/chip_sim.h"
#include "actors/inject.h"
#include "bench/ping_fanin.h"
#include "benchmark/benchmark.h"
#include "topology/loader.h"

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
  state.counters["sim_ns_per_s"] = benchmark::Counter(
      static_cast<double>(r.end_ps) / 1e3 * static_cast<double>(iterations),
      benchmark::Counter::kIsRate);
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

// Both engines in one iteration, alternately (CAF, then the plain heap), each timed around its
// event delivery alone: the ratio is immune to the drift between benchmarks of a shared machine.
void BM_PingFanIn_CafVsHeap(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const PingFanInResult expected = RunOnPlainHeap(kHops);
  double caf_s = 0, heap_s = 0;
  uint64_t caf_events = 0, heap_events = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto sim = std::make_unique<PingFanInOnEngine>(kHops);
    state.ResumeTiming();
    Clock::time_point t0 = Clock::now();
    const PingFanInResult caf = sim->Run();
    caf_s += std::chrono::duration<double>(Clock::now() - t0).count();
    state.PauseTiming();
    sim.reset();
    state.ResumeTiming();
    t0 = Clock::now();
    const PingFanInResult heap = RunOnPlainHeap(kHops);
    heap_s += std::chrono::duration<double>(Clock::now() - t0).count();
    benchmark::DoNotOptimize(heap);
    if (!(caf == expected) || !(heap == expected)) {
      state.SkipWithError("result differs from the plain-heap reference");
      return;
    }
    caf_events += caf.events;
    heap_events += heap.events;
  }
  const double caf_rate = static_cast<double>(caf_events) / caf_s;
  const double heap_rate = static_cast<double>(heap_events) / heap_s;
  state.counters["events"] = benchmark::Counter(static_cast<double>(expected.events));
  state.counters["caf_events_per_s"] = benchmark::Counter(caf_rate);
  state.counters["heap_events_per_s"] = benchmark::Counter(heap_rate);
  state.counters["caf_to_heap"] = benchmark::Counter(caf_rate / heap_rate);
}
BENCHMARK(BM_PingFanIn_CafVsHeap)->Unit(benchmark::kMillisecond)->UseRealTime();

// (b) Composite-GEMM stream on CUBE 0 of topology/chip_4sip_fifo.textproto (the engine's event
// rate: FIFO HBM channels, as before the shipped chips moved to the bank model).
void BM_CompositeGemmStream(benchmark::State& state) {
  const bool per_tile = state.range(0) != 0;
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip_fifo.textproto");
  if (!chip.ok()) {
    state.SkipWithError(std::string(chip.status().message()).c_str());
    return;
  }
  const uint32_t pes = chip->sip().cube().pes();
  uint64_t events = 0, end_ps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    sim::ChipSimOptions options;
    options.cubes = {0};
    options.per_tile_events = per_tile;
    auto created = sim::ChipSim::Create(*chip, options);
    if (!created.ok()) {
      state.SkipWithError("ChipSim::Create failed");
      return;
    }
    std::unique_ptr<sim::ChipSim> s = std::move(*created);
    for (uint32_t pe = 0; pe < pes; ++pe) {
      if (!s->SetProgram(pe, sim::inject::DmaThenGemmStream(pe, 1 << 20, 32, 256, 256, 64)).ok()) {
        state.SkipWithError("SetProgram failed");
        return;
      }
    }
    state.ResumeTiming();
    if (!s->Run().ok()) {
      state.SkipWithError("run failed");
      return;
    }
    state.PauseTiming();
    events = s->events();
    end_ps = s->latency().value();
    s.reset();
    state.ResumeTiming();
  }
  state.counters["events"] = benchmark::Counter(static_cast<double>(events));
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(events * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["sim_ns_per_s"] = benchmark::Counter(
      static_cast<double>(end_ps) / 1e3 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CompositeGemmStream)
    ->ArgName("per_tile")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// (c) Counters: actors (of the simulation), create_ms (Create + SetProgram), run_ms,
// teardown_ms (~ChipSim), each per iteration; the benchmark's time is their sum.
void BM_ChipSimCreateShutdown(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip.textproto");
  if (!chip.ok()) {
    state.SkipWithError(std::string(chip.status().message()).c_str());
    return;
  }
  double create_s = 0, run_s = 0, teardown_s = 0;
  uint64_t events = 0;
  size_t actors = 0;
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    auto created = sim::ChipSim::Create(*chip, sim::ChipSimOptions{});
    if (!created.ok()) {
      state.SkipWithError("ChipSim::Create failed");
      return;
    }
    std::unique_ptr<sim::ChipSim> s = std::move(*created);
    for (uint32_t pe = 0; pe < s->context().index.num_pes(); ++pe) {
      if (!s->SetProgram(pe, sim::CpuProgram{}).ok()) {
        state.SkipWithError("SetProgram failed");
        return;
      }
    }
    const Clock::time_point t1 = Clock::now();
    actors = s->engine().system().registry().running();
    if (!s->Run().ok()) {
      state.SkipWithError("run failed");
      return;
    }
    events = s->events();
    const Clock::time_point t2 = Clock::now();
    s.reset();
    const Clock::time_point t3 = Clock::now();
    create_s += std::chrono::duration<double>(t1 - t0).count();
    run_s += std::chrono::duration<double>(t2 - t1).count();
    teardown_s += std::chrono::duration<double>(t3 - t2).count();
  }
  const auto per_iteration_ms = [&](double seconds) {
    return benchmark::Counter(seconds * 1e3 / static_cast<double>(state.iterations()));
  };
  state.counters["actors"] = benchmark::Counter(static_cast<double>(actors));
  state.counters["events"] = benchmark::Counter(static_cast<double>(events));
  state.counters["create_ms"] = per_iteration_ms(create_s);
  state.counters["run_ms"] = per_iteration_ms(run_s);
  state.counters["teardown_ms"] = per_iteration_ms(teardown_s);
}
BENCHMARK(BM_ChipSimCreateShutdown)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ahbm::bench
