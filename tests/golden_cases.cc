// The golden cases: see golden_cases.h (and golden_test.cc for what a golden is).
#include "tests/golden_cases.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/chip_sim.h"
#include "actors/inject.h"
#include "base/status_macros.h"
#include "kernels/launch/launch.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"
#include "proto/workload.pb.h"
#include "tests/golden_render.h"
#include "tests/small_workloads.h"

namespace ahbm::golden {
namespace {

using ahbm::testing::SmallDecode;

constexpr char kSmall[] = "topology/small.textproto";
constexpr char kChip4[] = "topology/chip_4sip.textproto";  // BANK HBM channels
constexpr char kChip4Fifo[] = "topology/chip_4sip_fifo.textproto";

// ---- workloads -------------------------------------------------------------------------

// Llama3-70B decode on the full chip (the launcher's defaults: H_q 64, d 128, TILE 256).
pb::Workload ChipDecode(pb::Variant variant, uint64_t s, const std::string& profile) {
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_variant(variant);
  w.set_s(s);
  if (variant != pb::AUTO) {
    // The one-CUBE baselines take no C (they refuse one above 1).
    if (variant != pb::BASELINE_FANOUT && variant != pb::BASELINE_REV1_TREE) w.set_c(8);
    w.set_p(8);
  }
  w.set_issue_cost_profile(profile);
  return w;
}

std::function<absl::StatusOr<Outcome>(const pb::Chip&, const RunKnobs&)> Run(pb::Workload w) {
  return [w](const pb::Chip& chip, const RunKnobs& knobs) { return LaunchOutcome(chip, w, knobs); };
}

// ---- injected command streams (the `ahbm stream` path: ChipSim + inject) ----------------

using sim::CpuProgram;
using sim::inject::Hbm;
using sim::inject::ProgramBuilder;
using sim::inject::Tcm;

struct StreamSpec {
  std::vector<uint32_t> cubes;
  std::string profile;
  bool per_tile_events = false;
  bool per_tile_detail = false;
  std::string summary;
  std::function<std::vector<std::pair<uint32_t, CpuProgram>>(const pb::Chip&)> programs;
};

absl::StatusOr<Outcome> RunStream(const pb::Chip& chip, const StreamSpec& spec,
                                  const RunKnobs& knobs) {
  sim::ChipSimOptions options;
  options.reply_ahead = knobs.reply_ahead;  // (stream programs send no kernel messages)
  options.keep_op_log = knobs.keep_op_log;
  options.cubes = spec.cubes;
  options.issue_cost_profile = spec.profile;
  options.per_tile_events = spec.per_tile_events;
  options.per_tile_detail = spec.per_tile_detail;
  options.workload_summary = spec.summary;
  absl::StatusOr<std::unique_ptr<sim::ChipSim>> created = sim::ChipSim::Create(chip, options);
  RETURN_IF_ERROR(created.status());
  sim::ChipSim& s = **created;
  for (auto& [pe, program] : spec.programs(chip)) {
    RETURN_IF_ERROR(s.SetProgram(pe, std::move(program)));
  }
  Outcome out;
  out.extra = absl::StrCat("run_status=", s.Run().ToString(), "\n");
  out.report = s.BuildReport();
  out.records = s.TakeOpLogRecords();
  return out;
}

std::function<absl::StatusOr<Outcome>(const pb::Chip&, const RunKnobs&)> Stream(StreamSpec spec) {
  return [spec](const pb::Chip& chip, const RunKnobs& knobs) {
    return RunStream(chip, spec, knobs);
  };
}

// `ahbm stream`'s program on every PE of `cubes`: DMA dma_bytes, then count composites.
StreamSpec DmaGemmStream(std::vector<uint32_t> cubes, std::string profile, uint64_t dma_bytes,
                         uint64_t m, uint64_t k, uint64_t n, int count) {
  StreamSpec spec;
  spec.cubes = cubes;
  spec.profile = profile;
  spec.summary = absl::StrCat("stream: per PE, DMA ", dma_bytes, " B then composite GEMM (", m,
                              ", ", k, ", ", n, ") x ", count);
  spec.programs = [=](const pb::Chip& chip) {
    std::vector<std::pair<uint32_t, CpuProgram>> out;
    const uint32_t pes = chip.sip().cube().pes();
    for (uint32_t cube : cubes) {
      for (uint32_t p = 0; p < pes; ++p) {
        const uint32_t pe = cube * pes + p;
        out.emplace_back(pe, sim::inject::DmaThenGemmStream(pe, dma_bytes, m, k, n, count));
      }
    }
    return out;
  };
  return spec;
}

// Every PE of CUBE 0 reads its right-hand neighbour's HBM channels and its own at the same
// instants (t = 0, and again after each round's composite, which every PE reaches at the same
// time), while composites stream their B operands from the PE's own channels — the case that
// folding per-channel DMA events can reorder.
StreamSpec CrossChannelStream(std::string profile) {
  StreamSpec spec;
  spec.cubes = {0};
  spec.profile = profile;
  spec.per_tile_detail = true;
  spec.summary = "stream: PEs of CUBE 0 read each other's HBM channels at the same instants";
  spec.programs = [](const pb::Chip& chip) {
    std::vector<std::pair<uint32_t, CpuProgram>> out;
    const uint32_t pes = chip.sip().cube().pes();
    const uint64_t kElems = 1 << 15;  // 64 KiB of bf16 per read
    for (uint32_t p = 0; p < pes; ++p) {
      const uint32_t other = (p + 1) % pes;
      ProgramBuilder b;
      uint64_t last = 0;
      for (uint64_t round = 0; round < 3; ++round) {
        std::vector<uint64_t> wait;
        if (last != 0) wait.push_back(last);
        const uint64_t base = round * (4 << 20);
        // The same addresses in the neighbour's region as it reads in its own.
        b.Dma(Hbm(other, base, pb::BF16, {kElems}), Tcm(p, 0, pb::BF16, {kElems}), wait);
        b.Dma(Hbm(p, base, pb::BF16, {kElems}), Tcm(p, 2 * kElems, pb::BF16, {kElems}), wait);
        // A composite whose B operand (128 x 512 bf16) streams from the PE's own channels,
        // at addresses the neighbour's reads hit as well.
        last = b.Composite(Tcm(p, 1 << 20, pb::BF16, {8, 128}),
                           Hbm(p, base + (1 << 20), pb::BF16, {128, 512}),
                           Tcm(p, (1 << 20) + 65536, pb::FP32, {8, 512}), {pb::SCALE}, {}, wait);
        b.Dma(Hbm(other, base + (1 << 20), pb::BF16, {kElems}),
              Tcm(p, 4 * kElems, pb::BF16, {kElems}), wait);
      }
      out.emplace_back(p, b.Build());
    }
    return out;
  };
  return spec;
}

// actors/units/pe_scheduler_test.cc "second stream arriving mid-way": PE 0 runs a long
// composite whose B pieces stream from HBM, then four TCM-only composites; PE 1 reads 1 MiB
// from PE 0's channels meanwhile.
StreamSpec MidWayStream(bool per_tile_events) {
  StreamSpec spec;
  spec.cubes = {0};
  spec.profile = "zero";
  spec.per_tile_events = per_tile_events;
  spec.per_tile_detail = true;
  spec.summary = "stream: second stream arriving mid-way (PE 1 reading PE 0's channels)";
  spec.programs = [](const pb::Chip& chip) {
    const uint64_t tile_k = chip.sip().cube().pe().scheduler().tile_k();
    const uint64_t tile_n = chip.sip().cube().pe().scheduler().tile_n();
    sim::inject::MidWayPrograms mid = sim::inject::MidWayStreamPrograms(tile_k, tile_n);
    std::vector<std::pair<uint32_t, CpuProgram>> out;
    out.emplace_back(0, std::move(mid.pe0));
    out.emplace_back(1, std::move(mid.pe1));
    return out;
  };
  return spec;
}

}  // namespace

// ---- the case list -----------------------------------------------------------------------

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

absl::StatusOr<Outcome> LaunchOutcome(const pb::Chip& chip, const pb::Workload& w,
                                      const RunKnobs& knobs) {
  launch::LaunchOptions options;
  options.reply_ahead = knobs.reply_ahead;
  options.message_trace_path = knobs.message_trace_path;
  options.keep_op_log = knobs.keep_op_log;
  options.islands = knobs.islands;
  options.one_group = knobs.one_group;
  absl::StatusOr<launch::LaunchResult> r = launch::RunWorkload(chip, w, options);
  RETURN_IF_ERROR(r.status());
  Outcome out;
  out.records = std::move(r->op_log);
  out.report = std::move(r->report);
  out.islands = r->islands;
  out.group_scale = r->group_scale;
  out.extra = absl::StrCat("runtime_status=", r->runtime_status.ToString(), "\n",
                           "reduce_rounds=", r->reduce_rounds, "\n",
                           "reduce_rounds_level2=", r->level2_rounds, "\n",
                           "reduce_rounds_level1=", r->level1_rounds, "\n",
                           "ring_rotations=", r->ring_rotations, "\n",
                           "request_latency_ps=", absl::StrJoin(out.report.request_latency_ps(), ","),
                           "\n");
  // Data mode: every input and output by name, shape and a digest of its float bits.
  for (const auto* arrays : {&r->inputs, &r->outputs}) {
    for (const auto& [name, a] : *arrays) {
      std::string bytes(reinterpret_cast<const char*>(a.data.data()), a.data.size() * sizeof(float));
      absl::StrAppend(&out.extra, arrays == &r->inputs ? "input " : "output ", name, " [",
                      absl::StrJoin(a.shape, ","), "] fnv1a64=", Fnv1a64Hex(bytes), "\n");
    }
  }
  return out;
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  const auto small = [&](std::string name, pb::Workload w) {
    cases.push_back({std::move(name), kSmall, false, Run(std::move(w))});
  };
  const struct {
    const char* name;
    pb::Variant variant;
  } variants[] = {
      {"opt1", pb::OPT1},
      {"opt2", pb::OPT2},
      {"opt3", pb::OPT3},
      {"short_context", pb::SHORT_CONTEXT},
      {"baseline_fanout", pb::BASELINE_FANOUT},
      {"baseline_fanout_group", pb::BASELINE_FANOUT_GROUP},
      {"baseline_rev1_tree", pb::BASELINE_REV1_TREE},
  };
  // Every variant and baseline under both issue-cost profiles.
  // The baselines that put a query head per CUBE or an instance per query head and rank run
  // 4 query heads (baseline_fanout_group also on P = 2) to keep their files a few thousand
  // lines.
  for (const char* profile : {"zero", "realistic"}) {
    for (const auto& v : variants) {
      pb::Workload w = SmallDecode(v.variant, 1000, profile);
      if (v.variant == pb::BASELINE_FANOUT || v.variant == pb::BASELINE_FANOUT_GROUP) w.set_h_q(4);
      if (v.variant == pb::BASELINE_FANOUT_GROUP) w.set_p(2);
      small(absl::StrCat("decode_", v.name, "_", profile), w);
    }
  }
  // AUTO on both sides of its threshold (2049 on this chip too); above it, one KV head (AUTO
  // picks C = 8: the small chip's 8 CUBEs hold one group).
  small("decode_auto_short_zero", SmallDecode(pb::AUTO, 1000, "zero"));
  {
    pb::Workload w = SmallDecode(pb::AUTO, 2100, "realistic");
    w.set_h_q(4);
    w.set_h_kv(1);
    small("decode_auto_long_realistic", w);
  }
  // Multi-user: a batch of per-request lengths (one nearly empty, one short, one long),
  // rotated by request (the default), on one KV head (h_q 4) to keep the files small.
  {
    pb::Workload w = SmallDecode(pb::OPT3, 0, "zero");
    w.clear_s();
    w.set_h_q(4);
    w.set_h_kv(1);
    for (uint64_t len : {7, 300, 2049}) w.add_request_lengths(len);
    small("decode_opt3_batch_rotated_zero", w);
    w.set_variant(pb::OPT2);
    w.set_issue_cost_profile("realistic");
    small("decode_opt2_batch_rotated_realistic", w);
    w.set_variant(pb::OPT1);
    w.set_issue_cost_profile("zero");
    w.set_no_rotation(true);
    small("decode_opt1_batch_unrotated_zero", w);
    pb::Workload b = SmallDecode(pb::BASELINE_FANOUT, 0, "zero");
    b.clear_s();
    b.set_h_q(2);
    b.set_h_kv(1);
    for (uint64_t len : {100, 700, 1500}) b.add_request_lengths(len);
    small("decode_baseline_fanout_batch_rotated_zero", b);
    b.set_variant(pb::BASELINE_REV1_TREE);
    b.set_h_q(4);
    b.set_tile(64);
    small("decode_baseline_rev1_tree_batch_rotated_zero", b);
  }
  // Causal T_q > 1 with max_context > S: the ranks past the context hold no keys.
  {
    pb::Workload w = SmallDecode(pb::OPT3, 700, "zero");
    w.set_t_q(4);
    w.set_max_context(2048);
    small("decode_opt3_causal_tq4_maxctx_zero", w);
    w.set_variant(pb::OPT2);
    w.set_issue_cost_profile("realistic");
    small("decode_opt2_causal_tq4_maxctx_realistic", w);
  }
  // The reduce options.
  {
    pb::Workload w = SmallDecode(pb::OPT2, 1000, "realistic");
    w.set_reduce_payload(pb::PACKED);
    w.set_reduce_merge(pb::FUSED);
    small("decode_opt2_packed_fused_realistic", w);
    w.set_variant(pb::OPT3);
    w.set_issue_cost_profile("zero");
    small("decode_opt3_packed_fused_zero", w);
    w.set_variant(pb::OPT1);
    w.set_reduce_payload(pb::TRIPLET);
    w.set_issue_cost_profile("realistic");
    small("decode_opt1_triplet_fused_realistic", w);
  }
  // The chunked ring (§4.4) at both levels: C = 2 CUBEs, P = 4 PEs; the ADR's triplet +
  // primitive, and packed + fused in data mode with d = 3 (the Level-2 ring's 4th chunk is
  // empty).
  {
    pb::Workload w = SmallDecode(pb::OPT3, 1000, "zero");
    w.set_level1_reduce(pb::RING_REDUCE);
    w.set_level2_reduce(pb::RING_REDUCE);
    small("decode_opt3_ring_both_levels_zero", w);
    w.set_variant(pb::OPT2);
    w.set_d(3);
    w.set_reduce_payload(pb::PACKED);
    w.set_reduce_merge(pb::FUSED);
    w.set_issue_cost_profile("realistic");
    w.set_data(true);
    w.set_seed(12);
    small("decode_opt2_ring_packed_fused_d3_data_realistic", w);
  }
  // Data mode (the op log equals timing mode's; the values are digested).
  {
    pb::Workload w = SmallDecode(pb::OPT3, 1000, "zero");
    w.set_data(true);
    w.set_seed(5);
    small("decode_opt3_data_zero", w);
    w.set_variant(pb::OPT2);
    w.set_reduce_payload(pb::PACKED);
    w.set_reduce_merge(pb::FUSED);
    w.set_issue_cost_profile("realistic");
    small("decode_opt2_packed_fused_data_realistic", w);
    pb::Workload t = SmallDecode(pb::OPT1, 700, "zero");
    t.set_t_q(4);
    t.set_max_context(2048);
    t.set_data(true);
    t.set_seed(9);
    small("decode_opt1_causal_tq4_maxctx_data_zero", t);
  }
  // K layouts (kernels/attention/k_layout.h): B = 125 keys a rank, tiles of 64 and 61 keys.
  // TRANSPOSED reads strided [d, len] slices of [64, 125] (chunk waste); ROW_MAJOR transposes
  // each tile on MATH. Data mode: the outputs equal decode_opt3_data_zero's values.
  for (const auto& [layout, name] : {std::pair<pb::KLayout, const char*>{pb::TRANSPOSED, "transposed"},
                                     {pb::ROW_MAJOR, "row_major"}}) {
    pb::Workload w = SmallDecode(pb::OPT3, 1000, "zero");
    w.set_k_layout(layout);
    w.set_data(true);
    w.set_seed(5);
    small(absl::StrCat("decode_opt3_k_", name, "_data_zero"), w);
  }
  // The decode sweep's forms (kernels/attention/decode.h): issue-ahead depth, one-shot,
  // opt2_lookahead, baseline_dot, the scheduler override.
  {
    pb::Workload w = SmallDecode(pb::OPT3, 1000, "zero");
    w.set_lookahead(2);
    small("decode_opt3_lookahead2_zero", w);
    w.set_lookahead(0);
    w.set_issue_cost_profile("realistic");
    small("decode_opt3_lookahead0_realistic", w);
    pb::Workload one = SmallDecode(pb::OPT3, 1000, "zero");
    one.clear_tile();
    one.set_one_shot(true);
    small("decode_one_shot_opt3_zero", one);
    one.set_variant(pb::OPT2);
    one.set_issue_cost_profile("realistic");
    small("decode_one_shot_opt2_realistic", one);
    pb::Workload la = SmallDecode(pb::OPT2_LOOKAHEAD, 1000, "zero");
    small("decode_opt2_lookahead_zero", la);
    la.set_reduce_payload(pb::PACKED);
    la.set_reduce_merge(pb::FUSED);
    la.set_issue_cost_profile("realistic");
    small("decode_opt2_lookahead_packed_fused_realistic", la);
    pb::Workload dot = SmallDecode(pb::BASELINE_DOT, 1000, "zero");
    small("decode_baseline_dot_zero", dot);
    dot.set_t_q(4);
    dot.set_max_context(2048);
    dot.set_issue_cost_profile("realistic");
    small("decode_baseline_dot_causal_tq4_maxctx_realistic", dot);
    pb::Workload inflight = SmallDecode(pb::OPT2, 1000, "zero");
    inflight.set_max_inflight_composites(2);
    small("decode_opt2_max_inflight2_zero", inflight);
  }
  // Prefill (small chip: h_q 4, h_kv 1, d 32, S 64, tile 16, q_tile 16, P 2 — small texts): every
  // variant, a chunked T_q with a striped split, a mixed-length batch, data mode.
  {
    const auto prefill = [](pb::Variant variant, const std::string& profile) {
      pb::Workload w;
      w.set_kernel(pb::PREFILL);
      w.set_variant(variant);
      w.set_h_q(4);
      w.set_h_kv(1);
      w.set_d(32);
      w.set_s(64);
      if (variant != pb::FLASH) w.set_p(2);
      w.set_tile(16);
      w.set_q_tile(16);
      w.set_issue_cost_profile(profile);
      return w;
    };
    small("prefill_flash_zero", prefill(pb::FLASH, "zero"));
    small("prefill_ring_realistic", prefill(pb::RING, "realistic"));
    small("prefill_short_context_zero", prefill(pb::SHORT_CONTEXT, "zero"));
    small("prefill_baseline_fanout_zero", prefill(pb::BASELINE_FANOUT, "zero"));
    pb::Workload c = prefill(pb::RING, "zero");
    c.set_t_q(23);
    c.set_query_split(pb::STRIPED);
    small("prefill_ring_tq23_striped_zero", c);
    pb::Workload b = prefill(pb::RING, "zero");
    b.clear_s();
    for (uint64_t len : {64, 19}) b.add_request_lengths(len);
    small("prefill_ring_batch_zero", b);
    pb::Workload d = prefill(pb::RING, "zero");
    d.set_data(true);
    d.set_seed(11);
    small("prefill_ring_data_zero", d);
    // The pipeline and ring knobs, and the blocking-dot baseline.
    pb::Workload la = prefill(pb::RING, "zero");
    la.set_lookahead(2);
    small("prefill_ring_lookahead2_zero", la);
    pb::Workload l0 = prefill(pb::FLASH, "zero");
    l0.set_lookahead(0);
    small("prefill_flash_lookahead0_zero", l0);
    pb::Workload d1 = prefill(pb::RING, "zero");
    d1.set_ring_depth(1);
    d1.set_ring_message_bytes(256);
    small("prefill_ring_depth1_msg256_zero", d1);
    pb::Workload d3 = prefill(pb::RING, "zero");
    d3.set_ring_depth(3);
    small("prefill_ring_depth3_zero", d3);
    small("prefill_baseline_dot_zero", prefill(pb::BASELINE_DOT, "zero"));
  }
  // The self-test kernels (timing mode, and GEMM / all-reduce in data mode).
  {
    pb::Workload g;
    g.set_kernel(pb::SELFTEST_GEMM);
    g.set_gemm_m(8);
    g.set_gemm_k(128);
    g.set_gemm_n(256);
    g.set_cube(0);
    small("selftest_gemm_zero", g);
    g.set_gemm_m(40);
    g.set_gemm_k(320);
    g.set_gemm_n(300);
    g.set_cube(5);
    g.set_issue_cost_profile("realistic");
    small("selftest_gemm_ragged_realistic", g);
    pb::Workload a;
    a.set_kernel(pb::SELFTEST_ALLREDUCE);
    a.set_vector_len(4096);
    a.set_cube(2);
    small("selftest_allreduce_zero", a);
    a.set_vector_len(100000);  // larger than a queue: streams through
    a.set_issue_cost_profile("realistic");
    small("selftest_allreduce_big_realistic", a);
    g.set_data(true);
    g.set_seed(3);
    small("selftest_gemm_ragged_data_realistic", g);
    a.set_vector_len(3000);
    a.set_data(true);
    a.set_seed(4);
    small("selftest_allreduce_data_realistic", a);
  }
  // Injected command streams.
  const auto stream = [&](std::string name, StreamSpec spec) {
    cases.push_back({std::move(name), kSmall, false, Stream(std::move(spec))});
  };
  stream("stream_dma_gemm_zero", DmaGemmStream({0}, "zero", 65536, 8, 128, 256, 8));
  stream("stream_dma_gemm_2cubes_realistic",
         DmaGemmStream({0, 3}, "realistic", 131072, 32, 256, 512, 6));
  stream("stream_cross_channels_zero", CrossChannelStream("zero"));
  stream("stream_cross_channels_realistic", CrossChannelStream("realistic"));
  stream("stream_midway_closed_form", MidWayStream(false));
  stream("stream_midway_per_tile_events", MidWayStream(true));
  // Full chip (digest only): Llama3-70B decode at S = 131072 with all 8 KV heads.
  const auto chip = [&](std::string name, pb::Workload w) {
    cases.push_back({std::move(name), kChip4, true, Run(std::move(w))});
  };
  chip("chip4_decode_opt1_zero", ChipDecode(pb::OPT1, 131072, "zero"));
  chip("chip4_decode_opt3_zero", ChipDecode(pb::OPT3, 131072, "zero"));
  chip("chip4_decode_opt2_zero", ChipDecode(pb::OPT2, 131072, "zero"));
  {
    pb::Workload w = ChipDecode(pb::OPT2, 131072, "realistic");
    w.set_reduce_payload(pb::PACKED);
    w.set_reduce_merge(pb::FUSED);
    chip("chip4_decode_opt2_packed_fused_realistic", w);
  }
  chip("chip4_decode_auto_s1024_zero", ChipDecode(pb::AUTO, 1024, "zero"));
  cases.push_back({"chip4fifo_decode_opt3_zero", kChip4Fifo, true,
                   Run(ChipDecode(pb::OPT3, 131072, "zero"))});
  return cases;
}
std::string RenderText(const Outcome& out) {
  std::string text;
  RenderOpLog(out.records, text);
  text += out.extra;
  RenderReport(out.report, text);
  return text;
}

std::vector<Case> KnobCases() {
  std::vector<Case> out;
  bool chip = false;
  for (Case& c : AllCases()) {
    if (c.digest_only && chip) continue;
    chip = chip || c.digest_only;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace ahbm::golden
