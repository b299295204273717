#include "actors/command_check.h"
#include "actors/tensor_ref.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "topology/ids.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Shape = std::vector<uint64_t>;

// absl::string_view is not std::string_view here; gmock prints a std::string readably.
std::string Message(const absl::Status& status) { return std::string(status.message()); }

std::string Hex(uint64_t value) { return absl::StrCat("0x", absl::Hex(value)); }

// A chip and the PEs a row talks about; every number comes from the loaded topology.
struct ChipCase {
  const char* label;
  const char* path;
  topology::PeId issuer;
};

struct Env {
  pb::Chip chip;
  uint32_t pe = 0;    // the issuing PE (global index)
  uint32_t peer = 0;  // another PE of the issuer's CUBE
  uint32_t far = 0;   // a PE of another CUBE
  uint32_t num_pes = 0;
  uint64_t tcm = 0;     // tcm.total_bytes
  uint64_t region = 0;  // hbm_bytes / pes

  // "pe 3 (sip0.cube0.pe3)", written out independently of the checker.
  std::string Name(uint32_t global_pe) const {
    const topology::PeId id = topology::ChipIndex(chip).PeOf(global_pe);
    return absl::StrCat("pe ", global_pe, " (sip", id.sip, ".cube", id.cube, ".pe", id.pe, ")");
  }
};

Env MakeEnv(const ChipCase& c) {
  Env env;
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(c.path);
  EXPECT_TRUE(chip.ok()) << chip.status();
  if (!chip.ok()) return env;
  env.chip = *chip;
  const topology::ChipIndex index(env.chip);
  const topology::PeId peer{c.issuer.sip, c.issuer.cube, (c.issuer.pe + 1) % index.pes_per_cube()};
  const topology::PeId far{c.issuer.sip, (c.issuer.cube + 1) % index.cubes_per_sip(), c.issuer.pe};
  env.pe = index.GlobalPe(c.issuer);
  env.peer = index.GlobalPe(peer);
  env.far = index.GlobalPe(far);
  env.num_pes = index.num_pes();
  env.tcm = env.chip.sip().cube().pe().tcm().total_bytes();
  env.region = env.chip.sip().cube().hbm_bytes() / env.chip.sip().cube().pes();
  return env;
}

const ChipCase kChips[] = {
    {"small", "topology/small.textproto", {0, 0, 3}},
    {"chip4sip", "topology/chip_4sip.textproto", {2, 5, 6}},
};

pb::TensorRef Tensor(pb::MemorySpace space, uint32_t pe, uint64_t addr, pb::DType dtype,
                     const Shape& shape, const Shape& strides = {}) {
  return MakeTensorRef(space, pe, addr, dtype, shape, strides);
}
pb::TensorRef Tcm(const Env& env, uint64_t addr, pb::DType dtype, const Shape& shape,
                  const Shape& strides = {}) {
  return Tensor(pb::TCM, env.pe, addr, dtype, shape, strides);
}
pb::TensorRef Hbm(uint32_t owner, uint64_t addr, pb::DType dtype, const Shape& shape,
                  const Shape& strides = {}) {
  return Tensor(pb::HBM, owner, addr, dtype, shape, strides);
}
void SetShape(pb::TensorRef& t, const Shape& shape) {
  t.clear_shape();
  for (uint64_t d : shape) t.add_shape(d);
}

// Valid base commands; rows break exactly one thing.
pb::CompositeCmd Composite(const Env& env) {
  pb::CompositeCmd cmd;
  cmd.set_cmd_id(17);
  *cmd.mutable_a() = Tcm(env, 0, pb::BF16, {8, 32});
  *cmd.mutable_b() = Hbm(env.pe, 0, pb::BF16, {32, 128});
  *cmd.mutable_out() = Tcm(env, 0x10000, pb::FP32, {8, 128});
  pb::EpilogueStage* scale = cmd.add_epilogue();
  scale->set_op(pb::SCALE);
  scale->set_scalar(0.125f);
  cmd.add_depends_on(3);
  cmd.add_depends_on(16);
  return cmd;
}
pb::EpilogueStage* AddStage(pb::CompositeCmd& cmd, pb::MathOp op) {
  pb::EpilogueStage* stage = cmd.add_epilogue();
  stage->set_op(op);
  return stage;
}

pb::GemmCmd Gemm(const Env& env) {
  pb::GemmCmd cmd;
  cmd.set_cmd_id(5);
  *cmd.mutable_a() = Tcm(env, 0, pb::BF16, {8, 32});
  *cmd.mutable_b() = Tcm(env, 0x1000, pb::BF16, {32, 128});
  *cmd.mutable_out() = Tcm(env, 0x10000, pb::FP32, {8, 128});
  return cmd;
}

// ADD of two [8, 128] fp32 tensors; `op` replaces ADD (the inputs stay).
pb::MathCmd Math(const Env& env, pb::MathOp op = pb::ADD) {
  pb::MathCmd cmd;
  cmd.set_cmd_id(4);
  cmd.set_op(op);
  *cmd.add_inputs() = Tcm(env, 0, pb::FP32, {8, 128});
  *cmd.add_inputs() = Tcm(env, 0x1000, pb::FP32, {8, 128});
  *cmd.mutable_out() = Tcm(env, 0x2000, pb::FP32, {8, 128});
  return cmd;
}
// A one-input MATH op: inputs[0] [8, 128] fp32, out of `out` shape.
pb::MathCmd Unary(const Env& env, pb::MathOp op, const Shape& out) {
  pb::MathCmd cmd = Math(env, op);
  cmd.mutable_inputs()->RemoveLast();
  SetShape(*cmd.mutable_out(), out);
  return cmd;
}

