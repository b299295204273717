// `ahbm run --kernel=prefill` (and `ahbm compare --kernel=prefill`): the GQA prefill kernels of
// kernels/attention/prefill_launch.h on a workload.
//
// Contract:
// - Defaults (Llama3-70B, DESIGN §2/§4b) for fields left 0: h_q 64, h_kv 8, d 128, tile 128
//   keys, q_tile up to 128 GEMM rows balanced over the PEs (BalancedQTile), p = the CUBE's PEs, users 1,
//   variant RING (C = G), query_split ZIGZAG; t_q 0
//   = the whole prompt (T_q = S of each request), else the last t_q positions (chunked
//   prefill). `s` (or request_lengths) must be set.
// - Variants: FLASH (C = P = 1: c, p, query_split refused when set to anything else), RING
//   (c must be G), SHORT_CONTEXT (kv_per_cube 1, 2, 4 or 8, default 1; C = 1), AUTO
//   (DispatchAuto: SHORT_CONTEXT below the prefill threshold, else RING; c, group shape and
//   kv_per_cube refused as for decode), BASELINE_FANOUT (ADR §A's pre-ADR prefill, C = 1,
//   query rows split contiguously; kernels/attention/prefill_baseline.h), BASELINE_DOT (the
//   ring's placement with blocking dots, c as for RING); others refused.
// - k_layout (KLayoutOf, decode_run.h): TILE_MAJOR, TRANSPOSED or ROW_MAJOR for FLASH, RING,
//   SHORT_CONTEXT, AUTO and BASELINE_DOT; BASELINE_FANOUT reads K in a layout of its own and
//   refuses it (`ahbm compare` clears it for that row).
// - lookahead (FLASH, RING, SHORT_CONTEXT, AUTO; the baselines refuse it), ring_depth and
//   ring_message_bytes (RING, BASELINE_DOT, AUTO when it picks RING; refused elsewhere); the
//   kernel checks their ranges against the chip (prefill_launch.h). Set ones appear in the
//   report's workload line.
// - Data mode: q.npy [H_q, T_q, d], k.npy and v.npy [H_kv, S, d] (q<r>.npy ... per request),
//   or drawn from `seed` (RandomPrefillInputs); outputs o.npy [H_q, T_q, d] (o<r>.npy).
//   A data-mode run whose host estimate exceeds kDataModeHostBytes is refused (field data).
// - The report's roofline is the PE bound (the ring's rotations overlap its compute).
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/attention/prefill_launch.h"
#include "kernels/launch/decode_run.h"
#include "kernels/launch/launcher.h"
#include "topology/ids.h"

