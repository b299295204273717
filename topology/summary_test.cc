#include "topology/summary.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

pb::Chip Load(const std::string& path) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFile(path);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

// `value / scale` in decimal with at most 3 decimals and no trailing zeros, by integer math
// (an independent check of the summary's floating-point formatting).
std::string Scaled(uint64_t value, uint64_t scale) {
  const uint64_t thousandths = value / (scale / 1000);
  std::string text = absl::StrCat(thousandths / 1000);
  if (const uint64_t frac = thousandths % 1000; frac != 0) {
    std::string digits = absl::StrCat(1000 + frac).substr(1);
    while (digits.back() == '0') digits.pop_back();
    absl::StrAppend(&text, ".", digits);
  }
  return text;
}

// The summary line that starts with `prefix` (after indentation), or "" if none does.
std::string Line(const std::string& summary, const std::string& prefix) {
  for (absl::string_view line : absl::StrSplit(summary, '\n')) {
    const size_t start = line.find_first_not_of(' ');
    if (start != absl::string_view::npos && absl::StartsWith(line.substr(start), prefix)) {
      return std::string(line);
    }
  }
  return "";
}

std::vector<std::string> Tokens(const std::string& line) {
  return absl::StrSplit(line, ' ', absl::SkipEmpty());
}

class SummaryPeaksTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SummaryPeaksTest, ShowsPeaksComputedFromTheConfig) {
  const pb::Chip chip = Load(GetParam());
  const pb::Cube& cube = chip.sip().cube();
  const pb::Pe& pe = cube.pe();
  const uint64_t pe_bytes_per_s = uint64_t{pe.hbm_channels()} *
                                  cube.hbm_channel().bytes_per_cycle() *
                                  cube.hbm_channel().clock_mhz() * 1'000'000;
  const uint64_t pe_flop_per_s =
      uint64_t{2} * pe.gemm().array_rows() * pe.gemm().array_cols() * pe.clock_mhz() * 1'000'000;
  const struct {
    std::string level;
    uint64_t units;  // PEs at this level
  } levels[] = {{"PE", 1},
                {"CUBE", cube.pes()},
                {"SIP", uint64_t{cube.pes()} * chip.sip().cubes()},
                {"chip", uint64_t{cube.pes()} * chip.sip().cubes() * chip.sips()}};

