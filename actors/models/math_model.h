// The MATH engine's timing model: fp32 lanes for elementwise, transcendental and reduction ops
// (DESIGN §2). Plain C++ (no CAF), driven by the MATH engine actor and by PE_SCHEDULER for
// composite epilogues (STYLE 4). The CPU's own MATH ops and composite epilogues share one engine.
//
// Config: pb::MathEngine (`lanes_per_cycle`, `transcendental_per_cycle`,
// `reduction_extra_cycles`, `startup_cycles`), clocked by the PE clock (pb::Pe.clock_mhz).
//
// Contract:
// - MathOpCycles(op, elements) = startup_cycles + ceil(elements / rate(op))
//                                [+ reduction_extra_cycles for REDUCE_MAX, REDUCE_SUM], where
//   rate(EXP) = rate(DIV) = transcendental_per_cycle and every other op runs at
//   lanes_per_cycle: ADD, SUB, MUL, MAXIMUM, SCALE (elementwise), COPY, FILL (a write per
//   element), TRANSPOSE (a read and a write per element, pipelined like COPY).
// - `elements` is the number of elements the op streams through the lanes:
//     elementwise / broadcast ops  the OUTPUT element count — a row vector broadcast over R rows
//                                  of C columns costs R*C, the same as a full [R, C] operand;
//     REDUCE_MAX / REDUCE_SUM      the INPUT element count (the reduced tensor), not the output;
//     COPY / TRANSPOSE / FILL      the element count of the tensor written.
//   The reduced axis is not an input: every reduction pays reduction_extra_cycles once (the
//   kernels only reduce along the last axis, which is what the config number describes).
//   elements == 0 is allowed and costs the fixed parts only.
// - A fused op (a composite epilogue: several stages applied to one tile) costs the sum of its
//   stages' MathOpCycles — each stage pays its own startup — and occupies the engine once.
// - A single-start-up fused op (the decode reduce's LseMergeCmd: one command streaming its
//   stages back to back) costs startup_cycles once plus, per stage, MathOpCycles minus the
//   stage's startup: MathSingleStartupCycles.
// - Serve(ready, stages): start = the first PE clock edge at or after max(ready, free_at);
//   end = start + cycles; free_at becomes end. Ops are served in call order (the caller owns
//   arbitration). There is no idle penalty beyond startup_cycles.
// - MATH_OP_UNSPECIFIED, an empty fused op or an unvalidated config are our bugs
//   (AHBM_CHECK).
//
// Stats (MathEngineStats):
//   busy_ps   SimTime  time the engine was occupied
//   ops       uint64   ops served (a fused epilogue counts once)
//   elements  uint64   elements streamed through the lanes, summed over a fused op's stages
#ifndef AHBMSIM_ACTORS_MODELS_MATH_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_MATH_MODEL_H_

#include <cstdint>
#include <span>

#include "actors/time.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

// One MATH op as the timing model sees it; `elements` as defined in the contract above.
struct MathOpShape {
  pb::MathOp op = pb::MATH_OP_UNSPECIFIED;
  uint64_t elements = 0;

  friend bool operator==(const MathOpShape&, const MathOpShape&) = default;
};

// Elements per cycle that `op` streams: transcendental_per_cycle for EXP and DIV,
// lanes_per_cycle otherwise.
uint64_t MathElementsPerCycle(const pb::MathEngine& config, pb::MathOp op);

// True for REDUCE_MAX and REDUCE_SUM (they pay reduction_extra_cycles).
bool IsMathReduction(pb::MathOp op);

// startup + ceil(elements / rate) [+ reduction extra].
Cycles MathOpCycles(const pb::MathEngine& config, const MathOpShape& op);

// The cycles of a fused op: the sum of MathOpCycles over `stages` (at least one).
Cycles MathFusedCycles(const pb::MathEngine& config, std::span<const MathOpShape> stages);

// startup_cycles + sum over `stages` of (MathOpCycles - startup_cycles) (at least one stage).
Cycles MathSingleStartupCycles(const pb::MathEngine& config, std::span<const MathOpShape> stages);

// When one op occupies the engine.
struct MathService {
  SimTime start;
  SimTime end;

  friend bool operator==(const MathService&, const MathService&) = default;
};

struct MathEngineStats {
  SimTime busy_ps;        // engine occupied
  uint64_t ops = 0;       // ops served, a fused op once
  uint64_t elements = 0;  // elements streamed, summed over stages

  friend bool operator==(const MathEngineStats&, const MathEngineStats&) = default;
};

// One PE's MATH engine: serves ops one at a time, in call order.
class MathEngineModel {
 public:
  MathEngineModel(const pb::MathEngine& config, ClockDomain clock);

  // What Serve(ready, stages) would return; no state changes.
  MathService Preview(SimTime ready, std::span<const MathOpShape> stages) const;
  MathService Preview(SimTime ready, const MathOpShape& op) const {
    return Preview(ready, std::span<const MathOpShape>(&op, 1));
  }
  // Occupies the engine with one (possibly fused) op that may start no earlier than `ready`.
  MathService Serve(SimTime ready, std::span<const MathOpShape> stages);
  // A single primitive op.
  MathService Serve(SimTime ready, const MathOpShape& op) {
    return Serve(ready, std::span<const MathOpShape>(&op, 1));
  }

  // The end of the last op served (time 0 before the first).
  SimTime free_at() const { return free_at_; }
  const MathEngineStats& stats() const { return stats_; }
  const pb::MathEngine& config() const { return config_; }
  const ClockDomain& clock() const { return clock_; }

 private:
  pb::MathEngine config_;
  ClockDomain clock_;
  SimTime free_at_;
  MathEngineStats stats_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_MATH_MODEL_H_
