// PE_SCHEDULER acceptance tests (DESIGN §4): composite timing from the tile plan, GQA operand
// reuse, overlap, oldest-ready-first, no head-of-line blocking, the softmax_pv chain, and the
// closed form against per-tile simulation. Expected times are derived here from the topology
// numbers, not read back from the simulator.
#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/errors.h"
#include "actors/chip_sim.h"
#include "actors/inject.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

using inject::Hbm;
using inject::ProgramBuilder;
using inject::Tcm;
using ::testing::HasSubstr;

constexpr char kSmall[] = "topology/small.textproto";

pb::Chip LoadSmall() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(kSmall);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

struct Span {
  uint64_t start = 0;
  uint64_t end = 0;
};

// Runs `program` on PE 0 of CUBE 0 of the small chip.
struct SimRun {
  std::unique_ptr<ChipSim> sim;
  absl::Status status;

  // The scheduler-level record of each command: cmd_id -> span.
  std::map<uint64_t, Span> Commands() const {
    std::map<uint64_t, Span> out;
    for (const pb::TraceRecord& r : sim->op_log().records()) {
      if (r.has_op() && r.op().unit_name().ends_with(".scheduler")) {
        out[r.op().cmd_id()] = {r.op().start_ps(), r.op().end_ps()};
      }
    }
    return out;
  }
  // Per-tile engine records ("<op>:<what>") of one unit suffix (".gemm", ".math"), in order.
  std::vector<std::pair<uint64_t, pb::OpRecord>> Tiles(const std::string& suffix) const {
    std::vector<std::pair<uint64_t, pb::OpRecord>> out;
    for (const pb::TraceRecord& r : sim->op_log().records()) {
      if (r.has_op() && r.op().unit_name().ends_with(suffix) &&
          r.op().op().find(':') != std::string::npos) {
        out.emplace_back(r.op().cmd_id(), r.op());
      }
    }
    std::sort(out.begin(), out.end(),
              [](const auto& x, const auto& y) { return x.second.start_ps() < y.second.start_ps(); });
    return out;
  }
};

SimRun RunOn(const pb::Chip& chip, CpuProgram program, bool per_tile_events = false,
          std::string profile = "zero", bool op_log = true) {
  ChipSimOptions options;
  options.cubes = {0};
  options.keep_op_log = op_log;
  options.per_tile_events = per_tile_events;
  options.per_tile_detail = true;
  options.issue_cost_profile = std::move(profile);
  absl::StatusOr<std::unique_ptr<ChipSim>> sim = ChipSim::Create(chip, options);
  EXPECT_TRUE(sim.ok()) << sim.status();
  SimRun run;
  run.sim = std::move(*sim);
  EXPECT_TRUE(run.sim->SetProgram(0, std::move(program)).ok());
  run.status = run.sim->Run();
  return run;
}

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : chip_(LoadSmall()) {
    const pb::Cube& cube = chip_.sip().cube();
    ps_ = 1'000'000 / cube.pe().clock_mhz();  // every clock of the small chip is equal
    latency_ = cube.hbm_channel().first_byte_latency_cycles();
    channel_bw_ = cube.hbm_channel().bytes_per_cycle();
    channels_ = cube.pe().hbm_channels();
    fill_ = cube.pe().gemm().fill_drain_cycles();
    rows_ = cube.pe().gemm().array_rows();
    cols_ = cube.pe().gemm().array_cols();
    tile_m_ = cube.pe().scheduler().tile_m();
    tile_k_ = cube.pe().scheduler().tile_k();
    tile_n_ = cube.pe().scheduler().tile_n();
    lanes_ = cube.pe().math().lanes_per_cycle();
    startup_ = cube.pe().math().startup_cycles();
  }
  // Cycles of one DMA of `bytes` (dense, chunk-aligned, spread evenly over the PE's channels)
  // arriving at idle channels: first-byte latency + the per-channel share at channel speed.
  uint64_t DmaCycles(uint64_t bytes) const { return latency_ + bytes / channels_ / channel_bw_; }
  uint64_t Occupancy(uint64_t bytes) const { return bytes / channels_ / channel_bw_; }
  uint64_t GemmTile(uint64_t m, uint64_t k, uint64_t n) const {
    return k * ((m + rows_ - 1) / rows_) * ((n + cols_ - 1) / cols_);
  }

  pb::Chip chip_;
  uint64_t ps_, latency_, channel_bw_, channels_, fill_, rows_, cols_;
  uint64_t tile_m_, tile_k_, tile_n_, lanes_, startup_;
};