  const std::string summary = TopologySummary(chip);
  for (const auto& [level, units] : levels) {
    const std::string line = Line(summary, absl::StrCat("peak per ", level, " "));
    ASSERT_FALSE(line.empty()) << level << "\n" << summary;
    EXPECT_THAT(line, HasSubstr(absl::StrCat("HBM ", Scaled(pe_bytes_per_s * units, 1'000'000'000),
                                             " GB/s")));
    EXPECT_THAT(line, HasSubstr(absl::StrCat(
                          "bf16 ", Scaled(pe_flop_per_s * units, 1'000'000'000'000), " TFLOP/s")));
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, SummaryPeaksTest,
                         ::testing::Values("topology/chip_2sip.textproto",
                                           "topology/chip_4sip.textproto",
                                           "topology/chip_4sip_fifo.textproto",
                                           "topology/chip_4sip_hbm3.textproto",
                                           "topology/small.textproto"));

TEST(SummaryTest, ShippedChipNumbers) {
  const std::string summary = TopologySummary(Load("topology/chip_2sip.textproto"));
  EXPECT_THAT(summary, HasSubstr("topology \"ahbm-2sip\""));
  EXPECT_THAT(summary, HasSubstr("2 SIPs x 16 CUBEs (4x4 mesh) x 8 PEs (2x4 mesh)\n"));
  EXPECT_THAT(summary, HasSubstr("total: 32 CUBEs, 256 PEs, 2048 HBM channels, 1 TiB HBM\n"));
  EXPECT_THAT(Line(summary, "peak per PE "), HasSubstr("HBM 256 GB/s, bf16 2.048 TFLOP/s"));
  EXPECT_THAT(Line(summary, "peak per CUBE "), HasSubstr("HBM 2048 GB/s, bf16 16.384 TFLOP/s"));
  EXPECT_THAT(Line(summary, "peak per SIP "), HasSubstr("HBM 32768 GB/s, bf16 262.144 TFLOP/s"));
  EXPECT_THAT(Line(summary, "peak per chip "), HasSubstr("HBM 65536 GB/s, bf16 524.288 TFLOP/s"));
  EXPECT_THAT(summary, HasSubstr("balance per PE: 8 FLOP/byte"));
  EXPECT_THAT(summary, HasSubstr("TCM   4 MiB per PE: 1 MiB scratch + 3 MiB persistent"));
  EXPECT_THAT(summary, HasSubstr("HBM   32 GiB per CUBE, 64 channels (8 per PE)\n"));
  // HBM3 at 8 Gbps per pin: 32 B per 2 cycles of 2 GHz, 100 ns first byte.
  EXPECT_THAT(summary, HasSubstr("channel 16 B/cycle @ 2000 MHz (32 GB/s), first byte 200 cycles, "
                                 "interleave 256 B\n"));
  EXPECT_THAT(summary, HasSubstr("HBM   timing: bank model, 2 stack ids x 4 bank groups x 4 banks, "
                                 "1 KiB rows\n        ALL_BANK refresh, FR_FCFS controller (32 "
                                 "requests), BANK_GROUP_FIRST map\n"));
  EXPECT_THAT(TopologySummary(Load("topology/chip_4sip_fifo.textproto")),
              HasSubstr("channel 32 B/cycle @ 1000 MHz (32 GB/s), first byte 100 cycles, "
                        "interleave 256 B\n  HBM   timing: FIFO at 100% of peak on any pattern\n"));
  EXPECT_THAT(summary, HasSubstr("PE    1000 MHz; GEMM 8x128, fill/drain 16 cycles; tile 32/64/128 "
                                 "(m/k/n), 4 composites in flight\n"));
  EXPECT_THAT(summary, HasSubstr("MATH  128 lanes/cycle, transcendental 32/cycle, reduction +7 "
                                 "cycles, start-up 8 cycles\n"));
  EXPECT_THAT(summary, HasSubstr("DMA   256 B chunks, +8 cycles to another PE's channel\n"));
  EXPECT_THAT(Line(summary, "IPCQ"), HasSubstr("64 B/cycle @ 1000 MHz (64 GB/s), 8 cycles/hop"));
  EXPECT_THAT(Line(summary, "IPCQ"), HasSubstr("queue 256 KiB, chunk 16 KiB"));
  EXPECT_THAT(Line(summary, "NOC"), HasSubstr("128 B/cycle @ 1000 MHz (128 GB/s), 12 cycles/hop"));
  EXPECT_THAT(Line(summary, "NOC"), HasSubstr("packet 4 KiB, 4 credits/link"));
  EXPECT_THAT(summary, HasSubstr("endpoint queue 256 KiB per PE"));
  EXPECT_THAT(Line(summary, "UCIe"), HasSubstr("256 B/cycle @ 1000 MHz (256 GB/s), 200 cycles"));
  EXPECT_THAT(Line(summary, "UCIe"), HasSubstr("port CUBE (0,0)"));
  EXPECT_THAT(Tokens(Line(summary, "issue cost")),
              ElementsAre("issue", "cost,", "cycles", "primitive", "dot", "load", "store", "send",
                          "recv", "composite", "ex_composite", "resume"));
  EXPECT_THAT(Tokens(Line(summary, "zero")),
              ElementsAre("zero", "(default)", "0", "0", "0", "0", "0", "0", "0", "0", "0"));
  EXPECT_THAT(Tokens(Line(summary, "realistic")),
              ElementsAre("realistic", "16", "16", "16", "16", "16", "16", "48", "64", "8"));
}

TEST(SummaryTest, SmallChipSaysOneSip) {
  const std::string summary = TopologySummary(Load("topology/small.textproto"));
  EXPECT_THAT(summary, HasSubstr("1 SIP x 8 CUBEs (2x4 mesh) x 4 PEs (2x2 mesh)\n"));
}

TEST(SummaryTest, FitsOneScreen) {
  const std::string summary = TopologySummary(Load("topology/chip_4sip.textproto"));
  const std::vector<std::string> lines = absl::StrSplit(summary, '\n');
  EXPECT_LE(lines.size(), 25u) << summary;
  for (const std::string& line : lines) EXPECT_LE(line.size(), 100u) << line;
}

}  // namespace
}  // namespace ahbm::topology
