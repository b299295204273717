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

Traced RunTraced(const std::string& workload, const std::string& name, bool op_log = true,
                 const pb::Chip& chip = Small()) {
  pb::Workload w;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(workload, &w));
  launch::LaunchOptions options;
  options.keep_op_log = op_log;  // the op log's issue records are the count to check against
  options.message_trace_path = absl::StrCat(::testing::TempDir(), "/", name, ".messages");
  absl::StatusOr<launch::LaunchResult> r = launch::RunWorkload(chip, w, options);
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

// The GEMM and MATH engines are actors in a default run (no op log): each command the
// scheduler ran gets its EngineWork from the PE's scheduler to that PE's engine units, stamped,
// in delivery order, summed (no per-tile ops, no op names without an op log), and delivered
// before the command's Completion (same instant, same source, a later sequence).
TEST(MessageTrace, EngineWorkReachesTheEnginesBeforeTheCompletion) {
  const Traced t = RunTraced(kDecode, "decode_engines", /*op_log=*/false);
  ASSERT_TRUE(t.result.runtime_status.ok()) << t.result.runtime_status;
  const topology::ChipIndex index(Small());
  using topology::UnitKind;
  const auto kind = [&](uint32_t unit) { return index.KindOf(topology::UnitId(unit)); };
  const auto pe = [&](uint32_t unit) { return index.GlobalPeOfUnit(topology::UnitId(unit)); };
  // (scheduler, cmd_id) -> the stamp (time, sequence) of its last EngineWork.
  std::map<std::pair<uint32_t, uint64_t>, std::pair<uint64_t, uint64_t>> work;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> last_by_source;
  std::set<std::pair<uint32_t, uint64_t>> commands;  // (scheduler, cmd_id) of engine commands
  uint64_t to_gemm = 0, to_math = 0, completed = 0;
  for (const pb::Envelope& e : t.envelopes) {
    switch (e.body_case()) {
      case pb::Envelope::kComposite:
        commands.insert({e.dst_unit(), e.composite().cmd_id()});
        break;
      case pb::Envelope::kGemm:
        commands.insert({e.dst_unit(), e.gemm().cmd_id()});
        break;
      case pb::Envelope::kMath:
        commands.insert({e.dst_unit(), e.math().cmd_id()});
        break;
      case pb::Envelope::kSoftmaxPv:
        commands.insert({e.dst_unit(), e.softmax_pv().cmd_id()});
        break;
      case pb::Envelope::kLseMerge:
        commands.insert({e.dst_unit(), e.lse_merge().cmd_id()});
        break;
      default:
        break;
    }
    if (e.body_case() == pb::Envelope::kEngineWork) {
      const pb::EngineWork& w = e.engine_work();
      ASSERT_EQ(e.type(), "ahbm.pb.EngineWork");
      ASSERT_EQ(kind(e.src_unit()), UnitKind::kPeScheduler) << e.ShortDebugString();
      ASSERT_TRUE(kind(e.dst_unit()) == UnitKind::kGemm || kind(e.dst_unit()) == UnitKind::kMath)
          << e.ShortDebugString();
      ASSERT_EQ(pe(e.dst_unit()), pe(e.src_unit())) << e.ShortDebugString();
      (kind(e.dst_unit()) == UnitKind::kGemm ? to_gemm : to_math)++;
      // One source's messages are delivered in its key order (time, then sequence).
      const std::pair<uint64_t, uint64_t> key{e.time_ps(), e.src_seq()};
      const auto last = last_by_source.find(e.src_unit());
      if (last != last_by_source.end()) {
        ASSERT_LT(last->second, key) << e.ShortDebugString();
      }
      last_by_source[e.src_unit()] = key;
      // The summary a default run carries: ops that ended by the delivery instant.
      EXPECT_GT(w.tile_ops(), 0u) << e.ShortDebugString();
      EXPECT_LT(w.start_ps(), w.end_ps());
      EXPECT_LE(w.end_ps(), e.time_ps());
      EXPECT_GE(w.busy_ps(), w.work_ps());
      EXPECT_EQ(w.ops_size(), 0);
      EXPECT_TRUE(w.op().empty());
      EXPECT_EQ(w.command_case(), pb::EngineWork::COMMAND_NOT_SET);
      work[{e.src_unit(), w.cmd_id()}] = key;
    } else if (e.body_case() == pb::Envelope::kCompletion &&
               kind(e.src_unit()) == UnitKind::kPeScheduler) {
      const auto w = work.find({e.src_unit(), e.completion().cmd_id()});
      if (w == work.end()) continue;  // a DMA command: no engine ran it
      ++completed;
      EXPECT_EQ(w->second.first, e.time_ps()) << e.ShortDebugString();
      EXPECT_LT(w->second.second, e.src_seq()) << e.ShortDebugString();
    }
  }
  EXPECT_GT(to_gemm, 0u);
  EXPECT_GT(to_math, 0u);
  // Every engine command got its work, and its Completion came after it.
  ASSERT_FALSE(commands.empty());
  for (const auto& c : commands) EXPECT_TRUE(work.contains(c)) << c.first << " " << c.second;
  EXPECT_EQ(completed, work.size());
}

