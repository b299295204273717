#include "actors/engine.h"

#include <algorithm>
#include <span>
#include <type_traits>
#include <typeinfo>

#include "absl/strings/str_cat.h"
#include "actors/unit_actor.h"
#include "base/check.h"
#include "caf/atom.hpp"
#include "caf/exit_reason.hpp"
#include "caf/scheduled_actor.hpp"
#include "caf/scheduler/test_coordinator.hpp"
#include "caf/send.hpp"

namespace ahbm::sim {
namespace {

// The execution unit event delivery runs handlers on: work CAF schedules from inside a handler
// (none of ours; CAF internals) joins the test_coordinator's job queue, which the engine runs
// after each event.
class DeliveryUnit : public caf::execution_unit {
 public:
  DeliveryUnit(caf::actor_system* sys, caf::scheduler::test_coordinator* coordinator)
      : caf::execution_unit(sys), coordinator_(coordinator) {}
  void exec_later(caf::resumable* job) override { coordinator_->jobs.push_back(job); }

 private:
  caf::scheduler::test_coordinator* coordinator_;
};

}  // namespace

Engine::Engine(Namer namer) : namer_(std::move(namer)) {
  // CAF 0.17 keys carry no "caf." prefix; the policy value is an atom.
  config_.set("scheduler.policy", caf::atom("testing"));
  system_ = std::make_unique<caf::actor_system>(config_);
  coordinator_ = dynamic_cast<caf::scheduler::test_coordinator*>(&system_->scheduler());
  AHBM_CHECK(coordinator_ != nullptr) << "scheduler.policy=testing did not give a test_coordinator";
  delivery_unit_ = std::make_unique<DeliveryUnit>(system_.get(), coordinator_);
  RunCoordinator();
}

Engine::~Engine() { Shutdown(); }

void Engine::Register(UnitId id, caf::actor actor) {
  AHBM_CHECK(namer_ != nullptr) << "unit " << id << " registered without a name, and no namer";
  Register(id, std::string(), std::move(actor));
}

std::vector<UnitId> Engine::RegisteredUnits() const {
  std::vector<UnitId> ids;
  ids.reserve(units_.size());
  for (const auto& [id, unit] : units_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void Engine::Register(UnitId id, std::string name, caf::actor actor) {
  AHBM_CHECK(!shutting_down_) << "Register after Shutdown";
  const UnitName label{this, id, std::move(name)};
  AHBM_CHECK(actor) << "unit " << id << " (" << label << "): invalid actor handle";
  AHBM_CHECK(&actor->home_system() == system_.get())
      << "unit " << id << " (" << label << ") was spawned in another actor system";
  auto* raw = caf::actor_cast<caf::abstract_actor*>(actor);
  const ActorKinds kinds = KindsOf(raw);
  caf::scheduled_actor* scheduled = kinds.scheduled;
  AHBM_CHECK(scheduled != nullptr || kinds.unit != nullptr)
      << "unit " << id << " (" << label << ") is neither a UnitActor nor event-based";
  auto [it, inserted] = units_.try_emplace(id);
  AHBM_CHECK(inserted) << "unit id " << id << " registered twice (" << it->second.name << ", "
                       << label << ")";
  if (scheduled != nullptr) {
    // Runs before the actor's own initialization, which may install a handler of its own.
    scheduled->set_default_handler(
        [this, id](caf::scheduled_actor*, caf::message_view& msg) -> caf::result<caf::message> {
          AHBM_CHECK(false) << "unit " << id << " (" << this->name(id)
                            << ") has no handler for message " << msg.content().stringify();
          return caf::message{};
        });
  } else {
    uninitialized_.push_back(id);
  }
  it->second.name = std::move(label);
  it->second.handle = std::move(actor);
  it->second.actor = scheduled;
  it->second.unit_actor = kinds.unit;
  if (id < kDenseIds) {
    if (dense_units_.size() <= id) dense_units_.resize(id + 1);
    dense_units_[id] = DenseUnit{scheduled, &it->second};
  }
  // Attached last: CAF calls the functor at once if the actor is already gone.
  raw->attach_functor([this, id](const caf::error& reason) {
    Unit& unit = units_.at(id);
    unit.terminated = true;
    if (id < dense_units_.size()) dense_units_[id].terminated = true;
    AHBM_CHECK(shutting_down_) << "unit " << id << " (" << unit.name
                               << ") terminated during simulation: " << to_string(reason);
  });
}

Engine::ActorKinds Engine::KindsOf(caf::abstract_actor* actor) {
  const std::type_info& type = typeid(*actor);
  auto found = std::find_if(known_types_.begin(), known_types_.end(),
                            [&](const KnownType& known) { return *known.type == type; });
  if (found == known_types_.end()) {
    known_types_.push_back(KnownType{&type, dynamic_cast<caf::scheduled_actor*>(actor) != nullptr,
                                     dynamic_cast<UnitActor*>(actor) != nullptr});
    found = known_types_.end() - 1;
  }
  return ActorKinds{found->scheduled ? static_cast<caf::scheduled_actor*>(actor) : nullptr,
                    found->unit ? static_cast<UnitActor*>(actor) : nullptr};
}

std::string Engine::name(UnitId id) const {
  auto it = units_.find(id);
  AHBM_CHECK(it != units_.end()) << "unknown unit " << id;
  return it->second.name.str();
}

Engine::DenseUnit* Engine::FindUnit(UnitId id) {
  if (id < dense_units_.size()) {
    DenseUnit* d = &dense_units_[id];
    return d->unit != nullptr ? d : nullptr;
  }
  if (id < kDenseIds) return nullptr;
  auto it = units_.find(id);
  if (it == units_.end()) return nullptr;
  sparse_unit_ = DenseUnit{it->second.actor, &it->second, it->second.timer};
  sparse_unit_.terminated = it->second.terminated;
  return &sparse_unit_;
}

uint64_t& Engine::NextSeq(UnitId src) {
  if (src >= kDenseIds) return next_seq_[src];
  if (dense_seq_.size() <= src) dense_seq_.resize(src + 1, 0);
  return dense_seq_[src];
}

void Engine::SetTimerHandler(UnitId id, TimerHandler* handler) {
  auto it = units_.find(id);
  AHBM_CHECK(it != units_.end()) << "timer handler for unknown unit " << id;
  AHBM_CHECK(handler != nullptr && it->second.timer == nullptr)
      << "unit " << id << " (" << it->second.name << "): timer handler null or set twice";
  it->second.timer = handler;
  if (id < dense_units_.size()) dense_units_[id].timer = handler;
}

void Engine::SetTimer(UnitId unit, SimTime delay, uint64_t arg) {
  Event& event = PushEvent(NextStamp(unit, delay), unit);
  event.is_timer = true;
  event.timer_arg = arg;
}

Stamp Engine::NextStampChecked(UnitId src, SimTime delay) {
  AHBM_CHECK(!shutting_down_) << "Send after Shutdown (unit " << src << ")";
  uint64_t& seq = src < dense_seq_.size() ? dense_seq_[src] : NextSeq(src);
  AHBM_CHECK(seq <= UINT32_MAX) << "unit " << src << " sent 2^32 events";
  return Stamp{now_ + delay, src, static_cast<uint32_t>(seq++)};
}

Engine::Event& Engine::PushEvent(const Stamp& stamp, UnitId dst) {
  static_assert(std::is_trivially_copyable_v<Event> && sizeof(Event) == 32);
  const Key key = stamp.key();
  // The instant store takes a source's events only if they all go to one queue (a source in
  // no island may send to several).
  EventQueue* queue;
  bool one_source_queue;
  if (heaps_.size() == 1) {
    queue = &heaps_.front();
    one_source_queue = true;
  } else if (dst < island_of_.size() && stamp.src < island_of_.size() &&
             island_of_[dst] == island_of_[stamp.src] && island_of_[dst] != kNoIsland)
      [[likely]] {
    queue = &heaps_[island_of_[dst]];  // IslandHeap's answer, its checks passed
    one_source_queue = true;
  } else {
    queue = &IslandHeap(stamp.src, dst);
    one_source_queue = stamp.src < island_of_.size();
  }
  if (stamp.time == now_ && stamp.src < InstantStore<Event>::kMaxSources && one_source_queue) {
    Event& event = instants_.Push(queue->now, stamp.src, stamp.time.value());
    event = Event{};
    event.key = key;
    event.dst = dst;
    return event;
  }
  std::vector<Event>& heap = queue->later;
  // Binary min-heap on key, sift-up with a hole (keys are unique, so the delivery order is
  // the key order whatever the heap's shape).
  size_t hole = heap.size();
  heap.emplace_back();
  Event* const h = heap.data();
  while (hole > 0) {
    const size_t parent = (hole - 1) / 2;
    if (h[parent].key < key) break;
    h[hole] = h[parent];
    hole = parent;
  }
  Event& event = h[hole];
  event = Event{};
  event.key = key;
  event.dst = dst;
  return event;
}

Engine::EventQueue& Engine::IslandHeap(UnitId src, UnitId dst) {
  const uint32_t to = dst < island_of_.size() ? island_of_[dst] : kNoIsland;
  AHBM_CHECK(to != kNoIsland) << "event from " << name_or_id(src) << " to " << name_or_id(dst)
                              << ", a unit in no island (the run's islands leave it out)";
  if (src < island_of_.size()) {
    AHBM_CHECK(island_of_[src] == to)
        << "event from " << name_or_id(src) << " (island " << island_of_[src] << ") to "
        << name_or_id(dst) << " (island " << to
        << "): islands must never exchange events (the run's islands are declared wrong)";
  }
  return heaps_[to];
}

void Engine::SetIslands(std::vector<uint32_t> island_of_unit) {
  AHBM_CHECK(events_processed_ == 0 && pending_events() == 0)
      << "SetIslands after events were sent";
  uint32_t n = 0;
  for (uint32_t island : island_of_unit) {
    if (island != kNoIsland) n = std::max(n, island + 1);
  }
  island_of_ = std::move(island_of_unit);
  heaps_.assign(std::max(n, 1u), {});
}

size_t Engine::pending_events() const {
  size_t n = 0;
  for (const EventQueue& queue : heaps_) n += queue.size();
  return n;
}

std::string Engine::name_or_id(UnitId id) const {
  return units_.contains(id) ? absl::StrCat(name(id), " (unit ", id, ")")
                             : absl::StrCat("unit ", id);
}

Engine::Event Engine::PopMin(std::vector<Event>& heap) {
  Event* const h = heap.data();
  const Event top = h[0];
  const size_t n = heap.size() - 1;  // size after the pop
  const Event last = h[n];
  heap.pop_back();
  // Floyd's pop: the hole goes down to a leaf along the smaller children (no comparison with
  // `last`, which mostly belongs near the bottom), then `last` sifts up from there.
  size_t hole = 0;
  size_t c = 1;
  while (c + 1 < n) {
    c += h[c + 1].key < h[c].key;
    h[hole] = h[c];
    hole = c;
    c = 2 * c + 1;
  }
  if (c < n) {
    h[hole] = h[c];
    hole = c;
  }
  while (hole > 0) {
    const size_t parent = (hole - 1) / 2;
    if (h[parent].key < last.key) break;
    h[hole] = h[parent];
    hole = parent;
  }
  if (n > 0) h[hole] = last;
  return top;
}

void Engine::PrefetchFor(const Event& next) {
  if (next.dst >= dense_units_.size()) return;
  const DenseUnit& unit = dense_units_[next.dst];
  __builtin_prefetch(&unit);
  if (!next.is_timer) __builtin_prefetch(next.message);
  if (unit.handlers != nullptr) __builtin_prefetch(unit.handlers);
  // Kept: without a visible effect, a call of this function could be dropped as dead.
  prefetched_ += 1;
}

void Engine::RunCoordinator() { coordinator_->run(); }

const Engine::Event& Engine::PeekNext(const EventQueue& queue) const {
  if (queue.now.empty()) return queue.later.front();
  const Event& instant = instants_.Min(queue.now);
  return queue.later.empty() || instant.key < queue.later.front().key ? instant
                                                                       : queue.later.front();
}

Engine::Event Engine::PopNext(EventQueue& queue) {
  if (queue.now.empty()) return PopMin(queue.later);
  const uint32_t src = InstantStore<Event>::MinSource(queue.now);
  if (queue.later.empty() || instants_.Oldest(src).key < queue.later.front().key) {
    return instants_.PopFrom(queue.now, src);
  }
  return PopMin(queue.later);
}

void Engine::DeliverNext(EventQueue& queue) {
  const Event event = PopNext(queue);
  if (!queue.empty()) PrefetchFor(PeekNext(queue));
  DenseUnit* unit = event.dst < dense_units_.size() ? &dense_units_[event.dst] : nullptr;
  if (unit == nullptr || unit->unit == nullptr || unit->terminated) {
    unit = FindUnit(event.dst);
    AHBM_CHECK(unit != nullptr) << "event from unit " << event.src() << " to unknown unit "
                                << event.dst << " at " << event.time_ps() << "ps";
    AHBM_CHECK(!unit->terminated) << "event to terminated unit " << event.dst << " ("
                                  << unit->unit->name << ")";
  }
  now_ = SimTime(event.time_ps());
  current_src_ = event.src();
  current_key_ = event.key;
  if (event.key > order_key_) order_key_ = event.key;
  if (!event.is_timer) {
    if (tracer_ != nullptr) tracer_->OnDeliver(event.key);
    caf::mailbox_element_ptr element(event.message);
    DeliverMessage(*unit, *element);
  } else {
    AHBM_CHECK(unit->timer != nullptr)
        << "wake-up of unit " << event.dst << " (" << unit->unit->name
        << "), which has no timer handler";
    unit->timer->OnTimer(event.timer_arg);
  }
  if (coordinator_->has_job()) RunCoordinator();
  AHBM_CHECK(!coordinator_->has_pending_timeout())
      << "unit " << event.dst << " (" << name(event.dst)
      << ") started a CAF timer (delayed_send, after(), request timeout); simulated delays go "
         "through Engine::Send";
  ++events_processed_;
}

void Engine::DeliverMessage(DenseUnit& unit, caf::mailbox_element& element) {
  std::span<const StampedHandler> table(unit.handlers, unit.handler_count);
  if (unit.handlers == nullptr && unit.unit->unit_actor != nullptr) {
    UnitActor* unit_actor = unit.unit->unit_actor;
    if (!unit_actor->initialized()) unit_actor->Initialize();  // registered during this Run
    table = unit_actor->stamped_handlers();
    if (&unit != &sparse_unit_) {
      unit.handlers = table.empty() ? nullptr : table.data();
      unit.handler_count = static_cast<uint32_t>(table.size());
    }
  }
  if (const StampedHandler* handler = FindStampedHandler(table, element)) {
    (*handler)(element);
    return;
  }
  AHBM_CHECK(unit.actor != nullptr)
      << "unit " << unit.unit->name.id << " (" << unit.unit->name
      << ") has no handler for message " << element.content().stringify();
  unit.actor->activate(delivery_unit_.get(), element);
}

void Engine::InitializeUnits() {
  // In registration order; a unit's behavior function may use the engine (SetTimerHandler).
  for (size_t i = 0; i < uninitialized_.size(); ++i) {
    const UnitId id = uninitialized_[i];
    auto it = units_.find(id);
    if (it == units_.end() || it->second.unit_actor == nullptr) continue;
    UnitActor* unit = it->second.unit_actor;
    if (unit->initialized()) continue;  // a message reached it first (DeliverMessage)
    unit->Initialize();
    if (id < dense_units_.size()) {
      const std::span<const StampedHandler> table = unit->stamped_handlers();
      dense_units_[id].handlers = table.empty() ? nullptr : table.data();
      dense_units_[id].handler_count = static_cast<uint32_t>(table.size());
    }
  }
  uninitialized_.clear();
}

void Engine::Run() {
  AHBM_CHECK(!running_) << "Run is not reentrant";
  AHBM_CHECK(!shutting_down_) << "Run after Shutdown";
  running_ = true;
  RunCoordinator();  // lets freshly spawned actors initialize
  InitializeUnits();
  SimTime last = now_;
  for (EventQueue& queue : heaps_) {
    order_key_ = 0;
    while (!queue.empty()) DeliverNext(queue);
    last = std::max(last, now_);
  }
  now_ = last;
  running_ = false;
}

void Engine::RunUntil(SimTime limit) {
  AHBM_CHECK(!running_) << "RunUntil is not reentrant";
  AHBM_CHECK(!shutting_down_) << "RunUntil after Shutdown";
  AHBM_CHECK(limit >= now_) << "RunUntil(" << limit << ") is before now() = " << now_;
  running_ = true;
  RunCoordinator();
  InitializeUnits();
  for (EventQueue& queue : heaps_) {
    while (!queue.empty() && PeekNext(queue).time_ps() <= limit.value()) {
      DeliverNext(queue);
    }
  }
  now_ = limit;
  running_ = false;
}

void Engine::Shutdown() {
  if (shut_down_) return;
  AHBM_CHECK(!running_) << "Shutdown from inside a handler";
  shutting_down_ = true;
  for (EventQueue& queue : heaps_) {
    while (!queue.empty()) {
      const Event event = PopNext(queue);
      if (!event.is_timer) caf::mailbox_element_ptr discarded(event.message);
    }
  }
  std::vector<UnitId> ids;
  ids.reserve(units_.size());
  for (const auto& [id, unit] : units_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  // A unit only the engine holds is cleaned up by CAF as soon as that handle goes (an
  // unreachable actor terminates at once, no message needed); one still held elsewhere (a test
  // reading its state) gets an exit message.
  std::vector<caf::actor> held;
  for (UnitId id : ids) {
    Unit& unit = units_.at(id);
    unit.actor = nullptr;
    unit.unit_actor = nullptr;
    if (id < dense_units_.size()) {
      dense_units_[id].actor = nullptr;
      dense_units_[id].handlers = nullptr;
    }
    caf::actor handle = std::move(unit.handle);
    if (caf::actor_cast<caf::actor_control_block*>(handle)->strong_refs > 1) {
      held.push_back(std::move(handle));
    }
  }
  for (const caf::actor& handle : held) {
    caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  }
  RunCoordinator();
  AHBM_CHECK(system_->registry().running() == 0)
      << system_->registry().running()
      << " actor(s) still running at shutdown: spawned in Engine::system() but never registered?";
  shut_down_ = true;
}

}  // namespace ahbm::sim
