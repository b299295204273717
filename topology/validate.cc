#include "topology/validate.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "base/text_escape.h"

namespace ahbm::topology {
namespace {

constexpr uint64_t kPicosecondsPerMicrosecond = 1'000'000;
// What the tool simulates (validate.h: limits): units per chip, banks and queue entries per
// HBM channel.
constexpr uint64_t kMaxUnits = uint64_t{1} << 20;
constexpr uint64_t kMaxBanksPerChannel = 1024;
constexpr uint64_t kMaxBankQueueDepth = 1024;
// Units of one PE besides its HBM channels: CPU, scheduler, DMA, GEMM, MATH and four IPCQ
// queues (topology/ids.h).
constexpr uint64_t kUnitsPerPe = 9;

// "sip.cube" + "pes" -> "sip.cube.pes".
std::string Field(absl::string_view path, absl::string_view field) {
  return absl::StrCat(path, ".", field);
}

template <typename... Args>
absl::Status Invalid(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}

absl::Status Present(bool present, absl::string_view path) {
  if (present) return absl::OkStatus();
  return Invalid(path, " is missing");
}

// For `optional` fields where 0 is legal: they must still be written down.
absl::Status Set(bool has, absl::string_view path) {
  if (has) return absl::OkStatus();
  return Invalid(path, " is missing (0 is allowed, but it must be set)");
}

absl::Status Positive(absl::string_view path, uint64_t value) {
  if (value > 0) return absl::OkStatus();
  return Invalid(path, " must be > 0 (got ", value, ")");
}

absl::Status Clock(absl::string_view path, uint32_t clock_mhz) {
  RETURN_IF_ERROR(Positive(path, clock_mhz));
  if (kPicosecondsPerMicrosecond % clock_mhz == 0) return absl::OkStatus();
  return Invalid(path, " must divide ", kPicosecondsPerMicrosecond,
                 " so that one cycle is a whole number of picoseconds, the simulator's ",
                 "time base (got ", clock_mhz, ")");
}

// A product of counts: its decimal digits below 2^64, else "over 2^64".
std::string Decimal128(absl::uint128 value) {
  if (absl::Uint128High64(value) != 0) return "over 2^64";
  return absl::StrCat(absl::Uint128Low64(value));
}

bool IsPowerOfTwo(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

// `count` must equal `mesh.rows * mesh.cols`; the mesh itself is checked first.
absl::Status MeshHolds(const pb::MeshShape& mesh, absl::string_view mesh_path, uint64_t count,
                       absl::string_view count_path) {
  const std::string rows = Field(mesh_path, "rows");
  const std::string cols = Field(mesh_path, "cols");
  RETURN_IF_ERROR(Positive(rows, mesh.rows()));
  RETURN_IF_ERROR(Positive(cols, mesh.cols()));
  const uint64_t slots = uint64_t{mesh.rows()} * mesh.cols();
  if (count == slots) return absl::OkStatus();
  return Invalid(count_path, " (", count, ") must equal ", rows, " * ", cols, " (", mesh.rows(),
                 " * ", mesh.cols(), " = ", slots,
                 "): ", count > slots ? "the mesh cannot hold them" : "the mesh would have holes");
}

absl::Status ValidateLink(const pb::Link& link, absl::string_view path) {
  RETURN_IF_ERROR(Clock(Field(path, "clock_mhz"), link.clock_mhz()));
  RETURN_IF_ERROR(Positive(Field(path, "bytes_per_cycle"), link.bytes_per_cycle()));
  return Positive(Field(path, "latency_cycles"), link.latency_cycles());
}

// The bank model's fields (HbmChannel.model BANK).
absl::Status ValidateHbmBank(const pb::HbmChannel& hbm, absl::string_view path) {
  const pb::HbmBankConfig& b = hbm.bank();
  const std::string bank = Field(path, "bank");
  RETURN_IF_ERROR(Present(hbm.has_bank(), bank));
  const std::pair<const char*, uint32_t> positive[] = {
      {"stack_ids", b.stack_ids()}, {"bank_groups", b.bank_groups()},
      {"banks_per_group", b.banks_per_group()}, {"row_bytes", b.row_bytes()},
      {"burst_bytes", b.burst_bytes()}, {"burst_cycles", b.burst_cycles()},
      {"t_cl_cycles", b.t_cl_cycles()}, {"t_cwl_cycles", b.t_cwl_cycles()},
      {"t_rcd_rd_cycles", b.t_rcd_rd_cycles()}, {"t_rcd_wr_cycles", b.t_rcd_wr_cycles()},
      {"t_rp_cycles", b.t_rp_cycles()}, {"t_ras_cycles", b.t_ras_cycles()},
      {"t_rc_cycles", b.t_rc_cycles()}, {"t_wr_cycles", b.t_wr_cycles()},
      {"t_rtp_cycles", b.t_rtp_cycles()}, {"t_ccd_s_cycles", b.t_ccd_s_cycles()},
      {"t_ccd_l_cycles", b.t_ccd_l_cycles()}, {"t_ccd_r_cycles", b.t_ccd_r_cycles()},
      {"t_rrd_s_cycles", b.t_rrd_s_cycles()}, {"t_rrd_l_cycles", b.t_rrd_l_cycles()},
      {"t_faw_cycles", b.t_faw_cycles()}, {"t_wtr_s_cycles", b.t_wtr_s_cycles()},
      {"t_rtw_cycles", b.t_rtw_cycles()}, {"queue_depth", b.queue_depth()}};
  for (const auto& [name, value] : positive) {
    RETURN_IF_ERROR(Positive(Field(bank, name), value));
  }
  // Each channel keeps a state per bank and a request queue: bounded like the unit count.
  const absl::uint128 banks =
      absl::uint128{b.stack_ids()} * b.bank_groups() * b.banks_per_group();
  if (banks > kMaxBanksPerChannel) {
    return Invalid(Field(bank, "stack_ids"), " * bank_groups * banks_per_group (", b.stack_ids(),
                   " * ", b.bank_groups(), " * ", b.banks_per_group(), " = ",
                   Decimal128(banks), ") must be <= ", kMaxBanksPerChannel,
                   " banks per channel (HBM3 has 64)");
  }
  if (b.queue_depth() > kMaxBankQueueDepth) {
    return Invalid(Field(bank, "queue_depth"), " must be <= ", kMaxBankQueueDepth, " (got ",
                   b.queue_depth(), ")");
  }
  if (b.refresh() == pb::REFRESH_UNSPECIFIED) {
    return Invalid(Field(bank, "refresh"), " must be set (NO_REFRESH, ALL_BANK or PER_BANK)");
  }
  if (b.scheduler() == pb::SCHEDULER_UNSPECIFIED) {
    return Invalid(Field(bank, "scheduler"), " must be set (FR_FCFS or FCFS)");
  }
  if (b.address_map() == pb::ADDRESS_MAP_UNSPECIFIED) {
    return Invalid(Field(bank, "address_map"),
                   " must be set (BANK_GROUP_FIRST, COLUMN_FIRST or BANK_GROUP_FIRST_HASHED)");
  }
  if (b.row_bytes() % b.burst_bytes() != 0) {
    return Invalid(Field(bank, "row_bytes"), " (", b.row_bytes(), ") must be a multiple of ",
                   Field(bank, "burst_bytes"), " (", b.burst_bytes(), ")");
  }
  if (uint64_t{hbm.bytes_per_cycle()} * b.burst_cycles() != b.burst_bytes()) {
    return Invalid(Field(path, "bytes_per_cycle"), " (", hbm.bytes_per_cycle(),
                   ") must be the bank model's peak, ", Field(bank, "burst_bytes"), " / ",
                   Field(bank, "burst_cycles"), " (", b.burst_bytes(), " / ", b.burst_cycles(), ")");
  }
  if (hbm.interleave_bytes() % b.burst_bytes() != 0) {
    return Invalid(Field(path, "interleave_bytes"), " (", hbm.interleave_bytes(),
                   ") must be a multiple of ", Field(bank, "burst_bytes"), " (", b.burst_bytes(), ")");
  }
  const uint64_t idle = uint64_t{b.t_rcd_rd_cycles()} + b.t_cl_cycles() + b.burst_cycles();
  if (hbm.first_byte_latency_cycles() < idle) {
    return Invalid(Field(path, "first_byte_latency_cycles"), " (", hbm.first_byte_latency_cycles(),
                   ") must cover the DRAM's idle read, t_rcd_rd + t_cl + burst = ", idle, " cycles");
  }
  if (b.refresh() == pb::ALL_BANK) {
    RETURN_IF_ERROR(Positive(Field(bank, "t_rfc_cycles"), b.t_rfc_cycles()));
    if (b.t_refi_cycles() <= b.t_rfc_cycles()) {
      return Invalid(Field(bank, "t_refi_cycles"), " (", b.t_refi_cycles(), ") must exceed ",
                     Field(bank, "t_rfc_cycles"), " (", b.t_rfc_cycles(), ")");
    }
  }
  if (b.refresh() == pb::PER_BANK) {
    RETURN_IF_ERROR(Positive(Field(bank, "t_rfc_pb_cycles"), b.t_rfc_pb_cycles()));
    RETURN_IF_ERROR(Positive(Field(bank, "t_refi_pb_cycles"), b.t_refi_pb_cycles()));
    const uint64_t banks = uint64_t{b.stack_ids()} * b.bank_groups() * b.banks_per_group();
    if (uint64_t{b.t_refi_pb_cycles()} * banks <= b.t_rfc_pb_cycles()) {
      return Invalid(Field(bank, "t_refi_pb_cycles"), " (", b.t_refi_pb_cycles(), ") x ", banks,
                     " banks must exceed ", Field(bank, "t_rfc_pb_cycles"), " (",
                     b.t_rfc_pb_cycles(), ")");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateHbmChannel(const pb::HbmChannel& hbm, absl::string_view path) {
  RETURN_IF_ERROR(Clock(Field(path, "clock_mhz"), hbm.clock_mhz()));
  RETURN_IF_ERROR(Positive(Field(path, "bytes_per_cycle"), hbm.bytes_per_cycle()));
  RETURN_IF_ERROR(
      Positive(Field(path, "first_byte_latency_cycles"), hbm.first_byte_latency_cycles()));
  RETURN_IF_ERROR(Positive(Field(path, "interleave_bytes"), hbm.interleave_bytes()));
  if (hbm.has_fifo_efficiency_ppm()) {
    const std::string eff = Field(path, "fifo_efficiency_ppm");
    if (hbm.model() == pb::BANK) {
      return Invalid(eff, " is for the FIFO model; the BANK model times banks itself");
    }
    if (hbm.fifo_efficiency_ppm() == 0 || hbm.fifo_efficiency_ppm() > 1'000'000) {
      return Invalid(eff, " must be in [1, 1000000] (got ", hbm.fifo_efficiency_ppm(), ")");
    }
  }
  if (hbm.model() == pb::BANK) return ValidateHbmBank(hbm, path);
  if (hbm.has_bank()) {
    return Invalid(Field(path, "bank"), " is set but ", Field(path, "model"),
                   " is FIFO; set model: BANK to use it, or remove it");
  }
  return absl::OkStatus();
}

absl::Status ValidateGemm(const pb::GemmEngine& gemm, absl::string_view path) {
  RETURN_IF_ERROR(Positive(Field(path, "array_rows"), gemm.array_rows()));
  RETURN_IF_ERROR(Positive(Field(path, "array_cols"), gemm.array_cols()));
  return Set(gemm.has_fill_drain_cycles(), Field(path, "fill_drain_cycles"));
}

absl::Status ValidateMath(const pb::MathEngine& math, absl::string_view path) {
  RETURN_IF_ERROR(Positive(Field(path, "lanes_per_cycle"), math.lanes_per_cycle()));
  RETURN_IF_ERROR(
      Positive(Field(path, "transcendental_per_cycle"), math.transcendental_per_cycle()));
  RETURN_IF_ERROR(
      Set(math.has_reduction_extra_cycles(), Field(path, "reduction_extra_cycles")));
  return Set(math.has_startup_cycles(), Field(path, "startup_cycles"));
}

absl::Status ValidateDma(const pb::DmaEngine& dma, absl::string_view path) {
  const std::string chunk = Field(path, "chunk_bytes");
  RETURN_IF_ERROR(Positive(chunk, dma.chunk_bytes()));
  RETURN_IF_ERROR(
      Set(dma.has_remote_channel_extra_cycles(), Field(path, "remote_channel_extra_cycles")));
  if (IsPowerOfTwo(dma.chunk_bytes())) return absl::OkStatus();
  return Invalid(chunk, " must be a power of two (got ", dma.chunk_bytes(), ")");
}

absl::Status ValidateTcm(const pb::Tcm& tcm, absl::string_view path) {
  const std::string total = Field(path, "total_bytes");
  const std::string scratch = Field(path, "scratch_bytes");
  RETURN_IF_ERROR(Positive(total, tcm.total_bytes()));
  RETURN_IF_ERROR(Positive(scratch, tcm.scratch_bytes()));
  if (tcm.scratch_bytes() <= tcm.total_bytes()) return absl::OkStatus();
  return Invalid(scratch, " (", tcm.scratch_bytes(), ") must be <= ", total, " (",
                 tcm.total_bytes(), "): the scratch arena is part of the TCM");
}

absl::Status ValidateScheduler(const pb::Scheduler& scheduler, absl::string_view path) {
  RETURN_IF_ERROR(Positive(Field(path, "tile_m"), scheduler.tile_m()));
  RETURN_IF_ERROR(Positive(Field(path, "tile_k"), scheduler.tile_k()));
  RETURN_IF_ERROR(Positive(Field(path, "tile_n"), scheduler.tile_n()));
  return Positive(Field(path, "max_inflight_composites"), scheduler.max_inflight_composites());
}

absl::Status ValidateIssueCosts(const pb::IssueCostProfile& p, absl::string_view path) {
  const std::pair<bool, const char*> costs[] = {
      {p.has_primitive_cycles(), "primitive_cycles"},
      {p.has_dot_cycles(), "dot_cycles"},
      {p.has_load_cycles(), "load_cycles"},
      {p.has_store_cycles(), "store_cycles"},
      {p.has_send_cycles(), "send_cycles"},
      {p.has_recv_cycles(), "recv_cycles"},
      {p.has_composite_cycles(), "composite_cycles"},
      {p.has_ex_composite_cycles(), "ex_composite_cycles"},
      {p.has_resume_after_wait_cycles(), "resume_after_wait_cycles"},
  };
  for (const auto& [has, name] : costs) RETURN_IF_ERROR(Set(has, Field(path, name)));
  return absl::OkStatus();
}

absl::Status ValidateIssueCostProfiles(const pb::Pe& pe, absl::string_view path) {
  const std::string profiles = Field(path, "issue_cost_profiles");
  if (pe.issue_cost_profiles().empty()) {
    return Invalid(profiles, " must not be empty: at least one profile is required");
  }
  std::set<std::string, std::less<>> names;
  for (int i = 0; i < pe.issue_cost_profiles_size(); ++i) {
    const std::string& name = pe.issue_cost_profiles(i).name();
    const std::string name_path = absl::StrCat(profiles, "[", i, "].name");
    if (name.empty()) return Invalid(name_path, " must not be empty");
    RETURN_IF_ERROR(ValidateIssueCosts(pe.issue_cost_profiles(i),
                                            absl::StrCat(profiles, "[", i, "]")));
    if (!names.insert(name).second) {
      return Invalid(name_path, " \"", PrintableAscii(name), "\" is not unique");
    }
  }
  if (names.contains(pe.default_issue_cost_profile())) return absl::OkStatus();
  std::vector<std::string> listed;
  for (const pb::IssueCostProfile& profile : pe.issue_cost_profiles()) {
    listed.push_back(PrintableAscii(profile.name()));  // one line, whatever a name holds
  }
  return Invalid(Field(path, "default_issue_cost_profile"), " \"",
                 PrintableAscii(pe.default_issue_cost_profile()), "\" must name one of ",
                 profiles, " (", absl::StrJoin(listed, ", "), ")");
}

absl::Status ValidatePe(const pb::Pe& pe, absl::string_view path) {
  RETURN_IF_ERROR(Clock(Field(path, "clock_mhz"), pe.clock_mhz()));
  RETURN_IF_ERROR(Positive(Field(path, "hbm_channels"), pe.hbm_channels()));
  RETURN_IF_ERROR(Present(pe.has_gemm(), Field(path, "gemm")));
  RETURN_IF_ERROR(ValidateGemm(pe.gemm(), Field(path, "gemm")));
  RETURN_IF_ERROR(Present(pe.has_math(), Field(path, "math")));
  RETURN_IF_ERROR(ValidateMath(pe.math(), Field(path, "math")));
  RETURN_IF_ERROR(Present(pe.has_dma(), Field(path, "dma")));
  RETURN_IF_ERROR(ValidateDma(pe.dma(), Field(path, "dma")));
  RETURN_IF_ERROR(Present(pe.has_tcm(), Field(path, "tcm")));
  RETURN_IF_ERROR(ValidateTcm(pe.tcm(), Field(path, "tcm")));
  RETURN_IF_ERROR(Present(pe.has_scheduler(), Field(path, "scheduler")));
  RETURN_IF_ERROR(ValidateScheduler(pe.scheduler(), Field(path, "scheduler")));
  return ValidateIssueCostProfiles(pe, path);
}

absl::Status ValidateIpcq(const pb::Ipcq& ipcq, absl::string_view path) {
  RETURN_IF_ERROR(Present(ipcq.has_link(), Field(path, "link")));
  RETURN_IF_ERROR(ValidateLink(ipcq.link(), Field(path, "link")));
  const std::string queue = Field(path, "queue_bytes");
  const std::string chunk = Field(path, "chunk_bytes");
  RETURN_IF_ERROR(Positive(queue, ipcq.queue_bytes()));
  RETURN_IF_ERROR(Positive(chunk, ipcq.chunk_bytes()));
  if (ipcq.chunk_bytes() <= ipcq.queue_bytes()) return absl::OkStatus();
  return Invalid(chunk, " (", ipcq.chunk_bytes(), ") must be <= ", queue, " (", ipcq.queue_bytes(),
                 "): a larger chunk could never be sent");
}

absl::Status ValidateCube(const pb::Cube& cube, absl::string_view path) {
  const std::string pes = Field(path, "pes");
  const std::string channels = Field(path, "hbm_pseudo_channels");
  const std::string hbm_bytes = Field(path, "hbm_bytes");
  const std::string hbm_channel = Field(path, "hbm_channel");
  const std::string pe = Field(path, "pe");
  RETURN_IF_ERROR(Positive(pes, cube.pes()));
  RETURN_IF_ERROR(Present(cube.has_pe_mesh(), Field(path, "pe_mesh")));
  RETURN_IF_ERROR(MeshHolds(cube.pe_mesh(), Field(path, "pe_mesh"), cube.pes(), pes));
  RETURN_IF_ERROR(Positive(channels, cube.hbm_pseudo_channels()));
  RETURN_IF_ERROR(Positive(hbm_bytes, cube.hbm_bytes()));
  RETURN_IF_ERROR(Present(cube.has_hbm_channel(), hbm_channel));
  RETURN_IF_ERROR(ValidateHbmChannel(cube.hbm_channel(), hbm_channel));
  RETURN_IF_ERROR(Present(cube.has_pe(), pe));
  RETURN_IF_ERROR(ValidatePe(cube.pe(), pe));
  RETURN_IF_ERROR(Present(cube.has_ipcq(), Field(path, "ipcq")));
  RETURN_IF_ERROR(ValidateIpcq(cube.ipcq(), Field(path, "ipcq")));

  const uint64_t split = uint64_t{cube.pes()} * cube.pe().hbm_channels();
  if (cube.hbm_pseudo_channels() != split) {
    return Invalid(channels, " (", cube.hbm_pseudo_channels(), ") must equal ", pes, " * ",
                   Field(pe, "hbm_channels"), " (", cube.pes(), " * ", cube.pe().hbm_channels(),
                   " = ", split, "): every PE owns the same number of channels");
  }
  const uint64_t interleave = cube.hbm_channel().interleave_bytes();
  const uint64_t stripe = uint64_t{cube.hbm_pseudo_channels()} * interleave;
  if (cube.hbm_bytes() % stripe != 0) {
    return Invalid(hbm_bytes, " (", cube.hbm_bytes(), ") must be a multiple of ", channels, " * ",
                   Field(hbm_channel, "interleave_bytes"), " (", cube.hbm_pseudo_channels(), " * ",
                   interleave, " = ", stripe,
                   "): every channel holds the same whole number of interleave blocks");
  }
  const uint64_t dma_chunk = cube.pe().dma().chunk_bytes();
  if (interleave % dma_chunk != 0) {
    return Invalid(Field(pe, "dma.chunk_bytes"), " (", dma_chunk, ") must divide ",
                   Field(hbm_channel, "interleave_bytes"), " (", interleave,
                   "): a DMA chunk must not straddle two channels");
  }
  return absl::OkStatus();
}

absl::Status ValidateNoc(const pb::Noc& noc, absl::string_view path) {
  RETURN_IF_ERROR(Present(noc.has_link(), Field(path, "link")));
  RETURN_IF_ERROR(ValidateLink(noc.link(), Field(path, "link")));
  RETURN_IF_ERROR(Positive(Field(path, "packet_bytes"), noc.packet_bytes()));
  RETURN_IF_ERROR(Positive(Field(path, "credits_per_link"), noc.credits_per_link()));
  const std::string queue = Field(path, "endpoint_queue_bytes");
  RETURN_IF_ERROR(Positive(queue, noc.endpoint_queue_bytes()));
  if (noc.endpoint_queue_bytes() >= noc.packet_bytes()) return absl::OkStatus();
  return Invalid(queue, " (", noc.endpoint_queue_bytes(), ") must be >= ",
                 Field(path, "packet_bytes"), " (", noc.packet_bytes(),
                 "): the endpoint must hold at least one NOC packet");
}

absl::Status ValidateSip(const pb::Sip& sip, absl::string_view path) {
  const std::string cubes = Field(path, "cubes");
  RETURN_IF_ERROR(Positive(cubes, sip.cubes()));
  RETURN_IF_ERROR(Present(sip.has_cube_mesh(), Field(path, "cube_mesh")));
  RETURN_IF_ERROR(MeshHolds(sip.cube_mesh(), Field(path, "cube_mesh"), sip.cubes(), cubes));
  RETURN_IF_ERROR(Present(sip.has_cube(), Field(path, "cube")));
  RETURN_IF_ERROR(ValidateCube(sip.cube(), Field(path, "cube")));
  RETURN_IF_ERROR(Present(sip.has_noc(), Field(path, "noc")));
  return ValidateNoc(sip.noc(), Field(path, "noc"));
}

// Runs after the SIP passed, so sip.cube_mesh is known to be valid.
absl::Status ValidateUcie(const pb::Ucie& ucie, const pb::MeshShape& cube_mesh,
                          absl::string_view path) {
  RETURN_IF_ERROR(Present(ucie.has_link(), Field(path, "link")));
  RETURN_IF_ERROR(ValidateLink(ucie.link(), Field(path, "link")));
  const std::string port = Field(path, "port_cube");
  RETURN_IF_ERROR(Present(ucie.has_port_cube(), port));
  const pb::MeshCoord& coord = ucie.port_cube();
  if (coord.row() < cube_mesh.rows() && coord.col() < cube_mesh.cols()) {
    return absl::OkStatus();
  }
  return Invalid(port, " (row ", coord.row(), ", col ", coord.col(),
                 ") must lie inside sip.cube_mesh (", cube_mesh.rows(), " x ", cube_mesh.cols(),
                 ")");
}

// The chip's simulated units (topology/ids.h: per SIP one UCIe port, per CUBE one NOC router
// and its HBM channels, per PE kUnitsPerPe), counted without overflow, against kMaxUnits; and
// the chip's HBM against 64-bit byte counts. Runs after the SIP passed: every count is > 0.
absl::Status UnitsFit(const pb::Chip& chip) {
  const pb::Cube& cube = chip.sip().cube();
  const absl::uint128 cubes = absl::uint128{chip.sips()} * chip.sip().cubes();
  const absl::uint128 units =
      chip.sips() + cubes * (1 + kUnitsPerPe * cube.pes() + cube.hbm_pseudo_channels());
  if (units > kMaxUnits) {
    return Invalid("sips * sip.cubes * (1 NOC router + sip.cube.pes * ", kUnitsPerPe,
                   " + sip.cube.hbm_pseudo_channels) + sips (", chip.sips(), " * ",
                   chip.sip().cubes(), " * (1 + ", cube.pes(), " * ", kUnitsPerPe, " + ",
                   cube.hbm_pseudo_channels(), ") + ", chip.sips(), " = ", Decimal128(units),
                   " simulated units) must be <= ", kMaxUnits,
                   " (120 times chip_4sip's 8772; each costs ~2 KiB of host memory when "
                   "simulated)");
  }
  if (cubes * cube.hbm_bytes() > std::numeric_limits<uint64_t>::max()) {
    return Invalid("sips * sip.cubes * sip.cube.hbm_bytes (", chip.sips(), " * ",
                   chip.sip().cubes(), " * ", cube.hbm_bytes(),
                   ") must be < 2^64 bytes, the chip's HBM in 64-bit byte counts");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Validate(const pb::Chip& chip) {
  if (chip.name().empty()) return Invalid("name must not be empty");
  RETURN_IF_ERROR(Positive("sips", chip.sips()));
  RETURN_IF_ERROR(Present(chip.has_sip(), "sip"));
  RETURN_IF_ERROR(ValidateSip(chip.sip(), "sip"));
  RETURN_IF_ERROR(UnitsFit(chip));
  RETURN_IF_ERROR(Present(chip.has_ucie(), "ucie"));
  return ValidateUcie(chip.ucie(), chip.sip().cube_mesh(), "ucie");
}


}  // namespace ahbm::topology
