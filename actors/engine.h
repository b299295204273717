// The deterministic simulation engine: one ordered event heap in front of CAF actors
// (DESIGN §3, STYLE 2-3, 12).
//
// Contract:
// - Event order is total and written down: the heap always delivers the event with the
//   smallest key (time_ps, src_id, src_seq). src_seq is the sender's own send counter (one
//   counter per src_id, from 0, at most 2^32 sends per sender), so events of one sender with
//   equal time arrive in the order they were sent (FIFO), and events of different senders at
//   equal time arrive in ascending src_id order. An event created while time t is being
//   delivered (zero delay) joins the queue then, so it can follow equal-time events with larger
//   src_id that were delivered before it existed. Nothing else - registration or spawn order,
//   CAF scheduling, memory addresses, hash order - affects the order.
// - Send() is the only way simulated units talk; zero-delay sends are queued events too.
// - A unit's own wake-up (SetTimer) is an event of that unit keyed like a Send to itself, but
//   runs its TimerHandler directly: no CAF message is built or matched. It is counted as an
//   event like any other. Only what a unit tells itself may go this way.
// - Delivering an event sets now() to its time and hands its pre-built CAF mailbox element
//   straight to the destination actor on this thread, no mailbox round trip: a UnitActor (every
//   unit of a chip, unit_actor.h: a light CAF actor without a mailbox, initialized by the
//   engine at the Run after its registration or at its first message) runs the handler of the
//   message's type from its table; an event-based actor (engine tests) gets it through
//   scheduled_actor::activate (CAF's matching). Then CAF's single-threaded test_coordinator
//   runs until no actor has work left (jobs CAF itself scheduled); only then is the next event
//   popped. One event = one handler invocation.
// - Actors run on the engine's own caf::actor_system (scheduler.policy = testing). They are
//   UnitActors or event-based, must not `send` to each other, must not use CAF timers or the
//   wall clock.
// - Fail loudly (AHBM_CHECK): an event to an unknown or terminated unit, a unit terminating
//   before Shutdown() (e.g. its handler threw or quit), a message no handler of the unit
//   matches, a CAF timer started by a handler, an actor spawned in system() and still alive
//   but not registered at Shutdown().
// - Shutdown() (also run by the destructor) discards pending events and drops the engine's
//   handles in ascending unit-id order: a unit nobody else holds strongly terminates there and
//   then (CAF cleans up an unreachable actor); every other unit gets an exit message, and the
//   coordinator runs until all are gone, so ~actor_system (which waits for every actor) returns.
//
// Islands (SetIslands): a run whose units fall into sets that never exchange an event (the
// CUBE Groups of a kernel, DESIGN §3) may be delivered one set after the other: all events of
// island 0 (each time the smallest pending key), then all of island 1, ... Each unit sees
// exactly the events, times and order it would see in the single heap (nothing reaches it from
// another island), so every unit's results are the same; only the interleaving of different
// islands' events changes (and with it the order of anything written across units: the op
// log puts its records back in the single heap's order by order_key()). now() goes back in
// time between islands; after Run() it
// is the latest event's time over all islands. An event between two islands, or to a unit in
// no island, fails a CHECK naming both units (the islands were declared wrong).
//
// Messages: every event that is not a wake-up is one Msg<T> (msg.h): its stamp — the event's
// key (time, src, seq) — and its body. The units of a chip send protobuf commands
// (std::shared_ptr<const T>, received as `const Msg<T>&`); engine tests and benchmarks may send
// any copyable type. A handler reads the time and the sender from the stamp.
//
// Handlers never answer (simulated replies are Sends). Send builds its mailbox element from the
// engine's free lists (engine_element.h) with a message id already marked answered, so CAF
// builds no response promise whatever the handler returns (void, or NoReply =
// caf::delegated<void>: "no response here").
//
// Actors reach the engine explicitly: the spawning code passes `Engine*` and the unit's id as
// spawn arguments and the behavior captures them (or keeps them in a stateful_actor's state);
// there is no global "current engine". A handler's message carries its stamp; code below a
// handler may read the same from the engine (now(), current_src(), current_key()).
#ifndef AHBMSIM_ACTORS_ENGINE_H_
#define AHBMSIM_ACTORS_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "actors/engine_element.h"
#include "actors/instant_queue.h"
#include "actors/msg.h"
#include "actors/time.h"
#include "caf/actor.hpp"
#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/delegated.hpp"
#include "caf/mailbox_element.hpp"
#include "google/protobuf/message.h"
#include "caf/message_id.hpp"

