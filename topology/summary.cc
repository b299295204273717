#include "topology/summary.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace ahbm::topology {
namespace {

// `value` with up to 3 decimals, trailing zeros (and a trailing point) dropped.
std::string Decimal(double value) {
  std::string text = absl::StrFormat("%.3f", value);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

// The largest binary unit that divides `bytes` exactly: "4 MiB", "16 KiB", "100 B".
std::string Size(uint64_t bytes) {
  constexpr struct {
    uint64_t scale;
    absl::string_view unit;
  } kUnits[] = {{uint64_t{1} << 40, "TiB"},
                {uint64_t{1} << 30, "GiB"},
                {uint64_t{1} << 20, "MiB"},
                {uint64_t{1} << 10, "KiB"}};
  for (const auto& [scale, unit] : kUnits) {
    if (bytes != 0 && bytes % scale == 0) return absl::StrCat(bytes / scale, " ", unit);
  }
  return absl::StrCat(bytes, " B");
}

// "1 SIP", "2 SIPs".
std::string Count(uint64_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

// Bytes per second as GB/s: `bytes_per_cycle` at `clock_mhz`.
double GigabytesPerSecond(double bytes_per_cycle, uint32_t clock_mhz) {
  return bytes_per_cycle * clock_mhz * 1e6 / 1e9;
}

std::string LinkLine(absl::string_view label, const pb::Link& link, absl::string_view per_hop) {
  return absl::StrFormat("  %-5s %d B/cycle @ %d MHz (%s GB/s), %d cycles%s", label,
                         link.bytes_per_cycle(), link.clock_mhz(),
                         Decimal(GigabytesPerSecond(link.bytes_per_cycle(), link.clock_mhz())),
                         link.latency_cycles(), per_hop);
}

}  // namespace

std::string TopologySummary(const pb::Chip& chip) {
  const pb::Sip& sip = chip.sip();
  const pb::Cube& cube = sip.cube();
  const pb::HbmChannel& hbm = cube.hbm_channel();
  const pb::Pe& pe = cube.pe();
  const pb::Tcm& tcm = pe.tcm();

  const uint64_t cubes = uint64_t{chip.sips()} * sip.cubes();
  const uint64_t pes = cubes * cube.pes();
  const uint64_t channels = cubes * cube.hbm_pseudo_channels();

  const double pe_gbps = GigabytesPerSecond(
      static_cast<double>(pe.hbm_channels()) * hbm.bytes_per_cycle(), hbm.clock_mhz());
  const double cube_gbps = GigabytesPerSecond(
      static_cast<double>(cube.hbm_pseudo_channels()) * hbm.bytes_per_cycle(), hbm.clock_mhz());
  const double pe_tflops =
      2.0 * pe.gemm().array_rows() * pe.gemm().array_cols() * pe.clock_mhz() * 1e6 / 1e12;
  const double cube_tflops = pe_tflops * cube.pes();

  std::string out;
  absl::StrAppend(&out, "topology \"", chip.name(), "\"\n");
  absl::StrAppendFormat(&out, "  %s x %s (%dx%d mesh) x %s (%dx%d mesh)\n",
                        Count(chip.sips(), "SIP"), Count(sip.cubes(), "CUBE"),
                        sip.cube_mesh().rows(), sip.cube_mesh().cols(), Count(cube.pes(), "PE"),
                        cube.pe_mesh().rows(), cube.pe_mesh().cols());
  absl::StrAppendFormat(&out, "  total: %s, %s, %s, %s HBM\n", Count(cubes, "CUBE"),
                        Count(pes, "PE"), Count(channels, "HBM channel"),
                        Size(cubes * cube.hbm_bytes()));
  const struct {
    absl::string_view level;
    double gbps;
    double tflops;
  } kPeaks[] = {{"PE", pe_gbps, pe_tflops},
                {"CUBE", cube_gbps, cube_tflops},
                {"SIP", cube_gbps * sip.cubes(), cube_tflops * sip.cubes()},
                {"chip", cube_gbps * cubes, cube_tflops * cubes}};
  for (const auto& [level, gbps, tflops] : kPeaks) {
    absl::StrAppendFormat(&out, "  peak per %-4s  HBM %s GB/s, bf16 %s TFLOP/s\n", level,
                          Decimal(gbps), Decimal(tflops));
  }
  absl::StrAppendFormat(&out, "  balance per PE: %s FLOP/byte\n",
                        Decimal(pe_tflops * 1e3 / pe_gbps));
  absl::StrAppendFormat(&out, "  HBM   %s per CUBE, %s (%d per PE)\n", Size(cube.hbm_bytes()),
                        Count(cube.hbm_pseudo_channels(), "channel"), pe.hbm_channels());
  absl::StrAppendFormat(&out,
                        "  HBM   channel %d B/cycle @ %d MHz (%s GB/s), first byte %d cycles, "
                        "interleave %s\n",
                        hbm.bytes_per_cycle(), hbm.clock_mhz(),
                        Decimal(GigabytesPerSecond(hbm.bytes_per_cycle(), hbm.clock_mhz())),
                        hbm.first_byte_latency_cycles(), Size(hbm.interleave_bytes()));
  if (hbm.model() == pb::BANK) {
    const pb::HbmBankConfig& b = hbm.bank();
    absl::StrAppendFormat(&out,
                          "  HBM   timing: bank model, %d stack ids x %d bank groups x %d banks, %s "
                          "rows\n        %s refresh, %s controller (%d requests), %s map\n",
                          b.stack_ids(), b.bank_groups(), b.banks_per_group(), Size(b.row_bytes()),
                          pb::HbmRefresh_Name(b.refresh()), pb::HbmScheduler_Name(b.scheduler()),
                          b.queue_depth(), pb::HbmAddressMap_Name(b.address_map()));
  } else if (hbm.has_fifo_efficiency_ppm()) {
    absl::StrAppendFormat(&out, "  HBM   timing: FIFO at %s%% of peak on any pattern\n",
                          Decimal(hbm.fifo_efficiency_ppm() / 1e4));
  } else {
    absl::StrAppendFormat(&out, "  HBM   timing: FIFO at 100%% of peak on any pattern\n");
  }
  absl::StrAppendFormat(&out,
                        "  PE    %d MHz; GEMM %dx%d, fill/drain %d cycles; tile %d/%d/%d "
                        "(m/k/n), %d composites in flight\n",
                        pe.clock_mhz(), pe.gemm().array_rows(), pe.gemm().array_cols(),
                        pe.gemm().fill_drain_cycles(), pe.scheduler().tile_m(),
                        pe.scheduler().tile_k(), pe.scheduler().tile_n(),
                        pe.scheduler().max_inflight_composites());
  absl::StrAppendFormat(&out,
                        "  MATH  %d lanes/cycle, transcendental %d/cycle, reduction +%d "
                        "cycles, start-up %d cycles\n",
                        pe.math().lanes_per_cycle(), pe.math().transcendental_per_cycle(),
                        pe.math().reduction_extra_cycles(), pe.math().startup_cycles());
  absl::StrAppendFormat(&out, "  DMA   %s chunks, +%d cycles to another PE's channel\n",
                        Size(pe.dma().chunk_bytes()), pe.dma().remote_channel_extra_cycles());
  const uint64_t persistent =
      tcm.total_bytes() >= tcm.scratch_bytes() ? tcm.total_bytes() - tcm.scratch_bytes() : 0;
  absl::StrAppendFormat(&out, "  TCM   %s per PE: %s scratch + %s persistent\n",
                        Size(tcm.total_bytes()), Size(tcm.scratch_bytes()), Size(persistent));
  absl::StrAppend(&out, LinkLine("IPCQ", cube.ipcq().link(), "/hop"), "; queue ",
                  Size(cube.ipcq().queue_bytes()), ", chunk ", Size(cube.ipcq().chunk_bytes()),
                  "\n");
  absl::StrAppend(&out, LinkLine("NOC", sip.noc().link(), "/hop"), "; packet ",
                  Size(sip.noc().packet_bytes()), ", ", sip.noc().credits_per_link(),
                  " credits/link\n", "        endpoint queue ",
                  Size(sip.noc().endpoint_queue_bytes()),
                  " per PE (NOC messages no posted receive takes)\n");
  absl::StrAppendFormat(&out, "%s; port CUBE (%d,%d)\n", LinkLine("UCIe", chip.ucie().link(), ""),
                        chip.ucie().port_cube().row(), chip.ucie().port_cube().col());
  absl::StrAppendFormat(&out, "  %-20s %9s %4s %4s %5s %4s %4s %9s %12s %6s\n",
                        "issue cost, cycles", "primitive", "dot", "load", "store", "send", "recv",
                        "composite", "ex_composite", "resume");
  for (const pb::IssueCostProfile& p : pe.issue_cost_profiles()) {
    const std::string name = p.name() == pe.default_issue_cost_profile()
                                 ? absl::StrCat(p.name(), " (default)")
                                 : p.name();
    absl::StrAppendFormat(&out, "  %-20s %9d %4d %4d %5d %4d %4d %9d %12d %6d\n", name,
                          p.primitive_cycles(), p.dot_cycles(), p.load_cycles(), p.store_cycles(),
                          p.send_cycles(), p.recv_cycles(), p.composite_cycles(),
                          p.ex_composite_cycles(), p.resume_after_wait_cycles());
  }
  return out;
}

}  // namespace ahbm::topology
