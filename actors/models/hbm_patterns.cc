#include "actors/models/hbm_patterns.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ahbm::sim {
namespace {

// Burst `i` of a pattern, in the pseudo-channel.
using Pattern = std::function<HbmBankAddress(uint64_t i, const HbmBankTiming& t)>;

// A stream's burst `j` filling rows of one bank one after another, from `row0`.
HbmBankAddress InBank(uint64_t j, uint32_t sid, uint32_t group, uint32_t bank, uint32_t row0,
                      const HbmBankTiming& t) {
  return {sid, group, bank, static_cast<uint32_t>(row0 + j / t.columns),
          static_cast<uint32_t>(j % t.columns)};
}

// Burst `i` of a sequential stream laid out BANK_GROUP_FIRST (MapBurst), its bank numbers
// shifted by `bank` and its rows by `row0`.
HbmBankAddress BankGroupFirst(uint64_t i, uint32_t bank, uint32_t row0, const HbmBankTiming& t) {
  HbmBankAddress a;
  a.bank_group = static_cast<uint32_t>(i % t.bank_groups);
  uint64_t rest = i / t.bank_groups;
  a.column = static_cast<uint32_t>(rest % t.columns);
  rest /= t.columns;
  a.sid = static_cast<uint32_t>(rest % t.stack_ids);
  rest /= t.stack_ids;
  a.bank = static_cast<uint32_t>((bank + rest) % t.banks_per_group);
  a.row = static_cast<uint32_t>(row0 + rest / t.banks_per_group);
  return a;
}

// Streams alternating in pieces of `piece` bursts: burst i belongs to stream (i / piece) % n.
HbmBankAddress RoundRobin(uint64_t i, uint32_t piece, uint32_t n,
                          const std::function<HbmBankAddress(uint32_t stream, uint64_t j)>& at) {
  const uint64_t round = i / (uint64_t{piece} * n);
  const uint32_t stream = static_cast<uint32_t>((i / piece) % n);
  return at(stream, round * piece + i % piece);
}

Pattern Find(const std::string& name) {
  // The two address maps of a sequential stream (MapBurst).
  if (name == "seq_bank_group") {
    return [](uint64_t i, const HbmBankTiming& t) { return MapBurst(i, pb::BANK_GROUP_FIRST, t); };
  }
  if (name == "seq_row") {
    return [](uint64_t i, const HbmBankTiming& t) { return MapBurst(i, pb::COLUMN_FIRST, t); };
  }
  if (name == "kv_banks" || name == "kv_same_bank") {
    const bool same = name == "kv_same_bank";
    // Two tensors laid out like seq_bank_group: in different banks of each group, or in the
    // same banks at different rows.
    return [same](uint64_t i, const HbmBankTiming& t) {
      return RoundRobin(i, 8, 2, [&](uint32_t s, uint64_t j) {
        if (same) return BankGroupFirst(j, 0, s == 0 ? 0 : 1u << 13, t);
        return BankGroupFirst(j, s, 0, t);
      });
    };
  }
  if (name == "streams8") {
    return [](uint64_t i, const HbmBankTiming& t) {
      return RoundRobin(i, 8, 8, [&](uint32_t s, uint64_t j) {
        return InBank(j, 0, s % t.bank_groups, (s / t.bank_groups) % t.banks_per_group, 0, t);
      });
    };
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> HbmPatternNames() {
  return {"seq_bank_group", "seq_row", "kv_banks", "kv_same_bank", "streams8"};
}

absl::StatusOr<HbmPatternResult> RunHbmPattern(const HbmBankTiming& timing,
                                               const std::string& pattern, uint64_t bursts) {
  const Pattern at = Find(pattern);
  if (!at) {
    return absl::InvalidArgumentError(absl::StrCat("pattern: unknown '", pattern, "' (want ",
                                                   absl::StrJoin(HbmPatternNames(), ", "), ")"));
  }
  if (bursts == 0) return absl::InvalidArgumentError("bursts: must be > 0");
  HbmBankModel model(timing);
  HbmPatternResult out;
  double latency_sum = 0;
  uint64_t last_done = 0, served = 0;
  auto collect = [&] {
    for (const HbmBankModel::Request& r : model.TakeServed()) {
      const double latency = static_cast<double>(r.done - r.arrival);
      latency_sum += latency;
      out.max_latency_cycles = std::max(out.max_latency_cycles, latency);
      last_done = std::max(last_done, r.done);
      ++served;
    }
  };
  for (uint64_t i = 0; i < bursts; ++i) {
    const uint64_t arrival = model.Full() ? model.RunUntilRoom() : model.now();
    model.Add({i, at(i, timing), false, arrival, 0});
    collect();
  }
  model.RunToEmpty();
  collect();
  out.bursts = served;
  out.cycles = last_done;
  out.mean_latency_cycles = latency_sum / static_cast<double>(served);
  // Peak: one burst per t_burst cycles; the first burst's own latency is not bandwidth.
  out.fraction_of_peak = static_cast<double>(served * timing.t_burst) / static_cast<double>(last_done);
  return out;
}

}  // namespace ahbm::sim
