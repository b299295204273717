#include "actors/units/dma_actor.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/engine.h"
#include "actors/msg.h"
#include "actors/time.h"
#include "actors/units/hbm_channel_actor.h"
#include "caf/event_based_actor.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kSmall[] = "topology/small.textproto";

pb::Chip Load() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(kSmall);
  EXPECT_TRUE(chip.ok()) << chip.status();
  return chip.ok() ? *chip : pb::Chip();
}

// What the requester got: a Completion (message empty) or a DmaError (unit/start/end 0).
struct Reply {
  uint64_t time_ps;
  UnitId src;
  uint64_t cmd_id;
  uint32_t unit;
  uint64_t start_ps;
  uint64_t end_ps;
  std::string error;
  friend bool operator==(const Reply&, const Reply&) = default;
};

void PrintTo(const Reply& r, std::ostream* os) {
  *os << "{t=" << r.time_ps << " src=" << r.src << " cmd=" << r.cmd_id << " unit=" << r.unit
      << " start=" << r.start_ps << " end=" << r.end_ps << " error=\"" << r.error << "\"}";
}

caf::behavior Requester(caf::event_based_actor*, Engine* engine, std::vector<Reply>* log) {
  return {
      [=](const Msg<pb::Completion>& c) {
        log->push_back({engine->now().value(), engine->current_src(), c->cmd_id(), c->unit(),
                        c->start_ps(), c->end_ps(), ""});
      },
      [=](const Msg<pb::DmaBatchDone>& b) {
        for (const pb::Completion& c : b->done()) {
          log->push_back({engine->now().value(), engine->current_src(), c.cmd_id(), c.unit(),
                          c.start_ps(), c.end_ps(), ""});
        }
      },
      [=](const Msg<pb::HbmResponse>& r) {
        for (int i = 0; i < r->part_cmd_size(); ++i) {
          log->push_back({engine->now().value(), engine->current_src(), r->part_cmd(i),
                          r->channel(), r->start_ps(i), r->done_ps(i), ""});
        }
      },
      [=](const Msg<pb::DmaError>& e) {
        log->push_back(
            {engine->now().value(), engine->current_src(), e->cmd_id(), 0, 0, 0, e->message()});
      },
  };
}

// CUBE 0 of the small chip: its 32 channels, one DMA actor per PE, and a requester registered
// as PE 0's scheduler unit; the test body sends from that id, so replies go to it. Build() once
// per fixture (the channel table lives in it).
class DmaActorTest : public ::testing::Test {
 protected:
  DmaActorTest() : chip_(Load()), index_(chip_) {
    const pb::Cube& cube = chip_.sip().cube();
    channel_period_ps_ = 1'000'000 / cube.hbm_channel().clock_mhz();
    pe_period_ps_ = 1'000'000 / cube.pe().clock_mhz();
    bytes_per_cycle_ = cube.hbm_channel().bytes_per_cycle();
    latency_cycles_ = cube.hbm_channel().first_byte_latency_cycles();
    channels_per_pe_ = cube.pe().hbm_channels();
    remote_extra_cycles_ = cube.pe().dma().remote_channel_extra_cycles();
    interleave_ = cube.hbm_channel().interleave_bytes();
    requester_ = index_.PeUnit(topology::UnitKind::kPeScheduler, index_.PeOf(0)).value();
  }

  // Builds the units of CUBE 0 in `engine`; replies are logged into `log`.
  void Build(Engine& engine, std::vector<Reply>* log) {
    models_ = std::make_unique<HbmModelContext>();
    const topology::CubeId cube0{0, 0};
    for (uint32_t c = 0; c < index_.channels_per_cube(); ++c) {
      const UnitId id = index_.HbmChannelUnit(cube0, c).value();
      StartHbmChannelActor(engine, *models_, id, index_.Name(topology::UnitId(id)),
                           chip_.sip().cube().hbm_channel());
    }
    for (uint32_t p = 0; p < index_.pes_per_cube(); ++p) {
      const uint32_t pe = index_.GlobalPe(topology::PeId{0, 0, p});
      StartDmaActor(engine, Dma(pe), index_.Name(topology::UnitId(Dma(pe))), chip_, pe);
    }
    engine.Register(requester_, "requester", engine.system().spawn(Requester, &engine, log));
  }

