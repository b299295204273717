// Decisions the header does not state:
// - A tensor is validated like CommandChecker validates it (space HBM/TCM, dtype BF16/FP32,
//   rank >= 1, no zero dim, strides empty or one per dim, no stride 0 on a dim of size > 1) and
//   its PE must exist; the store does not know the issuing PE, so the same-CUBE and own-TCM rules
//   are the checker's alone. A view whose dense copy (elements * dtype bytes) would exceed its
//   memory space (possible only with overlapping strides) is refused rather than allocated.
// - Access: the tensor's innermost contiguous dims form a run (as DmaModel plans runs); pages are
//   looked up once per (run, page) and the last page is cached across runs, so a strided view
//   costs one map lookup per page touched by consecutive runs, not per element.
// - TCM uses the same 64 KiB pages as HBM, so "allocated on first use" is per page.
// - Overlapping writes (overlapping strides) land in row-major order: the last element wins.
// - DMA and same-dtype COPY move element encodings unconverted (bit-exact, NaN payloads kept);
//   a dtype change goes through float (FloatToBf16).
// - GEMM: the accumulator of out[m, n] starts at 0 (or at the old out with `accumulate`) and adds
//   a[m, k] * b[k, n] for k = 0..K-1, each product rounded to fp32 first, so K split over
//   accumulating fp32 GEMMs gives bit-identical results to one GEMM. The library builds with
//   -ffp-contract=off so no FMA changes the result from machine to machine.
// - MAXIMUM and REDUCE_MAX propagate NaN (a NaN operand gives NaN); REDUCE_* start from the
//   first element and fold in index order.
// - softmax_pv: a row whose m_new is -inf (every score so far -inf, e.g. fully masked) keeps
//   p = 0 and alpha = 1 instead of exp(-inf - -inf) = NaN, so l and O stay as they were. O's
//   update is O * alpha + (p . v), with p . v summed over t in index order from 0.
// - Error texts: store errors start with the PE ("pe 3 (sip0.cube0.pe3): HBM bytes [...) ...");
//   executor errors prefix "<kind> cmd <id>: <role>: ".
#include "kernels/memory/memory_store.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/errors.h"
#include "actors/tensor_ref.h"
#include "base/check.h"
#include "base/status_macros.h"

namespace ahbm::kernels {

static_assert(std::endian::native == std::endian::little,
              "element encodings are little endian; the store copies host words directly");

namespace {

using sim::DTypeText;
using sim::EndText;
using sim::Hex;
using sim::OpText;
using sim::Shape;
using sim::ShapeOf;
using sim::ShapeText;
using sim::SpaceText;
using u128 = unsigned __int128;

constexpr u128 kBeyond = u128{1} << 64;



// Element count with saturation at 2^64 (shapes are not trusted here).
u128 Elements(const pb::TensorRef& t) {
  u128 n = 1;
  for (uint64_t d : t.shape()) n = std::min(n * d, kBeyond);
  return n;
}

}  // namespace

// ---- bf16 ----

uint16_t FloatToBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040);  // quiet NaN
  // Round to nearest, ties to even: add 0x7FFF plus the lowest kept bit. A carry out of the
  // mantissa bumps the exponent, which is exactly rounding up to the next binade (or to inf).
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float Bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// ---- MemoryStore ----

// A checked tensor: `runs` contiguous blocks of run_bytes each, at
// addr + sum_i index_i * outer_stride_bytes[i] for the outer dims in row-major order.
struct MemoryStore::Layout {
  pb::MemorySpace space = pb::HBM;
  uint32_t pe = 0;
  uint64_t addr = 0;
  uint64_t elem_bytes = 0;
  uint64_t elements = 0;
  uint64_t run_bytes = 0;
  std::vector<uint64_t> outer_sizes;
  std::vector<uint64_t> outer_stride_bytes;
};

MemoryStore::MemoryStore(const pb::Chip& chip)
    : index_(chip),
      hbm_region_bytes_(chip.sip().cube().pes() == 0
                            ? 0
                            : chip.sip().cube().hbm_bytes() / chip.sip().cube().pes()),
      tcm_bytes_(chip.sip().cube().pe().tcm().total_bytes()) {
  AHBM_CHECK(hbm_region_bytes_ > 0 && tcm_bytes_ > 0) << "the topology was not validated";
}

std::string MemoryStore::PeName(uint32_t pe) const {
  if (pe >= index_.num_pes()) return absl::StrCat("pe ", pe);
  const topology::PeId id = index_.PeOf(pe);
  return absl::StrCat("pe ", pe, " (sip", id.sip, ".cube", id.cube, ".pe", id.pe, ")");
}

absl::Status MemoryStore::CheckRange(pb::MemorySpace space, uint32_t pe, uint64_t addr,
                                     uint64_t size) const {
  return CheckEnd(space, pe, addr, u128{addr} + size);
}

