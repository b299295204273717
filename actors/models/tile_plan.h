// PE_SCHEDULER's composite tile planner (DESIGN §4): turns `out[M, N] = a[M, K] · b[K, N]` plus
// epilogue stages into a graph of tile ops — operand loads, GEMM tiles, one fused epilogue per
// output tile, one write-out per output tile — with explicit dependencies. Plain C++ (no CAF);
// the scheduler runs the graph on its engines, or computes its pipeline in closed form.
//
// Config: pb::Scheduler (tile_m / tile_k / tile_n), pb::GemmEngine (tile cycles),
// pb::MathEngine (epilogue cycles).
//
// Contract:
// - Tiling: M, K, N are cut into tiles of tile_m, tile_k, tile_n elements from index 0; the last
//   tile on an axis is smaller when the axis is not a multiple (edge tiles). mi, ki, ni number
//   the tiles; m_tiles = ceil(M / tile_m) and so on.
// - Op order (a tie-break rule: an op's `index` is its position in `ops`, and the scheduler
//   serves ready ops oldest first by (command issue seq, index)):
//       for ni in 0..n_tiles-1:
//         for ki in 0..k_tiles-1:
//           kLoadB(ki, ni)                    b[ki, ni], one piece shared by every m-tile
//           for mi in 0..m_tiles-1:
//             kLoadA(mi, ki)                  only if A lives in HBM and ni == 0
//             kGemm(mi, ki, ni)
//             if ki == k_tiles-1:
//               kEpilogue(mi, ni)             only if there are epilogue stages
//               kWriteOut(mi, ni)
//   So the B operand is loaded exactly once per (ki, ni) piece whatever M is (the GQA reuse
//   lever, ADR-0060 rev2 §B item 4: B bytes do not grow with M when M > tile_m), and an A tile
//   that lives in HBM is loaded once, on first use, and kept for the later n-tiles. An A operand
//   in TCM is read in place by the GEMM tiles and has no load op.
// - Dependencies (indices of earlier ops, ascending):
//       kLoadB, kLoadA   none inside the plan (the composite's own inputs are the scheduler's)
//       kGemm(mi,ki,ni)  kLoadB(ki, ni); kLoadA(mi, ki) if A is in HBM; kGemm(mi, ki-1, ni)
//                        if ki > 0 (the fp32 accumulation chain of one output tile)
//       kEpilogue(mi,ni) kGemm(mi, k_tiles-1, ni)
//       kWriteOut(mi,ni) kEpilogue(mi, ni), or kGemm(mi, k_tiles-1, ni) without epilogue
// - Costs on the ops: kGemm carries GemmTileCycles (fill/drain excluded — that depends on the
//   engine's state, see GemmEngineModel) and 2*m*k*n FLOPs; kEpilogue carries its stages, each
//   over the output tile's m_t*n_t elements, and their fused MathFusedCycles; loads and the
//   write-out carry bytes and the operand's home. Moving those bytes is not costed here: an
//   HBM-homed load or write-out is DMA work; a TCM-homed one is an in-place access.
// - Totals: gemm_cycles = sum of the kGemm cycles; flops = 2*M*K*N (useful);
//   peak_gemm_cycles = ceil(flops / (2 * array_rows * array_cols)), so
//   padding_loss_cycles() = gemm_cycles - peak_gemm_cycles; epilogue_cycles = sum of the
//   kEpilogue cycles; a_bytes = M*K*a_elem (each A element once, loaded or read in place),
//   b_bytes = K*N*b_elem (independent of M), out_bytes = M*N*out_elem; hbm_read_bytes and
//   hbm_write_bytes = the part of those whose home is HBM.
// - Deterministic: the plan is a pure function of its inputs.
// - M, K, N and the element sizes must be > 0 and the config must have passed topology
//   Validate(); violations are our bugs and fail an AHBM_CHECK (the tl API checks shapes).
#ifndef AHBMSIM_ACTORS_MODELS_TILE_PLAN_H_
#define AHBMSIM_ACTORS_MODELS_TILE_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "actors/models/gemm_model.h"
#include "actors/models/math_model.h"
#include "actors/time.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

