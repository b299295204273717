#include "kernels/host/placement.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/errors.h"
#include "actors/tensor_ref.h"
#include "base/check.h"
#include "base/status_macros.h"

namespace ahbm::host {
namespace {

absl::Status TensorError(const std::string& name, std::string_view field, std::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrCat("tensor '", name, "': ", std::string(field), ": ", std::string(reason)));
}

// The same status with "tensor '<name>': <context>" in front of its message.
absl::Status Prefixed(const absl::Status& status, const std::string& name,
                      std::string_view context) {
  return Annotate(status, absl::StrCat("tensor '", name, "': ", std::string(context)));
}

std::optional<uint64_t> CheckedProduct(std::span<const uint64_t> dims) {
  uint64_t product = 1;
  for (uint64_t d : dims) {
    if (__builtin_mul_overflow(product, d, &product)) return std::nullopt;
  }
  return product;
}

uint64_t Product(std::span<const uint64_t> dims) {
  const std::optional<uint64_t> product = CheckedProduct(dims);
  AHBM_CHECK(product.has_value()) << "shape checked at placement";
  return *product;
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

absl::Status CheckDtype(const std::string& name, pb::DType dtype) {
  if (dtype == pb::BF16 || dtype == pb::FP32) return absl::OkStatus();
  return TensorError(name, "dtype",
                     absl::StrCat("must be BF16 or FP32 (got ", pb::DType_Name(dtype), ")"));
}

// The global array (as floats) and the local buffer (in `dtype`) must fit in 64-bit byte counts;
// returns the local buffer's bytes.
absl::StatusOr<uint64_t> BufferBytes(const std::string& name, const std::vector<uint64_t>& global,
                                     const std::vector<uint64_t>& local, pb::DType dtype) {
  const std::optional<uint64_t> global_count = CheckedProduct(global);
  const std::optional<uint64_t> local_count = CheckedProduct(local);
  uint64_t global_bytes = 0;
  uint64_t local_bytes = 0;
  if (!global_count.has_value() || !local_count.has_value() ||
      __builtin_mul_overflow(*global_count, sizeof(float), &global_bytes) ||
      __builtin_mul_overflow(*local_count, sim::DTypeBytes(dtype), &local_bytes)) {
    return TensorError(name, "shape", absl::StrCat(ShapeString(global), " is too large"));
  }
  return local_bytes;
}

// A list of global PEs: non-empty, on the chip, each at most once.
absl::Status CheckPeList(const HbmAllocator& allocator, const std::string& name,
                         const std::string& field, std::span<const uint32_t> pes) {
  if (pes.empty()) return TensorError(name, field, "empty");
  const uint32_t num_pes = allocator.index().num_pes();
  for (size_t i = 0; i < pes.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    if (pes[i] >= num_pes) {
      return TensorError(name, at,
                         absl::StrCat(pes[i], " is not a PE of this chip (", num_pes, " PEs)"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (pes[j] == pes[i]) {
        return TensorError(name, at,
                           absl::StrCat(PeName(allocator.index(), pes[i]),
                                        " is listed twice (also ", field, "[", j, "])"));
      }
    }
  }
  return absl::OkStatus();
}

// Entries of `values` below `limit`, each at most once; `what` names them in messages.
absl::Status CheckIndexList(const std::string& name, const std::string& field,
                            std::span<const uint32_t> values, size_t expected_size,
                            std::string_view size_name, uint32_t limit, std::string_view what) {
  if (values.size() != expected_size) {
    return TensorError(name, field,
                       absl::StrCat(values.size(), " entries, the KV placement has ",
                                    std::string(size_name), " = ", expected_size));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    if (values[i] >= limit) {
      return TensorError(name, at,
                         absl::StrCat(values[i], " is not ", std::string(what), " (", limit, ")"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (values[j] == values[i]) {
        return TensorError(name, at,
                           absl::StrCat(values[i], " is listed twice (also ", field, "[", j, "])"));
      }
    }
  }
  return absl::OkStatus();
}

// Allocates the shard's buffer on its PE and fills in ref.addr.
absl::Status AllocateShard(HbmAllocator& allocator, const std::string& name, pb::DType dtype,
                           Shard& shard) {
  uint64_t bytes = 0;
  AHBM_CHECK(!__builtin_mul_overflow(sim::ElementCount(shard.ref), sim::DTypeBytes(dtype), &bytes))
      << "sizes checked by BufferBytes";
  absl::StatusOr<uint64_t> addr = allocator.Allocate(shard.ref.pe(), bytes);
  if (!addr.ok()) return Prefixed(addr.status(), name, "");
  shard.ref.set_addr(*addr);
  return absl::OkStatus();
}

Shard MakeShard(uint32_t pe, pb::DType dtype, const std::vector<uint64_t>& local_shape,
                std::vector<IndexRange> global, uint32_t rank) {
  Shard shard;
  shard.ref.set_space(pb::HBM);
  shard.ref.set_pe(pe);
  shard.ref.set_dtype(dtype);
  for (uint64_t d : local_shape) shard.ref.add_shape(d);
  shard.global = std::move(global);
  shard.rank = rank;
  return shard;
}

std::vector<IndexRange> WholeShape(const std::vector<uint64_t>& shape) {
  std::vector<IndexRange> ranges;
  for (uint64_t d : shape) ranges.push_back(IndexRange{0, d});
  return ranges;
}

// Calls fn(local_index, global_index) for every element the shard holds (padding excluded).
template <typename Fn>
void ForEachElement(const PlacedTensor& tensor, const Shard& shard, Fn&& fn) {
  const std::vector<uint64_t>& shape = tensor.shape();
  switch (tensor.distribution()) {
    case Distribution::kReplicated: {
      const uint64_t count = Product(shape);
      for (uint64_t i = 0; i < count; ++i) fn(i, i);
      return;
    }
    case Distribution::kRowWise: {
      const uint32_t axis = tensor.axis();
      const uint64_t outer = Product(std::span(shape).first(axis));
      const uint64_t inner = Product(std::span(shape).subspan(axis + 1));
      const uint64_t n = shape[axis];
      const uint64_t block = tensor.block();
      const IndexRange rows = shard.global[axis];
      for (uint64_t o = 0; o < outer; ++o) {
        for (uint64_t j = 0; j < rows.size(); ++j) {
          const uint64_t local = (o * block + j) * inner;
          const uint64_t global = (o * n + rows.begin + j) * inner;
          for (uint64_t i = 0; i < inner; ++i) fn(local + i, global + i);
        }
      }
      return;
    }
    case Distribution::kKvCache: {
      const uint64_t s = shape[1];
      const uint64_t d = shape[2];
      const uint64_t head = shard.global[0].begin;
      const IndexRange positions = shard.global[1];
      for (uint64_t slot = 0; slot < positions.size(); ++slot) {
        const uint64_t global = (head * s + positions.begin + slot) * d;
        for (uint64_t dim = 0; dim < d; ++dim) {
          fn(KvSlotOffset(tensor.kv_layout(), d, slot, dim), global + dim);
        }
      }
      return;
    }
  }
  AHBM_CHECK(false) << "unknown distribution";
}

}  // namespace

std::string PeName(const topology::ChipIndex& index, uint32_t pe) {
  const topology::PeId id = index.PeOf(pe);
  return absl::StrCat("pe ", pe, " (sip", id.sip, ".cube", id.cube, ".pe", id.pe, ")");
}

HbmAllocator::HbmAllocator(const pb::Chip& chip)
    : index_(chip),
      region_bytes_(chip.sip().cube().hbm_bytes() / chip.sip().cube().pes()),
      hbm_(chip.sip().cube().hbm_channel()),
      channels_per_pe_(chip.sip().cube().pe().hbm_channels()),
      next_(index_.num_pes(), 0) {}

absl::StatusOr<uint64_t> HbmAllocator::Allocate(uint32_t pe, uint64_t bytes, uint64_t align) {
  if (pe >= next_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pe: ", pe, " is not a PE of this chip (", next_.size(), " PEs)"));
  }
  if (align == 0 || (align & (align - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("align: ", align, " is not a power of two"));
  }
  // addr = next rounded up to `align`; it must not pass the region, nor must addr + bytes.
  uint64_t addr = 0;
  bool fits = !__builtin_add_overflow(next_[pe], align - 1, &addr);
  addr &= ~(align - 1);
  fits = fits && addr <= region_bytes_ && bytes <= region_bytes_ - addr;
  if (!fits) {
    return absl::ResourceExhaustedError(
        absl::StrCat(PeName(index_, pe), ": HBM region exhausted: ", bytes, " bytes at ", align,
                     "-byte alignment do not fit (", next_[pe], " of ", region_bytes_,
                     " bytes used, ", region_bytes_ - next_[pe], " free)"));
  }
  next_[pe] = addr + bytes;
  return addr;
}

uint64_t HbmAllocator::used_bytes(uint32_t pe) const {
  AHBM_CHECK(pe < next_.size()) << "pe " << pe;
  return next_[pe];
}

KvHeadGroup HeadGroupOf(const topology::ChipIndex& index, const topology::CubeGroups& groups,
                        uint32_t sip, uint32_t group) {
  AHBM_CHECK(sip < index.sips()) << "sip " << sip;
  AHBM_CHECK(group < groups.num_groups()) << "group " << group;
  KvHeadGroup head;
  for (uint32_t cube = 0; cube < groups.c(); ++cube) {
    head.cubes.push_back(index.GlobalCube(topology::CubeId{sip, groups.SipCube(group, cube)}));
  }
  for (uint32_t pe = 0; pe < index.pes_per_cube(); ++pe) head.pes.push_back(pe);
  return head;
}

absl::StatusOr<PlacedTensor> PlaceReplicated(HbmAllocator& allocator, std::string name,
                                             std::vector<uint64_t> shape, pb::DType dtype,
                                             std::span<const uint32_t> pes) {
  RETURN_IF_ERROR(CheckDtype(name, dtype));
  RETURN_IF_ERROR(CheckPeList(allocator, name, "pes", pes));
  RETURN_IF_ERROR(BufferBytes(name, shape, shape, dtype).status());
  PlacedTensor tensor;
  tensor.name_ = std::move(name);
  tensor.shape_ = std::move(shape);
  tensor.dtype_ = dtype;
  tensor.distribution_ = Distribution::kReplicated;
  for (size_t i = 0; i < pes.size(); ++i) {
    Shard shard = MakeShard(pes[i], dtype, tensor.shape_, WholeShape(tensor.shape_),
                            static_cast<uint32_t>(i));
    RETURN_IF_ERROR(AllocateShard(allocator, tensor.name_, dtype, shard));
    tensor.shards_.push_back(std::move(shard));
  }
  return tensor;
}

absl::StatusOr<PlacedTensor> PlaceRowWise(HbmAllocator& allocator, std::string name,
                                          std::vector<uint64_t> shape, pb::DType dtype,
                                          uint32_t axis, std::span<const uint32_t> rank_pes) {
  RETURN_IF_ERROR(CheckDtype(name, dtype));
  if (axis >= shape.size()) {
    return TensorError(name, "axis",
                       absl::StrCat(axis, " is not an axis of shape ", ShapeString(shape)));
  }
  RETURN_IF_ERROR(CheckPeList(allocator, name, "rank_pes", rank_pes));
  const uint64_t n = shape[axis];
  const uint64_t block = CeilDiv(n, rank_pes.size());
  std::vector<uint64_t> local_shape = shape;
  local_shape[axis] = block;
  RETURN_IF_ERROR(BufferBytes(name, shape, local_shape, dtype).status());
  PlacedTensor tensor;
  tensor.name_ = std::move(name);
  tensor.shape_ = std::move(shape);
  tensor.dtype_ = dtype;
  tensor.distribution_ = Distribution::kRowWise;
  tensor.axis_ = axis;
  tensor.block_ = block;
  for (size_t r = 0; r < rank_pes.size(); ++r) {
    std::vector<IndexRange> global = WholeShape(tensor.shape_);
    global[axis] = IndexRange{std::min(r * block, n), std::min((r + 1) * block, n)};
    Shard shard =
        MakeShard(rank_pes[r], dtype, local_shape, std::move(global), static_cast<uint32_t>(r));
    RETURN_IF_ERROR(AllocateShard(allocator, tensor.name_, dtype, shard));
    tensor.shards_.push_back(std::move(shard));
  }
  return tensor;
}

absl::Status PadForBankInterleave(HbmAllocator& allocator, const PlacedTensor& k) {
  const pb::HbmChannel& hbm = allocator.hbm_channel();
  if (hbm.model() != pb::BANK) {
    return absl::InvalidArgumentError(
        "kv_bank_layout: INTERLEAVED needs BANK HBM channels (hbm_channel.model); the FIFO "
        "times no banks");
  }
  const pb::HbmBankConfig& b = hbm.bank();
  const uint64_t bank_step = uint64_t{b.row_bytes()} * b.stack_ids() * b.bank_groups();
  const uint64_t period = bank_step * b.banks_per_group() * allocator.channels_per_pe();
  std::vector<bool> done(allocator.index().num_pes(), false);
  for (const Shard& shard : k.shards()) {
    const uint32_t pe = shard.ref.pe();
    if (done[pe]) continue;
    done[pe] = true;
    const uint64_t want = (shard.ref.addr() + period / 2) % period;
    const uint64_t next = allocator.used_bytes(pe);
    const uint64_t pad = (want + period - next % period) % period;
    if (pad == 0) continue;
    absl::StatusOr<uint64_t> gap = allocator.Allocate(pe, pad);
    RETURN_IF_ERROR(gap.status());
  }
  return absl::OkStatus();
}

absl::StatusOr<PlacedTensor> PlaceKvCache(HbmAllocator& allocator, std::string name,
                                          std::vector<uint64_t> shape, pb::DType dtype,
                                          const topology::KvPlacement& kv,
                                          std::span<const KvHeadGroup> heads, KvLayout layout) {
  RETURN_IF_ERROR(CheckDtype(name, dtype));
  if (shape.size() != 3) {
    return TensorError(name, "shape", absl::StrCat(ShapeString(shape), " is not [H_kv, S, d]"));
  }
  const uint64_t h_kv = shape[0];
  const uint64_t s = shape[1];
  const uint64_t d = shape[2];
  if (heads.size() != h_kv) {
    return TensorError(name, "heads", absl::StrCat(heads.size(), " head groups for H_kv = ", h_kv));
  }
  if (s > kv.max_context()) {
    return TensorError(name, "shape",
                       absl::StrCat("S = ", s,
                                    " exceeds the KV placement's "
                                    "max_context = ",
                                    kv.max_context()));
  }
  if (layout.slots == SlotLayout::kTileMajor && layout.tile == 0) {
    return TensorError(name, "layout.tile", "must be > 0 for the tile-major layout");
  }
  const topology::ChipIndex& index = allocator.index();
  for (size_t h = 0; h < heads.size(); ++h) {
    const std::string field = absl::StrCat("heads[", h, "]");
    RETURN_IF_ERROR(CheckIndexList(name, field + ".cubes", heads[h].cubes, kv.c(), "C",
        index.num_cubes(), "a CUBE of this chip"));
    RETURN_IF_ERROR(CheckIndexList(name, field + ".pes", heads[h].pes, kv.p(), "P",
        index.pes_per_cube(), "a PE index inside a CUBE"));
  }
  const uint64_t block = kv.block();
  const std::vector<uint64_t> local_shape =
      layout.slots == SlotLayout::kRowMajor
          ? std::vector<uint64_t>{block, d}
          : std::vector<uint64_t>{CeilDiv(block, layout.tile), d, layout.tile};
  RETURN_IF_ERROR(BufferBytes(name, shape, local_shape, dtype).status());
  PlacedTensor tensor;
  tensor.name_ = std::move(name);
  tensor.shape_ = std::move(shape);
  tensor.dtype_ = dtype;
  tensor.distribution_ = Distribution::kKvCache;
  tensor.axis_ = 1;
  tensor.block_ = block;
  tensor.kv_layout_ = layout;
  for (uint64_t h = 0; h < h_kv; ++h) {
    for (uint32_t r = 0; r < kv.ranks(); ++r) {
      const uint32_t cube = heads[h].cubes[kv.CubeInGroupOfRank(r)];
      const uint32_t pe = cube * index.pes_per_cube() + heads[h].pes[kv.PeOfRank(r)];
      const IndexRange positions{std::min(r * block, s), std::min((r + 1) * block, s)};
      Shard shard = MakeShard(pe, dtype, local_shape, {{h, h + 1}, positions, {0, d}}, r);
      RETURN_IF_ERROR(AllocateShard(allocator, tensor.name_, dtype, shard));
      tensor.shards_.push_back(std::move(shard));
    }
  }
  return tensor;
}

const std::vector<Shard>& ShardsOf(const PlacedTensor& tensor) { return tensor.shards(); }

uint64_t KvSlotOffset(KvLayout layout, uint64_t d, uint64_t slot, uint64_t dim) {
  if (layout.slots == SlotLayout::kRowMajor) return slot * d + dim;
  return ((slot / layout.tile) * d + dim) * layout.tile + slot % layout.tile;
}

absl::Status Scatter(kernels::MemoryStore& store, const PlacedTensor& tensor,
                     const NpyArray& global) {
  if (global.shape != tensor.shape()) {
    return TensorError(
        tensor.name(), "input",
        absl::StrCat("shape ", ShapeString(global.shape), " does not match the placed shape ",
                     ShapeString(tensor.shape())));
  }
  if (global.data.size() != Product(tensor.shape())) {
    return TensorError(
        tensor.name(), "input",
        absl::StrCat(global.data.size(), " values for shape ", ShapeString(global.shape)));
  }
  for (size_t i = 0; i < tensor.shards().size(); ++i) {
    const Shard& shard = tensor.shards()[i];
    std::vector<float> local(sim::ElementCount(shard.ref), 0.0f);
    ForEachElement(tensor, shard, [&](uint64_t l, uint64_t g) { local[l] = global.data[g]; });
    if (absl::Status status = store.Write(shard.ref, local); !status.ok()) {
      return Prefixed(status, tensor.name(), absl::StrCat("writing shard ", i, ": "));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Gather(const kernels::MemoryStore& store,
                                          const PlacedTensor& tensor) {
  std::vector<float> global(Product(tensor.shape()), 0.0f);
  const std::span<const Shard> shards = tensor.distribution() == Distribution::kReplicated
                                            ? std::span<const Shard>(tensor.shards()).first(1)
                                            : std::span<const Shard>(tensor.shards());
  for (size_t i = 0; i < shards.size(); ++i) {
    const Shard& shard = shards[i];
    absl::StatusOr<std::vector<float>> local = store.Read(shard.ref);
    if (!local.ok()) {
      return Prefixed(local.status(), tensor.name(), absl::StrCat("reading shard ", i, ": "));
    }
    AHBM_CHECK(local->size() == sim::ElementCount(shard.ref))
        << "MemoryStore::Read returned " << local->size() << " values";
    ForEachElement(tensor, shard, [&](uint64_t l, uint64_t g) { global[g] = (*local)[l]; });
  }
  return global;
}

}  // namespace ahbm::host
