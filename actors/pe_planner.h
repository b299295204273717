// PePlanner: the PE_SCHEDULER's dataflow planner for the engines it owns (GEMM, MATH).
// See actors/README.md ("The planner") and DESIGN §4.
//
// Contract:
// - An op runs on one engine for `busy` cycles, plus `fill_if_idle` cycles when the engine was
//   idle just before it (nothing ran on it, or the previous op ended before this one starts).
// - An op is ready when every dependency has ended and, if it waits on an external input
//   (a DMA piece, IPCQ data), once that input's time is known and reached.
// - Rule 1, work-conserving list scheduling: a free engine starts, at the first clock edge at
//   or after max(free, earliest ready), the ready op with the smallest PriorityKey
//   (command issue seq, tile index), the older op on equal keys; it never waits for an older
//   op that is not ready.
// - Rule 2: decisions are made in time order; at equal times in EngineKind order. Every op
//   lasts at least one cycle, so equal-time decisions on different engines are independent.
// - Rule 3, arrivals first: Replan(now) keeps ops that started strictly before `now`
//   (committed) and re-decides every op that would start at or after `now`, so inputs that
//   arrive at `now` take part in every decision at `now`.
// - Rule 4: a re-plan depends only on the committed ops and the inputs, so re-planning at any
//   set of instants (e.g. at every start and end: per-tile simulation) gives the same starts
//   and ends as re-planning only when inputs arrive (closed form).
// - Incremental re-plan: an input can move only decisions at or after the earliest instant its
//   op could start (its external input's time, its dependencies' ends; never, while a
//   dependency or input is still unknown). Replan keeps the planned decisions before the
//   earliest such instant of all inputs since the last re-plan and re-decides the rest, which
//   gives the same plan as re-deciding every uncommitted op (kFull; a test compares them).
#ifndef AHBMSIM_ACTORS_PE_PLANNER_H_
#define AHBMSIM_ACTORS_PE_PLANNER_H_

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "actors/time.h"
#include "base/check.h"
#include "base/vector_fifo.h"

namespace ahbm::sim {

enum class EngineKind : uint8_t { kGemm = 0, kMath = 1 };
inline constexpr int kNumPlannedEngines = 2;

struct PriorityKey {
  uint64_t issue_seq = 0;   // the command's issue order on its PE
  uint32_t tile_index = 0;  // the op's position in its command's tile plan
  friend auto operator<=>(const PriorityKey&, const PriorityKey&) = default;
};

using OpId = uint64_t;
// Dependencies: a tile op has at most 4 inside its plan; more (a command's dependencies)
// spill to the heap.
using OpDeps = absl::InlinedVector<OpId, 4>;

struct OpSpec {
  EngineKind engine = EngineKind::kGemm;
  PriorityKey key;
  Cycles busy;
  Cycles fill_if_idle;
  OpDeps deps;                  // ops added earlier
  bool waits_external = false;  // also waits for SetExternalReady()
};

struct OpTiming {
  SimTime start;
  SimTime end;
};

class PePlanner {
 public:
  // kFull re-decides every uncommitted op at each re-plan with a new input (the reference the
  // incremental mode is tested against).
  enum class Mode { kIncremental, kFull };
  explicit PePlanner(ClockDomain clock, Mode mode = Mode::kIncremental)
      : clock_(clock), mode_(mode) {}

  // Adds an op; ids are consecutive from 0. Call Replan() before reading timings.
  OpId Add(OpSpec spec);
  // The time an external input of `op` is available (>= the current plan time).
  void SetExternalReady(OpId op, SimTime ready);

  // Commits ops that started before `now` and plans every other op that can be planned.
  // Without a new input since the last re-plan, the plan of the uncommitted ops is kept as it
  // is (Rule 4: re-deciding it would give the same starts and ends); with one, the decisions
  // before the earliest instant an input can move are kept too (see the contract).
  void Replan(SimTime now);

  // Planned or committed timing; nullopt while the op is blocked (an input is unknown).
  // Retired ops (committed and ended) keep their timing until Release(op).
  std::optional<OpTiming> timing(OpId op) const {  // inline: the scheduler's hot read
    const Op* o = Find(op);
    return o != nullptr ? o->timing : RetiredTiming(op);
  }
  // Forgets a retired op's timing (the client has read it); a live op is not affected.
  void Release(OpId op);
  bool committed(OpId op) const;
  // The earliest planned start or end strictly after `t` (per-tile stepping), if any.
  std::optional<SimTime> NextBoundaryAfter(SimTime t) const;
  // Ops not yet committed, or committed but not yet ended at the last Replan.
  size_t live_ops() const { return ops_.size(); }
  // Changes whenever a re-plan may have changed a timing (a client may cache what it derived
  // from timings while it stays the same).
  uint64_t plan_version() const { return plan_version_; }

