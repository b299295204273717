#include "topology/validate.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::topology {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

pb::Chip SmallChip() {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

class ShippedConfigTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedConfigTest, Validates) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFile(GetParam());
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_TRUE(Validate(*chip).ok());
}

INSTANTIATE_TEST_SUITE_P(Configs, ShippedConfigTest,
                         ::testing::Values("topology/chip_2sip.textproto",
                                           "topology/chip_4sip.textproto",
                                           "topology/chip_4sip_hbm3.textproto",
                                           "topology/small.textproto"));

TEST(ValidateTest, ZeroIsAllowedWhereDocumented) {
  pb::Chip chip = SmallChip();
  pb::Pe& pe = *chip.mutable_sip()->mutable_cube()->mutable_pe();
  pe.mutable_gemm()->set_fill_drain_cycles(0);
  pe.mutable_math()->set_reduction_extra_cycles(0);
  pe.mutable_math()->set_startup_cycles(0);
  pe.mutable_dma()->set_remote_channel_extra_cycles(0);
  pe.mutable_tcm()->set_scratch_bytes(pe.tcm().total_bytes());  // no persistent arena
  EXPECT_TRUE(Validate(chip).ok()) << Validate(chip);
}

TEST(ValidateTest, OtherClockDomainsAreAllowed) {
  pb::Chip chip = SmallChip();
  chip.mutable_sip()->mutable_cube()->mutable_hbm_channel()->set_clock_mhz(1600);  // 625 ps
  chip.mutable_sip()->mutable_noc()->mutable_link()->set_clock_mhz(2000);          // 500 ps
  chip.mutable_ucie()->mutable_link()->set_clock_mhz(1);                           // 1 us
  EXPECT_TRUE(Validate(chip).ok()) << Validate(chip);
}

// The largest chip the tool takes: 1896 small SIPs are 1048488 units, one SIP more is refused
// (JustTooManyUnits below).
TEST(ValidateTest, UnitLimitIsInclusive) {
  pb::Chip chip = SmallChip();
  chip.set_sips(1896);
  EXPECT_TRUE(Validate(chip).ok()) << Validate(chip);
}

TEST(ValidateTest, UciePortMayBeAnyCubeOfTheMesh) {
  pb::Chip chip = SmallChip();
  chip.mutable_ucie()->mutable_port_cube()->set_row(1);
  chip.mutable_ucie()->mutable_port_cube()->set_col(3);
  EXPECT_TRUE(Validate(chip).ok()) << Validate(chip);
}

// One broken field of the small chip and the message that must name it.
struct InvalidCase {
  std::string name;
  std::function<void(pb::Chip&)> mutate;
  std::string expected;
};

pb::Sip& Sip(pb::Chip& c) { return *c.mutable_sip(); }
pb::Cube& Cube(pb::Chip& c) { return *c.mutable_sip()->mutable_cube(); }
pb::HbmChannel& Hbm(pb::Chip& c) { return *Cube(c).mutable_hbm_channel(); }
pb::Pe& Pe(pb::Chip& c) { return *Cube(c).mutable_pe(); }
pb::Ipcq& Ipcq(pb::Chip& c) { return *Cube(c).mutable_ipcq(); }
pb::Noc& Noc(pb::Chip& c) { return *Sip(c).mutable_noc(); }
pb::Ucie& Ucie(pb::Chip& c) { return *c.mutable_ucie(); }