absl::Status MemoryStore::CheckEnd(pb::MemorySpace space, uint32_t pe, uint64_t addr,
                                   u128 end) const {
  if (space != pb::HBM && space != pb::TCM) {
    return absl::InvalidArgumentError(
        absl::StrCat(PeName(pe), ": memory space is ", SpaceText(space), "; want HBM or TCM"));
  }
  if (pe >= index_.num_pes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        PeName(pe), ": ", SpaceText(space), ": no such PE (the chip has ", index_.num_pes(),
        " PEs)"));
  }
  if (space == pb::HBM) {
    if (end > hbm_region_bytes_) {
      return absl::InvalidArgumentError(absl::StrCat(
          PeName(pe), ": HBM bytes [", Hex(addr), ", ", EndText(end),
          ") are outside the PE's region [0x0, ", Hex(hbm_region_bytes_), ") (",
          hbm_region_bytes_, " bytes = hbm_bytes / pes)"));
    }
  } else if (end > tcm_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        PeName(pe), ": TCM bytes [", Hex(addr), ", ", EndText(end), ") exceed the PE's TCM of ",
        tcm_bytes_, " bytes [0x0, ", Hex(tcm_bytes_), ") (TCM overflow)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<MemoryStore::Layout> MemoryStore::Resolve(const pb::TensorRef& t) const {
  auto fail = [&](auto&&... args) {
    return absl::InvalidArgumentError(absl::StrCat(PeName(t.pe()), ": ", args...));
  };
  Layout layout;
  layout.space = t.space();
  layout.pe = t.pe();
  layout.addr = t.addr();
  layout.elem_bytes = sim::DTypeBytes(t.dtype());
  if (layout.elem_bytes == 0) {
    return fail("dtype is ", DTypeText(t.dtype()), "; want BF16 (2 bytes) or FP32 (4 bytes)");
  }
  const Shape shape = ShapeOf(t);
  if (shape.empty()) return fail("shape is empty (rank 0); a tensor needs rank >= 1");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return fail("shape ", ShapeText(shape), " has a zero dim (dim ", i, ")");
  }
  Shape strides(t.strides().begin(), t.strides().end());
  if (!strides.empty() && strides.size() != shape.size()) {
    return fail("strides ", ShapeText(strides), " has ", strides.size(), " entries but shape ",
                ShapeText(shape), " has rank ", shape.size());
  }
  if (strides.empty()) {
    strides.assign(shape.size(), 1);
    for (size_t i = shape.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * shape[i];
  }
  u128 last = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (strides[i] == 0 && shape[i] > 1) {
      return fail("dim ", i, " of shape ", ShapeText(shape), " has stride 0 (a broadcast view)");
    }
    last = std::min(last + u128{shape[i] - 1} * strides[i], kBeyond);
  }
  const u128 elements = Elements(t);
  const u128 end = u128{t.addr()} + (last + 1) * layout.elem_bytes;
  RETURN_IF_ERROR(CheckEnd(t.space(), t.pe(), t.addr(), end));
  const uint64_t space_bytes = t.space() == pb::HBM ? hbm_region_bytes_ : tcm_bytes_;
  if (elements * layout.elem_bytes > space_bytes) {
    return fail("shape ", ShapeText(shape), " with strides ", ShapeText(strides), " holds more bytes than ",
                SpaceText(t.space()), " (", space_bytes, "); overlapping views that large are "
                "refused");
  }
  layout.elements = static_cast<uint64_t>(elements);

  // Runs: drop size-1 dims, merge the innermost dims while contiguous.
  std::vector<std::pair<uint64_t, uint64_t>> dims;  // (size, stride)
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > 1) dims.emplace_back(shape[i], strides[i]);
  }
  uint64_t run_elems = 1;
  while (!dims.empty() && dims.back().second == run_elems) {
    run_elems *= dims.back().first;
    dims.pop_back();
  }
  layout.run_bytes = run_elems * layout.elem_bytes;
  for (const auto& [size, stride] : dims) {
    layout.outer_sizes.push_back(size);
    layout.outer_stride_bytes.push_back(stride * layout.elem_bytes);
  }
  return layout;
}

uint8_t* MemoryStore::Page(pb::MemorySpace space, uint32_t pe, uint64_t page, bool create) {
  const auto key = std::make_tuple(static_cast<int>(space), pe, page);
  auto it = pages_.find(key);
  if (it != pages_.end()) return it->second.get();
  if (!create) return nullptr;
  // make_unique<T[]> value-initializes: a new page reads as zeros.
  return pages_.emplace(key, std::make_unique<uint8_t[]>(kPageBytes)).first->second.get();
}

const uint8_t* MemoryStore::Page(pb::MemorySpace space, uint32_t pe, uint64_t page) const {
  auto it = pages_.find(std::make_tuple(static_cast<int>(space), pe, page));
  return it == pages_.end() ? nullptr : it->second.get();
}