// One composite, b [K, N] in HBM with N = tile_n: each B piece (tile_k x tile_n bf16) is a
// dense 16 KiB DMA; piece i is FIFO behind piece i-1 on every channel. GEMM tile i waits for
// piece i; the first pays fill/drain; the SCALE epilogue follows the last k-tile.
TEST_F(SchedulerTest, CompositeTakesItsTilePlanTime) {
  const uint64_t m = tile_m_, k = 2 * tile_k_, n = tile_n_;
  ProgramBuilder p;
  const uint64_t id = p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Hbm(0, 0, pb::BF16, {k, n}),
                                  Tcm(0, 65536, pb::FP32, {m, n}), {pb::SCALE});
  SimRun run = RunOn(chip_, p.Build());
  ASSERT_TRUE(run.status.ok()) << run.status;

  const uint64_t piece = tile_k_ * tile_n_ * 2;
  const uint64_t piece0 = DmaCycles(piece);
  const uint64_t piece1 = Occupancy(piece) + DmaCycles(piece);
  const uint64_t tile = GemmTile(m, tile_k_, n);
  const uint64_t gemm0_end = piece0 + fill_ + tile;
  const uint64_t gemm1_end = std::max(gemm0_end, piece1) + tile;
  const uint64_t epilogue = startup_ + (m * n + lanes_ - 1) / lanes_;
  const Span s = run.Commands().at(id);
  EXPECT_EQ(s.end, (gemm1_end + epilogue) * ps_);
  EXPECT_EQ(run.sim->latency().value(), (gemm1_end + epilogue) * ps_);
}

// GQA reuse (ADR rev2 §B item 4): B-operand HBM bytes do not grow with M beyond tile_m.
TEST_F(SchedulerTest, BOperandBytesDoNotGrowWithM) {
  const uint64_t k = 2 * tile_k_, n = 2 * tile_n_;
  for (uint64_t m : {tile_m_, 2 * tile_m_, 4 * tile_m_ + 3}) {
    ProgramBuilder p;
    p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Hbm(0, 0, pb::BF16, {k, n}),
                Tcm(0, 262144, pb::FP32, {m, n}));
    SimRun run = RunOn(chip_, p.Build());
    ASSERT_TRUE(run.status.ok()) << run.status;
    uint64_t dma_read = 0, flops = 0;
    const pb::Report report = run.sim->BuildReport();
    for (const pb::UnitStats& u : report.units()) {
      if (u.kind() == "dma") dma_read += u.bytes_read();
      if (u.kind() == "gemm") flops += u.flops();
    }
    EXPECT_EQ(dma_read, k * n * 2) << "m=" << m;
    EXPECT_EQ(flops, 2 * m * k * n) << "m=" << m;
  }
}

// Two independent composites: the second's operand DMA runs under the first's GEMMs, so the
// pair takes less than the two run back to back; the second's loads start at issue.
TEST_F(SchedulerTest, IndependentCompositesOverlap) {
  const uint64_t m = tile_m_, k = 4 * tile_k_, n = tile_n_;
  const auto two = [&](bool both) {
    ProgramBuilder p;
    p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Hbm(0, 0, pb::BF16, {k, n}),
                Tcm(0, 65536, pb::FP32, {m, n}));
    if (both) {
      p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Hbm(0, 1 << 20, pb::BF16, {k, n}),
                  Tcm(0, 131072, pb::FP32, {m, n}));
    }
    return RunOn(chip_, p.Build());
  };
  SimRun one = two(false);
  SimRun pair = two(true);
  ASSERT_TRUE(one.status.ok() && pair.status.ok());
  const uint64_t alone = one.sim->latency().value();
  EXPECT_LT(pair.sim->latency().value(), 2 * alone);
  // The second command's first DMA read is issued at time 0, before the first's GEMMs end.
  const std::map<uint64_t, Span> cmds = pair.Commands();
  uint64_t second_first_read = UINT64_MAX;
  for (const pb::TraceRecord& r : pair.sim->op_log().records()) {
    if (r.has_op() && r.op().op() == "dma_read") {
      // DMA records carry the scheduler's internal DMA ids; pieces 5.. belong to command 2.
      if (r.op().cmd_id() > k / tile_k_) second_first_read = std::min(second_first_read, r.op().issue_ps());
    }
  }
  EXPECT_EQ(second_first_read, 0u);
  const std::vector<std::pair<uint64_t, pb::OpRecord>> gemms = pair.Tiles(".gemm");
  ASSERT_FALSE(gemms.empty());
  EXPECT_LT(second_first_read, cmds.at(1).end);
  // The second's GEMM tiles follow the first's without a gap: its operands were already in.
  uint64_t first_last_end = 0, second_first_start = UINT64_MAX;
  for (const auto& [cmd, rec] : gemms) {
    if (cmd == 1) first_last_end = std::max(first_last_end, rec.end_ps());
    if (cmd == 2) second_first_start = std::min(second_first_start, rec.start_ps());
  }
  EXPECT_EQ(second_first_start, first_last_end);
}