  UnitId Dma(uint32_t pe) const {
    return index_.PeUnit(topology::UnitKind::kDma, index_.PeOf(pe)).value();
  }

  // Sends `cmd` from the requester to the DMA of `pe` at absolute time `at` (>= now()).
  void Issue(Engine& engine, SimTime at, uint32_t pe, const pb::DmaCmd& cmd) {
    engine.Send(requester_, at - engine.now(), Dma(pe),
                std::shared_ptr<const pb::DmaCmd>(std::make_shared<pb::DmaCmd>(cmd)));
  }

  // HBM (owner, addr, shape, strides) -> TCM of `issuer`, bf16.
  static pb::DmaCmd Read(uint64_t cmd_id, uint32_t issuer, uint32_t owner, uint64_t addr,
                         std::vector<uint64_t> shape, std::vector<uint64_t> strides = {}) {
    pb::DmaCmd cmd;
    cmd.set_cmd_id(cmd_id);
    pb::TensorRef* src = cmd.mutable_src();
    src->set_space(pb::HBM);
    src->set_pe(owner);
    src->set_addr(addr);
    src->set_dtype(pb::BF16);
    uint64_t elements = 1;
    for (uint64_t d : shape) {
      src->add_shape(d);
      elements *= d;
    }
    for (uint64_t s : strides) src->add_strides(s);
    pb::TensorRef* dst = cmd.mutable_dst();
    dst->set_space(pb::TCM);
    dst->set_pe(issuer);
    dst->set_addr(0);
    dst->set_dtype(pb::BF16);
    dst->add_shape(elements);
    return cmd;
  }

  uint64_t Ch(uint64_t cycles) const { return cycles * channel_period_ps_; }
  uint64_t Pe(uint64_t cycles) const { return cycles * pe_period_ps_; }

  static constexpr uint64_t kBytes = 64 * 1024;
  static constexpr uint64_t kBf16Elements = kBytes / 2;

  pb::Chip chip_;
  topology::ChipIndex index_;
  std::unique_ptr<HbmModelContext> models_;  // the channels' call memos (Build's)
  uint64_t channel_period_ps_ = 0;
  uint64_t pe_period_ps_ = 0;
  uint64_t bytes_per_cycle_ = 0;
  uint64_t latency_cycles_ = 0;
  uint32_t channels_per_pe_ = 0;
  uint64_t remote_extra_cycles_ = 0;
  uint64_t interleave_ = 0;
  UnitId requester_ = 0;
};

TEST_F(DmaActorTest, ContiguousReadStreamsOverAllOfThePesChannels) {
  std::vector<Reply> log;
  Engine engine;
  Build(engine, &log);
  const uint64_t issue = Ch(10);
  Issue(engine, SimTime(issue), 0, Read(1, 0, 0, 0, {kBf16Elements}));
  engine.Run();
  // 8x one channel: each of the PE's channels carries kBytes / channels_per_pe.
  const uint64_t occupancy = kBytes / (channels_per_pe_ * bytes_per_cycle_);
  EXPECT_THAT(log, ElementsAre(Reply{issue, Dma(0), 1, Dma(0), issue,
                                     issue + Ch(latency_cycles_ + occupancy), ""}));
  // The DmaCmd, a request to and an answer from each of the 8 channels, the Completion: all at
  // issue (the grants are final at arrival).
  EXPECT_EQ(engine.events_processed(), 2u + 2 * channels_per_pe_);
  EXPECT_EQ(engine.now(), SimTime(issue));
}

