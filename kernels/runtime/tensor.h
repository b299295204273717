// Tensors as kernels see them (DESIGN §4): a tensor in a PE's TCM or HBM, dense or a strided
// view, and the command producing it while it is pending. Plain values: no runtime state, no
// heap for the ranks kernels use; a command's pb::TensorRef is written once, when the command
// is built (WriteTo).
#ifndef AHBMSIM_KERNELS_RUNTIME_TENSOR_H_
#define AHBMSIM_KERNELS_RUNTIME_TENSOR_H_

#include <cstdint>
#include <stdexcept>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "proto/commands.pb.h"

namespace ahbm::kernels {

// Thrown inside a kernel to stop it; the message is one line naming the PE and the reason.
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Arena : uint8_t { kScratch, kPersistent };

// A shape (or strides) as the tl API takes it: a vector, an initializer list, another
// tensor's shape.
using ShapeArg = absl::Span<const uint64_t>;
// A tensor's dims or strides, in elements; kernels use rank 1 and 2, held inline (a higher
// rank allocates). Inline room for 2, not 4: tensors fill the kernels' coroutine frames.
using Dims = absl::InlinedVector<uint64_t, 2>;

// A tensor in a PE's TCM or HBM and, while it is being produced, the command producing it.
class Tensor {
 public:
  Tensor() = default;
  // A dense tensor of `shape` at `addr` in `space` of PE `pe`, not pending.
  Tensor(pb::MemorySpace space, uint32_t pe, uint64_t addr, pb::DType dtype, ShapeArg shape)
      : space_(space), dtype_(dtype), pe_(pe), addr_(addr), shape_(shape.begin(), shape.end()) {}

  pb::MemorySpace space() const { return space_; }
  uint32_t pe() const { return pe_; }
  uint64_t addr() const { return addr_; }
  const Dims& shape() const { return shape_; }
  // One per dim, or empty (dense row-major).
  const Dims& strides() const { return strides_; }
  uint64_t dim(int i) const { return shape_[i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  pb::DType dtype() const { return dtype_; }
  uint64_t elements() const;
  uint64_t bytes() const;
  bool in_hbm() const { return space_ == pb::HBM; }
  // The command that writes this tensor (0: none). It may already have completed.
  uint64_t producer() const { return producer_; }

  // The same tensor, written by command `producer` (0: none).
  Tensor WithProducer(uint64_t producer) const;
  // Fills a command's (or message's) TensorRef with this tensor.
  void WriteTo(pb::TensorRef& ref) const;
  pb::TensorRef ToRef() const;
  // The tensor `ref` names (strides kept), written by `producer`: WriteTo's inverse.
  static Tensor FromRef(const pb::TensorRef& ref, uint64_t producer = 0);

  // The same bytes under another dense shape (element count conserved). Throws KernelError for
  // a strided tensor or a count mismatch.
  Tensor View(ShapeArg shape) const;
  // Rows [row, row + rows) of a rank-2 tensor (a strided view when it is itself strided).
  Tensor Rows(uint64_t row, uint64_t rows) const;
  // Columns [col, col + cols) of a rank-2 tensor: a strided view (row stride kept).
  Tensor Cols(uint64_t col, uint64_t cols) const;

 private:
  pb::MemorySpace space_ = pb::MEMORY_SPACE_UNSPECIFIED;
  pb::DType dtype_ = pb::DTYPE_UNSPECIFIED;
  uint32_t pe_ = 0;
  uint64_t addr_ = 0;
  Dims shape_;
  Dims strides_;
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