// Commands issued at one instant reach the channels in issue order: a composite issued after a
// load and before another load is admitted on arrival, so its B pieces are read after the
// first load and before the second (not after both, as when admission waited for the first
// load's DMA reply). Each transfer is dense and spread over every channel: the first load holds
// them for Occupancy(a), the composite's pieces then for Occupancy(b), then the second load.
TEST_F(SchedulerTest, SameInstantCommandsReachTheChannelsInIssueOrder) {
  const uint64_t m = tile_m_, k = tile_k_, n = tile_n_;
  const uint64_t a = 64 << 10, b = k * n * 2;
  ProgramBuilder p;
  const uint64_t first = p.Dma(Hbm(0, 0, pb::BF16, {a / 2}), Tcm(0, 0, pb::BF16, {a / 2}));
  const uint64_t comp = p.Composite(Tcm(0, 1 << 20, pb::BF16, {m, k}),
                                    Hbm(0, 1 << 20, pb::BF16, {k, n}),
                                    Tcm(0, 2 << 20, pb::FP32, {m, n}));
  const uint64_t second = p.Dma(Hbm(0, 2 << 20, pb::BF16, {a / 2}), Tcm(0, 3 << 20, pb::BF16, {a / 2}));
  SimRun run = RunOn(chip_, p.Build());
  ASSERT_TRUE(run.status.ok()) << run.status;
  const std::map<uint64_t, Span> cmds = run.Commands();
  EXPECT_EQ(cmds.at(first).start, 0u);
  EXPECT_EQ(cmds.at(comp).start, Occupancy(a) * ps_);
  EXPECT_EQ(cmds.at(second).start, (Occupancy(a) + Occupancy(b)) * ps_);
  EXPECT_EQ(cmds.at(second).end, (Occupancy(a) + Occupancy(b) + DmaCycles(a)) * ps_);
}

// A composite waiting on an input (a 1 MiB load) does not block a younger ready composite: the
// younger one's GEMMs run first, while the load is still streaming.
TEST_F(SchedulerTest, WaitingCompositeDoesNotBlockYoungerReadyOne) {
  const uint64_t m = tile_m_, k = tile_k_, n = tile_n_;
  ProgramBuilder p;
  const uint64_t load = p.Dma(Hbm(0, 0, pb::BF16, {1 << 19}), Tcm(0, 0, pb::BF16, {1 << 19}));
  const uint64_t waiting = p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Tcm(0, 2 << 20, pb::BF16, {k, n}),
                                       Tcm(0, 3 << 20, pb::FP32, {m, n}), {}, {load});
  const uint64_t ready = p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Tcm(0, 2 << 20, pb::BF16, {k, n}),
                                     Tcm(0, (3 << 20) + 65536, pb::FP32, {m, n}));
  SimRun run = RunOn(chip_, p.Build());
  ASSERT_TRUE(run.status.ok()) << run.status;
  const std::map<uint64_t, Span> cmds = run.Commands();
  const uint64_t load_end = cmds.at(load).end;
  EXPECT_EQ(load_end, DmaCycles(1 << 20) * ps_);
  // The ready one starts at once and ends long before the load.
  EXPECT_EQ(cmds.at(ready).start, 0u);
  EXPECT_EQ(cmds.at(ready).end, (fill_ + GemmTile(m, k, n)) * ps_);
  // The waiting one starts exactly when its input lands (the engine is idle again: fill/drain).
  EXPECT_EQ(cmds.at(waiting).start, load_end);
  EXPECT_EQ(cmds.at(waiting).end, load_end + (fill_ + GemmTile(m, k, n)) * ps_);
}

// At a busy engine the oldest ready op wins: three ready composites of two k-tiles each; when
// the first's k-tile 0 ends, its k-tile 1 (older) and the others' k-tile 0 are all ready, and
// the engine keeps serving by (issue seq, tile index).
TEST_F(SchedulerTest, OldestReadyOpWinsAtABusyEngine) {
  const uint64_t m = tile_m_, k = 2 * tile_k_, n = tile_n_;
  ProgramBuilder p;
  for (int i = 0; i < 3; ++i) {
    p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Tcm(0, 1 << 20, pb::BF16, {k, n}),
                Tcm(0, (2 << 20) + i * 65536, pb::FP32, {m, n}));
  }
  SimRun run = RunOn(chip_, p.Build());
  ASSERT_TRUE(run.status.ok()) << run.status;
  const std::vector<std::pair<uint64_t, pb::OpRecord>> gemms = run.Tiles(".gemm");
  std::vector<uint64_t> order;
  for (const auto& [cmd, rec] : gemms) order.push_back(cmd);
  EXPECT_THAT(order, ::testing::ElementsAre(1, 1, 2, 2, 3, 3));
  const uint64_t tile = GemmTile(m, tile_k_, n);
  for (size_t i = 0; i < gemms.size(); ++i) {
    EXPECT_EQ(gemms[i].second.start_ps(), (i == 0 ? 0 : fill_ + i * tile) * ps_) << i;
  }
}

