// MemoryStore: the values held by every PE's HBM region and TCM in data mode (DESIGN §4 "Data
// mode"), and DataExecutor: what each command of proto/commands.proto computes on them.
// Plain C++ (no CAF). Timing never depends on anything here: timing mode simply has no store.
//
// Contract — storage:
// - Addresses are those of pb::TensorRef: (space, pe, addr). A PE's HBM region is
//   [0, hbm_bytes / pes) (DmaModel's address map), its TCM [0, tcm.total_bytes).
// - HBM is sparse: 64 KiB pages allocated on first write; unwritten bytes read as 0.
//   TCM of a PE is allocated on first use.
// - Element encodings: FP32 = IEEE binary32, little endian; BF16 = the upper 16 bits of a
//   binary32, rounded to nearest even on store (NaN stays NaN, quiet). Reads widen to float.
// - Tensors are read and written through their shape and element strides (empty = dense
//   row-major). Every access is bounds-checked first: an out-of-range tensor is an
//   InvalidArgument naming the PE ("pe 3 (sip0.cube0.pe3)"), the space, the byte range and the
//   limit; nothing is clamped.
//
// Contract — compute (DataExecutor::Execute): fp32 arithmetic throughout (accumulation in
// fp32, sums in index order), the result rounded once to the output dtype when written.
// - DmaCmd: copy src -> dst element by element in row-major order of each (shapes may differ,
//   element counts match).
// - GemmCmd / CompositeCmd: out = a · b (fp32 accumulate; GemmCmd.accumulate adds to out),
//   then each epilogue stage in order: SCALE (x * scalar), ADD/SUB/MUL/DIV/MAXIMUM with the
//   stage's operand (same shape as out, a [1, N] row or an [M, 1] column, broadcast) or, without
//   an operand, with the stage's scalar; EXP.
// - MathCmd: ADD, SUB, MUL, DIV, MAXIMUM (two inputs, equal shapes or rank-2 row/column
//   broadcast), EXP, SCALE (x * scalar), COPY (one input), REDUCE_MAX / REDUCE_SUM along `axis`
//   (-1 = last; out keeps the axis as size 1 or drops it), TRANSPOSE (rank 2), FILL (scalar).
// - SoftmaxPvCmd (opt2's online-softmax merge then P·V, ADR rev2 §3): with t = s * scale,
//   m_new = max(m, rowmax(t)), p = exp(t - m_new) rounded to bf16, alpha = exp(m - m_new),
//   l = l * alpha + rowsum(p), O = O * alpha + p · v, m = m_new (m, l, O fp32).
// - LseMergeCmd (the decode reduce's merge, ADR rev2 §4, one command): exactly the primitive
//   ops of kernels/attention/lse_merge.cc, each rounded to fp32: m = max(acc_m, in_m),
//   sa = exp(acc_m - m), sb = exp(in_m - m), l = acc_l*sa + in_l*sb, O = acc_o*sa + in_o*sb,
//   written to out_m / out_l / out_o (may alias acc_*). With the finite empty-row max
//   (kEmptyRowMax) an empty side scales by 0 against a side with keys, by 1 against another
//   empty side: never NaN.
// - Commands are assumed already checked (CommandChecker); shape violations found here are
//   still reported as InvalidArgument, never undefined behaviour.
// - Every input (and the old out / accumulators) is read before any output is written, so
//   outputs may alias inputs. More decisions (NaN in MAXIMUM, masked softmax rows, GEMM
//   accumulate order): the note at the top of memory_store.cc.
#ifndef AHBMSIM_KERNELS_MEMORY_MEMORY_STORE_H_
#define AHBMSIM_KERNELS_MEMORY_MEMORY_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"

namespace ahbm::kernels {

// Round-to-nearest-even float -> bf16 bits, and back.
uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t bits);
// The float a bf16 store of `value` reads back as.
inline float RoundToBf16(float value) { return Bf16ToFloat(FloatToBf16(value)); }

class MemoryStore {
 public:
  // `chip` must have passed topology Validate().
  explicit MemoryStore(const pb::Chip& chip);

