#include "actors/models/noc_endpoint_model.h"

#include <algorithm>

#include "base/check.h"

namespace ahbm::sim {

NocEndpointModel::NocEndpointModel(Bytes queue_bytes)
    : queue_bytes_(static_cast<int64_t>(queue_bytes.value())), credit_(queue_bytes_) {
  AHBM_CHECK(queue_bytes_ > 0) << "NOC endpoint_queue_bytes must be > 0";
}

void NocEndpointModel::Absorb(SimTime now) {
  size_t n = 0;
  while (n < returns_.size() && returns_[n].at <= now) credit_ += returns_[n++].bytes;
  returns_.erase(returns_.begin(), returns_.begin() + static_cast<ptrdiff_t>(n));
}

std::optional<NocEndpointModel::Departure> NocEndpointModel::Decide(SimTime now,
                                                                   const Blocked& m) {
  Pair& pair = pairs_[{m.src_pe, m.flow}];
  const int64_t need = static_cast<int64_t>(m.bytes.value());
  const SimTime ready = std::max({m.ready, now, pair.last_depart});
  std::optional<SimTime> posted;
  if (!pair.posts.empty()) posted = std::max(ready, pair.posts.front());
  // The earliest t >= ready with credit(t) >= need.
  std::optional<SimTime> queue;
  int64_t credit = credit_;
  size_t i = 0;
  for (; i < returns_.size() && returns_[i].at <= ready; ++i) credit += returns_[i].bytes;
  if (credit >= need) {
    queue = ready;
  } else {
    for (; i < returns_.size(); ++i) {
      credit += returns_[i].bytes;
      if (credit >= need) {
        queue = returns_[i].at;
        break;
      }
    }
  }
  Departure d;
  d.message_id = m.message_id;
  if (posted && (!queue || *posted <= *queue)) {
    d.depart = *posted;
    d.landing = Landing::kPosted;
  } else if (queue) {
    d.depart = *queue;
    d.landing = Landing::kQueue;
    credit_ -= need;
    queued_ += need;
    in_queue_[m.message_id] = need;
  } else {
    return std::nullopt;
  }
  pair.last_depart = d.depart;
  // The k-th message pairs with the k-th receive.
  if (!pair.posts.empty()) {
    pair.posts.pop_front();
  } else {
    ++pair.unposted;
  }
  return d;
}

std::optional<NocEndpointModel::Departure> NocEndpointModel::Send(SimTime now, uint32_t src_pe,
                                                                 uint64_t flow,
                                                                 uint64_t message_id,
                                                                 SimTime ready, Bytes bytes) {
  AHBM_CHECK(bytes.value() > 0) << "NOC message " << message_id << " has 0 bytes";
  Absorb(now);
  const Blocked m{message_id, src_pe, flow, ready, bytes};
  // A message behind a blocked one of its (src, flow) waits behind it.
  const bool behind = std::any_of(blocked_.begin(), blocked_.end(), [&](const Blocked& b) {
    return b.src_pe == src_pe && b.flow == flow;
  });
  if (!behind) {
    if (std::optional<Departure> d = Decide(now, m)) return d;
  }
  blocked_.push_back(m);
  return std::nullopt;
}

std::vector<NocEndpointModel::Departure> NocEndpointModel::Unblock(SimTime now) {
  std::vector<Departure> out;
  std::vector<Blocked> still;
  for (const Blocked& b : blocked_) {
    const bool behind = std::any_of(still.begin(), still.end(), [&](const Blocked& s) {
      return s.src_pe == b.src_pe && s.flow == b.flow;
    });
    std::optional<Departure> d;
    if (!behind) d = Decide(now, b);
    if (d) {
      out.push_back(*d);
    } else {
      still.push_back(b);
    }
  }
  blocked_ = std::move(still);
  return out;
}

std::vector<NocEndpointModel::Departure> NocEndpointModel::PostRecv(SimTime now, uint32_t src_pe,
                                                                   uint64_t flow, SimTime at) {
  Absorb(now);
  Pair& pair = pairs_[{src_pe, flow}];
  if (pair.unposted > 0) {
    --pair.unposted;  // its message already left (it landed in the queue)
    return {};
  }
  pair.posts.push_back(at);
  return Unblock(now);
}

std::vector<NocEndpointModel::Departure> NocEndpointModel::Consume(SimTime now,
                                                                  uint64_t message_id,
                                                                  SimTime at) {
  Absorb(now);
  auto it = in_queue_.find(message_id);
  if (it == in_queue_.end()) return {};  // it landed in its receive's buffer
  const int64_t bytes = it->second;
  in_queue_.erase(it);
  queued_ -= bytes;
  const SimTime back = std::max(at, now);
  // Keep returns_ by time; equal times in call order.
  auto pos = std::upper_bound(returns_.begin(), returns_.end(), back,
                              [](SimTime t, const Return& r) { return t < r.at; });
  returns_.insert(pos, Return{back, bytes});
  Absorb(now);
  return Unblock(now);
}

}  // namespace ahbm::sim
