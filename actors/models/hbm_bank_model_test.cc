// The bank model against hand-derived timelines (Ramulator 2 HBM3_6400Mbps cycles: tRCD 31,
// CL 20, burst 2, tRP 26, tRAS 45, tRC 72, tRTP 9, tCCD_S 2 / tCCD_L 4, tRRD_S 4, tRFC 560,
// tRFCpb 320, tRREFD 8), and the calibration table (bench/README.md) within ±4 points.
#include "actors/models/hbm_bank_model.h"

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "actors/models/hbm_patterns.h"
#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

using Request = HbmBankModel::Request;

HbmBankAddress At(uint32_t group, uint32_t bank, uint32_t row, uint32_t column = 0) {
  return {0, group, bank, row, column};
}

// Runs `requests` (all queued before the first cycle) to the end; their done cycles by id.
std::vector<uint64_t> DoneCycles(const HbmBankTiming& t, const std::vector<Request>& requests) {
  HbmBankModel model(t);
  for (const Request& r : requests) model.Add(r);
  while (!model.Empty()) model.Run(model.now());
  std::vector<uint64_t> done(requests.size(), 0);
  for (const Request& r : model.TakeServed()) done[r.id] = r.done;
  return done;
}

TEST(HbmBankModel, ARowMissInAnIdleBank) {
  // ACT at 0, RD at tRCD = 31, the last byte at 31 + CL 20 + burst 2 = 53.
  EXPECT_EQ(DoneCycles({}, {{0, At(0, 0, 5)}}), std::vector<uint64_t>{53});
}

TEST(HbmBankModel, ARowHitFollowsAtTccdLInOneBankGroup) {
  // Both in row 5 of one bank: RD 31 and 31 + tCCD_L 4 = 35; done 53 and 57.
  EXPECT_EQ(DoneCycles({}, {{0, At(0, 0, 5, 0)}, {1, At(0, 0, 5, 1)}}),
            (std::vector<uint64_t>{53, 57}));
}

TEST(HbmBankModel, TccdSAcrossBankGroupsTccdLWithinOne) {
  // ACT bank group 0 at 0, bank group 1 at tRRD_S = 4; RDs: g0 31, g1 35, then the row hits
  // alternate groups every tCCD_S = 2 cycles (37, 39, 41) — a second read in the same group
  // waits tCCD_L = 4 after that group's last (g0: 31 -> 37 is already >= 35).
  const std::vector<uint64_t> done =
      DoneCycles({}, {{0, At(0, 0, 1)}, {1, At(1, 0, 1)}, {2, At(0, 0, 1, 1)},
                      {3, At(1, 0, 1, 1)}, {4, At(0, 0, 1, 2)}});
  EXPECT_EQ(done, (std::vector<uint64_t>{53, 57, 59, 61, 63}));
  // Three reads of one bank group: 31, 35, 39 (tCCD_L each).
  EXPECT_EQ(DoneCycles({}, {{0, At(2, 1, 3)}, {1, At(2, 1, 3, 1)}, {2, At(2, 1, 3, 2)}}),
            (std::vector<uint64_t>{53, 57, 61}));
}

TEST(HbmBankModel, ARowConflict) {
  // Row 1 then row 2 of one bank: ACT 0, RD 31; PRE at max(ACT + tRAS 45, RD + tRTP 40) = 45;
  // ACT at max(PRE + tRP 26, ACT + tRC 72) = 72; RD 103; done 125.
  EXPECT_EQ(DoneCycles({}, {{0, At(0, 0, 1)}, {1, At(0, 0, 2)}}),
            (std::vector<uint64_t>{53, 125}));
}

TEST(HbmBankModel, FrFcfsServesAYoungerRowHitBeforeAnOlderConflict) {
  // Queue: row 1 (opens it), row 2 (conflict), row 1 again (hit). FR-FCFS reads the hit at
  // 35 before it closes row 1; FCFS keeps the order (hit after the conflict: 103 + 4).
  const std::vector<Request> q = {{0, At(0, 0, 1)}, {1, At(0, 0, 2)}, {2, At(0, 0, 1, 1)}};
  HbmBankTiming fr;
  const std::vector<uint64_t> a = DoneCycles(fr, q);
  EXPECT_EQ(a[2], 57u);
  // The conflict: PRE at max(45, 35 + 9) = 45, ACT 72, RD 103.
  EXPECT_EQ(a[1], 125u);
  HbmBankTiming fcfs;
  fcfs.scheduler = HbmBankTiming::Scheduler::kFcfs;
  const std::vector<uint64_t> b = DoneCycles(fcfs, q);
  EXPECT_EQ(b[1], 125u);
  // Row 1 again after row 2: PRE at max(72 + 45, 103 + 9) = 117, ACT at max(117 + 26, 72 + 72)
  // = 144, RD 175, done 197.
  EXPECT_EQ(b[2], 197u);
}

TEST(HbmBankModel, ARequestThatMeetsAnAllBankRefresh) {
  HbmBankTiming t;
  t.refresh = HbmBankTiming::Refresh::kAllBank;
  t.t_refi = 1000;
  // A read at 0 leaves row 1 open (done 53). Arriving at the refresh's due cycle 1000, the next
  // waits: PREab at 1000, REFab at 1000 + tRP 26 = 1026, which holds every bank for tRFC 560;
  // ACT 1586, RD 1617, done 1639.
  const std::vector<uint64_t> done =
      DoneCycles(t, {{0, At(0, 0, 1), false, 0}, {1, At(3, 2, 9), false, 1000}});
  EXPECT_EQ(done[0], 53u);
  EXPECT_EQ(done[1], 1639u);
}

