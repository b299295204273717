// The CAF actor class every simulated unit of a chip is (DESIGN §3): an event-based actor whose
// stamped messages reach their handler by a table lookup instead of CAF's pattern matching
// (issue 26: CAF's per-message categorisation, behaviour matching and result visitor were a
// seventh of a run once every unit was an actor).
//
// Contract:
// - A unit's behavior function returns `self->Handlers(f1, f2, ...)`: each f takes one
//   `const Msg<T>&` (msg.h). The result is the actor's ordinary caf::behavior of those
//   handlers, and the same handlers also go into the actor's dispatch table.
// - The engine is the units' scheduler (engine.h): for each message Engine::Send built (a
//   StampedElement, engine_element.h) it looks up the handler of the message's type in the
//   unit's table (stamped_handlers(), kept by the engine once the actor is initialized) and
//   runs it directly, as CAF's matching would have (the handler reads its stamp and body; it
//   must not use CAF's per-message context: current_sender(), make_response_promise()). The
//   unit is still a CAF actor: CAF spawns, initializes and terminates it, and every other
//   message (CAF's own: exit, down) or a stamped message of a type without a handler (or
//   before initialization) goes through scheduled_actor::activate and consume(): the same
//   table, else the behavior, then the engine's default handler, which fails loudly.
// - UnitStateActor<State> is caf::stateful_actor<State> on this base.
#ifndef AHBMSIM_ACTORS_UNIT_ACTOR_H_
#define AHBMSIM_ACTORS_UNIT_ACTOR_H_

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include "actors/engine_element.h"
#include "actors/msg.h"
#include "base/check.h"
#include "caf/behavior.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/stateful_actor.hpp"

namespace ahbm::sim {

namespace internal {

// The T of a handler taking `const Msg<T>&`.
template <class F>
struct HandlerArg : HandlerArg<decltype(&F::operator())> {};
template <class C, class R, class T>
struct HandlerArg<R (C::*)(const Msg<T>&) const> {
  using type = T;
};
template <class C, class R, class T>
struct HandlerArg<R (C::*)(const Msg<T>&)> {
  using type = T;
};

}  // namespace internal

// One row of a UnitActor's dispatch table: the handler of stamped messages of element type
// `slot` (ElementSlot of PooledElementFor<Msg<T>>).
struct StampedHandler {
  size_t slot;
  void (*call)(const void* handler, caf::mailbox_element& element);
  const void* handler;  // the handler object (in the actor's table)

  void operator()(caf::mailbox_element& element) const { call(handler, element); }
};

// The handler of stamped element `x` in `table`, or null.
inline const StampedHandler* FindStampedHandler(std::span<const StampedHandler> table,
                                                const caf::mailbox_element& x) {
  const size_t slot = static_cast<const internal::StampedElement&>(x).slot;
  for (const StampedHandler& entry : table) {
    if (entry.slot == slot) return &entry;
  }
  return nullptr;
}

class UnitActor : public caf::event_based_actor {
 public:
  explicit UnitActor(caf::actor_config& cfg) : caf::event_based_actor(cfg) {}

  // See the contract. Call once, from the behavior function (the engine keeps the table).
  template <class... Fs>
  caf::behavior Handlers(Fs... fs) {
    AHBM_CHECK(table_ == nullptr) << "UnitActor::Handlers called twice";
    auto table = std::make_unique<Table<Fs...>>(fs...);
    entries_ = table->entries();
    table_ = std::move(table);
    return caf::behavior{std::move(fs)...};
  }

  // The dispatch table, once the actor is initialized (its behavior function has run); empty
  // before. It never changes afterwards, so the engine may keep it (see the contract).
  std::span<const StampedHandler> stamped_handlers() const {
    return getf(is_initialized_flag) ? entries_ : std::span<const StampedHandler>();
  }

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    if (x.mid.integer_value() == internal::kStampedMessageId.integer_value()) {
      if (const StampedHandler* entry = FindStampedHandler(entries_, x)) {
        current_element_ = &x;
        (*entry)(x);
        return caf::invoke_message_result::consumed;
      }
    }
    return caf::event_based_actor::consume(x);
  }

 private:
  using Entry = StampedHandler;
  // The handlers (copies) and their entries, in one allocation.
  class TableBase {
   public:
    virtual ~TableBase() = default;
  };
  template <class... Fs>
  class Table final : public TableBase {
   public:
    explicit Table(const Fs&... fs) : handlers_(fs...) {
      Fill(std::index_sequence_for<Fs...>{});
    }
    std::span<const Entry> entries() const { return entries_; }

   private:
    template <size_t... Is>
    void Fill(std::index_sequence<Is...>) {
      ((entries_[Is] = MakeEntry(std::get<Is>(handlers_))), ...);
    }
    template <class F>
    static Entry MakeEntry(const F& f) {
      using Element = internal::PooledElementFor<Msg<typename internal::HandlerArg<F>::type>>;
      return Entry{internal::ElementSlot<Element>(),
                   [](const void* handler, caf::mailbox_element& element) {
                     (*static_cast<const F*>(handler))(
                         std::get<0>(static_cast<Element&>(element).data()));
                   },
                   &f};
    }

    std::tuple<Fs...> handlers_;
    std::array<Entry, sizeof...(Fs)> entries_;
  };

  std::unique_ptr<TableBase> table_;
  std::span<const Entry> entries_;  // table_'s
};

template <class State>
using UnitStateActor = caf::stateful_actor<State, UnitActor>;

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNIT_ACTOR_H_
