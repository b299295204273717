// Admission checks for one PE's commands (DESIGN §2, §4): PE_SCHEDULER (and the DMA engine) run
// a command only after CommandChecker accepted it. Plain C++ (STYLE 4); nothing is clamped or
// repaired — a bad command is refused with a reason.
//
// Config: pb::Chip (validated) — sip.cube.{pes, hbm_bytes}, sip.cube.pe.tcm.total_bytes and the
// chip's numbering (topology::ChipIndex).
//
// Contract — errors: every refusal is InvalidArgument with ONE line
//     "<pe>: <kind> cmd <cmd_id>: <role>: <reason>", e.g.
//     "pe 3 (sip0.cube0.pe3): composite cmd 17: operand b: shape [64, 128] does not match
//      operand a's K = 32 (a is [8, 32])"
// <pe> is named as DmaModel names it; <kind> is composite, gemm, math, softmax_pv, lse_merge or dma; <role>
// names the field ("operand a", "out", "inputs[1]", "epilogue[0] operand", "acc_m", "axis",
// "scale", "depends_on[2]", ...). CheckTensor alone gives "<pe>: <role>: <reason>". Checks run
// in a fixed order and the first failure is reported.
//
// Contract — a TensorRef (every tensor of every command):
// - space is HBM or TCM; dtype is BF16 (2 bytes) or FP32 (4); rank >= 1; no dim is 0; strides
//   are empty (dense row-major) or one per dim, in elements; a stride of 0 on a dim of size > 1
//   (a broadcast view) is refused everywhere, as DmaModel refuses it — broadcasts are expressed
//   by [1, N] / [M, 1] operand shapes. A shape of 2^64 or more elements is refused.
// - extent = (last element offset + 1) * element bytes, the last element offset being
//   sum over dims of (size - 1) * stride (dense strides when empty); computed in 128 bits, so
//   absurd sizes cannot wrap around and are refused as out of range ("beyond 2^64").
// - TCM: tensor.pe must be this PE (a PE reaches only its own TCM), and [addr, addr + extent)
//   must lie in [0, tcm.total_bytes) — "TCM overflow" otherwise.
// - HBM: tensor.pe (the owner) must exist, be in this PE's CUBE (any PE of the CUBE: remote
//   channels through the logic die; another CUBE's data must travel over the NOC), and
//   [addr, addr + extent) must lie in the owner's region [0, hbm_bytes / pes) (DmaModel's
//   address map). The same-CUBE rule holds for every command kind, not only composite and DMA:
//   every HBM access is a DMA of this PE.
//
// Contract — commands (shapes in elements; "row vector" [1, N], "column vector" [M, 1]):
// - CompositeCmd, GemmCmd: a [M, K], b [K, N], out [M, N], all strictly rank 2 (no batch dim).
//   Composite epilogue stages: op in {SCALE, ADD, SUB, MUL, DIV, MAXIMUM, EXP}; SCALE and EXP
//   take no operand (SCALE's scalar must be finite); ADD/SUB/MUL/DIV/MAXIMUM use `scalar` when
//   they have no operand, else the operand must be [M, N], [1, N] or [M, 1].
// - MathCmd: op set. ADD, SUB, MUL, DIV, MAXIMUM: 2 inputs whose shapes are equal (any rank) or,
//   at rank 2, one is [R, C] and the other [1, C] or [R, 1] (either side); out = that shape.
//   EXP, SCALE, COPY: 1 input, out of the same shape (SCALE's scalar finite; COPY may change
//   dtype). REDUCE_MAX, REDUCE_SUM: 1 input; axis -1 (last) or 0..rank-1 (other negatives are
//   refused); out = the input shape with that axis set to 1 (kept) or removed — both accepted
//   (removal only when rank >= 2, since rank 0 is no tensor). TRANSPOSE: 1 rank-2 input [R, C],
//   out [C, R]. FILL: no inputs, any out.
// - SoftmaxPvCmd: s [R, T], v [T, D] (HBM or TCM); acc_m and acc_l each [R, 1] or [R];
//   acc_o [R, D]; the three accumulators in this PE's TCM and FP32; scale finite and > 0.
// - LseMergeCmd: acc_o [R, D] sets R and D; acc_m, acc_l, in_m, in_l, out_m, out_l each
//   [R, 1] or [R]; in_o and out_o [R, D]; all nine in this PE's TCM and FP32.
// - DmaCmd: src and dst valid, same dtype, same element count (shape product; shapes may
//   differ); HBM -> HBM is refused (not a DMA path); HBM <-> TCM and TCM -> TCM are accepted.
// - depends_on (CompositeCmd, SoftmaxPvCmd, LseMergeCmd): every id must be < cmd_id — a command can depend
//   only on commands issued before it (cmd ids grow with issue order), which also rules out
//   self-dependencies and cycles.
// - Not checked: overlap between tensors (aliasing), input dtypes of GEMM/MATH ops, whether a
//   depends_on id was ever issued.
#ifndef AHBMSIM_ACTORS_COMMAND_CHECK_H_
#define AHBMSIM_ACTORS_COMMAND_CHECK_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "proto/commands.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"

