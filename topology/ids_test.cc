#include "topology/ids.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "topology/test_chip.h"

namespace ahbm::topology {
namespace {

pb::Chip MakeChip(uint32_t sips, uint32_t mesh_rows, uint32_t mesh_cols, uint32_t pe_rows,
                  uint32_t pe_cols, uint32_t channels_per_pe) {
  return MakeStructuralChip({sips, mesh_rows, mesh_cols, pe_rows, pe_cols, channels_per_pe});
}

TEST(ChipIndexTest, CountsMatchTheShippedChip) {
  const ChipIndex index(MakeChip(/*sips=*/2, 4, 4, 2, 4, /*channels_per_pe=*/8));
  EXPECT_EQ(index.num_cubes(), 32u);
  EXPECT_EQ(index.num_pes(), 256u);
  EXPECT_EQ(index.channels_per_cube(), 64u);
  // 5 engines per PE + 4 IPCQ queues per PE + 64 channels and 1 router per CUBE + 1 UCIe/SIP.
  EXPECT_EQ(index.num_units(), 256u * 5 + 256u * 4 + 32u * 64 + 32u + 2u);
}

TEST(ChipIndexTest, PeAndCubeNumberingRoundTrips) {
  const ChipIndex index(MakeChip(/*sips=*/2, 2, 4, 2, 2, /*channels_per_pe=*/8));
  for (uint32_t g = 0; g < index.num_pes(); ++g) EXPECT_EQ(index.GlobalPe(index.PeOf(g)), g);
  EXPECT_EQ(index.GlobalPe(PeId{/*sip=*/1, /*cube=*/2, /*pe=*/3}), (1u * 8 + 2) * 4 + 3);
  for (uint32_t g = 0; g < index.num_cubes(); ++g) {
    EXPECT_EQ(index.GlobalCube(index.CubeOf(g)), g);
  }
}

// ... and the CUBE it belongs to (GlobalCubeOfUnit; a SIP's UCIe unit none), and a PE's own
// units their PE (GlobalPeOfUnit; -1 for the others).
TEST(ChipIndexTest, EveryUnitHasADistinctIdAndName) {
  const ChipIndex index(MakeChip(/*sips=*/2, 2, 4, 2, 2, /*channels_per_pe=*/8));
  std::set<uint32_t> ids;
  std::set<std::string> names;
  const auto add = [&](UnitId id, UnitKind kind, int64_t cube, int64_t pe = -1) {
    EXPECT_LT(id.value(), index.num_units());
    EXPECT_EQ(index.KindOf(id), kind) << index.Name(id);
    EXPECT_EQ(index.GlobalCubeOfUnit(id), cube) << index.Name(id);
    EXPECT_EQ(index.GlobalPeOfUnit(id), pe) << index.Name(id);
    ids.insert(id.value());
    names.insert(index.Name(id));
  };
  for (uint32_t g = 0; g < index.num_pes(); ++g) {
    const PeId pe = index.PeOf(g);
    for (UnitKind kind : {UnitKind::kPeCpu, UnitKind::kPeScheduler, UnitKind::kDma,
                          UnitKind::kGemm, UnitKind::kMath}) {
      add(index.PeUnit(kind, pe), kind, index.GlobalCube(pe.cube_id()), g);
    }
    for (Dir dir : kAllDirs) {
      add(index.IpcqUnit(pe, dir), UnitKind::kIpcq, index.GlobalCube(pe.cube_id()));
    }
  }
  for (uint32_t g = 0; g < index.num_cubes(); ++g) {
    for (uint32_t ch = 0; ch < index.channels_per_cube(); ++ch) {
      add(index.HbmChannelUnit(index.CubeOf(g), ch), UnitKind::kHbmChannel, g);
    }
    add(index.NocRouterUnit(index.CubeOf(g)), UnitKind::kNocRouter, g);
  }
  for (uint32_t s = 0; s < index.sips(); ++s) add(index.UcieUnit(s), UnitKind::kUcie, -1);
  EXPECT_EQ(ids.size(), index.num_units());
  EXPECT_EQ(names.size(), index.num_units());
}

TEST(ChipIndexTest, NamesSayWhereAUnitIs) {
  const ChipIndex index(MakeChip(/*sips=*/2, 4, 4, 2, 4, /*channels_per_pe=*/8));
  EXPECT_EQ(index.Name(index.PeUnit(UnitKind::kGemm, PeId{0, 5, 3})), "sip0.cube5.pe3.gemm");
  EXPECT_EQ(index.Name(index.PeUnit(UnitKind::kPeCpu, PeId{1, 0, 0})), "sip1.cube0.pe0.cpu");
  EXPECT_EQ(index.Name(index.IpcqUnit(PeId{0, 1, 2}, Dir::kEast)), "sip0.cube1.pe2.ipcq.E");
  EXPECT_EQ(index.Name(index.HbmChannelUnit(CubeId{1, 15}, 63)), "sip1.cube15.hbm63");
  EXPECT_EQ(index.Name(index.NocRouterUnit(CubeId{0, 2})), "sip0.cube2.noc");
  EXPECT_EQ(index.Name(index.UcieUnit(1)), "sip1.ucie");
}

// UnitInCube: the same kind and place (PE, direction, channel) in another CUBE.
TEST(ChipIndexTest, UnitInCubeKeepsKindAndPlace) {
  const ChipIndex index(MakeChip(/*sips=*/2, 2, 4, 2, 2, /*channels_per_pe=*/8));
  const CubeId to{/*sip=*/1, /*cube=*/5};
  const uint32_t g = index.GlobalCube(to);
  for (const auto& [from, expected] : std::vector<std::pair<UnitId, UnitId>>{
           {index.PeUnit(UnitKind::kGemm, PeId{0, 2, 3}), index.PeUnit(UnitKind::kGemm, PeId{1, 5, 3})},
           {index.IpcqUnit(PeId{0, 1, 2}, Dir::kWest), index.IpcqUnit(PeId{1, 5, 2}, Dir::kWest)},
           {index.HbmChannelUnit(CubeId{0, 7}, 17), index.HbmChannelUnit(to, 17)},
           {index.NocRouterUnit(CubeId{1, 6}), index.NocRouterUnit(to)}}) {
    EXPECT_EQ(index.UnitInCube(from, g), expected) << index.Name(from);
    EXPECT_EQ(index.UnitInCube(expected, index.GlobalCubeOfUnit(from)), from) << index.Name(from);
  }
}

TEST(ChipIndexTest, IdsAreStableAcrossInstances) {
  const pb::Chip chip = MakeChip(/*sips=*/2, 4, 4, 2, 4, /*channels_per_pe=*/8);
  const ChipIndex a(chip);
  const ChipIndex b(chip);
  for (uint32_t g = 0; g < a.num_pes(); g += 7) {
    EXPECT_EQ(a.PeUnit(UnitKind::kMath, a.PeOf(g)), b.PeUnit(UnitKind::kMath, b.PeOf(g)));
  }
}

TEST(ChipIndexTest, ChannelOwnershipIsContiguousPerPe) {
  const ChipIndex index(MakeChip(/*sips=*/1, 2, 4, 2, 2, /*channels_per_pe=*/8));
  for (uint32_t ch = 0; ch < index.channels_per_cube(); ++ch) {
    const uint32_t pe = index.OwnerPeOfChannel(ch);
    EXPECT_GE(ch, index.FirstChannelOfPe(pe));
    EXPECT_LT(ch, index.FirstChannelOfPe(pe) + index.channels_per_pe());
  }
}

}  // namespace
}  // namespace ahbm::topology
