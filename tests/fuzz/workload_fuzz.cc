// Fuzz harness: the workload text loader and the workload's validation against the small and
// the full-scale chip (kernels/launch/workload_io.h, launch.h ValidateWorkload: given values,
// unused fields, each launcher's Prepare — defaults, shapes against the topology, the memory
// estimate). No simulation runs (the random differential test runs them).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/launch/launch.h"
#include "kernels/launch/workload_io.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ahbm::fuzz::InitHarness();
  ahbm::fuzz::Topology("small");
  ahbm::fuzz::Topology("chip_4sip");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ahbm::pb::Workload> workload = ahbm::launch::ParseWorkloadText(text, "fuzz");
  if (!workload.ok()) {
    ahbm::fuzz::CheckRefusal(workload.status());
    return 0;
  }
  for (const char* name : {"small", "chip_4sip"}) {
    const absl::Status status =
        ahbm::launch::ValidateWorkload(ahbm::fuzz::Topology(name), *workload);
    if (!status.ok()) ahbm::fuzz::CheckRefusal(status);
  }
  return 0;
}
