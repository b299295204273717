#include "kernels/host/placement.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/memory/memory_store.h"
#include "proto/topology.pb.h"
#include "topology/groups.h"
#include "topology/ids.h"
#include "topology/kv_placement.h"
#include "topology/loader.h"

namespace ahbm::host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The small chip: 1 SIP, 2x4 CUBEs, 4 PEs per CUBE (32 PEs), 4 GiB of HBM per PE.
constexpr uint64_t kRegion = uint64_t{4} << 30;

pb::Chip SmallChip() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

// Seeded values spread over several binades, so bf16 rounding changes most of them.
NpyArray RandomArray(std::vector<uint64_t> shape, uint32_t seed) {
  NpyArray array;
  uint64_t count = 1;
  for (uint64_t d : shape) count *= d;
  array.shape = std::move(shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  for (uint64_t i = 0; i < count; ++i) array.data.push_back(dist(rng));
  return array;
}

std::vector<float> RoundedToBf16(const std::vector<float>& values) {
  std::vector<float> rounded;
  for (float v : values) rounded.push_back(kernels::RoundToBf16(v));
  return rounded;
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

class PlacementTest : public testing::Test {
 protected:
  PlacementTest() : chip_(SmallChip()), index_(chip_), allocator_(chip_), store_(chip_) {}

  pb::Chip chip_;
  topology::ChipIndex index_;
  HbmAllocator allocator_;
  kernels::MemoryStore store_;
};

TEST_F(PlacementTest, AllocatorBumpsPerPeAtTheAlignment) {
  EXPECT_EQ(allocator_.region_bytes(), kRegion);
  EXPECT_EQ(*allocator_.Allocate(/*pe=*/3, /*bytes=*/100), 0u);
  EXPECT_EQ(*allocator_.Allocate(/*pe=*/3, /*bytes=*/10), 256u);
  EXPECT_EQ(*allocator_.Allocate(/*pe=*/3, /*bytes=*/1, /*align=*/4096), 4096u);
  EXPECT_EQ(*allocator_.Allocate(/*pe=*/4, /*bytes=*/8), 0u);  // PEs are independent
  EXPECT_EQ(allocator_.used_bytes(3), 4097u);
  EXPECT_EQ(allocator_.used_bytes(4), 8u);
}

TEST_F(PlacementTest, AllocatorExhaustionNamesThePeAndTheSizes) {
  ASSERT_TRUE(allocator_.Allocate(/*pe=*/3, kRegion - 100).ok());
  const absl::StatusOr<uint64_t> addr = allocator_.Allocate(/*pe=*/3, /*bytes=*/1024);
  ASSERT_FALSE(addr.ok());
  EXPECT_EQ(addr.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Message(addr.status()),
            "pe 3 (sip0.cube0.pe3): HBM region exhausted: 1024 bytes at 256-byte alignment do "
            "not fit (4294967196 of 4294967296 bytes used, 100 free)");
  // Exactly the rest of the region still fits when the alignment allows it.
  EXPECT_EQ(*allocator_.Allocate(/*pe=*/3, /*bytes=*/100, /*align=*/4), kRegion - 100);
  EXPECT_FALSE(allocator_.Allocate(/*pe=*/3, /*bytes=*/1, /*align=*/1).ok());
  EXPECT_TRUE(allocator_.Allocate(/*pe=*/3, /*bytes=*/0, /*align=*/1).ok());
}

TEST_F(PlacementTest, AllocatorRejectsBadArguments) {
  EXPECT_EQ(Message(allocator_.Allocate(/*pe=*/32, /*bytes=*/1).status()),
            "pe: 32 is not a PE of this chip (32 PEs)");
  EXPECT_EQ(Message(allocator_.Allocate(/*pe=*/0, /*bytes=*/1, /*align=*/3).status()),
            "align: 3 is not a power of two");
  EXPECT_EQ(Message(allocator_.Allocate(/*pe=*/0, /*bytes=*/1, /*align=*/0).status()),
            "align: 0 is not a power of two");
}

TEST_F(PlacementTest, PlacementExhaustionNamesTheTensor) {
  const std::vector<uint32_t> pes = {5};
  // 2^31 fp32 elements = 8 GiB > the 4 GiB region.
  const absl::StatusOr<PlacedTensor> big =
      PlaceReplicated(allocator_, "big", {uint64_t{1} << 31}, pb::FP32, pes);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(big.status()),
              HasSubstr("tensor 'big': pe 5 (sip0.cube1.pe1): HBM region exhausted: 8589934592 "
                        "bytes"));
}

TEST_F(PlacementTest, ReplicatedEveryPeHoldsTheWholeTensorAndGatherReadsTheFirstCopy) {
  const std::vector<uint32_t> pes = {7, 0, 31};
  absl::StatusOr<PlacedTensor> q = PlaceReplicated(allocator_, "q", {3, 5}, pb::BF16, pes);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(ShardsOf(*q).size(), 3u);
  for (size_t i = 0; i < pes.size(); ++i) {
    const Shard& shard = ShardsOf(*q)[i];
    EXPECT_EQ(shard.ref.space(), pb::HBM);
    EXPECT_EQ(shard.ref.pe(), pes[i]);
    EXPECT_EQ(shard.ref.addr(), 0u);
    EXPECT_EQ(shard.ref.dtype(), pb::BF16);
    EXPECT_THAT(shard.ref.shape(), ElementsAre(3, 5));
    EXPECT_THAT(shard.global, ElementsAre(IndexRange{0, 3}, IndexRange{0, 5}));
    EXPECT_EQ(shard.rank, i);
  }
  const NpyArray input = RandomArray({3, 5}, /*seed=*/1);
  ASSERT_TRUE(Scatter(store_, *q, input).ok());
  for (const Shard& shard : ShardsOf(*q)) {
    EXPECT_EQ(*store_.Read(shard.ref), RoundedToBf16(input.data)) << shard.ref.pe();
  }
  // Spoil the second copy: Gather only reads the first.
  ASSERT_TRUE(store_.Write(ShardsOf(*q)[1].ref, std::vector<float>(15, 9.0f)).ok());
  absl::StatusOr<std::vector<float>> gathered = Gather(store_, *q);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(*gathered, RoundedToBf16(input.data));
}

TEST_F(PlacementTest, RowWiseBlocksWhenRowsAreNotAMultipleOfRanks) {
  // n = 9 rows over 4 ranks: B = 3, the last rank holds none but is still sized for 3.
  const std::vector<uint32_t> ranks = {12, 13, 14, 15};
  absl::StatusOr<PlacedTensor> x = PlaceRowWise(allocator_, "x", {9, 4}, pb::FP32, 0, ranks);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(x->block(), 3u);
  const std::vector<IndexRange> expected = {{0, 3}, {3, 6}, {6, 9}, {9, 9}};
  ASSERT_EQ(ShardsOf(*x).size(), 4u);
  for (uint32_t r = 0; r < 4; ++r) {
    const Shard& shard = ShardsOf(*x)[r];
    EXPECT_EQ(shard.ref.pe(), ranks[r]);
    EXPECT_EQ(shard.rank, r);
    EXPECT_THAT(shard.ref.shape(), ElementsAre(3, 4));
    EXPECT_EQ(shard.global[0], expected[r]) << r;
    EXPECT_EQ(shard.global[1], (IndexRange{0, 4}));
  }
  // n = 10 over 4: B = 3 and the last rank holds one row.
  absl::StatusOr<PlacedTensor> y = PlaceRowWise(allocator_, "y", {10}, pb::FP32, 0, ranks);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(ShardsOf(*y)[3].global[0], (IndexRange{9, 10}));

  const NpyArray input = RandomArray({10}, /*seed=*/2);
  ASSERT_TRUE(Scatter(store_, *y, input).ok());
  // Rank 3 holds global row 9 in local row 0, then padding zeros.
  EXPECT_THAT(*store_.Read(ShardsOf(*y)[3].ref), ElementsAre(input.data[9], 0.0f, 0.0f));
  EXPECT_EQ(*Gather(store_, *y), input.data);  // fp32: exact
}

TEST_F(PlacementTest, RowWiseOverAnInnerAxisRoundTripsThroughTheStore) {
  // [2, 7, 3] split over axis 1 across 3 ranks: B = 3; rank 2 holds row 6 only.
  const std::vector<uint32_t> ranks = {1, 9, 17};
  absl::StatusOr<PlacedTensor> x = PlaceRowWise(allocator_, "x", {2, 7, 3}, pb::BF16, 1, ranks);
  ASSERT_TRUE(x.ok()) << x.status();
  const Shard& last = ShardsOf(*x)[2];
  EXPECT_THAT(last.ref.shape(), ElementsAre(2, 3, 3));
  EXPECT_EQ(last.global[1], (IndexRange{6, 7}));

  const NpyArray input = RandomArray({2, 7, 3}, /*seed=*/3);
  ASSERT_TRUE(Scatter(store_, *x, input).ok());
  // Global (1, 6, 2) is rank 2's local (1, 0, 2).
  const std::vector<float> local = *store_.Read(last.ref);
  EXPECT_EQ(local[(1 * 3 + 0) * 3 + 2], kernels::RoundToBf16(input.data[(1 * 7 + 6) * 3 + 2]));
  EXPECT_EQ(*Gather(store_, *x), RoundedToBf16(input.data));
}

struct KvFixture {
  topology::KvPlacement kv;
  std::vector<KvHeadGroup> heads;
};

// Two KV heads on the two 2x2 CUBE Groups of the small chip, C = 4, P = 4.
KvFixture TwoHeads(const topology::ChipIndex& index, uint64_t max_context, uint32_t start_cube,
                   uint32_t start_pe) {
  absl::StatusOr<topology::CubeGroups> groups =
      topology::CubeGroups::Partition(index.cube_mesh(), /*c=*/4, {2, 2});
  EXPECT_TRUE(groups.ok()) << groups.status();
  absl::StatusOr<topology::KvPlacement> kv =
      topology::KvPlacement::Create(/*c=*/4, /*p=*/4, max_context, start_cube, start_pe);
  EXPECT_TRUE(kv.ok()) << kv.status();
  return KvFixture{*kv,
                   {HeadGroupOf(index, *groups, /*sip=*/0, /*group=*/0),
                    HeadGroupOf(index, *groups, /*sip=*/0, /*group=*/1)}};
}

TEST_F(PlacementTest, HeadGroupOfListsTheGroupsCubesAndEveryPe) {
  const KvFixture f = TwoHeads(index_, /*max_context=*/16, 0, 0);
  // The 2x4 mesh cut into 2x2 rectangles: group 0 = CUBEs {0, 1, 4, 5}, group 1 = {2, 3, 6, 7}.
  EXPECT_THAT(f.heads[0].cubes, ElementsAre(0, 1, 4, 5));
  EXPECT_THAT(f.heads[1].cubes, ElementsAre(2, 3, 6, 7));
  EXPECT_THAT(f.heads[0].pes, ElementsAre(0, 1, 2, 3));
}

TEST_F(PlacementTest, KvTokenLandsAtItsOwnersPeAndSlotUnderRotation) {
  // max_context 100 over R = 16 ranks: B = 7; S = 90 < 100 filled positions. start_cube 5
  // is taken mod C (= 1).
  const KvFixture f = TwoHeads(index_, /*max_context=*/100, /*start_cube=*/5, /*start_pe=*/3);
  const uint64_t h_kv = 2, s = 90, d = 6;
  absl::StatusOr<PlacedTensor> v =
      PlaceKvCache(allocator_, "v", {h_kv, s, d}, pb::BF16, f.kv, f.heads);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(f.kv.block(), 7u);
  ASSERT_EQ(ShardsOf(*v).size(), 2u * 16u);
  EXPECT_THAT(ShardsOf(*v)[0].ref.shape(), ElementsAre(7, 6));

  const NpyArray input = RandomArray({h_kv, s, d}, /*seed=*/4);
  ASSERT_TRUE(Scatter(store_, *v, input).ok());
  for (uint64_t h = 0; h < h_kv; ++h) {
    for (uint64_t t = 0; t < s; ++t) {
      const topology::KvPlacement::Owner owner = f.kv.OwnerOf(t);
      const Shard& shard = ShardsOf(*v)[h * 16 + owner.rank];
      const uint32_t cube = f.heads[h].cubes[f.kv.CubeInGroupOfRank(owner.rank)];
      const uint32_t pe = cube * 4 + f.heads[h].pes[f.kv.PeOfRank(owner.rank)];
      ASSERT_EQ(shard.ref.pe(), pe) << "h " << h << " t " << t;
      ASSERT_EQ(shard.rank, owner.rank);
      ASSERT_EQ(shard.global[0], (IndexRange{h, h + 1}));
      ASSERT_EQ(shard.global[1].begin + owner.slot, t);
      ASSERT_LT(t, shard.global[1].end);
      // The row of token t is slot owner.slot of that PE's [B, d] buffer.
      pb::TensorRef row = shard.ref;
      row.set_addr(shard.ref.addr() + owner.slot * d * 2);
      row.clear_shape();
      row.add_shape(d);
      const std::vector<float> values = *store_.Read(row);
      for (uint64_t dim = 0; dim < d; ++dim) {
        ASSERT_EQ(values[dim], kernels::RoundToBf16(input.data[(h * s + t) * d + dim]))
            << "h " << h << " t " << t << " dim " << dim;
      }
    }
  }
  // Rank 0 = cube_in_group 1, PE 3: for head 0, global CUBE 1, so global PE 7.
  EXPECT_EQ(ShardsOf(*v)[0].ref.pe(), 7u);
  // The last rank (15) holds positions [105, 112) of a 90-token cache: none.
  EXPECT_EQ(ShardsOf(*v)[15].global[1].size(), 0u);
  EXPECT_EQ(ShardsOf(*v)[12].global[1], (IndexRange{84, 90}));
  EXPECT_EQ(*Gather(store_, *v), RoundedToBf16(input.data));
}

TEST_F(PlacementTest, KvTileMajorKAddressesSlotDimAsTheLayoutSays) {
  const KvLayout layout{SlotLayout::kTileMajor, /*tile=*/4};
  // (slot, dim) at ((slot / TILE) * d + dim) * TILE + slot % TILE.
  EXPECT_EQ(KvSlotOffset(layout, /*d=*/3, /*slot=*/5, /*dim=*/2), (1u * 3 + 2) * 4 + 1);
  EXPECT_EQ(KvSlotOffset(layout, /*d=*/3, /*slot=*/0, /*dim=*/1), 4u);
  EXPECT_EQ(KvSlotOffset(KvLayout{}, /*d=*/3, /*slot=*/5, /*dim=*/2), 17u);

  const KvFixture f = TwoHeads(index_, /*max_context=*/100, /*start_cube=*/2, /*start_pe=*/1);
  const uint64_t h_kv = 2, s = 100, d = 3;
  absl::StatusOr<PlacedTensor> k =
      PlaceKvCache(allocator_, "k", {h_kv, s, d}, pb::BF16, f.kv, f.heads, layout);
  ASSERT_TRUE(k.ok()) << k.status();
  // B = 7 slots -> 2 tiles of 4 (one padding slot).
  const Shard& shard = ShardsOf(*k)[16 + 5];  // head 1, rank 5: positions [35, 42)
  EXPECT_THAT(shard.ref.shape(), ElementsAre(2, 3, 4));
  ASSERT_EQ(shard.global[1], (IndexRange{35, 42}));

  const NpyArray input = RandomArray({h_kv, s, d}, /*seed=*/5);
  ASSERT_TRUE(Scatter(store_, *k, input).ok());
  const std::vector<float> local = *store_.Read(shard.ref);
  for (uint64_t slot = 0; slot < 7; ++slot) {
    for (uint64_t dim = 0; dim < d; ++dim) {
      EXPECT_EQ(local[((slot / 4) * d + dim) * 4 + slot % 4],
                kernels::RoundToBf16(input.data[(1 * s + 35 + slot) * d + dim]))
          << "slot " << slot << " dim " << dim;
    }
  }
  for (uint64_t dim = 0; dim < d; ++dim) {
    EXPECT_EQ(local[(1 * d + dim) * 4 + 3], 0.0f) << "padding slot 7";
  }
  EXPECT_EQ(*Gather(store_, *k), RoundedToBf16(input.data));
}

TEST_F(PlacementTest, ShardsOfOnePeDoNotOverlap) {
  // Several tensors on the same PEs get disjoint, aligned buffers.
  const std::vector<uint32_t> pes = {0, 1};
  absl::StatusOr<PlacedTensor> a = PlaceReplicated(allocator_, "a", {3}, pb::BF16, pes);
  absl::StatusOr<PlacedTensor> b = PlaceRowWise(allocator_, "b", {300}, pb::FP32, 0, pes);
  absl::StatusOr<PlacedTensor> c = PlaceReplicated(allocator_, "c", {1}, pb::FP32, pes);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(ShardsOf(*a)[1].ref.addr(), 0u);
  EXPECT_EQ(ShardsOf(*b)[1].ref.addr(), 256u);
  EXPECT_EQ(ShardsOf(*c)[1].ref.addr(), 256u + 768u);  // 150 fp32 rows = 600 B -> 768
}

TEST_F(PlacementTest, ErrorsNameTheTensorAndTheField) {
  const KvFixture f = TwoHeads(index_, /*max_context=*/64, 0, 0);
  const std::vector<uint32_t> pes = {0, 1};
  const std::vector<uint32_t> twice = {4, 2, 4};
  const std::vector<uint32_t> off_chip = {0, 32};
  std::vector<KvHeadGroup> short_cubes = f.heads;
  short_cubes[1].cubes.pop_back();
  std::vector<KvHeadGroup> bad_pe = f.heads;
  bad_pe[0].pes[2] = 4;
  std::vector<KvHeadGroup> repeated_cube = f.heads;
  repeated_cube[1].cubes[3] = 2;

  struct Case {
    absl::StatusOr<PlacedTensor> placed;
    std::string message;
  };
  const Case cases[] = {
      {PlaceReplicated(allocator_, "q", {2}, pb::DTYPE_UNSPECIFIED, pes),
       "tensor 'q': dtype: must be BF16 or FP32 (got DTYPE_UNSPECIFIED)"},
      {PlaceReplicated(allocator_, "q", {2}, pb::BF16, {}), "tensor 'q': pes: empty"},
      {PlaceReplicated(allocator_, "q", {2}, pb::BF16, twice),
       "tensor 'q': pes[2]: pe 4 (sip0.cube1.pe0) is listed twice (also pes[0])"},
      {PlaceRowWise(allocator_, "x", {4, 8}, pb::BF16, 2, pes),
       "tensor 'x': axis: 2 is not an axis of shape [4, 8]"},
      {PlaceRowWise(allocator_, "x", {4, 8}, pb::BF16, 0, off_chip),
       "tensor 'x': rank_pes[1]: 32 is not a PE of this chip (32 PEs)"},
      {PlaceRowWise(allocator_, "x", {uint64_t{1} << 62, 8}, pb::BF16, 0, pes),
       "tensor 'x': shape: [4611686018427387904, 8] is too large"},
      {PlaceKvCache(allocator_, "k", {2, 64}, pb::BF16, f.kv, f.heads),
       "tensor 'k': shape: [2, 64] is not [H_kv, S, d]"},
      {PlaceKvCache(allocator_, "k", {3, 64, 8}, pb::BF16, f.kv, f.heads),
       "tensor 'k': heads: 2 head groups for H_kv = 3"},
      {PlaceKvCache(allocator_, "k", {2, 65, 8}, pb::BF16, f.kv, f.heads),
       "tensor 'k': shape: S = 65 exceeds the KV placement's max_context = 64"},
      {PlaceKvCache(allocator_, "k", {2, 64, 8}, pb::BF16, f.kv, f.heads,
                    KvLayout{SlotLayout::kTileMajor, 0}),
       "tensor 'k': layout.tile: must be > 0 for the tile-major layout"},
      {PlaceKvCache(allocator_, "k", {2, 64, 8}, pb::BF16, f.kv, short_cubes),
       "tensor 'k': heads[1].cubes: 3 entries, the KV placement has C = 4"},
      {PlaceKvCache(allocator_, "k", {2, 64, 8}, pb::BF16, f.kv, bad_pe),
       "tensor 'k': heads[0].pes[2]: 4 is not a PE index inside a CUBE (4)"},
      {PlaceKvCache(allocator_, "k", {2, 64, 8}, pb::BF16, f.kv, repeated_cube),
       "tensor 'k': heads[1].cubes[3]: 2 is listed twice (also heads[1].cubes[0])"},
  };
  for (const Case& c : cases) {
    ASSERT_FALSE(c.placed.ok()) << c.message;
    EXPECT_EQ(c.placed.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(Message(c.placed.status()), c.message);
  }
}

TEST_F(PlacementTest, ScatterRejectsAnInputOfAnotherShape) {
  const std::vector<uint32_t> pes = {0};
  absl::StatusOr<PlacedTensor> q = PlaceReplicated(allocator_, "q", {2, 4}, pb::BF16, pes);
  ASSERT_TRUE(q.ok());
  const absl::Status status = Scatter(store_, *q, RandomArray({2, 3}, /*seed=*/6));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(status),
            "tensor 'q': input: shape [2, 3] does not match the placed shape [2, 4]");
}

}  // namespace
}  // namespace ahbm::host
