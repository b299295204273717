// `ahbm run --kernel=decode` with the sweep's forms (decode.h, decode_run.cc ApplySweepFields):
// lookahead, one_shot, OPT2_LOOKAHEAD, BASELINE_DOT and the max_inflight_composites override —
// each bad value one line naming the field, the override reaching the scheduler, a recorded
// trace replaying with it, and `ahbm compare` taking the new variants.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/launch/compare.h"
#include "kernels/launch/launch.h"
#include "kernels/launch/launcher.h"
#include "kernels/replay/replay.h"
#include "topology/loader.h"

namespace ahbm::launch {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

pb::Chip SmallChip() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

pb::Workload Small(pb::Variant variant) {
  pb::Workload w;
  w.set_kernel(pb::DECODE);
  w.set_variant(variant);
  w.set_h_q(8);
  w.set_h_kv(2);
  w.set_d(64);
  w.set_s(1000);
  w.set_c(2);
  w.set_p(4);
  return w;
}

TEST(DecodeSweepRun, BadValuesAreOneLineNamingTheField) {
  const pb::Chip chip = SmallChip();
  const struct {
    std::string name;
    std::function<void(pb::Workload&)> mutate;
    std::string message;
  } cases[] = {
      {"lookahead past the in-flight limit", [](pb::Workload& w) { w.set_lookahead(4); },
       "lookahead: 4 composites issued ahead need 5 in flight with the one waited on; the "
       "scheduler admits max_inflight_composites = 4: at most 3"},
      {"lookahead past an overridden limit",
       [](pb::Workload& w) {
         w.set_max_inflight_composites(2);
         w.set_lookahead(2);
       },
       "lookahead: 2 composites issued ahead need 3 in flight"},
      {"lookahead on opt1",
       [](pb::Workload& w) {
         w.set_variant(pb::OPT1);
         w.set_lookahead(1);
       },
       "lookahead: OPT1 issues nothing ahead"},
      {"lookahead on opt2",
       [](pb::Workload& w) {
         w.set_variant(pb::OPT2);
         w.set_lookahead(0);
       },
       "lookahead: OPT2 does not use it"},
      {"lookahead on baseline_dot",
       [](pb::Workload& w) {
         w.set_variant(pb::BASELINE_DOT);
         w.set_lookahead(1);
       },
       "lookahead: BASELINE_DOT does not use it"},
      {"one_shot with tile",
       [](pb::Workload& w) {
         w.set_one_shot(true);
         w.set_tile(64);
       },
       "tile: one_shot makes each rank's whole block one tile; leave tile unset"},
      {"one_shot on opt2_lookahead",
       [](pb::Workload& w) {
         w.set_variant(pb::OPT2_LOOKAHEAD);
         w.set_one_shot(true);
       },
       "one_shot: OPT2_LOOKAHEAD does not use it"},
      {"one_shot on a fan-out baseline",
       [](pb::Workload& w) {
         w.set_variant(pb::BASELINE_FANOUT_GROUP);
         w.set_one_shot(true);
       },
       "one_shot: BASELINE_FANOUT_GROUP does not use it"},
      {"one_shot that does not fit",
       [](pb::Workload& w) {
         w.set_s(1 << 20);  // 131072 keys per rank
         w.set_one_shot(true);
       },
       "one_shot: a rank's 131072 keys as one tile need"},
      {"max_inflight_composites 0", [](pb::Workload& w) { w.set_max_inflight_composites(0); },
       "max_inflight_composites: must be > 0 (got 0)"},
      {"baseline_dot's loaded K and V tiles",
       [](pb::Workload& w) {
         w.set_variant(pb::BASELINE_DOT);
         w.set_tile(20000);
       },
       "tile: 20000 keys: one kernel instance on"},
  };
  for (const auto& c : cases) {
    pb::Workload w = Small(pb::OPT3);
    c.mutate(w);
    const absl::Status s = ValidateWorkload(chip, w);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.name << ": " << s;
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("\n"))) << c.name;
  }
  // The fields every form accepts where it uses them (and max_inflight_composites on prefill).
  for (pb::Variant v : {pb::OPT3, pb::OPT2_LOOKAHEAD, pb::SHORT_CONTEXT, pb::AUTO}) {
    pb::Workload w = Small(v);
    if (v == pb::SHORT_CONTEXT || v == pb::AUTO) w.clear_c();
    w.set_lookahead(3);
    EXPECT_TRUE(ValidateWorkload(chip, w).ok()) << pb::Variant_Name(v) << ValidateWorkload(chip, w);
  }
  for (pb::Variant v : {pb::OPT1, pb::OPT3, pb::OPT2}) {
    pb::Workload w = Small(v);
    w.set_one_shot(true);
    EXPECT_TRUE(ValidateWorkload(chip, w).ok()) << pb::Variant_Name(v) << ValidateWorkload(chip, w);
  }
  pb::Workload prefill;
  prefill.set_kernel(pb::PREFILL);
  prefill.set_h_q(8);
  prefill.set_h_kv(2);
  prefill.set_d(64);
  prefill.set_s(256);
  prefill.set_p(4);
  prefill.set_max_inflight_composites(2);
  EXPECT_TRUE(ValidateWorkload(chip, prefill).ok()) << ValidateWorkload(chip, prefill);
}

