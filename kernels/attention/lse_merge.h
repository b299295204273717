// The log-sum-exp merge of two partial attentions (ADR-0060 rev2 §4):
//   m = maximum(m_a, m_b); s_a = exp(m_a - m); s_b = exp(m_b - m)
//   l = l_a·s_a + l_b·s_b;  O = O_a·s_a + O_b·s_b
// shared by the decode reduce-to-root and the baseline fan-out.
#ifndef AHBMSIM_KERNELS_ATTENTION_LSE_MERGE_H_
#define AHBMSIM_KERNELS_ATTENTION_LSE_MERGE_H_

#include <cstdint>
#include <limits>

#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"

namespace ahbm::kernels {

// The running maximum of a row that has seen no key yet. The ADR starts m at -inf; a rank
// with no keys (S < C·P, max_context > S) or a fully masked row would then merge as
// exp(-inf - (-inf)) = NaN. The lowest finite float is below every real score, so
// `m - maximum(m, x)` stays finite or -inf and never NaN: an empty side merges with scale
// exp(0) = 1 against another empty side (l = 0, O = 0 stay 0) and exp(lowest - m) = 0
// against a side with keys (which is left unchanged). Masked scores stay -inf (exp = 0).
inline constexpr float kEmptyRowMax = std::numeric_limits<float>::lowest();

// The identity partial of `rows` query rows in the persistent arena: m[0] = kEmptyRowMax,
// l = 0, O = 0 ([rows, d]), m[1] allocated for a double-buffered running max (not filled).
// The decode's init_running (§3) and the baselines' empty rank.
Task<void> FillEmptyRunning(Tl& tl, uint32_t rows, uint32_t d, Tensor (&m)[2], Tensor& l,
                            Tensor& o);

// Merges (mb, lb, ob) into (m, l, o): l and o in place, m replaced by the new maximum.
Task<void> LseMerge(Tl& tl, Tensor& m, Tensor& l, Tensor& o, const Tensor& mb, const Tensor& lb,
                    const Tensor& ob);

// The same 11 ops with the results written to (m_out, l_out, o_out) instead of in place
// (m_out must not alias m or mb: both are read after the maximum is written). Used by the
// packed reduce, whose state must stay inside its [m | l | O] buffer.
Task<void> LseMergeInto(Tl& tl, const Tensor& m, const Tensor& l, const Tensor& o,
                        const Tensor& mb, const Tensor& lb, const Tensor& ob, const Tensor& m_out,
                        const Tensor& l_out, const Tensor& o_out);

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_LSE_MERGE_H_
