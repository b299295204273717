#include "actors/models/dma_model.h"

#include "actors/tensor_ref.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "actors/models/hbm_timing_model.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/status_macros.h"

namespace ahbm::sim {
namespace {

using u128 = unsigned __int128;

ClockDomain PeClock(const pb::Chip& chip) {
  absl::StatusOr<ClockDomain> clock = ClockDomain::FromMHz(chip.sip().cube().pe().clock_mhz());
  AHBM_CHECK(clock.ok()) << "pe.clock_mhz: " << clock.status()
                         << " (the topology was not validated)";
  return *clock;
}

// "pe 9 (sip0.cube1.pe1)".
std::string PeName(const topology::ChipIndex& index, uint32_t global_pe) {
  const topology::PeId id = index.PeOf(global_pe);
  return absl::StrCat("pe ", global_pe, " (sip", id.sip, ".cube", id.cube, ".pe", id.pe, ")");
}

template <typename... Args>
absl::Status Invalid(const topology::ChipIndex& index, uint32_t issuer, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat("DMA of ", PeName(index, issuer), ": ", args...));
}

// One dim of a tensor, in elements.
struct Dim {
  uint64_t size;
  uint64_t stride;
};

// Room for this many dims / channels per PE before the planner's buffers use the heap.
constexpr size_t kInlineDims = 4;
constexpr size_t kInlineChannels = 16;
using ChannelCounts = absl::InlinedVector<uint64_t, kInlineChannels>;

// Charges runs of one tensor, in traversal order, to the chunks they touch (the contract's
// chunks and merge rule), counting chunks per channel of the owner.
class RunCharger {
 public:
  // `per_channel` is indexed by channel within the owner's channels.
  // With `cursors` (one per channel), each chunk's channel-local byte address is written at its
  // channel's cursor, which moves on (into room the caller made: the counts of a walk without).
  RunCharger(uint64_t chunk_bytes, uint64_t interleave_bytes, uint64_t run_bytes,
             ChannelCounts& per_channel, std::span<uint64_t*> cursors = {})
      : chunk_bytes_(chunk_bytes),
        chunks_per_block_(interleave_bytes / chunk_bytes),
        run_bytes_(run_bytes),
        stripe_bytes_(interleave_bytes * per_channel.size()),
        per_channel_(per_channel),
        cursors_(cursors) {}

  // The run starting at local address `addr`, after the runs charged so far.
  void Run(uint64_t addr) {
    uint64_t first = addr / chunk_bytes_;
    const uint64_t last = LastChunk(addr);
    if (has_previous_ && previous_last_chunk_ == first) ++first;
    if (first <= last) AddChunks(first, last);
    has_previous_ = true;
    previous_last_chunk_ = last;
  }

  // `count` (> 0) runs at addr, addr + step, addr + 2 step, ...: the same charge as `count`
  // calls of Run. The address map repeats every stripe (interleave_bytes * channels), so run
  // i > 0, charged by its own and run i - 1's addresses, charges what run i + period does once
  // period * step is whole stripes: one period is walked and repeated, not every run.
  void Row(uint64_t addr, uint64_t count, uint64_t step) {
    Run(addr);
    const uint64_t period = stripe_bytes_ / std::gcd(step % stripe_bytes_, stripe_bytes_);
    const uint64_t periods = (count - 1) / period;
    uint64_t i = 1;
    if (periods >= 2 && cursors_.empty()) {
      const ChannelCounts before = per_channel_;
      for (; i <= period; ++i) Run(addr + i * step);
      for (size_t c = 0; c < per_channel_.size(); ++c) {
        per_channel_[c] += (per_channel_[c] - before[c]) * (periods - 1);
      }
      i = periods * period + 1;
      previous_last_chunk_ = LastChunk(addr + (i - 1) * step);
    }
    for (; i < count; ++i) Run(addr + i * step);
  }

 private:
  uint64_t LastChunk(uint64_t addr) const { return (addr + run_bytes_ - 1) / chunk_bytes_; }

