#include "kernels/runtime/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/tensor_ref.h"

namespace ahbm::kernels {

uint64_t Tensor::elements() const { return sim::ElementCount(shape_); }

uint64_t Tensor::bytes() const { return elements() * sim::DTypeBytes(dtype_); }

Tensor Tensor::WithProducer(uint64_t producer) const {
  Tensor t = *this;
  t.producer_ = producer;
  return t;
}

void Tensor::WriteTo(pb::TensorRef& ref) const {
  ref.set_space(space_);
  ref.set_pe(pe_);
  ref.set_addr(addr_);
  ref.set_dtype(dtype_);
  ref.mutable_shape()->Assign(shape_.begin(), shape_.end());
  ref.mutable_strides()->Assign(strides_.begin(), strides_.end());
}

Tensor Tensor::FromRef(const pb::TensorRef& ref, uint64_t producer) {
  Tensor t(ref.space(), ref.pe(), ref.addr(), ref.dtype(), ref.shape());
  t.strides_.assign(ref.strides().begin(), ref.strides().end());
  t.producer_ = producer;
  return t;
}

pb::TensorRef Tensor::ToRef() const {
  pb::TensorRef ref;
  WriteTo(ref);
  return ref;
}

Tensor Tensor::View(ShapeArg shape) const {
  const uint64_t n = sim::ElementCount(shape);
  if (!strides_.empty()) {
    throw KernelError(absl::StrCat("view of a strided tensor (pe ", pe_, ")"));
  }
  if (n != elements()) {
    throw KernelError(absl::StrCat("view: ", elements(), " elements cannot be viewed as ",
                                   absl::StrJoin(shape, "x"), " (pe ", pe_, ")"));
  }
  Tensor t = *this;
  t.shape_.assign(shape.begin(), shape.end());
  return t;
}

Tensor Tensor::Rows(uint64_t row, uint64_t rows) const {
  if (rank() != 2 || row + rows > dim(0) || rows == 0) {
    throw KernelError(absl::StrCat("rows [", row, ", ", row + rows, ") of a tensor of shape ",
                                   absl::StrJoin(shape_, "x"), " (pe ", pe_, ")"));
  }
  const uint64_t row_stride = strides_.size() == 2 ? strides_[0] : dim(1);
  Tensor t = *this;
  t.addr_ = addr_ + row * row_stride * sim::DTypeBytes(dtype_);
  t.shape_[0] = rows;
  return t;
}

Tensor Tensor::Cols(uint64_t col, uint64_t cols) const {
  if (rank() != 2 || col + cols > dim(1) || cols == 0) {
    throw KernelError(absl::StrCat("columns [", col, ", ", col + cols, ") of a tensor of shape ",
                                   absl::StrJoin(shape_, "x"), " (pe ", pe_, ")"));
  }
  if (col == 0 && cols == dim(1)) return *this;
  const uint64_t s0 = strides_.size() == 2 ? strides_[0] : dim(1);
  const uint64_t s1 = strides_.size() == 2 ? strides_[1] : 1;
  Tensor t = *this;
  t.addr_ = addr_ + col * s1 * sim::DTypeBytes(dtype_);
  t.shape_[1] = cols;
  t.strides_ = {s0, s1};
  return t;
}

}  // namespace ahbm::kernels
