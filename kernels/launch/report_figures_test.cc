// The report's figures beside the latency, checked against another figure or by hand.
//
// Per-request latency (Report.request_latency_ps): for every decode and prefill variant on a
// mixed batch (in both orders: longest request first, and last), one entry per request, and
// the latest of them is the kernel's latency (a request's O store is the run's last act).
// Which request ends first is not a law; measured at this shape (small chip, H_q 8, H_kv 2,
// so C = 4 CUBEs per KV head) and checked here:
// - decode kernels whose every rank PE hosts an instance of every request (opt1, opt3, opt2,
//   opt2_lookahead, baseline_dot, baseline_fanout, baseline_fanout_group): the requests end
//   in request-id order whatever their lengths — each PE CPU runs its lowest request id first
//   (actors/units/pe_cpu_actor.h), so a short request queues behind a long one (at H_q 64,
//   H_kv 8 only opt2 and opt2_lookahead keep that order: milestone/milestone_test);
// - the others (baseline_rev1_tree and short_context place requests apart; every prefill
//   variant): the longest request ends last, at the kernel's latency.
// One request: one entry, the latency.
//
// CPU stall (UnitStats.stall_ps of pe_cpu units) = the op log's StallRecords' spans, per PE.
// Reduce rounds per level (LaunchResult level2_rounds / level1_rounds) and ring rotations, by
// hand.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/launch/launch.h"
#include "proto/trace.pb.h"
#include "proto/workload.pb.h"
#include "topology/loader.h"

namespace ahbm::launch {
namespace {

pb::Chip SmallChip() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

pb::Workload Batch(pb::Kernel kernel, pb::Variant variant, const std::vector<uint64_t>& lengths) {
  pb::Workload w;
  w.set_kernel(kernel);
  w.set_variant(variant);
  w.set_h_q(8);
  w.set_h_kv(2);
  w.set_d(64);
  if (lengths.size() == 1) {
    w.set_s(lengths[0]);
  } else {
    for (uint64_t len : lengths) w.add_request_lengths(len);
  }
  return w;
}

LaunchResult RunSmall(const pb::Workload& w, bool keep_op_log = false) {
  LaunchOptions options;
  options.keep_op_log = keep_op_log;
  absl::StatusOr<LaunchResult> r = RunWorkload(SmallChip(), w, options);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->runtime_status.ok()) << r->runtime_status;
  return *std::move(r);
}

const std::vector<pb::Variant> kDecode = {pb::OPT1,
                                          pb::OPT3,
                                          pb::OPT2,
                                          pb::OPT2_LOOKAHEAD,
                                          pb::BASELINE_DOT,
                                          pb::BASELINE_FANOUT,
                                          pb::BASELINE_FANOUT_GROUP,
                                          pb::BASELINE_REV1_TREE,
                                          pb::SHORT_CONTEXT,
                                          pb::AUTO};
const std::vector<pb::Variant> kPrefill = {
    pb::FLASH, pb::RING, pb::SHORT_CONTEXT, pb::BASELINE_DOT, pb::BASELINE_FANOUT, pb::AUTO};

// Decode variants whose PEs host every request (AUTO picks opt3 at these
// lengths).
bool SharedPes(pb::Variant v) { return v != pb::BASELINE_REV1_TREE && v != pb::SHORT_CONTEXT; }

TEST(RequestLatency, MixedBatchEveryVariant) {
  for (pb::Kernel kernel : {pb::DECODE, pb::PREFILL}) {
    for (bool longest_first : {true, false}) {
      std::vector<uint64_t> lengths = kernel == pb::DECODE
                                          ? std::vector<uint64_t>{4096, 2048, 1024, 1024}
                                          : std::vector<uint64_t>{512, 256, 128, 128};
      if (!longest_first) std::reverse(lengths.begin(), lengths.end());
      const size_t longest = longest_first ? 0 : lengths.size() - 1;
      for (pb::Variant v : kernel == pb::DECODE ? kDecode : kPrefill) {
        const std::string name = absl::StrCat(pb::Kernel_Name(kernel), " ", pb::Variant_Name(v),
                                              " lengths ", absl::StrJoin(lengths, ","));
        const LaunchResult r = RunSmall(Batch(kernel, v, lengths));
        const std::vector<uint64_t> req(r.report.request_latency_ps().begin(),
                                        r.report.request_latency_ps().end());
        ASSERT_EQ(req.size(), lengths.size()) << name;
        SCOPED_TRACE(absl::StrCat(name, ": latency ", r.report.latency_ps(), ", requests ",
                                  absl::StrJoin(req, ",")));
        EXPECT_GT(req[0], 0u);
        EXPECT_EQ(*std::max_element(req.begin(), req.end()), r.report.latency_ps());
        if (kernel == pb::DECODE && SharedPes(v)) {
          EXPECT_TRUE(std::is_sorted(req.begin(), req.end()));
          // Not by length: with the longest request first, it finishes first.
          EXPECT_TRUE(!longest_first || req[longest] < req.back());
        } else {
          EXPECT_EQ(req[longest], r.report.latency_ps());
        }
      }
    }
  }
}

TEST(RequestLatency, OneRequestIsTheLatency) {
  for (const pb::Workload& w :
       {Batch(pb::DECODE, pb::OPT3, {2048}), Batch(pb::DECODE, pb::BASELINE_FANOUT_GROUP, {1024}),
        Batch(pb::PREFILL, pb::RING, {256})}) {
    const LaunchResult r = RunSmall(w);
    ASSERT_EQ(r.report.request_latency_ps_size(), 1) << w.ShortDebugString();
    EXPECT_EQ(r.report.request_latency_ps(0), r.report.latency_ps()) << w.ShortDebugString();
  }
}

// Each PE CPU's stall_ps is the sum of its StallRecords' spans (decode: reduce waits; prefill
// ring: rotation waits), and some PE did stall.
TEST(CpuStall, EqualsTheStallRecords) {
  for (const pb::Workload& w :
       {Batch(pb::DECODE, pb::OPT3, {2048, 700}), Batch(pb::PREFILL, pb::RING, {256})}) {
    const LaunchResult r = RunSmall(w, /*keep_op_log=*/true);
    std::map<std::string, uint64_t> from_log;  // by CPU unit name
    for (const pb::TraceRecord& rec : r.op_log) {
      if (!rec.has_stall()) continue;
      from_log[absl::StrCat("pe", rec.stall().pe())] += rec.stall().to_ps() - rec.stall().from_ps();
    }
    std::map<std::string, uint64_t> from_stats;
    uint64_t total = 0;
    for (const pb::UnitStats& u : r.report.units()) {
      if (u.kind() != "pe_cpu" || u.stall_ps() == 0) continue;
      from_stats[u.unit_name()] = u.stall_ps();
      total += u.stall_ps();
    }
    EXPECT_GT(total, 0u) << w.ShortDebugString();
    uint64_t log_total = 0;
    for (const auto& [pe, ps] : from_log) log_total += ps;
    EXPECT_EQ(total, log_total) << w.ShortDebugString();
    std::vector<uint64_t> a, b;
    for (const auto& [name, ps] : from_stats) a.push_back(ps);
    for (const auto& [pe, ps] : from_log) b.push_back(ps);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b) << w.ShortDebugString();
  }
}

