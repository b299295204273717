// DataExecutor: every command kind against plain double-precision references.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/memory/memory_store.h"
#include "kernels/memory/test_util.h"

namespace ahbm::kernels {
namespace {

using ::ahbm::kernels::testing::Hbm;
using ::ahbm::kernels::testing::kPe;
using ::ahbm::kernels::testing::kTcm;
using ::ahbm::kernels::testing::Random;
using ::ahbm::kernels::testing::Ref;
using ::ahbm::kernels::testing::Shape;
using ::ahbm::kernels::testing::SmallChip;
using ::ahbm::kernels::testing::Tcm;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Bf16(std::vector<float> v) {
  for (float& x : v) x = RoundToBf16(x);
  return v;
}

// out[m, n] = sum_k a[m, k] * b[k, n] in double, and sum_k |a[m, k] * b[k, n]| (the scale of
// the fp32 rounding error).
struct RefGemm {
  std::vector<double> value;
  std::vector<double> magnitude;
};
RefGemm ReferenceGemm(const std::vector<float>& a, const std::vector<float>& b, uint64_t m,
                      uint64_t k, uint64_t n) {
  RefGemm r{std::vector<double>(m * n), std::vector<double>(m * n)};
  for (uint64_t i = 0; i < m; ++i) {
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t x = 0; x < k; ++x) {
        const double p = double{a[i * k + x]} * b[x * n + j];
        r.value[i * n + j] += p;
        r.magnitude[i * n + j] += std::fabs(p);
      }
    }
  }
  return r;
}

// fp32 accumulation over K terms: a relative error far below 1e-5 of sum |terms|.
constexpr double kFp32Sum = 1e-5;
// A bf16 store: half an ulp, at most 2^-8 relative.
constexpr double kBf16 = 1.0 / 256;

class DataExecutorTest : public ::testing::Test {
 protected:
  DataExecutorTest() : store_(SmallChip()), exec_(&store_) {}

  void Put(const pb::TensorRef& t, const std::vector<float>& values) {
    const absl::Status status = store_.Write(t, values);
    ASSERT_TRUE(status.ok()) << status;
  }
  std::vector<float> Get(const pb::TensorRef& t) {
    absl::StatusOr<std::vector<float>> values = store_.Read(t);
    EXPECT_TRUE(values.ok()) << values.status();
    return values.ok() ? *values : std::vector<float>();
  }
  pb::MathCmd Math(pb::MathOp op, std::vector<pb::TensorRef> inputs, const pb::TensorRef& out,
                   int axis = -1, float scalar = 0) {
    pb::MathCmd cmd;
    cmd.set_cmd_id(++cmd_id_);
    cmd.set_op(op);
    for (const pb::TensorRef& t : inputs) *cmd.add_inputs() = t;
    *cmd.mutable_out() = out;
    cmd.set_axis(axis);
    cmd.set_scalar(scalar);
    return cmd;
  }
  pb::GemmCmd Gemm(const pb::TensorRef& a, const pb::TensorRef& b, const pb::TensorRef& out,
                   bool accumulate) {
    pb::GemmCmd cmd;
    cmd.set_cmd_id(++cmd_id_);
    *cmd.mutable_a() = a;
    *cmd.mutable_b() = b;
    *cmd.mutable_out() = out;
    cmd.set_accumulate(accumulate);
    return cmd;
  }

  MemoryStore store_;
  DataExecutor exec_;
  uint64_t cmd_id_ = 0;
};

// ---- DMA ----

TEST_F(DataExecutorTest, DmaCopiesStridedHbmToStridedTcm) {
  // Columns 8..23 of a [6, 40] bf16 matrix in another PE's HBM (crossing a page), into a
  // [2, 3, 16] TCM tensor with padded rows (row stride 32): same element count, other shape.
  const uint64_t base = 64 * 1024 - 100;
  const std::vector<float> matrix = Random(6 * 40, 11);
  Put(Ref(pb::HBM, kPe - 1, base, pb::BF16, {6, 40}), matrix);
  pb::DmaCmd cmd;
  cmd.set_cmd_id(5);
  *cmd.mutable_src() = Ref(pb::HBM, kPe - 1, base + 8 * 2, pb::BF16, {6, 16}, {40, 1});
  *cmd.mutable_dst() = Tcm(0x200, pb::BF16, {2, 3, 16}, {96, 32, 1});
  ASSERT_TRUE(exec_.Execute(cmd).ok());

  const std::vector<float> dst = Get(Tcm(0x200, pb::BF16, {6, 32}));
  for (uint64_t r = 0; r < 6; ++r) {
    for (uint64_t c = 0; c < 32; ++c) {
      const float want = c < 16 ? RoundToBf16(matrix[r * 40 + 8 + c]) : 0.0f;
      ASSERT_EQ(dst[r * 32 + c], want) << r << "," << c;
    }
  }
}

