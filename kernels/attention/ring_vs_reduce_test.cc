// Ring vs reduce (ADR-0060 rev2 §5.5 box, §9; DESIGN §4b), from simulated runs: one KV head's
// CUBE Group (C = G = 8, P = 8, d = 128, S = 8192) on the default topology. The decode reduce at
// T_q ∈ {1, 8, 16} (T_q = 64 does not fit: the busiest reduce node's six merges of [512, 128]
// fp32 partials need 3.4 MB of the 1 MiB scratch arena — CheckDecodeCapacity refuses it) and
// the prefill ring (T_q = S) — total bytes on the IPCQ and NOC links (the
// link counters) and critical-path bytes (reduce: the deepest leaf-to-root chain of messages in
// the op log; ring: the busiest link, i.e. what one CUBE injects). Prints the table and the
// crossovers; checks that the reduce grows linearly in T_q, the ring not at all, and where the
// ADR's T_q > 2S / (G·⌈log₂(C·P)⌉) lands against the measured crossover.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/attention/prefill_launch.h"
#include "proto/report.pb.h"
#include "proto/trace.pb.h"
#include "topology/ids.h"

namespace ahbm::kernels {
namespace {

using testing::Load;

struct Traffic {
  uint64_t noc = 0;
  uint64_t total = 0;     // bytes over every IPCQ and NOC link
  uint64_t critical = 0;  // see the file comment
};

Traffic LinkTotals(const pb::Report& report) {
  Traffic t;
  for (const pb::UnitStats& u : report.units()) {
    // IPCQ queues and NOC routers count the bytes they put on their links (a router: its
    // forwards, one per hop).
    if (u.kind() != "noc" && u.kind() != "ipcq") continue;
    t.total += u.bytes_written();
    if (u.kind() == "noc") t.noc += u.bytes_written();
    t.critical = std::max(t.critical, u.bytes_written());
  }
  return t;
}

// The deepest chain of messages to the root: each sender's bytes to its one parent, summed
// along the chain from every sender (the op log's send records; PEs by CPU unit name).
uint64_t DeepestChainBytes(const topology::ChipIndex& index, const std::vector<pb::TraceRecord>& log) {
  std::map<std::string, std::pair<std::string, uint64_t>> up;  // sender -> (parent, bytes)
  for (const pb::TraceRecord& r : log) {
    if (!r.has_op() || (r.op().op() != "send_ipcq" && r.op().op() != "send_noc")) continue;
    const std::string& label = r.op().label();  // "to pe N msg M"
    const uint32_t dst = static_cast<uint32_t>(std::stoul(label.substr(6, label.find(" msg") - 6)));
    auto& [parent, bytes] = up[r.op().unit_name()];
    parent = index.Name(index.PeUnit(topology::UnitKind::kPeCpu, index.PeOf(dst)));
    bytes += r.op().bytes_written();
  }
  uint64_t best = 0;
  for (const auto& [sender, edge] : up) {
    uint64_t bytes = 0;
    std::string at = sender;
    for (size_t hops = 0; hops <= up.size(); ++hops) {
      const auto it = up.find(at);
      if (it == up.end()) break;
      bytes += it->second.second;
      at = it->second.first;
    }
    best = std::max(best, bytes);
  }
  return best;
}

TEST(RingVsReduce, LinkBytesAndCrossovers) {
  const pb::Chip chip = Load("topology/chip_4sip.textproto");
  const topology::ChipIndex index(chip);
  const uint64_t S = 8192;
  std::printf("%-22s %14s %14s\n", "run", "total_bytes", "critical_bytes");
  std::map<uint32_t, Traffic> reduce;
  for (uint32_t t_q : {1u, 8u, 16u}) {
    DecodeConfig cfg;
    cfg.h_q = 8;
    cfg.h_kv = 1;
    cfg.s = S;
    cfg.t_q = t_q;
    testing::DecodeRun run = testing::RunDecode(chip, cfg, {});
    ASSERT_TRUE(run.status.ok()) << run.status;
    Traffic t = LinkTotals(run.sim->BuildReport());
    t.critical = DeepestChainBytes(index, run.sim->op_log().records());
    std::printf("decode reduce T_q %-4u %14llu %14llu\n", t_q, static_cast<unsigned long long>(t.total),
                static_cast<unsigned long long>(t.critical));
    reduce[t_q] = t;
  }
  PrefillConfig ring;
  ring.h_q = 8;
  ring.h_kv = 1;
  ring.s = S;
  auto run = testing::RunWith(chip, ring, {}, "zero", PrefillCubes, LaunchPrefill, false);
  ASSERT_TRUE(run.status.ok()) << run.status;
  const Traffic r = LinkTotals(run.sim->BuildReport());
  std::printf("prefill ring T_q %-5llu %14llu %14llu\n", static_cast<unsigned long long>(S),
              static_cast<unsigned long long>(r.total), static_cast<unsigned long long>(r.critical));
  // The ring moves (C − 1)·2·S·d·2 bytes over the NOC whatever T_q (the IPCQ carries only its
  // CUBE barriers' 64 B tokens); one CUBE injects 1/C of it (the busiest link).
  EXPECT_EQ(r.noc, 7ull * 2 * S * 128 * 2);
  EXPECT_EQ(r.critical, r.noc / 8);
  // The reduce: C·P − 1 = 63 payloads of G·T_q·(d + 2)·4 bytes; its deepest chain 6 of them.
  EXPECT_EQ(reduce[1].total, 63ull * 8 * 130 * 4);
  EXPECT_EQ(reduce[1].critical, 6ull * 8 * 130 * 4);
  // The reduce grows linearly with T_q (payload G·T_q·(d + 2)·4 per message).
  const double per_tq = (double(reduce[16].total) - double(reduce[8].total)) / 8.0;
  EXPECT_NEAR(double(reduce[8].total), double(reduce[1].total) + 7 * per_tq, 1e-6 * reduce[8].total);
  const double fixed = double(reduce[1].total) - per_tq;
  const double crossover_total = (double(r.total) - fixed) / per_tq;
  const double per_tq_critical = (double(reduce[16].critical) - double(reduce[8].critical)) / 8.0;
  const double crossover_critical =
      (double(r.critical) - (double(reduce[1].critical) - per_tq_critical)) / per_tq_critical;
  std::printf("critical path: reduce %.0f x T_q (+%.0f), ring %llu: crossover T_q = %.1f\n",
              per_tq_critical, double(reduce[1].critical) - per_tq_critical,
              static_cast<unsigned long long>(r.critical), crossover_critical);
  const double adr = 2.0 * S / (8 * std::ceil(std::log2(64.0)));
  std::printf("reduce total bytes = %.0f + %.0f x T_q; ring total %llu: crossover T_q = %.1f; "
              "ADR formula 2S/(G log2(CP)) = %.1f\n",
              fixed, per_tq, static_cast<unsigned long long>(r.total), crossover_total, adr);
  EXPECT_GT(crossover_total, 1.0);  // decode (T_q = 1) stays on the reduce side
  EXPECT_LT(crossover_total, double(S));  // a whole-prompt prefill is on the ring side
}

}  // namespace
}  // namespace ahbm::kernels
