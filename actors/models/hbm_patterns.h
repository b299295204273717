// The access patterns of the bank model's calibration table (bench/README.md), run on one
// pseudo-channel's bank model (hbm_bank_model.h) from a source that keeps the request queue full —
// Ramulator 2's setup for long read streams — and what they achieve: the fraction of the
// pseudo-channel's peak (burst_bytes per t_burst cycles) and the read latency from arrival in the
// queue to the last byte. `bench/hbm_bench` and `ahbm hbm` print them.
#ifndef AHBMSIM_ACTORS_MODELS_HBM_PATTERNS_H_
#define AHBMSIM_ACTORS_MODELS_HBM_PATTERNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/models/hbm_bank_model.h"

namespace ahbm::sim {

// Names: "seq_bank_group" (sequential, the bank group changes every burst), "seq_row" (a whole
// row in one bank, then the next bank group), "kv_banks" (two streams alternating in 256 B
// pieces, different bank groups), "kv_same_bank" (the same, one bank, different rows),
// "streams8" (8 streams in 8 banks, round-robin in 256 B pieces).
std::vector<std::string> HbmPatternNames();

struct HbmPatternResult {
  double fraction_of_peak = 0;
  double mean_latency_cycles = 0, max_latency_cycles = 0;
  uint64_t cycles = 0, bursts = 0;
};

absl::StatusOr<HbmPatternResult> RunHbmPattern(const HbmBankTiming& timing,
                                               const std::string& pattern, uint64_t bursts);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_HBM_PATTERNS_H_
