// GQA decode (ADR-0060 rev2 §11 gates): numeric parity against a float64 reference on
// bf16-rounded inputs for every variant and geometry, and the reduce structure.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/chip_sim.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/attention/baseline.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "topology/groups.h"
#include "topology/ids.h"
#include "topology/loader.h"

namespace ahbm::kernels::testing {  // decode_test_util.h
namespace {

struct ParityCase {
  std::string name;
  std::string topology;
  DecodeConfig cfg;
};

class DecodeParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(DecodeParity, MatchesTheFloat64Reference) {
  const ParityCase& c = GetParam();
  const pb::Chip chip = Load(c.topology);
  std::vector<QkvInputs> inputs;
  for (uint32_t u = 0; u < c.cfg.users; ++u) inputs.push_back(MakeInputs(c.cfg, 100 + u, u));
  for (DecodeVariant variant : {DecodeVariant::kOpt1, DecodeVariant::kOpt3, DecodeVariant::kOpt2}) {
    DecodeConfig cfg = c.cfg;
    cfg.variant = variant;
    DecodeRun run = RunDecode(chip, cfg, inputs);
    ASSERT_TRUE(run.status.ok()) << c.name << " variant " << int(variant) << ": " << run.status;
    ExpectRequestsMatchReference(run, cfg, inputs, c.name + " variant " + std::to_string(int(variant)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, DecodeParity,
    ::testing::Values(
        ParityCase{"no_sp", "topology/small.textproto", Small(8, 1, 300, 1, 1)},
        ParityCase{"pe_sp", "topology/small.textproto", Small(8, 2, 700, 1, 4)},
        ParityCase{"sp_c2_p4", "topology/small.textproto", Small(8, 2, 1000, 2, 4)},
        ParityCase{"sp_c4_p2_ragged", "topology/small.textproto", Small(4, 1, 777, 4, 2)},
        ParityCase{"multi_user", "topology/small.textproto",
                   [] {
                     DecodeConfig cfg = Small(8, 2, 500, 2, 4);
                     cfg.users = 2;
                     return cfg;
                   }()},
        ParityCase{"short_context_kv2", "topology/small.textproto",
                   [] {
                     DecodeConfig cfg = Small(16, 4, 900, 1, 4);
                     cfg.kv_per_cube = 2;  // two whole heads per CUBE, PE-SP only
                     return cfg;
                   }()},
        ParityCase{"short_context_kv4_one_cube", "topology/small.textproto",
                   [] {
                     DecodeConfig cfg = Small(8, 4, 300, 1, 4);
                     cfg.kv_per_cube = 4;
                     return cfg;
                   }()},
        ParityCase{"sp_ring_l2_chain_l1", "topology/small.textproto",
                   [] {
                     DecodeConfig cfg = Small(8, 1, 1500, 4, 4);
                     cfg.level2 = ReduceShape::kRing;
                     cfg.level1 = ReduceShape::kChain;
                     return cfg;
                   }()},
        ParityCase{"sp_chain_l2_ring_l1", "topology/small.textproto",
                   [] {
                     DecodeConfig cfg = Small(8, 1, 1500, 4, 4);
                     cfg.level2 = ReduceShape::kChain;
                     cfg.level1 = ReduceShape::kRing;
                     return cfg;
                   }()},
        ParityCase{"gqa_tq8", "topology/small.textproto",
                   [] {
                     DecodeConfig cfg = Small(4, 1, 400, 1, 2);
                     cfg.t_q = 8;  // G·T_q = 32 > ... rows
                     return cfg;
                   }()}),
    [](const ::testing::TestParamInfo<ParityCase>& info) { return info.param.name; });

// ---- structure ----

std::vector<pb::OpRecord> OpsNamed(const DecodeRun& run, const std::string& op) {
  std::vector<pb::OpRecord> out;
  for (const pb::TraceRecord& r : run.sim->op_log().records()) {
    if (r.has_op() && r.op().op() == op) out.push_back(r.op());
  }
  return out;
}

uint32_t PeOfUnitName(const topology::ChipIndex& index, const std::string& name) {
  for (uint32_t pe = 0; pe < index.num_pes(); ++pe) {
    const std::string cpu = index.Name(index.PeUnit(topology::UnitKind::kPeCpu, index.PeOf(pe)));
    if (name == cpu) return pe;
  }
  ADD_FAILURE() << "no PE CPU named " << name;
  return 0;
}

// Reduce rounds (§4, §11): the sends in the op log form the static tree — Level-2 on IPCQ,
// Level-1 on the NOC, one (m, l, O) triplet per edge — its depth is ceil(log2 P) + the group
// root's hop depth over C, and the output is stored at exactly one rank.
TEST(DecodeStructure, ReduceIsTheStatic2LevelTree) {
  const pb::Chip chip = Load("topology/small.textproto");
  const topology::ChipIndex index(chip);
  DecodeConfig cfg = Small(8, 1, 4096, 4, 4);
  DecodeRun run = RunDecode(chip, cfg, {});
  ASSERT_TRUE(run.status.ok()) << run.status;
  const auto ipcq = OpsNamed(run, "send_ipcq");
  const auto noc = OpsNamed(run, "send_noc");
  EXPECT_EQ(ipcq.size(), 3u * cfg.c * (cfg.p - 1));  // Level-2: P - 1 edges per CUBE
  EXPECT_EQ(noc.size(), 3u * (cfg.c - 1));           // Level-1: C - 1 edges
  EXPECT_EQ(OpsNamed(run, "recv_ipcq").size(), ipcq.size());
  EXPECT_EQ(OpsNamed(run, "recv_noc").size(), noc.size());
  // The tree from the op log: sender PE -> receiver PE.
  std::map<uint32_t, uint32_t> parent;
  for (const auto* sends : {&ipcq, &noc}) {
    for (const pb::OpRecord& r : *sends) {
      const uint32_t from = PeOfUnitName(index, r.unit_name());
      const uint32_t to = std::stoul(r.label().substr(r.label().find("pe ") + 3));
      parent[from] = to;
      if (sends == &ipcq) {
        EXPECT_EQ(index.PeOf(from).cube_id(), index.PeOf(to).cube_id());
        EXPECT_EQ(index.pe_mesh().HopDistance(index.PeOf(from).pe, index.PeOf(to).pe), 1u);
      } else {
        EXPECT_NE(index.PeOf(from).cube_id(), index.PeOf(to).cube_id());
      }
    }
  }
  const auto stores = OpsNamed(run, "dma_store");
  ASSERT_EQ(stores.size(), 1u);  // the result exists at exactly one rank
  const uint32_t root = run.launch.outputs[0][0].pe;
  EXPECT_EQ(parent.size(), cfg.c * cfg.p - 1u);
  uint32_t depth = 0;
  for (const auto& [pe, up] : parent) {
    uint32_t d = 1, at = up;
    while (parent.contains(at)) {
      at = parent[at];
      ++d;
    }
    EXPECT_EQ(at, root);
    depth = std::max(depth, d);
  }
  const uint32_t log2p = static_cast<uint32_t>(std::ceil(std::log2(cfg.p)));
  const auto groups = topology::CubeGroups::Partition(index.cube_mesh(), cfg.c);
  EXPECT_EQ(depth, log2p + groups->root_depth());
  EXPECT_EQ(run.launch.level2_rounds + run.launch.level1_rounds, depth);
}

// GQA reuse (ADR rev2 §B item 4, §11): K/V HBM read bytes do not depend on G — also when
// G·T_q exceeds TILE_M — while GEMM FLOPs scale with G.
TEST(DecodeStructure, KvReadBytesDoNotGrowWithG) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (uint32_t t_q : {1u, 8u}) {
    uint64_t kv_bytes_g1 = 0, flops_g1 = 0;
    for (uint32_t g : {1u, 2u, 4u, 8u}) {
      DecodeConfig cfg = Small(g, 1, 1024, 1, 2);
      cfg.t_q = t_q;
      DecodeRun run = RunDecode(chip, cfg, {});
      ASSERT_TRUE(run.status.ok()) << run.status;
      const pb::Report report = run.sim->BuildReport();
      uint64_t read = 0, flops = 0;
      for (const pb::UnitStats& u : report.units()) {
        if (u.kind() == "dma") read += u.bytes_read();
        if (u.kind() == "gemm") flops += u.flops();
      }
      const uint64_t q_bytes = uint64_t{cfg.p} * g * t_q * cfg.d * 2;  // each rank loads Q once
      // Causal T_q = 8: the hidden keys S - 7 .. S - 1 lie in the last 64-key tile, whose
      // [G·T_q, 64] bf16 mask is loaded once.
      const uint64_t mask_bytes = t_q > 1 ? uint64_t{g} * t_q * cfg.tile * 2 : 0;
      const uint64_t kv = read - q_bytes - mask_bytes;
      EXPECT_EQ(kv, 2 * cfg.s * cfg.d * 2) << "G " << g << " T_q " << t_q;
      if (g == 1) {
        kv_bytes_g1 = kv;
        flops_g1 = flops;
      } else {
        EXPECT_EQ(kv, kv_bytes_g1);
        EXPECT_EQ(flops, g * flops_g1) << "G " << g << " T_q " << t_q;
      }
    }
  }
}

// A long per-rank sweep whose per-tile temporaries would overflow the 1 MiB scratch arena
// completes with scratch_scope and fails with the overflow error without it (§11, ADR-0063).
TEST(DecodeStructure, ScratchScopeKeepsALongSweepInTheArena) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 1, 32768, 1, 1);  // 512 tiles of 64 keys on one PE
  cfg.d = 128;
  cfg.tile = 256;                                // 128 tiles, ~20 KiB of temporaries each
  for (DecodeVariant variant : {DecodeVariant::kOpt1, DecodeVariant::kOpt3}) {
    cfg.variant = variant;
    cfg.scratch_scope = true;
    EXPECT_TRUE(RunDecode(chip, cfg, {}).status.ok());
    cfg.scratch_scope = false;
    const absl::Status status = RunDecode(chip, cfg, {}).status;
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("scratch arena overflow"));
  }
}

// Determinism: each variant twice gives a byte-identical op log.
TEST(DecodeStructure, EachVariantTwiceIsByteIdentical) {
  const pb::Chip chip = Load("topology/small.textproto");
  for (DecodeVariant variant : {DecodeVariant::kOpt1, DecodeVariant::kOpt3, DecodeVariant::kOpt2}) {
    DecodeConfig cfg = Small(8, 2, 3000, 2, 4);
    cfg.variant = variant;
    cfg.users = 2;
    std::string logs[2];
    for (int i = 0; i < 2; ++i) {
      DecodeRun run = RunDecode(chip, cfg, {});
      ASSERT_TRUE(run.status.ok()) << run.status;
      logs[i] = OpLogBytes(run);
    }
    EXPECT_EQ(logs[0], logs[1]) << int(variant);
    EXPECT_GT(logs[0].size(), 1000u);
  }
}

// The pre-ADR baseline (one query head per CUBE, blocking dots, ring fan-out of R − 1 steps)
// computes the same attention, every rank of a head ends with it, and it reads K/V once per
// query head (no GQA reuse).
TEST(DecodeBaseline, MatchesTheReferenceAndFansOut) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(4, 2, 600, 1, 4);
  const std::vector<QkvInputs> inputs = {MakeInputs(cfg, 7)};
  absl::StatusOr<std::vector<uint32_t>> cubes = BaselineCubes(chip, cfg);
  ASSERT_TRUE(cubes.ok()) << cubes.status();
  sim::ChipSimOptions options;
  options.cubes = *cubes;
  auto sim = std::move(*sim::ChipSim::Create(chip, options));
  MemoryStore store(chip);
  KernelRuntime runtime(sim.get(), &store);
  absl::StatusOr<DecodeLaunch> launch = LaunchBaseline(chip, cfg, runtime, &store, inputs);
  ASSERT_TRUE(launch.ok()) << launch.status();
  const absl::Status status = runtime.Run();
  ASSERT_TRUE(status.ok()) << status;
  absl::StatusOr<std::vector<float>> got = GatherDecodeOutput(store, cfg, *launch, 0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_LE(MaxAbsError(*got, ReferenceDecode(cfg, inputs[0])), 2e-2);
  // R − 1 fan-out steps, a triplet each, on every rank of every head.
  uint64_t sends = 0, kv_read = 0;
  for (const pb::TraceRecord& r : sim->op_log().records()) {
    if (r.has_op() && r.op().op() == "send_ipcq") ++sends;
  }
  EXPECT_EQ(sends, uint64_t{cfg.h_q} * cfg.p * (cfg.p - 1) * 3);
  const pb::Report report = sim->BuildReport();
  for (const pb::UnitStats& u : report.units()) {
    if (u.kind() == "dma") kv_read += u.bytes_read();
  }
  const uint64_t q_bytes = uint64_t{cfg.h_q} * cfg.p * cfg.d * 2;
  EXPECT_EQ(kv_read - q_bytes, uint64_t{cfg.h_q} * 2 * cfg.s * cfg.d * 2);  // G times the KV
}

// Short context (ADR rev2 §B long/short item 2): whole heads per CUBE, Level-2 only — no NOC
// traffic — and kv_per_cube heads share a CUBE's PEs.
TEST(DecodeStructure, ShortContextReducesInsideTheCubeOnly) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(16, 4, 900, 1, 4);
  cfg.kv_per_cube = 2;
  DecodeRun run = RunDecode(chip, cfg, {});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.launch.cubes.size(), 2u);  // 4 heads, 2 per CUBE
  EXPECT_TRUE(OpsNamed(run, "send_noc").empty());
  EXPECT_EQ(OpsNamed(run, "send_ipcq").size(), 3u * cfg.h_kv * (cfg.p - 1));
  EXPECT_EQ(OpsNamed(run, "dma_store").size(), cfg.h_kv);
  cfg.c = 2;
  EXPECT_FALSE(RunDecode(chip, cfg, {}).status.ok());
}

