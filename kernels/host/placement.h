// Placing a global tensor over PEs' HBM — the host side of the ADR's DPPolicy (DESIGN §4
// "Host/driver API"): allocate, scatter the inputs, gather the outputs.
//
// Contract — allocation (HbmAllocator):
// - One bump pointer per global PE over its HBM region [0, hbm_bytes / pes) — the address map
//   of MemoryStore and DmaModel. Allocate rounds the pointer up to `align` (a power of two,
//   default 256 B = the channel interleave), returns that address and moves past `bytes`.
//   Nothing is freed. Exhaustion is ResourceExhausted naming the PE ("pe 3
//   (sip0.cube0.pe3)"), the request, the alignment, the bytes used and the region size.
//
// Contract — placements (every buffer is dense row-major, strides empty, dtype BF16 or FP32):
// - Replicated: every listed PE holds the whole tensor (local shape = global shape).
// - RowWise over `axis` with ranks given as PEs in rank order: B = ceil(n / ranks) with
//   n = shape[axis]; rank r holds global indices [r*B, min((r+1)*B, n)) of that axis (the last
//   ranks may hold fewer, or none); every rank's buffer is the global shape with shape[axis]
//   = B, so local row j is global row r*B + j; rows past the rank's range are padding.
// - KvCache: global [H_kv, S, d]; head h lives on heads[h] (its C CUBEs, cube_in_group order,
//   and P PEs of each CUBE); positions follow topology::KvPlacement (B = ceil(max_context /
//   (C*P)) slots per rank, rotation by start_cube / start_pe): rank r sits on CUBE
//   heads[h].cubes[CubeInGroupOfRank(r)], PE heads[h].pes[PeOfRank(r)] of that CUBE, and holds
//   positions [r*B, min((r+1)*B, S)) — token t at rank OwnerOf(t).rank, slot OwnerOf(t).slot.
//   Requires S <= max_context. Slot layouts of a rank's buffer:
//     kRowMajor   local shape [B, d]: (slot, dim) at slot * d + dim.
//     kTileMajor  local shape [ceil(B / tile), d, tile] (DESIGN §4b's K layout, so a (d, tile)
//                 operand is contiguous): (slot, dim) at ((slot / tile) * d + dim) * tile
//                 + slot % tile; slots past B are padding.
// - Shards are listed in a fixed order — Replicated: PE list order; RowWise: rank order;
//   KvCache: head-major, then rank (shard h * C*P + r) — and allocated in that order, each
//   at the next `align`ed address of its PE. Shard::global gives, per global axis, the index
//   range the shard holds (empty for a rank with no rows).
// - Scatter writes every shard's whole buffer, padding as 0 (the store rounds to the dtype);
//   Gather reads the shards back into global row-major order (a replicated tensor from its
//   first copy only).
// - Errors start with "tensor '<name>': ". Bad arguments are InvalidArgument naming the field
//   ("tensor 'k': heads[1].cubes: 3 entries, the KV placement has C = 4"); a full region is the
//   allocator's ResourceExhausted ("tensor 'k': pe 3 (sip0.cube0.pe3): HBM region exhausted:
//   ..."); a store refusal keeps its code ("tensor 'k': writing shard 5: <store message>").
#ifndef AHBMSIM_KERNELS_HOST_PLACEMENT_H_
#define AHBMSIM_KERNELS_HOST_PLACEMENT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/host/npy.h"
#include "kernels/memory/memory_store.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/groups.h"
#include "topology/ids.h"
#include "topology/kv_placement.h"

namespace ahbm::host {

// "pe 3 (sip0.cube0.pe3)" — how PEs appear in messages (as in MemoryStore's).
std::string PeName(const topology::ChipIndex& index, uint32_t pe);

class HbmAllocator {
 public:
  static constexpr uint64_t kDefaultAlign = 256;

  // `chip` must have passed topology Validate().
  explicit HbmAllocator(const pb::Chip& chip);

  // InvalidArgument for a PE outside the chip or an `align` that is not a power of two.
  [[nodiscard]] absl::StatusOr<uint64_t> Allocate(uint32_t pe, uint64_t bytes,
                                                  uint64_t align = kDefaultAlign);

  // Bytes of the PE's region in use (the bump pointer, alignment gaps included).
  uint64_t used_bytes(uint32_t pe) const;
  uint64_t region_bytes() const { return region_bytes_; }
  const topology::ChipIndex& index() const { return index_; }
  const pb::HbmChannel& hbm_channel() const { return hbm_; }
  uint32_t channels_per_pe() const { return channels_per_pe_; }

