// Which actors a ChipSim spawns (actors/README.md "Actors in a run"), counted from the engine's
// registered units by kind and compared with the topology's own numbers (DESIGN §3: every unit
// the card names is an actor in every run).
#include <cstdint>
#include <map>
#include <sstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/chip_sim.h"
#include "actors/inject.h"
#include "gtest/gtest.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

using topology::UnitKind;

// The topology's counts, from the proto's fields (not from ChipIndex, which ChipSim uses).
struct Expected {
  uint32_t cubes, pes, ipcq_queues, sips, channels;
};

Expected FromChip(const pb::Chip& chip) {
  const pb::Sip& sip = chip.sip();
  const uint32_t cubes_per_sip = sip.cube_mesh().rows() * sip.cube_mesh().cols();
  const uint32_t r = sip.cube().pe_mesh().rows(), c = sip.cube().pe_mesh().cols();
  Expected e;
  e.sips = chip.sips();
  e.cubes = e.sips * cubes_per_sip;
  e.pes = e.cubes * r * c;
  // One outgoing queue per PE per existing mesh neighbour: 2 per undirected mesh edge.
  e.ipcq_queues = e.cubes * 2 * (r * (c - 1) + c * (r - 1));
  e.channels = e.pes * sip.cube().pe().hbm_channels();
  return e;
}

// By kind name, so that a failure prints "hbm_channel", not a byte.
std::map<std::string, uint32_t> Named(const std::map<UnitKind, uint32_t>& counts) {
  std::map<std::string, uint32_t> named;
  for (const auto& [kind, n] : counts) named[topology::UnitKindName(kind)] = n;
  return named;
}

std::map<UnitKind, uint32_t> Counts(const pb::Chip& chip, bool op_log, bool programs) {
  ChipSimOptions options;
  options.keep_op_log = op_log;
  absl::StatusOr<std::unique_ptr<ChipSim>> sim = ChipSim::Create(chip, options);
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return {};
  if (programs) {
    const uint32_t pes = FromChip(chip).pes;
    for (uint32_t pe = 0; pe < pes; ++pe) EXPECT_TRUE((*sim)->SetProgram(pe, {}).ok()) << pe;
  }
  return (*sim)->ActorCounts();
}

std::map<UnitKind, uint32_t> Today(const Expected& e, bool programs) {
  std::map<UnitKind, uint32_t> want = {
      {UnitKind::kPeScheduler, e.pes}, {UnitKind::kDma, e.pes},
      {UnitKind::kHbmChannel, e.channels}, {UnitKind::kIpcq, e.ipcq_queues},
      {UnitKind::kNocRouter, e.cubes}, {UnitKind::kUcie, e.sips}};
  if (programs) want[UnitKind::kPeCpu] = e.pes;
  // A GEMM and a MATH unit per PE in every run (the scheduler sends them EngineWork with or
  // without an op log), like every HBM pseudo-channel (the DMAs message them).
  want[UnitKind::kGemm] = want[UnitKind::kMath] = e.pes;
  return want;
}

// Every kind's count against the topology's own numbers, for each op-log / programs choice;
// returns the totals of the runs with every PE programmed (no op log, op log).
std::pair<uint32_t, uint32_t> ExpectCountsEqualTheTopology(const pb::Chip& chip,
                                                           const Expected& e,
                                                           std::vector<bool> programs_choices) {
  std::pair<uint32_t, uint32_t> totals;
  for (bool op_log : {false, true}) {
    for (bool programs : programs_choices) {
      SCOPED_TRACE(testing::Message() << "op_log " << op_log << ", programs " << programs);
      const std::map<UnitKind, uint32_t> got = Counts(chip, op_log, programs);
      EXPECT_EQ(Named(got), Named(Today(e, programs)));
      if (!programs) continue;
      uint32_t total = 0;
      for (const auto& [kind, n] : got) total += n;
      (op_log ? totals.second : totals.first) = total;
    }
  }
  return totals;
}

TEST(ChipSimActors, SmallChipCountsEqualTheTopology) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  const Expected e = FromChip(*chip);
  // small.textproto: 1 SIP of 2x4 CUBEs of 2x2 PEs, 8 channels per PE.
  ASSERT_EQ(e.pes, 32u);
  ASSERT_EQ(e.ipcq_queues, 64u);
  ASSERT_EQ(e.channels, 256u);
  const auto [total, with_op_log] = ExpectCountsEqualTheTopology(*chip, e, {false, true});
  EXPECT_EQ(total, 5 * 32u + 256u + 64u + 8u + 1u);  // a default run's shape (no op log)
  EXPECT_EQ(with_op_log, total);
}

TEST(ChipSimActors, FourSipChipCountsEqualTheTopology) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  const Expected e = FromChip(*chip);
  ASSERT_EQ(e.pes, 512u);
  ASSERT_EQ(e.ipcq_queues, 1280u);
  ASSERT_EQ(e.channels, 4096u);
  const auto [total, with_op_log] = ExpectCountsEqualTheTopology(*chip, e, {true});
  EXPECT_EQ(total, 3908u + 4096u);
  EXPECT_EQ(with_op_log, total);
}

}  // namespace
}  // namespace ahbm::sim

namespace ahbm::sim {
namespace {

// Two CUBEs of the small chip running command streams (a DMA, then composites, on two PEs
// each) as one heap or as two islands, with an op log kept and streamed: the same records in
// the same order (the op log's event order), the same stream bytes and the same report.
struct IslandRun {
  std::vector<pb::TraceRecord> records;
  std::string stream;
  std::string report;
  uint32_t islands = 0;
};

IslandRun RunTwoCubes(bool islands) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  std::ostringstream stream;
  ChipSimOptions options;
  options.cubes = {0, 1};
  options.op_log_stream = &stream;
  if (islands) options.islands = {{0}, {1}};
  absl::StatusOr<std::unique_ptr<ChipSim>> sim = ChipSim::Create(*chip, options);
  EXPECT_TRUE(sim.ok()) << sim.status();
  const uint32_t pes = (*sim)->context().index.pes_per_cube();
  for (uint32_t pe : {0u, 1u, pes, pes + 1}) {
    EXPECT_TRUE((*sim)
                    ->SetProgram(pe, inject::DmaThenGemmStream(pe, 4096 * (pe + 1), 32, 128, 128,
                                                               3 + pe % 2))
                    .ok());
  }
  EXPECT_TRUE((*sim)->Run().ok());
  IslandRun run;
  run.islands = (*sim)->engine().islands();
  run.report = (*sim)->BuildReport().DebugString();
  run.records = (*sim)->TakeOpLogRecords();
  run.stream = stream.str();
  return run;
}

TEST(ChipSimIslands, AnOpLogIsTheSameWithIslandsAsWithOneHeap) {
  const IslandRun one = RunTwoCubes(false);
  const IslandRun two = RunTwoCubes(true);
  EXPECT_EQ(one.islands, 1u);
  EXPECT_EQ(two.islands, 2u);
  ASSERT_GT(one.records.size(), 20u);
  ASSERT_EQ(two.records.size(), one.records.size());
  for (size_t i = 0; i < one.records.size(); ++i) {
    ASSERT_EQ(two.records[i].SerializeAsString(), one.records[i].SerializeAsString())
        << "record " << i << ":\n" << two.records[i].DebugString() << "vs\n"
        << one.records[i].DebugString();
  }
  EXPECT_EQ(two.stream, one.stream);
  EXPECT_EQ(two.report, one.report);
}

}  // namespace
}  // namespace ahbm::sim
