#include "actors/command_check.h"

#include "actors/tensor_ref.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/status_macros.h"

namespace ahbm::sim {
namespace {

using u128 = unsigned __int128;

constexpr u128 kBeyond = u128{1} << 64;

// A tensor's shape in place (the proto's own field): the checks compare dims without copying.
using Dims = DimsView;
bool Equal(Dims a, Dims b) { return std::ranges::equal(a, b); }
bool Equal(Dims a, std::initializer_list<uint64_t> b) { return std::ranges::equal(a, b); }

template <typename... Args>
absl::Status Fail(const CheckRole& role, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(role.Text(), ": ", args...));
}

// True when `operand` may be combined elementwise with a tensor of shape `full`: the same shape
// (any rank), or at rank 2 a row vector [1, C] or a column vector [R, 1] of `full` = [R, C].
bool BroadcastsOver(Dims operand, Dims full) {
  if (Equal(operand, full)) return true;
  if (operand.size() != 2 || full.size() != 2) return false;
  return (operand[0] == 1 && operand[1] == full[1]) || (operand[0] == full[0] && operand[1] == 1);
}

std::string BroadcastWant(const Shape& full) {
  if (full.size() != 2) return absl::StrCat("want ", ShapeText(full), " exactly");
  return absl::StrCat("want ", ShapeText(full), ", a row vector ", ShapeText({1, full[1]}),
                      " or a column vector ", ShapeText({full[0], 1}));
}

bool IsBinary(pb::MathOp op) {
  return op == pb::ADD || op == pb::SUB || op == pb::MUL || op == pb::DIV || op == pb::MAXIMUM;
}

absl::Status DependsOn(const google::protobuf::RepeatedField<uint64_t>& depends_on,
                       uint64_t cmd_id) {
  for (int i = 0; i < depends_on.size(); ++i) {
    if (depends_on[i] >= cmd_id) {
      return Fail(CheckRole("depends_on", i), "cmd ", depends_on[i],
                  " is not earlier than cmd ", cmd_id,
                  "; a command can only depend on earlier commands (ids < ", cmd_id, ")");
    }
  }
  return absl::OkStatus();
}

absl::Status Rank2(const pb::TensorRef& t, const CheckRole& role, const char* want) {
  if (t.shape_size() == 2) return absl::OkStatus();
  return Fail(role, "rank ", t.shape_size(), " (shape ", ShapeText(ShapeOf(t)), "); want rank 2 ", want,
              " (no batch dims)");
}

}  // namespace

std::string CheckRole::Text() const {
  std::string text(name);
  if (index >= 0) text += "[" + std::to_string(index) + "]";
  text += suffix;
  return text;
}

CommandChecker::CommandChecker(const pb::Chip& chip, uint32_t global_pe)
    : index_(chip),
      pe_(global_pe),
      tcm_bytes_(chip.sip().cube().pe().tcm().total_bytes()),
      region_bytes_(chip.sip().cube().pes() == 0
                        ? 0
                        : chip.sip().cube().hbm_bytes() / chip.sip().cube().pes()) {
  AHBM_CHECK(pe_ < index_.num_pes()) << "pe " << pe_ << " of " << index_.num_pes();
  AHBM_CHECK(tcm_bytes_ > 0 && region_bytes_ > 0) << "the topology was not validated";
  pe_name_ = PeName(pe_);
}

std::string PeName(const topology::ChipIndex& index, uint32_t global_pe) {
  if (global_pe >= index.num_pes()) return absl::StrCat("pe ", global_pe);
  const topology::PeId id = index.PeOf(global_pe);
  return absl::StrCat("pe ", global_pe, " (sip", id.sip, ".cube", id.cube, ".pe", id.pe, ")");
}

absl::Status CommandChecker::InCommand(const char* kind, uint64_t cmd_id,
                                       const absl::Status& status) const {
  if (status.ok()) return status;
  return absl::InvalidArgumentError(
      absl::StrCat(pe_name_, ": ", kind, " cmd ", cmd_id, ": ", status.message()));
}