pb::SoftmaxPvCmd SoftmaxPv(const Env& env) {
  pb::SoftmaxPvCmd cmd;
  cmd.set_cmd_id(21);
  *cmd.mutable_s() = Tcm(env, 0, pb::FP32, {8, 32});
  *cmd.mutable_v() = Hbm(env.pe, 0, pb::BF16, {32, 128});
  *cmd.mutable_acc_m() = Tcm(env, 0x1000, pb::FP32, {8, 1});
  *cmd.mutable_acc_l() = Tcm(env, 0x1100, pb::FP32, {8, 1});
  *cmd.mutable_acc_o() = Tcm(env, 0x2000, pb::FP32, {8, 128});
  cmd.set_scale(0.125f);
  cmd.add_depends_on(20);
  return cmd;
}

pb::DmaCmd Dma(const Env& env) {
  pb::DmaCmd cmd;
  cmd.set_cmd_id(9);
  *cmd.mutable_src() = Hbm(env.pe, 0, pb::BF16, {32, 128});
  *cmd.mutable_dst() = Tcm(env, 0, pb::BF16, {32, 128});
  return cmd;
}

// The decode reduce's fused merge, in place: acc [8, 1] / [8, 1] / [8, 128], in likewise.
pb::LseMergeCmd LseMerge(const Env& env) {
  pb::LseMergeCmd cmd;
  cmd.set_cmd_id(30);
  *cmd.mutable_acc_m() = Tcm(env, 0x1000, pb::FP32, {8, 1});
  *cmd.mutable_acc_l() = Tcm(env, 0x1100, pb::FP32, {8, 1});
  *cmd.mutable_acc_o() = Tcm(env, 0x2000, pb::FP32, {8, 128});
  *cmd.mutable_in_m() = Tcm(env, 0x4000, pb::FP32, {8, 1});
  *cmd.mutable_in_l() = Tcm(env, 0x4100, pb::FP32, {8, 1});
  *cmd.mutable_in_o() = Tcm(env, 0x5000, pb::FP32, {8, 128});
  *cmd.mutable_out_m() = cmd.acc_m();
  *cmd.mutable_out_l() = cmd.acc_l();
  *cmd.mutable_out_o() = cmd.acc_o();
  cmd.add_depends_on(29);
  return cmd;
}

using Cmd = std::variant<pb::CompositeCmd, pb::GemmCmd, pb::MathCmd, pb::SoftmaxPvCmd, pb::DmaCmd,
                         pb::LseMergeCmd>;
constexpr const char* kKinds[] = {"composite", "gemm", "math", "softmax_pv", "dma", "lse_merge"};

absl::Status CheckCmd(const CommandChecker& checker, const Cmd& cmd) {
  return std::visit([&](const auto& c) { return checker.Check(c); }, cmd);
}
uint64_t CmdId(const Cmd& cmd) {
  return std::visit([](const auto& c) { return c.cmd_id(); }, cmd);
}

// Applies `edit` to a copy of `cmd`.
template <typename C, typename F>
Cmd Edit(C cmd, F edit) {
  edit(cmd);
  return cmd;
}

struct BadRow {
  const char* name;
  std::function<Cmd(const Env&)> make;
  std::function<std::vector<std::string>(const Env&)> expect;  // substrings after the prefix
};