TEST_F(DataExecutorTest, DmaConvertsDtypeAndChecksCounts) {
  const std::vector<float> v = Random(8, 12);
  Put(Tcm(0, pb::FP32, {8}), v);
  pb::DmaCmd cmd;
  cmd.set_cmd_id(6);
  *cmd.mutable_src() = Tcm(0, pb::FP32, {8});
  *cmd.mutable_dst() = Hbm(0x1000, pb::BF16, {2, 4});
  ASSERT_TRUE(exec_.Execute(cmd).ok());
  EXPECT_EQ(Get(Hbm(0x1000, pb::BF16, {8})), Bf16(v));

  *cmd.mutable_dst() = Hbm(0x1000, pb::BF16, {3, 4});
  const absl::Status status = exec_.Execute(cmd);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), AllOf(HasSubstr("dma cmd 6: dst"),
                                                   HasSubstr("[3, 4]"), HasSubstr("[8]")));
}

// ---- GEMM ----

class GemmOutTest : public DataExecutorTest, public ::testing::WithParamInterface<pb::DType> {};

TEST_P(GemmOutTest, MatchesReferenceOnAsymmetricBf16Inputs) {
  constexpr uint64_t M = 5, K = 19, N = 3;
  const std::vector<float> a = Bf16(Random(M * K, 21));
  const std::vector<float> b = Bf16(Random(K * N, 22, -2.0f, 3.0f));
  Put(Hbm(0x3000, pb::BF16, {M, K}), a);
  Put(Tcm(0x100, pb::BF16, {K, N}), b);
  const pb::DType out_dtype = GetParam();
  const pb::TensorRef out = Tcm(0x8000, out_dtype, {M, N});
  ASSERT_TRUE(exec_.Execute(Gemm(Hbm(0x3000, pb::BF16, {M, K}), Tcm(0x100, pb::BF16, {K, N}),
                                 out, /*accumulate=*/false))
                  .ok());
  const RefGemm ref = ReferenceGemm(a, b, M, K, N);
  const std::vector<float> got = Get(out);
  for (uint64_t i = 0; i < M * N; ++i) {
    double tol = kFp32Sum * ref.magnitude[i];
    if (out_dtype == pb::BF16) tol += kBf16 * std::fabs(ref.value[i]);
    EXPECT_NEAR(got[i], ref.value[i], tol) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(OutDtypes, GemmOutTest, ::testing::Values(pb::FP32, pb::BF16),
                         [](const auto& info) { return pb::DType_Name(info.param); });

TEST_F(DataExecutorTest, GemmAccumulateAddsToOut) {
  constexpr uint64_t M = 3, K = 11, N = 7;
  const std::vector<float> a = Bf16(Random(M * K, 31));
  const std::vector<float> b = Bf16(Random(K * N, 32));
  const std::vector<float> c = Random(M * N, 33, -5.0f, 5.0f);
  Put(Tcm(0, pb::BF16, {M, K}), a);
  Put(Tcm(0x400, pb::BF16, {K, N}), b);
  Put(Tcm(0x800, pb::FP32, {M, N}), c);
  ASSERT_TRUE(exec_.Execute(Gemm(Tcm(0, pb::BF16, {M, K}), Tcm(0x400, pb::BF16, {K, N}),
                                 Tcm(0x800, pb::FP32, {M, N}), /*accumulate=*/true))
                  .ok());
  const RefGemm ref = ReferenceGemm(a, b, M, K, N);
  const std::vector<float> got = Get(Tcm(0x800, pb::FP32, {M, N}));
  for (uint64_t i = 0; i < M * N; ++i) {
    EXPECT_NEAR(got[i], c[i] + ref.value[i], kFp32Sum * (ref.magnitude[i] + std::fabs(c[i])));
  }
}

// K split over two accumulating GEMMs on strided views is bit-identical to one GEMM.
TEST_F(DataExecutorTest, GemmSplitKWithAccumulateIsBitExact) {
  constexpr uint64_t M = 4, K = 19, N = 6, K0 = 7;
  Put(Tcm(0, pb::BF16, {M, K}), Random(M * K, 41));
  Put(Tcm(0x400, pb::BF16, {K, N}), Random(K * N, 42));
  const pb::TensorRef whole = Tcm(0x1000, pb::FP32, {M, N});
  const pb::TensorRef split = Tcm(0x2000, pb::FP32, {M, N});
  ASSERT_TRUE(exec_.Execute(Gemm(Tcm(0, pb::BF16, {M, K}), Tcm(0x400, pb::BF16, {K, N}), whole,
                                 /*accumulate=*/false))
                  .ok());
  ASSERT_TRUE(exec_.Execute(Gemm(Tcm(0, pb::BF16, {M, K0}, {K, 1}),
                                 Tcm(0x400, pb::BF16, {K0, N}), split, /*accumulate=*/false))
                  .ok());
  ASSERT_TRUE(exec_.Execute(Gemm(Tcm(K0 * 2, pb::BF16, {M, K - K0}, {K, 1}),
                                 Tcm(0x400 + K0 * N * 2, pb::BF16, {K - K0, N}), split,
                                 /*accumulate=*/true))
                  .ok());
  EXPECT_EQ(*store_.ReadElements(whole), *store_.ReadElements(split));
}

TEST_F(DataExecutorTest, GemmShapeMismatchIsInvalidArgument) {
  pb::GemmCmd cmd = Gemm(Tcm(0, pb::BF16, {4, 19}), Tcm(0x400, pb::BF16, {18, 3}),
                         Tcm(0x800, pb::FP32, {4, 3}), /*accumulate=*/false);
  cmd.set_cmd_id(9);
  const absl::Status status = exec_.Execute(cmd);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("gemm cmd 9: operand b"));

  cmd = Gemm(Tcm(kTcm - 8, pb::BF16, {4, 19}), Tcm(0x400, pb::BF16, {19, 3}),
             Tcm(0x800, pb::FP32, {4, 3}), /*accumulate=*/false);
  EXPECT_THAT(std::string(exec_.Execute(cmd).message()),
              AllOf(HasSubstr("operand a: pe 3 (sip0.cube0.pe3): TCM bytes"),
                    HasSubstr("TCM overflow")));
}

// ---- Composite ----

TEST_F(DataExecutorTest, CompositeScaleThenAddRowVector) {
  constexpr uint64_t M = 4, K = 10, N = 6;
  const std::vector<float> a = Bf16(Random(M * K, 51));
  const std::vector<float> b = Bf16(Random(K * N, 52));
  const std::vector<float> bias = Random(N, 53);
  Put(Hbm(0, pb::BF16, {M, K}), a);
  Put(Hbm(0x1000, pb::BF16, {K, N}), b);
  Put(Tcm(0x100, pb::FP32, {1, N}), bias);
  pb::CompositeCmd cmd;
  cmd.set_cmd_id(12);
  *cmd.mutable_a() = Hbm(0, pb::BF16, {M, K});
  *cmd.mutable_b() = Hbm(0x1000, pb::BF16, {K, N});
  *cmd.mutable_out() = Tcm(0x1000, pb::BF16, {M, N});
  pb::EpilogueStage* scale = cmd.add_epilogue();
  scale->set_op(pb::SCALE);
  scale->set_scalar(0.125f);
  pb::EpilogueStage* add = cmd.add_epilogue();
  add->set_op(pb::ADD);
  *add->mutable_operand() = Tcm(0x100, pb::FP32, {1, N});
  ASSERT_TRUE(exec_.Execute(cmd).ok());

  const RefGemm ref = ReferenceGemm(a, b, M, K, N);
  const std::vector<float> got = Get(cmd.out());
  for (uint64_t i = 0; i < M; ++i) {
    for (uint64_t j = 0; j < N; ++j) {
      const double want = ref.value[i * N + j] * 0.125 + bias[j];
      EXPECT_NEAR(got[i * N + j], want,
                  kBf16 * std::fabs(want) + kFp32Sum * (ref.magnitude[i * N + j] + 1))
          << i << "," << j;
    }
  }
}

// SUB scalar, MAXIMUM with an [M, 1] column, MUL with a full [M, N] operand, DIV scalar, EXP.
TEST_F(DataExecutorTest, CompositeEpilogueChainWithColumnFullAndScalarOperands) {
  constexpr uint64_t M = 3, K = 5, N = 4;
  const std::vector<float> a = Bf16(Random(M * K, 61));
  const std::vector<float> b = Bf16(Random(K * N, 62));
  const std::vector<float> col = Random(M, 63, -0.5f, 0.5f);
  const std::vector<float> full = Random(M * N, 64);
  Put(Tcm(0, pb::BF16, {M, K}), a);
  Put(Tcm(0x100, pb::BF16, {K, N}), b);
  Put(Tcm(0x200, pb::FP32, {M, 1}), col);
  Put(Tcm(0x300, pb::FP32, {M, N}), full);
  pb::CompositeCmd cmd;
  cmd.set_cmd_id(13);
  *cmd.mutable_a() = Tcm(0, pb::BF16, {M, K});
  *cmd.mutable_b() = Tcm(0x100, pb::BF16, {K, N});
  *cmd.mutable_out() = Tcm(0x400, pb::FP32, {M, N});
  const auto stage = [&](pb::MathOp op, float scalar, const pb::TensorRef* operand) {
    pb::EpilogueStage* s = cmd.add_epilogue();
    s->set_op(op);
    s->set_scalar(scalar);
    if (operand != nullptr) *s->mutable_operand() = *operand;
  };
  const pb::TensorRef col_ref = Tcm(0x200, pb::FP32, {M, 1});
  const pb::TensorRef full_ref = Tcm(0x300, pb::FP32, {M, N});
  stage(pb::SUB, 0.5f, nullptr);
  stage(pb::MAXIMUM, 0, &col_ref);
  stage(pb::MUL, 0, &full_ref);
  stage(pb::DIV, 2.0f, nullptr);
  stage(pb::EXP, 0, nullptr);
  ASSERT_TRUE(exec_.Execute(cmd).ok());

  const RefGemm ref = ReferenceGemm(a, b, M, K, N);
  const std::vector<float> got = Get(cmd.out());
  for (uint64_t i = 0; i < M; ++i) {
    for (uint64_t j = 0; j < N; ++j) {
      const double want =
          std::exp(std::max(ref.value[i * N + j] - 0.5, double{col[i]}) * full[i * N + j] / 2);
      EXPECT_NEAR(got[i * N + j], want, 1e-5 * want) << i << "," << j;
    }
  }
}

// ---- MATH ----

double RefBinary(pb::MathOp op, double x, double y) {
  switch (op) {
    case pb::ADD:
      return x + y;
    case pb::SUB:
      return x - y;
    case pb::MUL:
      return x * y;
    case pb::DIV:
      return x / y;
    default:
      return std::max(x, y);
  }
}

// One op of fp32 inputs is correctly rounded, so the double reference rounded to float is exact.
TEST_F(DataExecutorTest, MathBinaryOpsWithEqualRowAndColumnShapes) {
  constexpr uint64_t R = 3, C = 5;
  const std::vector<float> x = Random(R * C, 71, -3.0f, 3.0f);
  const std::vector<float> y = Random(R * C, 72, 0.5f, 2.0f);
  Put(Tcm(0, pb::FP32, {R, C}), x);
  Put(Tcm(0x100, pb::FP32, {R, C}), y);
  struct Case {
    Shape y_shape;
    bool swap;  // the broadcast operand is inputs[0]
  };
  const Case cases[] = {{{R, C}, false}, {{1, C}, false}, {{R, 1}, false},
                        {{1, C}, true},  {{R, 1}, true}};
  for (pb::MathOp op : {pb::ADD, pb::SUB, pb::MUL, pb::DIV, pb::MAXIMUM}) {
    for (const Case& c : cases) {
      const pb::TensorRef xr = Tcm(0, pb::FP32, {R, C});
      const pb::TensorRef yr = Tcm(0x100, pb::FP32, c.y_shape);  // the first elements of y
      const pb::TensorRef out = Tcm(0x1000, pb::FP32, {R, C});
      const pb::MathCmd cmd = c.swap ? Math(op, {yr, xr}, out) : Math(op, {xr, yr}, out);
      ASSERT_TRUE(exec_.Execute(cmd).ok()) << cmd.DebugString();
      const std::vector<float> got = Get(out);
      for (uint64_t r = 0; r < R; ++r) {
        for (uint64_t k = 0; k < C; ++k) {
          const uint64_t yi = (c.y_shape[0] == 1 ? 0 : r) * c.y_shape[1] +
                              (c.y_shape[1] == 1 ? 0 : k);
          const double xv = x[r * C + k];
          const double yv = y[yi];
          const float want =
              static_cast<float>(c.swap ? RefBinary(op, yv, xv) : RefBinary(op, xv, yv));
          ASSERT_EQ(got[r * C + k], want)
              << pb::MathOp_Name(op) << " y [" << c.y_shape[0] << ", " << c.y_shape[1]
              << "] swap " << c.swap << " at " << r << "," << k;
        }
      }
    }
  }
}

TEST_F(DataExecutorTest, MathBinaryOpInPlaceAndMaximumPropagatesNan) {
  Put(Tcm(0, pb::FP32, {2, 2}), {1, -kInf, NAN, 4});
  Put(Tcm(0x100, pb::FP32, {1, 2}), {0, 5});
  ASSERT_TRUE(exec_.Execute(Math(pb::MAXIMUM, {Tcm(0, pb::FP32, {2, 2}),
                                               Tcm(0x100, pb::FP32, {1, 2})},
                                 Tcm(0, pb::FP32, {2, 2})))
                  .ok());
  const std::vector<float> got = Get(Tcm(0, pb::FP32, {2, 2}));
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 5);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], 5);
}