// softmax_pv calls on one accumulator form a serial chain: each call's merge starts when the
// previous call's last P·V tile has ended. On separate accumulators the second merge runs
// under the first's P·V.
TEST_F(SchedulerTest, SoftmaxPvChainOnOneAccumulatorIsSerial) {
  const uint64_t rows = 8, keys = 256, d = 128;
  const auto build = [&](bool shared_acc) {
    ProgramBuilder p;
    for (int i = 0; i < 3; ++i) {
      const uint64_t acc = (2 << 20) + (shared_acc ? 0 : i * 65536);
      p.SoftmaxPv(Tcm(0, i * 16384, pb::FP32, {rows, keys}),
                  Hbm(0, i * keys * d * 2, pb::BF16, {keys, d}), Tcm(0, acc, pb::FP32, {rows, 1}),
                  Tcm(0, acc + 64, pb::FP32, {rows, 1}), Tcm(0, acc + 128, pb::FP32, {rows, d}),
                  0.088f);
    }
    return RunOn(chip_, p.Build());
  };
  SimRun chain = build(true);
  ASSERT_TRUE(chain.status.ok()) << chain.status;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> merge, pv;  // cmd -> (first start, last end)
  const auto collect = [](const SimRun& run, auto& merge, auto& pv) {
    for (const std::string suffix : {".math", ".gemm"}) {
      for (const auto& [cmd, rec] : run.Tiles(suffix)) {
        auto& m = suffix == ".math" ? merge : pv;
        auto [it, fresh] = m.try_emplace(cmd, rec.start_ps(), rec.end_ps());
        it->second.first = std::min(it->second.first, rec.start_ps());
        it->second.second = std::max(it->second.second, rec.end_ps());
      }
    }
  };
  collect(chain, merge, pv);
  ASSERT_EQ(merge.size(), 3u);
  for (uint64_t cmd : {2, 3}) EXPECT_EQ(merge.at(cmd).first, pv.at(cmd - 1).second) << cmd;

  SimRun free_run = build(false);
  ASSERT_TRUE(free_run.status.ok()) << free_run.status;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> merge2, pv2;
  collect(free_run, merge2, pv2);
  EXPECT_LT(merge2.at(2).first, pv2.at(1).second);
  EXPECT_LT(free_run.sim->latency(), chain.sim->latency());
}

// lse_merge (decode reduce, FUSED): one MATH op of startup + Σ ceil(elements / rate) cycles
// (rows 8, d 128: 8 + 8 per-row ops of one cycle + 3 x 1024 / 128 = 40), non-blocking: the
// CPU issues the next command at once. A second merge on the same accumulator names the first
// in depends_on and starts at its end; an EXP issued meanwhile (blocking, younger) waits
// behind both on the MATH engine: 8 + 8·256 / 32 = 72 cycles from 80. Under the realistic
// profile the merge leaves the CPU after the ex_composite issue cost.
TEST_F(SchedulerTest, LseMergeIsOneNonBlockingMathOp) {
  const uint64_t rows = 8, d = 128;
  const uint64_t merge_cycles = startup_ + 8 * 1 + 3 * (rows * d / lanes_);
  ASSERT_EQ(merge_cycles, 40u);
  const auto build = [&] {
    ProgramBuilder p;
    const auto acc = [&](uint64_t base) {
      return std::vector<pb::TensorRef>{Tcm(0, base, pb::FP32, {rows, 1}),
                                        Tcm(0, base + 64, pb::FP32, {rows, 1}),
                                        Tcm(0, base + 128, pb::FP32, {rows, d})};
    };
    const std::vector<pb::TensorRef> a = acc(1 << 20), in1 = acc(1 << 21), in2 = acc(3 << 20);
    const uint64_t first = p.LseMerge(a[0], a[1], a[2], in1[0], in1[1], in1[2]);
    p.LseMerge(a[0], a[1], a[2], in2[0], in2[1], in2[2], {first});
    p.Math(pb::EXP, {Tcm(0, 0, pb::FP32, {8, 256})}, Tcm(0, 8192, pb::FP32, {8, 256}));
    return p.Build();
  };
  SimRun run = RunOn(chip_, build());
  ASSERT_TRUE(run.status.ok()) << run.status;
  std::map<uint64_t, Span> cmds = run.Commands();
  const uint64_t exp_cycles = startup_ + 8 * 256 / chip_.sip().cube().pe().math().transcendental_per_cycle();
  EXPECT_EQ(cmds.at(1).start, 0u);
  EXPECT_EQ(cmds.at(1).end, merge_cycles * ps_);
  EXPECT_EQ(cmds.at(2).start, merge_cycles * ps_);
  EXPECT_EQ(cmds.at(2).end, 2 * merge_cycles * ps_);
  EXPECT_EQ(cmds.at(3).start, 2 * merge_cycles * ps_);
  EXPECT_EQ(cmds.at(3).end, (2 * merge_cycles + exp_cycles) * ps_);
  int merge_tiles = 0;
  for (const auto& [cmd, rec] : run.Tiles(".math")) {
    if (rec.op() == "lse_merge:LseMerge") ++merge_tiles;
  }
  EXPECT_EQ(merge_tiles, 2);

  const pb::IssueCostProfile* realistic = FindIssueCostProfile(chip_, "realistic");
  ASSERT_NE(realistic, nullptr);
  SimRun slow = RunOn(chip_, build(), false, "realistic");
  ASSERT_TRUE(slow.status.ok()) << slow.status;
  cmds = slow.Commands();
  const uint64_t issue = realistic->ex_composite_cycles();
  EXPECT_EQ(cmds.at(1).start, issue * ps_);
  EXPECT_EQ(cmds.at(1).end, (issue + merge_cycles) * ps_);
  // The second merge leaves the CPU at 2·issue, before the first ends only if 2·issue < issue + 40.
  EXPECT_EQ(cmds.at(2).start, std::max(2 * issue, issue + merge_cycles) * ps_);
}