namespace {

// Calls fn(addr, bytes, position in the dense copy) for every run of `layout`, in row-major
// order of the outer dims.
template <typename Layout, typename Fn>
void ForEachRun(const Layout& layout, Fn fn) {
  const size_t rank = layout.outer_sizes.size();
  std::vector<uint64_t> index(rank, 0);
  uint64_t offset = 0;  // bytes from layout.addr
  for (uint64_t pos = 0;; pos += layout.run_bytes) {
    fn(layout.addr + offset, layout.run_bytes, pos);
    size_t d = rank;
    while (d > 0) {
      --d;
      if (++index[d] < layout.outer_sizes[d]) {
        offset += layout.outer_stride_bytes[d];
        break;
      }
      offset -= (layout.outer_sizes[d] - 1) * layout.outer_stride_bytes[d];
      index[d] = 0;
      if (d == 0) return;
    }
    if (rank == 0) return;
  }
}

}  // namespace

void MemoryStore::Gather(const Layout& layout, uint8_t* out) const {
  uint64_t cached_page = std::numeric_limits<uint64_t>::max();
  const uint8_t* cached = nullptr;
  ForEachRun(layout, [&](uint64_t addr, uint64_t bytes, uint64_t pos) {
    while (bytes > 0) {
      const uint64_t page = addr / kPageBytes;
      const uint64_t in_page = addr % kPageBytes;
      const uint64_t n = std::min(bytes, kPageBytes - in_page);
      if (page != cached_page) {
        cached_page = page;
        cached = Page(layout.space, layout.pe, page);
      }
      if (cached == nullptr) {
        std::memset(out + pos, 0, n);
      } else {
        std::memcpy(out + pos, cached + in_page, n);
      }
      addr += n;
      pos += n;
      bytes -= n;
    }
  });
}

void MemoryStore::Scatter(const Layout& layout, const uint8_t* in) {
  uint64_t cached_page = std::numeric_limits<uint64_t>::max();
  uint8_t* cached = nullptr;
  ForEachRun(layout, [&](uint64_t addr, uint64_t bytes, uint64_t pos) {
    while (bytes > 0) {
      const uint64_t page = addr / kPageBytes;
      const uint64_t in_page = addr % kPageBytes;
      const uint64_t n = std::min(bytes, kPageBytes - in_page);
      if (page != cached_page) {
        cached_page = page;
        cached = Page(layout.space, layout.pe, page, /*create=*/true);
      }
      std::memcpy(cached + in_page, in + pos, n);
      addr += n;
      pos += n;
      bytes -= n;
    }
  });
}

absl::StatusOr<std::vector<uint8_t>> MemoryStore::ReadElements(const pb::TensorRef& tensor) const {
  absl::StatusOr<Layout> layout = Resolve(tensor);
  RETURN_IF_ERROR(layout.status());
  std::vector<uint8_t> bytes(layout->elements * layout->elem_bytes);
  Gather(*layout, bytes.data());
  return bytes;
}

absl::Status MemoryStore::WriteElements(const pb::TensorRef& tensor,
                                        std::span<const uint8_t> bytes) {
  absl::StatusOr<Layout> layout = Resolve(tensor);
  RETURN_IF_ERROR(layout.status());
  const uint64_t want = layout->elements * layout->elem_bytes;
  if (bytes.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        PeName(tensor.pe()), ": got ", bytes.size(), " bytes for a ", DTypeText(tensor.dtype()),
        " tensor of shape ", ShapeText(ShapeOf(tensor)), " (want ", want, ")"));
  }
  Scatter(*layout, bytes.data());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> MemoryStore::Read(const pb::TensorRef& tensor) const {
  absl::StatusOr<Layout> layout = Resolve(tensor);
  RETURN_IF_ERROR(layout.status());
  std::vector<float> values(layout->elements);
  if (tensor.dtype() == pb::FP32) {
    Gather(*layout, reinterpret_cast<uint8_t*>(values.data()));
    return values;
  }
  std::vector<uint16_t> raw(layout->elements);
  Gather(*layout, reinterpret_cast<uint8_t*>(raw.data()));
  for (size_t i = 0; i < raw.size(); ++i) values[i] = Bf16ToFloat(raw[i]);
  return values;
}