TEST_F(DataExecutorTest, MathUnaryOps) {
  const std::vector<float> x = Random(12, 81, -4.0f, 4.0f);
  const pb::TensorRef in = Tcm(0, pb::FP32, {3, 4});
  Put(in, x);
  ASSERT_TRUE(exec_.Execute(Math(pb::EXP, {in}, Tcm(0x100, pb::FP32, {3, 4}))).ok());
  ASSERT_TRUE(exec_.Execute(Math(pb::SCALE, {in}, Tcm(0x200, pb::FP32, {3, 4}), -1, -0.3f)).ok());
  ASSERT_TRUE(exec_.Execute(Math(pb::COPY, {in}, Tcm(0x300, pb::BF16, {3, 4}))).ok());
  const std::vector<float> e = Get(Tcm(0x100, pb::FP32, {3, 4}));
  const std::vector<float> s = Get(Tcm(0x200, pb::FP32, {3, 4}));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(e[i], std::exp(double{x[i]}), 2e-7 * std::exp(double{x[i]})) << i;
    EXPECT_EQ(s[i], static_cast<float>(double{x[i]} * double{-0.3f})) << i;
  }
  EXPECT_EQ(Get(Tcm(0x300, pb::BF16, {3, 4})), Bf16(x));

  // Same-dtype COPY is bit exact (a signalling NaN stays as it is).
  ASSERT_TRUE(store_.WriteElements(Tcm(0x400, pb::BF16, {2}), std::vector<uint8_t>{0x81, 0xFF, 0x80, 0x3F}).ok());
  ASSERT_TRUE(
      exec_.Execute(Math(pb::COPY, {Tcm(0x400, pb::BF16, {2})}, Tcm(0x500, pb::BF16, {2})))
          .ok());
  EXPECT_THAT(*store_.ReadElements(Tcm(0x500, pb::BF16, {2})), ElementsAre(0x81, 0xFF, 0x80, 0x3F));
}

