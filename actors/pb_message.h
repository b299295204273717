// Lets protobuf messages (proto/*.proto, e.g. ahbm::pb::HbmRequest) travel in CAF messages as
// std::shared_ptr<const T> (DESIGN §3, STYLE 8).
//
// Contract: for every T derived from google::protobuf::Message, std::shared_ptr<const T> is a
// CAF 0.17 "allowed unsafe message type": it can be passed to Engine::Send and matched by a
// handler taking `const std::shared_ptr<const T>&`; the pointee is shared, never copied. Such
// messages cannot be serialized, i.e. they never leave the process (remote CAF nodes are only
// used to run independent simulations, which exchange no simulated traffic).
//
// Why not an `inspect` overload: CAF 0.17 would use it only to serialize/print, and a
// shared_ptr<const T> inspect needs separate load/save paths; nothing here serializes.
// Include this header in every file that sends or handles such a message.
#ifndef AHBMSIM_ACTORS_PB_MESSAGE_H_
#define AHBMSIM_ACTORS_PB_MESSAGE_H_

#include <memory>
#include <type_traits>

#include "caf/allowed_unsafe_message_type.hpp"
#include "google/protobuf/message.h"

namespace caf {

template <class T>
struct allowed_unsafe_message_type<std::shared_ptr<const T>>
    : std::is_base_of<google::protobuf::Message, T> {};

}  // namespace caf

#endif  // AHBMSIM_ACTORS_PB_MESSAGE_H_
