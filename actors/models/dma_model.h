// The DMA engine of one PE (DESIGN §2): the HBM address map, the chunking of a strided tensor
// over HBM pseudo-channels, and the timing of one DMA on the channel models; TCM->TCM copies.
// A plain class (STYLE 4): the PE's DMA actor owns one and calls it once per command; no CAF.
//
// Config: pb::Chip — sip.cube.{pes, hbm_bytes, hbm_channel.interleave_bytes},
// sip.cube.pe.{clock_mhz, hbm_channels, dma.chunk_bytes, dma.remote_channel_extra_cycles}. The
// chip must have passed topology Validate(); in particular chunk_bytes divides interleave_bytes,
// so one chunk lies on exactly one channel.
//
// Ports (of the actor that wraps it): in `DmaCmd` -> Plan(cmd), then Execute(plan, now, the
// CUBE's channel models), and a `Completion` at timing.done. The DMA actor serves each
// DmaChannelShare on the CUBE's shared channel servers instead (its bytes = the share's charged
// bytes) and finishes at max over the grants of (done + ExtraLatency(plan)): the same numbers
// as Execute.
//
// Contract — address map:
// - A CUBE's HBM is split evenly over its PEs. PE p (index inside its CUBE) owns the region of
//   region_bytes = hbm_bytes / pes with local addresses [0, region_bytes), served by the CUBE's
//   channels [p * channels_per_pe, (p + 1) * channels_per_pe) (topology::ChipIndex).
// - Inside a region consecutive interleave_bytes blocks go round-robin over the owner's channels:
//     channel(p, addr) = p * channels_per_pe + (addr / interleave_bytes) % channels_per_pe.
// - An HBM tensor is named by (owner PE, local address), as pb::TensorRef does.
//
// Contract — planning (PlanHbm):
// - Runs: the tensor's dims are taken row-major (strides in elements; none = dense). Size-1
//   dims are dropped; then the innermost dims are merged while contiguous (a dim's stride equals
//   the element count merged so far). The merged block is a "run", the unit of transfer; the
//   remaining outer dims enumerate the runs in row-major order. A dense tensor is one run.
// - Chunks: chunk_bytes blocks aligned to the region's address 0. A run costs every chunk it
//   touches, in full: a run shorter than a chunk, or one straddling a chunk boundary, pays for
//   every chunk it touches ("strided K tiles pay for it"). Merge rule: when a run's first
//   chunk is the previous run's last chunk (in traversal order), that chunk is not charged
//   again — the engine merges back-to-back accesses to one chunk; any other repeat is charged
//   again. Chunk waste is charged_bytes - useful_bytes.
// - The plan lists, for each channel touched, in ascending CUBE-local channel order, the chunks
//   and the bytes (chunks * chunk_bytes) charged on it. useful_bytes = runs * run_bytes;
//   charged_bytes = the sum over channels.
// - remote: the owner is another PE of the issuer's CUBE. Allowed, for ExtraLatency().
// - Errors are InvalidArgument, naming the issuing PE, the address and the reason: a zero-sized
//   request (a zero dim or element size), strides not matching shape, a stride 0 on a dim of
//   size > 1 (a broadcast is not a transfer), an owner PE outside the chip, an owner in another
//   CUBE (the data must travel over the NOC), a byte range not inside the owner's region.
//
// Contract — timing (Execute):
// - HBM: one request per channel of the plan, all arriving at `issue`, presented in ascending
//   channel order: grant(c) = channels[c].Access(issue, charged bytes on c, read/write). So a DMA
//   costs at most one request per channel however many chunks it has. The DMA is done on c at
//   grant(c).done + ExtraLatency(plan); done = max over channels, start = min of grant starts.
// - ExtraLatency(plan) = remote_channel_extra_cycles PE cycles for a remote plan, else 0: the
//   logic-die hop adds latency, not channel occupancy.
// - The DMA engine adds no occupancy of its own to HBM transfers; contention lives in the
//   channels, FIFO in arrival order (so the oldest command goes first on every channel). The
//   TCM side of an HBM transfer is assumed never to be the bottleneck and is not timed.
// - TCM->TCM copies touch no HBM. ASSUMPTION: the PE's TCM copy path moves
//   kTcmCopyBytesPerCycle = 256 B per PE cycle (the PE's aggregate HBM rate), one copy at a time
//   in call order: start = first PE clock edge >= max(issue, previous copy's done),
//   done = start + ceil(N / 256) cycles. Strided TCM copies run at the same rate.
//
// Stats (DmaStats): commands — commands executed; hbm_useful_bytes / hbm_charged_bytes — bytes
// the tensors hold vs bytes charged to channels (the difference is chunk waste); tcm_copy_bytes —
// bytes of TCM->TCM copies; tcm_busy_ps — time the TCM copy path was busy.
#ifndef AHBMSIM_ACTORS_MODELS_DMA_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_DMA_MODEL_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "actors/models/hbm_channel_model.h"
#include "actors/time.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"

