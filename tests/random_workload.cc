#include "tests/random_workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"

namespace ahbm::testing {
namespace {

// The small chip: a 2x4 CUBE mesh of 2x2 PE meshes.
constexpr uint32_t kCubes = 8;
constexpr uint32_t kPes = 4;

class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t Int(uint64_t lo, uint64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool Coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng_); }
  template <class T>
  T Pick(const std::vector<T>& from) {
    return from[Int(0, from.size() - 1)];
  }
  // Mostly short, sometimes long: lengths in [1, most], log-uniform.
  uint64_t Length(uint64_t most) {
    const double x = std::uniform_real_distribution<double>(0.0, std::log(double(most)))(rng_);
    return std::clamp<uint64_t>(static_cast<uint64_t>(std::exp(x)), 1, most);
  }

 private:
  std::mt19937_64 rng_;
};

// Context lengths: one `s` or `users` mixed request lengths; returns the shortest.
uint64_t DrawLengths(Draw& draw, pb::Workload& w, uint64_t most, uint32_t max_users) {
  const uint32_t users = draw.Coin(0.6) ? 1 : static_cast<uint32_t>(draw.Int(2, max_users));
  if (users > 1 && draw.Coin(0.7)) {
    uint64_t shortest = most;
    for (uint32_t u = 0; u < users; ++u) {
      const uint64_t len = draw.Length(most);
      w.add_request_lengths(len);
      shortest = std::min(shortest, len);
    }
    if (draw.Coin(0.3)) w.set_users(users);
    return shortest;
  }
  const uint64_t s = draw.Length(most);
  w.set_s(s);
  if (users > 1) w.set_users(users);
  return s;
}

uint64_t LongestLength(const pb::Workload& w) {
  uint64_t s = w.s();
  for (uint64_t len : w.request_lengths()) s = std::max(s, len);
  return s;
}

// C and, sometimes, the group rectangle; the number of CUBE Groups on the chip.
uint32_t DrawGroup(Draw& draw, pb::Workload& w, uint32_t c) {
  w.set_c(c);
  if (draw.Coin(0.3)) {
    std::vector<std::pair<uint32_t, uint32_t>> shapes;
    for (uint32_t rows : {1u, 2u}) {
      if (c % rows == 0 && c / rows <= 4) shapes.push_back({rows, c / rows});
    }
    const auto [rows, cols] = draw.Pick(shapes);
    w.set_group_rows(rows);
    w.set_group_cols(cols);
  }
  return kCubes / c;
}

void DrawRotation(Draw& draw, pb::Workload& w, uint32_t c, uint32_t p) {
  if (draw.Coin(0.4)) w.set_start_cube(static_cast<uint32_t>(draw.Int(0, c - 1)));
  if (draw.Coin(0.4)) w.set_start_pe(static_cast<uint32_t>(draw.Int(0, p - 1)));
  if (draw.Coin(0.25)) w.set_no_rotation(true);
}

void DrawReduce(Draw& draw, pb::Workload& w) {
  if (draw.Coin(0.5)) w.set_reduce_payload(draw.Pick<pb::ReducePayload>({pb::TRIPLET, pb::PACKED}));
  if (draw.Coin(0.5)) w.set_reduce_merge(draw.Pick<pb::ReduceMerge>({pb::PRIMITIVE, pb::FUSED}));
  const std::vector<pb::ReduceTopology> topo = {pb::TREE, pb::CHAIN, pb::RING_REDUCE};
  if (draw.Coin(0.3)) w.set_level1_reduce(draw.Pick(topo));
  if (draw.Coin(0.3)) w.set_level2_reduce(draw.Pick(topo));
}

// The chunked ring (RING_REDUCE at either level, drawn by DrawReduce): sometimes a head
// dimension below the ring's nodes (up to 8 CUBEs or 4 PEs), so some chunks carry no columns.
void DrawChunkedRing(Draw& draw, pb::Workload& w) {
  const bool ring = w.level1_reduce() == pb::RING_REDUCE || w.level2_reduce() == pb::RING_REDUCE;
  if (ring && draw.Coin(0.3)) w.set_d(draw.Pick<uint32_t>({1, 2, 3, 5, 7}));
}

