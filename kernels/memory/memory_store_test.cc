// MemoryStore: bf16 conversion, sparse paged storage, strided access and bounds errors.
#include "kernels/memory/memory_store.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/memory/test_util.h"

namespace ahbm::kernels {
namespace {

using ::ahbm::kernels::testing::Hbm;
using ::ahbm::kernels::testing::kPe;
using ::ahbm::kernels::testing::kRegion;
using ::ahbm::kernels::testing::kTcm;
using ::ahbm::kernels::testing::Random;
using ::ahbm::kernels::testing::Ref;
using ::ahbm::kernels::testing::SmallChip;
using ::ahbm::kernels::testing::Tcm;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

uint16_t Bits(float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); }
float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

// Reference: round a finite float to bf16 (8 significant bits, binary32's exponent range) in
// double arithmetic; std::nearbyint rounds half to even in the default rounding mode.
uint16_t ReferenceBf16(float value) {
  const double d = value;
  if (d == 0.0) return Bits(value);  // keeps the sign of zero
  int exponent = 0;
  std::frexp(d, &exponent);  // |d| = m * 2^exponent, m in [0.5, 1)
  const int e = std::max(exponent - 1, -126);  // subnormals share the smallest normal's ulp
  const double ulp = std::ldexp(1.0, e - 7);
  double rounded = std::nearbyint(d / ulp) * ulp;
  if (std::fabs(rounded) >= std::ldexp(1.0, 128)) rounded = std::copysign(INFINITY, d);
  if (rounded == 0.0) rounded = std::copysign(0.0, d);
  const float f = static_cast<float>(rounded);  // exact: rounded is a bf16 value
  EXPECT_EQ(std::bit_cast<uint32_t>(f) & 0xFFFFu, 0u) << value;
  return Bits(f);
}

TEST(Bf16Test, RoundsTiesToEven) {
  EXPECT_EQ(FloatToBf16(FromBits(0x3F808000)), 0x3F80);  // tie, 0x3F80 even: down
  EXPECT_EQ(FloatToBf16(FromBits(0x3F818000)), 0x3F82);  // tie, 0x3F81 odd: up
  EXPECT_EQ(FloatToBf16(FromBits(0x3F808001)), 0x3F81);  // above the tie
  EXPECT_EQ(FloatToBf16(FromBits(0x3F807FFF)), 0x3F80);  // below the tie
  EXPECT_EQ(FloatToBf16(FromBits(0xBF818000)), 0xBF82);  // negative tie to even
  EXPECT_EQ(FloatToBf16(FromBits(0x3F7FFFFF)), 0x3F80);  // carries into the exponent
  EXPECT_EQ(FloatToBf16(FromBits(0x00008000)), 0x0000);  // subnormal tie to even (zero)
  EXPECT_EQ(FloatToBf16(FromBits(0x00018000)), 0x0002);
  EXPECT_EQ(FloatToBf16(FromBits(0x007FFFFF)), 0x0080);  // largest subnormal -> smallest normal
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
}

TEST(Bf16Test, OverflowsToInfinity) {
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(FloatToBf16(FromBits(0x7F7F7FFF)), 0x7F7F);  // just below the tie: bf16 max
  EXPECT_EQ(FloatToBf16(FromBits(0x7F7F8000)), 0x7F80);  // tie, 0x7F7F odd: up to inf
  EXPECT_EQ(FloatToBf16(INFINITY), 0x7F80);
  EXPECT_EQ(FloatToBf16(-INFINITY), 0xFF80);
}

TEST(Bf16Test, NanStaysQuietNan) {
  for (uint32_t upper : {0x7F80u, 0x7F81u, 0x7FBFu, 0x7FC0u, 0x7FFFu, 0xFF80u, 0xFFC1u}) {
    for (uint32_t lower : {0x0000u, 0x0001u, 0x8000u, 0xFFFFu}) {
      const uint32_t bits = upper << 16 | lower;
      if (!std::isnan(FromBits(bits))) continue;  // 0x7F800000 is inf
      const uint16_t b = FloatToBf16(FromBits(bits));
      EXPECT_TRUE(std::isnan(Bf16ToFloat(b))) << std::hex << bits;
      EXPECT_NE(b & 0x0040, 0) << "not quiet: " << std::hex << bits;
      EXPECT_EQ(b & 0x8000, upper & 0x8000) << "sign: " << std::hex << bits;
    }
  }
}

// Every bf16 upper half with the low halves that matter for rounding, against the double
// reference.
TEST(Bf16Test, MatchesDoubleReferenceOnInterestingBitPatterns) {
  const uint32_t lowers[] = {0x0000, 0x0001, 0x3FFF, 0x4000, 0x7FFE, 0x7FFF,
                             0x8000, 0x8001, 0xBFFF, 0xC000, 0xFFFE, 0xFFFF};
  int checked = 0;
  for (uint32_t upper = 0; upper <= 0xFFFF; ++upper) {
    for (uint32_t lower : lowers) {
      const float f = FromBits(upper << 16 | lower);
      if (std::isnan(f)) continue;
      ASSERT_EQ(FloatToBf16(f), ReferenceBf16(f)) << std::hex << (upper << 16 | lower);
      ++checked;
    }
  }
  EXPECT_GT(checked, 700000);
}

TEST(Bf16Test, WidensExactlyAndRoundTrips) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(FloatToBf16(f), b);
    }
  }
  EXPECT_EQ(RoundToBf16(FromBits(0x3F818000)), FromBits(0x3F820000));
}