// Requests are isolated (DESIGN §4, multi-user): a batch whose finishing order crosses the parent's
// receive order. C = 1, P = 4 on the 2x2 PE mesh: PE 0 is the Level-2 root, PE 1 its east child. B
// = max_context / 4 = 512 keys; request 1 is rotated by one PE. Request 0 (S = 576) has rank 0 (512
// keys) on PE 0 and rank 1 (64 keys) on PE 1; request 1 (S = 512) has its only keys, rank 0, on PE
// 1 and the empty rank 3 on PE 0. So on PE 0 request 1 posts its receive from PE 1 first (no keys
// to sweep) while PE 1 sends request 0's triplet first (one tile vs eight): matched per queue in
// FIFO order, request 1 would merge request 0's partial.
TEST(DecodeIsolation, CrossingFinishOrderKeepsRequestsApart) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 1, 0, 1, 4);
  cfg.max_context = 2048;
  cfg.request_lengths = {576, 512};
  cfg.users = 2;
  const std::vector<QkvInputs> inputs = BatchInputs(cfg, 7);
  for (DecodeVariant variant : {DecodeVariant::kOpt1, DecodeVariant::kOpt3, DecodeVariant::kOpt2}) {
    cfg.variant = variant;
    DecodeRun run = RunDecode(chip, cfg, inputs);
    ASSERT_TRUE(run.status.ok()) << int(variant) << ": " << run.status;
    ExpectRequestsMatchReference(run, cfg, inputs, "variant " + std::to_string(int(variant)));
    // The crossing happened: on the root PE, request 0's messages were staged while request
    // 1's receive waited.
    const uint32_t root = run.launch.outputs[0][0].pe;
    const topology::ChipIndex index(chip);
    const std::string cpu = index.Name(index.PeUnit(topology::UnitKind::kPeCpu, index.PeOf(root)));
    int staged = 0;
    for (const pb::OpRecord& op : OpsNamed(run, "stage_ipcq")) {
      if (op.unit_name() == cpu && op.request_id() == 0) ++staged;
    }
    EXPECT_GE(staged, 3) << "variant " << int(variant) << ": request 0's (m, l, O) not staged";
  }
}

