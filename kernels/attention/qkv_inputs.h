// The global inputs of one attention request in data mode, shared by decode and prefill (and
// their baselines): what the host places on the chip and the float64 reference reads.
#ifndef AHBMSIM_KERNELS_ATTENTION_QKV_INPUTS_H_
#define AHBMSIM_KERNELS_ATTENTION_QKV_INPUTS_H_

#include "kernels/host/npy.h"

namespace ahbm::kernels {

// q [H_q, T_q, d], k and v [H_kv, S, d], fp32 values (rounded to bf16 when placed).
struct QkvInputs {
  host::NpyArray q, k, v;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_ATTENTION_QKV_INPUTS_H_