absl::Status MemoryStore::Write(const pb::TensorRef& tensor, std::span<const float> values) {
  absl::StatusOr<Layout> layout = Resolve(tensor);
  RETURN_IF_ERROR(layout.status());
  if (values.size() != layout->elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        PeName(tensor.pe()), ": got ", values.size(), " values for a tensor of shape ",
        ShapeText(ShapeOf(tensor)), " (", layout->elements, " elements)"));
  }
  if (tensor.dtype() == pb::FP32) {
    Scatter(*layout, reinterpret_cast<const uint8_t*>(values.data()));
    return absl::OkStatus();
  }
  std::vector<uint16_t> raw(values.size());
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = FloatToBf16(values[i]);
  Scatter(*layout, reinterpret_cast<const uint8_t*>(raw.data()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> MemoryStore::ReadBytes(pb::MemorySpace space, uint32_t pe,
                                                            uint64_t addr, uint64_t size) const {
  RETURN_IF_ERROR(CheckRange(space, pe, addr, size));
  Layout layout{.space = space, .pe = pe, .addr = addr, .elem_bytes = 1, .elements = size,
                .run_bytes = size, .outer_sizes = {}, .outer_stride_bytes = {}};
  std::vector<uint8_t> bytes(size);
  Gather(layout, bytes.data());
  return bytes;
}

absl::Status MemoryStore::WriteBytes(pb::MemorySpace space, uint32_t pe, uint64_t addr,
                                     std::span<const uint8_t> bytes) {
  RETURN_IF_ERROR(CheckRange(space, pe, addr, bytes.size()));
  Layout layout{.space = space, .pe = pe, .addr = addr, .elem_bytes = 1,
                .elements = bytes.size(), .run_bytes = bytes.size(), .outer_sizes = {},
                .outer_stride_bytes = {}};
  Scatter(layout, bytes.data());
  return absl::OkStatus();
}

// ---- DataExecutor ----

namespace {

// A tensor read as floats, with its shape.
struct FloatTensor {
  Shape shape;
  std::vector<float> values;
};

// Labels errors "<kind> cmd <id>: <role>: <reason>".
class Ctx {
 public:
  Ctx(const char* kind, uint64_t cmd_id) : prefix_(absl::StrCat(kind, " cmd ", cmd_id, ": ")) {}

  template <typename... Args>
  absl::Status Fail(const std::string& role, const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(prefix_, role, ": ", args...));
  }
  absl::Status Wrap(const std::string& role, const absl::Status& status) const {
    if (status.ok()) return status;
    return Fail(role, status.message());
  }
  absl::StatusOr<FloatTensor> Load(const MemoryStore& store, const pb::TensorRef& t,
                              const std::string& role) const {
    absl::StatusOr<std::vector<float>> values = store.Read(t);
    if (!values.ok()) return Wrap(role, values.status());
    return FloatTensor{ShapeOf(t), *std::move(values)};
  }
  absl::Status Store(MemoryStore& store, const pb::TensorRef& t, const std::vector<float>& values,
                     const std::string& role) const {
    return Wrap(role, store.Write(t, values));
  }

 private:
  std::string prefix_;
};

// NaN-propagating maximum.
inline float Max(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<float>::quiet_NaN();
  return x < y ? y : x;
}

inline float Apply(pb::MathOp op, float x, float y) {
  switch (op) {
    case pb::ADD:
      return x + y;
    case pb::SUB:
      return x - y;
    case pb::MUL:
      return x * y;
    case pb::DIV:
      return x / y;
    case pb::MAXIMUM:
      return Max(x, y);
    default:
      AHBM_CHECK(false) << "not a binary op: " << static_cast<int>(op);
      return 0;
  }
}

bool IsBinary(pb::MathOp op) {
  return op == pb::ADD || op == pb::SUB || op == pb::MUL || op == pb::DIV || op == pb::MAXIMUM;
}

// `operand` combines elementwise with `full`: equal shapes, or rank 2 [1, C] / [R, 1] of [R, C].
bool BroadcastsOver(const Shape& operand, const Shape& full) {
  if (operand == full) return true;
  if (operand.size() != 2 || full.size() != 2) return false;
  return (operand[0] == 1 && operand[1] == full[1]) || (operand[0] == full[0] && operand[1] == 1);
}

// Index of (r, c) of a [R, C] result in a rank-2 operand broadcast over it.
inline size_t BroadcastIndex(const Shape& operand, uint64_t r, uint64_t c) {
  return (operand[0] == 1 ? 0 : r) * operand[1] + (operand[1] == 1 ? 0 : c);
}

// out[i] = op(x[i], y[.]) with x of shape `full` and y broadcast over it; x and out may alias.
void ApplyBroadcast(pb::MathOp op, const std::vector<float>& x, const Shape& full,
                    const std::vector<float>& y, const Shape& y_shape, std::vector<float>& out) {
  if (y_shape == full) {
    for (size_t i = 0; i < x.size(); ++i) out[i] = Apply(op, x[i], y[i]);
    return;
  }
  const uint64_t cols = full[1];
  for (uint64_t r = 0; r < full[0]; ++r) {
    for (uint64_t c = 0; c < cols; ++c) {
      out[r * cols + c] = Apply(op, x[r * cols + c], y[BroadcastIndex(y_shape, r, c)]);
    }
  }
}

// b [K, N] -> bt [N, K], so the k loop runs over contiguous data.
std::vector<float> Transposed(const std::vector<float>& b, uint64_t rows, uint64_t cols) {
  std::vector<float> bt(b.size());
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t c = 0; c < cols; ++c) bt[c * rows + r] = b[r * cols + c];
  }
  return bt;
}

// out[m, n] = seed[m, n] (or 0) + sum over k in order of a[m, k] * b[k, n], in fp32.
std::vector<float> MatMul(const std::vector<float>& a, const std::vector<float>& b, uint64_t m,
                          uint64_t k, uint64_t n, const std::vector<float>* seed) {
  const std::vector<float> bt = Transposed(b, k, n);
  std::vector<float> out(m * n);
  for (uint64_t i = 0; i < m; ++i) {
    const float* a_row = a.data() + i * k;
    for (uint64_t j = 0; j < n; ++j) {
      const float* b_col = bt.data() + j * k;
      float acc = seed != nullptr ? (*seed)[i * n + j] : 0.0f;
      for (uint64_t x = 0; x < k; ++x) acc += a_row[x] * b_col[x];
      out[i * n + j] = acc;
    }
  }
  return out;
}