  // Adds chunks [first, last] of the region (chunk index from local address 0).
  void AddChunks(uint64_t first, uint64_t last) {
    const uint64_t per_block = chunks_per_block_;
    const uint64_t n = per_channel_.size();
    if (!cursors_.empty()) {
      // Chunk c lies in block c / per_block, on channel block % n, at channel-local chunk
      // (block / n) * per_block + c % per_block: stepped, not divided, from chunk to chunk.
      uint64_t block = first / per_block;
      uint64_t offset = first % per_block;
      uint64_t channel = block % n;
      uint64_t local = (block / n) * per_block;  // the channel-local chunk of the block's start
      for (uint64_t c = first; c <= last; ++c) {
        *cursors_[channel]++ = (local + offset) * chunk_bytes_;
        if (++offset == per_block) {
          offset = 0;
          if (++channel == n) {
            channel = 0;
            local += per_block;
          }
        }
      }
    }
    const uint64_t b0 = first / per_block;
    const uint64_t b1 = last / per_block;
    if (b0 == b1) {
      per_channel_[b0 % n] += last - first + 1;
      return;
    }
    per_channel_[b0 % n] += per_block - first % per_block;
    per_channel_[b1 % n] += last % per_block + 1;
    const uint64_t middle = b1 - b0 - 1;
    if (const uint64_t rounds = middle / n; rounds > 0) {
      for (uint64_t& count : per_channel_) count += rounds * per_block;
    }
    for (uint64_t i = 0; i < middle % n; ++i) per_channel_[(b0 + 1 + i) % n] += per_block;
  }