// A ragged 4-request batch under rotation (lengths as in a serving batch, C = 2, P = 4): its
// requests' triplets cross on several queues (staged), every request keeps its own output, and
// the op log is deterministic (data mode = timing mode, twice).
TEST(DecodeIsolation, RaggedBatchUnderRotation) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(8, 2, 0, 2, 4);
  cfg.max_context = 2049;  // every request's cache sized for the longest: short ones leave ranks empty
  cfg.request_lengths = {7, 300, 1000, 2049};
  cfg.users = 4;
  const std::vector<QkvInputs> inputs = BatchInputs(cfg, 11);
  for (DecodeVariant variant : {DecodeVariant::kOpt1, DecodeVariant::kOpt3, DecodeVariant::kOpt2}) {
    cfg.variant = variant;
    DecodeRun run = RunDecode(chip, cfg, inputs);
    ASSERT_TRUE(run.status.ok()) << int(variant) << ": " << run.status;
    ExpectRequestsMatchReference(run, cfg, inputs, "variant " + std::to_string(int(variant)));
    EXPECT_FALSE(OpsNamed(run, "stage_ipcq").empty()) << "variant " << int(variant);
    // Staging depends on timing only: timing mode gives the same op log, twice.
    std::string logs[3];
    logs[0] = OpLogBytes(run);
    for (int i = 1; i < 3; ++i) {
      DecodeRun timing = RunDecode(chip, cfg, {});
      ASSERT_TRUE(timing.status.ok()) << timing.status;
      logs[i] = OpLogBytes(timing);
    }
    EXPECT_EQ(logs[1], logs[0]) << "variant " << int(variant);
    EXPECT_EQ(logs[2], logs[0]) << "variant " << int(variant);
  }
}

