#include "bench/ping_fanin.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "actors/time.h"
#include "actors/unit_actor.h"
#include "caf/event_based_actor.hpp"

namespace ahbm::bench {
namespace {

using sim::SimTime;
using sim::UnitId;

constexpr UnitId kHub = 0;
constexpr UnitId kWorkers = 63;
constexpr UnitId kDriver = 1000;
constexpr SimTime kReportDelay(500);
const sim::ClockDomain kClock = sim::ClockDomain::FromMHz(1000).value();

struct Ping {
  uint32_t hops;
};
struct Report {
  UnitId worker;
};

// What a worker does with Ping{hops}: emit(delay, dst, message) for each message it sends.
template <class Emit>
void OnPing(UnitId self, uint32_t hops, Emit&& emit) {
  if (hops == 0) return;
  emit(kClock.ToTime(sim::Cycles(1 + (self + hops) % 7)), 1 + (self * 5 + hops) % kWorkers,
       Ping{hops - 1});
  if (hops % 4 == 0) emit(kReportDelay, kHub, Report{self});
}

// Folds one delivery into the checksum (order-sensitive).
void Fold(uint64_t& checksum, uint64_t time_ps, UnitId dst, UnitId src, uint64_t payload) {
  for (uint64_t x : {time_ps, uint64_t{dst}, uint64_t{src}, payload}) {
    checksum = (checksum ^ x) * 0x100000001b3ull;
  }
}

// The actors are UnitActors, like every unit of a chip (actors/unit_actor.h).
caf::behavior Worker(sim::UnitActor* actor, sim::Engine* engine, UnitId self,
                     uint64_t* checksum) {
  return actor->Handlers([=](const sim::Msg<Ping>& ping) {
    Fold(*checksum, ping.stamp.time.value(), self, ping.stamp.src, ping->hops);
    OnPing(self, ping->hops,
           [&](SimTime delay, UnitId dst, auto msg) { engine->Send(self, delay, dst, msg); });
  });
}

caf::behavior Hub(sim::UnitActor* actor, uint64_t* checksum) {
  return actor->Handlers([=](const sim::Msg<Report>& report) {
    Fold(*checksum, report.stamp.time.value(), kHub, report.stamp.src, report->worker);
  });
}

}  // namespace

PingFanInOnEngine::PingFanInOnEngine(uint32_t hops) {
  engine_.Register(kHub, "hub", engine_.system().spawn(Hub, &checksum_));
  for (UnitId w = 1; w <= kWorkers; ++w) {
    engine_.Register(w, "worker", engine_.system().spawn(Worker, &engine_, w, &checksum_));
  }
  for (UnitId w = 1; w <= kWorkers; ++w) engine_.Send(kDriver, SimTime(0), w, Ping{hops});
}

PingFanInResult PingFanInOnEngine::Run() {
  engine_.Run();
  return {engine_.events_processed(), engine_.now().value(), checksum_};
}

PingFanInResult RunOnEngine(uint32_t hops) { return PingFanInOnEngine(hops).Run(); }

PingFanInResult RunOnPlainHeap(uint32_t hops) {
  // The engine's key, packed the way sim::Engine packs it: time_ps | src_id | src_seq (32 bits).
  using Key = unsigned __int128;
  struct Event {
    Key key;
    UnitId dst;
    uint32_t payload;  // Ping.hops for a worker, Report.worker for the hub
  };
  auto later = [](const Event& a, const Event& b) { return a.key > b.key; };
  std::vector<Event> heap;
  std::vector<uint64_t> next_seq(kDriver + 1, 0);  // unit ids are dense here
  uint64_t now = 0;
  auto push = [&](UnitId src, SimTime delay, UnitId dst, uint32_t payload) {
    const Key key = (Key{now + delay.value()} << 64) | (Key{src} << 32) | next_seq[src]++;
    heap.push_back({key, dst, payload});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (UnitId w = 1; w <= kWorkers; ++w) push(kDriver, SimTime(0), w, hops);

  PingFanInResult result;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Event ev = heap.back();
    heap.pop_back();
    now = static_cast<uint64_t>(ev.key >> 64);
    ++result.events;
    Fold(result.checksum, now, ev.dst, static_cast<UnitId>(ev.key >> 32), ev.payload);
    if (ev.dst == kHub) continue;
    OnPing(ev.dst, ev.payload, [&](SimTime delay, UnitId dst, auto msg) {
      if constexpr (std::is_same_v<decltype(msg), Ping>) {
        push(ev.dst, delay, dst, msg.hops);
      } else {
        push(ev.dst, delay, dst, msg.worker);
      }
    });
  }
  result.end_ps = now;
  return result;
}

}  // namespace ahbm::bench