class MemoryStoreTest : public ::testing::Test {
 protected:
  MemoryStoreTest() : store_(SmallChip()) {}
  MemoryStore store_;
};

TEST_F(MemoryStoreTest, SizesFollowTheTopology) {
  EXPECT_EQ(store_.hbm_region_bytes(), kRegion);
  EXPECT_EQ(store_.tcm_bytes(), kTcm);
}

TEST_F(MemoryStoreTest, UnwrittenMemoryReadsZero) {
  auto hbm = store_.Read(Hbm(kRegion - 64, pb::FP32, {4, 4}));
  ASSERT_TRUE(hbm.ok()) << hbm.status();
  EXPECT_THAT(*hbm, ::testing::Each(0.0f));
  auto tcm = store_.Read(Tcm(0, pb::BF16, {8}));
  ASSERT_TRUE(tcm.ok()) << tcm.status();
  EXPECT_THAT(*tcm, ::testing::Each(0.0f));
  auto bytes = store_.ReadBytes(pb::TCM, kPe, kTcm - 3, 3);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_THAT(*bytes, ElementsAre(0, 0, 0));
}

TEST_F(MemoryStoreTest, EncodingsAreLittleEndian) {
  ASSERT_TRUE(store_.Write(Hbm(0x100, pb::FP32, {1}), std::vector<float>{1.0f}).ok());
  ASSERT_TRUE(store_.Write(Hbm(0x200, pb::BF16, {2}), std::vector<float>{1.0f, -2.0f}).ok());
  EXPECT_THAT(*store_.ReadBytes(pb::HBM, kPe, 0x100, 4), ElementsAre(0x00, 0x00, 0x80, 0x3F));
  EXPECT_THAT(*store_.ReadBytes(pb::HBM, kPe, 0x200, 4), ElementsAre(0x80, 0x3F, 0x00, 0xC0));
}

TEST_F(MemoryStoreTest, Bf16StoreRoundsToNearestEven) {
  const std::vector<float> in = {FromBits(0x3F808000), FromBits(0x3F818000),
                                 std::numeric_limits<float>::max(), -INFINITY, NAN};
  ASSERT_TRUE(store_.Write(Tcm(64, pb::BF16, {5}), in).ok());
  auto out = store_.Read(Tcm(64, pb::BF16, {5}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0], 1.0f);
  EXPECT_EQ((*out)[1], FromBits(0x3F820000));
  EXPECT_EQ((*out)[2], INFINITY);
  EXPECT_EQ((*out)[3], -INFINITY);
  EXPECT_TRUE(std::isnan((*out)[4]));
}

