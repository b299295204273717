// Fuzz harness: the topology text loader and Validate (topology/loader.h). An accepted chip must
// be one the numbering, the summary and the command checker can stand on.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "actors/command_check.h"
#include "topology/ids.h"
#include "topology/loader.h"
#include "topology/summary.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ahbm::fuzz::InitHarness();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ahbm::pb::Chip> chip = ahbm::topology::ParseTopologyText(text, "fuzz");
  if (!chip.ok()) {
    ahbm::fuzz::CheckRefusal(chip.status());
    return 0;
  }
  const ahbm::topology::ChipIndex index(*chip);
  if (index.num_pes() == 0 || index.num_units() == 0) ahbm::fuzz::Broken("a chip with no PE");
  if (ahbm::topology::TopologySummary(*chip).empty()) ahbm::fuzz::Broken("an empty summary");
  const ahbm::sim::CommandChecker first(*chip, 0), last(*chip, index.num_pes() - 1);
  if (first.tcm_bytes() == 0 || last.region_bytes() == 0) {
    ahbm::fuzz::Broken("a PE with no TCM or no HBM region");
  }
  return 0;
}
