#include "actors/inject.h"

#include <memory>
#include <utility>

#include "actors/tensor_ref.h"
#include "base/check.h"

namespace ahbm::sim::inject {
pb::TensorRef Hbm(uint32_t pe, uint64_t addr, pb::DType dtype, std::vector<uint64_t> shape) {
  return MakeTensorRef(pb::HBM, pe, addr, dtype, std::move(shape));
}

pb::TensorRef Tcm(uint32_t pe, uint64_t addr, pb::DType dtype, std::vector<uint64_t> shape) {
  return MakeTensorRef(pb::TCM, pe, addr, dtype, std::move(shape));
}

uint64_t TensorBytes(const pb::TensorRef& t) { return ElementCount(t) * DTypeBytes(t.dtype()); }

uint64_t ProgramBuilder::Dma(pb::TensorRef src, pb::TensorRef dst, std::vector<uint64_t> wait_for) {
  auto cmd = std::make_shared<pb::DmaCmd>();
  cmd->set_cmd_id(next_id_++);
  *cmd->mutable_src() = std::move(src);
  *cmd->mutable_dst() = std::move(dst);
  program_.push_back({std::shared_ptr<const pb::DmaCmd>(cmd), std::move(wait_for)});
  return cmd->cmd_id();
}

uint64_t ProgramBuilder::Composite(pb::TensorRef a, pb::TensorRef b, pb::TensorRef out,
                                   std::vector<pb::MathOp> epilogue,
                                   std::vector<uint64_t> depends_on,
                                   std::vector<uint64_t> wait_for) {
  auto cmd = std::make_shared<pb::CompositeCmd>();
  cmd->set_cmd_id(next_id_++);
  *cmd->mutable_a() = std::move(a);
  *cmd->mutable_b() = std::move(b);
  *cmd->mutable_out() = std::move(out);
  for (pb::MathOp op : epilogue) {
    pb::EpilogueStage* s = cmd->add_epilogue();
    s->set_op(op);
    s->set_scalar(op == pb::SCALE ? 0.125f : 0.0f);
  }
  for (uint64_t d : depends_on) cmd->add_depends_on(d);
  program_.push_back({std::shared_ptr<const pb::CompositeCmd>(cmd), std::move(wait_for)});
  return cmd->cmd_id();
}

uint64_t ProgramBuilder::SoftmaxPv(pb::TensorRef s, pb::TensorRef v, pb::TensorRef m,
                                   pb::TensorRef l, pb::TensorRef o, float scale,
                                   std::vector<uint64_t> depends_on) {
  auto cmd = std::make_shared<pb::SoftmaxPvCmd>();
  cmd->set_cmd_id(next_id_++);
  *cmd->mutable_s() = std::move(s);
  *cmd->mutable_v() = std::move(v);
  *cmd->mutable_acc_m() = std::move(m);
  *cmd->mutable_acc_l() = std::move(l);
  *cmd->mutable_acc_o() = std::move(o);
  cmd->set_scale(scale);
  for (uint64_t d : depends_on) cmd->add_depends_on(d);
  program_.push_back({std::shared_ptr<const pb::SoftmaxPvCmd>(cmd), {}});
  return cmd->cmd_id();
}

uint64_t ProgramBuilder::LseMerge(pb::TensorRef acc_m, pb::TensorRef acc_l, pb::TensorRef acc_o,
                                  pb::TensorRef in_m, pb::TensorRef in_l, pb::TensorRef in_o,
                                  std::vector<uint64_t> depends_on) {
  auto cmd = std::make_shared<pb::LseMergeCmd>();
  cmd->set_cmd_id(next_id_++);
  *cmd->mutable_out_m() = acc_m;
  *cmd->mutable_out_l() = acc_l;
  *cmd->mutable_out_o() = acc_o;
  *cmd->mutable_acc_m() = std::move(acc_m);
  *cmd->mutable_acc_l() = std::move(acc_l);
  *cmd->mutable_acc_o() = std::move(acc_o);
  *cmd->mutable_in_m() = std::move(in_m);
  *cmd->mutable_in_l() = std::move(in_l);
  *cmd->mutable_in_o() = std::move(in_o);
  for (uint64_t d : depends_on) cmd->add_depends_on(d);
  program_.push_back({std::shared_ptr<const pb::LseMergeCmd>(cmd), {}});
  return cmd->cmd_id();
}

uint64_t ProgramBuilder::Dot(pb::TensorRef a, pb::TensorRef b, pb::TensorRef out,
                             std::vector<uint64_t> wait_for) {
  auto cmd = std::make_shared<pb::GemmCmd>();
  cmd->set_cmd_id(next_id_++);
  *cmd->mutable_a() = std::move(a);
  *cmd->mutable_b() = std::move(b);
  *cmd->mutable_out() = std::move(out);
  program_.push_back({std::shared_ptr<const pb::GemmCmd>(cmd), std::move(wait_for)});
  return cmd->cmd_id();
}

uint64_t ProgramBuilder::Math(pb::MathOp op, std::vector<pb::TensorRef> inputs, pb::TensorRef out,
                              std::vector<uint64_t> wait_for) {
  auto cmd = std::make_shared<pb::MathCmd>();
  cmd->set_cmd_id(next_id_++);
  cmd->set_op(op);
  for (pb::TensorRef& in : inputs) *cmd->add_inputs() = std::move(in);
  *cmd->mutable_out() = std::move(out);
  cmd->set_axis(-1);
  if (op == pb::SCALE) cmd->set_scalar(0.5f);
  program_.push_back({std::shared_ptr<const pb::MathCmd>(cmd), std::move(wait_for)});
  return cmd->cmd_id();
}

CpuProgram DmaThenGemmStream(uint32_t pe, uint64_t dma_bytes, uint64_t m, uint64_t k, uint64_t n,
                             int count, uint64_t hbm_base, uint64_t first_cmd_id) {
  AHBM_CHECK(dma_bytes % 2 == 0) << "DMA bytes must hold whole bf16 elements";
  ProgramBuilder p(first_cmd_id);
  uint64_t hbm = hbm_base;
  if (dma_bytes > 0) {
    p.Dma(Hbm(pe, hbm, pb::BF16, {dma_bytes / 2}), Tcm(pe, 0, pb::BF16, {dma_bytes / 2}));
    hbm += dma_bytes;
  }
  // TCM: a at 1 MiB, out after it (the load above may fill the first MiB).
  const uint64_t a_addr = 1 << 20;
  const uint64_t out_addr = a_addr + m * k * 2;
  for (int i = 0; i < count; ++i) {
    p.Composite(Tcm(pe, a_addr, pb::BF16, {m, k}), Hbm(pe, hbm, pb::BF16, {k, n}),
                Tcm(pe, out_addr, pb::FP32, {m, n}), {pb::SCALE});
    hbm += k * n * 2;
  }
  return p.Build();
}

MidWayPrograms MidWayStreamPrograms(uint64_t tile_k, uint64_t tile_n) {
  ProgramBuilder p0;
  const uint64_t k = 16 * tile_k, n = 4 * tile_n;
  p0.Composite(Tcm(0, 0, pb::BF16, {8, k}), Hbm(0, 0, pb::BF16, {k, n}),
               Tcm(0, 1 << 20, pb::FP32, {8, n}), {pb::SCALE});
  p0.Math(pb::EXP, {Tcm(0, 0, pb::FP32, {8, 1024})}, Tcm(0, 2 << 20, pb::FP32, {8, 1024}));
  for (int i = 0; i < 4; ++i) {
    p0.Composite(Tcm(0, 0, pb::BF16, {8, 128}), Tcm(0, 3 << 20, pb::BF16, {128, 256}),
                 Tcm(0, (3 << 20) + 65536 + i * 8192, pb::FP32, {8, 256}));
  }
  ProgramBuilder p1;
  p1.Math(pb::EXP, {Tcm(1, 0, pb::FP32, {8, 512})}, Tcm(1, 65536, pb::FP32, {8, 512}));
  p1.Dma(Hbm(0, 8 << 20, pb::BF16, {1 << 19}), Tcm(1, 1 << 20, pb::BF16, {1 << 19}));
  return MidWayPrograms{p0.Build(), p1.Build()};
}

}  // namespace ahbm::sim::inject
