// NumPy .npy files for the host side of `ahbm run --data` (DESIGN §6): float32, C order, little
// endian ('<f4') only.
//
// Contract:
// - ReadNpy accepts format versions 1.0 (uint16 header length), 2.0 and 3.0 (uint32 header
//   length; 3.0 only differs by a UTF-8 header, which changes nothing for these keys). The header
//   is the Python dict literal numpy writes: keys 'descr', 'fortran_order' and 'shape' (each
//   exactly once, in any order, single or double quotes, trailing comma allowed); the data must
//   be exactly product(shape) * 4 bytes (a scalar, shape (), holds one element).
// - WriteNpy writes version 1.0 (2.0 only if the header exceeds 65535 bytes), the dict as
//   numpy formats it — "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" — padded
//   with spaces and a final '\n' so that the data starts at a multiple of 64 bytes.
// - Every error is one line that starts with "<path>: " and says why:
//     NotFound         "<path>: no such file"
//     InvalidArgument  not an .npy file (magic), unsupported version, truncated header or data,
//                      bad header syntax (with the byte offset inside the header), a dtype other
//                      than '<f4' ("<path>: dtype '<f8' is not float32 ('<f4')"; '>f4' is named
//                      as big-endian), fortran_order True, data longer than the shape, a shape
//                      mismatch in ExpectShape ("<path>: shape [2, 3] does not match the
//                      expected [2, 4]"), a WriteNpy whose data does not fill the shape, or a
//                      file that exists but cannot be read or written ("cannot read: <OS
//                      reason>").
#ifndef AHBMSIM_KERNELS_HOST_NPY_H_
#define AHBMSIM_KERNELS_HOST_NPY_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ahbm::host {

struct NpyArray {
  std::vector<uint64_t> shape;
  std::vector<float> data;  // row-major (C order), product(shape) elements
};

[[nodiscard]] absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

[[nodiscard]] absl::Status WriteNpy(const std::string& path, const std::vector<uint64_t>& shape,
                                    std::span<const float> data);

// OK when `array.shape == expected`; `path` labels the error.
// `<dir>/<stem>.npy`.
std::string NpyPath(const std::string& dir, const std::string& stem);

[[nodiscard]] absl::Status ExpectShape(const std::string& path, const NpyArray& array,
                                       const std::vector<uint64_t>& expected);

// OK when every element is finite; else InvalidArgument naming the first element that is not,
// by its index in the shape: "<path>: element [2, 0, 5] is NaN (inputs must be finite)" (or
// "is inf", "is -inf"). Data-mode inputs pass through it (launch::ReadNpyInput).
[[nodiscard]] absl::Status ExpectFinite(const std::string& path, const NpyArray& array);

// "[2, 3]" — how shapes appear in messages.
std::string ShapeString(const std::vector<uint64_t>& shape);

}  // namespace ahbm::host

#endif  // AHBMSIM_KERNELS_HOST_NPY_H_
