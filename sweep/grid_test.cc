#include "sweep/grid.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "topology/loader.h"

namespace ahbm::sweep {
namespace {

pb::Chip SmallChip() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

pb::Workload Decode() {
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_h_q(8);
  w.set_h_kv(2);
  w.set_p(4);
  w.set_s(2000);
  return w;
}

TEST(SetChipField, SetsANestedScalar) {
  pb::Chip chip = SmallChip();
  ASSERT_TRUE(SetChipField(chip, "sip.cube.pe.scheduler.max_inflight_composites", "7").ok());
  EXPECT_EQ(chip.sip().cube().pe().scheduler().max_inflight_composites(), 7u);
  ASSERT_TRUE(SetChipField(chip, "sip.cube.hbm_channel.bank.t_rcd_rd_cycles", "40").ok());
  EXPECT_EQ(chip.sip().cube().hbm_channel().bank().t_rcd_rd_cycles(), 40u);
  ASSERT_TRUE(SetChipField(chip, "sip.cube.hbm_channel.bank.refresh", "per_bank").ok());
  EXPECT_EQ(chip.sip().cube().hbm_channel().bank().refresh(), pb::PER_BANK);
  ASSERT_TRUE(SetChipField(chip, "name", "what-if").ok());
  EXPECT_EQ(chip.name(), "what-if");
  ASSERT_TRUE(SetChipField(chip, "sip.cube.hbm_bytes", "17179869184").ok());
  EXPECT_EQ(chip.sip().cube().hbm_bytes(), 17179869184u);
}

TEST(SetChipField, Refusals) {
  pb::Chip chip = SmallChip();
  EXPECT_EQ(ResolveChipPath("sip.nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ResolveChipPath("sip.cube").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SetChipField(chip, "sip.cube.pe.nope", "1").message(),
            "sip.cube.pe.nope: no field 'nope' in Pe");
  EXPECT_EQ(SetChipField(chip, "sip.cube.pe", "1").message(),
            "sip.cube.pe: pe is a message; name one of its fields");
  EXPECT_EQ(SetChipField(chip, "sips.x", "1").message(),
            "sips.x: sips is not a message (no field 'x' under it)");
  EXPECT_EQ(SetChipField(chip, "sip.cube.pe.issue_cost_profiles", "1").message(),
            "sip.cube.pe.issue_cost_profiles: issue_cost_profiles is a repeated "
            "field (not "
            "settable)");
  EXPECT_EQ(SetChipField(chip, "sips", "-1").message(),
            "sips: must be an integer in [0, 4294967295] (got '-1')");
  EXPECT_EQ(SetChipField(chip, "sips", "4294967296").message(),
            "sips: must be an integer in [0, 4294967295] (got '4294967296')");
  EXPECT_EQ(SetChipField(chip, "sip.cube.hbm_channel.bank.refresh", "sometimes").message(),
            "sip.cube.hbm_channel.bank.refresh: must be one of "
            "refresh_unspecified, no_refresh, "
            "all_bank, per_bank (got 'sometimes')");
}

TEST(BuildGrid, CartesianProductFirstParamOutermost) {
  absl::StatusOr<std::vector<Point>> grid =
      BuildGrid(SmallChip(), Decode(),
                {{"variant", {"opt1", "opt3"}},
                 {"sip.cube.pe.scheduler.max_inflight_composites", {"1", "2", "4"}}});
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->size(), 6u);
  const std::vector<std::vector<std::string>> want = {{"opt1", "1"}, {"opt1", "2"}, {"opt1", "4"},
                                                      {"opt3", "1"}, {"opt3", "2"}, {"opt3", "4"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*grid)[i].values, want[i]);
    EXPECT_TRUE((*grid)[i].refused.ok()) << (*grid)[i].refused;
    EXPECT_EQ((*grid)[i].chip.sip().cube().pe().scheduler().max_inflight_composites(),
              std::stoul(want[i][1]));
  }
  EXPECT_EQ((*grid)[3].workload.variant(), pb::OPT3);
}

TEST(BuildGrid, ARefusedPointIsKept) {
  absl::StatusOr<std::vector<Point>> grid =
      BuildGrid(SmallChip(), Decode(), {{"sip.cube.pe.scheduler.tile_k", {"64", "0"}}});
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->size(), 2u);
  EXPECT_TRUE((*grid)[0].refused.ok());
  EXPECT_EQ((*grid)[1].refused.code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<Point>> h = BuildGrid(SmallChip(), Decode(), {{"h_q", {"8", "0"}}});
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE((*h)[1].refused.ok());
}

TEST(BuildGrid, BadParamsAndValuesRefuseTheSweep) {
  EXPECT_EQ(BuildGrid(SmallChip(), Decode(), {{"nope", {"1"}}}).status().message(),
            "--param: 'nope' is neither a workload field nor a topology field (nope: "
            "no field "
            "'nope' in Chip)");
  EXPECT_EQ(BuildGrid(SmallChip(), Decode(), {{"s", {"8", "x"}}}).status().message(),
            "--values: s: must be an integer in [0, 18446744073709551615] (got 'x')");
  EXPECT_EQ(BuildGrid(SmallChip(), Decode(), {{"sip.cube", {"1"}}}).status().message(),
            "--param: sip.cube: cube is a message; name one of its fields");
  EXPECT_EQ(BuildGrid(SmallChip(), Decode(), {{"variant", {"opt9"}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FormatCsv, HeaderRowsAndRefusals) {
  const std::vector<Param> params = {{"s", {"512", "1024"}}};
  Row ok;
  ok.values = {"512"};
  ok.workload = Decode();
  ok.workload.set_variant(pb::OPT3);
  ok.ran = true;
  ok.latency_ps = 1234;
  ok.roofline_bound_ps = 1000;
  ok.roofline_ratio = 1.234;
  ok.binding = "sip0.cube0.pe1.hbm";
  ok.events = 99;
  Row refused;
  refused.values = {"1024"};
  refused.workload = Decode();
  refused.status = absl::InvalidArgumentError("c: must divide, \"x\"");
  EXPECT_EQ(FormatCsv(params, {ok, refused}),
            "s,workload,latency_ps,roofline_bound_ps,roofline_"
            "ratio,binding,events,"
            "status\n"
            "512,kernel=decode variant=opt3 h_q=8 h_kv=2 s=2000 "
            "p=4,1234,1000,1.2340,"
            "sip0.cube0.pe1.hbm,99,ok\n"
            "1024,kernel=decode h_q=8 h_kv=2 s=2000 p=4,,,,,,\"c: must "
            "divide, \"\"x\"\"\"\n");
}

}  // namespace
}  // namespace ahbm::sweep
