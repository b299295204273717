// Synthetic engine workload: 63 workers pass ping tokens among themselves and report to one
// hub (fan-in), run either on the CAF engine or on a plain C++ event heap (DESIGN §3).
//
// Contract: for the same `hops`, RunOnEngine and RunOnPlainHeap deliver the same events in the
// same order under the key (time_ps, src_id, src_seq), so their Results are equal; the
// checksum folds every delivery's (time, dst, src, payload) in delivery order.
//
// Workload: unit 0 is the hub, units 1..63 are workers; at time 0 a driver gives each worker
// one Ping{hops}. A worker receiving Ping{h > 0} forwards Ping{h - 1} to worker
// 1 + (self * 5 + h) % 63 after 1 + (self + h) % 7 cycles of a 1 GHz clock and, when h % 4 == 0,
// sends Report{self} to the hub after 500 ps. Events = 63 * (hops + 1 + hops / 4).
#ifndef AHBMSIM_BENCH_PING_FANIN_H_
#define AHBMSIM_BENCH_PING_FANIN_H_

#include <cstdint>
#include <memory>

#include "actors/engine.h"

namespace ahbm::bench {

struct PingFanInResult {
  uint64_t events = 0;    // deliveries, including the 63 initial kicks
  uint64_t end_ps = 0;    // simulated time of the last delivery
  uint64_t checksum = 0;  // order-sensitive hash of all deliveries
  friend bool operator==(const PingFanInResult&, const PingFanInResult&) = default;
};

// Number of deliveries the workload makes for `hops`.
constexpr uint64_t PingFanInEvents(uint32_t hops) { return 63 * (uint64_t{hops} + 1 + hops / 4); }

// 64 CAF actors (UnitActors, like a chip's units) on sim::Engine. The constructor spawns and
// registers them and schedules the kicks, Run() delivers every event (once), the destructor
// shuts the engine down; a benchmark times Run() alone.
class PingFanInOnEngine {
 public:
  explicit PingFanInOnEngine(uint32_t hops);
  PingFanInOnEngine(const PingFanInOnEngine&) = delete;
  PingFanInOnEngine& operator=(const PingFanInOnEngine&) = delete;

  PingFanInResult Run();

 private:
  uint64_t checksum_ = 0;  // declared before engine_: actors write it until shutdown
  sim::Engine engine_;
};

// Setup, Run() and shutdown in one call.
PingFanInResult RunOnEngine(uint32_t hops);
// The same workload as plain function calls on a std::vector binary heap.
PingFanInResult RunOnPlainHeap(uint32_t hops);

}  // namespace ahbm::bench

#endif  // AHBMSIM_BENCH_PING_FANIN_H_