absl::Status CommandChecker::CheckTensor(const pb::TensorRef& tensor, std::string_view role) const {
  const absl::Status status = Tensor(tensor, CheckRole(role, /*index=*/-1));
  if (status.ok()) return status;
  return absl::InvalidArgumentError(absl::StrCat(pe_name_, ": ", status.message()));
}

namespace {

// The fast path of Tensor's extent: the last element's offset when elements, the dense
// strides and the offset all fit 64 bits and no dim of more than one element has stride 0;
// false otherwise (the caller then works it out, or the error, in 128 bits).
bool LastOffset64(DimsView shape, DimsView strides, u128& last_out) {
  uint64_t elements = 1;
  uint64_t last = 0;
  bool overflow = false;
  for (size_t i = shape.size(); i-- > 0;) {
    const uint64_t stride = strides.empty() ? elements : strides[i];  // dense: the elements after
    if (stride == 0 && shape[i] > 1) return false;
    uint64_t step;
    overflow |= __builtin_mul_overflow(shape[i] - 1, stride, &step);
    overflow |= __builtin_add_overflow(last, step, &last);
    overflow |= __builtin_mul_overflow(elements, shape[i], &elements);
  }
  last_out = last;
  return !overflow;
}

}  // namespace

absl::Status CommandChecker::Tensor(const pb::TensorRef& t, const CheckRole& role) const {
  if (t.space() != pb::HBM && t.space() != pb::TCM) {
    return Fail(role, "memory space is ", SpaceText(t.space()), "; want HBM or TCM");
  }
  const uint64_t elem = DTypeBytes(t.dtype());
  if (elem == 0) {
    return Fail(role, "dtype is ", DTypeText(t.dtype()), "; want BF16 (2 bytes) or FP32 (4 bytes)");
  }
  // The proto's own fields (no copy: this runs for every operand of every command), read
  // through spans (RepeatedField's indexing is an out-of-line call); Shape copies only for an
  // error's text.
  const Dims shape = ShapeView(t);
  const Dims strides = StridesView(t);
  if (shape.empty()) return Fail(role, "shape is empty (rank 0); a tensor needs rank >= 1");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) {
      return Fail(role, "shape ", ShapeText(ShapeOf(t)), " has a zero dim (dim ", i,
                  "); an empty tensor is not a command operand");
    }
  }
  if (!strides.empty() && strides.size() != shape.size()) {
    return Fail(role, "strides ", ShapeText(StridesOf(t)), " has ", strides.size(), " entries but shape ",
                ShapeText(ShapeOf(t)), " has ", shape.size(), " (want none = dense, or one per dim)");
  }

  // Elements and the last element's offset: in 64 bits while nothing overflows (every real
  // operand), else again in 128 bits, saturating at 2^64 (every product there is < 2^128: a
  // factor <= 2^64 times a factor < 2^64).
  u128 last = 0;
  if (!LastOffset64(shape, strides, last)) {
    u128 elements = 1;
    u128 dense = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      const u128 stride = strides.empty() ? dense : u128{strides[i]};
      if (stride == 0 && shape[i] > 1) {
        return Fail(role, "dim ", i, " of shape ", ShapeText(ShapeOf(t)),
                    " has stride 0 (a broadcast view), which is not supported; broadcast with a "
                    "[1, N] row or [M, 1] column operand");
      }
      elements = std::min(elements * shape[i], kBeyond);
      dense = std::min(dense * shape[i], kBeyond);
      last = std::min(last + u128{shape[i] - 1} * stride, kBeyond);
    }
    if (elements >= kBeyond) {
      return Fail(role, "shape ", ShapeText(ShapeOf(t)), " holds 2^64 or more elements");
    }
  }
  const u128 begin = t.addr();
  const u128 end = begin + (last + 1) * elem;

  if (t.space() == pb::TCM) {
    if (t.pe() != pe_) {
      return Fail(role, "TCM of ", PeName(t.pe()),
                  " is not this PE's; a PE reaches only its own TCM");
    }
    if (end > tcm_bytes_) {
      return Fail(role, "TCM range [", Hex(t.addr()), ", ", EndText(end),
                  ") exceeds the PE's TCM of ", tcm_bytes_, " bytes (TCM overflow)");
    }
    return absl::OkStatus();
  }
  if (t.pe() >= index_.num_pes()) {
    return Fail(role, "HBM of pe ", t.pe(), ": no such PE (the chip has ", index_.num_pes(),
                " PEs)");
  }
  if (index_.PeOf(t.pe()).cube_id() != index_.PeOf(pe_).cube_id()) {
    return Fail(role, "HBM of ", PeName(t.pe()), " is in another CUBE than ", pe_name_,
                "; a PE reaches only its own CUBE's HBM channels, and data in another CUBE must "
                "travel over the NOC");
  }
  if (end > region_bytes_) {
    return Fail(role, "HBM range [", Hex(t.addr()), ", ", EndText(end), ") of ", PeName(t.pe()),
                " is outside the owner's region [0x0, ", Hex(region_bytes_), ")");
  }
  return absl::OkStatus();
}