TEST_F(DataExecutorTest, MathReductionsAlongBothAxesKeptAndRemoved) {
  constexpr uint64_t R = 4, C = 6;
  const std::vector<float> x = Random(R * C, 91, -10.0f, 10.0f);
  const pb::TensorRef in = Tcm(0, pb::FP32, {R, C});
  Put(in, x);
  struct Case {
    int axis;
    Shape out;
  };
  const Case cases[] = {{0, {1, C}}, {0, {C}}, {1, {R, 1}}, {-1, {R}}, {-1, {R, 1}}};
  for (pb::MathOp op : {pb::REDUCE_SUM, pb::REDUCE_MAX}) {
    for (const Case& c : cases) {
      const pb::TensorRef out = Tcm(0x1000, pb::FP32, c.out);
      ASSERT_TRUE(exec_.Execute(Math(op, {in}, out, c.axis)).ok());
      const std::vector<float> got = Get(out);
      const bool rows = c.axis == 0;  // reduce over rows: one result per column
      ASSERT_EQ(got.size(), rows ? C : R);
      for (uint64_t o = 0; o < got.size(); ++o) {
        double sum = 0, abs_sum = 0, max = -INFINITY;
        for (uint64_t j = 0; j < (rows ? R : C); ++j) {
          const double v = rows ? x[j * C + o] : x[o * C + j];
          sum += v;
          abs_sum += std::fabs(v);
          max = std::max(max, v);
        }
        if (op == pb::REDUCE_MAX) {
          EXPECT_EQ(got[o], max) << c.axis << " " << o;
        } else {
          EXPECT_NEAR(got[o], sum, kFp32Sum * abs_sum) << c.axis << " " << o;
        }
      }
    }
  }
}