absl::Status GemmShapes(const Ctx& ctx, const Shape& a, const Shape& b, const Shape& out) {
  if (a.size() != 2) return ctx.Fail("operand a", "shape ", ShapeText(a), " is not rank 2 [M, K]");
  if (b.size() != 2) return ctx.Fail("operand b", "shape ", ShapeText(b), " is not rank 2 [K, N]");
  if (b[0] != a[1]) {
    return ctx.Fail("operand b", "shape ", ShapeText(b), " does not match operand a's K = ", a[1],
                    " (a is ", ShapeText(a), ")");
  }
  if (out != Shape{a[0], b[1]}) {
    return ctx.Fail("out", "shape ", ShapeText(out), " does not match [M, N] = ",
                    ShapeText({a[0], b[1]}));
  }
  return absl::OkStatus();
}

// The GEMM head: a . b (+ the old out), shapes checked.
absl::StatusOr<std::vector<float>> Gemm(const Ctx& ctx, const MemoryStore& store,
                                        const pb::TensorRef& a_ref, const pb::TensorRef& b_ref,
                                        const pb::TensorRef& out_ref, bool accumulate) {
  absl::StatusOr<FloatTensor> a = ctx.Load(store, a_ref, "operand a");
  RETURN_IF_ERROR(a.status());
  absl::StatusOr<FloatTensor> b = ctx.Load(store, b_ref, "operand b");
  RETURN_IF_ERROR(b.status());
  const Shape out_shape = ShapeOf(out_ref);
  RETURN_IF_ERROR(GemmShapes(ctx, a->shape, b->shape, out_shape));
  std::vector<float> seed;
  if (accumulate) {
    absl::StatusOr<FloatTensor> old = ctx.Load(store, out_ref, "out");
    RETURN_IF_ERROR(old.status());
    seed = std::move(old->values);
  }
  return MatMul(a->values, b->values, a->shape[0], a->shape[1], b->shape[1],
                accumulate ? &seed : nullptr);
}

}  // namespace

absl::Status DataExecutor::Execute(const pb::DmaCmd& cmd) {
  const Ctx ctx("dma", cmd.cmd_id());
  const u128 src_count = Elements(cmd.src());
  const u128 dst_count = Elements(cmd.dst());
  if (src_count != dst_count) {
    return ctx.Fail("dst", "shape ", ShapeText(ShapeOf(cmd.dst())),
                    " does not hold as many elements as src ", ShapeText(ShapeOf(cmd.src())));
  }
  if (cmd.src().dtype() == cmd.dst().dtype()) {
    absl::StatusOr<std::vector<uint8_t>> bytes = store_->ReadElements(cmd.src());
    if (!bytes.ok()) return ctx.Wrap("src", bytes.status());
    return ctx.Wrap("dst", store_->WriteElements(cmd.dst(), *bytes));
  }
  absl::StatusOr<FloatTensor> src = ctx.Load(*store_, cmd.src(), "src");
  RETURN_IF_ERROR(src.status());
  return ctx.Store(*store_, cmd.dst(), src->values, "dst");
}

absl::Status DataExecutor::Execute(const pb::GemmCmd& cmd) {
  const Ctx ctx("gemm", cmd.cmd_id());
  absl::StatusOr<std::vector<float>> out =
      Gemm(ctx, *store_, cmd.a(), cmd.b(), cmd.out(), cmd.accumulate());
  RETURN_IF_ERROR(out.status());
  return ctx.Store(*store_, cmd.out(), *out, "out");
}

absl::Status DataExecutor::Execute(const pb::CompositeCmd& cmd) {
  const Ctx ctx("composite", cmd.cmd_id());
  // Read every epilogue operand before anything is written.
  std::vector<FloatTensor> operands(cmd.epilogue_size());
  const Shape out_shape = ShapeOf(cmd.out());
  for (int i = 0; i < cmd.epilogue_size(); ++i) {
    const pb::EpilogueStage& stage = cmd.epilogue(i);
    const std::string role = absl::StrCat("epilogue[", i, "]");
    if (stage.op() != pb::SCALE && stage.op() != pb::EXP && !IsBinary(stage.op())) {
      return ctx.Fail(role, "op ", OpText(stage.op()),
                      " is not an epilogue op (SCALE, EXP, ADD, SUB, MUL, DIV, MAXIMUM)");
    }
    if (!stage.has_operand() || !IsBinary(stage.op())) continue;
    absl::StatusOr<FloatTensor> operand = ctx.Load(*store_, stage.operand(), role + " operand");
    RETURN_IF_ERROR(operand.status());
    if (out_shape.size() != 2 || !BroadcastsOver(operand->shape, out_shape)) {
      return ctx.Fail(role + " operand", "shape ", ShapeText(operand->shape),
                      " does not broadcast over out ", ShapeText(out_shape));
    }
    operands[i] = *std::move(operand);
  }
  absl::StatusOr<std::vector<float>> out =
      Gemm(ctx, *store_, cmd.a(), cmd.b(), cmd.out(), /*accumulate=*/false);
  RETURN_IF_ERROR(out.status());
  std::vector<float>& x = *out;
  for (int i = 0; i < cmd.epilogue_size(); ++i) {
    const pb::EpilogueStage& stage = cmd.epilogue(i);
    const float scalar = stage.scalar();
    if (stage.op() == pb::SCALE) {
      for (float& v : x) v *= scalar;
    } else if (stage.op() == pb::EXP) {
      for (float& v : x) v = std::exp(v);
    } else if (stage.has_operand()) {
      ApplyBroadcast(stage.op(), x, out_shape, operands[i].values, operands[i].shape, x);
    } else {
      for (float& v : x) v = Apply(stage.op(), v, scalar);
    }
  }
  return ctx.Store(*store_, cmd.out(), x, "out");
}

