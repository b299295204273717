// The decode baselines (baseline.h): parity against the float64 reference on every shape the
// issue lists (empty ranks, ragged blocks, a multi-user batch with its own lengths), and
// ADR rev2 §11 gate 3 from the op log at C = P = 8.
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "actors/chip_sim.h"
#include "gtest/gtest.h"
#include "kernels/attention/baseline.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "proto/report.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels::testing {  // decode_test_util.h
namespace {

// One baseline's run (timing mode when `inputs` is empty).
DecodeRun RunBaseline(const pb::Chip& chip, const DecodeConfig& cfg, BaselineKind kind,
                      const std::vector<QkvInputs>& inputs = {}) {
  return RunWith(
      chip, cfg, inputs, "zero",
      [kind](const pb::Chip& c, const DecodeConfig& k) { return BaselineCubes(c, k, kind); },
      [kind](const pb::Chip& c, const DecodeConfig& k, KernelRuntime& runtime, MemoryStore* store,
             const std::vector<QkvInputs>& in) {
        return LaunchBaseline(c, k, runtime, store, in, kind);
      });
}

const char* Name(BaselineKind kind) {
  switch (kind) {
    case BaselineKind::kFanout:
      return "fanout";
    case BaselineKind::kFanoutGroup:
      return "fanout_group";
    case BaselineKind::kRev1Tree:
      return "rev1_tree";
  }
  return "?";
}

// topology/small.textproto: 1 SIP of 2x4 CUBEs, 2x2 PEs each. H_q 8 / H_kv 2 (G = 4):
// fanout 8 CUBEs x P = 4, fanout_group 2 groups of C = 2 x P = 4, rev1 2 CUBEs x P = 4.
DecodeConfig Small(uint64_t s) {
  DecodeConfig cfg = testing::Small(8, 2, s, 2, 4);
  cfg.tile = 128;
  return cfg;
}

uint32_t Ranks(const DecodeConfig& cfg, BaselineKind kind) {
  return kind == BaselineKind::kFanoutGroup ? cfg.c * cfg.p : cfg.p;
}

void ExpectParity(const pb::Chip& chip, const DecodeConfig& cfg, BaselineKind kind,
                  const std::string& what) {
  const std::vector<QkvInputs> inputs = BatchInputs(cfg, 17);
  DecodeRun run = RunBaseline(chip, cfg, kind, inputs);
  ASSERT_TRUE(run.status.ok()) << what << ": " << run.status;
  ExpectRequestsMatchReference(run, cfg, inputs, what);
}

class BaselineParity : public ::testing::TestWithParam<BaselineKind> {};

// S = 1 and 5 (most ranks empty), ranks − 1 (one empty rank), a ragged larger S; the KV cache
// sized for max_context = 4·S (three quarters of the ranks hold no key).
TEST_P(BaselineParity, EmptyAndRaggedRanks) {
  const pb::Chip chip = Load("topology/small.textproto");
  const BaselineKind kind = GetParam();
  for (uint64_t s : {uint64_t{1}, uint64_t{5}, uint64_t{Ranks(Small(1), kind) - 1}, uint64_t{777}}) {
    for (uint64_t max_context : {uint64_t{0}, 4 * s}) {
      DecodeConfig cfg = Small(s);
      cfg.max_context = max_context;
      ExpectParity(chip, cfg, kind,
                   absl::StrCat(Name(kind), " S ", s, " max_context ", max_context));
    }
  }
}

// A decode batch: 4 requests of their own lengths, rotated by request.
TEST_P(BaselineParity, MultiUserBatchWithOwnLengths) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(2049);
  cfg.users = 4;
  cfg.request_lengths = {7, 300, 1000, 2049};
  ExpectParity(chip, cfg, GetParam(), absl::StrCat(Name(GetParam()), " batch"));
}

INSTANTIATE_TEST_SUITE_P(Kinds, BaselineParity,
                         ::testing::Values(BaselineKind::kFanout, BaselineKind::kFanoutGroup,
                                           BaselineKind::kRev1Tree),
                         [](const ::testing::TestParamInfo<BaselineKind>& info) {
                           return std::string(Name(info.param));
                         });

// ---- structure, from the op log ----

uint64_t MessageId(const std::string& label) {
  return std::stoull(label.substr(label.find(" msg ") + 5));
}

