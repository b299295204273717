// Test helpers for memory_store tests: the small chip, tensor refs, seeded random values.
#ifndef AHBMSIM_KERNELS_MEMORY_TEST_UTIL_H_
#define AHBMSIM_KERNELS_MEMORY_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/tensor_ref.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/loader.h"

namespace ahbm::kernels::testing {

using Shape = std::vector<uint64_t>;

// PE 3 of the small chip is sip0.cube0.pe3; its HBM region is 4 GiB, its TCM 4 MiB.
inline constexpr uint32_t kPe = 3;
inline constexpr uint64_t kRegion = uint64_t{4} << 30;
inline constexpr uint64_t kTcm = uint64_t{4} << 20;

inline pb::Chip SmallChip() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  if (!chip.ok()) {
    std::cerr << chip.status() << "\n";
    std::abort();
  }
  return *chip;
}

inline pb::TensorRef Ref(pb::MemorySpace space, uint32_t pe, uint64_t addr, pb::DType dtype,
                         const Shape& shape, const Shape& strides = {}) {
  return sim::MakeTensorRef(space, pe, addr, dtype, shape, strides);
}
inline pb::TensorRef Tcm(uint64_t addr, pb::DType dtype, const Shape& shape,
                         const Shape& strides = {}) {
  return Ref(pb::TCM, kPe, addr, dtype, shape, strides);
}
inline pb::TensorRef Hbm(uint64_t addr, pb::DType dtype, const Shape& shape,
                         const Shape& strides = {}) {
  return Ref(pb::HBM, kPe, addr, dtype, shape, strides);
}

// Uniform values in [lo, hi) from a fixed seed.
inline std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace ahbm::kernels::testing

#endif  // AHBMSIM_KERNELS_MEMORY_TEST_UTIL_H_
