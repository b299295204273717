#include "actors/models/ipcq_model.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace ahbm::sim {
namespace {

ClockDomain LinkClock(const pb::Link& link) {
  absl::StatusOr<ClockDomain> clock = ClockDomain::FromMHz(link.clock_mhz());
  AHBM_CHECK(clock.ok()) << "IPCQ config was not validated: " << clock.status().message();
  return *clock;
}

}  // namespace

IpcqModel::IpcqModel(const pb::Ipcq& ipcq)
    : clock_(LinkClock(ipcq.link())),
      queue_bytes_(ipcq.queue_bytes()),
      chunk_bytes_(ipcq.chunk_bytes()),
      bytes_per_cycle_(ipcq.link().bytes_per_cycle()),
      latency_(ipcq.link().latency_cycles()),
      credit_(ipcq.queue_bytes()) {
  AHBM_CHECK(bytes_per_cycle_ > 0) << "IPCQ link.bytes_per_cycle must be > 0";
  AHBM_CHECK(chunk_bytes_.value() > 0 && chunk_bytes_ <= queue_bytes_)
      << "IPCQ chunk_bytes " << chunk_bytes_ << " vs queue_bytes " << queue_bytes_;
}

SimTime IpcqModel::SerialisationTime(Bytes bytes) const {
  return clock_.ToTime(Cycles((bytes.value() + bytes_per_cycle_ - 1) / bytes_per_cycle_));
}

std::optional<IpcqChunk> IpcqModel::TrySchedule(const Chunk& chunk) {
  const SimTime unconstrained = std::max(clock_.NextEdge(chunk.ready), link_free_);
  SimTime depart = unconstrained;
  // Every chunk departs at or after the previous one, so credit that is back by `depart` can be
  // counted for good: no later chunk departs earlier.
  while (!returns_.empty() && (returns_.front().at <= depart || credit_ < chunk.bytes)) {
    depart = std::max(depart, returns_.front().at);
    credit_ += returns_.front().bytes;
    returns_bytes_ -= returns_.front().bytes;
    returns_.pop_front();
  }
  if (credit_ < chunk.bytes) return std::nullopt;
  credit_ -= chunk.bytes;
  const SimTime serialisation = SerialisationTime(chunk.bytes);
  link_free_ = depart + serialisation;
  stats_.sent_bytes += chunk.bytes;
  stats_.link_busy += serialisation;
  stats_.credit_stall += depart - unconstrained;
  IpcqChunk scheduled;
  scheduled.message_id = chunk.message_id;
  scheduled.index = chunk.index;
  scheduled.bytes = chunk.bytes;
  scheduled.last = chunk.last;
  scheduled.depart = depart;
  scheduled.link_free = link_free_;
  scheduled.arrive = link_free_ + Latency();
  return scheduled;
}

IpcqModel::Message& IpcqModel::FindMessage(uint64_t id) {
  // Chunks still being scheduled belong to the newest messages: search from the back.
  auto it = std::find_if(messages_.rbegin(), messages_.rend(),
                         [id](const Message& m) { return m.id == id; });
  AHBM_CHECK(it != messages_.rend()) << "IPCQ message " << id << " is not pending";
  return *it;
}

IpcqSendResult IpcqModel::Send(SimTime ready, uint64_t message_id, Bytes bytes) {
  AHBM_CHECK(bytes.value() > 0) << "IPCQ message " << message_id << " is empty";
  for (const Message& m : messages_) {
    AHBM_CHECK(m.id != message_id) << "IPCQ message id " << message_id << " is still pending";
  }
  const uint64_t chunk = chunk_bytes_.value();
  const uint32_t chunks = static_cast<uint32_t>((bytes.value() + chunk - 1) / chunk);
  messages_.push_back(Message{message_id, chunks, 0, {}});
  Message& message = messages_.back();

  IpcqSendResult result;
  for (uint32_t i = 0; i < chunks; ++i) {
    const bool last = i + 1 == chunks;
    const Chunk c{message_id, i, last ? Bytes(bytes.value() - uint64_t{i} * chunk) : chunk_bytes_,
                  last, ready};
    std::optional<IpcqChunk> scheduled;
    if (blocked_.empty()) scheduled = TrySchedule(c);
    if (scheduled.has_value()) {
      message.unpopped.push_back(*scheduled);
      result.departed.push_back(*scheduled);
    } else {
      blocked_.push_back(c);
      blocked_bytes_ += c.bytes;
      result.blocked_bytes += c.bytes;
    }
  }
  if (result.blocked_bytes.value() == 0) result.accepted = result.departed.back().depart;
  return result;
}

IpcqPopResult IpcqModel::Pop(SimTime now, uint64_t message_id, Bytes bytes) {
  AHBM_CHECK(!messages_.empty() && messages_.front().id == message_id)
      << "IPCQ pop of message " << message_id << " but the head message is "
      << (messages_.empty() ? std::string("none") : std::to_string(messages_.front().id));
  AHBM_CHECK(now >= last_pop_) << "IPCQ pop at " << now << " after a pop at " << last_pop_;
  AHBM_CHECK(bytes.value() > 0) << "IPCQ pop of 0 bytes of message " << message_id;
  last_pop_ = now;
  IpcqPopResult result;
  Message& head = messages_.front();
  while (result.popped < bytes) {
    AHBM_CHECK(!head.unpopped.empty())
        << "IPCQ pop of " << bytes << " of message " << message_id << " at " << now << ": after "
        << result.popped << " the next chunk has not departed";
    AHBM_CHECK(head.unpopped.front().arrive <= now)
        << "IPCQ pop of " << bytes << " of message " << message_id << " at " << now << ": after "
        << result.popped << " the next chunk arrives at " << head.unpopped.front().arrive;
    result.popped += head.unpopped.front().bytes;
    head.unpopped.pop_front();
    ++head.popped_chunks;
  }
  AHBM_CHECK(result.popped == bytes) << "IPCQ pop of " << bytes << " of message " << message_id
                                     << " ends inside a chunk";
  result.message_complete = head.popped_chunks == head.chunks;
  if (result.message_complete) messages_.pop_front();

  const SimTime credit_return = clock_.NextEdge(now) + Latency();
  result.credit_return = credit_return;
  // Pops come in time order, so returns_ stays sorted by time.
  returns_.push_back(CreditReturn{credit_return, result.popped});
  returns_bytes_ += result.popped;

  while (!blocked_.empty()) {
    std::optional<IpcqChunk> scheduled = TrySchedule(blocked_.front());
    if (!scheduled.has_value()) break;
    blocked_bytes_ -= blocked_.front().bytes;
    blocked_.pop_front();
    FindMessage(scheduled->message_id).unpopped.push_back(*scheduled);
    result.departed.push_back(*scheduled);
  }
  return result;
}

bool IpcqModel::WouldBlock(Bytes bytes) const {
  // Credit only grows with time once departures are fixed, so a message fits iff all the credit
  // the sender holds or will get back covers it.
  return !blocked_.empty() || credit_ + returns_bytes_ < bytes;
}

}  // namespace ahbm::sim