// The longest chain of sequential receive rounds: a message's round is one more than the
// highest round its sender had received before sending it (in the op log's order, which is
// each instance's program order); a triplet's three messages share a round. Instances are
// (CPU unit, request id).
uint32_t LongestReceiveChain(const DecodeRun& run) {
  struct Recv {
    size_t at;
    uint64_t msg;
  };
  std::map<uint64_t, std::tuple<std::string, uint32_t, size_t>> sends;  // msg -> sender, at
  std::map<std::pair<std::string, uint32_t>, std::vector<Recv>> recvs;  // instance -> receives
  const auto& records = run.sim->op_log().records();
  for (size_t i = 0; i < records.size(); ++i) {
    if (!records[i].has_op()) continue;
    const pb::OpRecord& op = records[i].op();
    if (op.op().starts_with("send_")) {
      sends[MessageId(op.label())] = {op.unit_name(), op.request_id(), i};
    } else if (op.op().starts_with("recv_")) {
      recvs[{op.unit_name(), op.request_id()}].push_back(Recv{i, MessageId(op.label())});
    }
  }
  std::map<uint64_t, uint32_t> round;  // msg -> its sender's rounds before the send
  std::function<uint32_t(uint64_t)> level = [&](uint64_t msg) -> uint32_t {
    if (auto it = round.find(msg); it != round.end()) return it->second;
    const auto& [unit, request, at] = sends.at(msg);
    uint32_t best = 0;
    for (const Recv& rv : recvs[{unit, request}]) {
      if (rv.at < at) best = std::max(best, level(rv.msg) + 1);
    }
    return round[msg] = best;
  };
  uint32_t longest = 0;
  for (const auto& [instance, list] : recvs) {
    for (const Recv& rv : list) longest = std::max(longest, level(rv.msg) + 1);
  }
  return longest;
}

uint64_t KvBytesRead(const DecodeRun& run) {
  uint64_t read = 0, q = 0;
  for (const pb::TraceRecord& r : run.sim->op_log().records()) {
    if (r.has_op() && r.op().op() == "dma_load") q += r.op().bytes_read();
  }
  const pb::Report report = run.sim->BuildReport();
  for (const pb::UnitStats& u : report.units()) {
    if (u.kind() == "dma") read += u.bytes_read();
  }
  return read - q;
}

// ADR rev2 §11 gate 3 at C = P = 8: the ADR kernel's reduce is ⌈log₂P⌉ + the group root's
// depth rounds (3 + 3), baseline_fanout_group's all-to-all C·P − 1 = 63 sequential steps; and
// the baseline reads K/V once per query head: H_q·S·d·2 bytes each, G = 8 times the ADR's.
TEST(BaselineGate3, ReduceRoundsAndKvBytesAtCP64) {
  const pb::Chip chip = Load("topology/chip_2sip.textproto");
  DecodeConfig cfg;
  cfg.h_q = 8;
  cfg.h_kv = 1;
  cfg.d = 128;
  cfg.s = 8192;
  cfg.c = 8;
  cfg.p = 8;
  cfg.tile = 128;
  DecodeRun adr = RunDecode(chip, cfg, {});
  ASSERT_TRUE(adr.status.ok()) << adr.status;
  DecodeRun base = RunBaseline(chip, cfg, BaselineKind::kFanoutGroup);
  ASSERT_TRUE(base.status.ok()) << base.status;

  EXPECT_EQ(adr.launch.level2_rounds, 3u);
  EXPECT_EQ(adr.launch.level1_rounds, 3u);
  EXPECT_EQ(LongestReceiveChain(adr), 6u);
  EXPECT_EQ(base.launch.level2_rounds + base.launch.level1_rounds, 63u);
  EXPECT_EQ(LongestReceiveChain(base), 63u);
  // Every instance (rank x query head) receives C·P − 1 triplets; one rank stores each row.
  std::map<std::pair<std::string, uint32_t>, uint32_t> received;
  uint32_t stores = 0;
  for (const pb::TraceRecord& r : base.sim->op_log().records()) {
    if (!r.has_op()) continue;
    if (r.op().op().starts_with("recv_")) ++received[{r.op().unit_name(), r.op().request_id()}];
    if (r.op().op() == "dma_store") ++stores;
  }
  EXPECT_EQ(received.size(), 64u * 8u);
  for (const auto& [instance, n] : received) EXPECT_EQ(n, 3u * 63u) << instance.first;
  EXPECT_EQ(stores, 8u);  // one rank stores, one row per query head

  const uint64_t kv_adr = KvBytesRead(adr), kv_base = KvBytesRead(base);
  EXPECT_EQ(kv_adr, uint64_t{cfg.h_kv} * cfg.s * cfg.d * 2 * 2);
  EXPECT_EQ(kv_base, uint64_t{cfg.h_q} * cfg.s * cfg.d * 2 * 2);
  EXPECT_EQ(kv_base, 8 * kv_adr);
}

