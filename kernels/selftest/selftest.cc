#include "kernels/selftest/selftest.h"

#include <utility>

#include "base/check.h"

namespace ahbm::kernels::selftest {

Task<void> Gemm(Tl& tl, GemmArgs args) {
  const std::vector<uint64_t> a_shape = {args.m, args.k};
  const std::vector<uint64_t> b_shape = {args.k, args.n};
  const std::vector<uint64_t> out_shape = {args.m, args.n};
  const Tensor a_hbm = tl.Ref(args.a_addr, a_shape, pb::BF16);
  const Tensor b_hbm = tl.Ref(args.b_addr, b_shape, pb::BF16);
  const Tensor out_hbm = tl.Ref(args.out_addr, out_shape, pb::FP32);
  Tensor a = co_await tl.Load(a_hbm);            // lazy: the composite depends on it
  Tensor out = co_await tl.Composite(a, b_hbm);  // non-blocking
  co_await tl.Store(out_hbm, out);               // auto-waits for the composite
}

Task<void> AllReduce(Tl& tl, AllReduceArgs args) {
  const std::vector<uint64_t> shape = {1, args.n};
  const Tensor in = tl.Ref(args.in_addr, shape, pb::FP32);
  const Tensor out = tl.Ref(args.out_addr, shape, pb::FP32);
  Tensor acc = co_await tl.Load(in, Arena::kPersistent);
  const Tensor forward = tl.Alloc(shape, pb::FP32, Arena::kPersistent);
  for (uint32_t step = 0; step < args.steps; ++step) {
    const Peer next = tl.PeerOf(topology::DirName(args.next));
    const Peer prev = tl.PeerOf(topology::DirName(args.prev));
    ScratchScope scope(&tl);
    Tensor got = co_await tl.RecvAsync(prev, shape, pb::FP32);
    Tensor payload = forward;
    if (step == 0) payload = acc;  // the send reads its payload when it issues
    co_await tl.Send(next, payload);
    co_await tl.Add(acc, got, acc);  // auto-waits for the receive
    if (step + 1 < args.steps) co_await tl.Copy(got, forward);
  }
  co_await tl.Store(out, acc);
}

Task<void> Deadlock(Tl& tl, topology::Dir from) {
  const std::vector<uint64_t> shape = {1, 16};
  const Peer peer = tl.PeerOf(topology::DirName(from));
  co_await tl.Recv(peer, shape, pb::FP32);
}

Task<void> ArenaOverflow(Tl& tl, uint64_t floats) {
  const std::vector<uint64_t> shape = {1, floats};
  tl.Alloc(shape, pb::FP32);
  co_return;
}

namespace {

// The even-rows construction on a rows x cols grid, as (row, col) pairs.
std::vector<std::pair<uint32_t, uint32_t>> EvenRowsRing(uint32_t rows, uint32_t cols) {
  std::vector<std::pair<uint32_t, uint32_t>> ring;
  for (uint32_t c = 0; c < cols; ++c) ring.emplace_back(0, c);
  for (uint32_t r = 1; r < rows; ++r) {
    if (r % 2 == 1) {
      for (uint32_t c = cols - 1; c >= 1; --c) ring.emplace_back(r, c);
    } else {
      for (uint32_t c = 1; c < cols; ++c) ring.emplace_back(r, c);
    }
  }
  for (uint32_t r = rows - 1; r >= 1; --r) ring.emplace_back(r, 0);
  return ring;
}

}  // namespace

std::optional<std::vector<uint32_t>> SnakeRing(uint32_t rows, uint32_t cols) {
  const uint32_t size = rows * cols;
  if (size == 1) return std::vector<uint32_t>{0};
  if (size == 2) return std::vector<uint32_t>{0, 1};
  const bool by_rows = rows % 2 == 0 && cols >= 2;
  const bool by_cols = cols % 2 == 0 && rows >= 2;
  if (!by_rows && !by_cols) return std::nullopt;
  std::vector<uint32_t> ring;
  if (by_rows) {
    for (const auto& [r, c] : EvenRowsRing(rows, cols)) ring.push_back(r * cols + c);
  } else {
    for (const auto& [c, r] : EvenRowsRing(cols, rows)) ring.push_back(r * cols + c);
  }
  return ring;
}

topology::Dir DirTo(const topology::Mesh& mesh, uint32_t from, uint32_t to) {
  for (topology::Dir dir : topology::kAllDirs) {
    if (mesh.Neighbour(from, dir) == to) return dir;
  }
  AHBM_CHECK(false) << "nodes " << from << " and " << to << " are not mesh neighbours";
  return topology::Dir::kNorth;
}

}  // namespace ahbm::kernels::selftest
