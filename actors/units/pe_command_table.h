// The PE scheduler's command table (pe_scheduler.h): the commands a PE's scheduler holds, from
// acceptance to release. It numbers them in issue order, refuses a reused cmd_id or a
// dependency never issued, keeps the done set, the composite admission queue and the
// softmax_pv accumulator chains, and pools finished commands and plan buffers for reuse.
// A plain class (no CAF, no engine): pe_command_table_test.
#ifndef AHBMSIM_ACTORS_UNITS_PE_COMMAND_TABLE_H_
#define AHBMSIM_ACTORS_UNITS_PE_COMMAND_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "actors/models/tile_plan.h"
#include "actors/msg.h"
#include "actors/pe_planner.h"
#include "actors/time.h"
#include "base/vector_fifo.h"
#include "google/protobuf/message_lite.h"
#include "proto/commands.pb.h"

namespace ahbm::sim {

enum class CommandKind : uint8_t { kComposite, kSoftmaxPv, kDot, kMath, kDma, kLseMerge };

// Composites and softmax_pv are admission-limited (scheduler.max_inflight_composites).
inline bool AdmissionLimited(CommandKind kind) {
  return kind == CommandKind::kComposite || kind == CommandKind::kSoftmaxPv;
}

// One command on the scheduler. Its planner ops and tile plan are indexed three ways: `plan`
// by tile op index, `planner_op` / `piece_waiters` by tile op index, `ops` / `op_pos` by the
// command's n-th planner op.
struct PeCommand {
  CommandKind kind = CommandKind::kComposite;
  bool admitted = false;
  UnitId requester = 0;
  int dmas_in_flight = 0;  // DMAs sent whose end is not yet known
  // Completion check by index: ops[0 .. ops_final) are committed and ended (final), their
  // span folded into ops_start / ops_end; TryComplete resumes from ops_final.
  uint32_t ops_final = 0;
  uint64_t cmd_id = 0;
  uint64_t seq = 0;
  SimTime issue;
  std::vector<uint64_t> depends_on;
  // The command message, of the type `kind` names (read through the accessors below).
  std::shared_ptr<const google::protobuf::MessageLite> msg;
  const pb::CompositeCmd& composite() const { return As<pb::CompositeCmd>(); }
  const pb::SoftmaxPvCmd& softmax_pv() const { return As<pb::SoftmaxPvCmd>(); }
  const pb::GemmCmd& dot() const { return As<pb::GemmCmd>(); }
  const pb::MathCmd& math() const { return As<pb::MathCmd>(); }
  const pb::LseMergeCmd& lse_merge() const { return As<pb::LseMergeCmd>(); }
  const pb::DmaCmd& dma() const { return As<pb::DmaCmd>(); }
  template <class T>
  const T& As() const { return static_cast<const T&>(*msg); }
  std::vector<TileOp> plan;  // the tile plan's ops (TilePlan::ops; its totals are not used)
  std::vector<std::optional<OpId>> planner_op;  // by tile op index (GEMM/MATH ops)
  std::vector<std::vector<OpId>> piece_waiters;  // by tile op index: planner ops a load feeds
  std::vector<OpId> ops;                         // every planner op, ascending
  std::vector<uint32_t> op_pos;                  // ops[i]'s position in plan.ops
  SimTime ops_start = SimTime::Max();
  SimTime ops_end;
  // PostWake's: the latest end of its planner ops (nullopt: one is not planned yet), as of
  // the planner's plan_version `planned_version`.
  std::optional<SimTime> planned_end;
  uint64_t planned_version = UINT64_MAX;
  std::vector<uint32_t> pending_writes;          // HBM write-outs not yet issued
  SimTime dma_start = SimTime::Max();
  SimTime dma_end;
  std::vector<OpId> dma_waiters;  // ops of later commands waiting for this one's DMA parts
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;

