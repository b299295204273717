// What a run's report claims, checked against the run itself (DESIGN §2 "roofline", §5), over
// every decode and prefill variant, both issue-cost profiles and a few multi-user / causal
// T_q > 1 shapes on topology/small:
// - the roofline bound is a lower bound: bound <= simulated latency;
// - NOC routers and UCIe units that moved bytes were busy: busy > 0, busy <= latency, and a
//   router's links cannot have moved its bytes faster than their bandwidth allows;
// - the HBM channels moved exactly what the DMAs were charged (their tensors plus chunk waste).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/launch/launch.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"
#include "tests/small_workloads.h"

namespace ahbm {
namespace {

struct Case {
  std::string name;
  pb::Workload w;
};

// The shared small decode (small_workloads.h); the fan-out baselines with 4 query heads, the
// all-to-all one over 2 x 2 ranks.
pb::Workload Decode(pb::Variant variant, uint64_t s) {
  pb::Workload w = ahbm::testing::SmallDecode(variant, s, "zero");
  if (variant == pb::BASELINE_FANOUT || variant == pb::BASELINE_FANOUT_GROUP) w.set_h_q(4);
  if (variant == pb::BASELINE_FANOUT_GROUP) w.set_p(2);
  return w;
}

// h_q 4, h_kv 1, d 32, TILE 16, q_tile 16, P 2 (flash: one PE per KV head).
pb::Workload Prefill(pb::Variant variant, uint64_t s) {
  pb::Workload w;
  w.set_kernel(pb::PREFILL);
  w.set_variant(variant);
  w.set_h_q(4);
  w.set_h_kv(1);
  w.set_d(32);
  w.set_s(s);
  if (variant != pb::FLASH) w.set_p(2);
  w.set_tile(16);
  w.set_q_tile(16);
  return w;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const std::pair<const char*, pb::Variant> decode[] = {
      {"opt1", pb::OPT1},
      {"opt2", pb::OPT2},
      {"opt3", pb::OPT3},
      {"short_context", pb::SHORT_CONTEXT},
      {"auto", pb::AUTO},
      {"baseline_fanout", pb::BASELINE_FANOUT},
      {"baseline_fanout_group", pb::BASELINE_FANOUT_GROUP},
      {"baseline_rev1_tree", pb::BASELINE_REV1_TREE},
  };
  const std::pair<const char*, pb::Variant> prefill[] = {
      {"ring", pb::RING},
      {"flash", pb::FLASH},
      {"short_context", pb::SHORT_CONTEXT},
      {"auto", pb::AUTO},
      {"baseline_fanout", pb::BASELINE_FANOUT},
  };
  for (const char* profile : {"zero", "realistic"}) {
    const auto add = [&](const std::string& name, pb::Workload w) {
      w.set_issue_cost_profile(profile);
      cases.push_back({absl::StrCat(name, "_", profile), std::move(w)});
    };
    for (const auto& [name, v] : decode) add(absl::StrCat("decode_", name), Decode(v, 1000));
    for (const auto& [name, v] : prefill) add(absl::StrCat("prefill_", name), Prefill(v, 64));
    // Multi-user with mixed lengths (one shorter than C·P keys), causal T_q > 1 with
    // max_context > S, the reduce options, a ring over more steps with a ragged sub-block.
    pb::Workload batch = Decode(pb::OPT3, 0);
    batch.clear_s();
    batch.set_h_q(4);
    batch.set_h_kv(1);
    for (uint64_t len : {7, 300, 2049}) batch.add_request_lengths(len);
    add("decode_opt3_batch", batch);
    batch.set_variant(pb::OPT2);
    batch.set_reduce_payload(pb::PACKED);
    batch.set_reduce_merge(pb::FUSED);
    add("decode_opt2_batch_packed_fused", batch);
    pb::Workload causal = Decode(pb::OPT1, 700);
    causal.set_t_q(4);
    causal.set_max_context(2048);
    add("decode_opt1_causal_tq4", causal);
    causal.set_variant(pb::OPT2);
    add("decode_opt2_causal_tq4", causal);
    // The all-to-all baseline over 16 ranks: its PE bound plus the communication critical path
    // (the earlier rule) exceeded the latency under the zero profile (1.002×).
    pb::Workload fanout = Decode(pb::BASELINE_FANOUT_GROUP, 2048);
    fanout.set_h_q(8);
    fanout.set_h_kv(1);
    fanout.set_c(4);
    fanout.set_p(4);
    add("decode_baseline_fanout_group_16_ranks", fanout);
    pb::Workload ring = Prefill(pb::RING, 200);
    ring.set_t_q(23);
    add("prefill_ring_tq23", ring);
    pb::Workload ring_batch = Prefill(pb::RING, 0);
    ring_batch.clear_s();
    for (uint64_t len : {64, 19}) ring_batch.add_request_lengths(len);
    add("prefill_ring_batch", ring_batch);
  }
  return cases;
}

class ReportStatsTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReportStatsTest, TheReportHoldsForTheRun) {
  const pb::Chip chip = ahbm::testing::SmallChip();
  const Case& c = GetParam();
  absl::StatusOr<launch::LaunchResult> r = launch::RunWorkload(chip, c.w, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->runtime_status.ok()) << r->runtime_status;
  const pb::Report& report = r->report;
  const uint64_t latency = report.latency_ps();
  ASSERT_GT(latency, 0u);