// SHORT_CONTEXT with several KV heads per CUBE (C = 1): every PE holds one instance per KV head
// of each request, and each head's Level-2 reduce sends (m, l, O) of one size on the same IPCQ
// queues. A receive takes only its own head's messages (its message stream), so no head merges
// another's partial - in data mode against the float64 reference, with timing mode giving the
// same op log. Shapes as the CLI reproduced them (a ragged batch with realistic issue costs,
// S = 2 with one key on some ranks).
TEST(DecodeIsolation, KvHeadsOfOneRequestOnOnePeKeepTheirMessages) {
  const pb::Chip chip = Load("topology/small.textproto");
  struct Case {
    std::string what;
    DecodeConfig cfg;
    std::string profile;
  };
  std::vector<Case> cases;
  {
    DecodeConfig cfg = Small(16, 8, 0, 1, 4);
    cfg.d = 128;
    cfg.tile = 256;
    cfg.t_q = 3;
    cfg.kv_per_cube = 8;
    cfg.request_lengths = {657, 2287, 4};
    cfg.users = 3;
    cases.push_back({"8 heads per CUBE, 3 requests", cfg, "realistic"});
  }
  for (const uint32_t kv : {8u, 2u}) {
    DecodeConfig cfg = Small(2, 2, 2, 1, 4);
    cfg.d = 128;
    cfg.tile = 256;
    cfg.kv_per_cube = kv;
    cases.push_back({"S 2, kv_per_cube " + std::to_string(kv), cfg, "zero"});
  }
  for (const Case& c : cases) {
    const std::vector<QkvInputs> inputs = BatchInputs(c.cfg, 23);
    DecodeRun run = RunDecode(chip, c.cfg, inputs, c.profile);
    ASSERT_TRUE(run.status.ok()) << c.what << ": " << run.status;
    ExpectRequestsMatchReference(run, c.cfg, inputs, c.what);
    DecodeRun timing = RunDecode(chip, c.cfg, {}, c.profile);
    ASSERT_TRUE(timing.status.ok()) << c.what << ": " << timing.status;
    EXPECT_EQ(OpLogBytes(timing), OpLogBytes(run)) << c.what;
  }
}