TEST_F(DataExecutorTest, MathReduceMiddleAxisOfRank3) {
  const std::vector<float> x = Random(2 * 3 * 4, 92);
  Put(Tcm(0, pb::FP32, {2, 3, 4}), x);
  ASSERT_TRUE(exec_.Execute(Math(pb::REDUCE_MAX, {Tcm(0, pb::FP32, {2, 3, 4})},
                                 Tcm(0x100, pb::FP32, {2, 1, 4}), /*axis=*/1))
                  .ok());
  const std::vector<float> got = Get(Tcm(0x100, pb::FP32, {8}));
  for (uint64_t a = 0; a < 2; ++a) {
    for (uint64_t c = 0; c < 4; ++c) {
      float want = -kInf;
      for (uint64_t b = 0; b < 3; ++b) want = std::max(want, x[a * 12 + b * 4 + c]);
      EXPECT_EQ(got[a * 4 + c], want);
    }
  }
}

TEST_F(DataExecutorTest, MathTransposeNonSquare) {
  const std::vector<float> x = Bf16(Random(3 * 5, 93));
  Put(Hbm(0x10, pb::BF16, {3, 5}), x);
  ASSERT_TRUE(
      exec_.Execute(Math(pb::TRANSPOSE, {Hbm(0x10, pb::BF16, {3, 5})}, Tcm(0, pb::FP32, {5, 3})))
          .ok());
  const std::vector<float> got = Get(Tcm(0, pb::FP32, {5, 3}));
  for (uint64_t r = 0; r < 3; ++r) {
    for (uint64_t c = 0; c < 5; ++c) EXPECT_EQ(got[c * 3 + r], x[r * 5 + c]);
  }
}

