// The HBM bank model in whole kernel runs (DESIGN §2): the small chip with HBM3-like
// pseudo-channels, timed by the FIFO at the same peak and first-byte latency, or by the bank
// model (topology/chip_4sip_hbm3.textproto's channel). Values never depend on timing; times do.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/host/placement.h"
#include "kernels/launch/launch.h"
#include "kernels/replay/replay.h"
#include "proto/workload.pb.h"
#include "topology/kv_placement.h"
#include "topology/loader.h"
#include "topology/validate.h"

namespace ahbm {
namespace {

pb::Chip Load(const std::string& path) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(path);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

// The small chip with chip_4sip_hbm3's channels, as BANK or as FIFO at the same peak.
pb::Chip SmallHbm3(bool bank) {
  pb::Chip chip = Load("topology/small.textproto");
  pb::HbmChannel* hbm = chip.mutable_sip()->mutable_cube()->mutable_hbm_channel();
  *hbm = Load("topology/chip_4sip_hbm3.textproto").sip().cube().hbm_channel();
  if (!bank) {
    hbm->set_model(pb::FIFO);
    hbm->clear_bank();
  }
  EXPECT_TRUE(topology::Validate(chip).ok());
  return chip;
}

launch::LaunchResult RunOn(const pb::Chip& chip, const std::string& workload,
                         launch::LaunchOptions options = {}) {
  pb::Workload w;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(workload, &w)) << workload;
  absl::StatusOr<launch::LaunchResult> r = launch::RunWorkload(chip, w, options);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->runtime_status.ok()) << r->runtime_status;
  return *std::move(r);
}

constexpr char kDecode[] = "kernel: DECODE variant: OPT3 h_q: 8 h_kv: 1 c: 2 p: 4 tile: 64 s: 2048";

TEST(HbmModel, TheReportNamesTheModelAndBanksCostTime) {
  const launch::LaunchResult fifo = RunOn(SmallHbm3(false), kDecode);
  const launch::LaunchResult bank = RunOn(SmallHbm3(true), kDecode);
  EXPECT_EQ(fifo.report.hbm_model(), "fifo");
  EXPECT_EQ(bank.report.hbm_model(), "bank (ALL_BANK refresh, FR_FCFS, BANK_GROUP_FIRST)");
  // The same peak and the same idle first read (a closed row), yet other times: a read of an
  // open row skips tRCD (faster than the FIFO's first byte), conflicts and refreshes cost more.
  // Here the row hits win: 2626 ns against 2694 ns.
  EXPECT_NE(bank.report.latency_ps(), fifo.report.latency_ps());
  EXPECT_EQ(bank.report.roofline().bound_ps(), fifo.report.roofline().bound_ps());
  // HBM busy time counts the data bus: the same bytes, the same occupancy.
  uint64_t fifo_busy = 0, bank_busy = 0;
  for (const pb::UnitStats& u : fifo.report.units()) fifo_busy += u.kind() == "hbm_channel" ? u.busy_ps() : 0;
  for (const pb::UnitStats& u : bank.report.units()) bank_busy += u.kind() == "hbm_channel" ? u.busy_ps() : 0;
  EXPECT_EQ(bank_busy, fifo_busy);
}

TEST(HbmModel, DataModeValuesDoNotDependOnTheModel) {
  const std::string w = absl::StrCat(kDecode, " data: true");
  const launch::LaunchResult fifo = RunOn(SmallHbm3(false), w);
  const launch::LaunchResult bank = RunOn(SmallHbm3(true), w);
  ASSERT_EQ(fifo.outputs.size(), 1u);
  ASSERT_EQ(bank.outputs.size(), 1u);
  EXPECT_EQ(fifo.outputs.at("o").data, bank.outputs.at("o").data);
  for (float v : bank.outputs.at("o").data) ASSERT_FALSE(std::isnan(v));
}

