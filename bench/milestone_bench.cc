// `ahbm milestone`'s runs as benchmarks: one per panel x variant of milestone::BuildJobs, named
// Milestone/<panel>/<variant> (e.g. Milestone/single_user_decode/opt3), each one whole
// launch::RunWorkload per iteration on topology/chip_4sip.textproto (timing mode, no op log,
// one_group: one CUBE Group simulated where the groups are interchangeable, DESIGN §3).
// The benchmark's Time is the SIMULATED latency (manual time), its CPU the simulator's CPU
// time, so compare.py's Time column compares two commits' kernels and its CPU column their
// speed (bench/README.md "milestone_bench"). Counters, the figures of the kernel:
//   latency_us      simulated latency of the batch
//   roofline_ratio  latency / the report's roofline bound
//   util_<kind>     mean utilisation over the units of the kind (hbm = the HBM channels, gemm,
//                   math, dma, ipcq, noc)
//   events          simulated events of the run (of the one group simulated, with one_group)
// Shapes: milestone --quick (decode S 4096, prefill S 512, 2 users; ~3.5 s CPU for all) unless
// --milestone_full is given (the milestone's defaults: decode S 131072, prefill S 8192, 4 users,
// baseline_fanout_group in single_user_decode; ~41 s CPU). Loading the topology is not timed.
//   bazel run -c opt //bench:milestone_bench -- --benchmark_out_format=json
//       --benchmark_out=$PWD/milestone.json
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "benchmark/benchmark.h"
#include "kernels/launch/launch.h"
#include "milestone/milestone.h"
#include "topology/loader.h"

namespace ahbm::bench {
namespace {

// The counter's name and the report's unit kind it averages.
constexpr std::pair<const char*, const char*> kUtilisations[] = {
    {"util_hbm", "hbm_channel"}, {"util_gemm", "gemm"}, {"util_math", "math"},
    {"util_dma", "dma"},         {"util_ipcq", "ipcq"}, {"util_noc", "noc"}};

void RunJob(benchmark::State& state, const pb::Workload& workload) {
  static const absl::StatusOr<pb::Chip> chip =
      topology::LoadTopologyFile("topology/chip_4sip.textproto");
  if (!chip.ok()) {
    state.SkipWithError(std::string(chip.status().message()).c_str());
    return;
  }
  launch::LaunchOptions options;
  options.keep_op_log = false;
  options.one_group = true;
  pb::Report report;
  for (auto _ : state) {
    absl::StatusOr<launch::LaunchResult> result = launch::RunWorkload(*chip, workload, options);
    if (!result.ok() || !result->runtime_status.ok()) {
      const absl::Status s = result.ok() ? result->runtime_status : result.status();
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    report = result->report;
    state.SetIterationTime(static_cast<double>(report.latency_ps()) * 1e-12);
  }
  std::map<std::string, double> sum, units;
  for (const pb::UnitStats& u : report.units()) {
    sum[u.kind()] += u.utilisation();
    ++units[u.kind()];
  }
  for (const auto& [counter, kind] : kUtilisations) {
    state.counters[counter] = benchmark::Counter(units[kind] > 0 ? sum[kind] / units[kind] : 0);
  }
  state.counters["latency_us"] = benchmark::Counter(static_cast<double>(report.latency_ps()) / 1e6);
  state.counters["roofline_ratio"] = benchmark::Counter(report.roofline_ratio());
  state.counters["events"] = benchmark::Counter(static_cast<double>(report.events()));
}

}  // namespace
}  // namespace ahbm::bench

int main(int argc, char** argv) {
  // --milestone_full (ours) is taken out before Google Benchmark reads the flags.
  bool full = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--milestone_full") == 0) {
      full = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  ahbm::milestone::Options options;
  options.quick = !full;
  const absl::StatusOr<std::vector<ahbm::milestone::Job>> jobs =
      ahbm::milestone::BuildJobs(options);
  if (!jobs.ok()) {
    std::fprintf(stderr, "milestone_bench: %s\n", std::string(jobs.status().message()).c_str());
    return 2;
  }
  for (const ahbm::milestone::Job& job : *jobs) {
    const std::string name = "Milestone/" + job.panel + "/" +
                             absl::AsciiStrToLower(ahbm::pb::Variant_Name(job.workload.variant()));
    benchmark::RegisterBenchmark(name.c_str(), ahbm::bench::RunJob, job.workload)
        ->Unit(benchmark::kNanosecond)
        ->UseManualTime()
        ->Iterations(1);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