TEST_F(DataExecutorTest, MathFillWithMinusInfinity) {
  ASSERT_TRUE(exec_.Execute(Math(pb::FILL, {}, Tcm(0, pb::BF16, {3, 1}), -1, -kInf)).ok());
  EXPECT_THAT(*store_.ReadElements(Tcm(0, pb::BF16, {3})),
              ElementsAre(0x80, 0xFF, 0x80, 0xFF, 0x80, 0xFF));
  ASSERT_TRUE(exec_.Execute(Math(pb::FILL, {}, Tcm(0x100, pb::FP32, {2, 3}, {8, 2}), -1, -kInf))
                  .ok());
  EXPECT_THAT(Get(Tcm(0x100, pb::FP32, {2, 3}, {8, 2})), Each(-kInf));
  EXPECT_THAT(Get(Tcm(0x100 + 4, pb::FP32, {2, 3}, {8, 2})), Each(0.0f));  // untouched gaps
}

TEST_F(DataExecutorTest, MathErrorsNameCommandRoleAndPe) {
  pb::MathCmd cmd = Math(pb::EXP, {Tcm(kTcm - 4, pb::FP32, {2})}, Tcm(0, pb::FP32, {2}));
  cmd.set_cmd_id(4);
  EXPECT_THAT(std::string(exec_.Execute(cmd).message()),
              HasSubstr("math cmd 4: inputs[0]: pe 3 (sip0.cube0.pe3): TCM bytes [0x3ffffc, "
                        "0x400004)"));
  cmd = Math(pb::ADD, {Tcm(0, pb::FP32, {2, 3}), Tcm(0x100, pb::FP32, {2, 2})},
             Tcm(0x200, pb::FP32, {2, 3}));
  EXPECT_THAT(std::string(exec_.Execute(cmd).message()),
              HasSubstr("inputs[1]: shape [2, 2] does not broadcast"));
  cmd = Math(pb::REDUCE_SUM, {Tcm(0, pb::FP32, {2, 3})}, Tcm(0x200, pb::FP32, {3}), 1);
  EXPECT_THAT(std::string(exec_.Execute(cmd).message()), HasSubstr("out: shape [3]"));
}

// ---- softmax_pv ----

// Three successive calls from m = -inf, l = 0, O = 0 give O / l = softmax(S * scale) . V over
// the concatenated keys. Row 2 of the first tile is fully masked (-inf).
TEST_F(DataExecutorTest, SoftmaxPvChainMatchesFloat64Softmax) {
  constexpr uint64_t R = 4, T = 16, D = 8, kTiles = 3;
  constexpr float kScale = 0.35f;
  const pb::TensorRef m = Tcm(0x10000, pb::FP32, {R, 1});
  const pb::TensorRef l = Tcm(0x10100, pb::FP32, {R});
  const pb::TensorRef o = Tcm(0x10200, pb::FP32, {R, D});
  ASSERT_TRUE(exec_.Execute(Math(pb::FILL, {}, m, -1, -kInf)).ok());
  ASSERT_TRUE(exec_.Execute(Math(pb::FILL, {}, l, -1, 0)).ok());
  ASSERT_TRUE(exec_.Execute(Math(pb::FILL, {}, o, -1, 0)).ok());

  std::vector<std::vector<float>> s(kTiles), v(kTiles);
  for (uint64_t j = 0; j < kTiles; ++j) {
    s[j] = Random(R * T, 100 + j, -4.0f, 4.0f);
    v[j] = Bf16(Random(T * D, 200 + j));
    if (j == 0) std::fill(s[j].begin() + 2 * T, s[j].begin() + 3 * T, -kInf);
    Put(Tcm(j * 0x1000, pb::FP32, {R, T}), s[j]);
    Put(Hbm(j * 0x1000, pb::BF16, {T, D}), v[j]);
    pb::SoftmaxPvCmd cmd;
    cmd.set_cmd_id(50 + j);
    *cmd.mutable_s() = Tcm(j * 0x1000, pb::FP32, {R, T});
    *cmd.mutable_v() = Hbm(j * 0x1000, pb::BF16, {T, D});
    *cmd.mutable_acc_m() = m;
    *cmd.mutable_acc_l() = l;
    *cmd.mutable_acc_o() = o;
    cmd.set_scale(kScale);
    ASSERT_TRUE(exec_.Execute(cmd).ok());
    if (j == 0) {  // the masked row is untouched, not NaN
      EXPECT_EQ(Get(m)[2], -kInf);
      EXPECT_EQ(Get(l)[2], 0.0f);
      for (uint64_t d = 0; d < D; ++d) EXPECT_EQ(Get(o)[2 * D + d], 0.0f);
    }
  }

  const std::vector<float> got_m = Get(m);
  const std::vector<float> got_l = Get(l);
  const std::vector<float> got_o = Get(o);
  for (uint64_t r = 0; r < R; ++r) {
    float want_m = -kInf;
    for (uint64_t j = 0; j < kTiles; ++j) {
      for (uint64_t t = 0; t < T; ++t) want_m = std::max(want_m, s[j][r * T + t] * kScale);
    }
    EXPECT_EQ(got_m[r], want_m) << r;
    double sum = 0;
    std::vector<double> pv(D, 0.0);
    for (uint64_t j = 0; j < kTiles; ++j) {
      for (uint64_t t = 0; t < T; ++t) {
        const double w = std::exp(double{s[j][r * T + t]} * kScale - want_m);
        sum += w;
        for (uint64_t d = 0; d < D; ++d) pv[d] += w * v[j][t * D + d];
      }
    }
    EXPECT_NEAR(got_l[r], sum, 1e-2 * sum) << r;
    for (uint64_t d = 0; d < D; ++d) {
      const double want = pv[d] / sum;
      EXPECT_NEAR(got_o[r * D + d] / got_l[r], want, 1e-2 * std::max(std::fabs(want), 0.1))
          << r << "," << d;
    }
  }
}