absl::Status CommandChecker::GemmShapes(const pb::TensorRef& a, const pb::TensorRef& b,
                                        const pb::TensorRef& out) const {
  RETURN_IF_ERROR(Rank2(a, "operand a", "[M, K]"));
  RETURN_IF_ERROR(Rank2(b, "operand b", "[K, N]"));
  RETURN_IF_ERROR(Rank2(out, "out", "[M, N]"));
  const Dims sa = ShapeView(a);
  const Dims sb = ShapeView(b);
  if (sb[0] != sa[1]) {
    return Fail("operand b", "shape ", ShapeText(sb), " does not match operand a's K = ", sa[1],
                " (a is ", ShapeText(sa), ")");
  }
  if (!Equal(ShapeView(out), {sa[0], sb[1]})) {
    return Fail("out", "shape ", ShapeText(ShapeView(out)), " does not match [M, N] = ",
                ShapeText({sa[0], sb[1]}), " (a is ", ShapeText(sa), ", b is ", ShapeText(sb), ")");
  }
  return absl::OkStatus();
}

absl::Status CommandChecker::Epilogue(const pb::CompositeCmd& cmd) const {
  const Dims out = ShapeView(cmd.out());
  for (int i = 0; i < cmd.epilogue_size(); ++i) {
    const pb::EpilogueStage& stage = cmd.epilogue(i);
    const CheckRole role("epilogue", i);
    const pb::MathOp op = stage.op();
    if (!IsBinary(op) && op != pb::SCALE && op != pb::EXP) {
      return Fail(role, "op ", OpText(op),
                  " is not an elementwise epilogue op (want SCALE, ADD, SUB, MUL, DIV, MAXIMUM or "
                  "EXP)");
    }
    if (!IsBinary(op) && stage.has_operand()) {
      return Fail(role, OpText(op), " takes no tensor operand");
    }
    if (op == pb::SCALE && !std::isfinite(stage.scalar())) {
      return Fail(role, "SCALE scalar ", stage.scalar(), " is not finite");
    }
    if (!stage.has_operand()) continue;
    const CheckRole operand_role("epilogue", i, " operand");
    RETURN_IF_ERROR(Tensor(stage.operand(), operand_role));
    const Dims shape = ShapeView(stage.operand());
    if (!BroadcastsOver(shape, out)) {
      const Shape full(out.begin(), out.end());
      return Fail(operand_role, "shape ", ShapeText(shape), " does not broadcast over out ",
                  ShapeText(full), " (", BroadcastWant(full), ")");
    }
  }
  return absl::OkStatus();
}

