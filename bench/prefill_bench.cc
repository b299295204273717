// Full-chip Llama3-70B prefill, one layer (H_q 64, H_kv 8, d 128), tile 128 keys, q_tile 128
// rows, T_q = S (the whole prompt), on topology/chip_4sip.textproto, timing mode, no op log (as
// `ahbm run --kernel=prefill` without --chrome_trace): the wall time of a whole simulation through
// launch::RunWorkload, for
//   Prefill/<ring|flash|short_context|baseline_fanout>/s:8192   every variant at the size;
//   Prefill/ring/s:<2048|4096|8192|16384>                        how events grow with S;
//   Prefill/ring/s:512                                            the smoke test's.
// One iteration per repetition. Counters: events, events_per_s, latency_ns (simulated),
// x_roofline, composites (GEMM composites issued: events should grow with these, not with
// scheduler tiles), events_per_composite.
//   bazel run -c opt //bench:prefill_bench -- --benchmark_filter=s:8192
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "kernels/launch/launch.h"
#include "topology/loader.h"

namespace ahbm::bench {
namespace {

void RunPrefill(benchmark::State& state, pb::Variant variant, uint64_t s) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip.textproto");
  if (!chip.ok()) {
    state.SkipWithError(std::string(chip.status().message()).c_str());
    return;
  }
  pb::Workload w;
  w.set_kernel(pb::PREFILL);
  w.set_variant(variant);
  w.set_s(s);
  launch::LaunchResult last;
  for (auto _ : state) {
    launch::LaunchOptions options;
    options.keep_op_log = false;
    absl::StatusOr<launch::LaunchResult> result = launch::RunWorkload(*chip, w, options);
    if (!result.ok() || !result->runtime_status.ok()) {
      state.SkipWithError(result.ok() ? std::string(result->runtime_status.message()).c_str()
                                      : std::string(result.status().message()).c_str());
      return;
    }
    last = *std::move(result);
  }
  const pb::Report& report = last.report;
  const double iterations = static_cast<double>(state.iterations());
  const double events = static_cast<double>(report.events());
  state.counters["events"] = benchmark::Counter(events);
  state.counters["events_per_s"] = benchmark::Counter(events * iterations, benchmark::Counter::kIsRate);
  state.counters["latency_ns"] = benchmark::Counter(static_cast<double>(report.latency_ps()) / 1e3);
  state.counters["x_roofline"] = benchmark::Counter(report.roofline_ratio());
  state.counters["composites"] = benchmark::Counter(static_cast<double>(last.composites));
  state.counters["events_per_composite"] =
      benchmark::Counter(last.composites == 0 ? 0 : events / static_cast<double>(last.composites));
}

void Register(const char* name, pb::Variant variant, uint64_t s) {
  const std::string full = std::string("Prefill/") + name + "/s:" + std::to_string(s);
  benchmark::RegisterBenchmark(full.c_str(), RunPrefill, variant, s)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
}

const bool registered = [] {
  Register("ring", pb::RING, 8192);
  Register("flash", pb::FLASH, 8192);
  Register("short_context", pb::SHORT_CONTEXT, 8192);
  Register("baseline_fanout", pb::BASELINE_FANOUT, 8192);
  for (uint64_t s : {2048, 4096, 16384}) Register("ring", pb::RING, s);
  Register("ring", pb::RING, 512);  // the smoke test's (little simulated work)
  return true;
}();

}  // namespace
}  // namespace ahbm::bench
