// The CAF mailbox elements Engine::Send builds (engine.h), taken from free lists of the engine's
// own instead of the allocator (issue 10: per-event cost of the CAF path).
//
// Contract:
// - ElementPool hands out blocks by size class (16-byte steps up to 512 bytes; larger blocks go
//   to operator new / delete). Single-threaded, like the engine; it outlives every element it
//   served (the engine owns it and discards its pending events first).
// - PooledElement<Ts...> is CAF's mailbox_element_vals<Ts...> (same content, type token and
//   message id) whose deletion (CAF's disposer calls request_deletion) destroys it and returns
//   its block to the pool. Which block an element gets affects nothing simulated.
#ifndef AHBMSIM_ACTORS_ENGINE_ELEMENT_H_
#define AHBMSIM_ACTORS_ENGINE_ELEMENT_H_

#include <cstddef>
#include <new>
#include <utility>

#include "caf/mailbox_element.hpp"
#include "caf/make_message.hpp"
#include "caf/message_id.hpp"

namespace ahbm::sim::internal {

class ElementPool {
 public:
  ElementPool() = default;
  ~ElementPool() {
    for (Block*& head : free_) {
      while (head != nullptr) ::operator delete(std::exchange(head, head->next));
    }
  }
  ElementPool(const ElementPool&) = delete;
  ElementPool& operator=(const ElementPool&) = delete;

  void* Allocate(size_t size) {
    const size_t c = Class(size);
    if (c >= kClasses) return ::operator new(size);
    if (free_[c] == nullptr) return ::operator new((c + 1) * kStep);
    return std::exchange(free_[c], free_[c]->next);
  }
  void Free(void* block, size_t size) noexcept {
    const size_t c = Class(size);
    if (c >= kClasses) return ::operator delete(block);
    free_[c] = new (block) Block{free_[c]};
  }

 private:
  struct Block {
    Block* next;
  };
  static constexpr size_t kStep = 16;
  static constexpr size_t kClasses = 32;
  static constexpr size_t Class(size_t size) { return (size - 1) / kStep; }
  Block* free_[kClasses] = {};
};

template <class... Ts>
class PooledElement final : public caf::mailbox_element,
                            public caf::detail::tuple_vals_impl<caf::type_erased_tuple, Ts...> {
 public:
  template <class... Us>
  PooledElement(ElementPool* pool, caf::message_id mid, Us&&... xs)
      : caf::mailbox_element(caf::strong_actor_ptr{}, mid, forwarding_stack{}),
        caf::detail::tuple_vals_impl<caf::type_erased_tuple, Ts...>(std::forward<Us>(xs)...),
        pool_(pool) {}

  caf::type_erased_tuple& content() override { return *this; }
  const caf::type_erased_tuple& content() const override { return *this; }
  caf::message move_content_to_message() override {
    caf::message_factory f;
    auto& xs = this->data();
    return caf::detail::apply_moved_args(f, caf::detail::get_indices(xs), xs);
  }
  caf::message copy_content_to_message() const override {
    caf::message_factory f;
    auto& xs = this->data();
    return caf::detail::apply_args(f, caf::detail::get_indices(xs), xs);
  }

  void request_deletion(bool) const noexcept override {
    auto* self = const_cast<PooledElement*>(this);
    ElementPool* pool = pool_;
    self->~PooledElement();
    pool->Free(self, sizeof(PooledElement));
  }

 private:
  ElementPool* pool_;
};

// The element type CAF's make_mailbox_element would build for arguments of types Us.
template <class... Us>
using PooledElementFor = PooledElement<typename caf::unbox_message_element<
    typename caf::detail::strip_and_convert<Us>::type>::type...>;

// Builds the element for `xs` in a block of `pool`.
template <class... Us>
caf::mailbox_element* MakePooledElement(ElementPool& pool, caf::message_id mid, Us&&... xs) {
  using Element = PooledElementFor<Us...>;
  static_assert(alignof(Element) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  void* block = pool.Allocate(sizeof(Element));
  try {
    return new (block) Element(&pool, mid, std::forward<Us>(xs)...);
  } catch (...) {
    pool.Free(block, sizeof(Element));
    throw;
  }
}

}  // namespace ahbm::sim::internal

#endif  // AHBMSIM_ACTORS_ENGINE_ELEMENT_H_