  const uint64_t chunk_bytes_;
  const uint64_t chunks_per_block_;
  const uint64_t run_bytes_;
  const uint64_t stripe_bytes_;
  ChannelCounts& per_channel_;
  std::span<uint64_t*> cursors_;
  bool has_previous_ = false;
  uint64_t previous_last_chunk_ = 0;
};

u128 Elements(const pb::TensorRef& ref) {
  u128 n = 1;
  for (uint64_t d : ref.shape()) n *= d;
  return n;
}

const char* SpaceName(pb::MemorySpace space) {
  switch (space) {
    case pb::HBM:
      return "HBM";
    case pb::TCM:
      return "TCM";
    default:
      return "unspecified";
  }
}

// "cmd 7 (HBM -> TCM)": the context of a DMA command's error messages.
std::string CmdText(const pb::DmaCmd& cmd) {
  return absl::StrCat("cmd ", cmd.cmd_id(), " (", SpaceName(cmd.src().space()), " -> ",
                      SpaceName(cmd.dst().space()), ")");
}

// Fills `dims` with a tensor's dims in elements, row-major, dense strides filled in (`strides`
// empty: dense); the problem when one is a broadcast (stride 0) or the tensor reaches past
// `region_bytes`, else "". Anything that overflows 64 bits lies outside the region, so the
// end saturates at 2^64.
std::string DimsInRegion(std::span<const uint64_t> shape, std::span<const uint64_t> strides,
                         uint64_t base, uint64_t elem, uint64_t region_bytes,
                         absl::InlinedVector<Dim, kInlineDims>& dims) {
  const u128 kBeyond = u128{1} << 64;
  dims.resize(shape.size());
  u128 dense = 1;
  u128 last_element = 0;
  for (size_t i = dims.size(); i-- > 0;) {
    dims[i].size = shape[i];
    dims[i].stride =
        strides.empty() ? static_cast<uint64_t>(std::min(dense, kBeyond - 1)) : strides[i];
    if (dims[i].stride == 0 && dims[i].size > 1) {
      return absl::StrCat(": dim ", i, " of shape ", ShapeText(shape),
                          " has stride 0 (a broadcast), which is not a DMA transfer");
    }
    dense = std::min(dense * dims[i].size, kBeyond);
    last_element = std::min(last_element + u128{dims[i].size - 1} * dims[i].stride, kBeyond);
  }
  const u128 extent = std::min((last_element + 1) * elem, kBeyond);
  const u128 end = std::min(u128{base} + extent, kBeyond);
  if (end <= region_bytes) return std::string();
  const std::string end_text =
      end == kBeyond ? std::string("beyond 2^64") : Hex(static_cast<uint64_t>(end));
  return absl::StrCat(": the tensor (shape ", ShapeText(shape), ", strides ",
                      strides.empty() ? std::string("dense") : ShapeText(strides), ", element ",
                      elem, " B) spans [", Hex(base), ", ", end_text,
                      "), outside the PE's HBM region [0x0, ", Hex(region_bytes), ")");
}

// A walk's result: the runs, their bytes, the chunks each channel of the owner serves.
struct Walked {
  uint64_t runs = 0;
  uint64_t run_bytes = 0;
  ChannelCounts per_channel;
};

// Walks a tensor's runs (`dims` from DimsInRegion) in row-major order, charging the chunks each
// touches. With `addrs` (BANK channels), walks again writing each chunk's address into lists
// sized by the counts, one per channel.
Walked WalkChunks(absl::InlinedVector<Dim, kInlineDims> dims, uint64_t base, uint64_t elem,
                  uint64_t chunk, uint64_t interleave_bytes, uint32_t channels,
                  std::vector<std::vector<uint64_t>>* addrs) {
  // Runs: drop size-1 dims, merge the innermost contiguous dims.
  dims.erase(std::remove_if(dims.begin(), dims.end(), [](const Dim& d) { return d.size == 1; }),
             dims.end());
  uint64_t run_elements = 1;
  while (!dims.empty() && dims.back().stride == run_elements) {
    run_elements *= dims.back().size;
    dims.pop_back();
  }
  Walked walked;
  walked.run_bytes = run_elements * elem;

  // Row by row along the innermost outer dim (a dense tensor is one row of one run).
  const Dim row = dims.empty() ? Dim{1, 0} : dims.back();
  if (!dims.empty()) dims.pop_back();
  const uint64_t row_step = row.stride * elem;
  const auto walk = [&](RunCharger& charger) {
    absl::InlinedVector<uint64_t, kInlineDims> idx(dims.size(), 0);
    uint64_t addr = base;
    walked.runs = 0;
    while (true) {
      charger.Row(addr, row.size, row_step);
      walked.runs += row.size;

      // Advance the row-major index over the dims outside the row; stop when every one wrapped.
      bool advanced = false;
      for (size_t d = dims.size(); d-- > 0;) {
        const uint64_t step = dims[d].stride * elem;
        if (++idx[d] < dims[d].size) {
          addr += step;
          advanced = true;
          break;
        }
        addr -= step * (dims[d].size - 1);
        idx[d] = 0;
      }
      if (!advanced) break;
    }
  };
  walked.per_channel.assign(channels, 0);
  RunCharger counter(chunk, interleave_bytes, walked.run_bytes, walked.per_channel);
  walk(counter);
  if (addrs == nullptr) return walked;
  addrs->resize(channels);
  absl::InlinedVector<uint64_t*, kInlineChannels> cursors(channels);
  for (size_t i = 0; i < channels; ++i) {
    (*addrs)[i].resize(walked.per_channel[i]);
    cursors[i] = (*addrs)[i].data();
  }
  ChannelCounts again(channels, 0);
  RunCharger lister(chunk, interleave_bytes, walked.run_bytes, again,
                    std::span<uint64_t*>(cursors));
  walk(lister);
  for (size_t i = 0; i < channels; ++i) {
    AHBM_CHECK(again[i] == walked.per_channel[i] &&
               cursors[i] == (*addrs)[i].data() + (*addrs)[i].size())
        << "DMA plan: the chunk list of channel " << i << " disagrees with its count";
  }
  return walked;
}

}  // namespace

DmaModel::DmaModel(const pb::Chip& chip, uint32_t pe)
    : index_(chip),
      pe_(pe),
      clock_(PeClock(chip)),
      region_bytes_(chip.sip().cube().hbm_bytes() / chip.sip().cube().pes()),
      chunk_bytes_(chip.sip().cube().pe().dma().chunk_bytes()),
      interleave_bytes_(chip.sip().cube().hbm_channel().interleave_bytes()),
      remote_extra_(chip.sip().cube().pe().dma().remote_channel_extra_cycles()),
      chunk_addrs_(HbmModelNeedsAddresses(chip.sip().cube().hbm_channel())) {
  AHBM_CHECK(pe_ < index_.num_pes()) << "pe " << pe_ << " of " << index_.num_pes();
  AHBM_CHECK(chunk_bytes_.value() > 0 && interleave_bytes_ % chunk_bytes_.value() == 0)
      << "dma.chunk_bytes " << chunk_bytes_ << " must divide interleave_bytes " << interleave_bytes_
      << " (the topology was not validated)";
  AHBM_CHECK(region_bytes_.value() % (interleave_bytes_ * index_.channels_per_pe()) == 0)
      << "a PE's region " << region_bytes_ << " is not whole stripes (not validated)";
}

