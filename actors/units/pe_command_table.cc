#include "actors/units/pe_command_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace ahbm::sim {

std::string OpName(const PeCommand& c) {
  switch (c.kind) {
    case CommandKind::kComposite:
      return "composite_gemm";
    case CommandKind::kSoftmaxPv:
      return "softmax_pv";
    case CommandKind::kDot:
      return "dot";
    case CommandKind::kMath:
      return absl::StrCat("math_", pb::MathOp_Name(c.math().op()));
    case CommandKind::kDma:
      return c.dma().dst().space() == pb::HBM   ? "dma_store"
             : c.dma().src().space() == pb::HBM ? "dma_load"
                                               : "dma_copy";
    case CommandKind::kLseMerge:
      return "lse_merge";
  }
  return "?";
}

void PeCommand::Reset(std::vector<std::vector<TileOp>>& free_plans, size_t max_free_plans) {
  // Field by field (a fresh PeCommand moved in costs more): the buffers keep their capacity.
  if (plan.capacity() > 0 && free_plans.size() < max_free_plans) {
    plan.clear();
    free_plans.push_back(std::move(plan));
  }
  plan = {};  // frees a plan buffer the free list had no room for
  kind = CommandKind::kComposite;
  cmd_id = 0;
  seq = 0;
  requester = 0;
  issue = SimTime();
  depends_on.clear();
  msg.reset();
  admitted = false;
  planner_op.clear();
  // piece_waiters keeps its inner buffers: AddPlannerOps clears each one.
  ops.clear();
  op_pos.clear();
  ops_final = 0;
  ops_start = SimTime::Max();
  ops_end = SimTime();
  planned_end.reset();
  planned_version = UINT64_MAX;
  pending_writes.clear();
  dmas_in_flight = 0;
  dma_start = SimTime::Max();
  dma_end = SimTime();
  dma_waiters.clear();
  hbm_read_bytes = 0;
  hbm_write_bytes = 0;
}

std::string CommandTable::Refusal(uint64_t cmd_id, std::span<const uint64_t> depends_on) const {
  if (cmds_.contains(cmd_id) || done_.contains(cmd_id)) return "cmd_id already used on this PE";
  for (uint64_t dep : depends_on) {
    if (!cmds_.contains(dep) && !done_.contains(dep)) {
      return absl::StrCat("depends_on: cmd ", dep, " was never issued on this PE");
    }
  }
  return std::string();
}

PeCommand& CommandTable::Accept(CommandKind kind, uint64_t cmd_id, UnitId requester,
                                SimTime issue, std::span<const uint64_t> depends_on) {
  // ~16 commands per PE are live at once (opt2): keep them in jemalloc's 320-byte class.
  static_assert(sizeof(PeCommand) <= 320, "PeCommand grew past 320 bytes");
  std::unique_ptr<PeCommand> owned;
  if (free_cmds_.empty()) {
    owned = std::make_unique<PeCommand>();
  } else {
    owned = std::move(free_cmds_.back());
    free_cmds_.pop_back();
  }
  PeCommand& c = *owned;
  cmds_[cmd_id] = std::move(owned);
  c.kind = kind;
  c.cmd_id = cmd_id;
  c.seq = next_seq_++;
  c.requester = requester;
  c.issue = issue;
  c.depends_on.assign(depends_on.begin(), depends_on.end());
  live_.push_back(&c);  // seq ascends: live_ stays in issue order
  return c;
}

PeCommand* CommandTable::Find(uint64_t cmd_id) const {
  auto it = cmds_.find(cmd_id);
  return it == cmds_.end() ? nullptr : it->second.get();
}

PeCommand& CommandTable::At(uint64_t cmd_id) const {
  PeCommand* c = Find(cmd_id);
  AHBM_CHECK(c != nullptr) << "cmd " << cmd_id << " is not live";
  return *c;
}

void CommandTable::Complete(const PeCommand& c) {
  if (AdmissionLimited(c.kind)) --inflight_;
  done_.insert(c.cmd_id);
}

void CommandTable::Release(PeCommand& c) {
  auto it = cmds_.find(c.cmd_id);
  AHBM_CHECK(it != cmds_.end() && it->second.get() == &c) << "cmd " << c.cmd_id << " is not live";
  std::unique_ptr<PeCommand> owned = std::move(it->second);
  cmds_.erase(it);
  owned->Reset(free_plan_ops_, kMaxFreePlans);
  if (free_cmds_.size() < kMaxFreeCmds) free_cmds_.push_back(std::move(owned));
}

bool CommandTable::AdmitOnArrival(const PeCommand& c, uint32_t max_inflight) {
  if (waiting_.empty() && inflight_ < max_inflight) {
    ++inflight_;
    return true;
  }
  waiting_.push_back(c.cmd_id);
  return false;
}

PeCommand* CommandTable::NextAdmitted(uint32_t max_inflight) {
  if (waiting_.empty() || inflight_ >= max_inflight) return nullptr;
  PeCommand& c = At(waiting_.front());
  waiting_.pop_front();
  ++inflight_;
  return &c;
}

std::optional<uint64_t> CommandTable::ChainOnAccumulator(std::pair<uint32_t, uint64_t> acc,
                                                         uint64_t cmd_id) {
  std::optional<uint64_t> previous;
  if (auto it = last_on_acc_.find(acc); it != last_on_acc_.end() && cmds_.contains(it->second)) {
    previous = it->second;
  }
  last_on_acc_[acc] = cmd_id;
  return previous;
}

std::vector<TileOp> CommandTable::TakePlanBuffer() {
  if (free_plan_ops_.empty()) return {};
  std::vector<TileOp> buffer = std::move(free_plan_ops_.back());
  free_plan_ops_.pop_back();
  return buffer;
}

}  // namespace ahbm::sim
