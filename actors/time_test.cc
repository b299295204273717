#include "actors/time.h"

#include <sstream>
#include <type_traits>

#include "gtest/gtest.h"

namespace ahbm::sim {
namespace {

// No implicit conversion in either direction, and no meaningless mixes.
static_assert(!std::is_convertible_v<uint64_t, SimTime>);
static_assert(!std::is_convertible_v<SimTime, uint64_t>);
static_assert(!std::is_convertible_v<uint64_t, Cycles>);
static_assert(!std::is_convertible_v<Cycles, uint64_t>);
static_assert(!std::is_convertible_v<Cycles, SimTime>);
static_assert(!std::is_convertible_v<Bytes, Addr>);
template <class A, class B>
concept Addable = requires(A a, B b) { a + b; };
template <class A, class B>
concept Multipliable = requires(A a, B b) { a * b; };
static_assert(Addable<SimTime, SimTime>);
static_assert(!Addable<SimTime, Cycles>);
static_assert(!Addable<SimTime, uint64_t>);
static_assert(!Addable<Cycles, Bytes>);
static_assert(Addable<Addr, Bytes>);
static_assert(!Addable<Addr, Addr>);
static_assert(!Addable<Bytes, Addr>);
static_assert(!Multipliable<SimTime, SimTime>);
static_assert(Multipliable<Cycles, uint64_t>);
static_assert(Multipliable<uint64_t, Bytes>);

// Usable at compile time.
static_assert(SimTime(3) + SimTime(4) == SimTime(7));
static_assert(Cycles(5) * 3 == Cycles(15));

TEST(SimTimeTest, Arithmetic) {
  SimTime t(1000);
  EXPECT_EQ(t.value(), 1000u);
  EXPECT_EQ(SimTime().value(), 0u);
  EXPECT_EQ(t + SimTime(500), SimTime(1500));
  EXPECT_EQ(t - SimTime(1), SimTime(999));
  EXPECT_EQ(t * 3, SimTime(3000));
  EXPECT_EQ(2 * t, SimTime(2000));
  t += SimTime(24);
  EXPECT_EQ(t, SimTime(1024));
  t -= SimTime(1024);
  EXPECT_EQ(t, SimTime(0));
  EXPECT_LT(SimTime(1), SimTime(2));
  EXPECT_GE(SimTime::Max(), SimTime(UINT64_MAX));
}

TEST(CyclesBytesAddrTest, Arithmetic) {
  EXPECT_EQ(Cycles(3) + Cycles(4), Cycles(7));
  EXPECT_EQ(Cycles(7) - Cycles(4), Cycles(3));
  EXPECT_EQ(Cycles(16) * 4, Cycles(64));
  EXPECT_EQ(Bytes(256) + Bytes(256), Bytes(512));
  EXPECT_EQ(Bytes(512) - Bytes(256), Bytes(256));
  EXPECT_EQ(Bytes(32) * 8, Bytes(256));
  EXPECT_EQ(Addr(0x1000) + Bytes(0x100), Addr(0x1100));
  EXPECT_EQ(Addr(0x1100) - Bytes(0x100), Addr(0x1000));
  EXPECT_EQ(Addr(0x1100) - Addr(0x1000), Bytes(0x100));
  EXPECT_LT(Addr(1), Addr(2));
  EXPECT_GT(Bytes(2), Bytes(1));
}

TEST(StrongTypesTest, Printing) {
  std::ostringstream os;
  os << SimTime(1500) << " " << Cycles(7) << " " << Bytes(256) << " " << Addr(4096) << " " << 10;
  EXPECT_EQ(os.str(), "1500ps 7cyc 256B 0x1000 10");
}

TEST(StrongTypesDeathTest, SubtractionBelowZeroIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(SimTime(1) - SimTime(2), "CHECK failed");
  EXPECT_DEATH(Cycles(1) - Cycles(2), "CHECK failed");
  EXPECT_DEATH(Bytes(1) - Bytes(2), "CHECK failed");
  EXPECT_DEATH(Addr(1) - Bytes(2), "CHECK failed");
  EXPECT_DEATH(Addr(1) - Addr(2), "CHECK failed");
}

TEST(ClockDomainTest, FromMHz) {
  EXPECT_EQ(ClockDomain::FromMHz(1000)->period(), SimTime(1000));
  EXPECT_EQ(ClockDomain::FromMHz(800)->period(), SimTime(1250));
  EXPECT_EQ(ClockDomain::FromMHz(1'000'000)->period(), SimTime(1));
  EXPECT_EQ(ClockDomain::FromMHz(1).value().period(), SimTime(1'000'000));
}

TEST(ClockDomainTest, RejectsFrequenciesWithoutWholePicosecondPeriod) {
  for (uint64_t mhz : {0, 3, 1500, 2'000'000}) {
    absl::StatusOr<ClockDomain> clock = ClockDomain::FromMHz(mhz);
    EXPECT_EQ(clock.status().code(), absl::StatusCode::kInvalidArgument) << mhz;
  }
  EXPECT_EQ(ClockDomain::FromPeriod(SimTime(0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClockDomain::FromPeriod(SimTime(750))->period(), SimTime(750));
}

struct ClockCase {
  uint64_t period_ps;
  uint64_t t_ps;
  uint64_t cycles_ceil;
  uint64_t next_edge_ps;
};

class ClockDomainCaseTest : public testing::TestWithParam<ClockCase> {};

TEST_P(ClockDomainCaseTest, CeilAndNextEdge) {
  const ClockCase& c = GetParam();
  ClockDomain clock = ClockDomain::FromPeriod(SimTime(c.period_ps)).value();
  EXPECT_EQ(clock.ToCyclesCeil(SimTime(c.t_ps)), Cycles(c.cycles_ceil));
  EXPECT_EQ(clock.NextEdge(SimTime(c.t_ps)), SimTime(c.next_edge_ps));
  EXPECT_EQ(clock.ToTime(Cycles(c.cycles_ceil)), SimTime(c.next_edge_ps));
  EXPECT_GE(clock.ToTime(clock.ToCyclesCeil(SimTime(c.t_ps))), SimTime(c.t_ps));
}

INSTANTIATE_TEST_SUITE_P(Edges, ClockDomainCaseTest,
                         testing::Values(ClockCase{1000, 0, 0, 0},        //
                                         ClockCase{1000, 1, 1, 1000},     //
                                         ClockCase{1000, 999, 1, 1000},   //
                                         ClockCase{1000, 1000, 1, 1000},  //
                                         ClockCase{1000, 1001, 2, 2000},  //
                                         ClockCase{1250, 2500, 2, 2500},  //
                                         ClockCase{1250, 2501, 3, 3750},  //
                                         ClockCase{1, 12345, 12345, 12345}));

TEST(ClockDomainTest, ToTime) {
  ClockDomain ghz = ClockDomain::FromMHz(1000).value();
  EXPECT_EQ(ghz.ToTime(Cycles(100)), SimTime(100'000));
  ClockDomain slow = ClockDomain::FromMHz(800).value();
  EXPECT_EQ(slow.ToTime(Cycles(3)), SimTime(3750));
  EXPECT_EQ(slow.ToTime(Cycles(0)), SimTime(0));
}

}  // namespace
}  // namespace ahbm::sim
