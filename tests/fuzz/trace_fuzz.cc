// Fuzz harness: the recorded-trace readers — replay's (kernels/replay/replay.h ReadTrace) and
// `ahbm diff`'s (actors/observe/trace_diff.h ReadRun, with the timeline it builds, the step
// match and the diff text). Replaying an accepted trace is left out: a simulation per input ran
// 135 inputs a second (tests/fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "actors/observe/trace_diff.h"
#include "kernels/replay/replay.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ahbm::fuzz::InitHarness();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<ahbm::replay::RecordedTrace> trace = ahbm::replay::ReadTrace(in);
  if (trace.ok()) {
    if (!trace->report) {
      ahbm::fuzz::Broken("a trace read without its report");
    }
    ahbm::pb::CallRecord call;
    for (uint32_t i = 0; i < trace->calls.size(); ++i) {
      if (!trace->calls[i].empty()) (void)trace->Call(i, 0, call);
    }
  } else {
    ahbm::fuzz::CheckRefusal(trace.status());
  }
  absl::StatusOr<ahbm::observe::RunRecord> run =
      ahbm::observe::ReadRun(ahbm::fuzz::WriteScratchFile(data, size));
  if (run.ok()) {
    if (!run->report) ahbm::fuzz::Broken("a run read without its report");
    if (run->timeline) (void)ahbm::observe::MatchSteps(*run->timeline, *run->timeline);
    if (ahbm::observe::FormatDiff(*run, *run, 4).empty()) ahbm::fuzz::Broken("an empty diff");
  } else {
    ahbm::fuzz::CheckRefusal(run.status());
  }
  return 0;
}
