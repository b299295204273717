// The CAF mailbox elements Engine::Send builds (engine.h), reused through free lists of the
// engine's own instead of built and freed per message (DESIGN §3, speed: the per-event
// cost of the CAF path).
//
// Contract:
// - PooledElement<Ts...> is a mailbox element like CAF's mailbox_element_vals<Ts...> (same
//   content types, type token and type_erased_tuple interface; no sender, no stages). Its
//   deletion (CAF's disposer calls request_deletion) destroys the content at once and returns
//   the element, constructed, to its pool; Send refills it. Only the content is built per
//   message.
// - ElementPool keeps one free list per element type. Single-threaded, like the engine; it
//   outlives every element it served (the engine owns it and discards its pending events
//   first) and deletes them. Which element a message gets affects nothing simulated.
#ifndef AHBMSIM_ACTORS_ENGINE_ELEMENT_H_
#define AHBMSIM_ACTORS_ENGINE_ELEMENT_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "caf/detail/stringification_inspector.hpp"
#include "caf/mailbox_element.hpp"
#include "caf/make_message.hpp"
#include "caf/make_type_erased_value.hpp"
#include "caf/message_id.hpp"
#include "caf/rtti_pair.hpp"
#include "caf/type_erased_tuple.hpp"
#include "caf/type_nr.hpp"

namespace ahbm::sim::internal {

class ElementPool;

// A free-list index per element type, numbered in first-use order (process-wide).
inline size_t NewElementSlot() {
  static std::atomic<size_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}
template <class Element>
[[gnu::always_inline]] inline size_t ElementSlot() {  // on every Send and delivery: a load
  static const size_t slot = NewElementSlot();
  return slot;
}

// The message id of every element Engine::Send builds: asynchronous and already marked
// answered (so CAF builds no response promise). Nothing else sends with it: a mailbox element
// carrying it is a StampedElement (what the engine's table dispatch relies on).
inline constexpr caf::message_id kStampedMessageId{caf::make_message_id().integer_value() |
                                                   caf::message_id::answered_flag_mask};

// What every PooledElement is, seen without its content type: `slot` names the element type
// (ElementSlot), so a receiver can dispatch on it without RTTI.
class StampedElement : public caf::mailbox_element {
 public:
  explicit StampedElement(size_t element_slot)
      : caf::mailbox_element(caf::strong_actor_ptr{}, caf::message_id{}, forwarding_stack{}),
        slot(element_slot) {}
  const size_t slot;
};

template <class... Ts>
class PooledElement final : public StampedElement, public caf::type_erased_tuple {
 public:
  using Data = std::tuple<Ts...>;

  explicit PooledElement(ElementPool* pool)
      : StampedElement(ElementSlot<PooledElement>()), pool_(pool) {}

  // The content (the element must be full).
  Data& data() const {
    return *std::launder(reinterpret_cast<Data*>(const_cast<unsigned char*>(storage_)));
  }
  ~PooledElement() override {
    if (full_) data().~Data();
  }

  // Builds the content (the element must be empty).
  template <class... Us>
  void Fill(caf::message_id id, Us&&... xs) {
    new (&storage_) Data(std::forward<Us>(xs)...);
    full_ = true;
    mid = id;
  }

  // Destroys the content and returns the element to its pool.
  void request_deletion(bool) const noexcept override;

  // message_view
  caf::type_erased_tuple& content() override { return *this; }
  const caf::type_erased_tuple& content() const override { return *this; }
  caf::message move_content_to_message() override {
    caf::message_factory f;
    return caf::detail::apply_moved_args(f, caf::detail::get_indices(data()), data());
  }
  caf::message copy_content_to_message() const override {
    caf::message_factory f;
    return caf::detail::apply_args(f, caf::detail::get_indices(data()), data());
  }