namespace ahbm::sim {

// The role of a tensor or field in an error ("operand a", "inputs[1]", "epilogue[0] operand"),
// kept as its parts: the text is built only when a check fails.
struct CheckRole {
  CheckRole(const char* name) : name(name) {}  // NOLINT: implicit from a literal
  CheckRole(std::string_view name, int index, std::string_view suffix = {})
      : name(name), index(index), suffix(suffix) {}

  std::string Text() const;

  std::string_view name;
  int index = -1;  // -1: no "[index]"
  std::string_view suffix;
};

// "pe 9 (sip0.cube2.pe1)", or "pe 99" for a PE the chip does not have: how errors name a PE.
std::string PeName(const topology::ChipIndex& index, uint32_t global_pe);

class CommandChecker {
 public:
  // Checks commands issued by global PE `global_pe` (< the chip's PE count) of a validated chip.
  CommandChecker(const pb::Chip& chip, uint32_t global_pe);

  // One tensor as the contract says; `role` (e.g. "operand a") labels the error.
  [[nodiscard]] absl::Status CheckTensor(const pb::TensorRef& tensor, std::string_view role) const;

  [[nodiscard]] absl::Status Check(const pb::CompositeCmd& cmd) const;
  [[nodiscard]] absl::Status Check(const pb::GemmCmd& cmd) const;
  [[nodiscard]] absl::Status Check(const pb::MathCmd& cmd) const;
  [[nodiscard]] absl::Status Check(const pb::SoftmaxPvCmd& cmd) const;
  [[nodiscard]] absl::Status Check(const pb::LseMergeCmd& cmd) const;
  [[nodiscard]] absl::Status Check(const pb::DmaCmd& cmd) const;

  uint32_t pe() const { return pe_; }
  // "pe 3 (sip0.cube0.pe3)".
  const std::string& pe_name() const { return pe_name_; }
  uint64_t tcm_bytes() const { return tcm_bytes_; }
  uint64_t region_bytes() const { return region_bytes_; }

 private:
  // The checks return InvalidArgument "<role>: <reason>"; Check() puts "<pe>: <kind> cmd <id>: "
  // before it.
  absl::Status Tensor(const pb::TensorRef& tensor, const CheckRole& role) const;
  absl::Status GemmShapes(const pb::TensorRef& a, const pb::TensorRef& b,
                          const pb::TensorRef& out) const;
  absl::Status Epilogue(const pb::CompositeCmd& cmd) const;
  absl::Status Math(const pb::MathCmd& cmd) const;
  absl::Status SoftmaxPv(const pb::SoftmaxPvCmd& cmd) const;
  absl::Status LseMerge(const pb::LseMergeCmd& cmd) const;
  absl::Status Dma(const pb::DmaCmd& cmd) const;
  std::string PeName(uint32_t global_pe) const { return sim::PeName(index_, global_pe); }
  absl::Status InCommand(const char* kind, uint64_t cmd_id, const absl::Status& status) const;

  topology::ChipIndex index_;
  uint32_t pe_;
  std::string pe_name_;
  uint64_t tcm_bytes_;
  uint64_t region_bytes_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_COMMAND_CHECK_H_
