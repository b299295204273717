// The K cache layouts (k_layout.h; DESIGN §4b, ADR-0060 rev2 §B-2, §11 item 2) in the decode
// and prefill kernels: data-mode parity with the float64 reference for TRANSPOSED and
// ROW_MAJOR (every decode variant and the short-context kernel; flash, short-context and ring
// prefill) on ragged tiles, empty ranks, mixed request lengths and causal T_q > 1; timing and
// data mode give one op log; TRANSPOSED's strided reads pay chunk waste and ROW_MAJOR's
// transposes cost MATH time, both derived by hand from DESIGN §2's numbers.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/attention/k_layout.h"
#include "kernels/attention/prefill_launch.h"
#include "kernels/attention/prefill_test_util.h"
#include "proto/report.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels::testing {
namespace {

constexpr KLayout kLayouts[] = {KLayout::kTransposed, KLayout::kRowMajor};
constexpr DecodeVariant kVariants[] = {DecodeVariant::kOpt1, DecodeVariant::kOpt3,
                                       DecodeVariant::kOpt2};

std::string Name(KLayout layout, DecodeVariant v) {
  return absl::StrCat(KLayoutName(layout), " ",
                      v == DecodeVariant::kOpt1   ? "opt1"
                      : v == DecodeVariant::kOpt3 ? "opt3"
                                                  : "opt2");
}

// Every variant of `base` in `layout`: each request against the reference, and the timing-mode
// op log equal to the data-mode one.
void ExpectDecodeParity(const pb::Chip& chip, DecodeConfig base, KLayout layout,
                        const std::string& what) {
  base.k_layout = layout;
  const std::vector<QkvInputs> inputs = BatchInputs(base, 11);
  for (DecodeVariant variant : kVariants) {
    DecodeConfig cfg = base;
    cfg.variant = variant;
    const std::string name = what + " " + Name(layout, variant);
    DecodeRun data = RunDecode(chip, cfg, inputs);
    ASSERT_TRUE(data.status.ok()) << name << ": " << data.status;
    ExpectRequestsMatchReference(data, cfg, inputs, name);
    DecodeRun timing = RunDecode(chip, cfg, {});
    ASSERT_TRUE(timing.status.ok()) << name << ": " << timing.status;
    EXPECT_EQ(OpLogBytes(timing), OpLogBytes(data)) << name;
  }
}

class DecodeKLayout : public ::testing::TestWithParam<KLayout> {};

// C = 2, P = 4, max_context = 4·S: most ranks hold no keys; causal T_q = 4 hides keys on
// several ranks.
TEST_P(DecodeKLayout, EmptyRanksAndCausalQueries) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (uint64_t s : {5u, 7u}) {
    for (uint32_t t_q : {1u, 4u}) {
      DecodeConfig cfg = Small(8, 2, s, 2, 4);
      cfg.max_context = 4 * s;
      cfg.t_q = t_q;
      ExpectDecodeParity(chip, cfg, GetParam(), absl::StrCat("s ", s, " t_q ", t_q));
    }
  }
}

// S = 130 over 8 ranks: B = 17, tiles of 8, 8 and 1 keys (TRANSPOSED: a [d, 17] block read
// 8 columns at a time); T_q = 16 masks keys on ranks 6 and 7. Also the short-context kernel.
TEST_P(DecodeKLayout, RaggedTilesMaskedAndShortContext) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 2, 130, 2, 4);
  cfg.tile = 8;
  cfg.t_q = 16;
  ExpectDecodeParity(chip, cfg, GetParam(), "ragged");
  DecodeConfig short_cfg = Small(8, 2, 130, 1, 4);
  short_cfg.kv_per_cube = 2;
  short_cfg.t_q = 16;
  short_cfg.tile = 16;
  ExpectDecodeParity(chip, short_cfg, GetParam(), "short_context");
}