  // Reads the tensor's elements in row-major order of its shape, widened to float.
  [[nodiscard]] absl::StatusOr<std::vector<float>> Read(const pb::TensorRef& tensor) const;
  // Writes `values` (row-major, exactly the tensor's element count), rounding to its dtype.
  [[nodiscard]] absl::Status Write(const pb::TensorRef& tensor, std::span<const float> values);

  // The tensor's element encodings, unconverted, packed densely in row-major order of its shape
  // (element count * dtype bytes): a bit-exact copy path (DMA, same-dtype COPY).
  [[nodiscard]] absl::StatusOr<std::vector<uint8_t>> ReadElements(
      const pb::TensorRef& tensor) const;
  [[nodiscard]] absl::Status WriteElements(const pb::TensorRef& tensor,
                                           std::span<const uint8_t> bytes);

  // Raw bytes (for payload copies of messages): [addr, addr + size) of one PE's space.
  [[nodiscard]] absl::StatusOr<std::vector<uint8_t>> ReadBytes(pb::MemorySpace space, uint32_t pe,
                                                               uint64_t addr, uint64_t size) const;
  [[nodiscard]] absl::Status WriteBytes(pb::MemorySpace space, uint32_t pe, uint64_t addr,
                                        std::span<const uint8_t> bytes);

  uint64_t hbm_region_bytes() const { return hbm_region_bytes_; }
  uint64_t tcm_bytes() const { return tcm_bytes_; }

 private:
  static constexpr uint64_t kPageBytes = 64 * 1024;

  struct Layout;  // a checked tensor: its contiguous runs (memory_store.cc)

  // Checks [addr, addr + size) against the space's limit; the error names PE and range.
  absl::Status CheckRange(pb::MemorySpace space, uint32_t pe, uint64_t addr, uint64_t size) const;
  // The same for an end that may lie beyond 2^64 (computed in 128 bits by the caller).
  absl::Status CheckEnd(pb::MemorySpace space, uint32_t pe, uint64_t addr,
                        unsigned __int128 end) const;
  // Validates the tensor's dtype, shape and strides, and bounds-checks its byte extent.
  absl::StatusOr<Layout> Resolve(const pb::TensorRef& tensor) const;
  // Gathers the layout's elements densely into `out` / scatters them from `in`.
  void Gather(const Layout& layout, uint8_t* out) const;
  void Scatter(const Layout& layout, const uint8_t* in);
  // [addr, addr + size) of one space, already bounds-checked; pages resolved once per page.
  void CopyOut(pb::MemorySpace space, uint32_t pe, uint64_t addr, uint64_t size,
               uint8_t* out) const;
  void CopyIn(pb::MemorySpace space, uint32_t pe, uint64_t addr, uint64_t size,
              const uint8_t* in);
  std::string PeName(uint32_t pe) const;
  uint8_t* Page(pb::MemorySpace space, uint32_t pe, uint64_t page, bool create);
  const uint8_t* Page(pb::MemorySpace space, uint32_t pe, uint64_t page) const;

  topology::ChipIndex index_;
  uint64_t hbm_region_bytes_;
  uint64_t tcm_bytes_;
  // (space, pe, page index) -> page bytes (kPageBytes each; TCM uses the same paging).
  std::map<std::tuple<int, uint32_t, uint64_t>, std::unique_ptr<uint8_t[]>> pages_;
};

// Applies commands to a MemoryStore (see the contract above).
class DataExecutor {
 public:
  explicit DataExecutor(MemoryStore* store) : store_(store) {}

  [[nodiscard]] absl::Status Execute(const pb::DmaCmd& cmd);
  [[nodiscard]] absl::Status Execute(const pb::GemmCmd& cmd);
  [[nodiscard]] absl::Status Execute(const pb::CompositeCmd& cmd);
  [[nodiscard]] absl::Status Execute(const pb::MathCmd& cmd);
  [[nodiscard]] absl::Status Execute(const pb::SoftmaxPvCmd& cmd);
  [[nodiscard]] absl::Status Execute(const pb::LseMergeCmd& cmd);

 private:
  MemoryStore* store_;
};

}  // namespace ahbm::kernels

#endif  // AHBMSIM_KERNELS_MEMORY_MEMORY_STORE_H_