// Invalid commands fail with one line naming the PE, the command and the reason; nothing runs.
// A command stream is the caller's input: its refusal is an input error (exit 2).
TEST_F(SchedulerTest, InvalidCommandsNameThePeTheCommandAndTheReason) {
  struct Case {
    std::string name;
    CpuProgram program;
    std::vector<std::string> expected;
  };
  std::vector<Case> cases;
  {
    ProgramBuilder p;
    p.Composite(Tcm(0, 0, pb::BF16, {8, 64}), Hbm(0, 0, pb::BF16, {32, 128}),
                Tcm(0, 65536, pb::FP32, {8, 128}));
    cases.push_back({"shape mismatch", p.Build(), {"pe 0", "composite cmd 1", "operand b", "shape"}});
  }
  {
    const uint64_t region = chip_.sip().cube().hbm_bytes() / chip_.sip().cube().pes();
    ProgramBuilder p;
    p.Dma(Hbm(0, region - 1024, pb::BF16, {1024}), Tcm(0, 0, pb::BF16, {1024}));
    cases.push_back({"address outside HBM", p.Build(), {"pe 0", "dma cmd 1", "src"}});
  }
  {
    const uint64_t tcm = chip_.sip().cube().pe().tcm().total_bytes();
    ProgramBuilder p;
    p.Math(pb::EXP, {Tcm(0, 0, pb::FP32, {8, 256})}, Tcm(0, tcm - 4096, pb::FP32, {8, 256}));
    cases.push_back({"TCM overflow", p.Build(), {"pe 0", "math cmd 1", "out", "TCM overflow"}});
  }
  for (Case& c : cases) {
    SimRun run = RunOn(chip_, std::move(c.program));
    ASSERT_FALSE(run.status.ok()) << c.name;
    const std::string message(run.status.message());
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const std::string& e : c.expected) EXPECT_THAT(message, HasSubstr(e)) << c.name;
    EXPECT_EQ(KindOf(run.status), ErrorKind::kInput) << c.name;
    EXPECT_EQ(ExitCodeOf(run.status), kExitBadInput) << c.name;
    EXPECT_TRUE(run.Commands().empty()) << c.name;
  }
}

// The CPU's issue costs (realistic profile) delay each command by the stated cycles; a blocking
// MATH op holds the CPU until it ends, then the CPU pays the resume cost.
TEST_F(SchedulerTest, IssueCostsAndBlockingDelayTheCommandStream) {
  const pb::IssueCostProfile* realistic = FindIssueCostProfile(chip_, "realistic");
  ASSERT_NE(realistic, nullptr);
  ProgramBuilder p;
  const uint64_t a = p.Math(pb::EXP, {Tcm(0, 0, pb::FP32, {8, 256})}, Tcm(0, 8192, pb::FP32, {8, 256}));
  const uint64_t b = p.Math(pb::ADD, {Tcm(0, 0, pb::FP32, {8, 256}), Tcm(0, 8192, pb::FP32, {8, 256})},
                            Tcm(0, 16384, pb::FP32, {8, 256}));
  SimRun run = RunOn(chip_, p.Build(), false, "realistic");
  ASSERT_TRUE(run.status.ok()) << run.status;
  const std::map<uint64_t, Span> cmds = run.Commands();
  const uint64_t prim = realistic->primitive_cycles();
  const uint64_t exp_cycles = startup_ + 8 * 256 / chip_.sip().cube().pe().math().transcendental_per_cycle();
  const uint64_t add_cycles = startup_ + 8 * 256 / lanes_;
  EXPECT_EQ(cmds.at(a).start, prim * ps_);
  EXPECT_EQ(cmds.at(a).end, (prim + exp_cycles) * ps_);
  const uint64_t b_issue = prim + exp_cycles + realistic->resume_after_wait_cycles() + prim;
  EXPECT_EQ(cmds.at(b).start, b_issue * ps_);
  EXPECT_EQ(cmds.at(b).end, (b_issue + add_cycles) * ps_);
}