TEST_F(MemoryStoreTest, HbmBeyondRegionNamesPeSpaceRangeAndLimit) {
  // Elements [kRegion - 8, kRegion + 8): half inside the region.
  const pb::TensorRef t = Hbm(kRegion - 8, pb::FP32, {4});
  const absl::Status status = store_.Write(t, std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("pe 3 (sip0.cube0.pe3)"), HasSubstr("HBM"),
                    HasSubstr("[0xfffffff8, 0x100000008)"), HasSubstr("0x100000000")));
  EXPECT_EQ(store_.Read(t).status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing was clamped: the in-range part was not written.
  EXPECT_THAT(*store_.Read(Hbm(kRegion - 8, pb::FP32, {2})), ElementsAre(0.0f, 0.0f));
}

TEST_F(MemoryStoreTest, TcmBeyondSizeIsTcmOverflow) {
  const absl::Status status = store_.Write(Tcm(kTcm - 16, pb::BF16, {16}), Random(16, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("pe 3 (sip0.cube0.pe3)"), HasSubstr("TCM"),
                    HasSubstr("[0x3ffff0, 0x400010)"), HasSubstr("4194304"),
                    HasSubstr("overflow")));
  // Exactly at the end is fine.
  EXPECT_TRUE(store_.Write(Tcm(kTcm - 16, pb::BF16, {8}), Random(8, 1)).ok());
}

TEST_F(MemoryStoreTest, StridedExtentIsBoundsChecked) {
  // Only 4 elements, but the row stride puts the last one past the region.
  const pb::TensorRef t = Hbm(0, pb::FP32, {2, 2}, {uint64_t{1} << 30, 1});
  const absl::Status status = store_.Read(t).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("[0x0, 0x100000008)"));
  // A huge stride does not wrap around.
  const pb::TensorRef wrap = Hbm(0, pb::FP32, {2, 2}, {uint64_t{1} << 63, 1});
  EXPECT_THAT(std::string(store_.Read(wrap).status().message()), HasSubstr("beyond 2^64"));
}

TEST_F(MemoryStoreTest, UnknownPeAndBadTensorsAreInvalidArgument) {
  const auto message = [](const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_THAT(message(store_.Read(Ref(pb::HBM, 32, 0, pb::FP32, {1})).status()),
              AllOf(HasSubstr("pe 32"), HasSubstr("no such PE")));
  EXPECT_THAT(message(store_.Read(Ref(pb::MEMORY_SPACE_UNSPECIFIED, kPe, 0, pb::FP32, {1}))
                          .status()),
              HasSubstr("memory space"));
  EXPECT_THAT(message(store_.Read(Hbm(0, pb::DTYPE_UNSPECIFIED, {1})).status()),
              HasSubstr("dtype"));
  EXPECT_THAT(message(store_.Read(Hbm(0, pb::FP32, {})).status()), HasSubstr("rank 0"));
  EXPECT_THAT(message(store_.Read(Hbm(0, pb::FP32, {2, 0})).status()), HasSubstr("zero dim"));
  EXPECT_THAT(message(store_.Read(Hbm(0, pb::FP32, {2, 2}, {2})).status()),
              HasSubstr("strides"));
  EXPECT_THAT(message(store_.Read(Hbm(0, pb::FP32, {2, 2}, {0, 1})).status()),
              HasSubstr("stride 0"));
  EXPECT_THAT(message(store_.Write(Hbm(0, pb::FP32, {2, 2}), std::vector<float>{1, 2, 3})),
              HasSubstr("3 values"));
  EXPECT_THAT(message(store_.WriteBytes(pb::TCM, kPe, kTcm, std::vector<uint8_t>{1})),
              HasSubstr("TCM overflow"));
  // An overlapping view whose dense copy is larger than its memory space.
  EXPECT_THAT(message(store_.Read(Tcm(0, pb::FP32, {1 << 18, 1 << 18}, {1, 1})).status()),
              HasSubstr("more bytes"));
}

// A [5, 7] view with row stride 19 and column stride 3 inside a [5, 19*...] TCM buffer: the
// view reads back what was written, and the buffer shows it landed at the strided positions.
TEST_F(MemoryStoreTest, StridedWriteReadRoundTrip) {
  const uint64_t base = 0x1000;
  const pb::TensorRef view = Tcm(base, pb::FP32, {5, 7}, {19, 3});
  const std::vector<float> values = Random(35, 7);
  ASSERT_TRUE(store_.Write(view, values).ok());
  auto back = store_.Read(view);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, values);

  auto dense = store_.Read(Tcm(base, pb::FP32, {5 * 19}));
  ASSERT_TRUE(dense.ok()) << dense.status();
  for (uint64_t i = 0; i < dense->size(); ++i) {
    const uint64_t r = i / 19;
    const uint64_t c = i % 19;
    const float want = (c % 3 == 0 && c / 3 < 7) ? values[r * 7 + c / 3] : 0.0f;
    ASSERT_EQ((*dense)[i], want) << i;
  }
}