TEST_F(DmaActorTest, StridedReadOnOneChannelIsEightTimesSlower) {
  std::vector<Reply> log;
  Engine engine;
  Build(engine, &log);
  const uint64_t issue = Ch(10);
  // Rows of one interleave block every channels_per_pe blocks: every row is on channel 0.
  const uint64_t row_elements = interleave_ / 2;
  const uint64_t stride = channels_per_pe_ * interleave_ / 2;
  Issue(engine, SimTime(issue), 0,
        Read(2, 0, 0, 0, {kBytes / interleave_, row_elements}, {stride, 1}));
  Issue(engine, SimTime(issue + Ch(100'000)), 0, Read(3, 0, 0, 0, {kBf16Elements}));
  engine.Run();
  const uint64_t one_channel = kBytes / bytes_per_cycle_;
  const uint64_t all_channels = kBytes / (channels_per_pe_ * bytes_per_cycle_);
  ASSERT_EQ(one_channel, 8 * all_channels);
  const uint64_t later = issue + Ch(100'000);
  EXPECT_THAT(log, ElementsAre(Reply{issue, Dma(0), 2, Dma(0), issue,
                                     issue + Ch(latency_cycles_ + one_channel), ""},
                               Reply{later, Dma(0), 3, Dma(0), later,
                                     later + Ch(latency_cycles_ + all_channels), ""}));
  // Each command is its DmaCmd, its Completion and a request and an answer per channel it
  // touches (one for the strided rows, however many there are; 8 for the dense one).
  EXPECT_EQ(engine.events_processed(), (2u + 2) + (2u + 2 * channels_per_pe_));
}

TEST_F(DmaActorTest, TwoPesOnOnePesChannelsSerialiseAndTheRemoteOnePaysTheHop) {
  std::vector<Reply> log;
  Engine engine;
  Build(engine, &log);
  const uint64_t issue = Ch(10);
  // PE 0 reads its own region, PE 1 reads other data of PE 0's region; same instant, PE 0's
  // command sent first, so it is first on every channel.
  Issue(engine, SimTime(issue), 0, Read(1, 0, 0, 0, {kBf16Elements}));
  Issue(engine, SimTime(issue), 1, Read(1, 1, 0, 1 << 20, {kBf16Elements}));
  engine.Run();
  const uint64_t occupancy = kBytes / (channels_per_pe_ * bytes_per_cycle_);
  const uint64_t first_end = issue + Ch(latency_cycles_ + occupancy);
  EXPECT_THAT(log,
              ElementsAre(Reply{issue, Dma(0), 1, Dma(0), issue, first_end, ""},
                          Reply{issue, Dma(1), 1, Dma(1), issue + Ch(occupancy),
                                first_end + Ch(occupancy) + Pe(remote_extra_cycles_), ""}));
}

TEST_F(DmaActorTest, SeveralCommandsInFlightOnOneDma) {
  std::vector<Reply> log;
  Engine engine;
  Build(engine, &log);
  const uint64_t issue = Ch(10);
  Issue(engine, SimTime(issue), 0, Read(7, 0, 0, 0, {kBf16Elements}));
  Issue(engine, SimTime(issue), 0, Read(5, 0, 0, kBytes, {kBf16Elements}));
  engine.Run();
  const uint64_t occupancy = kBytes / (channels_per_pe_ * bytes_per_cycle_);
  const uint64_t first_end = issue + Ch(latency_cycles_ + occupancy);
  EXPECT_THAT(log, ElementsAre(Reply{issue, Dma(0), 7, Dma(0), issue, first_end, ""},
                               Reply{issue, Dma(0), 5, Dma(0), issue + Ch(occupancy),
                                     first_end + Ch(occupancy), ""}));
}

TEST_F(DmaActorTest, TcmCopyUsesTheModelsCopyPathAndNoChannel) {
  std::vector<Reply> log;
  Engine engine;
  Build(engine, &log);
  const uint64_t issue = Pe(10);
  pb::DmaCmd copy = Read(4, 2, 2, 0, {kBf16Elements});
  copy.mutable_src()->set_space(pb::TCM);
  const uint32_t pe2 = index_.GlobalPe(topology::PeId{0, 0, 2});
  copy.mutable_src()->set_pe(pe2);
  copy.mutable_dst()->set_pe(pe2);
  Issue(engine, SimTime(issue), pe2, copy);
  engine.Run();
  const uint64_t cycles = kBytes / kTcmCopyBytesPerCycle;
  EXPECT_THAT(log, ElementsAre(Reply{issue, Dma(pe2), 4, Dma(pe2), issue, issue + Pe(cycles), ""}));
  EXPECT_EQ(engine.events_processed(), 2u);  // the DmaCmd and the Completion
}

TEST_F(DmaActorTest, InvalidCommandGetsAnErrorNamingThePeAndTheEngineGoesOn) {
  std::vector<Reply> log;
  Engine engine;
  Build(engine, &log);
  const uint32_t other_cube_pe = index_.GlobalPe(topology::PeId{0, 1, 0});
  Issue(engine, SimTime(Ch(10)), 0, Read(9, 0, other_cube_pe, 0, {kBf16Elements}));
  Issue(engine, SimTime(Ch(20)), 0, Read(10, 0, 0, 0, {kBf16Elements}));
  engine.Run();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].time_ps, Ch(10));
  EXPECT_EQ(log[0].src, Dma(0));
  EXPECT_EQ(log[0].cmd_id, 9u);
  EXPECT_THAT(log[0].error, AllOf(HasSubstr("DMA of pe 0 (sip0.cube0.pe0)"),
                                  HasSubstr("another CUBE"), HasSubstr("cmd 9")));
  EXPECT_EQ(log[1].cmd_id, 10u);
  EXPECT_EQ(log[1].error, "");
}

TEST_F(DmaActorTest, DuplicateCmdIdInFlightGetsAnError) {
  std::vector<Reply> log;
  Engine engine;
  Build(engine, &log);
  // The second command arrives before the first one's data has arrived; the third after it.
  const uint64_t issue = Ch(10);
  const uint64_t occupancy = kBytes / (channels_per_pe_ * bytes_per_cycle_);
  const uint64_t end = issue + Ch(latency_cycles_ + occupancy);
  Issue(engine, SimTime(issue), 0, Read(3, 0, 0, 0, {kBf16Elements}));
  Issue(engine, SimTime(end - 1), 0, Read(3, 0, 0, kBytes, {kBf16Elements}));
  Issue(engine, SimTime(end), 0, Read(3, 0, 0, kBytes, {kBf16Elements}));
  engine.Run();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0], (Reply{issue, Dma(0), 3, Dma(0), issue, end, ""}));
  EXPECT_EQ(log[1].cmd_id, 3u);
  EXPECT_EQ(log[1].time_ps, end - 1);
  EXPECT_THAT(log[1].error, AllOf(HasSubstr("pe 0"), HasSubstr("already in flight")));
  EXPECT_EQ(log[2].time_ps, end);
  EXPECT_EQ(log[2].error, "");
}