// A DMA call's share for an HBM channel is one HbmRequest from the DMA to the channel actor,
// answered once by one HbmResponse from that channel to that DMA at the same instant: the
// channel's k-th message (its src_seq k) answers the k-th request delivered to it, with the
// request's id and one grant per part, in the parts' order, final at arrival (the DMA's
// Completion follows at that instant too).
TEST(MessageTrace, EveryHbmChannelRequestIsAnsweredOnceAtItsInstant) {
  const Traced t = RunTraced(kDecode, "decode_channels");
  ASSERT_TRUE(t.result.runtime_status.ok()) << t.result.runtime_status;
  const topology::ChipIndex index(Small());
  std::map<uint32_t, std::vector<size_t>> requests_to;  // channel -> its requests, in order
  size_t answers = 0;
  for (size_t i = 0; i < t.envelopes.size(); ++i) {
    const pb::Envelope& e = t.envelopes[i];
    if (e.has_hbm_request()) {
      ASSERT_EQ(index.KindOf(topology::UnitId(e.src_unit())), topology::UnitKind::kDma) << i;
      ASSERT_EQ(index.KindOf(topology::UnitId(e.dst_unit())), topology::UnitKind::kHbmChannel) << i;
      ASSERT_EQ(e.hbm_request().channel(), e.dst_unit()) << i;
      ASSERT_GT(e.hbm_request().part_cmd_size(), 0) << i;
      requests_to[e.dst_unit()].push_back(i);
      continue;
    }
    if (!e.has_hbm_response()) continue;
    ++answers;
    const std::vector<size_t>& asked = requests_to[e.src_unit()];
    ASSERT_LT(e.src_seq(), asked.size()) << "an answer before its request, envelope " << i;
    const pb::Envelope& req = t.envelopes[asked[e.src_seq()]];
    EXPECT_EQ(e.dst_unit(), req.src_unit()) << i;
    EXPECT_EQ(e.time_ps(), req.time_ps()) << i;
    EXPECT_EQ(e.hbm_response().channel(), e.src_unit()) << i;
    EXPECT_EQ(e.hbm_response().request_id(), req.hbm_request().request_id()) << i;
    const pb::HbmResponse& r = e.hbm_response();
    const int parts = req.hbm_request().part_cmd_size();
    ASSERT_EQ(r.part_cmd_size(), parts) << i;
    ASSERT_EQ(r.start_ps_size(), parts) << i;
    ASSERT_EQ(r.done_ps_size(), parts) << i;
    for (int p = 0; p < parts; ++p) {
      EXPECT_EQ(r.part_cmd(p), req.hbm_request().part_cmd(p)) << i;
      EXPECT_LE(req.time_ps(), r.start_ps(p)) << i;
      EXPECT_LT(r.start_ps(p), r.done_ps(p)) << i;
    }
  }
  size_t requests = 0;
  for (const auto& [channel, asked] : requests_to) requests += asked.size();
  EXPECT_GT(requests, 100u);
  EXPECT_EQ(answers, requests);
}