// A batch of mixed lengths under rotation, causal T_q = 4, reduce packed and fused.
TEST_P(DecodeKLayout, MixedLengthsUnderRotation) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 2, 0, 2, 4);
  cfg.tile = 32;
  cfg.request_lengths = {7, 300, 517};
  cfg.users = 3;
  cfg.s = 517;
  cfg.t_q = 4;
  cfg.packed_payload = cfg.fused_merge = true;
  ExpectDecodeParity(chip, cfg, GetParam(), "batch");
}

INSTANTIATE_TEST_SUITE_P(Layouts, DecodeKLayout, ::testing::ValuesIn(kLayouts),
                         [](const ::testing::TestParamInfo<KLayout>& info) {
                           return std::string(KLayoutName(info.param));
                         });

class PrefillKLayout : public ::testing::TestWithParam<KLayout> {};

// Flash, short context and the ring (which forwards K sub-blocks in the layout and stores them
// in its HBM slots): whole prompts, ragged S, chunked T_q < S, empty ranks (max_context > S)
// and a batch of mixed lengths; the ring's timing-mode op log equals its data-mode one.
TEST_P(PrefillKLayout, ParityOnEveryVariant) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (PrefillVariant v :
       {PrefillVariant::kFlash, PrefillVariant::kShortContext, PrefillVariant::kRing}) {
    const std::string name = absl::StrCat(KLayoutName(GetParam()), " ",
                                          v == PrefillVariant::kFlash  ? "flash"
                                          : v == PrefillVariant::kRing ? "ring"
                                                                       : "short");
    PrefillConfig cfg = SmallPrefill(v);
    cfg.k_layout = GetParam();
    ExpectPrefillParity(chip, cfg, name);
    PrefillConfig ragged = cfg;
    ragged.s = 101;  // not a multiple of the tile, nor of C·P
    ExpectPrefillParity(chip, ragged, name + " ragged");
    PrefillConfig chunked = cfg;
    chunked.s = 90;
    chunked.t_q = 37;
    ExpectPrefillParity(chip, chunked, name + " t_q < S");
    PrefillConfig empty = cfg;
    empty.s = 9;
    empty.max_context = 80;  // B = 5 (ring: 80 / 16 ranks), most ranks empty
    ExpectPrefillParity(chip, empty, name + " empty ranks");
    PrefillConfig batch = cfg;
    batch.users = 2;
    batch.request_lengths = {96, 41};
    ExpectPrefillParity(chip, batch, name + " batch");
  }
  PrefillConfig ring = SmallPrefill(PrefillVariant::kRing);
  ring.k_layout = GetParam();
  ring.s = 101;
  PrefillRun timing = RunPrefill(chip, ring, {});
  PrefillRun data = RunPrefill(chip, ring, PrefillInputs(ring, 3));
  ASSERT_TRUE(timing.status.ok() && data.status.ok()) << timing.status << " " << data.status;
  EXPECT_EQ(OpLogBytes(timing), OpLogBytes(data));
}

INSTANTIATE_TEST_SUITE_P(Layouts, PrefillKLayout, ::testing::ValuesIn(kLayouts),
                         [](const ::testing::TestParamInfo<KLayout>& info) {
                           return std::string(KLayoutName(info.param));
                         });

// One PE (C = P = 1), G = 8, d = 64, S = B = 192, TILE = 64: three tiles, opt1.
DecodeConfig OnePe(KLayout layout) {
  DecodeConfig cfg = Small(8, 1, 192, 1, 1);
  cfg.variant = DecodeVariant::kOpt1;
  cfg.k_layout = layout;
  return cfg;
}

struct Bytes {
  uint64_t useful = 0, charged = 0, math_busy_ps = 0, math_ops = 0;
};

Bytes BytesOf(const DecodeRun& run) {
  Bytes b;
  const pb::Report report = run.sim->BuildReport();
  for (const pb::UnitStats& u : report.units()) {
    b.useful += u.hbm_useful_bytes();
    b.charged += u.hbm_charged_bytes();
    if (u.kind() == "math") {
      b.math_busy_ps += u.busy_ps();
      b.math_ops += u.ops();
    }
  }
  return b;
}