TEST_F(DmaActorTest, SameScenarioTwiceGivesIdenticalReplies) {
  const auto run = [this] {
    std::vector<Reply> log;
    Engine engine;
    Build(engine, &log);
    for (uint32_t p = 0; p < index_.pes_per_cube(); ++p) {
      const uint32_t pe = index_.GlobalPe(topology::PeId{0, 0, p});
      const uint32_t owner = index_.GlobalPe(topology::PeId{0, 0, (p + 1) % 4});
      Issue(engine, SimTime(Ch(10)), pe, Read(100 + p, pe, owner, 0, {kBf16Elements}));
      Issue(engine, SimTime(Ch(10)), pe,
            Read(200 + p, pe, pe, 0, {64, interleave_ / 2}, {3 * interleave_ / 2, 1}));
      Issue(engine, SimTime(Ch(50)), pe, Read(300 + p, pe, owner + 4, 0, {kBf16Elements}));
    }
    engine.Run();
    return log;
  };
  const std::vector<Reply> first = run();
  EXPECT_EQ(first.size(), 12u);
  EXPECT_EQ(run(), first);
}

// A DmaBatch is timed exactly like its commands sent one after the other at the same instant
// (every channel serves them in batch order), with one reply.
TEST_F(DmaActorTest, BatchTimesLikeSeparateCommandsWithFewerEvents) {
  // Three reads of PE 0: dense, a strided run pattern, and another dense block.
  const std::vector<pb::DmaCmd> cmds = {
      Read(1, 0, 0, 0, {kBf16Elements}),
      Read(2, 0, 0, 1 << 20, {64, 128}, {256, 1}),
      Read(3, 0, 0, 2 << 20, {kBf16Elements / 2})};
  std::vector<Reply> separate, batched;
  uint64_t separate_events = 0, batched_events = 0;
  {
    Engine engine;
    Build(engine, &separate);
    for (const pb::DmaCmd& cmd : cmds) Issue(engine, SimTime(Pe(5)), 0, cmd);
    engine.Run();
    separate_events = engine.events_processed();
  }
  {
    Engine engine;
    Build(engine, &batched);
    auto batch = std::make_shared<pb::DmaBatch>();
    batch->set_batch_id(42);
    for (const pb::DmaCmd& cmd : cmds) *batch->add_cmds() = cmd;
    engine.Send(requester_, SimTime(Pe(5)), Dma(0), std::shared_ptr<const pb::DmaBatch>(batch));
    engine.Run();
    batched_events = engine.events_processed();
  }
  ASSERT_EQ(separate.size(), 3u);
  ASSERT_EQ(batched.size(), 3u);
  const auto by_cmd = [](const Reply& a, const Reply& b) { return a.cmd_id < b.cmd_id; };
  std::sort(separate.begin(), separate.end(), by_cmd);  // replies come as commands finish
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(batched[i].cmd_id, separate[i].cmd_id);
    EXPECT_EQ(batched[i].start_ps, separate[i].start_ps) << i;
    EXPECT_EQ(batched[i].end_ps, separate[i].end_ps) << i;
  }
  // Separate: 3 commands, 3 completions and a request and an answer per channel share (8 for
  // each dense read, 4 for the strided one: its 256 B rows every 512 B skip every other
  // channel); batched: one command, one reply and a request and an answer per channel (8).
  EXPECT_EQ(separate_events, 6u + 2 * (8 + 4 + 8));
  EXPECT_EQ(batched_events, 2u + 2 * 8);
  EXPECT_LT(batched_events, separate_events);
}

