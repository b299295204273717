#include "kernels/runtime/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/tensor_ref.h"

namespace ahbm::kernels {

uint64_t Tensor::elements() const { return sim::ElementCount(ref_); }
uint64_t Tensor::bytes() const { return elements() * sim::DTypeBytes(ref_.dtype()); }

Tensor Tensor::View(std::vector<uint64_t> shape) const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  if (ref_.strides_size() > 0) {
    throw KernelError(absl::StrCat("view of a strided tensor (pe ", ref_.pe(), ")"));
  }
  if (n != elements()) {
    throw KernelError(absl::StrCat("view: ", elements(), " elements cannot be viewed as ",
                                   absl::StrJoin(shape, "x"), " (pe ", ref_.pe(), ")"));
  }
  pb::TensorRef ref = ref_;
  ref.clear_shape();
  for (uint64_t d : shape) ref.add_shape(d);
  return Tensor(std::move(ref), producer_);
}

Tensor Tensor::Rows(uint64_t row, uint64_t rows) const {
  if (rank() != 2 || row + rows > dim(0) || rows == 0) {
    throw KernelError(absl::StrCat("rows [", row, ", ", row + rows, ") of a tensor of shape ",
                                   absl::StrJoin(shape(), "x"), " (pe ", ref_.pe(), ")"));
  }
  const uint64_t s0 = ref_.strides_size() == 2 ? ref_.strides(0) : dim(1);
  const uint64_t s1 = ref_.strides_size() == 2 ? ref_.strides(1) : 1;
  pb::TensorRef ref = ref_;
  ref.set_addr(ref_.addr() + row * s0 * sim::DTypeBytes(dtype()));
  ref.set_shape(0, rows);
  if (ref_.strides_size() == 2) {
    ref.set_strides(0, s0);
    ref.set_strides(1, s1);
  }
  return Tensor(std::move(ref), producer_);
}

Tensor Tensor::Cols(uint64_t col, uint64_t cols) const {
  if (rank() != 2 || col + cols > dim(1) || cols == 0) {
    throw KernelError(absl::StrCat("columns [", col, ", ", col + cols, ") of a tensor of shape ",
                                   absl::StrJoin(shape(), "x"), " (pe ", ref_.pe(), ")"));
  }
  const uint64_t s0 = ref_.strides_size() == 2 ? ref_.strides(0) : dim(1);
  const uint64_t s1 = ref_.strides_size() == 2 ? ref_.strides(1) : 1;
  if (col == 0 && cols == dim(1)) return *this;
  pb::TensorRef ref = ref_;
  ref.set_addr(ref_.addr() + col * s1 * sim::DTypeBytes(dtype()));
  ref.set_shape(1, cols);
  ref.clear_strides();
  ref.add_strides(s0);
  ref.add_strides(s1);
  return Tensor(std::move(ref), producer_);
}

}  // namespace ahbm::kernels
