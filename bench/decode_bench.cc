// Full-chip Llama3-70B decode, one layer (H_q 64, H_kv 8, d 128), TILE 256, C = P = 8 on
// topology/chip_4sip.textproto, timing mode, no op log (as `ahbm run --kernel=decode` without
// --chrome_trace): the wall time of a whole simulation through launch::RunWorkload — engine and
// actor creation, chip index, the run, teardown — for
//   Decode/<opt1|opt3|opt2>/<zero|realistic>/s:131072   every variant x issue-cost profile;
//   Decode/<opt1|opt3|opt2>/zero/s:1024                 the fixed cost (little simulated work).
// Loading and validating the topology file is not timed. One iteration per repetition (a
// full-chip run is ~1 s); ask for more with --benchmark_repetitions. Run and compare commits as
// bench/README.md shows:
//   bazel run -c opt //bench:decode_bench -- --benchmark_out=$PWD/decode.json \
//       --benchmark_out_format=json
// Counters: events (deliveries of the run), events_per_s (events per wall second),
// sim_ns_per_s (simulated ns per wall second), latency_ns (simulated decode latency),
// x_roofline (latency / roofline bound).
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "kernels/launch/launch.h"
#include "topology/loader.h"

namespace ahbm::bench {
namespace {

void RunDecode(benchmark::State& state, pb::Variant variant, const char* profile, uint32_t s) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip.textproto");
  if (!chip.ok()) {
    state.SkipWithError(std::string(chip.status().message()).c_str());
    return;
  }
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_variant(variant);
  w.set_s(s);
  w.set_issue_cost_profile(profile);
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
  const double iterations = static_cast<double>(state.iterations());
  const double events = static_cast<double>(report.events());
  const double latency_ns = static_cast<double>(report.latency_ps()) / 1e3;
  state.counters["events"] = benchmark::Counter(events);
  state.counters["events_per_s"] =
      benchmark::Counter(events * iterations, benchmark::Counter::kIsRate);
  state.counters["sim_ns_per_s"] =
      benchmark::Counter(latency_ns * iterations, benchmark::Counter::kIsRate);
  state.counters["latency_ns"] = benchmark::Counter(latency_ns);
  state.counters["x_roofline"] = benchmark::Counter(report.roofline_ratio());
}

struct NamedVariant {
  const char* name;
  pb::Variant variant;
};
constexpr NamedVariant kVariants[] = {{"opt1", pb::OPT1}, {"opt3", pb::OPT3}, {"opt2", pb::OPT2}};

void Register(const NamedVariant& v, const char* profile, uint32_t s) {
  const std::string name =
      std::string("Decode/") + v.name + "/" + profile + "/s:" + std::to_string(s);
  benchmark::RegisterBenchmark(name.c_str(), RunDecode, v.variant, profile, s)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
}

const bool registered = [] {
  for (const char* profile : {"zero", "realistic"}) {
    for (const NamedVariant& v : kVariants) Register(v, profile, 131072);
  }
  for (const NamedVariant& v : kVariants) Register(v, "zero", 1024);
  return true;
}();

}  // namespace
}  // namespace ahbm::bench
