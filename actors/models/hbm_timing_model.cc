#include "actors/models/hbm_timing_model.h"

#include <map>

#include "actors/models/hbm_bank_model.h"
#include "base/check.h"

namespace ahbm::sim {
namespace {

// FIFO: HbmChannelModel as it is.
class FifoTiming final : public HbmTimingModel {
 public:
  explicit FifoTiming(const pb::HbmChannel& config) : model_(config) {}
  HbmService Serve(const HbmAccess& a) override {
    const HbmGrant grant = model_.Access(a.now, a.bytes, a.op);
    return {grant, grant.free_at - grant.start};
  }

 private:
  HbmChannelModel model_;
};

// BANK: each access's chunks burst by burst in the bank model, through the call memo, all
// queued at the access's arrival and served to the last before Serve returns (FR-FCFS reorders
// within one access, never a later access ahead of an earlier one). start: the first burst's
// column command; free_at: the last one's data-bus end; done: its last byte plus the fixed path
// latency (first_byte_latency_cycles - the DRAM's own idle read).
class BankTiming final : public HbmTimingModel {
 public:
  BankTiming(const pb::HbmChannel& config, HbmCallMemo& memo)
      : clock_(HbmChannelClock(config)),
        model_(BankTimingOf(config)),
        timing_(model_.timing()),
        memo_(memo),
        map_(config.bank().address_map()),
        path_cycles_(config.first_byte_latency_cycles() -
                     (timing_.t_rcd + timing_.t_cl + timing_.t_burst)) {}

  HbmService Serve(const HbmAccess& a) override {
    AHBM_CHECK(!a.chunk_addrs.empty() && a.chunk_bytes.value() % timing_.burst_bytes == 0)
        << "HBM bank timing: " << a.chunk_addrs.size() << " chunks of " << a.chunk_bytes;
    const uint64_t arrival = clock_.ToCyclesCeil(a.now).value();
    const uint64_t bursts_per_chunk = a.chunk_bytes.value() / timing_.burst_bytes;
    chunks_.clear();
    for (uint64_t addr : a.chunk_addrs) chunks_.push_back(addr / timing_.burst_bytes);
    const HbmCallResult call = memo_.Serve(model_, map_, arrival, chunks_,
                                           static_cast<uint32_t>(bursts_per_chunk),
                                           a.op == HbmOp::kWrite);
    HbmService s;
    s.grant.start = clock_.ToTime(Cycles(call.first_col));
    s.grant.free_at = clock_.ToTime(Cycles(call.last_col + timing_.t_burst));
    s.grant.done = clock_.ToTime(Cycles(call.last_done + path_cycles_));
    s.busy = clock_.ToTime(Cycles(a.chunk_addrs.size() * bursts_per_chunk * timing_.t_burst));
    return s;
  }

 private:
  ClockDomain clock_;
  HbmBankModel model_;
  const HbmBankTiming& timing_;  // model_'s
  HbmCallMemo& memo_;
  pb::HbmAddressMap map_;
  uint64_t path_cycles_;
  std::vector<uint64_t> chunks_;  // one access's chunks as burst indices, reused
};

std::map<pb::HbmModel, HbmTimingModelInfo>& Registry() {
  static auto* registry = new std::map<pb::HbmModel, HbmTimingModelInfo>{
      {pb::FIFO,
       {[](const pb::HbmChannel& c, HbmModelContext&) { return std::make_unique<FifoTiming>(c); },
        /*needs_addresses=*/false}},
      {pb::BANK,
       {[](const pb::HbmChannel& c, HbmModelContext& context) {
          return std::make_unique<BankTiming>(c, context.MemoFor(c));
        },
        /*needs_addresses=*/true}}};
  return *registry;
}

const HbmTimingModelInfo& Find(const pb::HbmChannel& config) {
  const auto it = Registry().find(config.model());
  AHBM_CHECK(it != Registry().end())
      << "no HBM timing model registered for " << pb::HbmModel_Name(config.model());
  return it->second;
}

}  // namespace

HbmCallMemo& HbmModelContext::MemoFor(const pb::HbmChannel& config) {
  const std::string bytes = config.SerializeAsString();
  for (const auto& [config_bytes, memo] : memos_) {
    if (config_bytes == bytes) return *memo;
  }
  memos_.emplace_back(bytes, std::make_unique<HbmCallMemo>(memo_mode_));
  return *memos_.back().second;
}

HbmCallMemo::Stats HbmModelContext::memo_stats() const {
  HbmCallMemo::Stats sum;
  for (const auto& [config_bytes, memo] : memos_) {
    sum.calls += memo->stats().calls;
    sum.hits += memo->stats().hits;
    sum.stored += memo->stats().stored;
    sum.flushes += memo->stats().flushes;
  }
  return sum;
}

void RegisterHbmTimingModel(pb::HbmModel model, HbmTimingModelInfo info) {
  Registry()[model] = std::move(info);
}

std::unique_ptr<HbmTimingModel> MakeHbmTimingModel(const pb::HbmChannel& config,
                                                   HbmModelContext& context) {
  return Find(config).make(config, context);
}

bool HbmModelNeedsAddresses(const pb::HbmChannel& config) { return Find(config).needs_addresses; }

}  // namespace ahbm::sim