void Decode(Draw& draw, pb::Workload& w) {
  w.set_kernel(pb::DECODE);
  const pb::Variant variant =
      draw.Pick<pb::Variant>({pb::OPT1, pb::OPT2, pb::OPT3, pb::SHORT_CONTEXT, pb::AUTO,
                              pb::BASELINE_FANOUT, pb::BASELINE_FANOUT_GROUP, pb::BASELINE_REV1_TREE});
  w.set_variant(variant);
  const uint32_t g = draw.Pick<uint32_t>({1, 2, 3, 4, 8});
  const uint32_t p = draw.Pick<uint32_t>({1, 2, 4});
  w.set_p(p);
  w.set_d(draw.Pick<uint32_t>({16, 32, 48, 64, 128, 256}));
  if (variant != pb::BASELINE_FANOUT && variant != pb::BASELINE_FANOUT_GROUP) {  // no KV tile
    w.set_tile(draw.Pick<uint32_t>({16, 32, 64, 100, 128, 256}));
  }
  uint32_t heads_max = 1;  // KV heads the chip can host for the variant
  uint32_t c = 1;
  switch (variant) {
    case pb::OPT1:
    case pb::OPT2:
    case pb::OPT3:
    case pb::BASELINE_FANOUT_GROUP:
      c = draw.Pick<uint32_t>({1, 2, 4, 8});
      heads_max = DrawGroup(draw, w, c);
      if (variant != pb::BASELINE_FANOUT_GROUP) DrawReduce(draw, w);
      break;
    case pb::SHORT_CONTEXT: {
      const uint32_t kpc = draw.Pick<uint32_t>({1, 2, 4, 8});
      w.set_kv_per_cube(kpc);
      if (draw.Coin(0.3)) w.set_c(1);
      heads_max = kCubes * kpc;
      DrawReduce(draw, w);
      break;
    }
    case pb::AUTO:
      heads_max = kCubes;  // OPT3 at C = 1 or SHORT_CONTEXT at kv_per_cube = 1: a head a CUBE
      DrawReduce(draw, w);
      break;
    case pb::BASELINE_FANOUT:
      heads_max = std::max<uint32_t>(1, kCubes / g);  // a query head per CUBE
      break;
    case pb::BASELINE_REV1_TREE:
      heads_max = kCubes;  // a KV head per CUBE
      break;
    default:
      break;
  }
  const uint32_t h_kv = static_cast<uint32_t>(draw.Int(1, std::min<uint32_t>(heads_max, 8)));
  w.set_h_kv(h_kv);
  w.set_h_q(h_kv * g);
  const uint64_t shortest = DrawLengths(draw, w, draw.Coin(0.2) ? 6000 : 1200, 4);
  const bool baseline = variant == pb::BASELINE_FANOUT || variant == pb::BASELINE_FANOUT_GROUP ||
                        variant == pb::BASELINE_REV1_TREE;
  if (!baseline && draw.Coin(0.3)) {  // the baselines decode one token
    w.set_t_q(static_cast<uint32_t>(draw.Int(1, std::min<uint64_t>(shortest, 8))));
  }
  if (draw.Coin(0.25)) w.set_max_context(LongestLength(w) + draw.Length(2000));
  if (variant == pb::AUTO) {
    if (draw.Coin(0.5)) w.set_short_long_threshold(draw.Length(4000));
    const uint64_t threshold = w.short_long_threshold() != 0 ? w.short_long_threshold() : 2049;
    // The long kernel (OPT3) takes the largest C whose groups host the KV heads.
    if (LongestLength(w) < threshold && draw.Coin(0.5)) {
      w.set_kv_per_cube(draw.Pick<uint32_t>({1, 2, 4, 8}));
    }
  }
  DrawChunkedRing(draw, w);
  DrawRotation(draw, w, std::max<uint32_t>(c, 1), p);
}

// ---- prefill pipeline and ring knobs (lookahead, ring_depth, ring_message_bytes) and the
// BASELINE_DOT variant: drawn after the rest of the prefill case ----
void DrawPrefillKnobs(Draw& draw, pb::Workload& w) {
  // BASELINE_DOT runs the ring's placement: a quarter of the drawn RING cases.
  if (w.variant() == pb::RING && draw.Coin(0.25)) w.set_variant(pb::BASELINE_DOT);
  const bool baseline = w.variant() == pb::BASELINE_DOT || w.variant() == pb::BASELINE_FANOUT;
  // The chip's max_inflight_composites is 4: lookahead 0 .. 3.
  if (!baseline && draw.Coin(0.4)) w.set_lookahead(static_cast<uint32_t>(draw.Int(0, 3)));
  // AUTO picks RING at or above its threshold (705 by default, as in Prefill above).
  const uint64_t threshold = w.short_long_threshold() != 0 ? w.short_long_threshold() : 705;
  const bool ring = w.variant() == pb::RING || w.variant() == pb::BASELINE_DOT ||
                    (w.variant() == pb::AUTO && LongestLength(w) >= threshold);
  if (!ring) return;
  if (draw.Coin(0.4)) w.set_ring_depth(static_cast<uint32_t>(draw.Int(1, 4)));
  // Up to the small chip's 256 KiB endpoint queue; below one row (a message of one row).
  if (draw.Coin(0.4)) {
    w.set_ring_message_bytes(draw.Pick<uint64_t>({16, 64, 100, 256, 1000, 4096, 16384, 262144}));
  }
}

