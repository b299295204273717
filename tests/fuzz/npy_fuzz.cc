// Fuzz harness: the .npy reader of data mode (kernels/host/npy.h) and the checks its inputs pass
// (shape, finite values). An accepted array holds exactly product(shape) elements, and writing
// it back reads back the same.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/host/npy.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ahbm::fuzz::InitHarness();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = ahbm::fuzz::WriteScratchFile(data, size);
  absl::StatusOr<ahbm::host::NpyArray> array = ahbm::host::ReadNpy(path);
  if (!array.ok()) {
    ahbm::fuzz::CheckRefusal(array.status());
    return 0;
  }
  unsigned __int128 elements = 1;
  for (uint64_t d : array->shape) elements *= d;
  if (elements != array->data.size()) ahbm::fuzz::Broken("data does not fill the shape");
  (void)ahbm::host::ExpectFinite(path, *array);
  (void)ahbm::host::ExpectShape(path, *array, {2, 3});
  if (!ahbm::host::WriteNpy(path, array->shape, array->data).ok()) {
    ahbm::fuzz::Broken("an accepted array cannot be written back");
  }
  absl::StatusOr<ahbm::host::NpyArray> again = ahbm::host::ReadNpy(path);
  if (!again.ok() || again->shape != array->shape ||
      (!array->data.empty() && std::memcmp(again->data.data(), array->data.data(),
                                           array->data.size() * sizeof(float)) != 0)) {
    ahbm::fuzz::Broken("an array written back reads back different");
  }
  return 0;
}
