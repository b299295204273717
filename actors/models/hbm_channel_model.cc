#include "actors/models/hbm_channel_model.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "base/check.h"

namespace ahbm::sim {

ClockDomain HbmChannelClock(const pb::HbmChannel& config) {
  absl::StatusOr<ClockDomain> clock = ClockDomain::FromMHz(config.clock_mhz());
  AHBM_CHECK(clock.ok()) << "hbm_channel.clock_mhz: " << clock.status()
                         << " (the topology was not validated)";
  return *clock;
}

std::ostream& operator<<(std::ostream& os, const HbmGrant& grant) {
  return os << "{start=" << grant.start << " free_at=" << grant.free_at << " done=" << grant.done
            << "}";
}

HbmChannelModel::HbmChannelModel(const pb::HbmChannel& config)
    : clock_(HbmChannelClock(config)),
      bytes_per_cycle_(config.bytes_per_cycle()),
      efficiency_ppm_(config.has_fifo_efficiency_ppm() ? config.fifo_efficiency_ppm() : 1'000'000),
      first_byte_latency_(config.first_byte_latency_cycles()) {
  AHBM_CHECK(bytes_per_cycle_ > 0) << "hbm_channel.bytes_per_cycle is 0 (not validated)";
}

Cycles HbmChannelModel::OccupancyCycles(Bytes bytes) const {
  if (efficiency_ppm_ == 1'000'000) return Cycles((bytes.value() + bytes_per_cycle_ - 1) / bytes_per_cycle_);
  const unsigned __int128 scaled = static_cast<unsigned __int128>(bytes.value()) * 1'000'000;
  const unsigned __int128 rate = static_cast<unsigned __int128>(bytes_per_cycle_) * efficiency_ppm_;
  return Cycles(static_cast<uint64_t>((scaled + rate - 1) / rate));
}

HbmGrant HbmChannelModel::Access(SimTime arrival, Bytes bytes, HbmOp op) {
  AHBM_CHECK(bytes.value() > 0) << "zero-byte HBM request at " << arrival;
  AHBM_CHECK(arrival >= last_arrival_)
      << "HBM request arriving at " << arrival << " presented after one arriving at "
      << last_arrival_ << ": requests must come in arrival order";
  last_arrival_ = arrival;

  const Cycles occupancy = OccupancyCycles(bytes);
  HbmGrant grant;
  grant.start = clock_.NextEdge(std::max(arrival, free_at_));
  grant.free_at = grant.start + clock_.ToTime(occupancy);
  grant.done = grant.start + clock_.ToTime(first_byte_latency_ + occupancy);
  free_at_ = grant.free_at;

  stats_.busy_ps += clock_.ToTime(occupancy);
  (op == HbmOp::kRead ? stats_.bytes_read : stats_.bytes_written) += bytes;
  ++stats_.requests;
  return grant;
}

}  // namespace ahbm::sim