namespace caf {
class execution_unit;
class scheduled_actor;
namespace scheduler {
class test_coordinator;
}  // namespace scheduler
}  // namespace caf

namespace ahbm::sim {

class UnitActor;
struct StampedHandler;

// What a hot handler returns (see the contract).
using NoReply = caf::delegated<void>;

class Engine {
 public:
  // Names the units registered without a name of their own (e.g. ChipIndex::Name); called only
  // when a diagnostic prints a unit.
  using Namer = std::function<std::string(UnitId)>;

  explicit Engine(Namer namer = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The actor system units must be spawned in.
  caf::actor_system& system() { return *system_; }

  // Makes `actor` reachable as unit `id`; `name` is for diagnostics. Each id once. Installs a
  // default handler that fails on unmatched messages (an actor may install its own during its
  // initialization, which runs later, at the next Run/RunUntil).
  void Register(UnitId id, std::string name, caf::actor actor);
  // The same, named by the engine's namer (which must exist).
  void Register(UnitId id, caf::actor actor);
  // The ids of every unit registered so far (its actor), ascending.
  std::vector<UnitId> RegisteredUnits() const;

  // Delivers `x` to unit `dst` at now() + delay as a Msg (msg.h) stamped (time, src, next
  // sequence number of src): a std::shared_ptr<[const] T> of a protobuf T arrives as Msg<T>
  // (the pointee shared), any other X as Msg<X>. `src` is the sending unit's id (a driver
  // outside any actor may use an id of its own). `dst` is resolved at delivery time.
  template <class X>
  void Send(UnitId src, SimTime delay, UnitId dst, X&& x) {
    using M = typename internal::MsgFor<std::decay_t<X>>::type;
    const Stamp stamp = NextStamp(src, delay);
    if (tracer_ != nullptr) [[unlikely]] {
      const google::protobuf::Message* traced = nullptr;
      if constexpr (requires { x.get(); }) traced = x.get();
      tracer_->OnSend(stamp, dst, traced, traced == nullptr ? NameOf<M>() : std::string());
    }
    PushMessage(stamp, dst,
                internal::MakePooledElement(pool_, kMessageId, M{stamp, std::forward<X>(x)}));
  }

  // Sees every message (not a wake-up) when it is sent and when it is delivered: a message
  // trace (observe/message_trace.h). Optional; one at a time.
  class MessageTracer {
   public:
    // `stamp`: the one its handler receives; `message`: the protobuf body (Msg<T> of a
    // protobuf T), or null for another type, which `name` names (the C++ type's name).
    virtual void OnSend(const Stamp& stamp, UnitId dst, const google::protobuf::Message* message,
                        const std::string& name) = 0;
    virtual void OnDeliver(unsigned __int128 key) = 0;

   protected:
    ~MessageTracer() = default;
  };
  void SetMessageTracer(MessageTracer* tracer) { tracer_ = tracer; }

  // What a unit's own wake-ups run (SetTimer). Implemented by the unit's state object.
  class TimerHandler {
   public:
    virtual void OnTimer(uint64_t arg) = 0;

   protected:
    ~TimerHandler() = default;
  };
  // Makes `handler` run the wake-ups of registered unit `id` (once per unit; the handler must
  // live as long as the unit).
  void SetTimerHandler(UnitId id, TimerHandler* handler);
  // Calls the TimerHandler of `unit` with `arg` at now() + delay, keyed (time, unit, next
  // sequence number of unit): the slot a Send from `unit` to itself would take.
  void SetTimer(UnitId unit, SimTime delay, uint64_t arg);

  // Splits the units into islands (see the contract): island_of_unit[id] is unit id's island,
  // 0..n-1, or kNoIsland (a unit no event may reach while there are islands); ids past the end
  // are drivers, which may send to any island. Before any event exists.
  static constexpr uint32_t kNoIsland = UINT32_MAX;
  void SetIslands(std::vector<uint32_t> island_of_unit);
  uint32_t islands() const { return static_cast<uint32_t>(heaps_.size()); }

  // Delivers events until the heap is empty (island by island). now() stays at the last
  // event's time (the latest over the islands).
  void Run();
  // Delivers every event with time <= limit, then sets now() to limit (limit >= now()).
  void RunUntil(SimTime limit);

  // Simulated time: the time of the event being (or last) delivered.
  SimTime now() const { return now_; }
  // Events delivered since construction.
  uint64_t events_processed() const { return events_processed_; }
  // While a handler runs: the src_id of the event it is handling.
  UnitId current_src() const { return current_src_; }
  // While a handler runs: the key of the event it is handling, (time_ps, src_id, src_seq) in
  // one integer that compares as the single heap orders events (0 before the first event).
  using EventKey = unsigned __int128;
  EventKey current_key() const { return current_key_; }
  // The largest key delivered so far in the island being delivered (0 before its first event):
  // records made in handlers, ordered by it (stably), interleave as the single heap would have
  // delivered their events (observe/op_log.h "Event order").
  EventKey order_key() const { return order_key_; }
  // Events waiting in the heap(s).
  size_t pending_events() const;
  // The name `id` was registered with, or the namer's.
  std::string name(UnitId id) const;

  // See the contract. Idempotent; Send/Run after Shutdown() are errors.
  void Shutdown();
  bool shut_down() const { return shut_down_; }

 private:
  // The key (time_ps, src_id, src_seq) packed into one integer that compares the same way:
  // time_ps in the high 64 bits, src_id in the next 32, src_seq in the low 32 (a sender's
  // 2^32-nd send fails a CHECK).
  using Key = EventKey;
  // Trivially copyable, so the heap moves it as 32 plain bytes: a message (the mailbox element
  // it owns, released from its unique_ptr) or a wake-up of dst (timer_arg).
  struct Event {
    Key key;
    UnitId dst;
    bool is_timer;
    union {
      caf::mailbox_element* message;
      uint64_t timer_arg;
    };
    uint64_t time_ps() const { return static_cast<uint64_t>(key >> 64); }
    UnitId src() const { return static_cast<UnitId>(key >> 32); }
  };
  // One island's pending events (one island without islands): the events sent for the
  // instant being delivered (zero delay: the request / answer cascades of one instant), per
  // source in an InstantSet (instant_queue.h), and a binary min-heap on key of all others
  // (later times, and sources the instant store does not take). Delivery takes the smaller
  // key of the two; where an event waits changes nothing delivered.
  struct EventQueue {
    InstantSet now;
    std::vector<Event> later;
    bool empty() const { return now.empty() && later.empty(); }
    size_t size() const { return now.size() + later.size(); }
  };
  // How diagnostics print a unit: its own name, else the namer's (built only when printed).
  struct UnitName {
    const Engine* engine = nullptr;
    UnitId id = 0;
    std::string own;  // empty: the namer's
    std::string str() const {
      return own.empty() && engine->namer_ != nullptr ? engine->namer_(id) : own;
    }
    friend std::ostream& operator<<(std::ostream& os, const UnitName& n) { return os << n.str(); }
  };
  struct Unit {
    UnitName name;
    caf::actor handle;
    caf::scheduled_actor* actor = nullptr;
    UnitActor* unit_actor = nullptr;
    TimerHandler* timer = nullptr;
    bool terminated = false;
  };

  // An asynchronous message id marked answered (see "Handlers never answer" above).
  static constexpr caf::message_id kMessageId = internal::kStampedMessageId;

  template <class M>
  static std::string NameOf() {
    return typeid(M).name();
  }
  // The stamp of src's next event, delivered at now() + delay (takes src's next sequence
  // number).
  Stamp NextStamp(UnitId src, SimTime delay) {
    if (src < dense_seq_.size() && !shutting_down_) [[likely]] {
      uint64_t& seq = dense_seq_[src];
      if (seq <= UINT32_MAX) [[likely]] {
        return Stamp{now_ + delay, src, static_cast<uint32_t>(seq++)};
      }
    }
    return NextStampChecked(src, delay);
  }
  // NextStamp's every case, with its checks (the inline part takes the common one).
  Stamp NextStampChecked(UnitId src, SimTime delay);
  void PushMessage(const Stamp& stamp, UnitId dst, caf::mailbox_element* element) {
    PushEvent(stamp, dst).message = element;
  }
  // Adds an event keyed `stamp` for dst to the heap and returns it for the caller to fill in
  // (a message, or is_timer and timer_arg). Its fields are written in place:
  // an Event assembled on the stack and then copied whole stalled store forwarding.
  Event& PushEvent(const Stamp& stamp, UnitId dst);
  // The queue an event from src to dst joins with islands (CHECKs that it may).
  EventQueue& IslandHeap(UnitId src, UnitId dst);
  void DeliverNext(EventQueue& queue);
  // Removes and returns the event with the smallest key (heap not empty).
  static Event PopMin(std::vector<Event>& heap);
  void RunCoordinator();
  // Runs the behavior functions of the UnitActors registered since the last Run (unit_actor.h).
  void InitializeUnits();
  // dynamic_cast<caf::scheduled_actor*> and <UnitActor*>, answered once per actor type (the
  // cast was half of Register's cost).
  struct ActorKinds {
    caf::scheduled_actor* scheduled = nullptr;
    UnitActor* unit = nullptr;
  };
  ActorKinds KindsOf(caf::abstract_actor* actor);

  Namer namer_;
  internal::ElementPool pool_;  // Send's mailbox elements; outlives the actor system
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::scheduler::test_coordinator* coordinator_ = nullptr;
  std::unique_ptr<caf::execution_unit> delivery_unit_;  // what delivery runs handlers on

  // Dense lookups for the hot path: ids below kDenseIds index vectors, larger ids (tests,
  // drivers with ids of their own) fall back to the hash maps.
  static constexpr UnitId kDenseIds = 1u << 18;
  // What delivery reads, kept contiguous by id (a cache line holds several units).
  struct DenseUnit {
    caf::scheduled_actor* actor = nullptr;
    Unit* unit = nullptr;  // null: no unit with this id
    TimerHandler* timer = nullptr;
    // A UnitActor's dispatch table (unit_actor.h), fetched at its first message once the
    // actor is initialized; null: not yet, or not a UnitActor.
    const StampedHandler* handlers = nullptr;
    uint32_t handler_count = 0;
    bool terminated = false;
  };
  DenseUnit* FindUnit(UnitId id);
  // The next event of a non-empty queue, and taking it.
  const Event& PeekNext(const EventQueue& queue) const;
  Event PopNext(EventQueue& queue);
  // Starts loading what delivering `next` will touch while the current handler runs.
  void PrefetchFor(const Event& next);
  // Delivers a message to `unit` (see the contract).
  void DeliverMessage(DenseUnit& unit, caf::mailbox_element& element);
  std::string name_or_id(UnitId id) const;  // diagnostics: a registered unit's name and id
  uint64_t& NextSeq(UnitId src);

  std::vector<UnitId> uninitialized_;  // UnitActors registered, not yet initialized
  std::vector<EventQueue> heaps_{1};  // one per island (one without islands)
  InstantStore<Event> instants_;      // the FIFOs of every EventQueue::now
  std::vector<uint32_t> island_of_;                 // SetIslands' map; empty: no islands
  absl::node_hash_map<UnitId, Unit> units_;         // iterated only by Shutdown, ids sorted
  std::vector<DenseUnit> dense_units_;              // units_ by id (nodes are stable)
  DenseUnit sparse_unit_;                           // FindUnit's answer for an id >= kDenseIds
  std::vector<uint64_t> dense_seq_;                 // per-sender src_seq counters, id < kDenseIds
  absl::flat_hash_map<UnitId, uint64_t> next_seq_;  // the same for ids >= kDenseIds
  SimTime now_;
  UnitId current_src_ = 0;
  EventKey current_key_ = 0;
  EventKey order_key_ = 0;
  MessageTracer* tracer_ = nullptr;
  uint64_t events_processed_ = 0;
  uint64_t prefetched_ = 0;  // PrefetchFor's calls (a visible effect: see there)
  // Actor types seen by Register, and whether they are event-based (a handful; searched
  // linearly, never iterated into results).
  struct KnownType {
    const std::type_info* type;
    bool scheduled;
    bool unit;
  };
  std::vector<KnownType> known_types_;
  bool running_ = false;
  bool shutting_down_ = false;
  bool shut_down_ = false;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_ENGINE_H_