// The chunked ring at both levels: 2 (R - 1) rounds for R nodes (reduce_tree.h) — small's
// CUBE has P = 4 PEs; h_kv 2 on its 8 CUBEs gives C = 4.
TEST(ReduceRounds, PerLevelByHand) {
  pb::Workload w = Batch(pb::DECODE, pb::OPT3, {2048});
  w.set_level2_reduce(pb::RING_REDUCE);
  w.set_level1_reduce(pb::RING_REDUCE);
  const LaunchResult r = RunSmall(w);
  EXPECT_EQ(r.level2_rounds, 2u * (4 - 1));
  EXPECT_EQ(r.level1_rounds, 2u * (4 - 1));
  EXPECT_EQ(r.reduce_rounds, r.level2_rounds + r.level1_rounds);
  // Prefill reduces nothing across levels.
  const LaunchResult p = RunSmall(Batch(pb::PREFILL, pb::RING, {256}));
  EXPECT_EQ(p.level2_rounds + p.level1_rounds, 0u);
}

// Ring prefill: C - 1 rotations per query chunk, C = G = 4 (h_q 8, h_kv 2), one chunk at this
// prompt; flash rotates nothing.
TEST(RingRotations, ByHand) {
  EXPECT_EQ(RunSmall(Batch(pb::PREFILL, pb::RING, {256})).ring_rotations, 3u);
  EXPECT_EQ(RunSmall(Batch(pb::PREFILL, pb::BASELINE_DOT, {256})).ring_rotations, 3u);
  EXPECT_EQ(RunSmall(Batch(pb::PREFILL, pb::FLASH, {256})).ring_rotations, 0u);
  EXPECT_EQ(RunSmall(Batch(pb::DECODE, pb::OPT3, {2048})).ring_rotations, 0u);
}

}  // namespace
}  // namespace ahbm::launch