TEST_F(DataExecutorTest, SoftmaxPvShapeErrors) {
  pb::SoftmaxPvCmd cmd;
  cmd.set_cmd_id(70);
  *cmd.mutable_s() = Tcm(0, pb::FP32, {4, 16});
  *cmd.mutable_v() = Tcm(0x1000, pb::BF16, {16, 8});
  *cmd.mutable_acc_m() = Tcm(0x2000, pb::FP32, {4, 1});
  *cmd.mutable_acc_l() = Tcm(0x2100, pb::FP32, {4});
  *cmd.mutable_acc_o() = Tcm(0x2200, pb::FP32, {4, 7});
  cmd.set_scale(1);
  EXPECT_THAT(std::string(exec_.Execute(cmd).message()),
              HasSubstr("softmax_pv cmd 70: acc_o: shape [4, 7]"));
  *cmd.mutable_v() = Tcm(0x1000, pb::BF16, {15, 8});
  EXPECT_THAT(std::string(exec_.Execute(cmd).message()), HasSubstr("softmax_pv cmd 70: v"));
}

// ---- lse_merge (the decode reduce's fused merge, ADR rev2 §4) ----

// Two partial attentions of R = 6 rows, D = 16, each packed as one buffer [m | l | O] (the
// packed reduce payload): rows 0-2 have keys on both sides; row 3 has none on the incoming side,
// row 4 none on the accumulator side, row 5 none on either (m = the lowest finite float,
// l = 0, O = 0: lse_merge.h's kEmptyRowMax). Checked against a double reference, for NaN, and
// bit for bit against the 11 primitive MATH ops the PRIMITIVE merge issues.
TEST_F(DataExecutorTest, LseMergeMatchesDoubleReferenceAndThePrimitiveOps) {
  constexpr uint64_t R = 6, D = 16;
  constexpr float kEmpty = std::numeric_limits<float>::lowest();
  const uint64_t a_base = 0x10000, b_base = 0x20000, prim_base = 0x30000;
  const auto views = [&](uint64_t base) {
    return std::vector<pb::TensorRef>{Tcm(base, pb::FP32, {R, 1}), Tcm(base + 4 * R, pb::FP32, {R, 1}),
                                      Tcm(base + 8 * R, pb::FP32, {R, D})};
  };
  std::vector<float> ma = Random(R, 1, -3, 3), la = Random(R, 2, 0.5f, 20), oa = Random(R * D, 3, -5, 5);
  std::vector<float> mb = Random(R, 4, -3, 3), lb = Random(R, 5, 0.5f, 20), ob = Random(R * D, 6, -5, 5);
  const auto empty = [&](std::vector<float>& m, std::vector<float>& l, std::vector<float>& o,
                         uint64_t row) {
    m[row] = kEmpty;
    l[row] = 0;
    std::fill(o.begin() + row * D, o.begin() + (row + 1) * D, 0.0f);
  };
  empty(mb, lb, ob, 3);
  empty(ma, la, oa, 4);
  empty(ma, la, oa, 5);
  empty(mb, lb, ob, 5);
  const std::vector<pb::TensorRef> a = views(a_base), b = views(b_base), prim = views(prim_base);
  for (const auto& [t, v] : {std::pair{&a, std::vector<std::vector<float>>{ma, la, oa}},
                             std::pair{&b, std::vector<std::vector<float>>{mb, lb, ob}},
                             std::pair{&prim, std::vector<std::vector<float>>{ma, la, oa}}}) {
    for (int i = 0; i < 3; ++i) Put((*t)[i], v[i]);
  }

  pb::LseMergeCmd cmd;
  cmd.set_cmd_id(80);
  *cmd.mutable_acc_m() = a[0];
  *cmd.mutable_acc_l() = a[1];
  *cmd.mutable_acc_o() = a[2];
  *cmd.mutable_in_m() = b[0];
  *cmd.mutable_in_l() = b[1];
  *cmd.mutable_in_o() = b[2];
  *cmd.mutable_out_m() = a[0];  // in place, as the FUSED reduce issues it
  *cmd.mutable_out_l() = a[1];
  *cmd.mutable_out_o() = a[2];
  ASSERT_TRUE(exec_.Execute(cmd).ok());
  const std::vector<float> m = Get(a[0]), l = Get(a[1]), o = Get(a[2]);

  for (uint64_t r = 0; r < R; ++r) {
    const double mr = std::max<double>(ma[r], mb[r]);
    const double sa = std::exp(double{ma[r]} - mr), sb = std::exp(double{mb[r]} - mr);
    EXPECT_EQ(m[r], static_cast<float>(mr)) << r;
    EXPECT_NEAR(l[r], la[r] * sa + lb[r] * sb, 1e-5 * (la[r] * sa + lb[r] * sb) + 1e-30) << r;
    for (uint64_t c = 0; c < D; ++c) {
      const double want = oa[r * D + c] * sa + ob[r * D + c] * sb;
      EXPECT_NEAR(o[r * D + c], want, 1e-5 * (std::fabs(oa[r * D + c] * sa) + std::fabs(ob[r * D + c] * sb)) + 1e-30)
          << r << "," << c;
    }
  }
  for (const std::vector<float>* v : {&m, &l, &o}) {
    for (float x : *v) EXPECT_FALSE(std::isnan(x));
  }
  // An empty side leaves the other unchanged; two empty sides stay l = 0, O = 0.
  for (uint64_t r : {3, 4}) {
    const bool a_has_keys = r == 3;
    EXPECT_EQ(m[r], a_has_keys ? ma[r] : mb[r]);
    EXPECT_EQ(l[r], a_has_keys ? la[r] : lb[r]);
    for (uint64_t c = 0; c < D; ++c) EXPECT_EQ(o[r * D + c], a_has_keys ? oa[r * D + c] : ob[r * D + c]);
  }
  EXPECT_EQ(m[5], kEmpty);
  EXPECT_EQ(l[5], 0.0f);
  for (uint64_t c = 0; c < D; ++c) EXPECT_EQ(o[5 * D + c], 0.0f);

  // The primitive merge (kernels/attention/lse_merge.cc) on the copy, op by op.
  const pb::TensorRef mm = Tcm(0x40000, pb::FP32, {R, 1}), da = Tcm(0x40100, pb::FP32, {R, 1}),
                      sa = Tcm(0x40200, pb::FP32, {R, 1}), db = Tcm(0x40300, pb::FP32, {R, 1}),
                      sb = Tcm(0x40400, pb::FP32, {R, 1}), lbs = Tcm(0x40500, pb::FP32, {R, 1}),
                      obs = Tcm(0x41000, pb::FP32, {R, D});
  for (const pb::MathCmd& op :
       {Math(pb::MAXIMUM, {prim[0], b[0]}, mm), Math(pb::SUB, {prim[0], mm}, da),
        Math(pb::EXP, {da}, sa), Math(pb::SUB, {b[0], mm}, db), Math(pb::EXP, {db}, sb),
        Math(pb::MUL, {prim[1], sa}, prim[1]), Math(pb::MUL, {b[1], sb}, lbs),
        Math(pb::ADD, {prim[1], lbs}, prim[1]), Math(pb::MUL, {prim[2], sa}, prim[2]),
        Math(pb::MUL, {b[2], sb}, obs), Math(pb::ADD, {prim[2], obs}, prim[2])}) {
    ASSERT_TRUE(exec_.Execute(op).ok()) << op.ShortDebugString();
  }
  EXPECT_EQ(Get(mm), m);
  EXPECT_EQ(Get(prim[1]), l);
  EXPECT_EQ(Get(prim[2]), o);
}