// One row per reason.
std::vector<BadRow> BadRows() {
  using S = std::vector<std::string>;
  return {
      // ---- TensorRef ----
      {"SpaceUnset",
       [](const Env& e) {
         return Edit(Composite(e), [](auto& c) { c.mutable_a()->clear_space(); });
       },
       [](const Env&) {
         return S{"operand a: memory space is MEMORY_SPACE_UNSPECIFIED; want HBM or TCM"};
       }},
      {"TensorMissing",
       [](const Env& e) { return Edit(Composite(e), [](auto& c) { c.clear_out(); }); },
       [](const Env&) { return S{"out: memory space is MEMORY_SPACE_UNSPECIFIED"}; }},
      {"DTypeUnset",
       [](const Env& e) {
         return Edit(Gemm(e), [](auto& c) { c.mutable_b()->set_dtype(pb::DTYPE_UNSPECIFIED); });
       },
       [](const Env&) {
         return S{"operand b: dtype is DTYPE_UNSPECIFIED; want BF16 (2 bytes) or FP32 (4 bytes)"};
       }},
      {"RankZero",
       [](const Env& e) {
         return Edit(Math(e), [](auto& c) { c.mutable_inputs(0)->clear_shape(); });
       },
       [](const Env&) { return S{"inputs[0]: shape is empty (rank 0)"}; }},
      {"ZeroDim",
       [](const Env& e) {
         return Edit(Math(e), [](auto& c) { SetShape(*c.mutable_out(), {8, 0}); });
       },
       [](const Env&) { return S{"out: shape [8, 0] has a zero dim (dim 1)"}; }},
      {"StridesRank",
       [](const Env& e) { return Edit(Dma(e), [](auto& c) { c.mutable_src()->add_strides(1); }); },
       [](const Env&) { return S{"src: strides [1] has 1 entries but shape [32, 128] has 2"}; }},
      {"StrideZero",
       [](const Env& e) {
         return Edit(Dma(e), [&](auto& c) {
           *c.mutable_src() = Hbm(e.pe, 0, pb::BF16, {32, 128}, {0, 1});
         });
       },
       [](const Env&) {
         return S{"src: dim 0 of shape [32, 128] has stride 0 (a broadcast view)"};
       }},
      {"TooManyElements",
       [](const Env& e) {
         return Edit(Math(e), [](auto& c) {
           SetShape(*c.mutable_out(), {1ull << 32, 1ull << 32});
         });
       },
       [](const Env&) {
         return S{"out: shape [4294967296, 4294967296] holds 2^64 or more elements"};
       }},
      {"TcmOfAnotherPe",
       [](const Env& e) {
         return Edit(Math(e), [&](auto& c) { c.mutable_inputs(1)->set_pe(e.peer); });
       },
       [](const Env& e) {
         return S{absl::StrCat("inputs[1]: TCM of ", e.Name(e.peer), " is not this PE's")};
       }},
      {"TcmOverflow",
       [](const Env& e) {
         pb::MathCmd cmd = Unary(e, pb::EXP, {16, 128});
         SetShape(*cmd.mutable_inputs(0), {16, 128});
         cmd.mutable_out()->set_addr(e.tcm - 0x1000);  // 8 KiB from 4 KiB below the end
         return Cmd(cmd);
       },
       [](const Env& e) {
         return S{absl::StrCat("out: TCM range [", Hex(e.tcm - 0x1000), ", ", Hex(e.tcm + 0x1000),
                               ") exceeds the PE's TCM of ", e.tcm, " bytes (TCM overflow)")};
       }},
      {"TcmOverflowByStrides",  // dense it would fit; the row stride pushes the last row out
       [](const Env& e) {
         const uint64_t row = (e.tcm / 4 + 6) / 7;
         return Edit(Gemm(e), [&](auto& c) {
           *c.mutable_out() = Tcm(e, 0x10000, pb::FP32, {8, 128}, {row, 1});
         });
       },
       [](const Env& e) {
         const uint64_t row = (e.tcm / 4 + 6) / 7;
         return S{absl::StrCat("out: TCM range [0x10000, ", Hex(0x10000 + (7 * row + 128) * 4),
                               ") exceeds the PE's TCM of ", e.tcm, " bytes (TCM overflow)")};
       }},
      {"TcmAbsurdExtent",
       [](const Env& e) {
         return Edit(Gemm(e), [&](auto& c) {
           *c.mutable_out() = Tcm(e, 0x10000, pb::FP32, {8, 128}, {1ull << 62, 1});
         });
       },
       [](const Env&) {
         return S{"out: TCM range [0x10000, beyond 2^64)", "(TCM overflow)"};
       }},
      {"HbmNoSuchPe",
       [](const Env& e) {
         return Edit(Dma(e), [&](auto& c) { c.mutable_src()->set_pe(e.num_pes); });
       },
       [](const Env& e) {
         return S{absl::StrCat("src: HBM of pe ", e.num_pes, ": no such PE (the chip has ",
                               e.num_pes, " PEs)")};
       }},
      {"HbmOfAnotherCube",
       [](const Env& e) {
         return Edit(Composite(e), [&](auto& c) { c.mutable_b()->set_pe(e.far); });
       },
       [](const Env& e) {
         return S{absl::StrCat("operand b: HBM of ", e.Name(e.far), " is in another CUBE"),
                  "data in another CUBE must travel over the NOC"};
       }},
      {"HbmOutsideRegion",
       [](const Env& e) {
         return Edit(Dma(e), [&](auto& c) { c.mutable_src()->set_addr(e.region - 0x1000); });
       },
       [](const Env& e) {
         return S{absl::StrCat("src: HBM range [", Hex(e.region - 0x1000), ", ",
                               Hex(e.region + 0x1000), ") of ", e.Name(e.pe),
                               " is outside the owner's region [0x0, ", Hex(e.region), ")")};
       }},
      {"HbmRemoteOutsideRegion",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [&](auto& c) {
           *c.mutable_v() = Hbm(e.peer, e.region - 0x100, pb::BF16, {32, 128});
         });
       },
       [](const Env& e) {
         return S{absl::StrCat("v: HBM range [", Hex(e.region - 0x100), ", ",
                               Hex(e.region - 0x100 + 0x2000), ") of ", e.Name(e.peer),
                               " is outside the owner's region")};
       }},
      // ---- CompositeCmd ----
      {"CompositeRank3",
       [](const Env& e) {
         return Edit(Composite(e), [](auto& c) { SetShape(*c.mutable_a(), {1, 8, 32}); });
       },
       [](const Env&) {
         return S{"operand a: rank 3 (shape [1, 8, 32]); want rank 2 [M, K] (no batch dims)"};
       }},
      {"CompositeKMismatch",
       [](const Env& e) {
         return Edit(Composite(e), [](auto& c) { SetShape(*c.mutable_b(), {64, 128}); });
       },
       [](const Env&) {
         return S{"operand b: shape [64, 128] does not match operand a's K = 32 (a is [8, 32])"};
       }},
      {"CompositeOutMismatch",
       [](const Env& e) {
         return Edit(Composite(e), [](auto& c) { SetShape(*c.mutable_out(), {8, 64}); });
       },
       [](const Env&) {
         return S{
             "out: shape [8, 64] does not match [M, N] = [8, 128] (a is [8, 32], b is "
             "[32, 128])"};
       }},
      {"EpilogueNotElementwise",
       [](const Env& e) {
         return Edit(Composite(e), [](auto& c) { c.mutable_epilogue(0)->set_op(pb::REDUCE_MAX); });
       },
       [](const Env&) {
         return S{
             "epilogue[0]: op REDUCE_MAX is not an elementwise epilogue op (want SCALE, ADD, "
             "SUB, MUL, DIV, MAXIMUM or EXP)"};
       }},
      {"EpilogueOpUnset",
       [](const Env& e) {
         return Edit(Composite(e), [](auto& c) { AddStage(c, pb::MATH_OP_UNSPECIFIED); });
       },
       [](const Env&) { return S{"epilogue[1]: op MATH_OP_UNSPECIFIED is not an elementwise"}; }},
      {"EpilogueScaleWithOperand",
       [](const Env& e) {
         return Edit(Composite(e), [&](auto& c) {
           *c.mutable_epilogue(0)->mutable_operand() = Tcm(e, 0x20000, pb::FP32, {8, 128});
         });
       },
       [](const Env&) { return S{"epilogue[0]: SCALE takes no tensor operand"}; }},
      {"EpilogueScaleNotFinite",
       [](const Env& e) {
         return Edit(Composite(e), [](auto& c) {
           c.mutable_epilogue(0)->set_scalar(std::numeric_limits<float>::quiet_NaN());
         });
       },
       [](const Env&) { return S{"epilogue[0]: SCALE scalar nan is not finite"}; }},
      {"EpilogueOperandShape",
       [](const Env& e) {
         return Edit(Composite(e), [&](auto& c) {
           *AddStage(c, pb::ADD)->mutable_operand() = Tcm(e, 0x20000, pb::FP32, {8, 64});
         });
       },
       [](const Env&) {
         return S{
             "epilogue[1] operand: shape [8, 64] does not broadcast over out [8, 128] (want "
             "[8, 128], a row vector [1, 128] or a column vector [8, 1])"};
       }},
      {"EpilogueOperandOfAnotherCube",
       [](const Env& e) {
         return Edit(Composite(e), [&](auto& c) {
           *AddStage(c, pb::MUL)->mutable_operand() = Hbm(e.far, 0, pb::FP32, {1, 128});
         });
       },
       [](const Env& e) {
         return S{
             absl::StrCat("epilogue[1] operand: HBM of ", e.Name(e.far), " is in another CUBE")};
       }},
      {"CompositeDependsOnItself",
       [](const Env& e) { return Edit(Composite(e), [](auto& c) { c.set_depends_on(1, 17); }); },
       [](const Env&) {
         return S{
             "depends_on[1]: cmd 17 is not earlier than cmd 17; a command can only depend on "
             "earlier commands (ids < 17)"};
       }},
      {"CompositeDependsOnLater",
       [](const Env& e) { return Edit(Composite(e), [](auto& c) { c.set_depends_on(0, 40); }); },
       [](const Env&) { return S{"depends_on[0]: cmd 40 is not earlier than cmd 17"}; }},
      // ---- GemmCmd ----
      {"GemmKMismatch",
       [](const Env& e) {
         return Edit(Gemm(e), [](auto& c) { SetShape(*c.mutable_b(), {64, 128}); });
       },
       [](const Env&) {
         return S{"operand b: shape [64, 128] does not match operand a's K = 32 (a is [8, 32])"};
       }},
      {"GemmOutRank1",
       [](const Env& e) {
         return Edit(Gemm(e), [](auto& c) { SetShape(*c.mutable_out(), {1024}); });
       },
       [](const Env&) { return S{"out: rank 1 (shape [1024]); want rank 2 [M, N]"}; }},
      // ---- MathCmd ----
      {"MathOpUnset", [](const Env& e) { return Cmd(Math(e, pb::MATH_OP_UNSPECIFIED)); },
       [](const Env&) { return S{"op: is MATH_OP_UNSPECIFIED; want a MATH op"}; }},
      {"MathBinaryOneInput",
       [](const Env& e) {
         return Cmd(Unary(e, pb::ADD, {8, 128}));
       },
       [](const Env&) { return S{"inputs: ADD takes 2 inputs (got 1)"}; }},
      {"MathUnaryTwoInputs", [](const Env& e) { return Cmd(Math(e, pb::EXP)); },
       [](const Env&) { return S{"inputs: EXP takes 1 input (got 2)"}; }},
      {"MathFillWithInputs", [](const Env& e) { return Cmd(Math(e, pb::FILL)); },
       [](const Env&) { return S{"inputs: FILL takes 0 inputs (got 2)"}; }},
      {"MathNotBroadcastable",
       [](const Env& e) {
         return Edit(Math(e, pb::SUB), [](auto& c) { SetShape(*c.mutable_inputs(1), {8, 64}); });
       },
       [](const Env&) {
         return S{
             "inputs[1]: shape [8, 64] does not broadcast with inputs[0] [8, 128] (want equal "
             "shapes, or a [R, 1] column or [1, C] row vector over [R, C])"};
       }},
      {"MathOuterBroadcast",  // [R, 1] with [1, C]: neither operand is the full shape
       [](const Env& e) {
         return Edit(Math(e, pb::MUL), [](auto& c) {
           SetShape(*c.mutable_inputs(0), {8, 1});
           SetShape(*c.mutable_inputs(1), {1, 128});
         });
       },
       [](const Env&) {
         return S{"inputs[1]: shape [1, 128] does not broadcast with inputs[0] [8, 1]"};
       }},
      {"MathOutNotBroadcastShape",
       [](const Env& e) {
         return Edit(Math(e, pb::DIV), [](auto& c) {
           SetShape(*c.mutable_inputs(1), {8, 1});
           SetShape(*c.mutable_out(), {8, 1});
         });
       },
       [](const Env&) {
         return S{
             "out: shape [8, 1] does not match the broadcast shape [8, 128] of inputs [8, 128] "
             "and [8, 1]"};
       }},
      {"MathUnaryOutShape",
       [](const Env& e) {
         return Cmd(Unary(e, pb::EXP, {128, 8}));
       },
       [](const Env&) {
         return S{"out: shape [128, 8] does not match inputs[0] [8, 128] (EXP keeps the shape)"};
       }},
      {"MathScaleNotFinite",
       [](const Env& e) {
         return Edit(Unary(e, pb::SCALE, {8, 128}),
                     [](auto& c) { c.set_scalar(std::numeric_limits<float>::infinity()); });
       },
       [](const Env&) { return S{"scalar: SCALE scalar inf is not finite"}; }},
      {"MathReduceAxisTooLarge",
       [](const Env& e) {
         return Edit(Unary(e, pb::REDUCE_MAX, {8, 1}), [](auto& c) { c.set_axis(2); });
       },
       [](const Env&) {
         return S{"axis: 2 is not an axis of inputs[0] [8, 128] (want -1 or 0..1)"};
       }},
      {"MathReduceAxisNegative",
       [](const Env& e) {
         return Edit(Unary(e, pb::REDUCE_SUM, {8, 1}), [](auto& c) { c.set_axis(-2); });
       },
       [](const Env&) { return S{"axis: -2 is not an axis of inputs[0] [8, 128]"}; }},
      {"MathReduceOutShape",
       [](const Env& e) {
         return Edit(Unary(e, pb::REDUCE_SUM, {8, 128}), [](auto& c) { c.set_axis(-1); });
       },
       [](const Env&) {
         return S{
             "out: shape [8, 128] is not inputs[0] [8, 128] reduced over axis 1 (want [8, 1] "
             "or [8])"};
       }},
      {"MathTransposeRank",
       [](const Env& e) {
         return Edit(Unary(e, pb::TRANSPOSE, {128, 8}), [](auto& c) {
           SetShape(*c.mutable_inputs(0), {2, 8, 64});
         });
       },
       [](const Env&) {
         return S{"inputs[0]: TRANSPOSE takes a rank-2 input (got shape [2, 8, 64])"};
       }},
      {"MathTransposeOut",
       [](const Env& e) {
         return Cmd(Unary(e, pb::TRANSPOSE, {8, 128}));
       },
       [](const Env&) {
         return S{"out: shape [8, 128] is not the transpose [128, 8] of inputs[0] [8, 128]"};
       }},
      // ---- SoftmaxPvCmd ----
      {"SoftmaxTMismatch",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [](auto& c) { SetShape(*c.mutable_v(), {64, 128}); });
       },
       [](const Env&) { return S{"v: shape [64, 128] does not match s's T = 32 (s is [8, 32])"}; }},
      {"SoftmaxSRank",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [](auto& c) { SetShape(*c.mutable_s(), {1, 8, 32}); });
       },
       [](const Env&) { return S{"s: rank 3 (shape [1, 8, 32]); want rank 2 [R, T]"}; }},
      {"SoftmaxAccMShape",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [](auto& c) { SetShape(*c.mutable_acc_m(), {8, 2}); });
       },
       [](const Env&) {
         return S{"acc_m: shape [8, 2] is not [R, 1] or [R] with R = 8 (s is [8, 32])"};
       }},
      {"SoftmaxAccLShape",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [](auto& c) { SetShape(*c.mutable_acc_l(), {4}); });
       },
       [](const Env&) { return S{"acc_l: shape [4] is not [R, 1] or [R] with R = 8"}; }},
      {"SoftmaxAccOShape",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [](auto& c) { SetShape(*c.mutable_acc_o(), {8, 64}); });
       },
       [](const Env&) {
         return S{
             "acc_o: shape [8, 64] does not match [R, D] = [8, 128] (s is [8, 32], v is "
             "[32, 128])"};
       }},
      {"SoftmaxAccInHbm",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [&](auto& c) {
           *c.mutable_acc_o() = Hbm(e.pe, 0x10000, pb::FP32, {8, 128});
         });
       },
       [](const Env&) { return S{"acc_o: the accumulator must be in this PE's TCM (got HBM)"}; }},
      {"SoftmaxAccBf16",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [](auto& c) { c.mutable_acc_l()->set_dtype(pb::BF16); });
       },
       [](const Env&) { return S{"acc_l: the accumulator must be FP32 (got BF16)"}; }},
      {"SoftmaxAccOfAnotherPe",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [&](auto& c) { c.mutable_acc_m()->set_pe(e.peer); });
       },
       [](const Env& e) {
         return S{absl::StrCat("acc_m: TCM of ", e.Name(e.peer), " is not this PE's")};
       }},
      {"SoftmaxScaleZero",
       [](const Env& e) { return Edit(SoftmaxPv(e), [](auto& c) { c.set_scale(0); }); },
       [](const Env&) { return S{"scale: 0 must be finite and > 0"}; }},
      {"SoftmaxScaleNegative",
       [](const Env& e) { return Edit(SoftmaxPv(e), [](auto& c) { c.set_scale(-0.5f); }); },
       [](const Env&) { return S{"scale: -0.5 must be finite and > 0"}; }},
      {"SoftmaxScaleNan",
       [](const Env& e) {
         return Edit(SoftmaxPv(e),
                     [](auto& c) { c.set_scale(std::numeric_limits<float>::quiet_NaN()); });
       },
       [](const Env&) { return S{"scale: nan must be finite and > 0"}; }},
      {"SoftmaxDependsOnItself",
       [](const Env& e) { return Edit(SoftmaxPv(e), [](auto& c) { c.set_depends_on(0, 21); }); },
       [](const Env&) { return S{"depends_on[0]: cmd 21 is not earlier than cmd 21"}; }},
      // ---- LseMergeCmd ----
      {"LseMergeInOShape",
       [](const Env& e) {
         return Edit(LseMerge(e), [](auto& c) { SetShape(*c.mutable_in_o(), {8, 64}); });
       },
       [](const Env&) { return S{"in_o: shape [8, 64] does not match acc_o [8, 128]"}; }},
      {"LseMergeOutMRows",
       [](const Env& e) {
         return Edit(LseMerge(e), [](auto& c) { SetShape(*c.mutable_out_m(), {4, 1}); });
       },
       [](const Env&) {
         return S{"out_m: shape [4, 1] is not [R, 1] or [R] with R = 8 (acc_o is [8, 128])"};
       }},
      {"LseMergeAccORank",
       [](const Env& e) {
         return Edit(LseMerge(e), [](auto& c) { SetShape(*c.mutable_acc_o(), {1024}); });
       },
       [](const Env&) { return S{"acc_o: rank 1 (shape [1024]); want rank 2 [R, D]"}; }},
      {"LseMergeInHbm",
       [](const Env& e) {
         return Edit(LseMerge(e), [&](auto& c) {
           *c.mutable_in_l() = Hbm(e.pe, 0x10000, pb::FP32, {8, 1});
         });
       },
       [](const Env&) { return S{"in_l: lse_merge works in this PE's TCM (got HBM)"}; }},
      {"LseMergeBf16",
       [](const Env& e) {
         return Edit(LseMerge(e), [](auto& c) { c.mutable_out_o()->set_dtype(pb::BF16); });
       },
       [](const Env&) { return S{"out_o: m, l and O are FP32 (got BF16)"}; }},
      {"LseMergeDependsOnLater",
       [](const Env& e) { return Edit(LseMerge(e), [](auto& c) { c.set_depends_on(0, 31); }); },
       [](const Env&) { return S{"depends_on[0]: cmd 31 is not earlier than cmd 30"}; }},
      // ---- DmaCmd ----
      {"DmaHbmToHbm",
       [](const Env& e) {
         return Edit(Dma(e), [&](auto& c) {
           *c.mutable_dst() = Hbm(e.peer, 0, pb::BF16, {32, 128});
         });
       },
       [](const Env&) { return S{"dst: HBM to HBM is not a DMA path"}; }},
      {"DmaElementCount",
       [](const Env& e) {
         return Edit(Dma(e), [](auto& c) { SetShape(*c.mutable_dst(), {32, 64}); });
       },
       [](const Env&) {
         return S{"dst: shape [32, 64] holds 2048 elements but src [32, 128] holds 4096"};
       }},
      {"DmaDType",
       [](const Env& e) {
         return Edit(Dma(e), [](auto& c) { c.mutable_dst()->set_dtype(pb::FP32); });
       },
       [](const Env&) { return S{"dst: dtype FP32 differs from src's BF16"}; }},
      {"DmaSrcOfAnotherCube",
       [](const Env& e) { return Edit(Dma(e), [&](auto& c) { c.mutable_src()->set_pe(e.far); }); },
       [](const Env& e) {
         return S{absl::StrCat("src: HBM of ", e.Name(e.far), " is in another CUBE"),
                  "data in another CUBE must travel over the NOC"};
       }},
      {"DmaDstTcmOverflow",
       [](const Env& e) {
         return Edit(Dma(e), [&](auto& c) { c.mutable_dst()->set_addr(e.tcm - 0x1000); });
       },
       [](const Env& e) {
         return S{absl::StrCat("dst: TCM range [", Hex(e.tcm - 0x1000), ", ", Hex(e.tcm + 0x1000),
                               ") exceeds the PE's TCM of ", e.tcm, " bytes (TCM overflow)")};
       }},
  };
}