// A random mix of composites, softmax_pv, dots, MATH ops and loads, some issued mid-way (after
// a blocking op), run with the closed form and with per-tile stepping: identical op logs
// (every start and end) and identical reports except the event count, which is smaller in
// closed form.
CpuProgram RandomProgram(uint32_t seed) {
  std::mt19937 rng(seed);
  const auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  ProgramBuilder p;
  std::vector<uint64_t> handles;
  uint64_t hbm = 0;
  for (int i = 0; i < 12; ++i) {
    const int kind = pick(5);
    const uint64_t m = 8 * (1 + pick(8)), k = 64 * (1 + pick(4)), n = 128 * (1 + pick(2));
    std::vector<uint64_t> deps;
    if (!handles.empty() && pick(3) == 0) deps.push_back(handles[pick(static_cast<int>(handles.size()))]);
    uint64_t id = 0;
    switch (kind) {
      case 0:
      case 1:
        id = p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Hbm(0, hbm, pb::BF16, {k, n}),
                         Tcm(0, (2 << 20) + i * 131072, pb::FP32, {m, n}),
                         pick(2) ? std::vector<pb::MathOp>{pb::SCALE} : std::vector<pb::MathOp>{},
                         deps);
        hbm += k * n * 2;
        break;
      case 2:
        id = p.SoftmaxPv(Tcm(0, 0, pb::FP32, {8, k}), Hbm(0, hbm, pb::BF16, {k, 128}),
                         Tcm(0, 3 << 20, pb::FP32, {8, 1}), Tcm(0, (3 << 20) + 64, pb::FP32, {8, 1}),
                         Tcm(0, (3 << 20) + 128, pb::FP32, {8, 128}), 0.1f, deps);
        hbm += k * 128 * 2;
        break;
      case 3:
        if (pick(2)) {
          id = p.Math(pb::EXP, {Tcm(0, 0, pb::FP32, {m, n})}, Tcm(0, 1 << 20, pb::FP32, {m, n}), deps);
        } else {
          id = p.Math(pb::REDUCE_MAX, {Tcm(0, 0, pb::FP32, {m, n})}, Tcm(0, 1 << 20, pb::FP32, {m, 1}),
                      deps);
        }
        break;
      case 4:
        id = p.Dma(Hbm(0, hbm, pb::BF16, {m * k}), Tcm(0, 0, pb::BF16, {m * k}));
        hbm += m * k * 2;
        break;
    }
    handles.push_back(id);
  }
  return p.Build();
}

// Both runs have the same op, issue and stall records (compared as sorted sets, seq cleared:
// the append order differs where per-tile events interleave) and the same report apart from
// the event count, which is smaller in closed form.
void ExpectSameTimings(const SimRun& closed, const SimRun& stepped, const std::string& what) {
  const auto keys = [](const SimRun& run) {
    std::vector<std::string> out;
    for (pb::TraceRecord r : run.sim->op_log().records()) {
      if (r.has_op()) r.mutable_op()->set_seq(0);
      out.push_back(r.SerializeAsString());
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(keys(closed), keys(stepped)) << what;
  pb::Report x = closed.sim->BuildReport(), y = stepped.sim->BuildReport();
  EXPECT_LT(x.events(), y.events()) << what;
  x.set_events(0);
  y.set_events(0);
  EXPECT_EQ(x.SerializeAsString(), y.SerializeAsString()) << what;
}

TEST_F(SchedulerTest, ClosedFormEqualsPerTileSimulation) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SimRun closed = RunOn(chip_, RandomProgram(seed), false);
    SimRun stepped = RunOn(chip_, RandomProgram(seed), true);
    ASSERT_TRUE(closed.status.ok()) << closed.status;
    ASSERT_TRUE(stepped.status.ok()) << stepped.status;
    ExpectSameTimings(closed, stepped, "seed " + std::to_string(seed));
  }
}

