// The timing-model interface of one HBM pseudo-channel (DESIGN §2), in the pattern of
// Ramulator 2's IDRAM with registered implementations: a topology names its channel's model
// (HbmChannel.model) and MakeHbmTimingModel builds the implementation registered for it.
//
// Registered (hbm_timing_model.cc):
// - FIFO: HbmChannelModel (hbm_channel_model.h) — first-byte latency plus occupancy at the peak
//   (or fifo_efficiency_ppm of it), whatever the addresses.
// - BANK: HbmBankModel (hbm_bank_model.h) burst by burst — banks, rows, refresh, FR-FCFS within
//   one access — through the simulation's call memo (hbm_call_memo.h); needs the chunks'
//   channel-local addresses, which DMA plans then carry (dma_model.h).
//
// Contract of Serve():
// - One access = one DMA command's (or batch's) share of this channel, `bytes` > 0, presented
//   in non-decreasing `now` (the engine's order).
// - The grant is final when Serve returns: later accesses never change it, so the channel
//   needs no event of its own (the DMA calls it inside its handler; event cost per access 0).
// - busy is the data-bus occupancy the access adds, for the channel's stats.
#ifndef AHBMSIM_ACTORS_MODELS_HBM_TIMING_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_HBM_TIMING_MODEL_H_

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "actors/models/hbm_call_memo.h"
#include "actors/models/hbm_channel_model.h"
#include "actors/time.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

struct HbmAccess {
  SimTime now;
  Bytes bytes;
  HbmOp op = HbmOp::kRead;
  // needs_addresses() models: each chunk's channel-local byte address, chunk_bytes each.
  std::span<const uint64_t> chunk_addrs;
  Bytes chunk_bytes;
};

struct HbmService {
  HbmGrant grant;
  SimTime busy;  // data-bus occupancy
};

class HbmTimingModel {
 public:
  virtual ~HbmTimingModel() = default;
  virtual HbmService Serve(const HbmAccess& access) = 0;
};

// What the channels of one simulation share: the BANK channels' call memos, one per channel
// configuration.
class HbmModelContext {
 public:
  explicit HbmModelContext(HbmCallMemo::Mode memo_mode = HbmCallMemo::Mode::kOn)
      : memo_mode_(memo_mode) {}
  // The memo of channels configured as `config` (kOff: one that only simulates).
  HbmCallMemo& MemoFor(const pb::HbmChannel& config);
  // Calls and hits summed over the memos.
  HbmCallMemo::Stats memo_stats() const;

 private:
  HbmCallMemo::Mode memo_mode_;
  std::vector<std::pair<std::string, std::unique_ptr<HbmCallMemo>>> memos_;  // by config bytes
};

// A model implementation: its factory, and whether it times accesses by their addresses.
struct HbmTimingModelInfo {
  std::function<std::unique_ptr<HbmTimingModel>(const pb::HbmChannel&, HbmModelContext&)> make;
  bool needs_addresses = false;
};

// Registers `info` for topology model `model` (replacing any earlier one). FIFO and BANK are
// registered before the first lookup.
void RegisterHbmTimingModel(pb::HbmModel model, HbmTimingModelInfo info);
// The model `config` names (validated: AHBM_CHECK that one is registered).
std::unique_ptr<HbmTimingModel> MakeHbmTimingModel(const pb::HbmChannel& config,
                                                   HbmModelContext& context);
bool HbmModelNeedsAddresses(const pb::HbmChannel& config);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_HBM_TIMING_MODEL_H_
