#include "kernels/attention/attention_geometry.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/prefill_launch.h"
#include "topology/test_chip.h"

namespace ahbm::kernels {
namespace {

// One SIP of 4x4 CUBEs, each 2x4 PEs (or `sips` SIPs).
pb::Chip Chip(uint32_t sips = 1) {
  topology::ChipShape shape;
  shape.sips = sips;
  return topology::MakeStructuralChip(shape);
}

GeometrySpec Valid() {
  GeometrySpec g;
  g.h_q = 16;
  g.h_kv = 2;
  g.d = 64;
  g.s = 1024;
  g.c = 4;
  g.p = 8;
  g.tile = 128;
  return g;
}

std::string ErrorOf(const GeometrySpec& g) {
  absl::StatusOr<AttentionGeometry> geo = MakeAttentionGeometry(Chip(), g);
  return geo.ok() ? "ok" : std::string(geo.status().message());
}

// Each step breaks one more field; the error names the first of them in the contract's order,
// so breaking them in reverse order moves the reported field forward each time.
TEST(AttentionGeometryTest, ErrorsFollowTheContractsOrder) {
  GeometrySpec g = Valid();
  ASSERT_EQ(ErrorOf(g), "ok");
  const std::vector<std::pair<void (*)(GeometrySpec&), std::string>> steps = {
      {[](GeometrySpec& s) { s.start_pe = 8; }, "start_pe:"},
      {[](GeometrySpec& s) { s.start_cube = 4; }, "start_cube:"},
      {[](GeometrySpec& s) { s.h_kv = 8; s.h_q = 64; }, "h_kv: 8 KV heads need 8 CUBE Groups"},
      {[](GeometrySpec& s) { s.sip = 1; }, "sip: 1 is outside the chip's 1 SIPs"},
      {[](GeometrySpec& s) { s.kv_per_cube = 2; }, "c: the short-context kernel"},
      {[](GeometrySpec& s) { s.c = 3; }, "c"},  // the CUBE Group partition's own message
      {[](GeometrySpec& s) { s.p = 5; }, "p: 5 PEs do not form a rectangle"},
      {[](GeometrySpec& s) { s.tile = 0; }, "tile: must be > 0"},
      {[](GeometrySpec& s) { s.t_q = 2000; }, "t_q: 2000 query tokens exceed"},
      {[](GeometrySpec& s) { s.max_context = 512; }, "s: 1024 exceeds max_context 512"},
      {[](GeometrySpec& s) { s.request_lengths = {1, 2}; }, "request_lengths: 2 lengths"},
      {[](GeometrySpec& s) { s.users = 0; }, "users: must be > 0"},
      {[](GeometrySpec& s) { s.t_q = 0; }, "t_q: must be > 0"},
      {[](GeometrySpec& s) { s.d = 0; }, "d: must be > 0"},
      {[](GeometrySpec& s) { s.h_q = 3; }, "h_q: must be a positive multiple of h_kv = 8"},
      {[](GeometrySpec& s) { s.h_kv = 0; }, "h_kv: must be > 0"},
      {[](GeometrySpec& s) { s.kv_per_cube = 3; }, "kv_per_cube: must be 1, 2, 4 or 8"},
  };
  for (const auto& [breaks, expected] : steps) {
    breaks(g);
    const std::string error = ErrorOf(g);
    EXPECT_EQ(error.rfind(expected, 0), 0u) << "expected '" << expected << "', got: " << error;
  }
}

TEST(AttentionGeometryTest, HeadsFillTheSipsGroupsInOrder) {
  GeometrySpec g = Valid();
  g.h_kv = 8;  // 4 groups of C = 4 per SIP: heads 4..7 on SIP 1
  g.h_q = 64;
  absl::StatusOr<AttentionGeometry> geo = MakeAttentionGeometry(Chip(/*sips=*/2), g);
  ASSERT_TRUE(geo.ok()) << geo.status();
  EXPECT_EQ(geo->groups_per_sip, 4u);
  const std::vector<std::vector<uint32_t>> cubes = geo->HeadCubes();
  ASSERT_EQ(cubes.size(), 8u);
  for (uint32_t h = 0; h < 8; ++h) {
    ASSERT_EQ(cubes[h].size(), 4u);
    for (uint32_t cube : cubes[h]) EXPECT_EQ(cube / 16, h / 4) << "head " << h;  // its SIP
  }
  EXPECT_EQ(cubes[4][0], cubes[0][0] + 16);  // the same group of the next SIP
  // The rectangle: 8 PEs of a 2x4 mesh, root at the centre (ties lowest).
  EXPECT_EQ(geo->pe_rows, 2u);
  EXPECT_EQ(geo->pe_cols, 4u);
  EXPECT_EQ(geo->pes, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(AttentionGeometryTest, ShortContextPutsKvPerCubeHeadsOnEachCube) {
  GeometrySpec g = Valid();
  g.c = 1;
  g.h_kv = 8;
  g.h_q = 64;
  g.kv_per_cube = 2;
  absl::StatusOr<AttentionGeometry> geo = MakeAttentionGeometry(Chip(), g);
  ASSERT_TRUE(geo.ok()) << geo.status();
  for (uint32_t h = 0; h < 8; h += 2) {
    EXPECT_EQ(geo->CubeOf(h, 0), geo->CubeOf(h + 1, 0)) << "heads " << h << ", " << h + 1;
    if (h > 0) EXPECT_NE(geo->CubeOf(h, 0), geo->CubeOf(h - 1, 0));
  }
}

TEST(AttentionGeometryTest, TooManyHeadsNameWhatWouldFit) {
  GeometrySpec g = Valid();
  g.h_kv = 8;
  g.h_q = 64;  // C = 4: 4 groups on one SIP
  EXPECT_EQ(ErrorOf(g),
            "h_kv: 8 KV heads need 8 CUBE Groups of C = 4; SIPs 0.. have 4; C = 2 fits (--c=2)");
  EXPECT_FALSE(HostsKvHeads(Chip(), g));
  g.c = 2;
  EXPECT_TRUE(HostsKvHeads(Chip(), g));
  g.c = 1;
  g.kv_per_cube = 1;
  g.h_kv = 32;
  g.h_q = 64;
  EXPECT_EQ(ErrorOf(g).rfind("h_kv: 32 KV heads need 32 CUBE Groups of C = 1; SIPs 0.. have 16; "
                             "kv_per_cube = 2 fits (--kv_per_cube=2)",
                             0),
            0u)
      << ErrorOf(g);
}

// Decode and prefill describe themselves; the ring prefill with C = G and a decode with the
// same C and P run on the same CUBEs.
TEST(AttentionGeometryTest, DecodeAndPrefillSpecsAgreeWhereTheirConfigsDo) {
  DecodeConfig d;
  d.h_q = 16;
  d.h_kv = 2;
  d.d = 64;
  d.s = 2048;
  d.c = 8;  // G
  d.p = 8;
  d.tile = 128;
  PrefillConfig p;
  p.h_q = 16;
  p.h_kv = 2;
  p.d = 64;
  p.s = 2048;
  p.p = 8;
  p.tile = 128;
  p.variant = PrefillVariant::kRing;
  const GeometrySpec a = d.Geometry(), b = p.Geometry();
  EXPECT_EQ(b.c, 8u);  // C = G
  EXPECT_EQ(b.t_q, 1u);
  absl::StatusOr<std::vector<std::vector<uint32_t>>> da = AttentionCubeSets(Chip(), a);
  absl::StatusOr<std::vector<std::vector<uint32_t>>> pb_ = AttentionCubeSets(Chip(), b);
  ASSERT_TRUE(da.ok() && pb_.ok());
  EXPECT_EQ(*da, *pb_);
  // Flash prefill: one PE, one CUBE per head; short context: kv_per_cube only there.
  p.variant = PrefillVariant::kFlash;
  EXPECT_EQ(p.Geometry().p, 1u);
  EXPECT_EQ(p.Geometry().c, 1u);
  EXPECT_EQ(p.Geometry().kv_per_cube, 0u);
  p.variant = PrefillVariant::kShortContext;
  p.kv_per_cube = 2;
  EXPECT_EQ(p.Geometry().kv_per_cube, 2u);
}

}  // namespace
}  // namespace ahbm::kernels
