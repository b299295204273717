// Small facts about pb::TensorRef shared by the units, the command checker and the injectors.
#ifndef AHBMSIM_ACTORS_TENSOR_REF_H_
#define AHBMSIM_ACTORS_TENSOR_REF_H_

#include <cstdint>

#include "proto/commands.pb.h"

namespace ahbm::sim {

// Element size of a dtype in bytes; 0 for an unspecified one.
inline uint64_t DTypeBytes(pb::DType dtype) {
  switch (dtype) {
    case pb::BF16:
      return 2;
    case pb::FP32:
      return 4;
    default:
      return 0;
  }
}

// The product of the shape (1 for rank 0). Callers that may see absurd shapes check first
// (CommandChecker computes in 128 bits).
inline uint64_t ElementCount(const pb::TensorRef& ref) {
  uint64_t n = 1;
  for (uint64_t d : ref.shape()) n *= d;
  return n;
}

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_TENSOR_REF_H_