// Where a composite operand or output lives.
enum class TensorHome {
  kTcm,  // the PE's TCM: read / written in place
  kHbm,  // HBM: moved by the PE's DMA engine
};

// A composite GEMM head: out[m, n] = a[m, k] · b[k, n], then the epilogue stages in order.
struct GemmComposite {
  static constexpr Bytes kBf16{2};
  static constexpr Bytes kFp32{4};

  uint64_t m = 0;
  uint64_t k = 0;
  uint64_t n = 0;
  Bytes a_element_bytes;    // bf16 operands: kBf16
  Bytes b_element_bytes;    // kBf16
  Bytes out_element_bytes;  // kFp32 for an fp32 result (decode's Sj, O), kBf16 when stored
  TensorHome a_home = TensorHome::kTcm;
  TensorHome b_home = TensorHome::kHbm;
  TensorHome out_home = TensorHome::kTcm;
  absl::InlinedVector<pb::MathOp, 4> epilogue;  // fused, each stage over the whole output tile
};

enum class TileOpKind {
  kLoadB,     // B piece b[ki, ni]: tile = {0, k_t, n_t}
  kLoadA,     // A tile a[mi, ki] from HBM: tile = {m_t, k_t, 0}
  kGemm,      // tile = {m_t, k_t, n_t}
  kEpilogue,  // fused epilogue of output tile (mi, ni) on the MATH engine: tile = {m_t, 0, n_t}
  kWriteOut,  // output tile (mi, ni) to its home: tile = {m_t, 0, n_t}
  kSoftmaxMerge,  // softmax_pv: the online-softmax merge on the MATH engine: tile = {rows, keys, 0}
  kLseMerge,      // lse_merge: the decode reduce's merge on the MATH engine: tile = {rows, 0, d}
};

// "LoadB", "LoadA", "Gemm", "Epilogue", "WriteOut".
const char* TileOpKindName(TileOpKind kind);

// Inline capacities cover every op PlanGemm makes (at most 4 dependencies; a MATH command or a
// one- or two-stage epilogue), so a plan's ops allocate nothing of their own.
using TileDeps = absl::InlinedVector<uint32_t, 4>;
using MathStages = absl::InlinedVector<MathOpShape, 2>;

// One node of the plan. Tile coordinates and extents of an axis the op does not span are 0.
struct TileOp {
  uint32_t index = 0;  // position in TilePlan::ops
  TileOpKind kind = TileOpKind::kGemm;
  uint32_t mi = 0;
  uint32_t ki = 0;
  uint32_t ni = 0;
  GemmTileShape tile;                    // extents in elements
  TensorHome home = TensorHome::kTcm;    // loads: the operand's home; kWriteOut: the output's
  Bytes bytes;                           // loads, kWriteOut: bytes moved; others 0
  Cycles cycles;                         // kGemm: GemmTileCycles; kEpilogue: fused MATH cycles
  uint64_t flops = 0;                    // kGemm: 2*m*k*n
  MathStages math_stages;                // kEpilogue: one per stage, elements = m_t*n_t
  TileDeps deps;                         // indices of earlier ops, ascending

  friend bool operator==(const TileOp&, const TileOp&) = default;
};

struct TilePlan {
  uint32_t m_tiles = 0;
  uint32_t k_tiles = 0;
  uint32_t n_tiles = 0;
  std::vector<TileOp> ops;

  Cycles gemm_cycles;       // sum of kGemm cycles, fill/drain excluded
  Cycles peak_gemm_cycles;  // ceil(flops / (2 * array_rows * array_cols))
  uint64_t flops = 0;       // useful: 2*M*K*N
  Cycles epilogue_cycles;   // sum of kEpilogue cycles
  Bytes a_bytes;            // M*K*a_elem
  Bytes b_bytes;            // K*N*b_elem
  Bytes out_bytes;          // M*N*out_elem
  Bytes hbm_read_bytes;     // a_bytes and/or b_bytes, for the operands in HBM
  Bytes hbm_write_bytes;    // out_bytes if the output is in HBM

