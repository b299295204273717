#include "topology/kv_placement.h"

#include <vector>

#include "gtest/gtest.h"

namespace ahbm::topology {
namespace {

struct PlacementCase {
  uint64_t s;
  uint32_t c;
  uint32_t p;
};

class KvPlacementTest : public testing::TestWithParam<PlacementCase> {};

// ADR rev2 §B hierarchical item 5: every global token maps to exactly one rank, each rank's
// positions are one contiguous block, and my_len sums to S — for every rotation.
TEST_P(KvPlacementTest, EveryTokenHasExactlyOneOwnerForEveryRotation) {
  const PlacementCase pc = GetParam();
  const uint32_t ranks = pc.c * pc.p;
  for (uint32_t start_cube = 0; start_cube < pc.c; ++start_cube) {
    for (uint32_t start_pe = 0; start_pe < pc.p; ++start_pe) {
      const absl::StatusOr<KvPlacement> kv =
          KvPlacement::Create(pc.c, pc.p, /*max_context=*/pc.s, start_cube, start_pe);
      ASSERT_TRUE(kv.ok()) << kv.status();
      const uint64_t block = (pc.s + ranks - 1) / ranks;
      ASSERT_EQ(kv->block(), block);

      // Physical (cube_in_group, pe) <-> rank is a bijection.
      std::vector<int> rank_hits(ranks, 0);
      for (uint32_t cube = 0; cube < pc.c; ++cube) {
        for (uint32_t pe = 0; pe < pc.p; ++pe) {
          const uint32_t rank = kv->Rank(cube, pe);
          ASSERT_LT(rank, ranks);
          ++rank_hits[rank];
          EXPECT_EQ(kv->CubeInGroupOfRank(rank), cube);
          EXPECT_EQ(kv->PeOfRank(rank), pe);
          EXPECT_EQ(rank, ((cube + pc.c - start_cube) % pc.c) * pc.p +
                              (pe + pc.p - start_pe) % pc.p);
        }
      }
      for (int hits : rank_hits) ASSERT_EQ(hits, 1);

      // Walk every token: owners are non-decreasing (so each rank's positions form one
      // contiguous block), slots count up from 0 inside a block, and positions round-trip.
      std::vector<uint64_t> owned(ranks, 0);
      uint32_t prev_rank = 0;
      for (uint64_t t = 0; t < pc.s; ++t) {
        const KvPlacement::Owner owner = kv->OwnerOf(t);
        ASSERT_LT(owner.rank, ranks);
        ASSERT_GE(owner.rank, prev_rank);
        ASSERT_EQ(owner.slot, owned[owner.rank]) << "token " << t;
        ASSERT_EQ(kv->GlobalPosition(owner.rank, owner.slot), t);
        ++owned[owner.rank];
        prev_rank = owner.rank;
      }
      uint64_t total = 0;
      for (uint32_t r = 0; r < ranks; ++r) {
        EXPECT_EQ(kv->MyLen(r, /*counter=*/pc.s), owned[r]) << "rank " << r;
        EXPECT_LE(owned[r], block);
        total += kv->MyLen(r, pc.s);
      }
      EXPECT_EQ(total, pc.s);
    }
  }
}

std::vector<PlacementCase> AllCases() {
  std::vector<PlacementCase> cases;
  for (uint64_t s : {1, 7, 64, 1000, 131072}) {
    for (uint32_t c : {1, 2, 4, 8}) {
      for (uint32_t p : {1, 8}) cases.push_back({s, c, p});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllShapes, KvPlacementTest, testing::ValuesIn(AllCases()),
                         [](const testing::TestParamInfo<PlacementCase>& info) {
                           return "S" + std::to_string(info.param.s) + "_C" +
                                  std::to_string(info.param.c) + "_P" +
                                  std::to_string(info.param.p);
                         });

TEST(KvPlacementExamples, AdrFormulas) {
  // C = 8, P = 8, S = 131072: B = 2048; rotation (3, 5).
  const absl::StatusOr<KvPlacement> kv =
      KvPlacement::Create(/*c=*/8, /*p=*/8, /*max_context=*/131072, /*start_cube=*/3,
                          /*start_pe=*/5);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->block(), 2048u);
  EXPECT_EQ(kv->Rank(/*cube_in_group=*/3, /*pe=*/5), 0u);
  EXPECT_EQ(kv->Rank(/*cube_in_group=*/2, /*pe=*/4), 63u);
  EXPECT_EQ(kv->OwnerOf(4097).rank, 2u);
  EXPECT_EQ(kv->OwnerOf(4097).slot, 1u);
  // A partly filled cache: counter = 5000 fills ranks 0, 1 and 904 tokens of rank 2.
  EXPECT_EQ(kv->MyLen(0, /*counter=*/5000), 2048u);
  EXPECT_EQ(kv->MyLen(2, /*counter=*/5000), 904u);
  EXPECT_EQ(kv->MyLen(3, /*counter=*/5000), 0u);
  // The ADR writes rotation mod C and mod P: start_cube = 11 is start_cube = 3.
  const absl::StatusOr<KvPlacement> wrapped =
      KvPlacement::Create(/*c=*/8, /*p=*/8, /*max_context=*/131072, /*start_cube=*/11,
                          /*start_pe=*/13);
  ASSERT_TRUE(wrapped.ok());
  EXPECT_EQ(wrapped->Rank(3, 5), 0u);
}

TEST(KvPlacementExamples, MaxContextLargerThanSLeavesTailRanksEmpty) {
  const absl::StatusOr<KvPlacement> kv = KvPlacement::Create(
      /*c=*/2, /*p=*/2, /*max_context=*/1000, /*start_cube=*/0, /*start_pe=*/0);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->block(), 250u);
  EXPECT_EQ(kv->MyLen(0, /*counter=*/300), 250u);
  EXPECT_EQ(kv->MyLen(1, /*counter=*/300), 50u);
  EXPECT_EQ(kv->MyLen(3, /*counter=*/300), 0u);
}

TEST(KvPlacementErrors, NameTheField) {
  EXPECT_EQ(KvPlacement::Create(0, 8, 10, 0, 0).status().message(), "c must be > 0 (got 0)");
  EXPECT_EQ(KvPlacement::Create(8, 0, 10, 0, 0).status().message(), "p must be > 0 (got 0)");
  EXPECT_EQ(KvPlacement::Create(8, 8, 0, 0, 0).status().message(),
            "max_context must be > 0 (got 0)");
}

}  // namespace
}  // namespace ahbm::topology