TEST(HbmModel, BankRunsAreDeterministicAndReplayExactly) {
  launch::LaunchOptions options;
  options.trace_path = absl::StrCat(::testing::TempDir(), "/bank.trace");
  const launch::LaunchResult a = RunOn(SmallHbm3(true), kDecode, options);
  const launch::LaunchResult b = RunOn(SmallHbm3(true), kDecode);
  EXPECT_EQ(a.report.latency_ps(), b.report.latency_ps());
  EXPECT_EQ(a.report.units_size(), b.report.units_size());
  absl::StatusOr<replay::RecordedTrace> trace = replay::ReadTraceFile(options.trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  absl::StatusOr<launch::LaunchResult> again = replay::Replay(*trace, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->report.DebugString(), a.report.DebugString());
}

// The call memo (actors/models/hbm_call_memo.h) changes nothing but speed: decode (opt1, opt3,
// multi-user T_q > 1) and a ring prefill give the same op log byte for byte with it off, on, and
// checked at every hit; and it does replay most channel calls.
TEST(HbmModel, TheCallMemoGivesTheSimulatedOpLog) {
  const std::vector<std::string> workloads = {
      kDecode,
      "kernel: DECODE variant: OPT1 h_q: 8 h_kv: 1 c: 2 p: 4 tile: 64 s: 2048",
      "kernel: DECODE variant: OPT3 h_q: 8 h_kv: 1 c: 2 p: 4 tile: 64 t_q: 2 "
      "request_lengths: 700 request_lengths: 1000",
      "kernel: PREFILL variant: RING h_q: 2 h_kv: 1 c: 2 p: 4 tile: 64 s: 512"};
  for (const std::string& w : workloads) {
    SCOPED_TRACE(w);
    std::string logs[3];
    sim::HbmCallMemo::Stats stats[3];
    const sim::HbmCallMemo::Mode modes[3] = {sim::HbmCallMemo::Mode::kOff,
                                             sim::HbmCallMemo::Mode::kOn,
                                             sim::HbmCallMemo::Mode::kVerify};
    for (int m = 0; m < 3; ++m) {
      launch::LaunchOptions options;
      options.hbm_call_memo = modes[m];
      const launch::LaunchResult r = RunOn(SmallHbm3(true), w, options);
      for (const pb::TraceRecord& record : r.op_log) logs[m] += record.SerializeAsString();
      logs[m] += r.report.SerializeAsString();
      stats[m] = r.hbm_call_memo;
    }
    EXPECT_FALSE(logs[0].empty());
    EXPECT_TRUE(logs[1] == logs[0]) << "the memo changed the op log";
    EXPECT_TRUE(logs[2] == logs[0]);
    EXPECT_EQ(stats[0].calls, 0u);
    EXPECT_GT(stats[1].calls, 0u);
    EXPECT_GT(stats[1].hits * 2, stats[1].calls) << stats[1].hits << " of " << stats[1].calls;
    EXPECT_EQ(stats[2].hits, stats[1].hits);
  }
}

// kv_bank_layout INTERLEAVED: the same values, V half a bank cycle from K on every PE; refused
// on FIFO channels.
TEST(HbmModel, InterleavedKvLayoutMovesVHalfABankCycle) {
  const std::string w = absl::StrCat(kDecode, " data: true");
  const launch::LaunchResult naive = RunOn(SmallHbm3(true), w);
  const launch::LaunchResult inter = RunOn(SmallHbm3(true), absl::StrCat(w, " kv_bank_layout: INTERLEAVED"));
  EXPECT_EQ(naive.outputs.at("o").data, inter.outputs.at("o").data);
  pb::Workload fifo_w;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      absl::StrCat(kDecode, " kv_bank_layout: INTERLEAVED"), &fifo_w));
  const absl::StatusOr<launch::LaunchResult> refused = launch::RunWorkload(SmallHbm3(false), fifo_w, {});
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("kv_bank_layout: INTERLEAVED needs BANK HBM channels"),
            std::string::npos);
}

// PadForBankInterleave: on every PE of a KV head, V's shard starts half a bank cycle after K's:
// the bank period per channel is 1 KiB rows x 2 stack ids x 4 bank groups x 4 banks = 32 KiB,
// 256 KiB over a PE's 8 channels, so V - K = 128 KiB (mod 256 KiB); the naive V follows K.
TEST(HbmModel, PadForBankInterleavePutsVHalfABankCycleAfterK) {
  const pb::Chip chip = SmallHbm3(true);
  const topology::ChipIndex index(chip);
  absl::StatusOr<topology::KvPlacement> kv = topology::KvPlacement::Create(1, 4, 1000, 0, 0);
  ASSERT_TRUE(kv.ok());
  const std::vector<host::KvHeadGroup> heads = {{{0}, {0, 1, 2, 3}}};
  for (const bool interleave : {false, true}) {
    host::HbmAllocator allocator(chip);
    absl::StatusOr<host::PlacedTensor> k =
        host::PlaceKvCache(allocator, "k", {1, 1000, 128}, pb::BF16, *kv, heads);
    ASSERT_TRUE(k.ok()) << k.status();
    if (interleave) {
      ASSERT_TRUE(host::PadForBankInterleave(allocator, *k).ok());
    }
    absl::StatusOr<host::PlacedTensor> v =
        host::PlaceKvCache(allocator, "v", {1, 1000, 128}, pb::BF16, *kv, heads);
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(k->shards().size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      const uint64_t ka = k->shards()[i].ref.addr(), va = v->shards()[i].ref.addr();
      const uint64_t k_bytes = 250 * 128 * 2;  // B = 1000 / 4 slots of d 128, bf16
      if (interleave) {
        EXPECT_EQ((va - ka) % (256 * 1024), 128u * 1024) << "pe " << i;
      } else {
        EXPECT_EQ(va - ka, (k_bytes + 255) / 256 * 256) << "pe " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ahbm