namespace {

// FILL: `out` set to the scalar (absurd shapes refused before allocating).
absl::Status ExecuteFill(MemoryStore& store, const Ctx& ctx, const pb::MathCmd& cmd) {
  const u128 count = Elements(cmd.out());
  const uint64_t space_bytes =
      cmd.out().space() == pb::TCM ? store.tcm_bytes() : store.hbm_region_bytes();
  if (count * std::max<uint64_t>(sim::DTypeBytes(cmd.out().dtype()), 1) > space_bytes) {
    return ctx.Fail("out", "shape ", ShapeText(ShapeOf(cmd.out())), " holds more bytes than ",
                    SpaceText(cmd.out().space()), " (", space_bytes, ")");
  }
  return ctx.Store(store, cmd.out(), std::vector<float>(static_cast<size_t>(count), cmd.scalar()),
                   "out");
}

// A binary op: one side may broadcast over the other (a column or a scalar); out has the
// full shape.
absl::Status ExecuteBinary(MemoryStore& store, const Ctx& ctx, const pb::MathCmd& cmd,
                           const FloatTensor& in) {
  const pb::MathOp op = cmd.op();
  const Shape out_shape = ShapeOf(cmd.out());
  ASSIGN_OR_RETURN(const FloatTensor other, ctx.Load(store, cmd.inputs(1), "inputs[1]"));
  std::vector<float> out;
  if (BroadcastsOver(other.shape, in.shape)) {
    if (out_shape != in.shape) {
      return ctx.Fail("out", "shape ", ShapeText(out_shape), " does not match the broadcast shape ",
                      ShapeText(in.shape));
    }
    out.resize(in.values.size());
    ApplyBroadcast(op, in.values, in.shape, other.values, other.shape, out);
  } else if (BroadcastsOver(in.shape, other.shape)) {
    if (out_shape != other.shape) {
      return ctx.Fail("out", "shape ", ShapeText(out_shape), " does not match the broadcast shape ",
                      ShapeText(other.shape));
    }
    // in is the broadcast side: out = op(in[.], other[i]).
    const Shape& full = other.shape;
    out.resize(other.values.size());
    for (uint64_t r = 0; r < full[0]; ++r) {
      for (uint64_t c = 0; c < full[1]; ++c) {
        const size_t i = r * full[1] + c;
        out[i] = Apply(op, in.values[BroadcastIndex(in.shape, r, c)], other.values[i]);
      }
    }
  } else {
    return ctx.Fail("inputs[1]", "shape ", ShapeText(other.shape),
                    " does not broadcast with inputs[0] ", ShapeText(in.shape));
  }
  return ctx.Store(store, cmd.out(), out, "out");
}

// REDUCE_MAX / REDUCE_SUM over `axis` (-1: the last); out keeps the axis as 1 or drops it.
absl::Status ExecuteReduce(MemoryStore& store, const Ctx& ctx, const pb::MathCmd& cmd,
                           const FloatTensor& in) {
  const Shape& shape = in.shape;
  const Shape out_shape = ShapeOf(cmd.out());
  const int rank = static_cast<int>(shape.size());
  const int axis = cmd.axis() == -1 ? rank - 1 : cmd.axis();
  if (axis < 0 || axis >= rank) {
    return ctx.Fail("axis", cmd.axis(), " is not an axis of inputs[0] ", ShapeText(shape));
  }
  Shape kept = shape;
  kept[axis] = 1;
  Shape removed = shape;
  removed.erase(removed.begin() + axis);
  if (out_shape != kept && (removed.empty() || out_shape != removed)) {
    return ctx.Fail("out", "shape ", ShapeText(out_shape), " is not inputs[0] ", ShapeText(shape),
                    " reduced over axis ", axis);
  }
  uint64_t outer = 1;
  uint64_t inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[i];
  for (int i = axis + 1; i < rank; ++i) inner *= shape[i];
  const uint64_t n = shape[axis];
  std::vector<float> out(outer * inner);
  for (uint64_t o = 0; o < outer; ++o) {
    float* acc = out.data() + o * inner;
    const float* base = in.values.data() + o * n * inner;
    std::copy(base, base + inner, acc);
    for (uint64_t j = 1; j < n; ++j) {
      const float* row = base + j * inner;
      if (cmd.op() == pb::REDUCE_SUM) {
        for (uint64_t i = 0; i < inner; ++i) acc[i] += row[i];
      } else {
        for (uint64_t i = 0; i < inner; ++i) acc[i] = Max(acc[i], row[i]);
      }
    }
  }
  return ctx.Store(store, cmd.out(), out, "out");
}

}  // namespace