// Readable test parameters in failure messages.
void PrintTo(const ChipCase& c, std::ostream* os) { *os << c.label; }
void PrintTo(const BadRow& row, std::ostream* os) { *os << row.name; }

class BadCommandTest : public testing::TestWithParam<std::tuple<ChipCase, BadRow>> {};

TEST_P(BadCommandTest, FailsWithOneLineNamingPeCommandAndReason) {
  const auto& [chip_case, row] = GetParam();
  const Env env = MakeEnv(chip_case);
  const CommandChecker checker(env.chip, env.pe);
  const Cmd cmd = row.make(env);
  const absl::Status status = CheckCmd(checker, cmd);
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string message = Message(status);
  const std::string prefix =
      absl::StrCat(env.Name(env.pe), ": ", kKinds[cmd.index()], " cmd ", CmdId(cmd), ": ");
  EXPECT_THAT(message, StartsWith(prefix));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
  for (const std::string& part : row.expect(env)) EXPECT_THAT(message, HasSubstr(part));
  // The first expected part follows the prefix at once: "<pe>: <kind> cmd <id>: <role>: ...".
  EXPECT_THAT(message, StartsWith(prefix + row.expect(env).front().substr(0, 8)));
}

INSTANTIATE_TEST_SUITE_P(Reasons, BadCommandTest,
                         testing::Combine(testing::ValuesIn(kChips), testing::ValuesIn(BadRows())),
                         [](const auto& info) {
                           return absl::StrCat(std::get<1>(info.param).name, "_",
                                               std::get<0>(info.param).label);
                         });