 private:
  struct Op {
    OpSpec spec;
    std::optional<SimTime> external_ready;
    std::optional<OpTiming> timing;
    // While the op has no timing: the earliest instant it could start, as far as known at its
    // input (nullopt: never until another input, i.e. an input or dependency is unknown).
    std::optional<SimTime> earliest;
    bool committed = false;
    bool kept = false;          // a planned decision the current re-plan keeps
    uint32_t slot = 0;          // while a re-plan decides it: its index in scratch_.todo
    size_t first_live_dep = 0;  // spec.deps[0 .. first_live_dep) are retired
  };
  struct Todo {  // an op a re-plan decides
    Op* op;
    OpId id;
    SimTime base;  // its latest known input
    uint32_t pending = 0;  // dependencies not yet timed
    bool blocked = false;  // its external input is unknown
  };
  struct EngineState {
    std::optional<SimTime> last_end;  // end of the last op planned or committed on it
  };

  Op& op(OpId id);
  std::optional<OpTiming> RetiredTiming(OpId id) const;
  const Op* Find(OpId id) const {  // inline: timing() and committed() are hot
    if (id < first_id_) return nullptr;  // retired: ended at or before now_
    AHBM_CHECK(id < first_id_ + ops_.size()) << "unknown op " << id;
    return &ops_[id - first_id_];
  }
  void Commit(SimTime now);
  void Retire(SimTime now);
  // An input lets `o` start no earlier than `earliest`: decisions before it stand.
  void NoteInput(Op& o, std::optional<SimTime> earliest);
  using EngineStates = std::array<EngineState, kNumPlannedEngines>;
  // Re-decides every uncommitted op that starts at or after `from` (Replan's full part), in
  // three steps: the decisions before `from` kept, the others collected with their ready
  // times and dependency edges (scratch_), then decided in start order.
  void ReplanFrom(SimTime from);
  void KeepDecisionsBefore(SimTime from, EngineStates& engines);
  void CollectUndecided();
  void DecideInOrder(EngineStates& engines);
  // Puts scratch_.todo[slot] among its engine's waiting ops.
  void MakeReady(uint32_t slot);
  // The eligible heap's order on todo slots: x after y.
  bool LargerKey(uint32_t x, uint32_t y) const;

  ClockDomain clock_;
  Mode mode_;
  // ops_[i] has id first_id_ + i. A deque, not a VectorFifo: a vector's growth slack on
  // ~140-byte ops, kept at each PE's peak, raised opt2's peak memory at S = 131072 by 9%.
  std::deque<Op> ops_;
  // Timings of retired ops not yet released: retired_[i] is op retired_first_ + i (ops retire
  // in id order, so the retired ids form one range; released slots are empty and dropped from
  // the front).
  VectorFifo<std::optional<OpTiming>> retired_;
  OpId retired_first_ = 0;
  // The earliest instant an input since the last re-plan can move a decision at (nullopt: no
  // such input). Without one, a re-plan only commits and retires: by Rule 4 the plan of the
  // uncommitted ops is the one the last re-plan made (same committed prefix, same inputs).
  std::optional<SimTime> dirty_from_;
  // The planned, uncommitted ops as (start, id), latest start first (Commit pops from the
  // back); each full re-plan lists them as it decides them (in start order) and reverses.
  std::vector<std::pair<SimTime, OpId>> by_start_;
  struct Scratch {  // Replan's working buffers, kept to avoid allocating per re-plan
    std::vector<Todo> todo;
    std::vector<uint32_t> first_edge;
    std::vector<uint32_t> edges;
    std::vector<uint32_t> fill;
    std::vector<std::pair<uint32_t, uint32_t>> pairs;
    std::array<std::vector<std::pair<SimTime, uint32_t>>, kNumPlannedEngines> waiting;
    std::array<std::vector<uint32_t>, kNumPlannedEngines> eligible;
    std::vector<std::pair<SimTime, OpId>> kept;  // decisions kept, earliest start first
  } scratch_;
  OpId first_id_ = 0;
  uint64_t plan_version_ = 0;
  SimTime now_;
  EngineStates committed_engines_{};
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_PE_PLANNER_H_
