// The PE scheduler's DMA bookkeeping (pe_scheduler.h): which of its DMAs are in flight and for
// which command, the operand-load batch an admission builds, how many replies of this instant
// are still to come, and the planner ops whose HBM inputs those replies resolve. Plain classes
// (no CAF, no engine: the scheduler sends what they build): pe_dma_tracker_test.
#ifndef AHBMSIM_ACTORS_UNITS_PE_DMA_TRACKER_H_
#define AHBMSIM_ACTORS_UNITS_PE_DMA_TRACKER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "actors/pe_planner.h"
#include "actors/time.h"
#include "base/vector_fifo.h"
#include "proto/commands.pb.h"

namespace ahbm::sim {

// What a DMA in flight belongs to.
struct DmaPiece {
  uint64_t cmd_id = 0;
  uint32_t tile_index = 0;
  bool whole_command = false;  // a CPU load/store: the command itself
};

class DmaTracker {
 public:
  explicit DmaTracker(uint32_t pe) : pe_(pe) {}

  // A DMA of command `cmd_id` sent on its own: numbered, in flight, one reply pending. Returns
  // its id (the DmaCmd's cmd_id).
  uint64_t SendOne(uint64_t cmd_id, uint32_t tile_index, bool whole_command);

  // An admission's operand loads, `loads` of them, go out as one DmaBatch: BeginBatch, then a
  // Slot per load (numbered, in flight, parent set; the caller fills src and dst), then
  // EndBatch, which returns the batch to send (null when there was no load) and counts its
  // one reply pending. A batch of at most kPooledBatchCmds loads comes from a pool whose
  // returned batches keep their commands' buffers; a larger one (a whole-context fan-out) is
  // built on an arena of its own.
  static constexpr int kPooledBatchCmds = 64;
  void BeginBatch(int loads);
  pb::DmaCmd& Slot(uint64_t cmd_id, uint32_t tile_index);
  std::shared_ptr<const pb::DmaBatch> EndBatch();

  // The piece a reply answers, no longer in flight (CHECKs it is: a reply comes once).
  DmaPiece Take(uint64_t dma_id);
  // A reply (one DMA's, or one batch's) arrived; returns whether it was the last one pending.
  bool ReplyArrived();
  // Replies of DMAs sent this instant not yet arrived (they all arrive at this instant).
  bool replies_pending() const { return replies_pending_ > 0; }

 private:
  uint64_t Number(uint64_t cmd_id, uint32_t tile_index, bool whole_command);

  uint32_t pe_;  // for error texts
  // DMAs in flight by id: pieces_[i] is DMA id pieces_first_ + i (ids ascend; batch ids and
  // answered DMAs are empty slots, dropped from the front).
  VectorFifo<std::optional<DmaPiece>> pieces_;
  uint64_t pieces_first_ = 1;
  uint64_t next_id_ = 1;
  int replies_pending_ = 0;
  // The open batch: made at its first Slot; `batch_used_` of its commands are this one's.
  bool batching_ = false;
  int batch_loads_ = 0;
  int batch_used_ = 0;
  std::shared_ptr<pb::DmaBatch> batch_;
};

// Planner ops waiting for HBM inputs whose end is not yet known (an operand load in flight,
// a dependency's DMA parts): per op, how many are unknown and the latest ready time so far.
class ExternalInputs {
 public:
  // `op` waits for `unknown` > 0 inputs, none ready before `ready`. Ops are added in id order.
  void Add(OpId op, int unknown, SimTime ready);
  // One input of `op` is known, ready at `ready`: when it was the last unknown one, the op's
  // ready time (the latest of them); else nullopt. CHECKs `op` waits.
  std::optional<SimTime> Resolve(OpId op, SimTime ready);

 private:
  struct Waiting {
    int unknown = 0;
    SimTime ready;
  };
  // slots_[i] is op first_ + i (resolved slots are empty, dropped from the front).
  VectorFifo<std::optional<Waiting>> slots_;
  OpId first_ = 0;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_PE_DMA_TRACKER_H_