TEST_F(DataExecutorTest, LseMergeShapeErrors) {
  pb::LseMergeCmd cmd;
  cmd.set_cmd_id(81);
  *cmd.mutable_acc_m() = Tcm(0, pb::FP32, {4, 1});
  *cmd.mutable_acc_l() = Tcm(0x100, pb::FP32, {4});
  *cmd.mutable_acc_o() = Tcm(0x200, pb::FP32, {4, 8});
  *cmd.mutable_in_m() = Tcm(0x1000, pb::FP32, {4, 1});
  *cmd.mutable_in_l() = Tcm(0x1100, pb::FP32, {3});
  *cmd.mutable_in_o() = Tcm(0x1200, pb::FP32, {4, 8});
  *cmd.mutable_out_m() = cmd.acc_m();
  *cmd.mutable_out_l() = cmd.acc_l();
  *cmd.mutable_out_o() = cmd.acc_o();
  EXPECT_THAT(std::string(exec_.Execute(cmd).message()), HasSubstr("lse_merge cmd 81: in_l: shape [3]"));
  *cmd.mutable_in_l() = Tcm(0x1100, pb::FP32, {4});
  *cmd.mutable_in_o() = Tcm(0x1200, pb::FP32, {4, 7});
  EXPECT_THAT(std::string(exec_.Execute(cmd).message()), HasSubstr("lse_merge cmd 81: in_o: shape [4, 7]"));
}

}  // namespace
}  // namespace ahbm::kernels
