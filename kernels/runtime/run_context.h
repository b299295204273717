// What every PE's runtime (pe_runtime.h) shares in one run (DESIGN §4): the simulation, the
// data-mode store, facts the launch fixes before the run (the ring, which PEs run a kernel),
// the requests' finish times every PE adds to, and the one piece of state two PEs share, the
// IPCQ credit (ipcq_credit.h). No PE's own state is here: a PE reaches another only by message
// or through IpcqCredit.
#ifndef AHBMSIM_KERNELS_RUNTIME_RUN_CONTEXT_H_
#define AHBMSIM_KERNELS_RUNTIME_RUN_CONTEXT_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/chip_sim.h"
#include "actors/time.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/ipcq_credit.h"

namespace ahbm::kernels {

class RunContext {
 public:
  // `sim` outlives the run; `store` is null in timing mode.
  RunContext(sim::ChipSim* sim, MemoryStore* store);

  sim::UnitContext& units() const { return sim_->context(); }
  const topology::ChipIndex& index() const { return sim_->context().index; }
  sim::SimTime Now() const { return sim_->context().engine->now(); }
  MemoryStore* store() const { return store_; }
  // Whether the run records a trace (its Instance and Call records; ChipSimOptions) — not
  // once the engine is shut down (coroutine frames destroyed then close their scopes).
  bool recording() const {
    return sim_->context().record_calls && !sim_->context().engine->shut_down();
  }
  // "pe 3 (sip0.cube0.pe3)".
  std::string PeName(uint32_t pe) const;

  // The ring order for "ring+"/"ring-" (global CUBE indices); empty: none.
  const std::vector<uint32_t>& ring() const { return ring_; }
  void set_ring(std::vector<uint32_t> cubes) { ring_ = std::move(cubes); }
  // Whether a kernel instance runs on global PE `pe` (its CPU owns its NOC endpoint). Fixed
  // before the run.
  bool RunsKernel(uint32_t pe) const { return pe < runs_kernel_.size() && runs_kernel_[pe]; }
  void AddKernelPe(uint32_t pe);

  IpcqCredit& ipcq_credit() { return ipcq_credit_; }

  // Request `request_id`'s instances: one of them completed something at `end`.
  void NoteRequestDone(uint32_t request_id, sim::SimTime end);
  // Request ids are 0 .. this - 1 (AddKernel makes room before the run).
  void AddRequestId(uint32_t request_id);
  const std::vector<sim::SimTime>& request_done() const { return request_done_; }

 private:
  sim::ChipSim* sim_;
  MemoryStore* store_;
  std::vector<uint32_t> ring_;
  std::vector<uint8_t> runs_kernel_;  // by global PE
  IpcqCredit ipcq_credit_;
  std::vector<sim::SimTime> request_done_;  // by request id: its latest completion
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_RUN_CONTEXT_H_
