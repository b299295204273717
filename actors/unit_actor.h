// The CAF actor class every simulated unit of a chip is (DESIGN §3): a light local actor whose
// stamped messages reach their handler by a table lookup (actors/README.md, layers: CAF's
// per-message categorisation, behaviour matching and result visitor were a seventh of a run once
// every unit was an actor, and a scheduled actor's mailbox, behaviour stack and stream state were
// most of a unit's memory).
//
// Contract:
// - A unit's behavior function returns `self->Handlers(f1, f2, ...)`: each f takes one
//   `const Msg<T>&` (msg.h) and goes into the actor's dispatch table (the behavior returned is
//   empty: no CAF matching is involved).
// - It is still a CAF actor: spawned by CAF (`system.spawn(F, args...)` with F's first argument
//   a UnitActor* or a UnitStateActor<State>*), with an address and an id, registered with the
//   actor system while it lives, monitorable and linkable, terminated by an exit message or by
//   becoming unreachable (its state is destroyed then, as a stateful actor's is).
// - The engine is the units' scheduler (engine.h): it initializes a registered unit at its next
//   Run, or at its first message if it was registered while the engine runs (the behavior
//   function runs then: Initialize()), and for each message Engine::Send built
//   (a StampedElement, engine_element.h) it looks up the handler of the message's type in the
//   unit's table (stamped_handlers()) and runs it directly. A stamped message of a type without
//   a handler fails loudly (the engine's check), and so does any message from outside the engine
//   (a unit has no mailbox) except CAF's exit message.
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
#include "caf/local_actor.hpp"
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

class UnitActor : public caf::local_actor {
 public:
  using behavior_type = caf::behavior;

  explicit UnitActor(caf::actor_config& cfg) : caf::local_actor(cfg) {}

  // See the contract. Call once, from the behavior function.
  template <class... Fs>
  caf::behavior Handlers(Fs... fs) {
    AHBM_CHECK(table_ == nullptr) << "UnitActor::Handlers called twice";
    auto table = std::make_unique<Table<Fs...>>(std::move(fs)...);
    entries_ = table->entries();
    table_ = std::move(table);
    return caf::behavior{};
  }

  // Runs the behavior function the actor was spawned with (once; the engine calls it).
  void Initialize();
  bool initialized() const { return getf(is_initialized_flag); }

  // The dispatch table, once the actor is initialized; empty before. It never changes
  // afterwards, so the engine may keep it.
  std::span<const StampedHandler> stamped_handlers() const {
    return initialized() ? entries_ : std::span<const StampedHandler>();
  }

  // CAF's side (see the contract).
  void launch(caf::execution_unit* host, bool lazy, bool hide) override;
  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* host) override;

 private:
  using Entry = StampedHandler;
  // The handlers and their entries, in one object.
  class TableBase {
   public:
    virtual ~TableBase() = default;
  };
  template <class... Fs>
  class Table final : public TableBase {
   public:
    explicit Table(Fs&&... fs) : handlers_(std::move(fs)...) {
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

  // Ends the actor for `reason` (an exit message): its state goes (on_exit), then CAF's cleanup
  // (attachables, links, the actor system's count). An actor that becomes unreachable ends the
  // same way in local_actor::on_destroy.
  void Terminate(caf::error reason, caf::execution_unit* host);

  // Its own small allocation: the tables of a kind's units (allocated one after the other) sit
  // side by side, which delivery reads better than a table inside each actor object.
  std::unique_ptr<TableBase> table_;
  std::span<const Entry> entries_;  // table_'s
};

template <class State>
using UnitStateActor = caf::stateful_actor<State, UnitActor>;

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNIT_ACTOR_H_