// O messages larger than an IPCQ chunk (16 KiB on the small chip): G = 8 rows of T_q >= 5
// tokens of d = 128 fp32 are 20-24 KiB, two chunks each; a receive posted while such a
// message streams in pops each chunk once (the shapes that stopped on the IPCQ's head-message
// CHECK), and the output matches the reference.
TEST(DecodeMessages, OMessagesOfTwoIpcqChunks) {
  const pb::Chip chip = Load("topology/small.textproto");
  struct Case {
    std::string what;
    DecodeConfig cfg;
    std::string profile;
  };
  std::vector<Case> cases;
  for (const DecodeVariant variant :
       {DecodeVariant::kOpt1, DecodeVariant::kOpt3, DecodeVariant::kOpt2}) {
    DecodeConfig cfg = Small(8, 1, 20, 4, 4);
    cfg.d = 128;
    cfg.tile = 256;
    cfg.t_q = 5;
    cfg.start_pe = 1;
    cfg.variant = variant;
    cases.push_back({"C 4, S 20, T_q 5, variant " + std::to_string(int(variant)), cfg, "zero"});
  }
  {
    DecodeConfig cfg = Small(64, 8, 6, 1, 4);
    cfg.d = 128;
    cfg.tile = 256;
    cfg.t_q = 6;
    cases.push_back({"C 1, S 6, T_q 6", cfg, "zero"});
  }
  {
    DecodeConfig cfg = Small(8, 1, 0, 8, 4);
    cfg.d = 128;
    cfg.t_q = 5;
    cfg.request_lengths = {5475, 26, 2396, 2595};
    cfg.users = 4;
    cfg.packed_payload = true;
    cfg.fused_merge = true;
    cfg.start_cube = 1;
    cases.push_back({"C 8, 4 requests, packed, fused", cfg, "realistic"});
  }
  for (const Case& c : cases) {
    const std::vector<QkvInputs> inputs = BatchInputs(c.cfg, 29);
    DecodeRun run = RunDecode(chip, c.cfg, inputs, c.profile);
    ASSERT_TRUE(run.status.ok()) << c.what << ": " << run.status;
    ExpectRequestsMatchReference(run, c.cfg, inputs, c.what);
  }
}

}  // namespace
}  // namespace ahbm::kernels::testing