  // type_erased_tuple
  void* get_mutable(size_t pos) override {
    return Visit(pos, [](auto& x) -> void* { return &x; });
  }
  caf::error load(size_t pos, caf::deserializer& source) override {
    return Visit(pos, [&](auto& x) -> caf::error { return source(x); });
  }
  size_t size() const noexcept override { return sizeof...(Ts); }
  uint32_t type_token() const noexcept override { return caf::make_type_token<Ts...>(); }
  caf::rtti_pair type(size_t pos) const noexcept override {
    static const std::array<caf::rtti_pair, sizeof...(Ts)> types{{caf::make_rtti_pair<Ts>()...}};
    return types[pos];
  }
  const void* get(size_t pos) const noexcept override {
    return Visit(pos, [](auto& x) -> const void* { return &x; });
  }
  std::string stringify(size_t pos) const override {
    std::string result;
    caf::detail::stringification_inspector f{result};
    Visit(pos, [&](auto& x) -> int { return f(x), 0; });
    return result;
  }
  caf::type_erased_value_ptr copy(size_t pos) const override {
    caf::type_erased_value_factory f;
    return Visit(pos, [&](auto& x) -> caf::type_erased_value_ptr { return f(x); });
  }
  caf::error save(size_t pos, caf::serializer& sink) const override {
    return Visit(pos, [&](auto& x) -> caf::error { return sink(x); });
  }

 private:
  // f(element pos of the content), for pos < sizeof...(Ts).
  template <class F>
  auto Visit(size_t pos, F f) const {
    return VisitAt(pos, f, std::index_sequence_for<Ts...>{});
  }
  template <class F, size_t... Is>
  auto VisitAt(size_t pos, F& f, std::index_sequence<Is...>) const {
    decltype(f(std::get<0>(data()))) result{};
    ((pos == Is ? (void)(result = f(std::get<Is>(data()))) : void()), ...);
    return result;
  }

  ElementPool* pool_;
  bool full_ = false;
  alignas(Data) unsigned char storage_[sizeof(Data)];
};

class ElementPool {
 public:
  ElementPool() = default;
  ~ElementPool() {
    for (caf::mailbox_element* head : free_) {
      while (head != nullptr) delete std::exchange(head, Next(head));
    }
  }
  ElementPool(const ElementPool&) = delete;
  ElementPool& operator=(const ElementPool&) = delete;

  template <class Element>
  Element* Take() {
    const size_t slot = ElementSlot<Element>();
    if (slot >= free_.size()) free_.resize(slot + 1, nullptr);
    caf::mailbox_element*& head = free_[slot];
    if (head == nullptr) return new Element(this);
    return static_cast<Element*>(std::exchange(head, Next(head)));
  }
  template <class Element>
  void Give(Element* element) noexcept {
    caf::mailbox_element*& head = free_[ElementSlot<Element>()];  // sized by Take
    element->next = head;
    head = element;
  }

 private:
  static caf::mailbox_element* Next(caf::mailbox_element* element) {
    return static_cast<caf::mailbox_element*>(element->next);
  }

  std::vector<caf::mailbox_element*> free_;  // by ElementSlot
};

template <class... Ts>
void PooledElement<Ts...>::request_deletion(bool) const noexcept {
  auto* self = const_cast<PooledElement*>(this);
  data().~Data();
  self->full_ = false;
  self->sender.reset();
  self->stages.clear();
  pool_->Give(self);
}

// The element type CAF's make_mailbox_element would build for arguments of types Us.
template <class... Us>
using PooledElementFor = PooledElement<typename caf::unbox_message_element<
    typename caf::detail::strip_and_convert<Us>::type>::type...>;

// An element of `pool` holding `xs` (Engine::Send passes kStampedMessageId).
template <class... Us>
caf::mailbox_element* MakePooledElement(ElementPool& pool, caf::message_id mid, Us&&... xs) {
  using Element = PooledElementFor<Us...>;
  Element* element = pool.Take<Element>();
  try {
    element->Fill(mid, std::forward<Us>(xs)...);
  } catch (...) {
    pool.Give(element);
    throw;
  }
  return element;
}

}  // namespace ahbm::sim::internal

#endif  // AHBMSIM_ACTORS_ENGINE_ELEMENT_H_