// The TCM counts of each form equal what its kernel allocates (CheckDecodeCapacity): at the
// largest tile the refusal names, the run fits (no arena overflow); one key more is refused.
// opt3 holds lookahead + 1 Sj buffers, opt2_lookahead max(8, lookahead + 1), baseline_dot
// its loaded K and V tiles in scratch.
// One-shot likewise at the largest context its refusal names.
TEST(DecodeSweepRun, TcmCountsOfEachFormHoldAtTheBoundary) {
  const pb::Chip chip = SmallChip();
  const auto run_ok = [&](const pb::Workload& w, const std::string& what) {
    absl::StatusOr<LaunchResult> r = RunWorkload(chip, w, LaunchOptions{});
    ASSERT_TRUE(r.ok()) << what << ": " << r.status();
    EXPECT_TRUE(r->runtime_status.ok()) << what << ": " << r->runtime_status;
  };
  // The number after `prefix` in `message`.
  const auto number_after = [](const std::string& message, const std::string& prefix) {
    const size_t at = message.find(prefix);
    EXPECT_NE(at, std::string::npos) << message;
    return at == std::string::npos ? 0 : std::stoull(message.substr(at + prefix.size()));
  };
  const struct {
    pb::Variant variant;
    int lookahead;  // -1: unset
  } forms[] = {{pb::OPT3, 0}, {pb::OPT3, 7}, {pb::OPT2_LOOKAHEAD, 7}, {pb::BASELINE_DOT, -1}};
  uint64_t opt3_fits[2] = {0, 0};
  for (const auto& f : forms) {
    pb::Workload w = Small(f.variant);
    if (f.lookahead >= 0) w.set_lookahead(static_cast<uint32_t>(f.lookahead));
    if (f.lookahead == 7) w.set_max_inflight_composites(8);
    const std::string what = absl::StrCat(pb::Variant_Name(f.variant), " lookahead ", f.lookahead);
    w.set_tile(1000000);
    const std::string refused(ValidateWorkload(chip, w).message());
    const uint64_t fits = number_after(refused, "at most tile = ");
    ASSERT_GT(fits, 0u) << what << ": " << refused;
    if (f.variant == pb::OPT3) opt3_fits[f.lookahead == 0 ? 0 : 1] = fits;
    w.set_tile(static_cast<uint32_t>(fits + 1));
    EXPECT_THAT(std::string(ValidateWorkload(chip, w).message()),
                HasSubstr(absl::StrCat("at most tile = ", fits, " fits")))
        << what;
    w.set_tile(static_cast<uint32_t>(fits));
    run_ok(w, what);
  }
  EXPECT_LT(opt3_fits[1], opt3_fits[0]);  // 8 persistent Sj buffers bind before the scratch
  for (pb::Variant v : {pb::OPT3, pb::OPT2}) {
    pb::Workload w = Small(v);
    w.set_one_shot(true);
    w.set_s(1 << 24);
    const std::string refused(ValidateWorkload(chip, w).message());
    const uint64_t context = number_after(refused, "(max_context <= ");
    ASSERT_GT(context, 0u) << refused;
    w.set_s(context + 1);
    EXPECT_THAT(std::string(ValidateWorkload(chip, w).message()), HasSubstr("one_shot: a rank's"))
        << pb::Variant_Name(v);
    w.set_s(context);
    run_ok(w, absl::StrCat("one-shot ", pb::Variant_Name(v)));
  }
}

