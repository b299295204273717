// Replay against the run it came from (DESIGN §5: replay is at least as fast as the
// original run). For each workload (topology/chip_4sip.textproto, timing mode, zero profile), setup
// records a trace once (`ahbm run --trace`, not timed); then
//   Record/<workload>   the original run, recording its trace (`ahbm run --trace`);
//   Run/<workload>      the kernel run as `ahbm run` without --trace: launch::RunWorkload;
//   Replay/<workload>   the same as `ahbm replay --trace`: ReadTraceFile + Replay.
// Run and Replay keep no op log, so both simulate the CUBE Groups as islands and their reports
// match (checked: a mismatch skips with an error); Record streams the op log and the calls. One iteration per repetition; run Run and Replay
// of a workload alternately for a ratio (bench/README.md).
//   bazel run -c opt //bench:replay_bench -- --benchmark_filter=decode
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "benchmark/benchmark.h"
#include "kernels/launch/launch.h"
#include "kernels/replay/replay.h"
#include "topology/loader.h"

namespace ahbm::bench {
namespace {

struct Workload {
  const char* name;
  pb::Kernel kernel;
  pb::Variant variant;
  uint64_t s;
};

pb::Workload Proto(const Workload& w) {
  pb::Workload out;
  out.set_kernel(w.kernel);
  out.set_variant(w.variant);
  out.set_s(w.s);
  return out;
}

absl::StatusOr<pb::Chip> Chip() { return topology::LoadTopologyFile("topology/chip_4sip.textproto"); }

// The recorded trace of `w` (recorded on first use) and the report of the run without one.
struct Recorded {
  std::string path;
  pb::Report report;
};
absl::StatusOr<Recorded> Record(const Workload& w) {
  static std::map<std::string, Recorded> done;
  if (auto it = done.find(w.name); it != done.end()) return it->second;
  absl::StatusOr<pb::Chip> chip = Chip();
  RETURN_IF_ERROR(chip.status());
  launch::LaunchOptions options;
  options.keep_op_log = false;
  options.trace_path = absl::StrCat(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp",
                                    "/replay_bench_", w.name, ".trace");
  absl::StatusOr<launch::LaunchResult> recorded = launch::RunWorkload(*chip, Proto(w), options);
  RETURN_IF_ERROR(recorded.status());
  options.trace_path.swap(done[w.name].path);
  options.trace_path.clear();
  absl::StatusOr<launch::LaunchResult> plain = launch::RunWorkload(*chip, Proto(w), options);
  RETURN_IF_ERROR(plain.status());
  done[w.name].report = plain->report;
  return done[w.name];
}

void Finish(benchmark::State& state, const pb::Report& report, const pb::Report& want) {
  if (report.DebugString() != want.DebugString()) {
    state.SkipWithError("the report differs from the run's");
    return;
  }
  state.counters["events"] = benchmark::Counter(static_cast<double>(report.events()));
  state.counters["latency_ns"] = benchmark::Counter(static_cast<double>(report.latency_ps()) / 1e3);
}

void RunKernel(benchmark::State& state, Workload w) {
  absl::StatusOr<Recorded> recorded = Record(w);
  absl::StatusOr<pb::Chip> chip = Chip();
  if (!recorded.ok() || !chip.ok()) {
    state.SkipWithError(std::string((recorded.ok() ? chip.status() : recorded.status()).message()).c_str());
    return;
  }
  pb::Report report;
  for (auto _ : state) {
    launch::LaunchOptions options;
    options.keep_op_log = false;
    absl::StatusOr<launch::LaunchResult> result = launch::RunWorkload(*chip, Proto(w), options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    report = result->report;
  }
  Finish(state, report, recorded->report);
}

void RecordTrace(benchmark::State& state, Workload w) {
  absl::StatusOr<pb::Chip> chip = Chip();
  if (!chip.ok()) {
    state.SkipWithError(std::string(chip.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    launch::LaunchOptions options;
    options.keep_op_log = false;
    options.trace_path = absl::StrCat(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp",
                                      "/replay_bench_record.trace");
    absl::StatusOr<launch::LaunchResult> result = launch::RunWorkload(*chip, Proto(w), options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    state.counters["events"] = benchmark::Counter(static_cast<double>(result->report.events()));
    state.counters["latency_ns"] =
        benchmark::Counter(static_cast<double>(result->report.latency_ps()) / 1e3);
  }
}

void ReplayTrace(benchmark::State& state, Workload w) {
  absl::StatusOr<Recorded> recorded = Record(w);
  if (!recorded.ok()) {
    state.SkipWithError(std::string(recorded.status().message()).c_str());
    return;
  }
  pb::Report report;
  for (auto _ : state) {
    absl::StatusOr<replay::RecordedTrace> trace = replay::ReadTraceFile(recorded->path);
    if (!trace.ok()) {
      state.SkipWithError(std::string(trace.status().message()).c_str());
      return;
    }
    replay::ReplayOptions options;
    options.keep_op_log = false;
    absl::StatusOr<launch::LaunchResult> result = replay::Replay(*trace, options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    report = result->report;
  }
  Finish(state, report, recorded->report);
}

const bool registered = [] {
  for (const Workload& w : {Workload{"decode_opt3_s131072", pb::DECODE, pb::OPT3, 131072},
                            Workload{"decode_opt2_s131072", pb::DECODE, pb::OPT2, 131072},
                            Workload{"prefill_ring_s2048", pb::PREFILL, pb::RING, 2048},
                            Workload{"decode_opt3_s1024", pb::DECODE, pb::OPT3, 1024}}) {
    using Fn = void (*)(benchmark::State&, Workload);
    for (const auto& [kind, fn] : {std::pair<const char*, Fn>{"Record/", RecordTrace},
                                   std::pair<const char*, Fn>{"Run/", RunKernel},
                                   std::pair<const char*, Fn>{"Replay/", ReplayTrace}}) {
      benchmark::RegisterBenchmark((std::string(kind) + w.name).c_str(), fn, w)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->Iterations(1);
    }
  }
  return true;
}();

}  // namespace
}  // namespace ahbm::bench