void Prefill(Draw& draw, pb::Workload& w) {
  w.set_kernel(pb::PREFILL);
  const pb::Variant variant = draw.Pick<pb::Variant>(
      {pb::RING, pb::FLASH, pb::SHORT_CONTEXT, pb::AUTO, pb::BASELINE_FANOUT});
  w.set_variant(variant);
  uint32_t g = draw.Pick<uint32_t>({1, 2, 3, 4, 8});
  uint32_t p = draw.Pick<uint32_t>({1, 2, 4});
  w.set_d(draw.Pick<uint32_t>({16, 32, 64, 128}));
  if (draw.Coin(0.5)) w.set_tile(draw.Pick<uint32_t>({16, 32, 64, 100, 128, 256}));
  const std::vector<pb::QuerySplit> splits = {pb::CONTIGUOUS, pb::STRIPED, pb::ZIGZAG};
  uint32_t heads_max = 8;
  uint32_t c = 1;
  switch (variant) {
    case pb::RING:
    case pb::AUTO:
      if (g == 3) g = 2;  // the ring's C = G must tile the CUBE mesh
      c = g;
      heads_max = kCubes / g;
      if (variant == pb::RING && draw.Coin(0.5)) DrawGroup(draw, w, c);
      if (draw.Coin(0.5)) w.set_query_split(draw.Pick(splits));
      break;
    case pb::FLASH:
      p = 1;
      heads_max = kCubes * kPes;
      break;
    case pb::SHORT_CONTEXT: {
      const uint32_t kpc = draw.Pick<uint32_t>({1, 2, 4, 8});
      if (draw.Coin(0.7)) w.set_kv_per_cube(kpc);
      heads_max = kCubes * kpc;
      if (draw.Coin(0.5)) w.set_query_split(draw.Pick(splits));
      break;
    }
    case pb::BASELINE_FANOUT:
      heads_max = std::max<uint32_t>(1, kCubes / g);  // a query head per CUBE
      break;
    default:
      break;
  }
  if (variant != pb::FLASH || draw.Coin(0.2)) w.set_p(p);
  const uint32_t h_kv = static_cast<uint32_t>(draw.Int(1, std::min<uint32_t>(heads_max, 8)));
  w.set_h_kv(h_kv);
  w.set_h_q(h_kv * g);
  const uint64_t shortest = DrawLengths(draw, w, draw.Coin(0.2) ? 1300 : 300, 3);
  if (draw.Coin(0.4)) w.set_t_q(static_cast<uint32_t>(draw.Int(1, shortest)));
  if (draw.Coin(0.3)) {
    const uint32_t rows = variant == pb::RING || variant == pb::BASELINE_FANOUT ? 1 : g;
    w.set_q_tile(rows * static_cast<uint32_t>(draw.Int(1, std::max<uint32_t>(1, 128 / rows))));
  }
  if (draw.Coin(0.2)) w.set_max_context(LongestLength(w) + draw.Length(500));
  if (variant == pb::AUTO) {
    if (draw.Coin(0.5)) w.set_short_long_threshold(draw.Length(1000));
    const uint64_t threshold = w.short_long_threshold() != 0 ? w.short_long_threshold() : 705;
    if (LongestLength(w) < threshold) {
      c = 1;  // SHORT_CONTEXT
      if (draw.Coin(0.5)) w.set_kv_per_cube(draw.Pick<uint32_t>({1, 2, 4, 8}));
    }
  }
  DrawRotation(draw, w, c, p);
  DrawPrefillKnobs(draw, w);
}

