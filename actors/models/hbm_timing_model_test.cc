// The HBM timing-model registry: FIFO and BANK are built from a topology's channel, BANK
// channels of one configuration share a call memo, and a registered model is what a topology
// naming it gets.
#include "actors/models/hbm_timing_model.h"

#include <memory>

#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

pb::HbmChannel Fifo() {
  pb::HbmChannel c;
  c.set_clock_mhz(1000);
  c.set_bytes_per_cycle(32);
  c.set_first_byte_latency_cycles(100);
  c.set_interleave_bytes(256);
  return c;
}

pb::HbmChannel Bank() {
  pb::HbmChannel c = Fifo();
  c.set_clock_mhz(1600);
  c.set_bytes_per_cycle(16);
  c.set_first_byte_latency_cycles(160);
  c.set_model(pb::BANK);
  pb::HbmBankConfig& b = *c.mutable_bank();
  b.set_stack_ids(2);
  b.set_bank_groups(4);
  b.set_banks_per_group(4);
  b.set_row_bytes(1024);
  b.set_burst_bytes(32);
  b.set_burst_cycles(2);
  b.set_t_cl_cycles(20);
  b.set_t_cwl_cycles(10);
  b.set_t_rcd_rd_cycles(31);
  b.set_t_rcd_wr_cycles(15);
  b.set_t_rp_cycles(26);
  b.set_t_ras_cycles(45);
  b.set_t_rc_cycles(72);
  b.set_t_wr_cycles(33);
  b.set_t_rtp_cycles(9);
  b.set_t_ccd_s_cycles(2);
  b.set_t_ccd_l_cycles(4);
  b.set_t_ccd_r_cycles(3);
  b.set_t_rrd_s_cycles(4);
  b.set_t_rrd_l_cycles(5);
  b.set_t_faw_cycles(24);
  b.set_t_wtr_s_cycles(7);
  b.set_t_rtw_cycles(20);
  b.set_refresh(pb::NO_REFRESH);
  b.set_scheduler(pb::FR_FCFS);
  b.set_queue_depth(32);
  b.set_address_map(pb::BANK_GROUP_FIRST);
  return c;
}

TEST(HbmTimingModel, FifoIsTheChannelModel) {
  HbmModelContext context;
  EXPECT_FALSE(HbmModelNeedsAddresses(Fifo()));
  std::unique_ptr<HbmTimingModel> model = MakeHbmTimingModel(Fifo(), context);
  HbmChannelModel reference(Fifo());
  for (uint64_t at : {0, 50'000, 60'000}) {
    const HbmService s = model->Serve({SimTime(at), Bytes(4096), HbmOp::kRead, {}, {}});
    const HbmGrant want = reference.Access(SimTime(at), Bytes(4096), HbmOp::kRead);
    EXPECT_EQ(s.grant, want);
    EXPECT_EQ(s.busy, want.free_at - want.start);  // 128 cycles of 1 ns
  }
}

// One 256 B chunk into an idle BANK channel: the first column command at tRCD 31 cycles, the
// last byte 176 cycles in (hbm_channel_server_test derives it); 8 bursts x 2 cycles busy.
TEST(HbmTimingModel, BankTimesChunksAndSharesOneMemoPerConfig) {
  HbmModelContext context;
  EXPECT_TRUE(HbmModelNeedsAddresses(Bank()));
  std::unique_ptr<HbmTimingModel> model = MakeHbmTimingModel(Bank(), context);
  const uint64_t addrs[] = {0};
  const HbmService s = model->Serve({SimTime(0), Bytes(256), HbmOp::kRead, addrs, Bytes(256)});
  EXPECT_EQ(s.grant.start, SimTime(31 * 625));
  EXPECT_EQ(s.grant.done, SimTime(176 * 625));
  EXPECT_EQ(s.busy, SimTime(16 * 625));
  EXPECT_EQ(&context.MemoFor(Bank()), &context.MemoFor(Bank()));
  pb::HbmChannel other = Bank();
  other.mutable_bank()->set_queue_depth(8);
  EXPECT_NE(&context.MemoFor(Bank()), &context.MemoFor(other));
  EXPECT_EQ(context.memo_stats().calls, 1u);
}

class FixedTiming final : public HbmTimingModel {
 public:
  HbmService Serve(const HbmAccess& a) override {
    return {{a.now, a.now + SimTime(1), a.now + SimTime(2)}, SimTime(1)};
  }
};

TEST(HbmTimingModel, ARegisteredModelIsWhatItsTopologiesGet) {
  const auto kMine = static_cast<pb::HbmModel>(7);  // an enum value no built-in model uses
  RegisterHbmTimingModel(
      kMine, {[](const pb::HbmChannel&, HbmModelContext&) { return std::make_unique<FixedTiming>(); },
              /*needs_addresses=*/false});
  pb::HbmChannel config = Fifo();
  config.set_model(kMine);
  HbmModelContext context;
  const HbmService s = MakeHbmTimingModel(config, context)->Serve({SimTime(10), Bytes(1), HbmOp::kRead, {}, {}});
  EXPECT_EQ(s.grant.done, SimTime(12));
  EXPECT_FALSE(HbmModelNeedsAddresses(config));
}

}  // namespace
}  // namespace ahbm::sim