 private:
  topology::ChipIndex index_;
  uint64_t region_bytes_;
  pb::HbmChannel hbm_;
  uint32_t channels_per_pe_;
  std::vector<uint64_t> next_;  // per global PE
};

enum class Distribution { kReplicated, kRowWise, kKvCache };

enum class SlotLayout { kRowMajor, kTileMajor };

struct KvLayout {
  SlotLayout slots = SlotLayout::kRowMajor;
  uint64_t tile = 0;  // slots per tile; kTileMajor only
};

// Where one KV head lives: the CUBE Group's CUBEs and the PEs of each CUBE it uses.
struct KvHeadGroup {
  std::vector<uint32_t> cubes;  // global CUBE index of cube_in_group 0..C-1
  std::vector<uint32_t> pes;    // PE-in-CUBE index of KvPlacement pe 0..P-1
};

// Group `group` of `groups` on SIP `sip`, with every PE of each CUBE (P = pes_per_cube).
KvHeadGroup HeadGroupOf(const topology::ChipIndex& index, const topology::CubeGroups& groups,
                        uint32_t sip, uint32_t group);

struct IndexRange {
  uint64_t begin = 0;
  uint64_t end = 0;  // exclusive
  uint64_t size() const { return end - begin; }
  friend bool operator==(const IndexRange&, const IndexRange&) = default;
};

struct Shard {
  pb::TensorRef ref;               // HBM, pe, addr, dtype, local shape (the whole buffer)
  std::vector<IndexRange> global;  // per global axis, the indices this shard holds
  uint32_t rank = 0;               // index in the PE list / rank (KvCache: in the head's group)
};

class PlacedTensor {
 public:
  const std::string& name() const { return name_; }
  const std::vector<uint64_t>& shape() const { return shape_; }
  pb::DType dtype() const { return dtype_; }
  Distribution distribution() const { return distribution_; }
  uint32_t axis() const { return axis_; }    // RowWise: the split axis; KvCache: 1
  uint64_t block() const { return block_; }  // RowWise / KvCache: B; Replicated: 0
  KvLayout kv_layout() const { return kv_layout_; }
  const std::vector<Shard>& shards() const { return shards_; }

 private:
  friend absl::StatusOr<PlacedTensor> PlaceReplicated(HbmAllocator&, std::string,
                                                      std::vector<uint64_t>, pb::DType,
                                                      std::span<const uint32_t>);
  friend absl::StatusOr<PlacedTensor> PlaceRowWise(HbmAllocator&, std::string,
                                                   std::vector<uint64_t>, pb::DType, uint32_t,
                                                   std::span<const uint32_t>);
  friend absl::StatusOr<PlacedTensor> PlaceKvCache(HbmAllocator&, std::string,
                                                   std::vector<uint64_t>, pb::DType,
                                                   const topology::KvPlacement&,
                                                   std::span<const KvHeadGroup>, KvLayout);
  PlacedTensor() = default;

  std::string name_;
  std::vector<uint64_t> shape_;
  pb::DType dtype_ = pb::DTYPE_UNSPECIFIED;
  Distribution distribution_ = Distribution::kReplicated;
  uint32_t axis_ = 0;
  uint64_t block_ = 0;
  KvLayout kv_layout_;
  std::vector<Shard> shards_;
};

[[nodiscard]] absl::StatusOr<PlacedTensor> PlaceReplicated(HbmAllocator& allocator,
                                                           std::string name,
                                                           std::vector<uint64_t> shape,
                                                           pb::DType dtype,
                                                           std::span<const uint32_t> pes);

// `rank_pes[r]` is the global PE of rank r.
[[nodiscard]] absl::StatusOr<PlacedTensor> PlaceRowWise(HbmAllocator& allocator, std::string name,
                                                        std::vector<uint64_t> shape,
                                                        pb::DType dtype, uint32_t axis,
                                                        std::span<const uint32_t> rank_pes);

// `shape` = [H_kv, S, d]; `heads[h]` places head h (C = kv.c() CUBEs, P = kv.p() PEs).
[[nodiscard]] absl::StatusOr<PlacedTensor> PlaceKvCache(
    HbmAllocator& allocator, std::string name, std::vector<uint64_t> shape, pb::DType dtype,
    const topology::KvPlacement& kv, std::span<const KvHeadGroup> heads, KvLayout layout = {});

// kv_bank_layout INTERLEAVED (DESIGN §2, HBM banks): pads each PE that holds a shard of `k` so that
// its next allocation starts half a bank cycle after its first K shard (in the PE's address space:
// the channels' bank period, burst_bytes x columns x stack ids x bank groups x banks per group per
// channel, times the PE's channels). Place V right after. InvalidArgument unless the chip's
// channels are BANK.
[[nodiscard]] absl::Status PadForBankInterleave(HbmAllocator& allocator, const PlacedTensor& k);

// Every shard, in the order of the contract.
const std::vector<Shard>& ShardsOf(const PlacedTensor& tensor);

// Element index of (slot, dim) inside a KV rank's buffer of [d]-wide slots (see the contract).
uint64_t KvSlotOffset(KvLayout layout, uint64_t d, uint64_t slot, uint64_t dim);

// `global` must have the placed shape (InvalidArgument otherwise); a store refusal keeps its code.
[[nodiscard]] absl::Status Scatter(kernels::MemoryStore& store, const PlacedTensor& tensor,
                                   const NpyArray& global);

// The tensor in global row-major order.
[[nodiscard]] absl::StatusOr<std::vector<float>> Gather(const kernels::MemoryStore& store,
                                                        const PlacedTensor& tensor);

}  // namespace ahbm::host

#endif  // AHBMSIM_KERNELS_HOST_PLACEMENT_H_