// Runs of a row-strided view cross a 64 KiB page boundary; a bf16 transposed view reads the
// transpose.
TEST_F(MemoryStoreTest, StridedRunsAcrossPagesAndTransposedViews) {
  const uint64_t base = 64 * 1024 - 10;  // each [.., 12] fp32 run of row 0 straddles the page
  const pb::TensorRef view = Hbm(base, pb::FP32, {3, 12}, {20000, 1});
  const std::vector<float> values = Random(36, 8);
  ASSERT_TRUE(store_.Write(view, values).ok());
  EXPECT_EQ(*store_.Read(view), values);

  const std::vector<float> m = Random(6, 9);  // [2, 3] row-major, then read as [3, 2]
  std::vector<float> m_bf16(m.size());
  for (size_t i = 0; i < m.size(); ++i) m_bf16[i] = RoundToBf16(m[i]);
  ASSERT_TRUE(store_.Write(Hbm(0x40, pb::BF16, {2, 3}), m).ok());
  auto t = store_.Read(Hbm(0x40, pb::BF16, {3, 1, 2}, {1, 7, 3}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(*t, ElementsAre(m_bf16[0], m_bf16[3], m_bf16[1], m_bf16[4], m_bf16[2], m_bf16[5]));
}

TEST_F(MemoryStoreTest, RawBytesRoundTripAcrossPages) {
  std::vector<uint8_t> bytes(200000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_TRUE(store_.WriteBytes(pb::HBM, kPe, 12345, bytes).ok());
  auto back = store_.ReadBytes(pb::HBM, kPe, 12345, bytes.size());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, bytes);
  // Another PE's region is separate.
  EXPECT_THAT(*store_.ReadBytes(pb::HBM, kPe - 1, 12345, 2), ElementsAre(0, 0));
  EXPECT_THAT(*store_.ReadBytes(pb::TCM, kPe, 12345, 2), ElementsAre(0, 0));
}

TEST_F(MemoryStoreTest, ElementBytesAreBitExact) {
  const std::vector<uint8_t> snan = {0x01, 0xFF, 0x80, 0x7F, 0x81, 0xFF};  // fp32 sNaN, bf16 sNaN
  ASSERT_TRUE(store_.WriteElements(Tcm(0, pb::BF16, {3}), snan).ok());
  EXPECT_EQ(*store_.ReadElements(Tcm(0, pb::BF16, {3})), snan);
  EXPECT_EQ(store_.WriteElements(Tcm(0, pb::BF16, {2}), snan).code(),
            absl::StatusCode::kInvalidArgument);
  auto strided = store_.ReadElements(Tcm(0, pb::BF16, {2}, {2}));
  ASSERT_TRUE(strided.ok());
  EXPECT_THAT(*strided, ElementsAreArray({0x01, 0xFF, 0x81, 0xFF}));
}

}  // namespace
}  // namespace ahbm::kernels
