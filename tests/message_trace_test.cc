// The message trace (`--message_trace`, actors/observe/message_trace.h) of whole kernel runs:
// every delivered message once, in the engine's delivery order, with its protobuf command, and
// the same bytes run after run.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/observe/message_trace.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "kernels/launch/launch.h"
#include "proto/commands.pb.h"
#include "proto/workload.pb.h"
#include "topology/ids.h"
#include "topology/loader.h"

namespace ahbm {
namespace {

pb::Chip Small() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

struct Traced {
  launch::LaunchResult result;
  std::vector<pb::Envelope> envelopes;
  std::string bytes;
};

Traced RunTraced(const std::string& workload, const std::string& name) {
  pb::Workload w;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(workload, &w));
  launch::LaunchOptions options;
  options.keep_op_log = true;  // the op log's issue records are the count to check against
  options.message_trace_path = absl::StrCat(::testing::TempDir(), "/", name, ".messages");
  absl::StatusOr<launch::LaunchResult> r = launch::RunWorkload(Small(), w, options);
  EXPECT_TRUE(r.ok()) << r.status();
  Traced t;
  if (!r.ok()) return t;
  t.result = *std::move(r);
  std::ifstream in(options.message_trace_path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  t.bytes = s.str();
  std::istringstream again(t.bytes);
  absl::StatusOr<std::vector<pb::Envelope>> envelopes = observe::ReadMessageTrace(again);
  EXPECT_TRUE(envelopes.ok()) << envelopes.status();
  if (envelopes.ok()) t.envelopes = *std::move(envelopes);
  return t;
}

constexpr char kDecode[] =
    "kernel: DECODE variant: OPT2 h_q: 8 h_kv: 2 c: 4 p: 4 tile: 128 s: 1024 users: 2";
constexpr char kRing[] = "kernel: PREFILL variant: RING p: 4 h_q: 8 h_kv: 2 s: 256";

TEST(MessageTrace, EveryMessageOnceInDeliveryOrderWithItsCommand) {
  for (const auto& [name, workload] : {std::pair{"decode", kDecode}, std::pair{"ring", kRing}}) {
    const Traced t = RunTraced(workload, name);
    ASSERT_TRUE(t.result.runtime_status.ok()) << t.result.runtime_status;
    ASSERT_GT(t.envelopes.size(), 100u) << name;
    // Delivery order is the engine's key order (one heap: a message trace keeps islands off).
    EXPECT_EQ(t.result.islands, 1u);
    EXPECT_LE(t.envelopes.size(), t.result.report.events());
    // Delivered in time order, each (source, sequence) once (a message sent at the instant
    // being delivered may follow equal-time messages of larger source ids: engine.h).
    std::set<std::pair<uint32_t, uint64_t>> seen;
    for (size_t i = 0; i < t.envelopes.size(); ++i) {
      const pb::Envelope& e = t.envelopes[i];
      if (i > 0) ASSERT_LE(t.envelopes[i - 1].time_ps(), e.time_ps()) << name << " " << i;
      ASSERT_TRUE(seen.insert({e.src_unit(), e.src_seq()}).second) << name << " " << i;
    }
    // Each carries its command, in the body field of its type.
    std::map<std::string, uint64_t> by_type;
    for (const pb::Envelope& e : t.envelopes) {
      ASSERT_FALSE(e.type().empty()) << e.ShortDebugString();
      // Every unit of a chip sends protobuf commands only (a PE CPU's own wake-ups are
      // timers, not messages).
      ASSERT_TRUE(e.type().starts_with("ahbm.pb.")) << e.type();
      ASSERT_NE(e.body_case(), pb::Envelope::BODY_NOT_SET) << e.type();
      ++by_type[e.type()];
    }
    // Every command a PE CPU issued reached its scheduler as one message (the op log's issue
    // records count them; sends are messages of their own).
    std::map<std::string, uint64_t> issued;
    for (const pb::TraceRecord& r : t.result.op_log) {
      if (!r.has_issue()) continue;
      switch (r.issue().command_case()) {
        case pb::IssueRecord::kComposite: ++issued["ahbm.pb.CompositeCmd"]; break;
        case pb::IssueRecord::kMath: ++issued["ahbm.pb.MathCmd"]; break;
        case pb::IssueRecord::kSoftmaxPv: ++issued["ahbm.pb.SoftmaxPvCmd"]; break;
        case pb::IssueRecord::kGemm: ++issued["ahbm.pb.GemmCmd"]; break;
        default: break;
      }
    }
    ASSERT_FALSE(issued.empty());
    for (const auto& [type, n] : issued) EXPECT_EQ(by_type[type], n) << name << " " << type;
    // The conversation's other parties are there too.
    EXPECT_GT(by_type["ahbm.pb.Completion"], 0u) << name;
    EXPECT_GT(by_type["ahbm.pb.HbmRequest"] + by_type["ahbm.pb.DmaBatch"], 0u) << name;
    EXPECT_GT(by_type["ahbm.pb.NocSend"], 0u) << name;
  }
}

TEST(MessageTrace, TheSameRunGivesTheSameBytes) {
  const Traced a = RunTraced(kRing, "ring_a");
  const Traced b = RunTraced(kRing, "ring_b");
  EXPECT_GT(a.bytes.size(), 1000u);
  EXPECT_TRUE(a.bytes == b.bytes);
}

}  // namespace
}  // namespace ahbm