SimTime DmaModel::ExtraLatency(const DmaPlan& plan) const {
  return plan.remote ? clock_.ToTime(remote_extra_) : SimTime(0);
}

uint32_t DmaModel::ChannelOf(uint32_t owner_pe, Addr addr) const {
  AHBM_CHECK(addr.value() < region_bytes_.value()) << addr << " outside a PE's region";
  const uint32_t first = index_.FirstChannelOfPe(index_.PeOf(owner_pe).pe);
  return first +
         static_cast<uint32_t>((addr.value() / interleave_bytes_) % index_.channels_per_pe());
}

absl::StatusOr<DmaPlan> DmaModel::PlanHbm(const HbmTensor& tensor, DmaKind kind) const {
  DmaPlan plan;
  RETURN_IF_ERROR(PlanHbmWithContext(TensorView{tensor.owner_pe, tensor.base.value(),
      tensor.element_bytes.value(), tensor.shape,
      tensor.strides},
      kind, /*cmd=*/nullptr, plan));
  return plan;
}

absl::Status DmaModel::PlanHbmWithContext(const TensorView& tensor, DmaKind kind,
                                          const pb::DmaCmd* cmd, DmaPlan& plan) const {
  AHBM_CHECK(kind != DmaKind::kTcmCopy) << "PlanHbm called for a TCM copy";
  const uint64_t base = tensor.base;
  const uint64_t elem = tensor.element_bytes;
  // Error paths only: no string work for a DMA that plans cleanly.
  const auto where = [&] {
    return absl::StrCat(cmd != nullptr ? CmdText(*cmd) : std::string(), cmd != nullptr ? ": " : "",
                        "HBM address ", Hex(base), " of pe ", tensor.owner_pe);
  };
  if (!tensor.strides.empty() && tensor.strides.size() != tensor.shape.size()) {
    return Invalid(index_, pe_, where(), ": strides ", ShapeText(tensor.strides), " has ",
                   tensor.strides.size(), " entries but shape ", ShapeText(tensor.shape), " has ",
                   tensor.shape.size());
  }
  if (elem == 0 || std::find(tensor.shape.begin(), tensor.shape.end(), 0) != tensor.shape.end()) {
    return Invalid(index_, pe_, where(), ": zero-sized request (shape ", ShapeText(tensor.shape),
                   ", element ", elem, " B)");
  }
  if (tensor.owner_pe >= index_.num_pes()) {
    return Invalid(index_, pe_, where(), ": no such PE (the chip has ", index_.num_pes(), " PEs)");
  }
  const topology::PeId issuer = index_.PeOf(pe_);
  const topology::PeId owner = index_.PeOf(tensor.owner_pe);
  if (owner.cube_id() != issuer.cube_id()) {
    return Invalid(index_, pe_, where(), " belongs to ", PeName(index_, tensor.owner_pe),
                   " in another CUBE; a DMA reaches only its own CUBE's HBM channels, so the "
                   "data must travel over the NOC");
  }

  absl::InlinedVector<Dim, kInlineDims> dims;
  if (std::string problem = DimsInRegion(tensor.shape, tensor.strides, base, elem,
                                         region_bytes_.value(), dims);
      !problem.empty()) {
    return Invalid(index_, pe_, where(), problem);
  }

  // FIFO channels: the walk's result may be known (walk_memo_, in the header).
  const uint64_t chunk = chunk_bytes_.value();
  const uint64_t stripe = interleave_bytes_ * index_.channels_per_pe();
  const bool memoize = !chunk_addrs_ && tensor.shape.size() <= kMemoDims;
  WalkKey key;
  if (memoize) {
    key.words[0] = base % stripe;
    key.words[1] = elem;
    key.words[2] = tensor.shape.size() | (tensor.strides.empty() ? uint64_t{1} << 32 : 0);
    for (size_t i = 0; i < tensor.shape.size(); ++i) {
      key.words[3 + i] = tensor.shape[i];
      key.words[3 + kMemoDims + i] = tensor.strides.empty() ? 0 : tensor.strides[i];
    }
    if (const auto it = walk_memo_.find(key); it != walk_memo_.end()) {
      FillPlan(kind, tensor.owner_pe, owner, issuer, it->second.runs, it->second.run_bytes,
               it->second.per_channel, {}, plan);
      return absl::OkStatus();
    }
  }

  std::vector<std::vector<uint64_t>> addrs;
  const Walked walked =
      WalkChunks(std::move(dims), base, elem, chunk, interleave_bytes_, index_.channels_per_pe(),
                 chunk_addrs_ ? &addrs : nullptr);
  if (memoize) {
    if (walk_memo_.size() >= kMemoEntries) walk_memo_.clear();
    walk_memo_.emplace(key, WalkResult{walked.runs, walked.run_bytes, walked.per_channel});
  }
  FillPlan(kind, tensor.owner_pe, owner, issuer, walked.runs, walked.run_bytes,
           walked.per_channel, std::move(addrs), plan);
  return absl::OkStatus();
}