absl::Status CommandChecker::Check(const pb::CompositeCmd& cmd) const {
  absl::Status status = Tensor(cmd.a(), "operand a");
  if (status.ok()) status = Tensor(cmd.b(), "operand b");
  if (status.ok()) status = Tensor(cmd.out(), "out");
  if (status.ok()) status = GemmShapes(cmd.a(), cmd.b(), cmd.out());
  if (status.ok()) status = Epilogue(cmd);
  if (status.ok()) status = DependsOn(cmd.depends_on(), cmd.cmd_id());
  return InCommand("composite", cmd.cmd_id(), status);
}

absl::Status CommandChecker::Check(const pb::GemmCmd& cmd) const {
  absl::Status status = Tensor(cmd.a(), "operand a");
  if (status.ok()) status = Tensor(cmd.b(), "operand b");
  if (status.ok()) status = Tensor(cmd.out(), "out");
  if (status.ok()) status = GemmShapes(cmd.a(), cmd.b(), cmd.out());
  return InCommand("gemm", cmd.cmd_id(), status);
}

absl::Status CommandChecker::Math(const pb::MathCmd& cmd) const {
  const pb::MathOp op = cmd.op();
  if (op == pb::MATH_OP_UNSPECIFIED || !pb::MathOp_IsValid(op)) {
    return Fail("op", "is ", OpText(op), "; want a MATH op");
  }
  const int want_inputs = IsBinary(op) ? 2 : op == pb::FILL ? 0 : 1;
  if (cmd.inputs_size() != want_inputs) {
    return Fail("inputs", OpText(op), " takes ", want_inputs, " input", want_inputs == 1 ? "" : "s",
                " (got ", cmd.inputs_size(), ")");
  }
  for (int i = 0; i < cmd.inputs_size(); ++i) {
    RETURN_IF_ERROR(Tensor(cmd.inputs(i), CheckRole("inputs", i)));
  }
  RETURN_IF_ERROR(Tensor(cmd.out(), "out"));
  if (op == pb::SCALE && !std::isfinite(cmd.scalar())) {
    return Fail("scalar", "SCALE scalar ", cmd.scalar(), " is not finite");
  }
  const Dims out = ShapeView(cmd.out());
  if (op == pb::FILL) return absl::OkStatus();
  const Dims in = ShapeView(cmd.inputs(0));

  if (IsBinary(op)) {
    const Dims other = ShapeView(cmd.inputs(1));
    Dims full;
    if (BroadcastsOver(other, in)) {
      full = in;
    } else if (BroadcastsOver(in, other)) {
      full = other;
    } else {
      return Fail("inputs[1]", "shape ", ShapeText(other), " does not broadcast with inputs[0] ",
                  ShapeText(in),
                  " (want equal shapes, or a [R, 1] column or [1, C] row vector over [R, C])");
    }
    if (!Equal(out, full)) {
      return Fail("out", "shape ", ShapeText(out), " does not match the broadcast shape ", ShapeText(full),
                  " of inputs ", ShapeText(in), " and ", ShapeText(other));
    }
    return absl::OkStatus();
  }
  if (op == pb::REDUCE_MAX || op == pb::REDUCE_SUM) {
    const int rank = static_cast<int>(in.size());
    const int axis = cmd.axis() == -1 ? rank - 1 : cmd.axis();
    if (axis < 0 || axis >= rank) {
      return Fail("axis", cmd.axis(), " is not an axis of inputs[0] ", ShapeText(in), " (want -1 or 0..",
                  rank - 1, ")");
    }
    // out is `in` with that axis set to 1 (kept) or removed.
    const size_t a = static_cast<size_t>(axis);
    bool kept_ok = out.size() == in.size();
    for (size_t j = 0; kept_ok && j < in.size(); ++j) kept_ok = out[j] == (j == a ? 1 : in[j]);
    bool removed_ok = in.size() >= 2 && out.size() + 1 == in.size();
    for (size_t j = 0; removed_ok && j < out.size(); ++j) removed_ok = out[j] == in[j < a ? j : j + 1];
    if (kept_ok || removed_ok) return absl::OkStatus();
    Shape kept(in.begin(), in.end());
    kept[axis] = 1;
    Shape removed(in.begin(), in.end());
    removed.erase(removed.begin() + axis);
    return Fail("out", "shape ", ShapeText(out), " is not inputs[0] ", ShapeText(in), " reduced over axis ",
                axis, " (want ", ShapeText(kept),
                removed.empty() ? std::string() : absl::StrCat(" or ", ShapeText(removed)), ")");
  }
  if (op == pb::TRANSPOSE) {
    if (in.size() != 2) {
      return Fail("inputs[0]", "TRANSPOSE takes a rank-2 input (got shape ", ShapeText(in), ")");
    }
    if (!Equal(out, {in[1], in[0]})) {
      return Fail("out", "shape ", ShapeText(out), " is not the transpose ", ShapeText({in[1], in[0]}),
                  " of inputs[0] ", ShapeText(in));
    }
    return absl::OkStatus();
  }
  // EXP, SCALE, COPY.
  if (!Equal(out, in)) {
    return Fail("out", "shape ", ShapeText(out), " does not match inputs[0] ", ShapeText(in), " (",
                OpText(op), " keeps the shape)");
  }
  return absl::OkStatus();
}