// A second stream arrives mid-way: PE 0 runs a long composite whose B pieces stream from HBM,
// then (after a blocking MATH op) four TCM-only composites; PE 1 meanwhile reads 1 MiB from
// PE 0's channels (remote), slowing PE 0's pieces so the long composite's GEMM tiles wait and
// the younger composites fill the gaps. The closed form re-plans at each arrival and must give
// exactly the per-tile simulation's starts and ends.
TEST_F(SchedulerTest, SecondStreamMidWayReplansLikePerTileSimulation) {
  const auto run = [&](bool per_tile) {
    ChipSimOptions options;
    options.cubes = {0};
    options.per_tile_events = per_tile;
    options.per_tile_detail = true;
    auto sim = ChipSim::Create(chip_, options);
    EXPECT_TRUE(sim.ok());
    inject::MidWayPrograms mid = inject::MidWayStreamPrograms(tile_k_, tile_n_);
    EXPECT_TRUE((*sim)->SetProgram(0, std::move(mid.pe0)).ok());
    EXPECT_TRUE((*sim)->SetProgram(1, std::move(mid.pe1)).ok());
    SimRun r;
    r.sim = std::move(*sim);
    r.status = r.sim->Run();
    return r;
  };
  SimRun closed = run(false), stepped = run(true);
  ASSERT_TRUE(closed.status.ok()) << closed.status;
  ASSERT_TRUE(stepped.status.ok()) << stepped.status;
  ExpectSameTimings(closed, stepped, "mid-way stream");
  // The younger composites ran inside the long one's span (gaps filled, not queued behind it).
  uint64_t long_last_end = 0, young_first_start = UINT64_MAX;
  for (const auto& [cmd, rec] : closed.Tiles("pe0.gemm")) {
    if (cmd == 1) long_last_end = std::max(long_last_end, rec.end_ps());
    if (cmd >= 3) young_first_start = std::min(young_first_start, rec.start_ps());
  }
  EXPECT_LT(young_first_start, long_last_end);
}

// Determinism: the same injected workload twice gives a byte-identical op log and report.
TEST_F(SchedulerTest, SameWorkloadTwiceIsByteIdentical) {
  std::string logs[2], reports[2];
  for (int i = 0; i < 2; ++i) {
    SimRun run = RunOn(chip_, RandomProgram(7));
    ASSERT_TRUE(run.status.ok()) << run.status;
    for (const auto& r : run.sim->op_log().records()) logs[i] += r.SerializeAsString();
    reports[i] = run.sim->BuildReport().SerializeAsString();
  }
  EXPECT_EQ(logs[0], logs[1]);
  EXPECT_EQ(reports[0], reports[1]);
  EXPECT_FALSE(logs[0].empty());
}

// Event budget: an uncontended composite of many tiles completes with a handful of events in
// closed form (one wake-up), not one per tile.
TEST_F(SchedulerTest, UncontendedCompositeCostsOneCompletionEvent) {
  const uint64_t m = 4 * tile_m_, k = 8 * tile_k_, n = 4 * tile_n_;  // 128 GEMM tiles
  ProgramBuilder p;
  p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Tcm(0, 1 << 20, pb::BF16, {k, n}),
              Tcm(0, 2 << 20, pb::FP32, {m, n}), {pb::SCALE});
  SimRun closed = RunOn(chip_, p.Build());
  ASSERT_TRUE(closed.status.ok()) << closed.status;
  // cpu start, composite to the scheduler, one wake-up, Completion to the CPU, EngineWork to
  // GEMM and MATH.
  EXPECT_EQ(closed.sim->events(), 6u);
}

// Event budget of a decode composite (ADR §1 Q·Kᵀ of one KV tile): q_g [G, d] in TCM, the K
// tile [d, TILE] streamed from the PE's HBM over its 8 channels, scaled fp32 scores out. The
// GEMM tiles cost no event of their own (closed form); the HBM plumbing is the DmaBatch, one
// request and one answer per channel, and the batch's reply.
TEST_F(SchedulerTest, UncontendedDecodeCompositeEventBudget) {
  const uint64_t g = 8, d = 128, tile = 256;
  ProgramBuilder p;
  p.Composite(Tcm(0, 0, pb::BF16, {g, d}), Hbm(0, 0, pb::BF16, {d, tile}),
              Tcm(0, 1 << 20, pb::FP32, {g, tile}), {pb::SCALE});
  SimRun run = RunOn(chip_, p.Build());
  ASSERT_TRUE(run.status.ok()) << run.status;
  // cpu start, composite to the scheduler, DmaBatch to the DMA, 8 HbmRequests and 8
  // HbmResponses, DmaBatchDone back, two scheduler wake-ups (356 and 516 ns), EngineWork to
  // GEMM and MATH, Completion to the CPU.
  EXPECT_EQ(run.sim->events(), 1u + 1 + 1 + 8 + 8 + 1 + 2 + 2 + 1);
}

