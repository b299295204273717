// Fuzz harness: the report-JSON reader of `ahbm diff` (actors/observe/trace_diff.h ReadRun) and
// what diff does with what it accepts (CheckSameStreams, FormatDiff of a run against itself).
#include <cstddef>
#include <cstdint>

#include "actors/observe/trace_diff.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ahbm::fuzz::InitHarness();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<ahbm::observe::RunRecord> run =
      ahbm::observe::ReadRun(ahbm::fuzz::WriteScratchFile(data, size));
  if (!run.ok()) {
    ahbm::fuzz::CheckRefusal(run.status());
    return 0;
  }
  if (!run->report) ahbm::fuzz::Broken("a run read without its report");
  if (!ahbm::observe::CheckSameStreams(*run, *run).ok()) {
    ahbm::fuzz::Broken("a run is not of its own streams");
  }
  if (ahbm::observe::FormatDiff(*run, *run, 4).empty()) ahbm::fuzz::Broken("an empty diff");
  return 0;
}
