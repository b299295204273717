// Command streams for PE CPUs without kernels (tests, benchmarks): tensor helpers and a
// ProgramBuilder that numbers commands, plus canned streams such as
// "DMA 1 MiB, then composite GEMM (M, K, N) x count". ChipSim::SetProgram runs one on a PE's
// CPU (actors/units/command_stream.h).
#ifndef AHBMSIM_ACTORS_INJECT_H_
#define AHBMSIM_ACTORS_INJECT_H_

#include <cstdint>
#include <vector>

#include "actors/units/command_stream.h"
#include "proto/commands.pb.h"

namespace ahbm::sim::inject {

pb::TensorRef Hbm(uint32_t pe, uint64_t addr, pb::DType dtype, std::vector<uint64_t> shape);
pb::TensorRef Tcm(uint32_t pe, uint64_t addr, pb::DType dtype, std::vector<uint64_t> shape);
uint64_t TensorBytes(const pb::TensorRef& t);

// Builds one PE CPU's program; command ids are first_cmd_id, first_cmd_id + 1, ... in order.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(uint64_t first_cmd_id = 1) : next_id_(first_cmd_id) {}

  // `wait_for`: handles the CPU auto-waits on before issuing (DESIGN §4).
  uint64_t Dma(pb::TensorRef src, pb::TensorRef dst, std::vector<uint64_t> wait_for = {});
  uint64_t Composite(pb::TensorRef a, pb::TensorRef b, pb::TensorRef out,
                     std::vector<pb::MathOp> epilogue = {}, std::vector<uint64_t> depends_on = {},
                     std::vector<uint64_t> wait_for = {});
  uint64_t SoftmaxPv(pb::TensorRef s, pb::TensorRef v, pb::TensorRef m, pb::TensorRef l,
                     pb::TensorRef o, float scale, std::vector<uint64_t> depends_on = {});
  // lse_merge of (in_m, in_l, in_o) into (acc_m, acc_l, acc_o), written in place (out = acc).
  uint64_t LseMerge(pb::TensorRef acc_m, pb::TensorRef acc_l, pb::TensorRef acc_o,
                    pb::TensorRef in_m, pb::TensorRef in_l, pb::TensorRef in_o,
                    std::vector<uint64_t> depends_on = {});
  uint64_t Dot(pb::TensorRef a, pb::TensorRef b, pb::TensorRef out,
               std::vector<uint64_t> wait_for = {});
  uint64_t Math(pb::MathOp op, std::vector<pb::TensorRef> inputs, pb::TensorRef out,
                std::vector<uint64_t> wait_for = {});

  const CpuProgram& program() const { return program_; }
  CpuProgram Build() { return std::move(program_); }

 private:
  uint64_t next_id_;
  CpuProgram program_;
};

// "DMA dma_bytes, then composite GEMM (m, k, n) x count" on global PE `pe`: one bf16 load of
// dma_bytes from the PE's HBM at hbm_base into TCM address 0 (skipped when 0), then `count`
// composites out[m, n] (fp32, TCM) = a[m, k] (bf16, TCM) . b[k, n] (bf16, HBM, a fresh region
// after the previous one) with a SCALE epilogue. Nothing waits: the scheduler overlaps them.
CpuProgram DmaThenGemmStream(uint32_t pe, uint64_t dma_bytes, uint64_t m, uint64_t k, uint64_t n,
                             int count, uint64_t hbm_base = 0, uint64_t first_cmd_id = 1);

// The "second stream arriving mid-way" pair (PEs 0 and 1 of CUBE 0): PE 0 runs a long
// composite whose B pieces stream from its HBM (K = 16 tile_k, N = 4 tile_n), a blocking MATH op,
// then four TCM-only composites; PE 1 meanwhile reads 1 MiB from PE 0's channels, slowing PE 0's
// pieces so the younger composites fill the long one's gaps.
struct MidWayPrograms {
  CpuProgram pe0, pe1;
};
MidWayPrograms MidWayStreamPrograms(uint64_t tile_k, uint64_t tile_n);

}  // namespace ahbm::sim::inject

#endif  // AHBMSIM_ACTORS_INJECT_H_