absl::Status DataExecutor::Execute(const pb::MathCmd& cmd) {
  const Ctx ctx("math", cmd.cmd_id());
  const pb::MathOp op = cmd.op();
  if (op == pb::MATH_OP_UNSPECIFIED || !pb::MathOp_IsValid(op)) {
    return ctx.Fail("op", "is ", OpText(op), "; want a MATH op");
  }
  const int want_inputs = IsBinary(op) ? 2 : op == pb::FILL ? 0 : 1;
  if (cmd.inputs_size() != want_inputs) {
    return ctx.Fail("inputs", OpText(op), " takes ", want_inputs, " input(s) (got ",
                    cmd.inputs_size(), ")");
  }
  const Shape out_shape = ShapeOf(cmd.out());
  if (op == pb::FILL) return ExecuteFill(*store_, ctx, cmd);
  if (op == pb::COPY && cmd.inputs(0).dtype() == cmd.out().dtype()) {
    if (ShapeOf(cmd.inputs(0)) != out_shape) {
      return ctx.Fail("out", "shape ", ShapeText(out_shape), " does not match inputs[0] ",
                      ShapeText(ShapeOf(cmd.inputs(0))));
    }
    absl::StatusOr<std::vector<uint8_t>> bytes = store_->ReadElements(cmd.inputs(0));
    if (!bytes.ok()) return ctx.Wrap("inputs[0]", bytes.status());
    return ctx.Wrap("out", store_->WriteElements(cmd.out(), *bytes));
  }
  ASSIGN_OR_RETURN(FloatTensor in, ctx.Load(*store_, cmd.inputs(0), "inputs[0]"));
  if (IsBinary(op)) return ExecuteBinary(*store_, ctx, cmd, in);

  const Shape& shape = in.shape;
  std::vector<float>& x = in.values;
  switch (op) {
    case pb::EXP:
    case pb::SCALE:
    case pb::COPY: {
      if (out_shape != shape) {
        return ctx.Fail("out", "shape ", ShapeText(out_shape), " does not match inputs[0] ",
                        ShapeText(shape), " (", OpText(op), " keeps the shape)");
      }
      if (op == pb::EXP) {
        for (float& v : x) v = std::exp(v);
      } else if (op == pb::SCALE) {
        for (float& v : x) v *= cmd.scalar();
      }
      return ctx.Store(*store_, cmd.out(), x, "out");
    }
    case pb::REDUCE_MAX:
    case pb::REDUCE_SUM:
      return ExecuteReduce(*store_, ctx, cmd, in);
    case pb::TRANSPOSE: {
      if (shape.size() != 2) {
        return ctx.Fail("inputs[0]", "TRANSPOSE takes a rank-2 input (got shape ", ShapeText(shape),
                        ")");
      }
      if (out_shape != Shape{shape[1], shape[0]}) {
        return ctx.Fail("out", "shape ", ShapeText(out_shape), " is not the transpose ",
                        ShapeText({shape[1], shape[0]}), " of inputs[0] ", ShapeText(shape));
      }
      return ctx.Store(*store_, cmd.out(), Transposed(x, shape[0], shape[1]), "out");
    }
    default:
      AHBM_CHECK(false) << "unhandled MATH op " << OpText(op);
      return InvariantError("unreachable");
  }
}

