// Tensors as kernels see them (DESIGN §4): a tensor in a PE's TCM or HBM, dense or a strided
// view, and the command producing it while it is pending. Plain values: no runtime state.
#ifndef AHBMSIM_KERNELS_RUNTIME_TENSOR_H_
#define AHBMSIM_KERNELS_RUNTIME_TENSOR_H_

#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "proto/commands.pb.h"

namespace ahbm::kernels {

// Thrown inside a kernel to stop it; the message is one line naming the PE and the reason.
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Arena : uint8_t { kScratch, kPersistent };

// A tensor in a PE's TCM or HBM and, while it is being produced, the command producing it.
class Tensor {
 public:
  Tensor() = default;
  Tensor(pb::TensorRef ref, uint64_t producer) : ref_(std::move(ref)), producer_(producer) {}

  const pb::TensorRef& ref() const { return ref_; }
  std::vector<uint64_t> shape() const { return {ref_.shape().begin(), ref_.shape().end()}; }
  uint64_t dim(int i) const { return ref_.shape(i); }
  int rank() const { return ref_.shape_size(); }
  pb::DType dtype() const { return ref_.dtype(); }
  uint64_t elements() const;
  uint64_t bytes() const;
  bool in_hbm() const { return ref_.space() == pb::HBM; }
  // The command that writes this tensor (0: none). It may already have completed.
  uint64_t producer() const { return producer_; }

  // The same bytes under another dense shape (element count conserved). Throws KernelError for
  // a strided tensor or a count mismatch.
  Tensor View(std::vector<uint64_t> shape) const;
  // Rows [row, row + rows) of a rank-2 tensor (a strided view when it is itself strided).
  Tensor Rows(uint64_t row, uint64_t rows) const;
  // Columns [col, col + cols) of a rank-2 tensor: a strided view (row stride kept).
  Tensor Cols(uint64_t col, uint64_t cols) const;

 private:
  pb::TensorRef ref_;
  uint64_t producer_ = 0;
};

// softmax_pv's persistent (m, l, O) accumulator (ADR rev2 §3), fp32 in TCM.
struct Accumulator {
  Tensor m;  // [R, 1]
  Tensor l;  // [R, 1]
  Tensor o;  // [R, d]
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_RUNTIME_TENSOR_H_