TEST(HbmBankModel, RefreshesGoOnWhileTheChannelIsIdle) {
  HbmBankTiming t;
  t.refresh = HbmBankTiming::Refresh::kAllBank;
  t.t_refi = 1000;
  // Idle from 53 to 2500: PREab at 1000 and REFab at 1026, then REFab at 2000, which holds
  // every bank until 2560. The read arriving at 2500: ACT 2560, RD 2591, done 2613.
  HbmBankModel model(t);
  model.Add({0, At(0, 0, 1), false, 0});
  model.RunToEmpty();
  model.Add({1, At(0, 0, 1), false, 2500});
  model.RunToEmpty();
  const std::vector<Request> served = model.TakeServed();
  ASSERT_EQ(served.size(), 2u);
  EXPECT_EQ(served[1].done, 2613u);
  EXPECT_EQ(model.commands("REF"), 2u);
  EXPECT_EQ(model.commands("ACT"), 2u);  // the refresh closed row 1
}

TEST(HbmBankModel, APerBankRefreshHoldsOnlyItsBankLong) {
  HbmBankTiming t;
  t.refresh = HbmBankTiming::Refresh::kPerBank;
  t.t_refi_pb = 100;
  // At 100 bank 0 (stack 0, group 0, bank 0) is refreshed: its next ACT waits tRFCpb 320 ->
  // 420, RD 451, done 473. Another bank waits only tRREFD 8: ACT 108, RD 139, done 161.
  const std::vector<uint64_t> done =
      DoneCycles(t, {{0, At(0, 0, 1), false, 100}, {1, At(1, 0, 1), false, 100}});
  EXPECT_EQ(done[0], 473u);
  EXPECT_EQ(done[1], 161u);
}

// The calibration table (Ramulator 2, HBM3 6400 Mbps, FR-FCFS, 32-entry read buffer): the fraction
// of one pseudo-channel's peak for long read streams, per refresh mode, within ±4 points.
TEST(HbmBankModel, ReproducesTheRamulatorTable) {
  struct Row {
    std::string pattern;
    double off, all_bank, per_bank;
  };
  const Row rows[] = {{"seq_bank_group", 99.6, 89.6, 82.0},
                      {"seq_row", 64.0, 61.9, 54.7},
                      {"kv_banks", 99.8, 89.8, 84.3},
                      {"kv_same_bank", 73.6, 66.4, 52.5},
                      {"streams8", 99.6, 89.6, 90.2}};
  for (const Row& row : rows) {
    for (const auto& [mode, want] : {std::pair{HbmBankTiming::Refresh::kNone, row.off},
                                     std::pair{HbmBankTiming::Refresh::kAllBank, row.all_bank},
                                     std::pair{HbmBankTiming::Refresh::kPerBank, row.per_bank}}) {
      HbmBankTiming t;
      t.refresh = mode;
      absl::StatusOr<HbmPatternResult> r = RunHbmPattern(t, row.pattern, 60000);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_NEAR(100 * r->fraction_of_peak, want, 4.0)
          << row.pattern << " refresh " << static_cast<int>(mode);
    }
  }
}

// Every address map is a bijection, and repeats RowShiftBursts later a whole number of rows on;
// the hashed map puts bursts one row apart (same offset in the row sweep) in other bank groups.
TEST(HbmAddressMap, MapsAreBijectionsThatRepeatRowsOn) {
  const HbmBankTiming t;
  const uint64_t row_sweep = uint64_t{t.columns} * t.banks();  // 1024 bursts
  for (pb::HbmAddressMap map : {pb::BANK_GROUP_FIRST, pb::COLUMN_FIRST, pb::BANK_GROUP_FIRST_HASHED}) {
    SCOPED_TRACE(pb::HbmAddressMap_Name(map));
    const uint64_t shift = RowShiftBursts(map, t);
    std::set<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>> seen;
    for (uint64_t b = 0; b < 2 * shift; ++b) {
      const HbmBankAddress a = MapBurst(b, map, t);
      ASSERT_EQ(a.row, b / row_sweep);
      ASSERT_TRUE(seen.insert({a.sid, a.bank_group, a.bank, a.row, a.column}).second) << b;
      const HbmBankAddress later = MapBurst(b + 3 * shift, map, t);
      ASSERT_EQ(later.row, a.row + 3 * shift / row_sweep);
      ASSERT_EQ(std::tie(later.sid, later.bank_group, later.bank, later.column),
                std::tie(a.sid, a.bank_group, a.bank, a.column));
    }
  }
  EXPECT_EQ(RowShiftBursts(pb::BANK_GROUP_FIRST, t), row_sweep);
  EXPECT_EQ(RowShiftBursts(pb::BANK_GROUP_FIRST_HASHED, t), row_sweep * 16);
  // K at burst 0 and V one row sweep later: the same bank under BANK_GROUP_FIRST, not hashed.
  const HbmBankAddress k = MapBurst(0, pb::BANK_GROUP_FIRST_HASHED, t);
  const HbmBankAddress v = MapBurst(row_sweep, pb::BANK_GROUP_FIRST_HASHED, t);
  EXPECT_EQ(MapBurst(0, pb::BANK_GROUP_FIRST, t).bank_group, MapBurst(row_sweep, pb::BANK_GROUP_FIRST, t).bank_group);
  EXPECT_NE(k.bank_group, v.bank_group);
}

TEST(HbmPatterns, AnUnknownPatternIsOneLine) {
  EXPECT_EQ(RunHbmPattern({}, "zigzag", 10).status().message(),
            "pattern: unknown 'zigzag' (want seq_bank_group, seq_row, kv_banks, kv_same_bank, "
            "streams8)");
}

}  // namespace
}  // namespace ahbm::sim