absl::Status DataExecutor::Execute(const pb::SoftmaxPvCmd& cmd) {
  const Ctx ctx("softmax_pv", cmd.cmd_id());
  absl::StatusOr<FloatTensor> s = ctx.Load(*store_, cmd.s(), "s");
  RETURN_IF_ERROR(s.status());
  absl::StatusOr<FloatTensor> v = ctx.Load(*store_, cmd.v(), "v");
  RETURN_IF_ERROR(v.status());
  absl::StatusOr<FloatTensor> m = ctx.Load(*store_, cmd.acc_m(), "acc_m");
  RETURN_IF_ERROR(m.status());
  absl::StatusOr<FloatTensor> l = ctx.Load(*store_, cmd.acc_l(), "acc_l");
  RETURN_IF_ERROR(l.status());
  absl::StatusOr<FloatTensor> o = ctx.Load(*store_, cmd.acc_o(), "acc_o");
  RETURN_IF_ERROR(o.status());
  if (s->shape.size() != 2) return ctx.Fail("s", "shape ", ShapeText(s->shape), " is not [R, T]");
  if (v->shape.size() != 2 || v->shape[0] != s->shape[1]) {
    return ctx.Fail("v", "shape ", ShapeText(v->shape), " is not [T, D] with T = ", s->shape[1]);
  }
  const uint64_t rows = s->shape[0];
  const uint64_t keys = s->shape[1];
  const uint64_t dims = v->shape[1];
  if (m->shape != Shape{rows, 1} && m->shape != Shape{rows}) {
    return ctx.Fail("acc_m", "shape ", ShapeText(m->shape), " is not [R, 1] or [R] with R = ", rows);
  }
  if (l->shape != Shape{rows, 1} && l->shape != Shape{rows}) {
    return ctx.Fail("acc_l", "shape ", ShapeText(l->shape), " is not [R, 1] or [R] with R = ", rows);
  }
  if (o->shape != Shape{rows, dims}) {
    return ctx.Fail("acc_o", "shape ", ShapeText(o->shape), " is not [R, D] = ", ShapeText({rows, dims}));
  }
  const float scale = cmd.scale();
  const std::vector<float> vt = Transposed(v->values, keys, dims);
  std::vector<float> p(keys);
  for (uint64_t r = 0; r < rows; ++r) {
    const float* s_row = s->values.data() + r * keys;
    float m_new = m->values[r];
    for (uint64_t t = 0; t < keys; ++t) m_new = Max(m_new, s_row[t] * scale);
    float alpha = 1.0f;
    if (m_new == -std::numeric_limits<float>::infinity()) {
      std::fill(p.begin(), p.end(), 0.0f);
    } else {
      alpha = std::exp(m->values[r] - m_new);
      for (uint64_t t = 0; t < keys; ++t) p[t] = RoundToBf16(std::exp(s_row[t] * scale - m_new));
    }
    float row_sum = 0.0f;
    for (uint64_t t = 0; t < keys; ++t) row_sum += p[t];
    l->values[r] = l->values[r] * alpha + row_sum;
    float* o_row = o->values.data() + r * dims;
    for (uint64_t d = 0; d < dims; ++d) {
      const float* v_col = vt.data() + d * keys;
      float pv = 0.0f;
      for (uint64_t t = 0; t < keys; ++t) pv += p[t] * v_col[t];
      o_row[d] = o_row[d] * alpha + pv;
    }
    m->values[r] = m_new;
  }
  RETURN_IF_ERROR(ctx.Store(*store_, cmd.acc_m(), m->values, "acc_m"));
  RETURN_IF_ERROR(ctx.Store(*store_, cmd.acc_l(), l->values, "acc_l"));
  return ctx.Store(*store_, cmd.acc_o(), o->values, "acc_o");
}

absl::Status DataExecutor::Execute(const pb::LseMergeCmd& cmd) {
  const Ctx ctx("lse_merge", cmd.cmd_id());
  const std::pair<const pb::TensorRef*, const char*> parts[] = {
      {&cmd.acc_m(), "acc_m"}, {&cmd.acc_l(), "acc_l"}, {&cmd.acc_o(), "acc_o"},
      {&cmd.in_m(), "in_m"},   {&cmd.in_l(), "in_l"},   {&cmd.in_o(), "in_o"}};
  std::vector<FloatTensor> t;
  for (const auto& [ref, role] : parts) {
    absl::StatusOr<FloatTensor> x = ctx.Load(*store_, *ref, role);
    RETURN_IF_ERROR(x.status());
    t.push_back(*std::move(x));
  }
  const FloatTensor& ma = t[0];
  const FloatTensor& la = t[1];
  const FloatTensor& oa = t[2];
  const FloatTensor& mb = t[3];
  const FloatTensor& lb = t[4];
  const FloatTensor& ob = t[5];
  if (oa.shape.size() != 2) return ctx.Fail("acc_o", "shape ", ShapeText(oa.shape), " is not [R, D]");
  const uint64_t rows = oa.shape[0];
  const uint64_t dims = oa.shape[1];
  for (int i : {0, 1, 3, 4}) {
    if (t[i].values.size() != rows) {
      return ctx.Fail(parts[i].second, "shape ", ShapeText(t[i].shape), " is not [R, 1] or [R] with R = ", rows);
    }
  }
  if (ob.shape != oa.shape) {
    return ctx.Fail("in_o", "shape ", ShapeText(ob.shape), " does not match acc_o ", ShapeText(oa.shape));
  }
  // The primitive merge's ops in its order, each result rounded to fp32 (lse_merge.cc).
  std::vector<float> m(rows), l(rows), o(rows * dims);
  for (uint64_t r = 0; r < rows; ++r) {
    m[r] = Max(ma.values[r], mb.values[r]);
    const float sa = std::exp(ma.values[r] - m[r]);
    const float sb = std::exp(mb.values[r] - m[r]);
    const float la_sa = la.values[r] * sa;
    const float lb_sb = lb.values[r] * sb;
    l[r] = la_sa + lb_sb;
    for (uint64_t c = 0; c < dims; ++c) {
      const float oa_sa = oa.values[r * dims + c] * sa;
      const float ob_sb = ob.values[r * dims + c] * sb;
      o[r * dims + c] = oa_sa + ob_sb;
    }
  }
  RETURN_IF_ERROR(ctx.Store(*store_, cmd.out_m(), m, "out_m"));
  RETURN_IF_ERROR(ctx.Store(*store_, cmd.out_l(), l, "out_l"));
  return ctx.Store(*store_, cmd.out_o(), o, "out_o");
}

}  // namespace ahbm::kernels