namespace ahbm::launch {
namespace {

using kernels::QkvInputs;
using kernels::PrefillConfig;
using kernels::PrefillVariant;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

const char* SplitName(kernels::QuerySplit s) {
  switch (s) {
    case kernels::QuerySplit::kContiguous:
      return "CONTIGUOUS";
    case kernels::QuerySplit::kStriped:
      return "STRIPED";
    case kernels::QuerySplit::kZigzag:
      break;
  }
  return "ZIGZAG";
}

// The default query tile: at most 128 GEMM rows, and as many tiles per PE of the split as the
// longest request's T_q needs, evenly: tokens = ceil(T_q / (P·k)) with k = ceil(T_q / (P·m)),
// m = 128 / rows per token, and k >= 2 on several PEs (zig-zag pairs need two tiles a PE). (A fixed 128 leaves 9 tiles on 8 PEs at T_q = 1152: one PE does
// twice the work; 16 tiles of 72 tokens do not.)
uint32_t BalancedQTile(const PrefillConfig& cfg) {
  const uint64_t g = cfg.RowsPerToken();
  const uint64_t most = std::max<uint64_t>(1, 128 / g);
  const uint64_t pes = cfg.variant == PrefillVariant::kFlash ? 1 : cfg.P();
  uint64_t tq = 0;
  // Without request_lengths every request has the same T_q (users may be huge).
  const uint32_t lengths = cfg.request_lengths.empty() ? 1 : cfg.users;
  for (uint32_t u = 0; u < lengths; ++u) tq = std::max(tq, cfg.QueriesOf(u));
  uint64_t k = std::max<uint64_t>(1, (tq + pes * most - 1) / (pes * most));
  // Two tiles per PE at least, so the zig-zag can pair an early tile with a late one — unless
  // that leaves a tile under the GEMM array's 8 rows.
  const uint64_t min_tokens = std::max<uint64_t>(1, 8 / g);
  if (pes > 1 && k < 2 && (tq + 2 * pes - 1) / (2 * pes) >= min_tokens) k = 2;
  const uint64_t tokens = std::max<uint64_t>(1, (tq + pes * k - 1) / (pes * k));
  return static_cast<uint32_t>(std::min(most, tokens) * g);
}

// The workload's shape, requests and query split, with their defaults (the variant comes next).
absl::StatusOr<PrefillConfig> ShapeConfigOf(const pb::Chip& chip, const pb::Workload& w) {
  PrefillConfig cfg;
  cfg.h_q = w.has_h_q() ? w.h_q() : 64u;
  cfg.h_kv = w.has_h_kv() ? w.h_kv() : 8u;
  cfg.d = w.has_d() ? w.d() : 128u;
  cfg.s = w.s();
  cfg.t_q = w.t_q();
  cfg.max_context = w.max_context();
  cfg.p = w.has_p() ? w.p() : topology::ChipIndex(chip).pes_per_cube();  // the CUBE's PEs
  cfg.group_rows = w.group_rows();
  cfg.group_cols = w.group_cols();
  cfg.tile = w.has_tile() ? w.tile() : 128u;
  cfg.q_tile = w.q_tile();  // 0: BalancedQTile, once the variant is known
  cfg.sip = w.sip();
  cfg.start_cube = w.start_cube();
  cfg.start_pe = w.start_pe();
  cfg.rotate_by_request = !w.no_rotation();
  cfg.kv_bank_interleaved = w.kv_bank_layout() == pb::INTERLEAVED;
  ASSIGN_OR_RETURN(const RequestBatch batch,
                   RequestBatchOf(w, "prompt length", "the prompt length"));
  cfg.users = batch.users;
  cfg.s = batch.s;
  cfg.request_lengths = batch.lengths;
  if (cfg.h_kv == 0 || cfg.h_q % cfg.h_kv != 0) {
    return Invalid(absl::StrCat("h_q: must be a positive multiple of h_kv = ", cfg.h_kv,
                                " (got ", cfg.h_q, ")"));
  }
  switch (w.query_split()) {
    case pb::QUERY_SPLIT_UNSPECIFIED:
    case pb::ZIGZAG:
      cfg.query_split = kernels::QuerySplit::kZigzag;
      break;
    case pb::CONTIGUOUS:
      cfg.query_split = kernels::QuerySplit::kContiguous;
      break;
    case pb::STRIPED:
      cfg.query_split = kernels::QuerySplit::kStriped;
      break;
    default:
      return Invalid(absl::StrCat("query_split: unknown value ", static_cast<int>(w.query_split())));
  }
  return cfg;
}

// AUTO's pick for prompt length `s` (DispatchAuto), refusing the fields it would override;
// `label` becomes "AUTO -> <VARIANT> (<why>)".
absl::StatusOr<pb::Variant> ResolveAuto(const pb::Workload& w, uint64_t s, std::string* label) {
  const AutoChoice pick = DispatchAuto(w, s);
  if (w.has_c() || w.has_group_rows() || w.has_group_cols()) {
    return Invalid(absl::StrCat(w.has_c() ? "c" : w.has_group_rows() ? "group_rows" : "group_cols",
                                ": AUTO picks the kernel and its C; leave it unset or choose a variant"));
  }
  if (w.has_kv_per_cube() && pick.variant != pb::SHORT_CONTEXT) {
    return Invalid(absl::StrCat("kv_per_cube: AUTO picks RING (", pick.why,
                                "), which does not use it; leave it unset or choose a variant"));
  }
  if ((w.has_ring_depth() || w.has_ring_message_bytes()) && pick.variant != pb::RING) {
    return Invalid(absl::StrCat(w.has_ring_depth() ? "ring_depth" : "ring_message_bytes",
                                ": AUTO picks ", pb::Variant_Name(pick.variant), " (", pick.why,
                                "), which has no ring; leave it unset or choose a variant"));
  }
  *label = absl::StrCat("AUTO -> ", pb::Variant_Name(pick.variant), " (", pick.why, ")");
  return pick.variant;
}

// The variant's kernel and the fields it fixes or refuses (C, P, kv_per_cube, query_split).
absl::Status ApplyVariant(const pb::Workload& w, pb::Variant variant, PrefillConfig& cfg) {
  switch (variant) {
    case pb::FLASH:
      cfg.variant = PrefillVariant::kFlash;
      if (w.c() > 1) return Invalid(absl::StrCat("c: FLASH runs without SP (C = P = 1); got ", w.c()));
      if (w.p() > 1) return Invalid(absl::StrCat("p: FLASH runs without SP (C = P = 1); got ", w.p()));
      if (w.query_split() != pb::QUERY_SPLIT_UNSPECIFIED) {
        return Invalid("query_split: FLASH runs on one PE per KV head; nothing to split");
      }
      cfg.p = 1;
      return absl::OkStatus();
    case pb::RING:
      cfg.variant = PrefillVariant::kRing;
      cfg.c = w.c();  // 0: G
      return absl::OkStatus();
    case pb::SHORT_CONTEXT:
      cfg.variant = PrefillVariant::kShortContext;
      cfg.kv_per_cube = w.has_kv_per_cube() ? w.kv_per_cube() : 1u;
      if (w.c() > 1) {
        return Invalid(absl::StrCat("c: SHORT_CONTEXT keeps whole heads per CUBE (C = 1); got ", w.c()));
      }
      return absl::OkStatus();
    case pb::BASELINE_FANOUT:
      cfg.variant = PrefillVariant::kBaselineFanout;
      if (w.c() > 1) {
        return Invalid(absl::StrCat("c: BASELINE_FANOUT keeps a query head in one CUBE (C = 1); got ",
                                    w.c()));
      }
      if (w.query_split() != pb::QUERY_SPLIT_UNSPECIFIED) {
        return Invalid("query_split: BASELINE_FANOUT splits query rows contiguously (ADR §A)");
      }
      return absl::OkStatus();
    case pb::BASELINE_DOT:
      cfg.variant = PrefillVariant::kBaselineDot;
      cfg.c = w.c();  // 0: G
      return absl::OkStatus();
    default:
      return Invalid(absl::StrCat("variant: ", pb::Variant_Name(variant),
                                  " is not a PREFILL variant (FLASH, RING, SHORT_CONTEXT, AUTO, "
                                  "BASELINE_FANOUT, BASELINE_DOT are)"));
  }
}

// The K layout and the pipeline and ring knobs (prefill_launch.h): a value given is a value
// used or refused.
absl::Status ApplyKnobs(const pb::Workload& w, pb::Variant variant, PrefillConfig& cfg) {
  ASSIGN_OR_RETURN(cfg.k_layout, KLayoutOf(w, cfg.variant == PrefillVariant::kBaselineFanout));
  if (w.has_lookahead()) {
    if (cfg.Baseline()) {
      return Invalid(absl::StrCat("lookahead: ", pb::Variant_Name(variant),
                                  " issues blocking dots; nothing to issue ahead"));
    }
    cfg.lookahead = w.lookahead();
  }
  if (!cfg.Ring() && (w.has_ring_depth() || w.has_ring_message_bytes())) {
    return Invalid(absl::StrCat(w.has_ring_depth() ? "ring_depth" : "ring_message_bytes", ": ",
                                pb::Variant_Name(variant), " has no ring (RING and BASELINE_DOT do)"));
  }
  if (w.has_ring_depth()) cfg.ring_depth = w.ring_depth();
  if (w.has_ring_message_bytes()) cfg.ring_message_bytes = w.ring_message_bytes();
  if (!w.has_q_tile()) cfg.q_tile = BalancedQTile(cfg);
  return absl::OkStatus();
}

// C = G is the ring's own rule, not a choice: when the chip has too few such groups, the hint
// is fewer KV heads, not another C.
absl::Status CheckRingHostsHeads(const pb::Chip& chip, const PrefillConfig& cfg) {
  kernels::GeometrySpec group;
  group.h_kv = cfg.h_kv;
  group.c = cfg.G();
  group.sip = cfg.sip;
  if (kernels::HostsKvHeads(chip, group)) return absl::OkStatus();
  const topology::ChipIndex index(chip);
  const uint32_t fit = index.cubes_per_sip() % group.c != 0 || cfg.sip >= index.sips()
                           ? 0
                           : index.cubes_per_sip() / group.c * (index.sips() - cfg.sip);
  return Invalid(absl::StrCat(
      "h_kv: the ring puts each KV head on C = G = ", group.c, " CUBEs (one query head each); ",
      cfg.h_kv, " KV heads need ", uint64_t{cfg.h_kv} * group.c, " CUBEs and the chip has ",
      fit, " such group(s) from SIP ", cfg.sip,
      fit > 0 ? absl::StrCat("; at most h_kv = ", fit, " fits (h_q = ", fit * cfg.G(), ")") : ""));
}

// Data mode keeps inputs, outputs and their HBM image on the host (4 B per value).
absl::Status CheckDataModeHostBytes(const PrefillConfig& cfg) {
  uint64_t values = 0;
  for (uint32_t u = 0; u < cfg.users; ++u) {
    values += 2 * uint64_t{cfg.h_q} * cfg.QueriesOf(u) * cfg.d +
              2 * uint64_t{cfg.h_kv} * cfg.ContextOf(u) * cfg.d;
  }
  if (3 * 4 * values > kDataModeHostBytes) {
    return Invalid(absl::StrCat("data: the inputs and outputs need about ", 12 * values >> 20,
                                " MiB of host memory, above the ", kDataModeHostBytes >> 20,
                                " MiB data-mode bound; run in timing mode"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PrefillConfig> ConfigOf(const pb::Chip& chip, const pb::Workload& w,
                                       std::string* label, std::vector<uint32_t>* cubes) {
  ASSIGN_OR_RETURN(PrefillConfig cfg, ShapeConfigOf(chip, w));
  RETURN_IF_ERROR(CheckDispatchFields(w));
  pb::Variant variant = w.variant() == pb::VARIANT_UNSPECIFIED ? pb::RING : w.variant();
  *label = pb::Variant_Name(variant);
  const bool auto_picked = variant == pb::AUTO;
  if (auto_picked) {
    ASSIGN_OR_RETURN(variant, ResolveAuto(w, cfg.s, label));
  }
  RETURN_IF_ERROR(ApplyVariant(w, variant, cfg));
  RETURN_IF_ERROR(ApplyKnobs(w, variant, cfg));
  if (auto_picked && variant == pb::SHORT_CONTEXT && !w.has_kv_per_cube()) {
    // The fewest KV heads per CUBE the chip hosts (ShortKvPerCubeWhy, decode_run.h); 1 when
    // none does (PrefillCubes below refuses it).
    for (cfg.kv_per_cube = 1; cfg.kv_per_cube < 8 && !kernels::PrefillCubes(chip, cfg).ok();
         cfg.kv_per_cube *= 2) {
    }
    if (!kernels::PrefillCubes(chip, cfg).ok()) cfg.kv_per_cube = 1;
    *label = absl::StrCat(label->substr(0, label->size() - 1), "; ",
                          ShortKvPerCubeWhy(cfg.kv_per_cube, cfg.h_kv), ")");
  }
  if (cfg.Ring() && cfg.c == 0) RETURN_IF_ERROR(CheckRingHostsHeads(chip, cfg));
  ASSIGN_OR_RETURN(*cubes, kernels::PrefillCubes(chip, cfg));
  if (w.data()) RETURN_IF_ERROR(CheckDataModeHostBytes(cfg));
  return cfg;
}

class PrefillPlan final : public QkvPlan {
 public:
  PrefillPlan(const pb::Chip& chip, const pb::Workload& w, PrefillConfig cfg, std::string label,
              std::vector<uint32_t> cubes)
      : chip_(chip), w_(w), cfg_(std::move(cfg)), label_(std::move(label)), cubes_(std::move(cubes)) {}

  std::vector<uint32_t> Cubes() const override { return cubes_; }
  absl::StatusOr<std::vector<std::vector<uint32_t>>> CubeSets() const override {
    return kernels::PrefillCubeSets(chip_, cfg_);
  }

  std::string OneGroupRefusal() const override {
    // Every KV head's CUBE Group (a query head's CUBE for baseline_fanout) runs alike: the same
    // prompts, the same causal skip. The short kernel with kv_per_cube > 1 shares CUBEs
    // between heads.
    if (cfg_.variant == PrefillVariant::kShortContext && cfg_.kv_per_cube > 1) {
      return "kv_per_cube > 1 puts several KV heads on one CUBE";
    }
    return "";
  }

  std::string Summary() const override {
    return absl::StrCat("prefill ", label_, ": H_q ", cfg_.h_q, ", H_kv ", cfg_.h_kv, ", d ",
                        cfg_.d, ", S ", cfg_.s, ", T_q ",
                        cfg_.t_q == 0 ? std::string("S") : absl::StrCat(cfg_.t_q), ", C ", cfg_.C(),
                        ", P ", cfg_.P(), ", TILE ", cfg_.tile, KLayoutText(cfg_.k_layout),
                        ", q_tile ", cfg_.q_tile,
                        cfg_.P() > 1 && cfg_.variant != PrefillVariant::kBaselineFanout
                            ? absl::StrCat(", split ", SplitName(cfg_.query_split))
                            : "",
                        cfg_.variant == PrefillVariant::kShortContext
                            ? absl::StrCat(", kv_per_cube ", cfg_.kv_per_cube)
                            : "",
                        w_.has_lookahead() ? absl::StrCat(", lookahead ", cfg_.Lookahead()) : "",
                        w_.has_ring_depth() ? absl::StrCat(", ring_depth ", cfg_.ring_depth) : "",
                        w_.has_ring_message_bytes()
                            ? absl::StrCat(", ring_message_bytes ", cfg_.ring_message_bytes)
                            : "",
                        ", users ", cfg_.users, w_.data() ? "; data mode" : "; timing mode");
  }

  absl::Status Launch(kernels::KernelRuntime& runtime, kernels::MemoryStore* store) override {
    absl::StatusOr<kernels::PrefillLaunch> launch =
        kernels::LaunchPrefill(chip_, cfg_, runtime, store, inputs_);
    if (launch.status().code() == absl::StatusCode::kResourceExhausted) {
      // A PE's HBM region is full: bad input (exit 2) naming what sized it.
      const char* field = cfg_.max_context != 0         ? "max_context"
                          : !cfg_.request_lengths.empty() ? "request_lengths"
                          : cfg_.users > 1               ? "s, users"
                                                         : "s";
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": the prompts do not fit the PEs' HBM: ", launch.status().message()));
    }
    RETURN_IF_ERROR(launch.status());
    launch_ = *std::move(launch);
    return absl::OkStatus();
  }

  uint32_t Users() const override { return cfg_.users; }
  std::vector<uint64_t> QShape(uint32_t u) const override {
    return {cfg_.h_q, cfg_.QueriesOf(u), cfg_.d};
  }
  std::vector<uint64_t> KvShape(uint32_t u) const override {
    return {cfg_.h_kv, cfg_.ContextOf(u), cfg_.d};
  }
  QkvInputs Draw(uint32_t u, std::mt19937_64& rng) const override {
    return kernels::RandomPrefillInputs(cfg_, u, rng);
  }
  absl::StatusOr<std::vector<float>> GatherOutput(const kernels::MemoryStore& store,
                                                  uint32_t u) const override {
    return kernels::GatherPrefillOutput(store, cfg_, launch_, u);
  }

  uint32_t ReduceRounds() const override { return launch_.fanout_rounds; }
  uint32_t RingRotations() const override {
    return cfg_.Ring() ? (cfg_.C() - 1) * std::max<uint32_t>(1, launch_.chunks) : 0;
  }
  uint64_t Composites() const override { return launch_.composites; }
  uint64_t GridComposites() const override { return launch_.grid_composites; }

 private:
  const pb::Chip& chip_;
  const pb::Workload w_;
  const PrefillConfig cfg_;
  const std::string label_;
  const std::vector<uint32_t> cubes_;
  kernels::PrefillLaunch launch_;
};

class PrefillLauncher final : public KernelLauncher {
 public:
  pb::Kernel kernel() const override { return pb::PREFILL; }
  std::vector<std::string> Fields() const override {
    return {"variant",     "h_q",        "h_kv",        "d",         "s",
            "t_q",         "max_context", "c",          "p",         "group_rows",
            "group_cols",  "tile",       "q_tile",      "users",     "start_cube",
            "start_pe",    "no_rotation", "sip",        "kv_per_cube", "request_lengths",
            "query_split", "short_long_threshold", "kv_bank_layout", "k_layout", "lookahead",
            "ring_depth", "ring_message_bytes", "max_inflight_composites"};
  }
  absl::StatusOr<std::unique_ptr<KernelPlan>> Prepare(const pb::Chip& chip,
                                                      const pb::Workload& w) const override {
    std::string label;
    std::vector<uint32_t> cubes;
    absl::StatusOr<PrefillConfig> cfg = ConfigOf(chip, w, &label, &cubes);
    RETURN_IF_ERROR(cfg.status());
    return std::make_unique<PrefillPlan>(chip, w, *std::move(cfg), std::move(label), std::move(cubes));
  }
  CompareSpec Compare() const override {
    CompareSpec spec;
    spec.rows = {pb::FLASH, pb::SHORT_CONTEXT, pb::RING, pb::BASELINE_FANOUT, pb::BASELINE_DOT};
    spec.ratio_to = pb::FLASH;
    spec.default_s = 8192;
    spec.op_log = false;
    spec.row = [](pb::Workload& w) {
      if (w.variant() != pb::AUTO) w.clear_short_long_threshold();
      if (w.variant() == pb::FLASH) w.clear_p();
      if (w.variant() == pb::FLASH || w.variant() == pb::BASELINE_FANOUT) w.clear_query_split();
      if (w.variant() == pb::BASELINE_FANOUT) w.clear_k_layout();  // its own K layout
      if (w.variant() != pb::SHORT_CONTEXT && w.variant() != pb::AUTO) w.clear_kv_per_cube();
      if (w.variant() == pb::BASELINE_FANOUT || w.variant() == pb::BASELINE_DOT) w.clear_lookahead();
      if (w.variant() != pb::RING && w.variant() != pb::BASELINE_DOT) {
        w.clear_ring_depth();
        w.clear_ring_message_bytes();
      }
    };
    return spec;
  }
};

}  // namespace

AHBM_REGISTER_LAUNCHER(PrefillLauncher);

}  // namespace ahbm::launch
