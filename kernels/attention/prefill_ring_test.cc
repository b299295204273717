// The ring prefill's structure (ADR-0060 rev2 §5.5, §11 gate 3; DESIGN §4b), read from the op log
// and the NOC link counters: C − 1 rotations per CUBE and query chunk, (C − 1)·2·(S/C)·d·2 NOC
// bytes per CUBE and chunk, no (m, l, O) traffic, one distinct query head per CUBE, every slice
// at every CUBE; and the busiest PE's GEMM time against the mean for each query split.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/errors.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/attention/prefill_launch.h"
#include "proto/report.pb.h"
#include "proto/trace.pb.h"
#include "topology/ids.h"

namespace ahbm::kernels {
namespace {

using testing::Load;
using PrefillRun = testing::KernelRun<PrefillLaunch>;

PrefillRun RunRing(const pb::Chip& chip, const PrefillConfig& cfg, bool keep_op_log = true) {
  return testing::RunWith(chip, cfg, {}, "zero", PrefillCubes, LaunchPrefill, keep_op_log);
}

// G = C = 8 on the small chip's 2x4 CUBEs, P = 4; S divisible by C·P and the tile.
PrefillConfig RingCfg() {
  PrefillConfig cfg;
  cfg.variant = PrefillVariant::kRing;
  cfg.h_q = 8;
  cfg.h_kv = 1;
  cfg.d = 32;
  cfg.s = 512;
  cfg.p = 4;
  cfg.tile = 16;
  cfg.q_tile = 32;
  return cfg;
}

uint64_t NocBytes(const pb::Report& report) {
  uint64_t bytes = 0;
  for (const pb::UnitStats& u : report.units()) {
    if (u.kind() == "noc") bytes += u.bytes_written();  // a router's forwards: its link bytes
  }
  return bytes;
}

TEST(PrefillRing, RotationsBytesHeadsAndSlices) {
  const pb::Chip chip = Load("topology/small.textproto");
  const topology::ChipIndex index(chip);
  // One query chunk; one tile per chunk (4 chunks); sub-blocks of 8 keys in 16-key tiles (the
  // messages carry the keys, not the tile's padding).
  for (auto [chunk_cap, S] : {std::pair{0u, 512u}, {1u, 512u}, {0u, 256u}}) {
    PrefillConfig cfg = RingCfg();
    cfg.s = S;
    cfg.max_tiles_per_chunk = chunk_cap;
    PrefillRun run = RunRing(chip, cfg);
    ASSERT_TRUE(run.status.ok()) << run.status;
    const uint32_t C = cfg.C(), P = cfg.P(), chunks = run.launch.chunks;
    EXPECT_EQ(chunks, chunk_cap == 0 ? 1u : S / cfg.q_tile / P);
    // Per PE: its sub-block (S/(C·P) keys: K 16 x 32 x 2 B = 1 KiB at S = 512, V the same) goes
    // out once per rotation, C − 1 rotations per chunk; one message each for K and V.
    std::map<std::string, uint64_t> sends, send_bytes, receives;  // by PE CPU unit
    for (const pb::TraceRecord& r : run.sim->op_log().records()) {
      if (!r.has_op()) continue;
      if (r.op().op() == "send_noc") {
        ++sends[r.op().unit_name()];
        send_bytes[r.op().unit_name()] += r.op().bytes_written();
      }
      if (r.op().op() == "recv_noc") ++receives[r.op().unit_name()];
      // The only IPCQ traffic is the CUBE barrier's 64 B token: no (m, l, O) anywhere.
      if (r.op().op() == "send_ipcq") {
        EXPECT_EQ(r.op().bytes_written(), 64u);
      }
    }
    ASSERT_EQ(sends.size(), C * P);
    const uint64_t sub_block = S / (C * P) * cfg.d * 2;
    for (const auto& [unit, n] : sends) {
      EXPECT_EQ(n, 2u * (C - 1) * chunks) << unit;
      EXPECT_EQ(send_bytes[unit], 2u * (C - 1) * chunks * sub_block) << unit;
      EXPECT_EQ(receives[unit], n) << unit;  // every slice reaches every CUBE
    }
    // NOC bytes per CUBE and chunk from the link counters: (C − 1)·2·(S/C)·d·2 (one hop per
    // rotation on the snake cycle).
    const pb::Report report = run.sim->BuildReport();
    EXPECT_EQ(NocBytes(report), uint64_t{C} * chunks * (C - 1) * 2 * (S / C) * cfg.d * 2);
    // Each CUBE writes one query head, a distinct one.
    std::map<uint32_t, std::set<uint32_t>> heads_of_cube;
    std::set<uint32_t> heads;
    for (const PrefillLaunch::Output& o : run.launch.outputs[0]) {
      heads_of_cube[index.PeOf(o.pe).cube].insert(o.head);
      heads.insert(o.head);
    }
    EXPECT_EQ(heads_of_cube.size(), C);
    for (const auto& [cube, hs] : heads_of_cube) EXPECT_EQ(hs.size(), 1u) << cube;
    EXPECT_EQ(heads.size(), C);
  }
}

// Flow control (DESIGN §4b): with NOC endpoint queues below one sub-block message, a ring that
// sends before posting its receives deadlocks — every PE blocked in its send, reported by name —
// and the kernel's order (receives posted first) completes.
TEST(PrefillRing, SendFirstDeadlocksWhenASubBlockOutgrowsTheEndpointQueue) {
  pb::Chip chip = Load("topology/small.textproto");
  chip.mutable_sip()->mutable_noc()->set_endpoint_queue_bytes(4096);
  PrefillConfig cfg = RingCfg();
  cfg.d = 128;
  cfg.s = 2048;  // sub-block 64 keys: K 16 KiB, V 16 KiB, four 4 KiB messages each
  cfg.ring_message_bytes = 4096;  // at most the endpoint queue
  cfg.ring_send_first = true;
  PrefillRun stuck = RunRing(chip, cfg);
  ASSERT_EQ(KindOf(stuck.status), ErrorKind::kDeadlock) << stuck.status;
  const std::string message(stuck.status.message());
  EXPECT_TRUE(message.starts_with("deadlock")) << message;
  for (uint32_t cube = 0; cube < 8; ++cube) {
    for (uint32_t pe = 0; pe < 4; ++pe) {
      const std::string name = "sip0.cube" + std::to_string(cube) + ".pe" + std::to_string(pe);
      EXPECT_NE(message.find(name), std::string::npos) << name << " not named: " << message;
    }
  }
  cfg.ring_send_first = false;
  PrefillRun fine = RunRing(chip, cfg);
  EXPECT_TRUE(fine.status.ok()) << fine.status;
}

// Balance (DESIGN §4b): the busiest PE of a CUBE against the CUBE's mean GEMM busy time, for
// each query split of a whole 2048-token prompt (16 query tiles over 4 PEs). Contiguous rows
// leave the last PE most of the causal work; zig-zag (the default) evens it out.
TEST(PrefillRing, BusiestPeGemmTimeAgainstTheMean) {
  const pb::Chip chip = Load("topology/small.textproto");
  std::map<QuerySplit, double> worst;
  for (QuerySplit split : {QuerySplit::kContiguous, QuerySplit::kStriped, QuerySplit::kZigzag}) {
    PrefillConfig cfg = RingCfg();
    cfg.d = 128;
    cfg.s = 2048;
    cfg.tile = 128;
    cfg.q_tile = 128;
    cfg.query_split = split;
    PrefillRun run = RunRing(chip, cfg);
    ASSERT_TRUE(run.status.ok()) << run.status;
    std::map<std::string, std::vector<double>> busy;  // by CUBE ("sip0.cube5")
    const pb::Report report = run.sim->BuildReport();
    for (const pb::UnitStats& u : report.units()) {
      if (u.kind() == "gemm") busy[u.unit_name().substr(0, u.unit_name().find(".pe"))].push_back(u.busy_ps());
    }
    ASSERT_EQ(busy.size(), cfg.C());
    for (const auto& [cube, b] : busy) {
      ASSERT_EQ(b.size(), cfg.P());
      double sum = 0;
      for (double x : b) sum += x;
      worst[split] = std::max(worst[split], *std::max_element(b.begin(), b.end()) / (sum / b.size()));
    }
    const char* names[] = {"contiguous", "striped", "zigzag"};
    std::printf("query_split %s: busiest PE / mean GEMM busy = %.3f\n",
                names[static_cast<int>(split)], worst[split]);
  }
  EXPECT_LE(worst[QuerySplit::kZigzag], 1.15);
  EXPECT_GT(worst[QuerySplit::kContiguous], worst[QuerySplit::kZigzag]);
}

// §11 gate 3 at scale: Llama3-70B (H_q 64, H_kv 8, d 128), S = T_q = 8192, C = G = 8, P = 8 on
// the default topology (64 CUBEs), timing mode: every ring completes, and the NOC carries exactly
// the rotations: per KV head (C − 1)·2·S·d·2 bytes.
TEST(PrefillRingLarge, Llama70bEightKOnTheDefaultTopology) {
  const pb::Chip chip = Load("topology/chip_4sip.textproto");
  PrefillConfig cfg;  // Llama3-70B defaults
  cfg.s = 8192;
  PrefillRun run = RunRing(chip, cfg, /*keep_op_log=*/false);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.launch.chunks, 1u);
  const pb::Report report = run.sim->BuildReport();
  EXPECT_EQ(NocBytes(report), uint64_t{cfg.h_kv} * (cfg.C() - 1) * 2 * 8192 * cfg.d * 2);
  EXPECT_GT(report.latency_ps(), 0u);
  std::printf("8K ring: latency %.1f us, %llu events, %llu composites of %llu in the full grid\n",
              report.latency_ps() / 1e6, static_cast<unsigned long long>(report.events()),
              static_cast<unsigned long long>(run.launch.composites),
              static_cast<unsigned long long>(run.launch.grid_composites));
}

}  // namespace
}  // namespace ahbm::kernels