std::vector<InvalidCase> InvalidCases() {
  return {
      // chip
      {"NameEmpty", [](pb::Chip& c) { c.clear_name(); }, "name must not be empty"},
      {"SipsZero", [](pb::Chip& c) { c.set_sips(0); }, "sips must be > 0 (got 0)"},
      {"SipMissing", [](pb::Chip& c) { c.clear_sip(); }, "sip is missing"},
      {"UcieMissing", [](pb::Chip& c) { c.clear_ucie(); }, "ucie is missing"},
      // sip
      {"CubesZero", [](pb::Chip& c) { Sip(c).set_cubes(0); }, "sip.cubes must be > 0 (got 0)"},
      {"CubeMeshMissing", [](pb::Chip& c) { Sip(c).clear_cube_mesh(); },
       "sip.cube_mesh is missing"},
      {"CubeMeshRowsZero", [](pb::Chip& c) { Sip(c).mutable_cube_mesh()->set_rows(0); },
       "sip.cube_mesh.rows must be > 0 (got 0)"},
      {"CubeMeshColsZero", [](pb::Chip& c) { Sip(c).mutable_cube_mesh()->set_cols(0); },
       "sip.cube_mesh.cols must be > 0 (got 0)"},
      {"CubeMeshTooSmall", [](pb::Chip& c) { Sip(c).set_cubes(9); },
       "sip.cubes (9) must equal sip.cube_mesh.rows * sip.cube_mesh.cols (2 * 4 = 8): the mesh "
       "cannot hold them"},
      {"CubeMeshHasHoles", [](pb::Chip& c) { Sip(c).set_cubes(6); },
       "sip.cubes (6) must equal sip.cube_mesh.rows * sip.cube_mesh.cols (2 * 4 = 8): the mesh "
       "would have holes"},
      {"CubeMissing", [](pb::Chip& c) { Sip(c).clear_cube(); }, "sip.cube is missing"},
      {"NocMissing", [](pb::Chip& c) { Sip(c).clear_noc(); }, "sip.noc is missing"},
      // cube
      {"PesZero", [](pb::Chip& c) { Cube(c).set_pes(0); }, "sip.cube.pes must be > 0 (got 0)"},
      {"PeMeshMissing", [](pb::Chip& c) { Cube(c).clear_pe_mesh(); },
       "sip.cube.pe_mesh is missing"},
      {"PeMeshRowsZero", [](pb::Chip& c) { Cube(c).mutable_pe_mesh()->set_rows(0); },
       "sip.cube.pe_mesh.rows must be > 0 (got 0)"},
      {"PeMeshColsZero", [](pb::Chip& c) { Cube(c).mutable_pe_mesh()->set_cols(0); },
       "sip.cube.pe_mesh.cols must be > 0 (got 0)"},
      {"PeMeshMismatch", [](pb::Chip& c) { Cube(c).mutable_pe_mesh()->set_cols(4); },
       "sip.cube.pes (4) must equal sip.cube.pe_mesh.rows * sip.cube.pe_mesh.cols (2 * 4 = 8)"},
      {"HbmPseudoChannelsZero", [](pb::Chip& c) { Cube(c).set_hbm_pseudo_channels(0); },
       "sip.cube.hbm_pseudo_channels must be > 0 (got 0)"},
      {"PesNotMatchingChannelSplit",
       [](pb::Chip& c) {
         Cube(c).set_pes(8);
         Cube(c).mutable_pe_mesh()->set_cols(4);
       },
       "sip.cube.hbm_pseudo_channels (32) must equal sip.cube.pes * sip.cube.pe.hbm_channels "
       "(8 * 8 = 64)"},
      {"ChannelsPerPeNotMatching", [](pb::Chip& c) { Pe(c).set_hbm_channels(4); },
       "sip.cube.hbm_pseudo_channels (32) must equal sip.cube.pes * sip.cube.pe.hbm_channels "
       "(4 * 4 = 16)"},
      {"HbmBytesZero", [](pb::Chip& c) { Cube(c).set_hbm_bytes(0); },
       "sip.cube.hbm_bytes must be > 0 (got 0)"},
      {"HbmBytesNotSplittable",
       [](pb::Chip& c) { Cube(c).set_hbm_bytes(Cube(c).hbm_bytes() + 4096); },
       "sip.cube.hbm_bytes (17179873280) must be a multiple of sip.cube.hbm_pseudo_channels * "
       "sip.cube.hbm_channel.interleave_bytes (32 * 256 = 8192)"},
      {"FifoEfficiencyZero", [](pb::Chip& c) { Hbm(c).set_fifo_efficiency_ppm(0); },
       "sip.cube.hbm_channel.fifo_efficiency_ppm must be in [1, 1000000] (got 0)"},
      {"FifoEfficiencyAboveOne", [](pb::Chip& c) { Hbm(c).set_fifo_efficiency_ppm(1000001); },
       "sip.cube.hbm_channel.fifo_efficiency_ppm must be in [1, 1000000] (got 1000001)"},
      {"HbmChannelMissing", [](pb::Chip& c) { Cube(c).clear_hbm_channel(); },
       "sip.cube.hbm_channel is missing"},
      {"PeMissing", [](pb::Chip& c) { Cube(c).clear_pe(); }, "sip.cube.pe is missing"},
      {"IpcqMissing", [](pb::Chip& c) { Cube(c).clear_ipcq(); }, "sip.cube.ipcq is missing"},
      // hbm channel
      {"HbmClockZero", [](pb::Chip& c) { Hbm(c).set_clock_mhz(0); },
       "sip.cube.hbm_channel.clock_mhz must be > 0 (got 0)"},
      {"HbmClockNotWholePicoseconds", [](pb::Chip& c) { Hbm(c).set_clock_mhz(3); },
       "sip.cube.hbm_channel.clock_mhz must divide 1000000 so that one cycle is a whole number "
       "of picoseconds, the simulator's time base (got 3)"},
      {"HbmBytesPerCycleZero", [](pb::Chip& c) { Hbm(c).set_bytes_per_cycle(0); },
       "sip.cube.hbm_channel.bytes_per_cycle must be > 0 (got 0)"},
      {"HbmLatencyZero", [](pb::Chip& c) { Hbm(c).set_first_byte_latency_cycles(0); },
       "sip.cube.hbm_channel.first_byte_latency_cycles must be > 0 (got 0)"},
      {"HbmInterleaveZero", [](pb::Chip& c) { Hbm(c).set_interleave_bytes(0); },
       "sip.cube.hbm_channel.interleave_bytes must be > 0 (got 0)"},
      // pe
      {"PeClockZero", [](pb::Chip& c) { Pe(c).set_clock_mhz(0); },
       "sip.cube.pe.clock_mhz must be > 0 (got 0)"},
      {"PeClockNotWholePicoseconds", [](pb::Chip& c) { Pe(c).set_clock_mhz(1024); },
       "sip.cube.pe.clock_mhz must divide 1000000 so that one cycle is a whole number of "
       "picoseconds"},
      {"PeHbmChannelsZero", [](pb::Chip& c) { Pe(c).set_hbm_channels(0); },
       "sip.cube.pe.hbm_channels must be > 0 (got 0)"},
      {"GemmMissing", [](pb::Chip& c) { Pe(c).clear_gemm(); }, "sip.cube.pe.gemm is missing"},
      {"GemmRowsZero", [](pb::Chip& c) { Pe(c).mutable_gemm()->set_array_rows(0); },
       "sip.cube.pe.gemm.array_rows must be > 0 (got 0)"},
      {"GemmColsZero", [](pb::Chip& c) { Pe(c).mutable_gemm()->set_array_cols(0); },
       "sip.cube.pe.gemm.array_cols must be > 0 (got 0)"},
      {"MathMissing", [](pb::Chip& c) { Pe(c).clear_math(); }, "sip.cube.pe.math is missing"},
      {"MathLanesZero", [](pb::Chip& c) { Pe(c).mutable_math()->set_lanes_per_cycle(0); },
       "sip.cube.pe.math.lanes_per_cycle must be > 0 (got 0)"},
      {"MathTranscendentalZero",
       [](pb::Chip& c) { Pe(c).mutable_math()->set_transcendental_per_cycle(0); },
       "sip.cube.pe.math.transcendental_per_cycle must be > 0 (got 0)"},
      {"DmaMissing", [](pb::Chip& c) { Pe(c).clear_dma(); }, "sip.cube.pe.dma is missing"},
      {"DmaChunkZero", [](pb::Chip& c) { Pe(c).mutable_dma()->set_chunk_bytes(0); },
       "sip.cube.pe.dma.chunk_bytes must be > 0 (got 0)"},
      {"DmaChunkNotPowerOfTwo", [](pb::Chip& c) { Pe(c).mutable_dma()->set_chunk_bytes(96); },
       "sip.cube.pe.dma.chunk_bytes must be a power of two (got 96)"},
      {"DmaChunkLargerThanInterleave",
       [](pb::Chip& c) { Pe(c).mutable_dma()->set_chunk_bytes(512); },
       "sip.cube.pe.dma.chunk_bytes (512) must divide sip.cube.hbm_channel.interleave_bytes "
       "(256): a DMA chunk must not straddle two channels"},
      {"TcmMissing", [](pb::Chip& c) { Pe(c).clear_tcm(); }, "sip.cube.pe.tcm is missing"},
      {"TcmTotalZero", [](pb::Chip& c) { Pe(c).mutable_tcm()->set_total_bytes(0); },
       "sip.cube.pe.tcm.total_bytes must be > 0 (got 0)"},
      {"TcmScratchZero", [](pb::Chip& c) { Pe(c).mutable_tcm()->set_scratch_bytes(0); },
       "sip.cube.pe.tcm.scratch_bytes must be > 0 (got 0)"},
      {"TcmScratchLargerThanTcm",
       [](pb::Chip& c) { Pe(c).mutable_tcm()->set_scratch_bytes(8 << 20); },
       "sip.cube.pe.tcm.scratch_bytes (8388608) must be <= sip.cube.pe.tcm.total_bytes "
       "(4194304)"},
      {"SchedulerMissing", [](pb::Chip& c) { Pe(c).clear_scheduler(); },
       "sip.cube.pe.scheduler is missing"},
      {"TileMZero", [](pb::Chip& c) { Pe(c).mutable_scheduler()->set_tile_m(0); },
       "sip.cube.pe.scheduler.tile_m must be > 0 (got 0)"},
      {"TileKZero", [](pb::Chip& c) { Pe(c).mutable_scheduler()->set_tile_k(0); },
       "sip.cube.pe.scheduler.tile_k must be > 0 (got 0)"},
      {"TileNZero", [](pb::Chip& c) { Pe(c).mutable_scheduler()->set_tile_n(0); },
       "sip.cube.pe.scheduler.tile_n must be > 0 (got 0)"},
      {"InflightZero",
       [](pb::Chip& c) { Pe(c).mutable_scheduler()->set_max_inflight_composites(0); },
       "sip.cube.pe.scheduler.max_inflight_composites must be > 0 (got 0)"},
      {"NoIssueCostProfiles", [](pb::Chip& c) { Pe(c).clear_issue_cost_profiles(); },
       "sip.cube.pe.issue_cost_profiles must not be empty"},
      {"IssueCostProfileNameEmpty",
       [](pb::Chip& c) { Pe(c).mutable_issue_cost_profiles(1)->clear_name(); },
       "sip.cube.pe.issue_cost_profiles[1].name must not be empty"},
      {"IssueCostProfileNameDuplicate",
       [](pb::Chip& c) { Pe(c).mutable_issue_cost_profiles(1)->set_name("zero"); },
       "sip.cube.pe.issue_cost_profiles[1].name \"zero\" is not unique"},
      {"DefaultIssueCostProfileUnknown",
       [](pb::Chip& c) { Pe(c).set_default_issue_cost_profile("fast"); },
       "sip.cube.pe.default_issue_cost_profile \"fast\" must name one of "
       "sip.cube.pe.issue_cost_profiles (zero, realistic)"},
      {"DefaultIssueCostProfileEmpty",
       [](pb::Chip& c) { Pe(c).clear_default_issue_cost_profile(); },
       "sip.cube.pe.default_issue_cost_profile \"\" must name one of"},
      {"FillDrainUnset", [](pb::Chip& c) { Pe(c).mutable_gemm()->clear_fill_drain_cycles(); },
       "sip.cube.pe.gemm.fill_drain_cycles is missing (0 is allowed, but it must be set)"},
      {"ReductionExtraUnset",
       [](pb::Chip& c) { Pe(c).mutable_math()->clear_reduction_extra_cycles(); },
       "sip.cube.pe.math.reduction_extra_cycles is missing"},
      {"StartupUnset", [](pb::Chip& c) { Pe(c).mutable_math()->clear_startup_cycles(); },
       "sip.cube.pe.math.startup_cycles is missing"},
      {"RemoteChannelExtraUnset",
       [](pb::Chip& c) { Pe(c).mutable_dma()->clear_remote_channel_extra_cycles(); },
       "sip.cube.pe.dma.remote_channel_extra_cycles is missing"},
      {"IssueCostUnset",
       [](pb::Chip& c) { Pe(c).mutable_issue_cost_profiles(1)->clear_composite_cycles(); },
       "sip.cube.pe.issue_cost_profiles[1].composite_cycles is missing"},
      {"ZeroIssueCostUnset",
       [](pb::Chip& c) { Pe(c).mutable_issue_cost_profiles(0)->clear_resume_after_wait_cycles(); },
       "sip.cube.pe.issue_cost_profiles[0].resume_after_wait_cycles is missing"},
      // ipcq
      {"IpcqLinkMissing", [](pb::Chip& c) { Ipcq(c).clear_link(); },
       "sip.cube.ipcq.link is missing"},
      {"IpcqClockZero", [](pb::Chip& c) { Ipcq(c).mutable_link()->set_clock_mhz(0); },
       "sip.cube.ipcq.link.clock_mhz must be > 0 (got 0)"},
      {"IpcqClockNotWholePicoseconds",
       [](pb::Chip& c) { Ipcq(c).mutable_link()->set_clock_mhz(3000000); },
       "sip.cube.ipcq.link.clock_mhz must divide 1000000"},
      {"IpcqBandwidthZero", [](pb::Chip& c) { Ipcq(c).mutable_link()->set_bytes_per_cycle(0); },
       "sip.cube.ipcq.link.bytes_per_cycle must be > 0 (got 0)"},
      {"IpcqLatencyZero", [](pb::Chip& c) { Ipcq(c).mutable_link()->set_latency_cycles(0); },
       "sip.cube.ipcq.link.latency_cycles must be > 0 (got 0)"},
      {"IpcqQueueZero", [](pb::Chip& c) { Ipcq(c).set_queue_bytes(0); },
       "sip.cube.ipcq.queue_bytes must be > 0 (got 0)"},
      {"IpcqChunkZero", [](pb::Chip& c) { Ipcq(c).set_chunk_bytes(0); },
       "sip.cube.ipcq.chunk_bytes must be > 0 (got 0)"},
      {"IpcqChunkLargerThanQueue", [](pb::Chip& c) { Ipcq(c).set_chunk_bytes(512 << 10); },
       "sip.cube.ipcq.chunk_bytes (524288) must be <= sip.cube.ipcq.queue_bytes (262144): a "
       "larger chunk could never be sent"},
      // noc
      {"NocLinkMissing", [](pb::Chip& c) { Noc(c).clear_link(); }, "sip.noc.link is missing"},
      {"NocClockZero", [](pb::Chip& c) { Noc(c).mutable_link()->set_clock_mhz(0); },
       "sip.noc.link.clock_mhz must be > 0 (got 0)"},
      {"NocBandwidthZero", [](pb::Chip& c) { Noc(c).mutable_link()->set_bytes_per_cycle(0); },
       "sip.noc.link.bytes_per_cycle must be > 0 (got 0)"},
      {"NocLatencyZero", [](pb::Chip& c) { Noc(c).mutable_link()->set_latency_cycles(0); },
       "sip.noc.link.latency_cycles must be > 0 (got 0)"},
      {"NocPacketZero", [](pb::Chip& c) { Noc(c).set_packet_bytes(0); },
       "sip.noc.packet_bytes must be > 0 (got 0)"},
      {"NocCreditsZero", [](pb::Chip& c) { Noc(c).set_credits_per_link(0); },
       "sip.noc.credits_per_link must be > 0 (got 0)"},
      {"NocEndpointQueueZero", [](pb::Chip& c) { Noc(c).set_endpoint_queue_bytes(0); },
       "sip.noc.endpoint_queue_bytes must be > 0 (got 0)"},
      {"NocEndpointQueueBelowPacket", [](pb::Chip& c) { Noc(c).set_endpoint_queue_bytes(4095); },
       "sip.noc.endpoint_queue_bytes (4095) must be >= sip.noc.packet_bytes (4096): the endpoint "
       "must hold at least one NOC packet"},
      // ucie
      {"UcieLinkMissing", [](pb::Chip& c) { Ucie(c).clear_link(); }, "ucie.link is missing"},
      {"UcieClockZero", [](pb::Chip& c) { Ucie(c).mutable_link()->set_clock_mhz(0); },
       "ucie.link.clock_mhz must be > 0 (got 0)"},
      {"UcieBandwidthZero", [](pb::Chip& c) { Ucie(c).mutable_link()->set_bytes_per_cycle(0); },
       "ucie.link.bytes_per_cycle must be > 0 (got 0)"},
      {"UcieLatencyZero", [](pb::Chip& c) { Ucie(c).mutable_link()->set_latency_cycles(0); },
       "ucie.link.latency_cycles must be > 0 (got 0)"},
      {"UciePortMissing", [](pb::Chip& c) { Ucie(c).clear_port_cube(); },
       "ucie.port_cube is missing"},
      {"UciePortRowOutside", [](pb::Chip& c) { Ucie(c).mutable_port_cube()->set_row(2); },
       "ucie.port_cube (row 2, col 0) must lie inside sip.cube_mesh (2 x 4)"},
      {"UciePortColOutside", [](pb::Chip& c) { Ucie(c).mutable_port_cube()->set_col(4); },
       "ucie.port_cube (row 0, col 4) must lie inside sip.cube_mesh (2 x 4)"},
      // limits: what the tool simulates, counted without overflow (sips: 1000000 passed and
      // `ahbm stream` grew to 23 GB; sips: 4000000000 printed an overflowed HBM size)
      {"SipsTooMany", [](pb::Chip& c) { c.set_sips(1'000'000); },
       "sips * sip.cubes * (1 NOC router + sip.cube.pes * 9 + sip.cube.hbm_pseudo_channels) + "
       "sips (1000000 * 8 * (1 + 4 * 9 + 32) + 1000000 = 553000000 simulated units) must be <= "
       "1048576"},
      {"SipsMax", [](pb::Chip& c) { c.set_sips(4'294'967'295); },
       "(4294967295 * 8 * (1 + 4 * 9 + 32) + 4294967295 = 2375116914135 simulated units)"},
      {"CubeMeshTooLarge",
       [](pb::Chip& c) {
         Sip(c).set_cubes(4'000'000'000);
         Sip(c).mutable_cube_mesh()->set_rows(1'000'000'000);
         Sip(c).mutable_cube_mesh()->set_cols(4);
       },
       "(1 * 4000000000 * (1 + 4 * 9 + 32) + 1 = 276000000001 simulated units) must be <= "
       "1048576"},
      {"PesTooMany",
       [](pb::Chip& c) {
         Cube(c).set_pes(4'000'000'000);
         Cube(c).mutable_pe_mesh()->set_rows(2'000'000'000);
         Cube(c).set_hbm_pseudo_channels(4'000'000'000);
         Pe(c).set_hbm_channels(1);
         Cube(c).set_hbm_bytes(uint64_t{4'000'000'000} * 256 * 16);
       },
       "(1 * 8 * (1 + 4000000000 * 9 + 4000000000) + 1 = 320000000009 simulated units)"},
      {"ChannelsTooMany",
       [](pb::Chip& c) {
         Pe(c).set_hbm_channels(1'000'000'000);
         Cube(c).set_hbm_pseudo_channels(4'000'000'000);
         Cube(c).set_hbm_bytes(uint64_t{4'000'000'000} * 256);
       },
       "(1 * 8 * (1 + 4 * 9 + 4000000000) + 1 = 32000000297 simulated units)"},
      {"JustTooManyUnits", [](pb::Chip& c) { c.set_sips(1897); },
       "1897 = 1049041 simulated units) must be <= 1048576"},
      {"HbmOver64Bits",
       [](pb::Chip& c) { Cube(c).set_hbm_bytes(uint64_t{1} << 62); },
       "sips * sip.cubes * sip.cube.hbm_bytes (1 * 8 * 4611686018427387904) must be < 2^64 "
       "bytes"},
  };
}

class InvalidFieldTest : public ::testing::TestWithParam<InvalidCase> {};

// `chip` validates; after `c.mutate` it fails with one line holding `c.expected`.
void ExpectNamesTheField(pb::Chip chip, const InvalidCase& c) {
  ASSERT_TRUE(Validate(chip).ok()) << Validate(chip);
  c.mutate(chip);
  const absl::Status status = Validate(chip);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(c.expected));
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr("\n")));
}

TEST_P(InvalidFieldTest, NamesTheField) { ExpectNamesTheField(SmallChip(), GetParam()); }

INSTANTIATE_TEST_SUITE_P(Fields, InvalidFieldTest, ::testing::ValuesIn(InvalidCases()),
                         [](const ::testing::TestParamInfo<InvalidCase>& info) {
                           return info.param.name;
                         });

// The bank model's fields (HbmChannel.model BANK), on the small chip with chip_4sip_hbm3's
// channels.
std::vector<InvalidCase> BankCases() {
  auto bank = [](pb::Chip& c) -> pb::HbmBankConfig& { return *Hbm(c).mutable_bank(); };
  const std::string b = "sip.cube.hbm_channel.bank";
  return {
      {"BankMissing", [](pb::Chip& c) { Hbm(c).clear_bank(); }, b + " is missing"},
      {"BankWithFifo", [](pb::Chip& c) { Hbm(c).set_model(pb::FIFO); },
       b + " is set but sip.cube.hbm_channel.model is FIFO"},
      {"TrcdZero", [=](pb::Chip& c) { bank(c).set_t_rcd_rd_cycles(0); },
       b + ".t_rcd_rd_cycles must be > 0 (got 0)"},
      {"RefreshUnset", [=](pb::Chip& c) { bank(c).clear_refresh(); },
       b + ".refresh must be set (NO_REFRESH, ALL_BANK or PER_BANK)"},
      {"AddressMapUnset", [=](pb::Chip& c) { bank(c).clear_address_map(); },
       b + ".address_map must be set"},
      {"RowNotWholeBursts", [=](pb::Chip& c) { bank(c).set_row_bytes(1000); },
       b + ".row_bytes (1000) must be a multiple of " + b + ".burst_bytes (32)"},
      {"PeakNotTheBanks", [](pb::Chip& c) { Hbm(c).set_bytes_per_cycle(32); },
       "sip.cube.hbm_channel.bytes_per_cycle (32) must be the bank model's peak"},
      {"FirstByteBelowTheDram", [](pb::Chip& c) { Hbm(c).set_first_byte_latency_cycles(40); },
       "sip.cube.hbm_channel.first_byte_latency_cycles (40) must cover the DRAM's idle read, "
       "t_rcd_rd + t_cl + burst = 53 cycles"},
      {"RefreshStarves", [=](pb::Chip& c) { bank(c).set_t_refi_cycles(500); },
       b + ".t_refi_cycles (500) must exceed " + b + ".t_rfc_cycles (560)"},
      {"FifoEfficiencyOnABank", [](pb::Chip& c) { Hbm(c).set_fifo_efficiency_ppm(900000); },
       "sip.cube.hbm_channel.fifo_efficiency_ppm is for the FIFO model"},
      {"BanksTooMany", [=](pb::Chip& c) { bank(c).set_stack_ids(4'000'000'000); },
       b + ".stack_ids * bank_groups * banks_per_group (4000000000 * 4 * 4 = 64000000000) must "
           "be <= 1024 banks per channel"},
      {"BanksOver64Bits",
       [=](pb::Chip& c) {
         bank(c).set_stack_ids(4'000'000'000);
         bank(c).set_bank_groups(4'000'000'000);
         bank(c).set_banks_per_group(4'000'000'000);
       },
       "= over 2^64) must be <= 1024 banks per channel"},
      {"QueueTooDeep", [=](pb::Chip& c) { bank(c).set_queue_depth(1'000'000); },
       b + ".queue_depth must be <= 1024 (got 1000000)"},
      {"PerBankRefreshStarves",
       [=](pb::Chip& c) {
         bank(c).set_refresh(pb::PER_BANK);
         bank(c).set_t_refi_pb_cycles(10);
       },
       b + ".t_refi_pb_cycles (10) x 32 banks must exceed " + b + ".t_rfc_pb_cycles (320)"},
  };
}

class InvalidBankFieldTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidBankFieldTest, NamesTheField) {
  pb::Chip chip = SmallChip();
  Hbm(chip) = LoadTopologyFile("topology/chip_4sip_hbm3.textproto")->sip().cube().hbm_channel();
  ExpectNamesTheField(chip, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Bank, InvalidBankFieldTest, ::testing::ValuesIn(BankCases()),
                         [](const ::testing::TestParamInfo<InvalidCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ahbm::topology