// ---- k_layout (the K cache layouts, kernels/attention/k_layout.h) ----
// Drawn from a stream of its own (seeded from the case's seed), so it shifts no other draw.
// The ADR kernels only: the baselines keep their own [d, B] block and refuse k_layout.
void DrawKLayout(uint64_t seed, pb::Workload& w) {
  if (w.variant() == pb::BASELINE_FANOUT || w.variant() == pb::BASELINE_FANOUT_GROUP ||
      w.variant() == pb::BASELINE_REV1_TREE) {
    return;
  }
  Draw draw(seed ^ 0x4B4C41594F5554ull);  // "KLAYOUT"
  if (draw.Coin(0.5)) {
    w.set_k_layout(draw.Pick<pb::KLayout>({pb::TILE_MAJOR, pb::TRANSPOSED, pb::ROW_MAJOR}));
  }
}

// The decode sweep's forms (kernels/attention/decode.h) and the scheduler override, for every
// kernel: max_inflight_composites; decode: OPT2_LOOKAHEAD and BASELINE_DOT in place of OPT2 and
// OPT1 (the same geometry and reduce draws apply), lookahead 0 .. max_inflight_composites - 1
// where the variant issues ahead, one_shot (without tile) where the variant runs it.
void DrawSweepFields(Draw& draw, pb::Workload& w) {
  uint32_t inflight = 4;  // topology/small.textproto
  if (draw.Coin(0.2)) {
    // A prefill lookahead drawn before (DrawPrefillKnobs) needs lookahead + 1 in flight.
    const uint32_t least = w.has_lookahead() ? w.lookahead() + 1 : 1;
    inflight = static_cast<uint32_t>(draw.Int(least, 6));
    w.set_max_inflight_composites(inflight);
  }
  if (w.kernel() != pb::DECODE) return;
  if (w.variant() == pb::OPT2 && draw.Coin(0.4)) w.set_variant(pb::OPT2_LOOKAHEAD);
  if (w.variant() == pb::OPT1 && draw.Coin(0.3)) w.set_variant(pb::BASELINE_DOT);
  const pb::Variant v = w.variant();
  const bool ahead = v == pb::OPT3 || v == pb::SHORT_CONTEXT || v == pb::AUTO ||
                     v == pb::OPT2_LOOKAHEAD;
  if (ahead && draw.Coin(0.4)) w.set_lookahead(static_cast<uint32_t>(draw.Int(0, inflight - 1)));
  const bool one_shot = v == pb::OPT1 || v == pb::OPT3 || v == pb::OPT2 || v == pb::SHORT_CONTEXT;
  if (one_shot && draw.Coin(0.15)) {
    w.set_one_shot(true);
    w.clear_tile();
  }
}

}  // namespace

RandomCase RandomWorkload(uint64_t seed) {
  Draw draw(seed);
  RandomCase c;
  pb::Workload& w = c.workload;
  if (draw.Coin(0.6)) {
    Decode(draw, w);
  } else {
    Prefill(draw, w);
  }
  DrawSweepFields(draw, w);
  if (draw.Coin(0.5)) w.set_issue_cost_profile("realistic");
  c.bank_hbm = draw.Coin(0.2);
  if (c.bank_hbm && draw.Coin(0.5)) {
    w.set_kv_bank_layout(draw.Pick<pb::KvBankLayout>({pb::NAIVE, pb::INTERLEAVED}));
  }
  DrawKLayout(seed, w);
  return c;
}

std::string RunFlags(const pb::Workload& w) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* reflection = w.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(w, &fields);
  std::vector<std::string> flags;
  for (const FieldDescriptor* f : fields) {
    std::string value;
    if (f->is_repeated()) {
      std::vector<std::string> items;
      for (int i = 0; i < reflection->FieldSize(w, f); ++i) {
        items.push_back(absl::StrCat(reflection->GetRepeatedUInt64(w, f, i)));
      }
      value = absl::StrJoin(items, ",");
    } else {
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_UINT32:
          value = absl::StrCat(reflection->GetUInt32(w, f));
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          value = absl::StrCat(reflection->GetUInt64(w, f));
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          flags.push_back(absl::StrCat("--", f->name()));
          continue;
        case FieldDescriptor::CPPTYPE_ENUM:
          value = absl::AsciiStrToLower(reflection->GetEnum(w, f)->name());
          break;
        case FieldDescriptor::CPPTYPE_STRING:
          value = reflection->GetString(w, f);
          break;
        default:
          continue;
      }
    }
    flags.push_back(absl::StrCat("--", f->name(), "=", value));
  }
  return absl::StrJoin(flags, " ");
}

}  // namespace ahbm::testing