// The NOC endpoint is the receiving CPU's (actors/README.md, audit rows 7 and 9): each NOC send
// asks the destination CPU for room with a NocRoomRequest and gets one answer in the same
// instant — NocAccepted at its ready time, or NocHeld and later one NocAccepted at the
// departure — and the sending CPU hands its NocSend to its router for the accepted time.
// With the small chip's queue, and for decode with a queue of one byte (every message waits for
// its receive, so some are held).
TEST(MessageTrace, EveryNocSendAsksTheReceivingCpuForRoom) {
  pb::Chip tiny_queue = Small();
  tiny_queue.mutable_sip()->mutable_noc()->set_endpoint_queue_bytes(1);
  const topology::ChipIndex index(Small());
  for (const bool tiny : {false, true}) {
    for (const auto& [name, workload] : {std::pair{"decode", kDecode}, std::pair{"ring", kRing}}) {
      if (tiny && std::string(name) == "ring") continue;  // the ring refuses a queue < a message
      const std::string what = absl::StrCat(name, tiny ? " (1-byte queue)" : "");
      // Realistic issue costs: a send's ready time lies ahead of the instant it is handled.
      const Traced t = RunTraced(absl::StrCat(workload, " issue_cost_profile: 'realistic'"),
                                 absl::StrCat(name, "_room", tiny), /*op_log=*/false,
                                 tiny ? tiny_queue : Small());
      ASSERT_TRUE(t.result.runtime_status.ok()) << what << ": " << t.result.runtime_status;
      struct Ask {
        pb::NocRoomRequest request;
        uint32_t from = 0, to = 0;
        uint64_t asked_ps = 0;
        int accepted = 0, held = 0, sent = 0;  // answers: accepted + held
        uint64_t accepted_ps = 0;
      };
      std::map<uint64_t, Ask> asks;  // by message id
      size_t held = 0, ahead = 0;
      for (size_t i = 0; i < t.envelopes.size(); ++i) {
        const pb::Envelope& e = t.envelopes[i];
        if (e.has_noc_room_request()) {
          const pb::NocRoomRequest& r = e.noc_room_request();
          Ask& a = asks[r.message_id()];
          ASSERT_EQ(a.accepted + a.held + a.sent, 0)
              << what << ": message asked twice, envelope " << i;
          a.request = r;
          a.from = e.src_unit();
          a.to = e.dst_unit();
          a.asked_ps = e.time_ps();
          EXPECT_EQ(e.src_unit(), index.PeUnit(topology::UnitKind::kPeCpu,
                                               index.PeOf(r.src_pe())).value());
          EXPECT_EQ(e.dst_unit(), index.PeUnit(topology::UnitKind::kPeCpu,
                                               index.PeOf(r.dst_pe())).value());
          EXPECT_LE(e.time_ps(), r.ready_ps()) << what << " " << i;
          ahead += e.time_ps() < r.ready_ps();
        } else if (e.has_noc_held() || e.has_noc_accepted()) {
          const uint64_t id =
              e.has_noc_held() ? e.noc_held().message_id() : e.noc_accepted().message_id();
          ASSERT_TRUE(asks.contains(id)) << what << ": an answer before its question, " << i;
          Ask& a = asks[id];
          EXPECT_EQ(e.src_unit(), a.to) << what << " " << i;
          EXPECT_EQ(e.dst_unit(), a.from) << what << " " << i;
          if (e.has_noc_held()) {
            ++held;
            EXPECT_EQ(a.accepted + a.held, 0) << what << " " << i;  // the first answer
            EXPECT_EQ(e.time_ps(), a.asked_ps) << what << " " << i;
            ++a.held;
          } else {
            ++a.accepted;
            a.accepted_ps = e.noc_accepted().accepted_ps();
            if (a.held == 0) {  // the answer: leaves at its ready time
              EXPECT_EQ(e.time_ps(), a.asked_ps) << what << " " << i;
              EXPECT_EQ(a.accepted_ps, a.request.ready_ps()) << what << " " << i;
            } else {            // after NocHeld: at the departure (its ready time at the
                                // earliest: a receive posted later, for an earlier time)
              EXPECT_EQ(e.time_ps(), a.accepted_ps) << what << " " << i;
              EXPECT_GE(a.accepted_ps, a.request.ready_ps()) << what << " " << i;
            }
          }
        } else if (e.has_noc_send()) {
          const uint64_t id = e.noc_send().message_id();
          ASSERT_TRUE(asks.contains(id)) << what << ": a NocSend that never asked, " << i;
          Ask& a = asks[id];
          ASSERT_EQ(a.accepted, 1) << what << ": a NocSend before its NocAccepted, " << i;
          EXPECT_EQ(e.src_unit(), a.from) << what << " " << i;
          EXPECT_EQ(index.KindOf(topology::UnitId(e.dst_unit())), topology::UnitKind::kNocRouter);
          EXPECT_EQ(e.time_ps(), a.accepted_ps) << what << " " << i;
          ++a.sent;
        }
      }
      EXPECT_GT(asks.size(), 0u) << what;
      for (const auto& [id, a] : asks) {
        EXPECT_EQ(a.accepted, 1) << what << ": message " << id;
        EXPECT_EQ(a.sent, 1) << what << ": message " << id;
      }
      if (tiny) {
        EXPECT_GT(held, 0u) << what << ": no message waited for its receive";
      }
      EXPECT_GT(ahead, 0u) << what << ": no send issued ahead of the event clock";
    }
  }
}

