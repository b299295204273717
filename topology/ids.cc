#include "topology/ids.h"

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace ahbm::topology {

const char* UnitKindName(UnitKind kind) {
  switch (kind) {
    case UnitKind::kPeCpu:
      return "pe_cpu";
    case UnitKind::kPeScheduler:
      return "scheduler";
    case UnitKind::kDma:
      return "dma";
    case UnitKind::kGemm:
      return "gemm";
    case UnitKind::kMath:
      return "math";
    case UnitKind::kIpcq:
      return "ipcq";
    case UnitKind::kHbmChannel:
      return "hbm_channel";
    case UnitKind::kNocRouter:
      return "noc";
    case UnitKind::kUcie:
      return "ucie";
  }
  return "?";
}

ChipIndex::ChipIndex(const pb::Chip& chip)
    : sips_(chip.sips()),
      cube_mesh_(chip.sip().cube_mesh().rows(), chip.sip().cube_mesh().cols()),
      pe_mesh_(chip.sip().cube().pe_mesh().rows(), chip.sip().cube().pe_mesh().cols()),
      channels_per_pe_(chip.sip().cube().pe().hbm_channels()) {
  AHBM_CHECK(sips_ > 0 && channels_per_pe_ > 0) << "ChipIndex needs a validated chip";
  const auto count = [this](UnitKind kind) -> uint32_t {
    switch (kind) {
      case UnitKind::kPeCpu:
      case UnitKind::kPeScheduler:
      case UnitKind::kDma:
      case UnitKind::kGemm:
      case UnitKind::kMath:
        return num_pes();
      case UnitKind::kIpcq:
        return num_pes() * static_cast<uint32_t>(kAllDirs.size());
      case UnitKind::kHbmChannel:
        return num_cubes() * channels_per_cube();
      case UnitKind::kNocRouter:
        return num_cubes();
      case UnitKind::kUcie:
        return sips_;
    }
    return 0;
  };
  base_[0] = 0;
  for (int k = 0; k < kNumUnitKinds; ++k) base_[k + 1] = base_[k] + count(static_cast<UnitKind>(k));
}

uint32_t ChipIndex::GlobalCube(CubeId id) const {
  AHBM_CHECK(id.sip < sips_ && id.cube < cubes_per_sip())
      << "cube (" << id.sip << "," << id.cube << ") outside the chip";
  return id.sip * cubes_per_sip() + id.cube;
}

CubeId ChipIndex::CubeOf(uint32_t global_cube) const {
  AHBM_CHECK(global_cube < num_cubes()) << "cube " << global_cube;
  return CubeId{global_cube / cubes_per_sip(), global_cube % cubes_per_sip()};
}

uint32_t ChipIndex::GlobalPe(PeId id) const {
  AHBM_CHECK(id.pe < pes_per_cube()) << "pe " << id.pe;
  return GlobalCube(id.cube_id()) * pes_per_cube() + id.pe;
}

PeId ChipIndex::PeOf(uint32_t global_pe) const {
  AHBM_CHECK(global_pe < num_pes()) << "pe " << global_pe;
  const CubeId cube = CubeOf(global_pe / pes_per_cube());
  return PeId{cube.sip, cube.cube, global_pe % pes_per_cube()};
}

UnitId ChipIndex::PeUnit(UnitKind kind, PeId pe) const {
  AHBM_CHECK(kind <= UnitKind::kMath) << "not a per-PE engine: " << UnitKindName(kind);
  return UnitId(KindBase(kind) + GlobalPe(pe));
}

UnitId ChipIndex::IpcqUnit(PeId pe, Dir dir) const {
  return UnitId(KindBase(UnitKind::kIpcq) + GlobalPe(pe) * kAllDirs.size() +
                static_cast<uint32_t>(dir));
}

UnitId ChipIndex::HbmChannelUnit(CubeId cube, uint32_t channel) const {
  AHBM_CHECK(channel < channels_per_cube()) << "channel " << channel;
  return UnitId(KindBase(UnitKind::kHbmChannel) + GlobalCube(cube) * channels_per_cube() +
                channel);
}

UnitId ChipIndex::NocRouterUnit(CubeId cube) const {
  return UnitId(KindBase(UnitKind::kNocRouter) + GlobalCube(cube));
}

UnitId ChipIndex::UcieUnit(uint32_t sip) const {
  AHBM_CHECK(sip < sips_) << "sip " << sip;
  return UnitId(KindBase(UnitKind::kUcie) + sip);
}

UnitKind ChipIndex::KindOf(UnitId id) const {
  AHBM_CHECK(id.value() < num_units()) << "unit " << id.value();
  int k = kNumUnitKinds - 1;
  while (id.value() < base_[k]) --k;
  return static_cast<UnitKind>(k);
}

int64_t ChipIndex::GlobalPeOfUnit(UnitId id) const {
  const UnitKind kind = KindOf(id);
  // A PE's own kinds number their units by global PE (one each).
  if (kind > UnitKind::kMath) return -1;
  return id.value() - KindBase(kind);
}

int64_t ChipIndex::GlobalCubeOfUnit(UnitId id) const {
  const UnitKind kind = KindOf(id);
  const uint32_t offset = id.value() - KindBase(kind);
  switch (kind) {
    case UnitKind::kPeCpu:
    case UnitKind::kPeScheduler:
    case UnitKind::kDma:
    case UnitKind::kGemm:
    case UnitKind::kMath:
      return offset / pes_per_cube();
    case UnitKind::kIpcq:
      return offset / (pes_per_cube() * static_cast<uint32_t>(kAllDirs.size()));
    case UnitKind::kHbmChannel:
      return offset / channels_per_cube();
    case UnitKind::kNocRouter:
      return offset;
    case UnitKind::kUcie:
      return -1;
  }
  return -1;
}

UnitId ChipIndex::UnitInCube(UnitId id, uint32_t global_cube) const {
  const int64_t from = GlobalCubeOfUnit(id);
  AHBM_CHECK(from >= 0) << Name(id) << " belongs to no CUBE";
  AHBM_CHECK(global_cube < num_cubes()) << "no CUBE " << global_cube;
  const UnitKind kind = KindOf(id);
  // Inside a kind's block a CUBE's units are contiguous, the same number per CUBE.
  uint32_t per_cube = 1;
  switch (kind) {
    case UnitKind::kIpcq:
      per_cube = pes_per_cube() * static_cast<uint32_t>(kAllDirs.size());
      break;
    case UnitKind::kHbmChannel:
      per_cube = channels_per_cube();
      break;
    case UnitKind::kNocRouter:
      break;
    default:
      per_cube = pes_per_cube();
  }
  return UnitId(static_cast<uint32_t>(id.value() + (int64_t{global_cube} - from) * per_cube));
}

std::string ChipIndex::Name(UnitId id) const {
  const UnitKind kind = KindOf(id);
  const uint32_t offset = id.value() - KindBase(kind);
  switch (kind) {
    case UnitKind::kPeCpu:
    case UnitKind::kPeScheduler:
    case UnitKind::kDma:
    case UnitKind::kGemm:
    case UnitKind::kMath: {
      const PeId pe = PeOf(offset);
      return absl::StrCat("sip", pe.sip, ".cube", pe.cube, ".pe", pe.pe, ".",
                          kind == UnitKind::kPeCpu ? "cpu" : UnitKindName(kind));
    }
    case UnitKind::kIpcq: {
      const PeId pe = PeOf(offset / kAllDirs.size());
      return absl::StrCat("sip", pe.sip, ".cube", pe.cube, ".pe", pe.pe, ".ipcq.",
                          DirName(kAllDirs[offset % kAllDirs.size()]));
    }
    case UnitKind::kHbmChannel: {
      const CubeId cube = CubeOf(offset / channels_per_cube());
      return absl::StrCat("sip", cube.sip, ".cube", cube.cube, ".hbm",
                          offset % channels_per_cube());
    }
    case UnitKind::kNocRouter: {
      const CubeId cube = CubeOf(offset);
      return absl::StrCat("sip", cube.sip, ".cube", cube.cube, ".noc");
    }
    case UnitKind::kUcie:
      return absl::StrCat("sip", offset, ".ucie");
  }
  return "?";
}

}  // namespace ahbm::topology
