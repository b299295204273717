// A memo of the HBM bank model's calls (hbm_bank_model.h). The bank model times every
// 32 B burst at command level, ~0.6 µs of host time each; a kernel's DMA calls repeat a few
// shapes thousands of times (one channel's 8 KiB share of a K or V tile is 256 bursts over the
// same eight banks). The model is invariant under a shift in time, and an address map under a
// shift by whole rows (burst b + k * RowShiftBursts lies in the same bank and column, rows
// further). So a call whose key — its chunks relative to the row of its first, and
// the model's state relative to the call's start cycle and that row
// (HbmBankModel::AppendState) — was seen before, and that ends before the next refresh falls
// due, goes exactly as the first one did, shifted: the memo restores the state after it, the
// command counts and the result instead of simulating.
//
// Contract:
// - Serve() = model.ServeCall() of the call's bursts (each chunk's `chunk_bursts` bursts from
//   its first, mapped by `map`) in every observable: result, state, counts, now(). kOff always
//   simulates; kVerify also simulates every hit on a copy of the model and AHBM_CHECKs that
//   both agree (tests).
// - A call that meets a refresh is keyed with the refresh schedule as well (the next due cycle
//   relative to its start, exact; the bank refreshed next): such keys repeat less often. Past
//   max_bytes of keys and states the memo starts again empty.
// - Cost of a hit: the key (one value per chunk, 40-170 of state) hashed and compared, and the
//   state restored; no burst is mapped, no event sent, nothing allocated once warm.
#ifndef AHBMSIM_ACTORS_MODELS_HBM_CALL_MEMO_H_
#define AHBMSIM_ACTORS_MODELS_HBM_CALL_MEMO_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "actors/models/hbm_bank_model.h"

namespace ahbm::sim {

class HbmCallMemo {
 public:
  enum class Mode : uint8_t { kOff, kOn, kVerify };
  struct Stats {
    uint64_t calls = 0, hits = 0, stored = 0, flushes = 0;
  };

  explicit HbmCallMemo(Mode mode, size_t max_bytes = size_t{64} << 20)
      : mode_(mode), max_bytes_(max_bytes) {}

  HbmCallResult Serve(HbmBankModel& model, pb::HbmAddressMap map, uint64_t arrival,
                      std::span<const uint64_t> chunks, uint32_t chunk_bursts, bool write);
  const Stats& stats() const { return stats_; }

 private:
  struct Entry {
    uint64_t end = 0;        // now() after the call, relative to its start
    HbmCallResult result;    // relative to its start
    HbmCommandCounts counts;  // commands it issued
    std::vector<int32_t> state;  // AppendState (and AppendRefreshSchedule) after the call
  };

  // Fills key_ and row_base_ for a call starting at t0; false if its chunks lie too far apart
  // for the key (then it is only simulated).
  bool BuildKey(const HbmBankModel& model, pb::HbmAddressMap map, uint64_t t0,
                std::span<const uint64_t> chunks, uint32_t chunk_bursts, bool write);
  // Restores `e` (kVerify: after checking it against `simulate` on a copy of the model).
  template <typename Simulate>
  HbmCallResult Hit(HbmBankModel& model, uint64_t t0, const Entry& e, bool with_refresh,
                    Simulate& simulate);

  // A refresh due this far from a call's start, or nearer, goes into its key when needed.
  static constexpr uint64_t kRefreshKeyCycles = uint64_t{1} << 30;

  Mode mode_;
  size_t max_bytes_, bytes_ = 0;
  absl::flat_hash_map<std::string, Entry> entries_;          // calls that met no refresh
  absl::flat_hash_map<std::string, Entry> refresh_entries_;  // the others, by the longer key
  uint64_t row_base_ = 0, row_lo_ = 0, row_hi_ = 0;  // the call's first row, its row range
  std::vector<HbmBankAddress> bursts_;             // the call's bursts (simulated calls)
  std::vector<int32_t> values_;
  std::string key_, refresh_key_;
  Stats stats_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_HBM_CALL_MEMO_H_