absl::Status CommandChecker::Check(const pb::MathCmd& cmd) const {
  return InCommand("math", cmd.cmd_id(), Math(cmd));
}

absl::Status CommandChecker::SoftmaxPv(const pb::SoftmaxPvCmd& cmd) const {
  RETURN_IF_ERROR(Tensor(cmd.s(), "s"));
  RETURN_IF_ERROR(Tensor(cmd.v(), "v"));
  const struct {
    const pb::TensorRef* t;
    const char* role;
  } accs[] = {{&cmd.acc_m(), "acc_m"}, {&cmd.acc_l(), "acc_l"}, {&cmd.acc_o(), "acc_o"}};
  for (const auto& acc : accs) {
    RETURN_IF_ERROR(Tensor(*acc.t, acc.role));
    if (acc.t->space() != pb::TCM) {
      return Fail(acc.role, "the accumulator must be in this PE's TCM (got ",
                  SpaceText(acc.t->space()), ")");
    }
    if (acc.t->dtype() != pb::FP32) {
      return Fail(acc.role, "the accumulator must be FP32 (got ", DTypeText(acc.t->dtype()), ")");
    }
  }
  RETURN_IF_ERROR(Rank2(cmd.s(), "s", "[R, T]"));
  RETURN_IF_ERROR(Rank2(cmd.v(), "v", "[T, D]"));
  const Dims s = ShapeView(cmd.s());
  const Dims v = ShapeView(cmd.v());
  if (v[0] != s[1]) {
    return Fail("v", "shape ", ShapeText(v), " does not match s's T = ", s[1], " (s is ", ShapeText(s), ")");
  }
  for (const auto& acc : {accs[0], accs[1]}) {
    const Dims shape = ShapeView(*acc.t);
    if (!Equal(shape, {s[0], 1}) && !Equal(shape, {s[0]})) {
      return Fail(acc.role, "shape ", ShapeText(shape), " is not [R, 1] or [R] with R = ", s[0],
                  " (s is ", ShapeText(s), ")");
    }
  }
  const Dims o = ShapeView(cmd.acc_o());
  if (!Equal(o, {s[0], v[1]})) {
    return Fail("acc_o", "shape ", ShapeText(o), " does not match [R, D] = ", ShapeText({s[0], v[1]}),
                " (s is ", ShapeText(s), ", v is ", ShapeText(v), ")");
  }
  if (!std::isfinite(cmd.scale()) || !(cmd.scale() > 0)) {
    return Fail("scale", cmd.scale(), " must be finite and > 0");
  }
  return DependsOn(cmd.depends_on(), cmd.cmd_id());
}