  Cycles padding_loss_cycles() const { return gemm_cycles - peak_gemm_cycles; }

  friend bool operator==(const TilePlan&, const TilePlan&) = default;
};

TilePlan PlanGemm(const GemmComposite& composite, const pb::Scheduler& scheduler,
                  const pb::GemmEngine& gemm, const pb::MathEngine& math);
// The same into `plan`, replacing its contents but keeping plan.ops's capacity (a caller that
// plans often reuses one buffer instead of allocating the op vector each time).
void PlanGemm(const GemmComposite& composite, const pb::Scheduler& scheduler,
              const pb::GemmEngine& gemm, const pb::MathEngine& math, TilePlan& plan);

// opt2's ex_composite("softmax_pv", s, v, acc, scale) (ADR-0060 rev2 §3, DESIGN §4) on
// s[rows, keys] (fp32), v[keys, d] and the fp32 accumulator (m[rows], l[rows], O[rows, d]).
struct SoftmaxPvShape {
  uint64_t rows = 0;  // G * T_q
  uint64_t keys = 0;  // the KV tile
  uint64_t d = 0;
  Bytes v_element_bytes;  // bf16: GemmComposite::kBf16
  TensorHome v_home = TensorHome::kHbm;
};

// The MATH stages of the online-softmax merge, in order — exactly the primitive ops opt1/opt3
// kernels issue for one tile, so the variants are costed alike (R = rows, C = keys):
//   SCALE s (R*C) · REDUCE_MAX s (R*C) · MAXIMUM m_new = max(m, m_j) (R) · SUB s - m_new (R*C)
//   · EXP p (R*C) · REDUCE_SUM l_j (R*C) · SUB m - m_new (R) · EXP alpha (R) · MUL l*alpha (R)
//   · ADD l + l_j (R) · MUL O*alpha (R*d).
std::vector<MathOpShape> SoftmaxMergeStages(uint64_t rows, uint64_t keys, uint64_t d);

// The softmax_pv graph: op 0 = kSoftmaxMerge (fused SoftmaxMergeStages, no deps), then the ops
// of PlanGemm(P[rows, keys] in TCM (bf16) · v[keys, d] -> O in TCM (fp32), no epilogue) with
// indices shifted by 1 and every kGemm of ki = 0 also depending on op 0 (P comes from the
// merge; later k-tiles follow through the accumulation chain). The P·V tiles accumulate into
// the rescaled O, so no epilogue and no write-out cost. epilogue_cycles holds the merge cycles.
TilePlan PlanSoftmaxPv(const SoftmaxPvShape& shape, const pb::Scheduler& scheduler,
                       const pb::GemmEngine& gemm, const pb::MathEngine& math);
// The same into `plan`, keeping plan.ops's capacity (see PlanGemm).
void PlanSoftmaxPv(const SoftmaxPvShape& shape, const pb::Scheduler& scheduler,
                   const pb::GemmEngine& gemm, const pb::MathEngine& math, TilePlan& plan);

// The decode reduce's log-sum-exp merge (ADR-0060 rev2 §4), stage by stage exactly the 11
// primitive ops of kernels/attention/lse_merge.cc (R = rows, D = d):
//   MAXIMUM m (R) · SUB m_a - m (R) · EXP s_a (R) · SUB m_b - m (R) · EXP s_b (R) · MUL l_a*s_a (R)
//   · MUL l_b*s_b (R) · ADD (R) · MUL O_a*s_a (R*D) · MUL O_b*s_b (R*D) · ADD (R*D).
std::vector<MathOpShape> LseMergeStages(uint64_t rows, uint64_t d);

// lse_merge (workload reduce_merge = FUSED) as one op: a single kLseMerge on the MATH engine
// whose cycles are MathSingleStartupCycles(LseMergeStages) — the primitive merge's MATH time
// minus the start-ups of 10 of its 11 ops. epilogue_cycles holds them; no GEMM, no DMA.
TilePlan PlanLseMerge(uint64_t rows, uint64_t d, const pb::MathEngine& math);

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_TILE_PLAN_H_
