#include "actors/units/pe_dma_tracker.h"

#include <algorithm>
#include <utility>

#include "actors/message_pool.h"
#include "base/check.h"
#include "google/protobuf/arena.h"

namespace ahbm::sim {
namespace {

// A returned batch keeps its commands, each cleared with its src and dst kept (cleared, their
// shape and strides keeping their capacity), so that the next admission's pieces allocate
// nothing; Slot overwrites them in order and EndBatch drops the ones left over.
struct ResetBatch {
  void operator()(pb::DmaBatch& batch) const {
    batch.set_batch_id(0);
    for (pb::DmaCmd& cmd : *batch.mutable_cmds()) {
      ClearKeeping(cmd, Kept<pb::DmaCmd, pb::TensorRef, &pb::DmaCmd::release_src,
                             &pb::DmaCmd::set_allocated_src>(),
                   Kept<pb::DmaCmd, pb::TensorRef, &pb::DmaCmd::release_dst,
                        &pb::DmaCmd::set_allocated_dst>());
    }
  }
};
struct KeepSmallBatch {
  bool operator()(const pb::DmaBatch& batch) const {
    return batch.cmds_size() <= DmaTracker::kPooledBatchCmds;
  }
};
using BatchPool =
    MessagePool<pb::DmaBatch, ResetBatch, PoolAllocator<pb::DmaBatch>, KeepSmallBatch>;

}  // namespace

uint64_t DmaTracker::Number(uint64_t cmd_id, uint32_t tile_index, bool whole_command) {
  const uint64_t id = next_id_++;
  if (pieces_.empty()) pieces_first_ = id;
  while (pieces_first_ + pieces_.size() < id) pieces_.emplace_back();  // batch ids
  pieces_.push_back(DmaPiece{cmd_id, tile_index, whole_command});
  return id;
}

uint64_t DmaTracker::SendOne(uint64_t cmd_id, uint32_t tile_index, bool whole_command) {
  ++replies_pending_;
  return Number(cmd_id, tile_index, whole_command);
}

void DmaTracker::BeginBatch(int loads) {
  AHBM_CHECK(!batching_) << "scheduler of pe " << pe_ << ": a batch is already open";
  batching_ = true;
  batch_loads_ = loads;
}

pb::DmaCmd& DmaTracker::Slot(uint64_t cmd_id, uint32_t tile_index) {
  AHBM_CHECK(batching_) << "scheduler of pe " << pe_ << ": operand load outside an admission";
  if (batch_ == nullptr) {
    if (batch_loads_ <= kPooledBatchCmds) {
      batch_ = BatchPool::Make();
    } else {
      // The batch and its pieces on one arena, owned by the message's shared_ptr (aliasing).
      auto arena = std::make_shared<google::protobuf::Arena>();
      pb::DmaBatch* batch = google::protobuf::Arena::CreateMessage<pb::DmaBatch>(arena.get());
      batch_ = std::shared_ptr<pb::DmaBatch>(std::move(arena), batch);
    }
    batch_used_ = 0;
  }
  // A reused batch's commands are cleared and kept (BatchPool): overwrite them in order.
  pb::DmaCmd& dma = batch_used_ < batch_->cmds_size() ? *batch_->mutable_cmds(batch_used_)
                                                      : *batch_->add_cmds();
  ++batch_used_;
  dma.set_cmd_id(Number(cmd_id, tile_index, /*whole_command=*/false));
  dma.set_parent_cmd_id(cmd_id);
  return dma;
}

std::shared_ptr<const pb::DmaBatch> DmaTracker::EndBatch() {
  batching_ = false;
  std::shared_ptr<pb::DmaBatch> batch = std::move(batch_);  // leaves batch_ null
  if (batch == nullptr) return nullptr;
  if (const int unused = batch->cmds_size() - batch_used_; unused > 0) {
    batch->mutable_cmds()->DeleteSubrange(batch_used_, unused);
  }
  batch->set_batch_id(next_id_++);
  ++replies_pending_;
  return batch;
}

DmaPiece DmaTracker::Take(uint64_t dma_id) {
  const bool known = dma_id >= pieces_first_ && dma_id - pieces_first_ < pieces_.size() &&
                     pieces_[dma_id - pieces_first_].has_value();
  AHBM_CHECK(known) << "scheduler of pe " << pe_ << ": reply for unknown DMA " << dma_id;
  std::optional<DmaPiece>& slot = pieces_[dma_id - pieces_first_];
  const DmaPiece piece = *slot;
  slot.reset();
  while (!pieces_.empty() && !pieces_.front().has_value()) {
    pieces_.pop_front();
    ++pieces_first_;
  }
  return piece;
}

bool DmaTracker::ReplyArrived() {
  AHBM_CHECK(replies_pending_ > 0) << "scheduler of pe " << pe_ << ": a reply nobody awaits";
  return --replies_pending_ == 0;
}

void ExternalInputs::Add(OpId op, int unknown, SimTime ready) {
  if (slots_.empty()) first_ = op;
  AHBM_CHECK(op >= first_ + slots_.size()) << "external input of op " << op
                                           << " added out of order";
  while (first_ + slots_.size() < op) slots_.emplace_back();
  slots_.push_back(Waiting{unknown, ready});
}

std::optional<SimTime> ExternalInputs::Resolve(OpId op, SimTime ready) {
  const bool known =
      op >= first_ && op - first_ < slots_.size() && slots_[op - first_].has_value();
  AHBM_CHECK(known) << "op " << op << " has no pending external input";
  std::optional<Waiting>& slot = slots_[op - first_];
  slot->ready = std::max(slot->ready, ready);
  if (--slot->unknown > 0) return std::nullopt;
  const SimTime all_ready = slot->ready;
  slot.reset();
  while (!slots_.empty() && !slots_.front().has_value()) {
    slots_.pop_front();
    ++first_;
  }
  return all_ready;
}

}  // namespace ahbm::sim