// Data mode: a message's values leave with its IpcqSend / NocSend and reach the receiver on the
// IpcqArrival of chunk 0 / the NocDelivered (actors/README.md, audit row 8), and only there.
TEST(MessageTrace, DataModeValuesTravelInTheMessages) {
  for (const auto& [name, workload] : {std::pair{"decode_data", kDecode},
                                       std::pair{"ring_data", kRing}}) {
    SCOPED_TRACE(name);
    const Traced t = RunTraced(absl::StrCat(workload, " data: true"), name, /*op_log=*/false);
    ASSERT_TRUE(t.result.runtime_status.ok()) << t.result.runtime_status;
    std::map<uint64_t, std::string> sent;  // message id -> values
    size_t arrivals_with_values = 0;
    for (const pb::Envelope& e : t.envelopes) {
      if (e.has_ipcq_send() || e.has_noc_send()) {
        const pb::TensorRef& payload =
            e.has_ipcq_send() ? e.ipcq_send().payload() : e.noc_send().payload();
        uint64_t elements = 1;
        for (uint64_t d : payload.shape()) elements *= d;
        const std::string& values =
            e.has_ipcq_send() ? e.ipcq_send().values() : e.noc_send().values();
        EXPECT_EQ(values.size(), elements * sizeof(float));
        const uint64_t id =
            e.has_ipcq_send() ? e.ipcq_send().message_id() : e.noc_send().message_id();
        sent[id] = values;
      } else if (e.has_ipcq_arrival()) {
        const pb::IpcqArrival& a = e.ipcq_arrival();
        if (a.chunk_index() != 0) {
          EXPECT_TRUE(a.values().empty()) << "message " << a.message_id();
          continue;
        }
        ASSERT_TRUE(sent.contains(a.message_id()));
        EXPECT_TRUE(a.values() == sent[a.message_id()]) << "message " << a.message_id();
        ++arrivals_with_values;
      } else if (e.has_noc_delivered()) {
        const pb::NocDelivered& d = e.noc_delivered();
        ASSERT_TRUE(sent.contains(d.message_id()));
        EXPECT_TRUE(d.values() == sent[d.message_id()]) << "message " << d.message_id();
        ++arrivals_with_values;
      }
    }
    EXPECT_GT(sent.size(), 0u);
    EXPECT_EQ(arrivals_with_values, sent.size());  // each message reaches its receiver once
  }
}

// Data mode: a CPU's DMA command's values are moved by its DMA (actors/README.md, audit row 3):
// the scheduler sends the DMA a DmaData right before the command's Completion, at the same
// instant; timing mode sends none.
TEST(MessageTrace, DataModeDmaValuesAreMovedByTheDma) {
  const topology::ChipIndex index(Small());
  for (bool data : {true, false}) {
    const std::string name = data ? "ring_dma_data" : "ring_dma_timing";
    SCOPED_TRACE(name);
    const Traced t = RunTraced(absl::StrCat(kRing, data ? " data: true" : ""), name, false);
    ASSERT_TRUE(t.result.runtime_status.ok()) << t.result.runtime_status;
    std::map<std::pair<uint32_t, uint64_t>, size_t> by_source;  // (src, seq) -> envelope
    for (size_t i = 0; i < t.envelopes.size(); ++i) {
      by_source[{t.envelopes[i].src_unit(), t.envelopes[i].src_seq()}] = i;
    }
    size_t moved = 0;
    for (const pb::Envelope& e : t.envelopes) {
      if (!e.has_dma_data()) continue;
      ++moved;
      ASSERT_EQ(index.KindOf(topology::UnitId(e.src_unit())), topology::UnitKind::kPeScheduler);
      ASSERT_EQ(index.KindOf(topology::UnitId(e.dst_unit())), topology::UnitKind::kDma);
      auto next = by_source.find({e.src_unit(), e.src_seq() + 1});
      ASSERT_NE(next, by_source.end());
      const pb::Envelope& done = t.envelopes[next->second];
      ASSERT_TRUE(done.has_completion()) << done.ShortDebugString();
      EXPECT_EQ(done.completion().cmd_id(), e.dma_data().cmd().cmd_id());
      EXPECT_EQ(done.time_ps(), e.time_ps());
    }
    if (data) {
      EXPECT_GT(moved, 10u);
    } else {
      EXPECT_EQ(moved, 0u);
    }
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