void DmaModel::FillPlan(DmaKind kind, uint32_t owner_pe, const topology::PeId& owner,
                        const topology::PeId& issuer, uint64_t runs, uint64_t run_bytes,
                        std::span<const uint64_t> per_channel,
                        std::vector<std::vector<uint64_t>> addrs, DmaPlan& plan) const {
  const uint64_t chunk = chunk_bytes_.value();
  plan.kind = kind;
  plan.issuer_pe = pe_;
  plan.owner_pe = owner_pe;
  plan.cube = issuer.cube_id();
  plan.remote = owner_pe != pe_;
  plan.runs = runs;
  plan.run_bytes = Bytes(run_bytes);
  plan.useful_bytes = Bytes(run_bytes) * runs;
  plan.charged_bytes = Bytes(0);
  plan.channels.clear();
  const uint32_t first_channel = index_.FirstChannelOfPe(owner.pe);
  for (uint32_t i = 0; i < per_channel.size(); ++i) {
    if (per_channel[i] == 0) continue;
    DmaChannelShare& share = plan.channels.emplace_back();
    share.channel = first_channel + i;
    share.chunks = per_channel[i];
    share.bytes = Bytes(per_channel[i] * chunk);
    if (chunk_addrs_) share.chunk_addrs = std::move(addrs[i]);
    plan.charged_bytes += share.bytes;
  }
}

absl::StatusOr<DmaPlan> DmaModel::PlanTcmCopy(Bytes bytes) const {
  DmaPlan plan;
  RETURN_IF_ERROR(PlanTcmCopyInto(bytes, plan));
  return plan;
}

absl::Status DmaModel::PlanTcmCopyInto(Bytes bytes, DmaPlan& plan) const {
  if (bytes.value() == 0) return Invalid(index_, pe_, "zero-sized TCM copy");
  plan.kind = DmaKind::kTcmCopy;
  plan.issuer_pe = pe_;
  plan.owner_pe = pe_;
  plan.cube = index_.PeOf(pe_).cube_id();
  plan.remote = false;
  plan.runs = 1;
  plan.run_bytes = bytes;
  plan.useful_bytes = bytes;
  plan.charged_bytes = bytes;
  plan.channels.clear();
  return absl::OkStatus();
}

absl::StatusOr<DmaPlan> DmaModel::Plan(const pb::DmaCmd& cmd) const {
  DmaPlan plan;
  RETURN_IF_ERROR(PlanInto(cmd, plan));
  return plan;
}