absl::Status CommandChecker::Check(const pb::SoftmaxPvCmd& cmd) const {
  return InCommand("softmax_pv", cmd.cmd_id(), SoftmaxPv(cmd));
}

absl::Status CommandChecker::LseMerge(const pb::LseMergeCmd& cmd) const {
  const struct {
    const pb::TensorRef* t;
    const char* role;
    bool vector;  // [R, 1] or [R]; else [R, D]
  } parts[] = {{&cmd.acc_m(), "acc_m", true}, {&cmd.acc_l(), "acc_l", true},
               {&cmd.acc_o(), "acc_o", false}, {&cmd.in_m(), "in_m", true},
               {&cmd.in_l(), "in_l", true},   {&cmd.in_o(), "in_o", false},
               {&cmd.out_m(), "out_m", true}, {&cmd.out_l(), "out_l", true},
               {&cmd.out_o(), "out_o", false}};
  for (const auto& part : parts) {
    RETURN_IF_ERROR(Tensor(*part.t, part.role));
    if (part.t->space() != pb::TCM) {
      return Fail(part.role, "lse_merge works in this PE's TCM (got ", SpaceText(part.t->space()), ")");
    }
    if (part.t->dtype() != pb::FP32) {
      return Fail(part.role, "m, l and O are FP32 (got ", DTypeText(part.t->dtype()), ")");
    }
  }
  RETURN_IF_ERROR(Rank2(cmd.acc_o(), "acc_o", "[R, D]"));
  const Dims o = ShapeView(cmd.acc_o());
  for (const auto& part : parts) {
    const Dims shape = ShapeView(*part.t);
    if (part.vector && !Equal(shape, {o[0], 1}) && !Equal(shape, {o[0]})) {
      return Fail(part.role, "shape ", ShapeText(shape), " is not [R, 1] or [R] with R = ", o[0],
                  " (acc_o is ", ShapeText(o), ")");
    }
    if (!part.vector && !Equal(shape, o)) {
      return Fail(part.role, "shape ", ShapeText(shape), " does not match acc_o ", ShapeText(o));
    }
  }
  return DependsOn(cmd.depends_on(), cmd.cmd_id());
}

absl::Status CommandChecker::Check(const pb::LseMergeCmd& cmd) const {
  return InCommand("lse_merge", cmd.cmd_id(), LseMerge(cmd));
}

absl::Status CommandChecker::Dma(const pb::DmaCmd& cmd) const {
  const pb::TensorRef& src = cmd.src();
  const pb::TensorRef& dst = cmd.dst();
  RETURN_IF_ERROR(Tensor(src, "src"));
  RETURN_IF_ERROR(Tensor(dst, "dst"));
  if (src.space() == pb::HBM && dst.space() == pb::HBM) {
    return Fail("dst", "HBM to HBM is not a DMA path (src is HBM too); stage the data through TCM");
  }
  if (src.dtype() != dst.dtype()) {
    return Fail("dst", "dtype ", DTypeText(dst.dtype()), " differs from src's ",
                DTypeText(src.dtype()), " (a DMA copies bytes; convert with a MATH COPY)");
  }
  // Both counts are < 2^64: Tensor() refused larger ones.
  uint64_t src_elements = 1;
  uint64_t dst_elements = 1;
  for (uint64_t d : src.shape()) src_elements *= d;
  for (uint64_t d : dst.shape()) dst_elements *= d;
  if (src_elements != dst_elements) {
    return Fail("dst", "shape ", ShapeText(ShapeOf(dst)), " holds ", dst_elements, " elements but src ",
                ShapeText(ShapeOf(src)), " holds ", src_elements);
  }
  return absl::OkStatus();
}

absl::Status CommandChecker::Check(const pb::DmaCmd& cmd) const {
  return InCommand("dma", cmd.cmd_id(), Dma(cmd));
}

}  // namespace ahbm::sim