namespace ahbm::sim {

// The TCM->TCM copy rate, in bytes per PE cycle (an assumption; see the contract).
inline constexpr uint64_t kTcmCopyBytesPerCycle = 256;

enum class DmaKind : uint8_t {
  kHbmRead,   // HBM -> TCM
  kHbmWrite,  // TCM -> HBM
  kTcmCopy,   // TCM -> TCM
};

// A strided tensor in one PE's HBM region.
struct HbmTensor {
  uint32_t owner_pe = 0;          // global PE index whose region holds it
  Addr base;                      // local address inside that region
  Bytes element_bytes;            // 2 for bf16, 4 for fp32
  std::vector<uint64_t> shape;    // elements per dim, outermost first; empty = one element
  std::vector<uint64_t> strides;  // elements, row-major; empty = dense
};

// What one channel is charged for a DMA.
struct DmaChannelShare {
  uint32_t channel = 0;  // CUBE-local channel index (topology::ChipIndex::HbmChannelUnit)
  uint64_t chunks = 0;
  Bytes bytes;  // chunks * chunk_bytes
  // Channels whose timing model needs addresses (BANK; hbm_timing_model.h): each chunk's
  // channel-local byte address, in transfer order (the bank model maps them to banks and
  // rows). Empty for FIFO channels.
  std::vector<uint64_t> chunk_addrs;

  friend bool operator==(const DmaChannelShare&, const DmaChannelShare&) = default;
};

struct DmaPlan {
  DmaKind kind = DmaKind::kHbmRead;
  uint32_t issuer_pe = 0;  // global PE index of the DMA engine
  uint32_t owner_pe = 0;   // global PE index whose HBM region is accessed (issuer for kTcmCopy)
  topology::CubeId cube;   // the CUBE whose channels serve it (the issuer's)
  bool remote = false;     // owner != issuer: pays ExtraLatency()
  uint64_t runs = 0;       // contiguous runs transferred
  Bytes run_bytes;         // bytes per run
  Bytes useful_bytes;      // runs * run_bytes
  Bytes charged_bytes;     // sum of channels[].bytes; == useful_bytes for kTcmCopy
  std::vector<DmaChannelShare> channels;  // ascending channel, none empty; empty for kTcmCopy

  friend bool operator==(const DmaPlan&, const DmaPlan&) = default;
};

struct DmaChannelGrant {
  uint32_t channel = 0;  // CUBE-local channel index
  HbmGrant grant;        // the channel's grant
  SimTime done;          // grant.done + ExtraLatency(plan)
};

struct DmaTiming {
  SimTime issue;
  SimTime start;                          // earliest channel grant start (TCM copy: its start)
  SimTime done;                           // latest DmaChannelGrant::done (TCM copy: its done)
  std::vector<DmaChannelGrant> channels;  // in plan order
};

struct DmaStats {
  uint64_t commands = 0;
  Bytes hbm_useful_bytes;
  Bytes hbm_charged_bytes;
  Bytes tcm_copy_bytes;
  SimTime tcm_busy_ps;
};

class DmaModel {
 public:
  // The DMA engine of global PE `pe` of a validated `chip`.
  DmaModel(const pb::Chip& chip, uint32_t pe);