struct GoodRow {
  const char* name;
  std::function<Cmd(const Env&)> make;
};

std::vector<GoodRow> GoodRows() {
  return {
      {"Composite", [](const Env& e) { return Cmd(Composite(e)); }},
      {"CompositeRemoteHbmOfSameCube",
       [](const Env& e) {
         return Edit(Composite(e), [&](auto& c) {
           c.mutable_b()->set_pe(e.peer);
           c.mutable_b()->set_addr(e.region - 32 * 128 * 2);  // ends exactly at the region's end
         });
       }},
      {"CompositeEpilogueBroadcasts",
       [](const Env& e) {
         return Edit(Composite(e), [&](auto& c) {
           *AddStage(c, pb::ADD)->mutable_operand() = Tcm(e, 0x20000, pb::FP32, {1, 128});
           *AddStage(c, pb::SUB)->mutable_operand() = Tcm(e, 0x21000, pb::FP32, {8, 1});
           *AddStage(c, pb::DIV)->mutable_operand() = Hbm(e.peer, 0, pb::FP32, {8, 128});
           AddStage(c, pb::MAXIMUM)->set_scalar(-std::numeric_limits<float>::infinity());
           AddStage(c, pb::EXP);
           AddStage(c, pb::MUL)->set_scalar(2);
         });
       }},
      {"CompositeNoEpilogueNoDepsOutBf16InHbm",
       [](const Env& e) {
         return Edit(Composite(e), [&](auto& c) {
           c.clear_epilogue();
           c.clear_depends_on();
           *c.mutable_out() = Hbm(e.pe, 0x100000, pb::BF16, {8, 128});
         });
       }},
      {"CompositeOutEndsAtTcmEnd",
       [](const Env& e) {
         return Edit(Composite(e),
                     [&](auto& c) { c.mutable_out()->set_addr(e.tcm - 8 * 128 * 4); });
       }},
      {"Gemm", [](const Env& e) { return Cmd(Gemm(e)); }},
      {"GemmStridedTcmOperand",  // a [32, 128] K tile of a [32, 512] tensor
       [](const Env& e) {
         return Edit(Gemm(e), [&](auto& c) {
           *c.mutable_b() = Tcm(e, 0x1000, pb::BF16, {32, 128}, {512, 1});
         });
       }},
      {"MathAddEqual", [](const Env& e) { return Cmd(Math(e)); }},
      {"MathSubColumnVector",
       [](const Env& e) {
         return Edit(Math(e, pb::SUB), [](auto& c) { SetShape(*c.mutable_inputs(1), {8, 1}); });
       }},
      {"MathMulRowVectorFirst",
       [](const Env& e) {
         return Edit(Math(e, pb::MUL), [](auto& c) { SetShape(*c.mutable_inputs(0), {1, 128}); });
       }},
      {"MathMaximumRank1",
       [](const Env& e) {
         return Edit(Math(e, pb::MAXIMUM), [](auto& c) {
           SetShape(*c.mutable_inputs(0), {8});
           SetShape(*c.mutable_inputs(1), {8});
           SetShape(*c.mutable_out(), {8});
         });
       }},
      {"MathExp",
       [](const Env& e) {
         return Cmd(Unary(e, pb::EXP, {8, 128}));
       }},
      {"MathScale",
       [](const Env& e) {
         return Edit(Unary(e, pb::SCALE, {8, 128}), [](auto& c) { c.set_scalar(0.125f); });
       }},
      {"MathCopyToBf16",
       [](const Env& e) {
         return Edit(Unary(e, pb::COPY, {8, 128}),
                     [](auto& c) { c.mutable_out()->set_dtype(pb::BF16); });
       }},
      {"MathReduceMaxLastAxisKept",
       [](const Env& e) {
         return Edit(Unary(e, pb::REDUCE_MAX, {8, 1}), [](auto& c) { c.set_axis(-1); });
       }},
      {"MathReduceSumLastAxisRemoved",
       [](const Env& e) {
         return Edit(Unary(e, pb::REDUCE_SUM, {8}), [](auto& c) { c.set_axis(1); });
       }},
      {"MathReduceMaxAxis0",
       [](const Env& e) {
         return Edit(Unary(e, pb::REDUCE_MAX, {1, 128}), [](auto& c) { c.set_axis(0); });
       }},
      {"MathReduceSumRank1",
       [](const Env& e) {
         return Edit(Unary(e, pb::REDUCE_SUM, {1}), [](auto& c) {
           c.set_axis(-1);
           SetShape(*c.mutable_inputs(0), {8});
         });
       }},
      {"MathTranspose",
       [](const Env& e) {
         return Cmd(Unary(e, pb::TRANSPOSE, {128, 8}));
       }},
      {"MathFill",
       [](const Env& e) {
         return Edit(Math(e, pb::FILL), [](auto& c) {
           c.clear_inputs();
           c.set_scalar(-std::numeric_limits<float>::infinity());
         });
       }},
      {"MathHbmInput",
       [](const Env& e) {
         return Edit(Math(e), [&](auto& c) {
           *c.mutable_inputs(1) = Hbm(e.pe, 0x4000, pb::FP32, {8, 128});
         });
       }},
      {"SoftmaxPv", [](const Env& e) { return Cmd(SoftmaxPv(e)); }},
      {"SoftmaxPvRank1AccsRemoteV",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [&](auto& c) {
           SetShape(*c.mutable_acc_m(), {8});
           SetShape(*c.mutable_acc_l(), {8});
           c.mutable_v()->set_pe(e.peer);
           c.clear_depends_on();
         });
       }},
      {"SoftmaxPvSAndVInTcm",
       [](const Env& e) {
         return Edit(SoftmaxPv(e), [&](auto& c) {
           *c.mutable_v() = Tcm(e, 0x10000, pb::BF16, {32, 128});
         });
       }},
      {"LseMergeInPlace", [](const Env& e) { return Cmd(LseMerge(e)); }},
      {"LseMergeRank1StatsIntoOtherBuffer",
       [](const Env& e) {
         return Edit(LseMerge(e), [&](auto& c) {
           SetShape(*c.mutable_in_m(), {8});
           SetShape(*c.mutable_in_l(), {8});
           *c.mutable_out_m() = Tcm(e, 0x8000, pb::FP32, {8, 1});
           *c.mutable_out_l() = Tcm(e, 0x8020, pb::FP32, {8});
           *c.mutable_out_o() = Tcm(e, 0x8040, pb::FP32, {8, 128});
         });
       }},
      {"DmaHbmToTcm", [](const Env& e) { return Cmd(Dma(e)); }},
      {"DmaTcmToRemoteHbm",
       [](const Env& e) {
         return Edit(Dma(e), [&](auto& c) {
           std::swap(*c.mutable_src(), *c.mutable_dst());
           c.mutable_dst()->set_pe(e.peer);
         });
       }},
      {"DmaTcmToTcmReshaped",
       [](const Env& e) {
         return Edit(Dma(e),
                     [&](auto& c) { *c.mutable_src() = Tcm(e, 0x10000, pb::BF16, {4096}); });
       }},
      {"DmaStridedKTile",  // a [32, 64] tile of a [32, 4096] HBM tensor
       [](const Env& e) {
         return Edit(Dma(e), [&](auto& c) {
           *c.mutable_src() = Hbm(e.pe, 0x80, pb::BF16, {32, 64}, {4096, 1});
           SetShape(*c.mutable_dst(), {32, 64});
         });
       }},
      {"DmaSrcEndsAtRegionEnd",
       [](const Env& e) {
         return Edit(Dma(e), [&](auto& c) { c.mutable_src()->set_addr(e.region - 32 * 128 * 2); });
       }},
  };
}

