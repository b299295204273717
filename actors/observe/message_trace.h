// Message trace (`--message_trace=F`, DESIGN §5/§6): every message the engine delivers, as a
// pb::Envelope — the stamp its handler receives (msg.h: time, source unit, source sequence),
// its destination and the protobuf command it carries — streamed length-delimited in delivery
// order, so the actor conversation the simulator is built on can be read, filtered and counted.
//
// Contract: an Engine::MessageTracer. OnSend builds the envelope of a message when it is sent
// (its body copied by reflection into the oneof field of its type; `type` is the message's full
// name; a message that is not a protobuf — only engine tests send one — has its C++ type name
// and no body); OnDeliver writes it when the
// engine delivers it, so the file is in delivery order (the engine's key order, island by
// island when there are islands — callers with a message trace keep one heap). Messages still
// pending at shutdown are never delivered and never written. Wake-ups (timers) are not messages.
// Deterministic: the same run gives the same bytes.
#ifndef AHBMSIM_ACTORS_OBSERVE_MESSAGE_TRACE_H_
#define AHBMSIM_ACTORS_OBSERVE_MESSAGE_TRACE_H_

#include <cstdint>
#include <istream>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/engine.h"
#include "proto/commands.pb.h"

namespace ahbm::observe {

class MessageTraceWriter final : public sim::Engine::MessageTracer {
 public:
  explicit MessageTraceWriter(std::ostream* out) : out_(out) {}
  void OnSend(const sim::Stamp& stamp, sim::UnitId dst, const google::protobuf::Message* message,
              const std::string& name) override;
  void OnDeliver(unsigned __int128 key) override;
  uint64_t written() const { return written_; }
  // The first write error, if any.
  absl::Status status() const { return status_; }

 private:
  std::ostream* out_;
  std::map<unsigned __int128, std::string> pending_;  // serialized envelopes by event key
  uint64_t written_ = 0;
  absl::Status status_;
};

// Reads a whole message trace (tests, tools). DataLoss on a cut or malformed file.
absl::StatusOr<std::vector<pb::Envelope>> ReadMessageTrace(std::istream& in);

}  // namespace ahbm::observe

#endif  // AHBMSIM_ACTORS_OBSERVE_MESSAGE_TRACE_H_