// The override reaches every PE scheduler: at max_inflight_composites 1 opt2's CPU can keep
// only one composite in flight, so the run is slower than at the topology's 4, and equals a
// run on a topology that says 1. A trace records the overridden chip; replaying it, here or
// on the unmodified topology (a what-if that gets the workload's value too), gives the same.
TEST(DecodeSweepRun, MaxInflightCompositesOverridesTheTopology) {
  const pb::Chip chip = SmallChip();
  pb::Workload w = Small(pb::OPT2);
  w.set_tile(16);  // 8 tiles per rank
  absl::StatusOr<LaunchResult> four = RunWorkload(chip, w, LaunchOptions{});
  w.set_max_inflight_composites(1);
  const std::string trace = ::testing::TempDir() + "/inflight1.trace";
  LaunchOptions record;
  record.trace_path = trace;
  absl::StatusOr<LaunchResult> one = RunWorkload(chip, w, record);
  ASSERT_TRUE(four.ok() && one.ok()) << one.status();
  ASSERT_TRUE(one->runtime_status.ok()) << one->runtime_status;
  EXPECT_GT(one->report.latency_ps(), four->report.latency_ps());
  pb::Chip chip_one = chip;
  chip_one.mutable_sip()->mutable_cube()->mutable_pe()->mutable_scheduler()->set_max_inflight_composites(1);
  w.clear_max_inflight_composites();
  absl::StatusOr<LaunchResult> topology_one = RunWorkload(chip_one, w, LaunchOptions{});
  ASSERT_TRUE(topology_one.ok()) << topology_one.status();
  EXPECT_EQ(one->report.latency_ps(), topology_one->report.latency_ps());

  absl::StatusOr<replay::RecordedTrace> recorded = replay::ReadTraceFile(trace);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  for (bool what_if : {false, true}) {
    replay::ReplayOptions options;
    if (what_if) options.chip = chip;
    absl::StatusOr<LaunchResult> again = replay::Replay(*recorded, options);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->report.latency_ps(), one->report.latency_ps()) << "what-if " << what_if;
  }
  std::remove(trace.c_str());
}

// compare takes the new variants, with the sweep fields set: a row whose variant does not use
// lookahead or one_shot runs without it (CompareSpec::row); baseline_dot is a default row.
TEST(DecodeSweepRun, CompareTakesTheNewVariants) {
  const pb::Chip chip = SmallChip();
  pb::Workload w = Small(pb::VARIANT_UNSPECIFIED);
  w.clear_variant();
  w.set_lookahead(2);
  absl::StatusOr<std::vector<CompareRow>> rows =
      Compare(chip, w, {pb::OPT3, pb::OPT2_LOOKAHEAD, pb::BASELINE_DOT, pb::OPT2, pb::OPT1});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 5u);
  for (const CompareRow& row : *rows) EXPECT_GT(row.latency_ps, 0u) << pb::Variant_Name(row.variant);
  w.clear_lookahead();
  w.set_one_shot(true);
  rows = Compare(chip, w, {pb::OPT1, pb::OPT3, pb::OPT2, pb::OPT2_LOOKAHEAD, pb::BASELINE_DOT});
  ASSERT_TRUE(rows.ok()) << rows.status();
  // opt1 and opt3 issue the same commands one-shot.
  EXPECT_EQ((*rows)[0].latency_ps, (*rows)[1].latency_ps);
  const std::vector<pb::Variant> defaults = FindLauncher(pb::DECODE)->Compare().rows;
  EXPECT_NE(std::find(defaults.begin(), defaults.end(), pb::BASELINE_DOT), defaults.end());
}

}  // namespace
}  // namespace ahbm::launch
