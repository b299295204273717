// One HBM pseudo-channel (DESIGN §2): first-byte latency plus bandwidth occupancy, served FIFO.
// A plain class (STYLE 4): the HBM channel actor calls it once per message; no CAF here.
//
// Config: pb::HbmChannel — clock_mhz (the channel's clock domain), bytes_per_cycle,
// first_byte_latency_cycles. interleave_bytes is the address map's business (dma_model.h).
//
// Ports (of the actor that wraps it): in `HbmRequest` -> Access(now, bytes, op);
// out `HbmResponse` to the requester at grant.done.
//
// Contract:
// - Requests are served in the order they are presented, and that order must be non-decreasing
//   arrival time (the engine's event order). Presenting an earlier arrival after a later one is
//   a bug of the caller (AHBM_CHECK). Equal arrival times are served in call order.
// - A request of N bytes arriving at time t:
//     occupancy = ceil(N / bytes_per_cycle) cycles  (/ fifo_efficiency when set: ceil(N * 10^6 /
//                 (bytes_per_cycle * fifo_efficiency_ppm)))
//     start     = the first channel clock edge >= max(t, free_at)
//     free_at'  = start + occupancy                               (the data bus is busy until then)
//     done      = start + first_byte_latency_cycles + occupancy   (the last byte has arrived)
//   Back-to-back requests therefore stream at full bandwidth: the next request's first-byte
//   latency overlaps the current transfer, and its done is occupancy(next) after this one's.
// - Reads and writes cost the same. There is no bank, row-buffer, refresh or read/write
//   turnaround model, and no limit on requests waiting (the queue is the requesters' problem).
// - N must be > 0: a zero-byte request is a bug of the caller (DMA planning rejects it).
//
// Stats (HbmChannelStats): busy_ps — time the data bus was occupied, the sum of occupancies;
// bytes_read / bytes_written — bytes of read / write requests served; requests — requests served.
#ifndef AHBMSIM_ACTORS_MODELS_HBM_CHANNEL_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_HBM_CHANNEL_MODEL_H_

#include <cstdint>
#include <ostream>

#include "actors/time.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

enum class HbmOp : uint8_t { kRead, kWrite };

// When the channel serves one request.
struct HbmGrant {
  SimTime start;    // the channel edge at which the request takes the data bus
  SimTime free_at;  // start + occupancy: the data bus is free for the next request
  SimTime done;     // start + first-byte latency + occupancy: the last byte is delivered

  friend bool operator==(const HbmGrant&, const HbmGrant&) = default;
};
std::ostream& operator<<(std::ostream& os, const HbmGrant& grant);

// The clock domain of a validated channel config (AHBM_CHECK: a bad clock_mhz).
ClockDomain HbmChannelClock(const pb::HbmChannel& config);

struct HbmChannelStats {
  SimTime busy_ps;      // data-bus occupancy, summed over requests
  Bytes bytes_read;     // bytes of HbmOp::kRead requests
  Bytes bytes_written;  // bytes of HbmOp::kWrite requests
  uint64_t requests = 0;
};

class HbmChannelModel {
 public:
  // `config` must have passed topology Validate() (a bad clock or a zero rate is a bug here).
  explicit HbmChannelModel(const pb::HbmChannel& config);

  // Serves one request of `bytes` (> 0) arriving at `arrival`; see the contract above.
  HbmGrant Access(SimTime arrival, Bytes bytes, HbmOp op);

  // ceil(bytes / (bytes_per_cycle x efficiency)): how long `bytes` hold the data bus.
  Cycles OccupancyCycles(Bytes bytes) const;

  const ClockDomain& clock() const { return clock_; }
  Cycles first_byte_latency() const { return first_byte_latency_; }
  uint64_t bytes_per_cycle() const { return bytes_per_cycle_; }
  // When the data bus is free again (time 0 before the first request).
  SimTime free_at() const { return free_at_; }
  const HbmChannelStats& stats() const { return stats_; }

 private:
  ClockDomain clock_;
  uint64_t bytes_per_cycle_;
  uint64_t efficiency_ppm_;  // fifo_efficiency_ppm (1000000 when unset)
  Cycles first_byte_latency_;
  SimTime free_at_;
  SimTime last_arrival_;
  HbmChannelStats stats_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_HBM_CHANNEL_MODEL_H_