  // Plans a read (HBM -> TCM) or write (TCM -> HBM) of `tensor`. `kind` must not be kTcmCopy.
  [[nodiscard]] absl::StatusOr<DmaPlan> PlanHbm(const HbmTensor& tensor, DmaKind kind) const;
  // Plans a TCM -> TCM copy of `bytes` (> 0).
  [[nodiscard]] absl::StatusOr<DmaPlan> PlanTcmCopy(Bytes bytes) const;
  // Plans a DmaCmd: HBM src + TCM dst is a read of src, TCM src + HBM dst a write of dst,
  // TCM + TCM a copy. Both tensors must hold the same number of elements of one dtype (BF16 or
  // FP32), and TCM tensors must be this PE's. HBM -> HBM is InvalidArgument (not modelled).
  [[nodiscard]] absl::StatusOr<DmaPlan> Plan(const pb::DmaCmd& cmd) const;
  // Plan(cmd) written into `plan`, reusing its buffers (a caller planning many commands keeps
  // one); on an error `plan` is unspecified.
  [[nodiscard]] absl::Status PlanInto(const pb::DmaCmd& cmd, DmaPlan& plan) const;

  // Times `plan` (made by this model) issued at `issue`. `cube_channels` are the models of this
  // PE's CUBE, indexed by CUBE-local channel; unused (may be empty) for kTcmCopy.
  DmaTiming Execute(const DmaPlan& plan, SimTime issue, std::span<HbmChannelModel> cube_channels);

  // remote_channel_extra_cycles of the PE clock for a remote plan, else 0.
  SimTime ExtraLatency(const DmaPlan& plan) const;
  // The CUBE-local channel serving local address `addr` (< region_bytes) of global PE `owner_pe`.
  uint32_t ChannelOf(uint32_t owner_pe, Addr addr) const;

  uint32_t pe() const { return pe_; }
  Bytes region_bytes() const { return region_bytes_; }
  Bytes chunk_bytes() const { return chunk_bytes_; }
  const ClockDomain& clock() const { return clock_; }
  const DmaStats& stats() const { return stats_; }

 private:
  // An HBM tensor as planning reads it: shape and strides are views (of an HbmTensor or of a
  // DmaCmd's TensorRef), so a command is planned without copying them.
  struct TensorView {
    uint32_t owner_pe = 0;
    uint64_t base = 0;
    uint64_t element_bytes = 0;
    std::span<const uint64_t> shape;
    std::span<const uint64_t> strides;  // empty = dense
  };

  // PlanHbm; with `cmd` non-null, its CmdText is put before the reason in error messages (the
  // text is built only on an error).
  absl::Status PlanHbmWithContext(const TensorView& tensor, DmaKind kind, const pb::DmaCmd* cmd,
                                  DmaPlan& plan) const;
  absl::Status PlanTcmCopyInto(Bytes bytes, DmaPlan& plan) const;
  // Writes the plan of a walk's result into `plan` (`addrs`: BANK channels' chunk lists, by
  // channel of the owner).
  void FillPlan(DmaKind kind, uint32_t owner_pe, const topology::PeId& owner,
                const topology::PeId& issuer, uint64_t runs, uint64_t run_bytes,
                std::span<const uint64_t> per_channel, std::vector<std::vector<uint64_t>> addrs,
                DmaPlan& plan) const;

  // The walk's result for FIFO channels (no chunk addresses): a tensor's chunk count per
  // channel of its owner depends on its base only modulo the stripe (interleave_bytes times
  // channels_per_pe: the address map repeats every stripe), so plans are memoized by
  // (base % stripe, element size, shape, strides) — a kernel loads tiles of one shape at many
  // bases. Only tensors of at most kMemoDims dims; the memo is emptied past kMemoEntries.
  static constexpr size_t kMemoDims = 4;
  static constexpr size_t kMemoEntries = 4096;
  struct WalkKey {
    // base % stripe, element bytes, dims (| 2^32 if dense), shape, strides (0 past the dims).
    std::array<uint64_t, 3 + 2 * kMemoDims> words{};
    friend bool operator==(const WalkKey&, const WalkKey&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const WalkKey& k) {
      for (const uint64_t w : k.words) h = H::combine(std::move(h), w);
      return h;
    }
  };
  struct WalkResult {
    uint64_t runs = 0;
    uint64_t run_bytes = 0;
    absl::InlinedVector<uint64_t, 16> per_channel;  // chunks per channel of the owner
  };
  mutable absl::flat_hash_map<WalkKey, WalkResult> walk_memo_;

  topology::ChipIndex index_;
  uint32_t pe_;
  ClockDomain clock_;
  Bytes region_bytes_;
  Bytes chunk_bytes_;
  uint64_t interleave_bytes_;
  Cycles remote_extra_;
  bool chunk_addrs_ = false;  // BANK channels: plans list each chunk's address
  SimTime tcm_free_at_;
  DmaStats stats_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_DMA_MODEL_H_
