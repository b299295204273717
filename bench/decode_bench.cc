// Full-scale Llama3-70B decode, one layer (H_q 64, H_kv 8, d 128), S = 131072, TILE 256,
// C = P = 8 on topology/chip_4sip.textproto, timing mode: wall time per simulation and its
// event count (issue "GQA decode kernels": opt3 under 2 s and 3 M events). Run with
//   bazel run -c opt //bench:decode_bench
// Counters: events, latency_ns (simulated), x_roofline.
#include <string>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "kernels/launch/launch.h"
#include "topology/loader.h"

namespace ahbm::bench {
namespace {

void BM_Llama70bDecode(benchmark::State& state) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip.textproto");
  if (!chip.ok()) {
    state.SkipWithError(std::string(chip.status().message()).c_str());
    return;
  }
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_variant(static_cast<pb::Variant>(state.range(0)));
  w.set_s(131072);
  w.set_issue_cost_profile(state.range(1) == 0 ? "zero" : "realistic");
  pb::Report report;
  for (auto _ : state) {
    launch::LaunchOptions options;
    options.keep_op_log = false;  // as `ahbm run` without --chrome_trace
    absl::StatusOr<launch::LaunchResult> result = launch::RunWorkload(*chip, w, options);
    if (!result.ok() || !result->runtime_status.ok()) {
      state.SkipWithError("run failed");
      return;
    }
    report = result->report;
  }
  state.counters["events"] = benchmark::Counter(static_cast<double>(report.events()));
  state.counters["latency_ns"] = benchmark::Counter(report.latency_ps() / 1e3);
  state.counters["x_roofline"] = benchmark::Counter(report.roofline_ratio());
}
BENCHMARK(BM_Llama70bDecode)
    ->ArgNames({"variant", "realistic"})
    ->Args({pb::OPT1, 0})
    ->Args({pb::OPT3, 0})
    ->Args({pb::OPT2, 0})
    ->Args({pb::OPT1, 1})
    ->Args({pb::OPT3, 1})
    ->Args({pb::OPT2, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace ahbm::bench