// A channel serves whoever messages it in delivery order: a request sent to channel 0 at the
// DMA command's instant by the same requester (its next send, so delivered right after the
// command and before the DMA's own requests, which come from the DMA's larger unit id) is
// first on channel 0, and the DMA's share there waits behind it.
TEST_F(DmaActorTest, AnotherRequesterSharesAChannelsFifoWithTheDma) {
  std::vector<Reply> log;
  Engine engine;
  Build(engine, &log);
  const uint64_t issue = Ch(10);
  Issue(engine, SimTime(issue), 0, Read(1, 0, 0, 0, {kBf16Elements}));
  const UnitId channel0 = index_.HbmChannelUnit(topology::CubeId{0, 0}, 0).value();
  auto req = std::make_shared<pb::HbmRequest>();
  req->set_request_id(77);
  req->set_channel(channel0);
  req->add_part_cmd(5);
  req->add_part_bytes(bytes_per_cycle_ * 4);
  req->add_part_chunks(1);
  engine.Send(requester_, SimTime(issue), channel0,
              std::shared_ptr<const pb::HbmRequest>(std::move(req)));
  engine.Run();
  const uint64_t occupancy = kBytes / (channels_per_pe_ * bytes_per_cycle_);
  EXPECT_THAT(
      log,
      ElementsAre(
          Reply{issue, channel0, 5, channel0, issue, issue + Ch(4 + latency_cycles_), ""},
          Reply{issue, Dma(0), 1, Dma(0), issue, issue + Ch(4 + occupancy + latency_cycles_), ""}));
}

TEST(SpanUnionTest, CountsEachInstantOnce) {
  SpanUnion u;
  EXPECT_EQ(u.Add(10, 20), 10u);
  EXPECT_EQ(u.Add(15, 30), 10u);   // overlaps the first
  EXPECT_EQ(u.Add(40, 50), 10u);   // a gap before it
  EXPECT_EQ(u.Add(0, 60), 30u);    // covers all: [0,10) + [30,40) + [50,60) are new
  EXPECT_EQ(u.Add(30, 40), 0u);
  EXPECT_EQ(u.Add(60, 70), 10u);   // touches the end
  EXPECT_EQ(u.Add(5, 5), 0u);      // empty
  EXPECT_EQ(u.Add(80, 90), 10u);
  EXPECT_EQ(u.Add(72, 75), 3u);    // between two spans
  EXPECT_EQ(u.Add(75, 80), 5u);    // touches the one before and the one after
  EXPECT_EQ(u.Add(0, 90), 2u);     // [70, 72) was the last gap
  EXPECT_EQ(u.total(), 90u);
}

}  // namespace
}  // namespace ahbm::sim
