// Self-test kernels (workload kernels SELFTEST_*): the smallest programs that exercise the `tl`
// runtime end to end through `ahbm run` — one composite GEMM, an IPCQ ring all-reduce, a
// deliberate deadlock and a deliberate arena overflow. Host side (placement, inputs, outputs):
// kernels/launch/launch.h.
//
// Every kernel takes its HBM addresses from the host (PE-local addresses of this PE's region)
// and is written for GCC 12's coroutines: argument structs are trivially copyable, shapes are
// built in separate statements, never as braced lists or `?:` inside a co_await expression.
#ifndef AHBMSIM_KERNELS_SELFTEST_SELFTEST_H_
#define AHBMSIM_KERNELS_SELFTEST_SELFTEST_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/runtime/task.h"
#include "kernels/runtime/tl.h"
#include "topology/mesh.h"

namespace ahbm::kernels::selftest {

struct GemmArgs {
  uint64_t a_addr = 0;    // A [m, k] bf16 in this PE's HBM
  uint64_t b_addr = 0;    // B [k, n] bf16 in this PE's HBM (a tl.Ref operand, never loaded)
  uint64_t out_addr = 0;  // out [m, n] fp32 in this PE's HBM
  uint64_t m = 0, k = 0, n = 0;
};

// SELFTEST_GEMM: out = A · B on one PE. A is loaded to TCM (scratch), B streams from HBM as the
// composite's operand, the fp32 result (scratch) is stored to HBM. Scratch use: A, then out.
Task<void> Gemm(Tl& tl, GemmArgs args);

struct AllReduceArgs {
  uint64_t in_addr = 0;   // this PE's vector [1, n] fp32 in its HBM
  uint64_t out_addr = 0;  // the sum [1, n] fp32 in its HBM
  uint64_t n = 0;
  uint32_t steps = 0;     // P - 1
  topology::Dir next = topology::Dir::kNorth;  // IPCQ direction of the next PE on the ring
  topology::Dir prev = topology::Dir::kNorth;  // ... and of the previous one
};

// SELFTEST_ALLREDUCE: ring all-reduce of one vector per PE over IPCQ. Each of the P - 1 steps
// posts the receive from `prev` first (so a vector larger than the queue streams through), then
// sends to `next` what arrived the step before (its own vector at step 0), and adds what
// arrives to the accumulator. After P - 1 steps every PE holds the sum of all P vectors, added
// in ring order starting from itself (fp32). TCM: accumulator and forward buffer persistent
// (2 · 4n bytes), the received vector in scratch (4n bytes).
Task<void> AllReduce(Tl& tl, AllReduceArgs args);

// SELFTEST_DEADLOCK: receives a [1, 16] fp32 message from the IPCQ neighbour `from`, which never
// sends; run on every PE of a CUBE, every CPU waits and the run ends in a deadlock report.
Task<void> Deadlock(Tl& tl, topology::Dir from);

// SELFTEST_ARENA_OVERFLOW: allocates a [1, floats] fp32 scratch tensor; given more than the
// scratch arena holds, the runtime stops the kernel with its arena overflow, and the run fails
// with a kernel fault (base/errors.h: exit 4) — how a kernel's own bug is reported.
Task<void> ArenaOverflow(Tl& tl, uint64_t floats);

// A ring over a rows x cols mesh whose consecutive nodes (and last and first) are mesh
// neighbours, as node indices starting at 0, or nullopt when none exists (odd x odd meshes,
// 1 x n with n > 2). Even rows: row 0 runs east, rows 1.. snake over columns 1..cols-1 and the
// ring returns north along column 0 (2x2: 0 1 3 2; 2x4: 0 1 2 3 7 6 5 4); otherwise the same
// with rows and columns swapped. 1 node: {0}; 2 nodes: {0, 1}.
std::optional<std::vector<uint32_t>> SnakeRing(uint32_t rows, uint32_t cols);

// The direction from node `from` to its neighbour `to` on `mesh` (AHBM_CHECKs they are
// neighbours).
topology::Dir DirTo(const topology::Mesh& mesh, uint32_t from, uint32_t to);

}  // namespace ahbm::kernels::selftest

#endif  // AHBMSIM_KERNELS_SELFTEST_SELFTEST_H_
