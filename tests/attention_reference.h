// An independent float64 reference for GQA attention, for tests that check a kernel's numbers
// (decode and prefill alike): written from the definition, sharing no code with the kernels.
//
// Query head h reads KV head h / G (G = H_q / H_kv); query t of T_q sits at global position
// S - T_q + t and sees keys 0..S - T_q + t (causal; decode with T_q = 1 sees all S keys);
// scores are q·k / sqrt(d); O = softmax(scores) · V.
#ifndef AHBMSIM_TESTS_ATTENTION_REFERENCE_H_
#define AHBMSIM_TESTS_ATTENTION_REFERENCE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/host/npy.h"

namespace ahbm::testing {

// q [H_q, T_q, d], k and v [H_kv, S, d] → O [H_q, T_q, d] in float64. Refuses inconsistent
// shapes (one line).
[[nodiscard]] absl::StatusOr<std::vector<double>> ReferenceAttention(const host::NpyArray& q,
                                                                     const host::NpyArray& k,
                                                                     const host::NpyArray& v);

// The tolerance of a kernel's output against ReferenceAttention, in units of max(1, max |V|):
// bf16 P before P·V and a bf16 O are ~2^-8 of max |V| each; the margin leaves room for fp32
// sums (tests/random_diff.h, milestone/numerics.h).
inline constexpr double kAttentionTolerance = 2e-2;

// How far `got` is from `want`: the largest |got - want| and where. A NaN or Inf in `got`, or a
// size mismatch, is reported as an infinite error.
struct Deviation {
  double max_abs = 0;
  uint64_t index = 0;  // flat index of the largest error
  bool ok(double tolerance) const { return max_abs <= tolerance; }
};
Deviation Compare(const std::vector<float>& got, const std::vector<double>& want);

}  // namespace ahbm::testing

#endif  // AHBMSIM_TESTS_ATTENTION_REFERENCE_H_
