// What a simulated unit receives: a message and its stamp (DESIGN §3; proto/commands.proto's
// Envelope is the same thing on disk).
//
// Contract:
// - Stamp: the event's key — the logical time it is delivered at, the unit that sent it and
//   that unit's send sequence number. The engine orders every event by (time, src, seq)
//   (engine.h); no two events share a stamp. Stamp::key() is that order as one integer
//   (Engine::EventKey).
// - Msg<T>: a stamp and a body. For a protobuf T (proto/*.proto, e.g. pb::DmaCmd) the body is a
//   std::shared_ptr<const T>: shared, never copied, so a handler may keep it. For any other T
//   (engine tests, benchmarks) it is a T by value. `*m` and `m->` reach the T either way.
// - Engine::Send(src, delay, dst, x) wraps its one argument x (a std::shared_ptr<[const] T> of
//   a protobuf T, or a T) into a Msg<T> stamped with the event's key; every handler takes a
//   `const Msg<T>&`. It is the only form in which simulated units talk, so every handler sees
//   its message's stamp, and the message trace (observe/message_trace.h) writes exactly these
//   stamps and bodies as pb::Envelope.
// - Msg<T> is a CAF 0.17 "allowed unsafe message type": it never leaves the process (remote CAF
//   nodes run whole simulations, which exchange no simulated traffic), so it needs no
//   serialization.
#ifndef AHBMSIM_ACTORS_MSG_H_
#define AHBMSIM_ACTORS_MSG_H_

#include <cstdint>
#include <memory>
#include <type_traits>

#include "actors/time.h"
#include "caf/allowed_unsafe_message_type.hpp"
#include "google/protobuf/message.h"

namespace ahbm::sim {

// Stable id of a simulated unit (the ids of topology/ids.h).
using UnitId = uint32_t;

struct Stamp {
  SimTime time;     // when the message is delivered
  UnitId src = 0;   // the sending unit
  uint32_t seq = 0; // the sender's send sequence number (0, 1, ... over all its sends)

  // The engine's ordering key: time in the high 64 bits, src in the next 32, seq in the low 32.
  unsigned __int128 key() const {
    return (static_cast<unsigned __int128>(time.value()) << 64) |
           (static_cast<unsigned __int128>(src) << 32) | seq;
  }
  static Stamp FromKey(unsigned __int128 key) {
    return {SimTime(static_cast<uint64_t>(key >> 64)), static_cast<UnitId>(key >> 32),
            static_cast<uint32_t>(key)};
  }
  friend bool operator==(const Stamp&, const Stamp&) = default;
};

template <class T>
inline constexpr bool kIsProto = std::is_base_of_v<google::protobuf::Message, T>;

template <class T>
struct Msg {
  static_assert(!std::is_const_v<T> && !std::is_reference_v<T>, "Msg<T> of a plain type");
  using Body = std::conditional_t<kIsProto<T>, std::shared_ptr<const T>, T>;

  Stamp stamp;
  Body body;

  const T& operator*() const {
    if constexpr (kIsProto<T>) {
      return *body;
    } else {
      return body;
    }
  }
  const T* operator->() const { return &**this; }
};

namespace internal {

// The Msg type Send builds for an argument of type X.
template <class X>
struct MsgFor {
  using type = Msg<X>;
};
template <class T>
struct MsgFor<std::shared_ptr<T>> {
  static_assert(kIsProto<std::remove_const_t<T>>, "only protobuf messages travel by shared_ptr");
  using type = Msg<std::remove_const_t<T>>;
};

template <class T>
struct MsgFor<Msg<T>> {
  static_assert(sizeof(T) == 0, "forward a message's body (m.body), not the stamped Msg");
};

}  // namespace internal

}  // namespace ahbm::sim

namespace caf {

template <class T>
struct allowed_unsafe_message_type<ahbm::sim::Msg<T>> : std::true_type {};

}  // namespace caf

#endif  // AHBMSIM_ACTORS_MSG_H_