  // The roofline is a lower bound (and is not empty).
  EXPECT_GT(report.roofline().bound_ps(), 0u);
  EXPECT_LE(report.roofline().bound_ps(), latency)
      << "binding " << report.roofline().binding_resource() << ", communication critical path "
      << report.roofline().comm_critical_path_ps();
  for (const pb::PeRoofline& pe : report.roofline().pes()) {
    EXPECT_LE(pe.bound_ps(), latency) << pe.binding_resource();
  }

  // Link units: busy wherever bytes moved; a router's busy time is the union of its out links'
  // (at most 4: bytes / (4 links × bandwidth) <= busy).
  const pb::Link& noc = chip.sip().noc().link();
  const double noc_bytes_per_ps =
      static_cast<double>(noc.bytes_per_cycle()) * noc.clock_mhz() / 1e6;
  uint64_t noc_bytes = 0, noc_busy = 0;
  uint64_t dma_useful = 0, dma_charged = 0, channel_bytes = 0;
  for (const pb::UnitStats& u : report.units()) {
    SCOPED_TRACE(u.unit_name());
    if (u.kind() == "noc" || u.kind() == "ucie" || u.kind() == "ipcq") {
      EXPECT_EQ(u.bytes_written() > 0, u.busy_ps() > 0);
      EXPECT_LE(u.busy_ps(), latency);
      EXPECT_GT(u.utilisation(), 0.0);
    }
    if (u.kind() == "noc") {
      noc_bytes += u.bytes_written();
      noc_busy += u.busy_ps();
      EXPECT_GE(static_cast<double>(u.busy_ps()) * 4 * noc_bytes_per_ps,
                static_cast<double>(u.bytes_written()));
    }
    if (u.kind() == "dma") {
      dma_useful += u.hbm_useful_bytes();
      dma_charged += u.hbm_charged_bytes();
      EXPECT_GE(u.hbm_charged_bytes(), u.hbm_useful_bytes());
    }
    if (u.kind() == "hbm_channel") channel_bytes += u.bytes_read() + u.bytes_written();
  }
  EXPECT_EQ(noc_bytes > 0, noc_busy > 0);
  // What the channels moved is what the DMAs were charged: their tensors plus chunk waste.
  EXPECT_GT(dma_useful, 0u);
  EXPECT_EQ(channel_bytes, dma_charged) << "DMA tensors " << dma_useful;
}

INSTANTIATE_TEST_SUITE_P(SmallChip, ReportStatsTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace ahbm