// Fan-out / tree rounds per baseline, the rev1 tree's depth ⌈log₂P⌉, and the request ids of
// the fan-out group's instances (u·G + g).
TEST(BaselineStructure, RoundsAndRequestIds) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(600);
  cfg.users = 2;
  DecodeRun fan = RunBaseline(chip, cfg, BaselineKind::kFanout);
  ASSERT_TRUE(fan.status.ok()) << fan.status;
  EXPECT_EQ(fan.launch.level2_rounds + fan.launch.level1_rounds, cfg.p - 1);
  EXPECT_EQ(LongestReceiveChain(fan), cfg.p - 1);
  DecodeRun group = RunBaseline(chip, cfg, BaselineKind::kFanoutGroup);
  ASSERT_TRUE(group.status.ok()) << group.status;
  // The longest chain of 7 ring edges skips one IPCQ edge: both NOC edges, 5 IPCQ ones.
  EXPECT_EQ(group.launch.level2_rounds, 5u);
  EXPECT_EQ(group.launch.level1_rounds, 2u);
  EXPECT_EQ(LongestReceiveChain(group), cfg.c * cfg.p - 1);
  // Instances u·G + g: ids 0..7, each receiving C·P − 1 triplets on each rank of both heads.
  std::map<uint32_t, uint32_t> per_request;
  for (const pb::TraceRecord& r : group.sim->op_log().records()) {
    if (r.has_op() && r.op().op().starts_with("recv_")) ++per_request[r.op().request_id()];
  }
  EXPECT_EQ(per_request.size(), 2u * 4u);
  for (const auto& [request, n] : per_request) {
    EXPECT_EQ(n, 3u * 7u * 8u * cfg.h_kv) << request;
  }
  DecodeRun rev1 = RunBaseline(chip, cfg, BaselineKind::kRev1Tree);
  ASSERT_TRUE(rev1.status.ok()) << rev1.status;
  EXPECT_EQ(rev1.launch.level2_rounds, 2u);  // ⌈log₂4⌉
  EXPECT_EQ(LongestReceiveChain(rev1), 2u);
}

// Each baseline twice: a byte-identical op log.
TEST(BaselineStructure, TwiceIsByteIdentical) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(900);
  cfg.users = 2;
  for (BaselineKind kind :
       {BaselineKind::kFanout, BaselineKind::kFanoutGroup, BaselineKind::kRev1Tree}) {
    std::string logs[2];
    for (std::string& log : logs) {
      DecodeRun run = RunBaseline(chip, cfg, kind);
      ASSERT_TRUE(run.status.ok()) << run.status;
      log = OpLogBytes(run);
    }
    EXPECT_EQ(logs[0], logs[1]) << Name(kind);
    EXPECT_GT(logs[0].size(), 1000u);
  }
}

// Bad input: one line naming the field.
TEST(BaselineStructure, RefusesWhatItCannotRun) {
  const pb::Chip chip = Load("topology/small.textproto");
  DecodeConfig cfg = Small(100);
  cfg.t_q = 2;
  for (BaselineKind kind :
       {BaselineKind::kFanout, BaselineKind::kFanoutGroup, BaselineKind::kRev1Tree}) {
    EXPECT_EQ(BaselineCubes(chip, cfg, kind).status().message(),
              "t_q: the baselines decode one token (t_q = 1)");
  }
  cfg = Small(100);
  cfg.h_q = 16;  // 16 query heads need 16 CUBEs; small has 8
  cfg.h_kv = 2;
  EXPECT_TRUE(absl::StartsWith(BaselineCubes(chip, cfg, BaselineKind::kFanout).status().message(),
                               "h_q: "));
  // 4 PEs in a row of a 2x4 PE mesh: the ring's closing link 3 -> 0 is not one IPCQ hop.
  const pb::Chip chip2 = Load("topology/chip_2sip.textproto");
  cfg = Small(100);
  EXPECT_EQ(BaselineCubes(chip2, cfg, BaselineKind::kFanout).status().message(),
            "p: the fan-out ring over a 1x4 PE rectangle in one CUBE has a link that is not one "
            "IPCQ hop");
  EXPECT_TRUE(BaselineCubes(chip2, cfg, BaselineKind::kFanoutGroup).ok());  // C = 2: NOC closes it
}

}  // namespace
}  // namespace ahbm::kernels::testing