  // Its DMA parts (loads, write-outs, a CPU load/store) have all ended.
  bool DmaSettled() const { return dmas_in_flight == 0 && pending_writes.empty(); }
  // Back to a fresh command, keeping the buffers' capacity (commands are reused); the plan
  // buffer goes to `free_plans` (up to `max_free_plans` of them). Resets field by field: a new
  // field needs its line there.
  void Reset(std::vector<std::vector<TileOp>>& free_plans, size_t max_free_plans);
};

// "composite_gemm", "math_EXP", "dma_load", ...: for op-log records and error texts only.
std::string OpName(const PeCommand& c);

class CommandTable {
 public:
  // Why `cmd_id` with `depends_on` cannot be accepted ("cmd_id already used on this PE",
  // "depends_on: cmd N was never issued on this PE"); empty when it can.
  std::string Refusal(uint64_t cmd_id, std::span<const uint64_t> depends_on) const;
  // Registers a command (Refusal was empty): numbered next in issue order, live.
  PeCommand& Accept(CommandKind kind, uint64_t cmd_id, UnitId requester, SimTime issue,
                    std::span<const uint64_t> depends_on);
  // The live command `cmd_id`, or null (never issued, or completed).
  PeCommand* Find(uint64_t cmd_id) const;
  PeCommand& At(uint64_t cmd_id) const;  // CHECKs it is live

  // Live commands in issue (seq) order. A caller that finishes commands while iterating sets
  // their entries to null and then calls DropFinished.
  std::vector<PeCommand*>& live() { return live_; }
  void DropFinished() { std::erase(live_, nullptr); }
  // `c` completed: in the done set (a later depends_on on it imposes nothing), its admission
  // slot freed. Call Release next.
  void Complete(const PeCommand& c);
  // Unregisters `c` (completed or refused) and returns it to the pool (or frees it: the pool
  // keeps at most kMaxFreeCmds, so a burst of live commands does not stay allocated). The
  // caller has removed it from live() (Step's loop, which nulls its entry).
  void Release(PeCommand& c);
  // Removes `c` from live() and releases it.
  void Remove(PeCommand& c) {
    std::erase(live_, &c);
    Release(c);
  }

  // Admission of composites / softmax_pv (pe_scheduler.h "Admission"): whether `c` may be
  // admitted on arrival (no older one waits, a slot is free), taking the slot if so; otherwise
  // it waits.
  bool AdmitOnArrival(const PeCommand& c, uint32_t max_inflight);
  // The oldest waiting command when a slot is free (taking the slot), else null.
  PeCommand* NextAdmitted(uint32_t max_inflight);
  bool any_waiting() const { return !waiting_.empty(); }

  // The softmax_pv chain: records `cmd_id` as the last call on accumulator `acc` (acc_o's PE
  // and address) and returns the previous one if it is still live.
  std::optional<uint64_t> ChainOnAccumulator(std::pair<uint32_t, uint64_t> acc,
                                             uint64_t cmd_id);

  // A plan buffer of a finished command (empty, with capacity), or an empty vector.
  std::vector<TileOp> TakePlanBuffer();

 private:
  static constexpr size_t kMaxFreeCmds = 2;
  // TileOp buffers are large enough (~150 bytes an op) that allocating one per plan is a
  // slow-path malloc, and a command object is reused only once as many of its kind have
  // finished.
  static constexpr size_t kMaxFreePlans = 4;

  // Live commands by cmd_id (lookups only, never iterated; heap objects, so live_ can point
  // at them); finished ones wait in free_cmds_ for reuse with their buffers.
  absl::flat_hash_map<uint64_t, std::unique_ptr<PeCommand>> cmds_;
  std::vector<std::unique_ptr<PeCommand>> free_cmds_;
  std::vector<PeCommand*> live_;
  // Completed cmd_ids (membership only, never iterated: a hash set is deterministic here).
  absl::flat_hash_set<uint64_t> done_;
  VectorFifo<uint64_t> waiting_;  // composites / softmax_pv not yet admitted
  uint32_t inflight_ = 0;         // admitted composites / softmax_pv not completed
  uint64_t next_seq_ = 0;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> last_on_acc_;
  std::vector<std::vector<TileOp>> free_plan_ops_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_PE_COMMAND_TABLE_H_
