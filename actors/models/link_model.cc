#include "actors/models/link_model.h"

#include <algorithm>

#include "base/check.h"

namespace ahbm::sim {
namespace {

ClockDomain LinkClock(const pb::Link& link) {
  absl::StatusOr<ClockDomain> clock = ClockDomain::FromMHz(link.clock_mhz());
  AHBM_CHECK(clock.ok()) << "link config was not validated: " << clock.status().message();
  return *clock;
}

}  // namespace

LinkModel::LinkModel(const pb::Link& link, std::optional<uint32_t> credits)
    : clock_(LinkClock(link)),
      bytes_per_cycle_(link.bytes_per_cycle()),
      latency_(link.latency_cycles()) {
  AHBM_CHECK(bytes_per_cycle_ > 0) << "link bytes_per_cycle must be > 0";
  if (credits.has_value()) {
    AHBM_CHECK(*credits > 0) << "a link with credits needs at least one";
    slot_release_.assign(*credits, SimTime(0));
  }
}

SimTime LinkModel::SerialisationTime(Bytes bytes) const {
  return clock_.ToTime(Cycles((bytes.value() + bytes_per_cycle_ - 1) / bytes_per_cycle_));
}

LinkTransmission LinkModel::Transmit(PacketAt at, Bytes bytes) {
  AHBM_CHECK(at.tail >= at.head) << "packet tail " << at.tail << " before head " << at.head;
  const uint64_t seq = next_seq_++;
  SimTime start = std::max(at.head, free_);
  if (!slot_release_.empty()) {
    SimTime& slot = slot_release_[seq % slot_release_.size()];
    AHBM_CHECK(slot != SimTime::Max())
        << "packet " << seq - slot_release_.size() << " was never released";
    start = std::max(start, slot);
    slot = SimTime::Max();
  }
  start = clock_.NextEdge(start);
  const SimTime end = clock_.NextEdge(std::max(start + SerialisationTime(bytes), at.tail));
  free_ = end;
  stats_.busy += end - start;
  if (end > start) {
    auto& spans = stats_.busy_intervals;
    if (!spans.empty() && spans.back().second == start) {
      spans.back().second = end;
    } else {
      spans.emplace_back(start, end);
    }
  }
  stats_.bytes += bytes;
  ++stats_.packets;
  return LinkTransmission{seq, start, end, PacketAt{start + Latency(), end + Latency()}};
}

void LinkModel::Release(uint64_t seq, SimTime at) {
  if (slot_release_.empty()) return;
  AHBM_CHECK(seq < next_seq_ && next_seq_ - seq <= slot_release_.size())
      << "release of packet " << seq << " whose slot is gone (next " << next_seq_ << ")";
  SimTime& slot = slot_release_[seq % slot_release_.size()];
  AHBM_CHECK(slot == SimTime::Max()) << "packet " << seq << " released twice";
  slot = at;
}

}  // namespace ahbm::sim
