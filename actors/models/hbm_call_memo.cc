#include "actors/models/hbm_call_memo.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "base/check.h"

namespace ahbm::sim {
namespace {

HbmCallResult Shift(HbmCallResult r, int64_t by) {
  r.first_col = static_cast<uint64_t>(static_cast<int64_t>(r.first_col) + by);
  r.last_col = static_cast<uint64_t>(static_cast<int64_t>(r.last_col) + by);
  r.last_done = static_cast<uint64_t>(static_cast<int64_t>(r.last_done) + by);
  return r;
}

HbmCommandCounts Minus(const HbmCommandCounts& a, const HbmCommandCounts& b) {
  return {a.act - b.act, a.pre - b.pre, a.rd - b.rd, a.wr - b.wr, a.ref - b.ref};
}

}  // namespace

bool HbmCallMemo::BuildKey(const HbmBankModel& model, pb::HbmAddressMap map, uint64_t t0,
                           std::span<const uint64_t> chunks, uint32_t chunk_bursts, bool write) {
  const HbmBankTiming& t = model.timing();
  const uint64_t period = uint64_t{t.columns} * t.banks();  // bursts per row over every bank
  const uint64_t shift = RowShiftBursts(map, t);            // the map repeats, rows on
  const uint64_t base = chunks[0] / shift * shift;
  values_.clear();
  values_.push_back(write ? 1 : 0);
  values_.push_back(static_cast<int32_t>(map));
  values_.push_back(static_cast<int32_t>(chunk_bursts));
  values_.push_back(static_cast<int32_t>(chunks.size()));
  uint64_t lo = chunks[0], hi = chunks[0];
  for (uint64_t c : chunks) {
    const int64_t offset = static_cast<int64_t>(c) - static_cast<int64_t>(base);
    if (offset > INT32_MAX || offset < INT32_MIN) return false;
    values_.push_back(static_cast<int32_t>(offset));
    lo = std::min(lo, c);
    hi = std::max(hi, c);
  }
  row_base_ = base / period;
  row_lo_ = lo / period;
  row_hi_ = (hi + chunk_bursts - 1) / period;
  if (row_hi_ - row_base_ > INT32_MAX) return false;
  model.AppendState(t0, row_base_, row_lo_, row_hi_, values_);
  key_.assign(reinterpret_cast<const char*>(values_.data()), values_.size() * sizeof(int32_t));
  return true;
}

HbmCallResult HbmCallMemo::Serve(HbmBankModel& model, pb::HbmAddressMap map, uint64_t arrival,
                                 std::span<const uint64_t> chunks, uint32_t chunk_bursts,
                                 bool write) {
  AHBM_CHECK(!chunks.empty() && chunk_bursts > 0) << "HBM call memo: a call without bursts";
  bursts_.clear();
  auto simulate = [&](HbmBankModel& m) {
    if (bursts_.empty()) {
      for (uint64_t c : chunks) {
        for (uint64_t k = 0; k < chunk_bursts; ++k) bursts_.push_back(MapBurst(c + k, map, m.timing()));
      }
    }
    return m.ServeCall(arrival, bursts_, write);
  };
  if (mode_ == Mode::kOff) return simulate(model);
  model.PrefetchState();  // BuildKey reads it after the chunks
  ++stats_.calls;
  model.IdleUntil(arrival);
  const uint64_t t0 = model.now();
  if (!BuildKey(model, map, t0, chunks, chunk_bursts, write)) return simulate(model);
  const uint64_t due = model.refresh_due();
  // A call seen before that ended before the next refresh falls due.
  const auto plain = entries_.find(key_);
  if (plain != entries_.end() && due >= t0 + plain->second.end) {
    return Hit(model, t0, plain->second, /*with_refresh=*/false, simulate);
  }
  // Else the key with the refresh schedule decides (a refresh far off cannot be keyed).
  const bool keyed_refresh =
      due != UINT64_MAX && (due >= t0 ? due - t0 : t0 - due) < kRefreshKeyCycles;
  if (keyed_refresh) {
    model.AppendRefreshSchedule(t0, values_);
    refresh_key_.assign(reinterpret_cast<const char*>(values_.data()), values_.size() * sizeof(int32_t));
    const auto with = refresh_entries_.find(refresh_key_);
    if (with != refresh_entries_.end()) return Hit(model, t0, with->second, /*with_refresh=*/true, simulate);
  }
  const HbmCommandCounts before = model.counts();
  const HbmCallResult result = simulate(model);
  // No refresh could have acted if every cycle it looked at was before `due`.
  const bool met_refresh = model.now() > due || model.counts().ref != before.ref;
  if (met_refresh ? keyed_refresh : plain == entries_.end()) {
    Entry e;
    e.end = model.now() - t0;
    e.result = Shift(result, -static_cast<int64_t>(t0));
    e.counts = Minus(model.counts(), before);
    model.AppendState(t0, row_base_, row_lo_, row_hi_, e.state);
    if (met_refresh) model.AppendRefreshSchedule(t0, e.state);
    const std::string& key = met_refresh ? refresh_key_ : key_;
    const size_t bytes = key.size() + e.state.size() * sizeof(int32_t) + sizeof(Entry) + 64;
    if (bytes_ + bytes > max_bytes_) {
      entries_.clear();
      refresh_entries_.clear();
      bytes_ = 0;
      ++stats_.flushes;
    }
    bytes_ += bytes;
    (met_refresh ? refresh_entries_ : entries_).emplace(key, std::move(e));
    ++stats_.stored;
  }
  return result;
}

template <typename Simulate>
HbmCallResult HbmCallMemo::Hit(HbmBankModel& model, uint64_t t0, const Entry& e,
                               bool with_refresh, Simulate& simulate) {
  if (mode_ == Mode::kVerify) {
    HbmBankModel copy = model;
    const HbmCommandCounts before = copy.counts();
    const HbmCallResult result = simulate(copy);
    std::vector<int32_t> state;
    copy.AppendState(t0, row_base_, row_lo_, row_hi_, state);
    if (with_refresh) copy.AppendRefreshSchedule(t0, state);
    AHBM_CHECK(result == Shift(e.result, static_cast<int64_t>(t0)) && copy.now() == t0 + e.end &&
               state == e.state && Minus(copy.counts(), before) == e.counts &&
               (with_refresh || copy.refresh_due() == model.refresh_due()))
        << "HBM call memo: a hit at cycle " << t0 << " differs from its simulation: last byte "
        << result.last_done << " vs " << t0 + e.result.last_done << ", now " << copy.now()
        << " vs " << t0 + e.end;
  }
  model.RestoreState(t0, row_base_, e.state);
  model.AddCounts(e.counts, t0 + e.end);
  ++stats_.hits;
  return Shift(e.result, static_cast<int64_t>(t0));
}

}  // namespace ahbm::sim