void PrintTo(const GoodRow& row, std::ostream* os) { *os << row.name; }

class GoodCommandTest : public testing::TestWithParam<std::tuple<ChipCase, GoodRow>> {};

TEST_P(GoodCommandTest, IsAccepted) {
  const auto& [chip_case, row] = GetParam();
  const Env env = MakeEnv(chip_case);
  const CommandChecker checker(env.chip, env.pe);
  EXPECT_TRUE(CheckCmd(checker, row.make(env)).ok()) << CheckCmd(checker, row.make(env));
}

INSTANTIATE_TEST_SUITE_P(Valid, GoodCommandTest,
                         testing::Combine(testing::ValuesIn(kChips), testing::ValuesIn(GoodRows())),
                         [](const auto& info) {
                           return absl::StrCat(std::get<1>(info.param).name, "_",
                                               std::get<0>(info.param).label);
                         });

TEST(CommandCheckerTest, CheckTensorNamesPeAndRole) {
  const Env env = MakeEnv(kChips[0]);
  const CommandChecker checker(env.chip, env.pe);
  EXPECT_EQ(checker.pe_name(), env.Name(env.pe));
  EXPECT_EQ(checker.tcm_bytes(), env.tcm);
  EXPECT_EQ(checker.region_bytes(), env.region);
  EXPECT_TRUE(checker.CheckTensor(Tcm(env, 0, pb::BF16, {8, 32}), "operand a").ok());

  pb::TensorRef bad = Tcm(env, env.tcm, pb::BF16, {1});
  const absl::Status status = checker.CheckTensor(bad, "operand a");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(status),
            absl::StrCat(env.Name(env.pe), ": operand a: TCM range [", Hex(env.tcm), ", ",
                         Hex(env.tcm + 2), ") exceeds the PE's TCM of ", env.tcm,
                         " bytes (TCM overflow)"));
}

TEST(CommandCheckerTest, BriefExampleMessageOnSmallChip) {
  const Env env = MakeEnv(kChips[0]);
  ASSERT_EQ(env.pe, 3u);
  const CommandChecker checker(env.chip, env.pe);
  pb::CompositeCmd cmd = Composite(env);
  SetShape(*cmd.mutable_b(), {64, 128});
  EXPECT_EQ(Message(checker.Check(cmd)),
            "pe 3 (sip0.cube0.pe3): composite cmd 17: operand b: shape [64, 128] does not match "
            "operand a's K = 32 (a is [8, 32])");
}

}  // namespace
}  // namespace ahbm::sim
