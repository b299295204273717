// Small facts about pb::TensorRef shared by the units, the command checker and the injectors.
#ifndef AHBMSIM_ACTORS_TENSOR_REF_H_
#define AHBMSIM_ACTORS_TENSOR_REF_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

using Shape = std::vector<uint64_t>;
// A shape or strides in place: a TensorRef's own field, a Shape, a kernel tensor's inline dims.
using DimsView = std::span<const uint64_t>;

inline DimsView ShapeView(const pb::TensorRef& t) {
  return DimsView(t.shape().data(), static_cast<size_t>(t.shape().size()));
}
inline DimsView StridesView(const pb::TensorRef& t) {
  return DimsView(t.strides().data(), static_cast<size_t>(t.strides().size()));
}

// The product of the shape (1 for rank 0). Callers that may see absurd shapes check first
// (CommandChecker computes in 128 bits).
inline uint64_t ElementCount(DimsView shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}
inline uint64_t ElementCount(const pb::TensorRef& ref) { return ElementCount(ShapeView(ref)); }

inline Shape ShapeOf(const pb::TensorRef& t) { return Shape(t.shape().begin(), t.shape().end()); }
inline Shape StridesOf(const pb::TensorRef& t) {
  return Shape(t.strides().begin(), t.strides().end());
}

// A TensorRef from its parts (strides empty = dense).
inline pb::TensorRef MakeTensorRef(pb::MemorySpace space, uint32_t pe, uint64_t addr,
                                   pb::DType dtype, const Shape& shape, const Shape& strides = {}) {
  pb::TensorRef t;
  t.set_space(space);
  t.set_pe(pe);
  t.set_addr(addr);
  t.set_dtype(dtype);
  for (uint64_t d : shape) t.add_shape(d);
  for (uint64_t s : strides) t.add_strides(s);
  return t;
}

// Texts for error messages: "[2, 3]", "0x1f", an end address that may pass 2^64, enum names
// or "unknown (7)" for a value the proto does not define.
inline std::string ShapeText(DimsView dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}
inline std::string ShapeText(const Shape& dims) { return ShapeText(DimsView(dims)); }
inline std::string Hex(uint64_t value) { return absl::StrCat("0x", absl::Hex(value)); }
inline std::string EndText(unsigned __int128 end) {
  return end >> 64 ? std::string("beyond 2^64") : Hex(static_cast<uint64_t>(end));
}
inline std::string OpText(pb::MathOp op) {
  return pb::MathOp_IsValid(op) ? pb::MathOp_Name(op)
                                : absl::StrCat("unknown (", static_cast<int>(op), ")");
}
inline std::string DTypeText(pb::DType dtype) {
  return pb::DType_IsValid(dtype) ? pb::DType_Name(dtype)
                                  : absl::StrCat("unknown (", static_cast<int>(dtype), ")");
}
inline std::string SpaceText(pb::MemorySpace space) {
  return pb::MemorySpace_IsValid(space) ? pb::MemorySpace_Name(space)
                                        : absl::StrCat("unknown (", static_cast<int>(space), ")");
}

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_TENSOR_REF_H_