// The engine units own their stats: with or without an op log the scheduler sends them the
// same EngineWork, so the runs deliver the same events and report the same stats.
TEST_F(SchedulerTest, WithoutOpLogTheSameEngineWorkAndStats) {
  const uint64_t m = 4 * tile_m_, k = 8 * tile_k_, n = 4 * tile_n_;
  const auto program = [&] {
    ProgramBuilder p;
    p.Composite(Tcm(0, 0, pb::BF16, {m, k}), Tcm(0, 1 << 20, pb::BF16, {k, n}),
                Tcm(0, 2 << 20, pb::FP32, {m, n}), {pb::SCALE});
    return p.Build();
  };
  SimRun logged = RunOn(chip_, program());
  SimRun unlogged = RunOn(chip_, program(), /*per_tile_events=*/false, "zero", /*op_log=*/false);
  ASSERT_TRUE(logged.status.ok()) << logged.status;
  ASSERT_TRUE(unlogged.status.ok()) << unlogged.status;
  // cpu start, composite, wake-up, EngineWork to GEMM and MATH, Completion.
  EXPECT_EQ(logged.sim->events(), 6u);
  EXPECT_EQ(unlogged.sim->events(), 6u);
  pb::Report with = logged.sim->BuildReport();
  pb::Report without = unlogged.sim->BuildReport();
  EXPECT_GT(with.units_size(), 0);
  EXPECT_EQ(with.SerializeAsString(), without.SerializeAsString());
}

// Data mode: the engine that computes a command applies it when its EngineWork is delivered,
// at the command's completion instant (GEMM: composite; MATH: math); a data-plane error reaches
// the run with the scheduler's text.
class RecordingData : public DataPlane {
 public:
  explicit RecordingData(const Engine& engine) : engine_(engine) {}
  absl::Status Apply(const pb::DmaCmd&) override { return absl::OkStatus(); }
  absl::Status Apply(const pb::GemmCmd&) override { return absl::OkStatus(); }
  absl::Status Apply(const pb::CompositeCmd& cmd) override {
    applied[cmd.cmd_id()] = engine_.now().value();
    return absl::OkStatus();
  }
  absl::Status Apply(const pb::MathCmd& cmd) override {
    applied[cmd.cmd_id()] = engine_.now().value();
    return absl::InternalError("no values");
  }
  absl::Status Apply(const pb::SoftmaxPvCmd&) override { return absl::OkStatus(); }
  absl::Status Apply(const pb::LseMergeCmd&) override { return absl::OkStatus(); }
  std::map<uint64_t, uint64_t> applied;  // cmd_id -> the instant it was applied

 private:
  const Engine& engine_;
};

TEST_F(SchedulerTest, DataModeEnginesComputeAtTheCompletion) {
  ChipSimOptions options;
  options.cubes = {0};
  options.keep_op_log = true;
  options.issue_cost_profile = "zero";
  absl::StatusOr<std::unique_ptr<ChipSim>> created = ChipSim::Create(chip_, options);
  ASSERT_TRUE(created.ok()) << created.status();
  SimRun run;
  run.sim = std::move(*created);
  RecordingData data(run.sim->engine());
  run.sim->context().data = &data;
  ProgramBuilder p;
  const uint64_t composite = p.Composite(
      Tcm(0, 0, pb::BF16, {tile_m_, tile_k_}), Tcm(0, 1 << 20, pb::BF16, {tile_k_, tile_n_}),
      Tcm(0, 2 << 20, pb::FP32, {tile_m_, tile_n_}), {pb::SCALE});
  const uint64_t math = p.Math(pb::EXP, {Tcm(0, 3 << 20, pb::FP32, {8, 256})},
                               Tcm(0, (3 << 20) + 65536, pb::FP32, {8, 256}));
  ASSERT_TRUE(run.sim->SetProgram(0, p.Build()).ok());
  run.status = run.sim->Run();
  EXPECT_THAT(std::string(run.status.message()),
              testing::HasSubstr(
                  absl::StrCat("pe 0 (sip0.cube0.pe0): math_EXP cmd ", math, ": data: no values")));
  // The command passed the scheduler's checks: its data plane failing is our invariant (exit 70).
  EXPECT_EQ(KindOf(run.status), ErrorKind::kInvariant);
  EXPECT_EQ(ExitCodeOf(run.status), kExitInvariant);
  const std::map<uint64_t, Span> spans = run.Commands();
  ASSERT_TRUE(spans.contains(composite) && spans.contains(math));
  EXPECT_EQ(data.applied, (std::map<uint64_t, uint64_t>{{composite, spans.at(composite).end},
                                                        {math, spans.at(math).end}}));
}

}  // namespace
}  // namespace ahbm::sim
