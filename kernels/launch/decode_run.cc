#include "kernels/launch/decode_run.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/attention/baseline.h"
#include "kernels/attention/prefill_launch.h"
#include "kernels/host/npy.h"
#include "kernels/host/placement.h"
#include "kernels/launch/launcher.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "topology/ids.h"

namespace ahbm::launch {
namespace {

using kernels::DecodeConfig;
using kernels::QkvInputs;

// The long kernel's C when c is unset (and AUTO's): the largest C up to this that the chip
// hosts for the KV heads (the ADR's C = 8 on the full chip).
constexpr uint32_t kAutoMostC = 8;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// The largest C <= kAutoMostC whose CUBE Groups host cfg's KV heads (HostsKvHeads; cfg.c is
// overwritten), kAutoMostC when none does (the geometry then refuses with its message).
uint32_t LargestHostingC(const pb::Chip& chip, DecodeConfig cfg) {
  for (cfg.c = kAutoMostC; cfg.c > 1 && !kernels::HostsKvHeads(chip, cfg.Geometry()); --cfg.c) {
  }
  return kernels::HostsKvHeads(chip, cfg.Geometry()) ? cfg.c : kAutoMostC;
}

// The baseline a variant names (baseline.h), if it names one.
std::optional<kernels::BaselineKind> BaselineOf(const pb::Workload& w) {
  switch (w.variant()) {
    case pb::BASELINE_FANOUT:
      return kernels::BaselineKind::kFanout;
    case pb::BASELINE_FANOUT_GROUP:
      return kernels::BaselineKind::kFanoutGroup;
    case pb::BASELINE_REV1_TREE:
      return kernels::BaselineKind::kRev1Tree;
    default:
      return std::nullopt;
  }
}

// AUTO picks the kernel and its C: an explicit C, group shape, or a kv_per_cube the pick does
// not use is refused, never silently overridden.
absl::Status CheckAutoFields(const pb::Workload& w, const AutoChoice& pick) {
  if (w.has_c()) {
    return Invalid("c: AUTO picks the kernel and its C; leave c unset or choose a variant");
  }
  if (w.has_group_rows() || w.has_group_cols()) {
    return Invalid(absl::StrCat(w.has_group_rows() ? "group_rows" : "group_cols",
                                ": AUTO picks the kernel and its C; leave the group shape unset "
                                "or choose a variant"));
  }
  if (w.has_kv_per_cube() && pick.variant != pb::SHORT_CONTEXT) {
    return Invalid(absl::StrCat("kv_per_cube: AUTO picks OPT3 (", pick.why,
                                "), which does not use it; leave it unset or choose a variant"));
  }
  return absl::OkStatus();
}

// "AUTO -> SHORT_CONTEXT (S 1024 < threshold 2049)", or the variant's name; when AUTO's
// geometry is not its default (C 8, kv_per_cube 1), what it picked and why.
std::string VariantLabel(const pb::Workload& w, const DecodeConfig& cfg) {
  if (w.variant() != pb::AUTO) {
    return pb::Variant_Name(w.variant() == pb::VARIANT_UNSPECIFIED ? pb::OPT3 : w.variant());
  }
  const AutoChoice pick = DispatchAuto(w, cfg.s);
  std::string geometry;
  if (pick.variant == pb::SHORT_CONTEXT && !w.has_kv_per_cube()) {
    geometry = absl::StrCat("; ", ShortKvPerCubeWhy(cfg.kv_per_cube, cfg.h_kv));
  } else if (pick.variant != pb::SHORT_CONTEXT && cfg.c != kAutoMostC) {
    geometry = absl::StrCat("; C ", cfg.c, ", the largest C <= ", kAutoMostC, " that hosts ",
                            cfg.h_kv, " KV heads");
  }
  return absl::StrCat("AUTO -> ", pb::Variant_Name(pick.variant), " (", pick.why, geometry, ")");
}

using U128 = unsigned __int128;

U128 AlignUp(U128 v, uint64_t align) { return (v + align - 1) / align * align; }

std::string GiB(U128 bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (uint64_t{1} << 30));
}

// The baselines' HBM per PE: one K and one V block per request (baseline_fanout: a query
// head's copy over the CUBE's P PEs; baseline_rev1_tree: a KV head over P PEs;
// baseline_fanout_group: a KV head over the C·P ranks), q and O (LaunchBaseline's allocations,
// 256 B aligned).
absl::Status CheckBaselineHbm(const pb::Chip& chip, const DecodeConfig& cfg,
                              kernels::BaselineKind kind) {
  const uint64_t ranks = kind == kernels::BaselineKind::kFanoutGroup ? uint64_t{cfg.c} * cfg.p : cfg.p;
  const uint64_t rows = kind == kernels::BaselineKind::kFanout ? 1 : cfg.h_q / cfg.h_kv;
  U128 need = 0, block = 0;
  // Without request_lengths every request needs the same: one term times users.
  const uint32_t lengths = cfg.request_lengths.empty() ? 1 : cfg.users;
  const uint64_t copies = cfg.request_lengths.empty() ? cfg.users : 1;
  for (uint32_t u = 0; u < lengths; ++u) {
    block = std::max(block, (U128{cfg.MaxContextOf(u)} + ranks - 1) / ranks);
    need += copies * (2 * AlignUp(U128{rows} * cfg.d * 2, 256) +
                      2 * AlignUp((U128{cfg.MaxContextOf(u)} + ranks - 1) / ranks * cfg.d * 2, 256));
  }
  const uint64_t region = chip.sip().cube().hbm_bytes() / chip.sip().cube().pes();
  if (need <= region) return absl::OkStatus();
  const topology::ChipIndex index(chip);
  const uint32_t pe = cfg.sip * index.cubes_per_sip() * index.pes_per_cube();
  const char* field = cfg.max_context != 0         ? "max_context"
                      : !cfg.request_lengths.empty() ? "request_lengths"
                      : cfg.users > 1               ? "s, users"
                                                    : "s";
  return Invalid(absl::StrCat(field, ": the baseline's K and V blocks (up to ", static_cast<uint64_t>(block),
                              " keys per PE, ", cfg.users, " request(s)) need ", GiB(need),
                              " of HBM on ", host::PeName(index, pe), ", its region holds ", region,
                              " B (", GiB(region), ")"));
}

// The baselines' TCM and messages (BaselineRank in baseline.cc; every instance serves one
// query row): per instance the persistent q [1, d] bf16, m (x2), l and O [1, d] fp32; in
// scratch the larger of the one-shot block's Sj and centred [1, B] fp32 and P [1, B] bf16,
// a fan-out step's received m, l, O and MergeInto's three columns and O·sb, and the stored
// O [1, d] bf16 (64 B aligned). A PE hosts users instances (baseline_fanout_group: users x G).
// Each instance sends its m, l, O before it receives (the ring's first step), so the three
// must fit the receiver's IPCQ queue (baseline_fanout_group with C > 1: also the NOC
// endpoint queue), or every rank waits on its send.
absl::Status CheckBaselineTcm(const pb::Chip& chip, const DecodeConfig& cfg,
                              kernels::BaselineKind kind) {
  const bool group = kind == kernels::BaselineKind::kFanoutGroup;
  // Rev1Rank (BASELINE_REV1_TREE) tiles its KV and reduces by a tree: not this check.
  if (kind == kernels::BaselineKind::kRev1Tree) return absl::OkStatus();
  const uint64_t ranks = group ? uint64_t{cfg.c} * cfg.p : cfg.p;
  const uint64_t d = cfg.d, col = 64;
  uint64_t block = 0;
  for (uint32_t u = 0; u < (cfg.request_lengths.empty() ? 1 : cfg.users); ++u) {
    block = std::max<uint64_t>(block, (cfg.MaxContextOf(u) + ranks - 1) / ranks);
  }
  const uint64_t persistent = kernels::Align64(d * 2) + 3 * col + kernels::Align64(d * 4);
  const uint64_t fold = 2 * kernels::Align64(block * 4) + kernels::Align64(block * 2);
  const uint64_t step = ranks > 1 ? 6 * col + 2 * kernels::Align64(d * 4) : 0;
  const uint64_t scratch = std::max({fold, step, kernels::Align64(d * 2)});
  const topology::ChipIndex index(chip);
  const std::string pe = host::PeName(index, cfg.sip * index.cubes_per_sip() * index.pes_per_cube());
  const std::string name = group ? "BASELINE_FANOUT_GROUP" : "BASELINE_FANOUT";
  if (ranks > 1) {
    const uint64_t message = 2 * 4 + d * 4;  // m, l [1, 1] and O [1, d] fp32
    uint64_t queue = chip.sip().cube().ipcq().queue_bytes();
    if (group && cfg.c > 1) queue = std::min(queue, chip.sip().noc().endpoint_queue_bytes());
    if (message > queue) {
      return Invalid(absl::StrCat("d: ", name, " sends each rank's m, l and O (", message,
                                  " B at d = ", d, ") to its ring successor before it receives; "
                                  "they exceed the ", queue, " B queue, so every rank would wait "
                                  "on its send; at most d = ", (queue - 8) / 4, " fits"));
    }
  }
  const uint64_t instances = uint64_t{cfg.users} * (group ? cfg.h_q / cfg.h_kv : 1);
  const kernels::TcmShare alone = kernels::TcmShareOf(chip, 1);
  if (persistent > alone.persistent || scratch > alone.scratch) {
    const bool in_persistent = persistent > alone.persistent;
    const char* field = !in_persistent && fold == scratch
                            ? (cfg.max_context != 0             ? "max_context"
                               : !cfg.request_lengths.empty() ? "request_lengths"
                                                              : "s")
                            : "d";
    return Invalid(absl::StrCat(
        field, ": one ", name, " instance on ", pe, " needs ",
        in_persistent ? persistent : scratch, " B of the TCM ",
        in_persistent ? "persistent arena (q, m, l, O)"
                      : "scratch arena (the block's scores, a fan-out step's received m, l, O "
                        "and merge temporaries)",
        " at d = ", d, ", ", block, " keys per rank; it holds ",
        in_persistent ? alone.persistent : alone.scratch, " B"));
  }
  const kernels::TcmShare share = kernels::TcmShareOf(chip, instances);
  if (persistent > share.persistent || scratch > share.scratch) {
    const bool in_persistent = persistent > share.persistent;
    const char* field = cfg.users > 1 || !group ? "users" : "h_q";
    return Invalid(absl::StrCat(
        field, ": ", cfg.users, " request(s)", group ? absl::StrCat(" x G = ", cfg.h_q / cfg.h_kv) : "",
        " = ", instances, " ", name, " instances on ", pe, " need ",
        in_persistent ? persistent : scratch, " B of TCM ",
        in_persistent ? "persistent" : "scratch", " each; the arena gives each ",
        in_persistent ? share.persistent : share.scratch, " B"));
  }
  return absl::OkStatus();
}

// Data mode: inputs (and the copy of request 0's in the result), outputs as float, and the
// HBM image of K, V, Q, O (bf16, per rank, 64 KiB pages) against kDataModeHostBytes.
absl::Status CheckDataModeMemory(const DecodeConfig& cfg, std::optional<kernels::BaselineKind> kind) {
  const uint64_t page = 64 << 10;
  const U128 q = U128{cfg.h_q} * cfg.t_q * cfg.d;
  const bool one_cube = kind && *kind != kernels::BaselineKind::kFanoutGroup;
  const bool baseline = kind.has_value();
  const uint64_t ranks = one_cube ? cfg.p : uint64_t{cfg.c} * cfg.p;
  // K/V copies: per query head for baseline_fanout, else per KV head.
  const uint64_t shards = kind == kernels::BaselineKind::kFanout ? cfg.h_q : cfg.h_kv;
  U128 bytes = 0;
  // Without request_lengths every request is alike: request 0, then the rest at once.
  const uint32_t lengths = cfg.request_lengths.empty() ? std::min(cfg.users, 2u) : cfg.users;
  for (uint32_t u = 0; u < lengths; ++u) {
    const U128 kv = U128{cfg.h_kv} * cfg.ContextOf(u) * cfg.d;
    const U128 block = (U128{cfg.MaxContextOf(u)} + ranks - 1) / ranks;
    const U128 slots =
        baseline || cfg.k_layout != kernels::KLayout::kTileMajor ? block : AlignUp(block, cfg.tile);
    const U128 image = U128{shards} * ranks * (AlignUp(slots * cfg.d * 2, page) +
                                              AlignUp(block * cfg.d * 2, page) + page) +
                       2 * q * ranks;
    const U128 copies = cfg.request_lengths.empty() && u == 1 ? cfg.users - 1 : 1;
    bytes += copies * (4 * (2 * kv + 2 * q) + image);
    if (u == 0) bytes += 4 * (2 * kv + q);
  }
  if (bytes <= kDataModeHostBytes) return absl::OkStatus();
  return Invalid(absl::StrCat("data: data mode would hold ~", GiB(bytes),
                              " on the host (inputs, outputs, the HBM image of K, V, Q, O), above "
                              "its bound of ", GiB(kDataModeHostBytes),
                              " (kDataModeHostBytes); use timing mode, a shorter s or fewer users"));
}

// Everything that must fit before a run starts (decode_run.h "Capacity").
absl::Status CheckCapacity(const pb::Chip& chip, const DecodeConfig& cfg, const pb::Workload& w) {
  const std::optional<kernels::BaselineKind> kind = BaselineOf(w);
  RETURN_IF_ERROR(kind ? CheckBaselineHbm(chip, cfg, *kind)
      : kernels::CheckDecodeCapacity(chip, cfg));
  if (kind) {
    RETURN_IF_ERROR(CheckBaselineTcm(chip, cfg, *kind));
  }
  return w.data() ? CheckDataModeMemory(cfg, kind) : absl::OkStatus();
}

// The sweep's forms (decode.h): lookahead, one_shot; `cfg` has its variant and geometry.
// - lookahead: OPT3 (and SHORT_CONTEXT, AUTO: both run opt3) and OPT2_LOOKAHEAD, 0 .. the
//   scheduler's max_inflight_composites - 1 (the P·V composite or softmax_pv of the tile
//   waited on must be admitted beside the issued-ahead ones). OPT1 is opt3 at lookahead 0, OPT2
//   the ADR's order; the baselines issue no composites: refused.
// - one_shot (ADR §5.2): OPT1, OPT3, OPT2 and SHORT_CONTEXT run with one tile of B keys per
//   rank (opt1 and opt3 then issue the same commands: Q·Kᵀ, softmax, P·V; opt2 one Q·Kᵀ and
//   one softmax_pv); not with tile. OPT2_LOOKAHEAD has nothing to issue ahead of one tile,
//   AUTO picks its own form, the baselines have their own: refused.
absl::Status ApplySweepFields(const pb::Chip& chip, const pb::Workload& w, DecodeConfig& cfg) {
  const pb::Variant v = w.variant() == pb::VARIANT_UNSPECIFIED ? pb::OPT3 : w.variant();
  const std::string name = pb::Variant_Name(v);
  if (w.has_lookahead()) {
    if (v == pb::OPT1) {
      return Invalid("lookahead: OPT1 issues nothing ahead (it is OPT3 at lookahead 0); use OPT3");
    }
    if (v != pb::OPT3 && v != pb::SHORT_CONTEXT && v != pb::AUTO && v != pb::OPT2_LOOKAHEAD) {
      return Invalid(absl::StrCat("lookahead: ", name, " does not use it (OPT3, SHORT_CONTEXT, "
                                  "AUTO and OPT2_LOOKAHEAD do)"));
    }
    const uint32_t inflight = chip.sip().cube().pe().scheduler().max_inflight_composites();
    if (w.lookahead() >= inflight) {
      return Invalid(absl::StrCat("lookahead: ", w.lookahead(), " composites issued ahead need ",
                                  w.lookahead() + 1, " in flight with the one waited on; the "
                                  "scheduler admits max_inflight_composites = ", inflight,
                                  ": at most ", inflight - 1));
    }
    cfg.lookahead = w.lookahead();
  }
  if (w.has_one_shot()) {
    if (v != pb::OPT1 && v != pb::OPT3 && v != pb::OPT2 && v != pb::SHORT_CONTEXT) {
      return Invalid(absl::StrCat("one_shot: ", name, " does not use it (OPT1, OPT3, OPT2 and "
                                  "SHORT_CONTEXT do)"));
    }
    if (w.has_tile()) {
      return Invalid("tile: one_shot makes each rank's whole block one tile; leave tile unset");
    }
    cfg.one_shot = w.one_shot();
  }
  if (cfg.one_shot) {
    const uint64_t block = kernels::OneShotTile(cfg);
    if (block > UINT32_MAX) {
      return Invalid(absl::StrCat("one_shot: a rank's ", block, " keys cannot be one tile"));
    }
    cfg.tile = static_cast<uint32_t>(block);
  }
  return absl::OkStatus();
}

// The workload's shape, requests and reduce options, with their defaults; the variant comes
// next. Unset geometry follows the chip: P = the CUBE's PEs; C the largest C <= 8 that hosts
// the KV heads.
absl::StatusOr<DecodeConfig> ShapeConfigOf(const pb::Chip& chip, const pb::Workload& w) {
  DecodeConfig cfg;
  cfg.h_q = w.has_h_q() ? w.h_q() : 64u;
  cfg.h_kv = w.has_h_kv() ? w.h_kv() : 8u;
  cfg.d = w.has_d() ? w.d() : 128u;
  cfg.t_q = w.has_t_q() ? w.t_q() : 1u;
  cfg.s = w.s();
  cfg.max_context = w.max_context();
  cfg.p = w.has_p() ? w.p() : topology::ChipIndex(chip).pes_per_cube();
  cfg.group_rows = w.group_rows();
  cfg.group_cols = w.group_cols();
  cfg.tile = w.has_tile() ? w.tile() : 256u;
  cfg.sip = w.sip();
  cfg.c = w.has_c() ? w.c() : LargestHostingC(chip, cfg);
  cfg.start_cube = w.start_cube();
  cfg.start_pe = w.start_pe();
  cfg.rotate_by_request = !w.no_rotation();
  cfg.kv_bank_interleaved = w.kv_bank_layout() == pb::INTERLEAVED;
  ASSIGN_OR_RETURN(const RequestBatch batch,
                   RequestBatchOf(w, "context length", "the context length, new token included"));
  cfg.users = batch.users;
  cfg.s = batch.s;
  cfg.request_lengths = batch.lengths;
  cfg.packed_payload = w.reduce_payload() == pb::PACKED;
  cfg.fused_merge = w.reduce_merge() == pb::FUSED;
  return cfg;
}

// AUTO (DispatchAuto; threshold default measured, decode_run.h): OPT3 on the largest C that
// hosts the KV heads, or the short kernel on the fewest KV heads per CUBE the chip hosts (1
// when none does: the geometry refuses).
absl::Status ApplyAuto(const pb::Chip& chip, const pb::Workload& w, DecodeConfig& cfg) {
  const AutoChoice pick = DispatchAuto(w, cfg.s);
  RETURN_IF_ERROR(CheckAutoFields(w, pick));
  cfg.variant = kernels::DecodeVariant::kOpt3;
  if (pick.variant != pb::SHORT_CONTEXT) {
    cfg.c = LargestHostingC(chip, cfg);  // c is unset (CheckAutoFields)
    return absl::OkStatus();
  }
  cfg.c = 1;
  if (w.has_kv_per_cube()) {
    cfg.kv_per_cube = w.kv_per_cube();
    return absl::OkStatus();
  }
  for (cfg.kv_per_cube = 1; cfg.kv_per_cube < 8 && !kernels::HostsKvHeads(chip, cfg.Geometry());
       cfg.kv_per_cube *= 2) {
  }
  if (!kernels::HostsKvHeads(chip, cfg.Geometry())) cfg.kv_per_cube = 1;
  return absl::OkStatus();
}

// The variant's kernel and the fields it fixes or refuses (C, kv_per_cube).
absl::Status ApplyVariant(const pb::Chip& chip, const pb::Workload& w, DecodeConfig& cfg) {
  switch (w.variant()) {
    case pb::VARIANT_UNSPECIFIED:
    case pb::OPT3:
      cfg.variant = kernels::DecodeVariant::kOpt3;
      return absl::OkStatus();
    case pb::OPT1:
      cfg.variant = kernels::DecodeVariant::kOpt1;
      return absl::OkStatus();
    case pb::OPT2:
      cfg.variant = kernels::DecodeVariant::kOpt2;
      return absl::OkStatus();
    case pb::OPT2_LOOKAHEAD:
      cfg.variant = kernels::DecodeVariant::kOpt2Lookahead;
      return absl::OkStatus();
    case pb::BASELINE_DOT:
      cfg.variant = kernels::DecodeVariant::kBaselineDot;
      return absl::OkStatus();
    case pb::BASELINE_FANOUT:
    case pb::BASELINE_REV1_TREE:
      // One head per CUBE (baseline.h): C = 1, a group of one CUBE.
      for (const auto& [field, value] : {std::pair<const char*, uint32_t>{"c", w.c()},
                                         {"group_rows", w.group_rows()},
                                         {"group_cols", w.group_cols()}}) {
        if (value > 1) {
          return Invalid(absl::StrCat(field, ": ", pb::Variant_Name(w.variant()),
                                      " keeps a head in one CUBE (C = 1); got ", value));
        }
      }
      cfg.c = 1;
      return absl::OkStatus();
    case pb::BASELINE_FANOUT_GROUP:
      return absl::OkStatus();
    case pb::SHORT_CONTEXT:
      cfg.variant = kernels::DecodeVariant::kOpt3;
      cfg.kv_per_cube = w.has_kv_per_cube() ? w.kv_per_cube() : 1u;
      if (w.c() > 1) {
        return Invalid(absl::StrCat("c: SHORT_CONTEXT keeps whole heads per CUBE (C = 1); got ",
                                    w.c()));
      }
      cfg.c = 1;
      return absl::OkStatus();
    case pb::AUTO:
      return ApplyAuto(chip, w, cfg);
    default:
      return Invalid(absl::StrCat("variant: ", pb::Variant_Name(w.variant()),
                                  " is not a DECODE variant (OPT1, OPT2, OPT3, "
                                  "OPT2_LOOKAHEAD, SHORT_CONTEXT, AUTO, BASELINE_FANOUT, "
                                  "BASELINE_FANOUT_GROUP, BASELINE_REV1_TREE, BASELINE_DOT are)"));
  }
}

// level1_reduce / level2_reduce as the kernels' reduce shapes (ADR-0060 rev2 §4).
absl::Status ApplyReduceTopologies(const pb::Workload& w, DecodeConfig& cfg) {
  for (const auto& [field, topo, out] :
       {std::tuple<const char*, pb::ReduceTopology, kernels::ReduceShape*>{
            "level1_reduce", w.level1_reduce(), &cfg.level1},
        {"level2_reduce", w.level2_reduce(), &cfg.level2}}) {
    if (topo == pb::REDUCE_TOPOLOGY_UNSPECIFIED || topo == pb::TREE) {
      *out = kernels::ReduceShape::kTree;
    } else if (topo == pb::CHAIN) {
      *out = kernels::ReduceShape::kChain;
    } else if (topo == pb::RING_REDUCE) {
      if (w.variant() == pb::BASELINE_REV1_TREE && out == &cfg.level2) {
        return Invalid("level2_reduce: BASELINE_REV1_TREE reduces by rev1's tree (TREE or "
                       "CHAIN); the chunked ring is the ADR kernels'");
      }
      *out = kernels::ReduceShape::kRing;
    } else {
      return Invalid(absl::StrCat(field, ": unknown value ", static_cast<int>(topo)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DecodeConfig> ConfigOf(const pb::Chip& chip, const pb::Workload& w,
                                      std::vector<uint32_t>* cubes_out) {
  ASSIGN_OR_RETURN(DecodeConfig cfg, ShapeConfigOf(chip, w));
  const bool baseline_variant = w.variant() == pb::BASELINE_FANOUT ||
                                w.variant() == pb::BASELINE_FANOUT_GROUP ||
                                w.variant() == pb::BASELINE_REV1_TREE;
  if (baseline_variant && (cfg.packed_payload || cfg.fused_merge)) {
    return Invalid(absl::StrCat(cfg.packed_payload ? "reduce_payload" : "reduce_merge", ": ",
                                pb::Variant_Name(w.variant()),
                                " does not run the ADR reduce (the ADR kernels do)"));
  }
  RETURN_IF_ERROR(CheckDispatchFields(w));
  if (w.has_tile() && (w.variant() == pb::BASELINE_FANOUT || w.variant() == pb::BASELINE_FANOUT_GROUP)) {
    return Invalid(absl::StrCat("tile: ", pb::Variant_Name(w.variant()),
                                " reads each rank's whole KV block with one blocking dot for "
                                "q·Kᵀ and one for P·V; it has no KV tile (leave tile unset)"));
  }
  RETURN_IF_ERROR(ApplyVariant(chip, w, cfg));
  RETURN_IF_ERROR(ApplySweepFields(chip, w, cfg));
  RETURN_IF_ERROR(ApplyReduceTopologies(w, cfg));
  ASSIGN_OR_RETURN(cfg.k_layout, KLayoutOf(w, baseline_variant));
  // Geometry checks (the launcher's, without placing anything).
  const std::optional<kernels::BaselineKind> baseline = BaselineOf(w);
  ASSIGN_OR_RETURN(*cubes_out, baseline ? kernels::BaselineCubes(chip, cfg, *baseline)
                                        : kernels::DecodeCubes(chip, cfg));
  RETURN_IF_ERROR(CheckCapacity(chip, cfg, w));
  return cfg;
}

}  // namespace

AutoChoice DispatchAuto(const pb::Workload& w, uint64_t s) {
  AutoChoice pick;
  const bool prefill = w.kernel() == pb::PREFILL;
  pick.threshold = w.has_short_long_threshold()
                       ? w.short_long_threshold()  // 0: always the long kernel
                       : prefill ? kPrefillShortLongThreshold : kShortLongThreshold;
  const bool is_short = s < pick.threshold;
  pick.variant = is_short ? pb::SHORT_CONTEXT : prefill ? pb::RING : pb::OPT3;
  pick.why = absl::StrCat("S ", s, is_short ? " < " : " >= ", "threshold ", pick.threshold);
  return pick;
}

std::string ShortKvPerCubeWhy(uint32_t kv_per_cube, uint32_t h_kv) {
  return absl::StrCat("kv_per_cube ", kv_per_cube, ", the fewest KV heads per CUBE that host ",
                      h_kv == 1 ? std::string("the KV head") : absl::StrCat("the ", h_kv, " KV heads"),
                      " (latency grows with heads per CUBE)");
}

absl::StatusOr<kernels::KLayout> KLayoutOf(const pb::Workload& w, bool own_layout) {
  if (own_layout && w.has_k_layout()) {
    return Invalid(absl::StrCat("k_layout: ", pb::Variant_Name(w.variant()),
                                " reads each rank's K as one [d, B] block of its own; k_layout "
                                "applies to the ADR kernels (leave it unset)"));
  }
  switch (w.k_layout()) {
    case pb::K_LAYOUT_UNSPECIFIED:
    case pb::TILE_MAJOR:
      return kernels::KLayout::kTileMajor;
    case pb::TRANSPOSED:
      return kernels::KLayout::kTransposed;
    case pb::ROW_MAJOR:
      return kernels::KLayout::kRowMajor;
    default:
      return Invalid(absl::StrCat("k_layout: unknown value ", static_cast<int>(w.k_layout())));
  }
}

std::string KLayoutText(kernels::KLayout layout) {
  if (layout == kernels::KLayout::kTileMajor) return "";
  return absl::StrCat(", K ", kernels::KLayoutName(layout));
}

absl::StatusOr<DecodeConfig> DecodeConfigOf(const pb::Chip& chip, const pb::Workload& w) {
  std::vector<uint32_t> cubes;
  return ConfigOf(chip, w, &cubes);
}

std::vector<pb::CommHop> DecodeCommHops(const DecodeConfig& cfg,
                                        const kernels::DecodeLaunch& launch) {
  const uint64_t rows = uint64_t{launch.g} * cfg.t_q;
  const uint64_t small = rows * 4, big = rows * cfg.d * 4;  // m or l, and O (fp32)
  std::vector<pb::CommHop> hops;
  for (const auto& [link, rounds, nodes] :
       {std::tuple{pb::CommHop::IPCQ, launch.level2_rounds, launch.level2_ring},
        std::tuple{pb::CommHop::NOC, launch.level1_rounds, launch.level1_ring}}) {
    if (nodes == 0) {
      pb::CommHop& hop = hops.emplace_back();
      hop.set_link(link);
      hop.set_rounds(rounds);
      for (uint64_t bytes : {small, small, big}) hop.add_message_bytes(bytes);
      continue;
    }
    // The chunked ring: nodes - 1 reduce-scatter rounds of a chunk's m, l and O columns (the
    // widest chunk), then nodes - 1 gather rounds of its O columns.
    const uint64_t chunk = rows * kernels::RingChunk(cfg.d, nodes, 0).count * 4;
    pb::CommHop& scatter = hops.emplace_back();
    scatter.set_link(link);
    scatter.set_rounds(nodes - 1);
    for (uint64_t bytes : {small, small, chunk}) scatter.add_message_bytes(bytes);
    pb::CommHop& gather = hops.emplace_back();
    gather.set_link(link);
    gather.set_rounds(nodes - 1);
    gather.add_message_bytes(chunk);
  }
  return hops;
}

namespace {

class DecodePlan final : public QkvPlan {
 public:
  DecodePlan(const pb::Chip& chip, const pb::Workload& w, DecodeConfig cfg,
             std::vector<uint32_t> cubes)
      : chip_(chip),
        w_(w),
        cfg_(std::move(cfg)),
        cubes_(std::move(cubes)),
        baseline_(BaselineOf(w)) {}

  std::vector<uint32_t> Cubes() const override { return cubes_; }
  absl::StatusOr<std::vector<std::vector<uint32_t>>> CubeSets() const override {
    return baseline_ ? kernels::BaselineCubeSets(chip_, cfg_, *baseline_)
                     : kernels::DecodeCubeSets(chip_, cfg_);
  }

  std::string OneGroupRefusal() const override {
    // Every KV head's CUBE Group (a query head's CUBE for baseline_fanout) runs the same
    // instances on the same requests; the short kernel with kv_per_cube > 1 shares CUBEs
    // between heads (its sets overlap, which RunWorkload refuses too).
    if (cfg_.kv_per_cube > 1) return "kv_per_cube > 1 puts several KV heads on one CUBE";
    return "";
  }

  std::string Summary() const override {
    // The fan-out baselines have no KV tile (one dot per rank's block): no TILE.
    const bool tiled = baseline_ != kernels::BaselineKind::kFanout &&
                       baseline_ != kernels::BaselineKind::kFanoutGroup;
    std::string tile = tiled ? absl::StrCat(", TILE ", cfg_.tile) : "";
    if (cfg_.one_shot) tile = absl::StrCat(", one-shot (one TILE of ", cfg_.tile, " keys)");
    const bool ahead = cfg_.variant == kernels::DecodeVariant::kOpt2Lookahead ||
                       (cfg_.variant == kernels::DecodeVariant::kOpt3 && !baseline_);
    if (ahead && cfg_.lookahead != 1) absl::StrAppend(&tile, ", lookahead ", cfg_.lookahead);
    return absl::StrCat("decode ", VariantLabel(w_, cfg_), ": H_q ", cfg_.h_q, ", H_kv ",
                        cfg_.h_kv, ", d ", cfg_.d, ", S ", cfg_.s, ", T_q ", cfg_.t_q, ", C ",
                        cfg_.c, ", P ", cfg_.p, tile, KLayoutText(cfg_.k_layout),
                        ", users ", cfg_.users, w_.data() ? "; data mode" : "; timing mode");
  }

  absl::Status Launch(kernels::KernelRuntime& runtime, kernels::MemoryStore* store) override {
    absl::StatusOr<kernels::DecodeLaunch> launch =
        baseline_ ? kernels::LaunchBaseline(chip_, cfg_, runtime, store, inputs_, *baseline_)
                  : kernels::LaunchDecode(chip_, cfg_, runtime, store, inputs_);
    RETURN_IF_ERROR(launch.status());
    launch_ = *std::move(launch);
    return absl::OkStatus();
  }

  uint32_t Users() const override { return cfg_.users; }
  std::vector<uint64_t> QShape(uint32_t) const override { return {cfg_.h_q, cfg_.t_q, cfg_.d}; }
  std::vector<uint64_t> KvShape(uint32_t u) const override {
    return {cfg_.h_kv, cfg_.ContextOf(u), cfg_.d};
  }
  QkvInputs Draw(uint32_t u, std::mt19937_64& rng) const override {
    return kernels::RandomDecodeInputs(cfg_, u, rng);
  }
  absl::StatusOr<std::vector<float>> GatherOutput(const kernels::MemoryStore& store,
                                                  uint32_t u) const override {
    return kernels::GatherDecodeOutput(store, cfg_, launch_, u);
  }

  std::vector<pb::CommHop> CommHops() const override { return DecodeCommHops(cfg_, launch_); }
  uint32_t ReduceRounds() const override {
    return launch_.level2_rounds + launch_.level1_rounds;  // baselines too
  }
  uint32_t Level2Rounds() const override { return launch_.level2_rounds; }
  uint32_t Level1Rounds() const override { return launch_.level1_rounds; }

 private:
  const pb::Chip& chip_;
  const pb::Workload w_;
  const DecodeConfig cfg_;
  const std::vector<uint32_t> cubes_;
  const std::optional<kernels::BaselineKind> baseline_;
  kernels::DecodeLaunch launch_;
};

class DecodeLauncher final : public KernelLauncher {
 public:
  pb::Kernel kernel() const override { return pb::DECODE; }
  std::vector<std::string> Fields() const override {
    return {"variant",       "h_q",           "h_kv",           "d",
            "s",             "t_q",           "max_context",    "c",
            "p",             "group_rows",    "group_cols",     "tile",
            "users",         "start_cube",    "start_pe",       "no_rotation",
            "level1_reduce", "level2_reduce", "k_layout",       "sip",
            "kv_per_cube",   "request_lengths", "reduce_payload", "reduce_merge",
            "short_long_threshold", "kv_bank_layout", "one_shot", "lookahead",
            "max_inflight_composites"};
  }
  absl::StatusOr<std::unique_ptr<KernelPlan>> Prepare(const pb::Chip& chip,
                                                      const pb::Workload& w) const override {
    std::vector<uint32_t> cubes;
    absl::StatusOr<DecodeConfig> cfg = ConfigOf(chip, w, &cubes);
    RETURN_IF_ERROR(cfg.status());
    return std::make_unique<DecodePlan>(chip, w, *std::move(cfg), std::move(cubes));
  }
  CompareSpec Compare() const override {
    CompareSpec spec;
    spec.rows = {pb::OPT1,           pb::OPT3,        pb::OPT2,
                 pb::BASELINE_DOT,   pb::BASELINE_FANOUT, pb::BASELINE_REV1_TREE};
    spec.ratio_to = pb::BASELINE_FANOUT;
    spec.reduce_option_rows = {pb::OPT1, pb::OPT3, pb::OPT2};
    spec.default_s = 131072;
    spec.check = [](const pb::Workload& w, const std::vector<pb::Variant>& variants) {
      if (w.has_short_long_threshold() &&
          std::find(variants.begin(), variants.end(), pb::AUTO) == variants.end()) {
        return absl::InvalidArgumentError(
            "short_long_threshold: only the AUTO variant uses it; add auto to the variants");
      }
      return absl::OkStatus();
    };
    spec.row = [](pb::Workload& w) {
      if (w.variant() != pb::AUTO) w.clear_short_long_threshold();  // only AUTO uses it
      const pb::Variant v = w.variant();
      if (v != pb::OPT3 && v != pb::SHORT_CONTEXT && v != pb::AUTO && v != pb::OPT2_LOOKAHEAD) {
        w.clear_lookahead();  // only the issue-ahead forms use it (ApplySweepFields)
      }
      if (v != pb::OPT1 && v != pb::OPT3 && v != pb::OPT2 && v != pb::SHORT_CONTEXT) {
        w.clear_one_shot();
      }
      if (w.variant() == pb::BASELINE_FANOUT || w.variant() == pb::BASELINE_FANOUT_GROUP) {
        w.clear_tile();  // no KV tile (one dot per rank's block), whatever the other rows' tile
      }
      if (w.variant() == pb::BASELINE_FANOUT || w.variant() == pb::BASELINE_FANOUT_GROUP ||
          w.variant() == pb::BASELINE_REV1_TREE) {
        w.clear_k_layout();  // their own [d, B] block, whatever the other rows' layout
      }
      if (w.variant() == pb::BASELINE_REV1_TREE && w.level2_reduce() == pb::RING_REDUCE) {
        w.clear_level2_reduce();  // rev1's own tree, whatever the other rows' collective
      }
      if (w.variant() == pb::BASELINE_FANOUT || w.variant() == pb::BASELINE_REV1_TREE) {
        w.clear_c();  // one CUBE per head, whatever the other rows' C
        w.clear_group_rows();
        w.clear_group_cols();
      }
    };
    return spec;
  }
};

}  // namespace

AHBM_REGISTER_LAUNCHER(DecodeLauncher);

}  // namespace ahbm::launch