// TRANSPOSED's chunk waste, by hand (DESIGN §2: 256 B chunks aligned to the region's address 0,
// a run pays every chunk it touches). K is [d = 64, B = 192] bf16 at a 256 B aligned address:
// rows of 384 B. Tile j's operand is columns [64j, 64j + 64): one scheduler piece (tile_k 64 =
// d, tile_n 128 >= 64) of 64 runs of 128 B at 384·dim + 128·j. 384·dim is 0 or 128 mod 256,
// so each run lies inside one chunk, half of it used, and no run starts in the chunk the one
// before ended in (run dim ends in chunk floor((384·dim + 128j + 127) / 256), run dim + 1
// starts 256 B or more further): 3 tiles x 64 runs x 128 B = 24576 B of waste, every one of
// them K. TILE_MAJOR reads each tile as one contiguous 8 KiB run, Q [8, 64] (1 KiB), V tiles
// [64, 64] (8 KiB) and the stored O (1 KiB) are whole chunks: no waste. The useful bytes are
// the same: K 24 KiB + V 24 KiB + Q 1 KiB + O 1 KiB = 51200 B.
TEST(KLayoutCost, TransposedPaysChunkWaste) {
  const pb::Chip chip = Load("topology/small.textproto");
  ASSERT_EQ(chip.sip().cube().pe().dma().chunk_bytes(), 256u);
  DecodeRun tile_major = RunDecode(chip, OnePe(KLayout::kTileMajor), {});
  DecodeRun transposed = RunDecode(chip, OnePe(KLayout::kTransposed), {});
  ASSERT_TRUE(tile_major.status.ok() && transposed.status.ok()) << transposed.status;
  const Bytes a = BytesOf(tile_major), b = BytesOf(transposed);
  EXPECT_EQ(a.useful, 51200u);
  EXPECT_EQ(a.charged, 51200u);
  EXPECT_EQ(b.useful, 51200u);
  EXPECT_EQ(b.charged - b.useful, 3u * 64 * 128);
}

// ROW_MAJOR's transposes, by hand (DESIGN §2 MATH: 8 start-up cycles, 128 elements a cycle,
// 1 GHz): each tile's [64, 64] K is one TRANSPOSE of 4096 elements, 8 + 32 = 40 cycles =
// 40 ns, three per sweep; the MATH engine's op log holds one math_TRANSPOSE of 40 ns per tile
// (the scheduler logs each too), and the K
// tiles are loaded contiguously (no waste, the same useful bytes).
TEST(KLayoutCost, RowMajorTransposesEachTileOnMath) {
  const pb::Chip chip = Load("topology/small.textproto");
  AssertTimelineNumbers(chip);
  if (::testing::Test::HasFatalFailure()) return;
  DecodeRun tile_major = RunDecode(chip, OnePe(KLayout::kTileMajor), {});
  DecodeRun row_major = RunDecode(chip, OnePe(KLayout::kRowMajor), {});
  ASSERT_TRUE(tile_major.status.ok() && row_major.status.ok()) << row_major.status;
  const Bytes a = BytesOf(tile_major), b = BytesOf(row_major);
  EXPECT_EQ(b.math_ops - a.math_ops, 3u);
  EXPECT_EQ(b.math_busy_ps - a.math_busy_ps, 3u * 40000);
  EXPECT_EQ(b.useful, a.useful);
  EXPECT_EQ(b.charged, b.useful);
  std::vector<uint64_t> transposes;  // on the MATH engine
  for (const pb::TraceRecord& r : row_major.sim->op_log().records()) {
    if (r.has_op() && r.op().op() == "math_TRANSPOSE" && r.op().unit_name().ends_with(".math")) {
      transposes.push_back(r.op().end_ps() - r.op().start_ps());
    }
  }
  EXPECT_EQ(transposes, std::vector<uint64_t>(3, 40000));
}

}  // namespace
}  // namespace ahbm::kernels::testing
