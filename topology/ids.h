// Stable ids and names for every simulated unit of a chip, and the PE/CUBE coordinates they
// belong to.
//
// Contract: ids are dense, 0..num_units()-1, assigned in blocks by kind in the order of
// `UnitKind`, and inside a block by global index (PE-, IPCQ-, channel-, CUBE- or SIP-major).
// The same topology always gives the same ids; the engine orders equal-time events by them.
// Global PE index = (sip * cubes_per_sip + cube) * pes_per_cube + pe; global CUBE index =
// sip * cubes_per_sip + cube; `cube` is the row-major index in the SIP's CUBE mesh and `pe`
// the row-major index in the CUBE's PE mesh. PE `p` owns its CUBE's HBM pseudo-channels
// [p * channels_per_pe, (p + 1) * channels_per_pe).
#ifndef AHBM_TOPOLOGY_IDS_H_
#define AHBM_TOPOLOGY_IDS_H_

#include <array>
#include <compare>
#include <cstdint>
#include <string>

#include "proto/topology.pb.h"
#include "topology/mesh.h"

namespace ahbm::topology {

enum class UnitKind : uint8_t {
  kPeCpu = 0,
  kPeScheduler,
  kDma,
  kGemm,
  kMath,
  kIpcq,        // one outgoing queue per PE per direction (N/S/E/W)
  kHbmChannel,  // one per pseudo-channel
  kNocRouter,   // one per CUBE
  kUcie,        // one per SIP
};
inline constexpr int kNumUnitKinds = 9;

// "pe_cpu", "scheduler", "dma", "gemm", "math", "ipcq", "hbm_channel", "noc", "ucie".
const char* UnitKindName(UnitKind kind);

class UnitId {
 public:
  constexpr explicit UnitId(uint32_t value) : value_(value) {}
  constexpr uint32_t value() const { return value_; }
  friend auto operator<=>(const UnitId&, const UnitId&) = default;

 private:
  uint32_t value_;
};

struct CubeId {
  uint32_t sip = 0;
  uint32_t cube = 0;  // row-major index in the SIP's CUBE mesh
  friend auto operator<=>(const CubeId&, const CubeId&) = default;
};

struct PeId {
  uint32_t sip = 0;
  uint32_t cube = 0;
  uint32_t pe = 0;  // row-major index in the CUBE's PE mesh
  CubeId cube_id() const { return CubeId{sip, cube}; }
  friend auto operator<=>(const PeId&, const PeId&) = default;
};

// Numbering of a validated chip. Cheap to copy; every lookup is O(1).
class ChipIndex {
 public:
  explicit ChipIndex(const pb::Chip& chip);

  uint32_t sips() const { return sips_; }
  uint32_t cubes_per_sip() const { return cube_mesh_.size(); }
  uint32_t pes_per_cube() const { return pe_mesh_.size(); }
  uint32_t channels_per_pe() const { return channels_per_pe_; }
  uint32_t channels_per_cube() const { return channels_per_pe_ * pes_per_cube(); }
  uint32_t num_cubes() const { return sips_ * cubes_per_sip(); }
  uint32_t num_pes() const { return num_cubes() * pes_per_cube(); }
  const Mesh& cube_mesh() const { return cube_mesh_; }
  const Mesh& pe_mesh() const { return pe_mesh_; }

  uint32_t GlobalCube(CubeId id) const;
  CubeId CubeOf(uint32_t global_cube) const;
  uint32_t GlobalPe(PeId id) const;
  PeId PeOf(uint32_t global_pe) const;

  // Unit ids.
  uint32_t num_units() const { return base_[kNumUnitKinds]; }
  UnitId PeUnit(UnitKind kind, PeId pe) const;  // kPeCpu, kPeScheduler, kDma, kGemm, kMath
  UnitId IpcqUnit(PeId pe, Dir dir) const;
  // `channel` is the index inside the CUBE, 0..channels_per_cube()-1.
  UnitId HbmChannelUnit(CubeId cube, uint32_t channel) const;
  UnitId NocRouterUnit(CubeId cube) const;
  UnitId UcieUnit(uint32_t sip) const;

  UnitKind KindOf(UnitId id) const;
  // The global CUBE a unit belongs to (its PE's, its channel's, its router's); -1 for a UCIe
  // unit (a SIP's).
  int64_t GlobalCubeOfUnit(UnitId id) const;
  // The global PE of a PE's own unit (CPU, scheduler, DMA, GEMM, MATH); -1 for other units.
  int64_t GlobalPeOfUnit(UnitId id) const;
  // The unit of `id`'s kind at the same place inside global CUBE `global_cube` (the same PE,
  // direction or channel there); `id` must belong to a CUBE (not a UCIe unit).
  UnitId UnitInCube(UnitId id, uint32_t global_cube) const;
  // "sip0.cube5.pe3.gemm", "sip0.cube5.pe3.ipcq.E", "sip1.cube0.hbm12", "sip0.cube2.noc",
  // "sip1.ucie".
  std::string Name(UnitId id) const;

  // The PE whose memory a CUBE-local channel index belongs to, and the reverse.
  uint32_t OwnerPeOfChannel(uint32_t channel) const { return channel / channels_per_pe_; }
  uint32_t FirstChannelOfPe(uint32_t pe) const { return pe * channels_per_pe_; }

 private:
  uint32_t KindBase(UnitKind kind) const { return base_[static_cast<int>(kind)]; }

  uint32_t sips_;
  Mesh cube_mesh_;
  Mesh pe_mesh_;
  uint32_t channels_per_pe_;
  std::array<uint32_t, kNumUnitKinds + 1> base_;  // first id of each kind; [kNumUnitKinds]: all
};

}  // namespace ahbm::topology

#endif  // AHBM_TOPOLOGY_IDS_H_