absl::Status DmaModel::PlanInto(const pb::DmaCmd& cmd, DmaPlan& plan) const {
  const pb::TensorRef& src = cmd.src();
  const pb::TensorRef& dst = cmd.dst();
  const auto what = [&cmd] { return CmdText(cmd); };  // error paths only
  const uint64_t elem = DTypeBytes(src.dtype());
  if (elem == 0 || src.dtype() != dst.dtype()) {
    return Invalid(index_, pe_, what(), ": src and dst must have one dtype, BF16 or FP32 (got ",
                   pb::DType_Name(src.dtype()), " and ", pb::DType_Name(dst.dtype()), ")");
  }
  const u128 elements = Elements(src);
  if (elements != Elements(dst)) {
    return Invalid(index_, pe_, what(), ": src shape ",
                   ShapeText({src.shape().begin(), src.shape().end()}), " and dst shape ",
                   ShapeText({dst.shape().begin(), dst.shape().end()}),
                   " hold different numbers of elements");
  }
  for (const pb::TensorRef* tcm : {&src, &dst}) {
    if (tcm->space() == pb::TCM && tcm->pe() != pe_) {
      return Invalid(index_, pe_, what(), ": TCM of pe ", tcm->pe(),
                     " is not this PE's; a DMA reaches only its own PE's TCM");
    }
  }
  const auto hbm_tensor = [elem](const pb::TensorRef& ref) {
    return TensorView{ref.pe(), ref.addr(), elem, ShapeView(ref), StridesView(ref)};
  };
  if (src.space() == pb::HBM && dst.space() == pb::TCM) {
    return PlanHbmWithContext(hbm_tensor(src), DmaKind::kHbmRead, &cmd, plan);
  }
  if (src.space() == pb::TCM && dst.space() == pb::HBM) {
    return PlanHbmWithContext(hbm_tensor(dst), DmaKind::kHbmWrite, &cmd, plan);
  }
  if (src.space() == pb::TCM && dst.space() == pb::TCM) {
    if (elements == 0) return Invalid(index_, pe_, what(), ": zero-sized TCM copy");
    if (elements * elem > u128{std::numeric_limits<uint64_t>::max()}) {
      return Invalid(index_, pe_, what(), ": TCM copy larger than 2^64 bytes");
    }
    return PlanTcmCopyInto(Bytes(static_cast<uint64_t>(elements * elem)), plan);
  }
  return Invalid(index_, pe_, what(),
                 ": only HBM -> TCM, TCM -> HBM and TCM -> TCM copies are modelled");
}

DmaTiming DmaModel::Execute(const DmaPlan& plan, SimTime issue,
                            std::span<HbmChannelModel> cube_channels) {
  AHBM_CHECK(plan.issuer_pe == pe_) << "plan of pe " << plan.issuer_pe << " executed by pe " << pe_;
  ++stats_.commands;
  DmaTiming timing;
  timing.issue = issue;
  if (plan.kind == DmaKind::kTcmCopy) {
    const Cycles cycles((plan.charged_bytes.value() + kTcmCopyBytesPerCycle - 1) /
                        kTcmCopyBytesPerCycle);
    timing.start = clock_.NextEdge(std::max(issue, tcm_free_at_));
    timing.done = timing.start + clock_.ToTime(cycles);
    tcm_free_at_ = timing.done;
    stats_.tcm_copy_bytes += plan.charged_bytes;
    stats_.tcm_busy_ps += clock_.ToTime(cycles);
    return timing;
  }
  AHBM_CHECK(cube_channels.size() == index_.channels_per_cube())
      << cube_channels.size() << " channel models for a CUBE of " << index_.channels_per_cube();
  AHBM_CHECK(!plan.channels.empty()) << "HBM plan without channels";
  const SimTime extra = ExtraLatency(plan);
  const HbmOp op = plan.kind == DmaKind::kHbmRead ? HbmOp::kRead : HbmOp::kWrite;
  timing.start = SimTime::Max();
  timing.done = issue;
  timing.channels.reserve(plan.channels.size());
  for (const DmaChannelShare& share : plan.channels) {
    const HbmGrant grant = cube_channels[share.channel].Access(issue, share.bytes, op);
    const DmaChannelGrant& g =
        timing.channels.emplace_back(DmaChannelGrant{share.channel, grant, grant.done + extra});
    timing.start = std::min(timing.start, g.grant.start);
    timing.done = std::max(timing.done, g.done);
  }
  stats_.hbm_useful_bytes += plan.useful_bytes;
  stats_.hbm_charged_bytes += plan.charged_bytes;
  return timing;
}

}  // namespace ahbm::sim
