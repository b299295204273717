// The `tl` runtime (DESIGN §4): small kernels checked in data mode against plain C++
// references, and the timing semantics against times derived here from the topology numbers.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/errors.h"
#include "actors/chip_sim.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/memory/memory_store.h"
#include "kernels/runtime/runtime.h"
#include "proto/trace.pb.h"
#include "topology/loader.h"
#include "topology/routing.h"

namespace ahbm::kernels {
namespace {

using ::testing::HasSubstr;

pb::Chip LoadSmall() {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

// One simulation of CUBE 0 of the small chip with a kernel runtime.
struct Harness {
  explicit Harness(bool data, std::string profile = "zero", pb::Chip chip_in = LoadSmall(),
                   std::vector<uint32_t> cubes = {0},
                   std::vector<std::vector<uint32_t>> islands = {})
      : chip(std::move(chip_in)) {
    sim::ChipSimOptions options;
    options.cubes = std::move(cubes);
    options.islands = std::move(islands);
    if (!options.islands.empty()) options.keep_op_log = false;
    options.issue_cost_profile = std::move(profile);
    auto created = sim::ChipSim::Create(chip, options);
    EXPECT_TRUE(created.ok()) << created.status();
    sim = std::move(*created);
    if (data) store = std::make_unique<MemoryStore>(chip);
    runtime = std::make_unique<KernelRuntime>(sim.get(), store.get());
  }

  pb::TensorRef Hbm(uint32_t pe, uint64_t addr, std::vector<uint64_t> shape,
                    pb::DType dtype = pb::BF16) const {
    pb::TensorRef t;
    t.set_space(pb::HBM);
    t.set_pe(pe);
    t.set_addr(addr);
    t.set_dtype(dtype);
    for (uint64_t d : shape) t.add_shape(d);
    return t;
  }
  void Put(const pb::TensorRef& t, const std::vector<float>& values) {
    ASSERT_TRUE(store->Write(t, values).ok());
  }
  std::vector<float> Get(const pb::TensorRef& t) const {
    absl::StatusOr<std::vector<float>> v = store->Read(t);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::vector<float>();
  }
  // Op records of PE `pe`'s `unit_suffix` unit (".scheduler", ".gemm", ...), by cmd id (cmd ids
  // are per PE).
  std::map<uint64_t, pb::OpRecord> Ops(const std::string& unit_suffix, uint32_t pe = 0) const {
    const topology::ChipIndex index(chip);
    const std::string cpu =
        index.Name(index.PeUnit(topology::UnitKind::kPeCpu, index.PeOf(pe)));
    const std::string prefix = cpu.substr(0, cpu.rfind('.'));
    std::map<uint64_t, pb::OpRecord> out;
    for (const pb::TraceRecord& r : sim->op_log().records()) {
      if (r.has_op() && r.op().unit_name() == prefix + unit_suffix) out[r.op().cmd_id()] = r.op();
    }
    return out;
  }

  pb::Chip chip;
  std::unique_ptr<sim::ChipSim> sim;
  std::unique_ptr<MemoryStore> store;
  std::unique_ptr<KernelRuntime> runtime;
};

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = RoundToBf16(u(rng));
  return v;
}

// ---- data mode against references ----

TEST(RuntimeData, ElementwiseOps) {
  Harness h(true);
  const uint64_t r = 8, c = 64;
  const std::vector<float> a = Random(r * c, 1), b = Random(r * c, 2, 0.5f, 2.0f);
  h.Put(h.Hbm(0, 0, {r, c}), a);
  h.Put(h.Hbm(0, 65536, {r, c}), b);
  h.Put(h.Hbm(0, 131072, {1, c}), std::vector<float>(b.begin(), b.begin() + c));
  const pb::TensorRef out = h.Hbm(0, 1 << 20, {r, c}, pb::FP32);
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                // GCC 12: keep braced lists out of co_await expressions.
                                const Tensor xa = tl.Ref(0, {r, c});
                                const Tensor ya = tl.Ref(65536, {r, c});
                                const Tensor rowa = tl.Ref(131072, {1, c});
                                const Tensor outh = tl.Ref(1 << 20, {r, c}, pb::FP32);
                                Tensor x = co_await tl.Load(xa);
                                Tensor y = co_await tl.Load(ya);
                                Tensor row = co_await tl.Load(rowa);
                                Tensor e = co_await tl.Exp(x);
                                Tensor m = co_await tl.Maximum(e, y);
                                Tensor d = co_await tl.Div(m, row);  // row broadcast
                                Tensor s = co_await tl.Scale(d, 0.5f);
                                Tensor mx = co_await tl.Max(s);
                                Tensor z = co_await tl.Sub(s, mx);   // column broadcast
                                co_await tl.Store(outh, z);
                              })
                  .ok());
  ASSERT_TRUE(h.runtime->Run().ok());
  std::vector<float> want(r * c);
  for (uint64_t i = 0; i < r; ++i) {
    float rowmax = -INFINITY;
    std::vector<float> s(c);
    for (uint64_t j = 0; j < c; ++j) {
      const float e = std::exp(a[i * c + j]);
      s[j] = std::max(e, b[i * c + j]) / b[j] * 0.5f;
      rowmax = std::max(rowmax, s[j]);
    }
    for (uint64_t j = 0; j < c; ++j) want[i * c + j] = s[j] - rowmax;
  }
  const std::vector<float> got = h.Get(out);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

// GEMM via composite and via dot: identical values; composite does not block the CPU (the
// next MATH op starts while the GEMM runs), dot does (the next MATH op starts after it).
TEST(RuntimeData, CompositeAndDotGiveTheSameValuesButDifferentTiming) {
  const uint64_t m = 8, k = 128, n = 256;
  const std::vector<float> a = Random(m * k, 3), b = Random(k * n, 4);
  struct Result {
    std::vector<float> values;
    uint64_t gemm_end = 0, marker_start = 0;
  };
  const auto run = [&](bool composite) {
    Harness h(true);
    h.Put(h.Hbm(0, 0, {m, k}), a);
    h.Put(h.Hbm(0, 65536, {k, n}), b);
    const pb::TensorRef out = h.Hbm(0, 1 << 20, {m, n}, pb::FP32);
    uint64_t gemm_id = 0, marker_id = 0;
    EXPECT_TRUE(h.runtime
                    ->AddKernel(0, 0,
                                [&](Tl& tl) -> Task<void> {
                                  const Tensor ah = tl.Ref(0, {m, k});
                                  const Tensor bh = tl.Ref(65536, {k, n});
                                  const Tensor outh = tl.Ref(1 << 20, {m, n}, pb::FP32);
                                  const std::vector<uint64_t> small = {8, 128};
                                  Tensor x = co_await tl.Fill(small, 1.0f);
                                  Tensor at = co_await tl.Load(ah);
                                  Tensor o;
                                  if (composite) {
                                    o = co_await tl.Composite(at, bh);
                                  } else {
                                    o = co_await tl.Dot(at, bh);
                                  }
                                  gemm_id = o.producer();
                                  Tensor e = co_await tl.Exp(x);  // unrelated MATH work
                                  marker_id = e.producer();
                                  co_await tl.Store(outh, o);
                                })
                    .ok());
    const absl::Status status = h.runtime->Run();
    EXPECT_TRUE(status.ok()) << status;
    Result r;
    r.values = h.Get(out);
    const auto ops = h.Ops(".scheduler");
    r.gemm_end = ops.at(gemm_id).end_ps();
    r.marker_start = ops.at(marker_id).start_ps();
    return r;
  };
  const Result c = run(true), d = run(false);
  EXPECT_EQ(c.values, d.values);
  for (uint64_t i = 0; i < m; ++i) {
    for (uint64_t j = 0; j < n; ++j) {
      double want = 0;
      for (uint64_t t = 0; t < k; ++t) want += double(a[i * k + t]) * b[t * n + j];
      EXPECT_NEAR(c.values[i * n + j], want, 1e-3) << i << "," << j;
    }
  }
  EXPECT_LT(c.marker_start, c.gemm_end);   // composite: the CPU went on
  EXPECT_GE(d.marker_start, d.gemm_end);   // dot: the CPU waited
}

// A transpose, then a GEMM, on asymmetric random inputs: out = a · transpose(bt).
TEST(RuntimeData, TransposeThenGemm) {
  const uint64_t m = 16, k = 64, n = 128;
  Harness h(true);
  const std::vector<float> a = Random(m * k, 5), bt = Random(n * k, 6);
  h.Put(h.Hbm(0, 0, {m, k}), a);
  h.Put(h.Hbm(0, 65536, {n, k}), bt);
  const pb::TensorRef out = h.Hbm(0, 1 << 20, {m, n}, pb::FP32);
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor ah = tl.Ref(0, {m, k});
                                const Tensor bh = tl.Ref(65536, {n, k});
                                const Tensor outh = tl.Ref(1 << 20, {m, n}, pb::FP32);
                                Tensor at = co_await tl.Load(ah);
                                Tensor btt = co_await tl.Load(bh);
                                Tensor b16 = tl.Alloc({k, n}, pb::BF16);
                                Tensor b = co_await tl.Transpose(btt, b16);
                                Tensor o = co_await tl.Composite(at, b);
                                co_await tl.Store(outh, o);
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<float> got = h.Get(out);
  for (uint64_t i = 0; i < m; ++i) {
    for (uint64_t j = 0; j < n; ++j) {
      double want = 0;
      for (uint64_t t = 0; t < k; ++t) want += double(a[i * k + t]) * bt[j * k + t];
      EXPECT_NEAR(got[i * n + j], want, 1e-3) << i << "," << j;
    }
  }
}

// A 4-PE ring all-reduce over IPCQ on the small chip's 2x2 PE mesh, ring 0 -> 1 -> 3 -> 2 -> 0:
// every PE forwards what it received last step and accumulates it; after P - 1 steps every PE
// holds the sum.
Task<void> RingAllReduce(Tl& tl, uint64_t in_addr, uint64_t out_addr, uint64_t n) {
  static const char* const kNext[] = {"E", "S", "N", "W"};  // by PE in CUBE: 0->1, 1->3, 2->0, 3->2
  static const char* const kPrev[] = {"S", "W", "E", "N"};  // 0<-2, 1<-0, 2<-3, 3<-1
  const uint32_t p = tl.program_id(0);
  const Peer next = tl.PeerOf(kNext[p]);
  const Peer prev = tl.PeerOf(kPrev[p]);
  const std::vector<uint64_t> shape = {1, n};
  const Tensor in = tl.Ref(in_addr, shape, pb::FP32);
  Tensor acc = co_await tl.Load(in, Arena::kPersistent);
  Tensor forward = acc;
  for (int step = 0; step < 3; ++step) {
    co_await tl.Send(next, forward);
    Tensor got = co_await tl.Recv(prev, shape, pb::FP32, Arena::kPersistent);
    co_await tl.Add(acc, got, acc);
    forward = got;
  }
  const Tensor out = tl.Ref(out_addr, shape, pb::FP32);
  co_await tl.Store(out, acc);
}

TEST(RuntimeData, FourPeRingAllReduceOverIpcq) {
  Harness h(true);
  const uint64_t n = 1024;
  std::vector<float> want(n, 0.0f);
  for (uint32_t pe = 0; pe < 4; ++pe) {
    std::vector<float> x = Random(n, 10 + pe);
    h.Put(h.Hbm(pe, 0, {1, n}, pb::FP32), x);
    for (uint64_t i = 0; i < n; ++i) want[i] += x[i];
  }
  for (uint32_t pe = 0; pe < 4; ++pe) {
    ASSERT_TRUE(h.runtime
                    ->AddKernel(pe, 0, [n](Tl& tl) { return RingAllReduce(tl, 0, 1 << 20, n); })
                    .ok());
  }
  absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  for (uint32_t pe = 0; pe < 4; ++pe) {
    const std::vector<float> got = h.Get(h.Hbm(pe, 1 << 20, {1, n}, pb::FP32));
    for (uint64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << pe << ":" << i;
  }
  // Every PE sent three messages on its ring queue.
  const pb::Report report = h.sim->BuildReport();
  int queues = 0;
  for (const pb::UnitStats& u : report.units()) {
    if (u.kind() != "ipcq") continue;
    ++queues;
    EXPECT_EQ(u.ops(), 3u) << u.unit_name();
    EXPECT_EQ(u.bytes_written(), 3 * n * 4) << u.unit_name();
  }
  EXPECT_EQ(queues, 4);
}

// ---- timing semantics (DESIGN §4), times derived from the topology numbers ----

class RuntimeTiming : public ::testing::Test {
 protected:
  RuntimeTiming() : chip_(LoadSmall()) {
    const pb::Pe& pe = chip_.sip().cube().pe();
    ps_ = 1'000'000 / pe.clock_mhz();
    startup_ = pe.math().startup_cycles();
    lanes_ = pe.math().lanes_per_cycle();
    exp_rate_ = pe.math().transcendental_per_cycle();
    latency_ = chip_.sip().cube().hbm_channel().first_byte_latency_cycles();
    pe_bw_ = uint64_t{chip_.sip().cube().hbm_channel().bytes_per_cycle()} * pe.hbm_channels();
    ipcq_lat_ = chip_.sip().cube().ipcq().link().latency_cycles();
    for (const pb::IssueCostProfile& p : pe.issue_cost_profiles()) {
      if (p.name() == "realistic") realistic_ = p;
    }
  }
  uint64_t ExpCycles(uint64_t elements) const { return startup_ + elements / exp_rate_; }
  uint64_t FillCycles(uint64_t elements) const { return startup_ + elements / lanes_; }

  pb::Chip chip_;
  uint64_t ps_, startup_, lanes_, exp_rate_, latency_, pe_bw_, ipcq_lat_;
  pb::IssueCostProfile realistic_;
};

// A load followed by unrelated MATH work overlaps: the MATH op runs while the load streams; a
// MATH op on the loaded data starts when the load ends.
TEST_F(RuntimeTiming, LoadOverlapsUnrelatedMathWork) {
  Harness h(false);
  const uint64_t bytes = 1 << 20;
  uint64_t fill_id = 0, load_id = 0, exp_id = 0, use_id = 0;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> small = {8, 256};
                                const Tensor big = tl.Ref(0, {bytes / 2 / 256, 256});
                                Tensor x = co_await tl.Fill(small, 1.0f);
                                fill_id = x.producer();
                                Tensor l = co_await tl.Load(big, Arena::kPersistent);
                                load_id = l.producer();
                                Tensor e = co_await tl.Exp(x);
                                exp_id = e.producer();
                                Tensor u = co_await tl.Max(l);
                                use_id = u.producer();
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  const auto ops = h.Ops(".scheduler");
  const uint64_t fill_end = FillCycles(8 * 256);
  EXPECT_EQ(ops.at(fill_id).end_ps(), fill_end * ps_);
  const uint64_t load_end = fill_end + latency_ + bytes / pe_bw_;
  EXPECT_EQ(ops.at(load_id).end_ps(), load_end * ps_);
  EXPECT_EQ(ops.at(exp_id).start_ps(), fill_end * ps_);  // under the load
  EXPECT_EQ(ops.at(exp_id).end_ps(), (fill_end + ExpCycles(8 * 256)) * ps_);
  EXPECT_EQ(ops.at(use_id).start_ps(), load_end * ps_);   // auto-wait on the load
}

// A MATH op on a pending composite result starts exactly when the composite ends (zero
// profile), or resume + primitive cost later (realistic profile).
TEST_F(RuntimeTiming, MathOnAPendingCompositeStartsWhenItEnds) {
  for (const std::string profile : {"zero", "realistic"}) {
    Harness h(false, profile);
    uint64_t comp_id = 0, max_id = 0;
    ASSERT_TRUE(h.runtime
                    ->AddKernel(0, 0,
                                [&](Tl& tl) -> Task<void> {
                                  const Tensor a = tl.Alloc({8, 128}, pb::BF16);
                                  const Tensor b = tl.Ref(0, {128, 256});
                                  std::vector<Epilogue> epi = {Epilogue::Scale(0.1f)};
                                  Tensor s = co_await tl.Composite(a, b, epi);
                                  comp_id = s.producer();
                                  Tensor m = co_await tl.Max(s);
                                  max_id = m.producer();
                                })
                    .ok());
    ASSERT_TRUE(h.runtime->Run().ok());
    const auto ops = h.Ops(".scheduler");
    const uint64_t extra = profile == "zero" ? 0
                                             : (realistic_.resume_after_wait_cycles() +
                                                realistic_.primitive_cycles()) * ps_;
    EXPECT_EQ(ops.at(max_id).start_ps(), ops.at(comp_id).end_ps() + extra) << profile;
  }
}

// Issue costs of the realistic profile delay each command by the stated cycles.
TEST_F(RuntimeTiming, RealisticIssueCostsDelayEachCommand) {
  Harness h(false, "realistic");
  std::vector<uint64_t> ids;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor a = tl.Alloc({8, 128}, pb::BF16);
                                const Tensor b = tl.Ref(0, {128, 256});
                                const Tensor k = tl.Ref(1 << 20, {64, 128});
                                Tensor l = co_await tl.Load(k);
                                ids.push_back(l.producer());
                                Tensor s = co_await tl.Composite(a, b);
                                ids.push_back(s.producer());
                                Tensor x = co_await tl.Exp(a);  // a is not pending: no wait
                                ids.push_back(x.producer());
                              })
                  .ok());
  ASSERT_TRUE(h.runtime->Run().ok());
  std::map<uint64_t, uint64_t> issue;
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (r.has_issue()) issue[r.issue().cmd_id()] = r.issue().issue_ps();
  }
  const uint64_t load = realistic_.load_cycles();
  const uint64_t comp = load + realistic_.composite_cycles();
  const uint64_t exp = comp + realistic_.primitive_cycles();
  EXPECT_EQ(issue.at(ids[0]), load * ps_);
  EXPECT_EQ(issue.at(ids[1]), comp * ps_);
  EXPECT_EQ(issue.at(ids[2]), exp * ps_);
  EXPECT_EQ(h.Ops(".scheduler").at(ids[2]).start_ps(), exp * ps_);
}

// A full IPCQ queue blocks the sender until the receiver pops: PE 0 fills its east queue
// (256 KiB, no receive posted), then sends 4 KiB more; PE 1 computes first and receives at
// `busy`; the credit is back at busy + latency, when PE 0's CPU goes on.
TEST_F(RuntimeTiming, FullIpcqQueueBlocksTheSender) {
  Harness h(false);
  const uint64_t queue = chip_.sip().cube().ipcq().queue_bytes();
  const uint64_t busy_elements = 8 * 32768;
  uint64_t marker_id = 0;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor big = tl.Alloc({queue / 4}, pb::FP32, Arena::kPersistent);
                                const Tensor small = tl.Alloc({1024}, pb::FP32);
                                const Peer east = tl.PeerOf("E");
                                co_await tl.Send(east, big);
                                co_await tl.Send(east, small);  // no credit: blocks
                                Tensor x = co_await tl.Exp(small);
                                marker_id = x.producer();
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor x = tl.Alloc({busy_elements}, pb::FP32, Arena::kPersistent);
                                co_await tl.Exp(x, x);
                                const Peer west = tl.PeerOf("W");
                                const std::vector<uint64_t> s1 = {queue / 4}, s2 = {1024};
                                co_await tl.Recv(west, s1, pb::FP32, Arena::kPersistent);
                                co_await tl.Recv(west, s2);
                              })
                  .ok());
  absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  const uint64_t busy = ExpCycles(busy_elements);
  const uint64_t credit_back = busy + ipcq_lat_;
  EXPECT_EQ(h.Ops(".scheduler").at(marker_id).start_ps(), credit_back * ps_);
  bool stalled = false;
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (r.has_stall() && r.stall().pe() == 0 &&
        r.stall().waits_on().find("no credit") != std::string::npos) {
      EXPECT_EQ(r.stall().to_ps(), credit_back * ps_);
      stalled = true;
    }
  }
  EXPECT_TRUE(stalled);
}

// Two kernel coroutines on one PE CPU interleave when one blocks: request 0 issues a long
// blocking MATH op; request 1 runs meanwhile and issues its load before request 0 resumes.
TEST_F(RuntimeTiming, TwoCoroutinesOnOneCpuInterleave) {
  Harness h(false, "realistic");
  uint64_t long_id = 0, load_id = 0, after_id = 0;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor x = tl.Alloc({8, 4096});
                                Tensor e = co_await tl.Exp(x);
                                long_id = e.producer();
                                Tensor f = co_await tl.Exp(x);
                                after_id = f.producer();
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 1,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor k = tl.Ref(1 << 20, {64, 128});
                                Tensor l = co_await tl.Load(k);
                                load_id = l.producer();
                              })
                  .ok());
  ASSERT_TRUE(h.runtime->Run().ok());
  std::map<uint64_t, uint64_t> issue;
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (r.has_issue()) issue[r.issue().cmd_id()] = r.issue().issue_ps();
  }
  const uint64_t prim = realistic_.primitive_cycles();
  const uint64_t long_end = prim + ExpCycles(8 * 4096);
  EXPECT_EQ(issue.at(long_id), prim * ps_);
  EXPECT_EQ(issue.at(load_id), (prim + realistic_.load_cycles()) * ps_);  // while 0 waits
  EXPECT_EQ(issue.at(after_id),
            (long_end + realistic_.resume_after_wait_cycles() + prim) * ps_);
}

// Leaving a scratch_scope while a command still writes into it is an error naming the command.
TEST_F(RuntimeTiming, LeavingAScopeWithAPendingWriteIsAnError) {
  Harness h(false);
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor a = tl.Alloc({8, 128}, pb::BF16, Arena::kPersistent);
                                const Tensor b = tl.Ref(0, {128, 256});
                                {
                                  ScratchScope scope = tl.Scope();
                                  co_await tl.Composite(a, b);  // writes scratch, not waited
                                }
                                co_await tl.WaitAll();
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()),
              ::testing::AllOf(HasSubstr("pe 0"), HasSubstr("leaving scratch_scope while cmd 1")));
}

// Deadlock: a receive with no sender stops the run and names the waiting PE and queue.
TEST_F(RuntimeTiming, DeadlockedKernelIsReported) {
  Harness h(false);
  ASSERT_TRUE(h.runtime
                  ->AddKernel(2, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {64};
                                co_await tl.Recv(tl.PeerOf("N"), shape);
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_EQ(KindOf(status), ErrorKind::kDeadlock) << status;
  EXPECT_EQ(ExitCodeOf(status), kExitDeadlock);
  EXPECT_THAT(std::string(status.message()),
              ::testing::AllOf(HasSubstr("deadlock"), HasSubstr("pe 2"), HasSubstr("recv")));
}

// Islands (CUBEs simulated one after the other): the run's first error is the earliest in
// event order, as on one heap, though island 0 (CUBE 0) runs first and fails later in time.
TEST_F(RuntimeTiming, IslandsReportTheEarliestErrorAndEveryDeadlockedPe) {
  // CUBEs 0 and 1 on one heap, or as two islands.
  const auto two_cubes = [](bool islands) {
    return Harness(false, "zero", LoadSmall(), {0, 1},
                   islands ? std::vector<std::vector<uint32_t>>{{0}, {1}}
                           : std::vector<std::vector<uint32_t>>{});
  };
  for (const bool islands : {false, true}) {
    Harness h = two_cubes(islands);
    for (const uint32_t pe : {0u, 4u}) {
      ASSERT_TRUE(h.runtime
                      ->AddKernel(pe, 0,
                                  [pe](Tl& tl) -> Task<void> {
                                    const Tensor a =
                                        tl.Alloc({8, 128}, pb::BF16, Arena::kPersistent);
                                    const Tensor b = tl.Ref(0, {128, 256});
                                    // PE 0 works a while first: its error comes later.
                                    if (pe == 0) {
                                      const Tensor early = co_await tl.Composite(a, b);
                                      co_await tl.Wait(early);
                                    }
                                    {
                                      ScratchScope scope = tl.Scope();
                                      co_await tl.Composite(a, b);
                                    }
                                    co_await tl.WaitAll();
                                  })
                      .ok());
    }
    const absl::Status status = h.runtime->Run();
    ASSERT_FALSE(status.ok());
    EXPECT_THAT(std::string(status.message()),
                ::testing::AllOf(HasSubstr("pe 4"), HasSubstr("leaving scratch_scope")))
        << "islands " << islands;
  }
  for (const bool islands : {false, true}) {
    Harness h = two_cubes(islands);
    for (const uint32_t pe : {2u, 6u}) {
      ASSERT_TRUE(h.runtime
                      ->AddKernel(pe, 0,
                                  [&](Tl& tl) -> Task<void> {
                                    const std::vector<uint64_t> shape = {64};
                                    co_await tl.Recv(tl.PeerOf("N"), shape);
                                  })
                      .ok());
    }
    const absl::Status status = h.runtime->Run();
    ASSERT_TRUE(absl::IsFailedPrecondition(status)) << status;
    EXPECT_THAT(std::string(status.message()),
                ::testing::AllOf(HasSubstr("deadlock"), HasSubstr("pe 2"), HasSubstr("pe 6")))
        << "islands " << islands;
  }
}

// Timing mode and data mode of the same kernel give identical op logs.
TEST(RuntimeModes, TimingModeAndDataModeGiveTheSameOpLog) {
  std::string logs[2];
  for (int data = 0; data < 2; ++data) {
    Harness h(data == 1, "realistic");
    for (uint32_t pe = 0; pe < 4; ++pe) {
      ASSERT_TRUE(h.runtime->AddKernel(pe, 0, [](Tl& tl) { return RingAllReduce(tl, 0, 1 << 20, 512); })
                      .ok());
    }
    ASSERT_TRUE(h.runtime->Run().ok());
    for (const pb::TraceRecord& r : h.sim->op_log().records()) logs[data] += r.SerializeAsString();
  }
  EXPECT_EQ(logs[0], logs[1]);
  EXPECT_FALSE(logs[0].empty());
}

// Messages between CUBEs travel the NOC: 3 hops east on the small chip's 2x4 CUBE mesh pay
// three hop latencies plus one packet body per packet (virtual cut-through, DESIGN §2); across
// SIPs the UCIe hop is paid. The receive completes at delivery; the values arrive (data mode).
TEST(RuntimeMessages, NocAndUcieSendRecvPayTheirHops) {
  struct Case {
    std::string topology;
    std::vector<uint32_t> cubes;
    std::string direction;     // resolved on the sender
    uint32_t receiver_cube;    // global CUBE of the receiver
    uint64_t bytes;
  };
  const std::vector<Case> cases = {
      {"topology/small.textproto", {0, 3}, "", 3, 8192},
      {"topology/small.textproto", {0, 1}, "cube_E", 1, 4096},
      {"topology/chip_2sip.textproto", {0, 16}, "global_E", 16, 4096},
  };
  for (const Case& c : cases) {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(c.topology);
    ASSERT_TRUE(chip.ok());
    Harness h(true, "zero", *chip, c.cubes);
    const topology::ChipIndex index(*chip);
    const uint32_t pes = index.pes_per_cube();
    const uint32_t sender = 0, receiver = c.receiver_cube * pes;
    const uint64_t n = c.bytes / 4;
    const std::vector<float> x = Random(n, 77);
    h.Put(h.Hbm(sender, 0, {1, n}, pb::FP32), x);
    uint64_t recv_id = 0;
    ASSERT_TRUE(h.runtime
                    ->AddKernel(sender, 0,
                                [&](Tl& tl) -> Task<void> {
                                  const std::vector<uint64_t> shape = {1, n};
                                  const Tensor xh = tl.Ref(0, shape, pb::FP32);
                                  Tensor v = co_await tl.Load(xh);
                                  const Peer to = c.direction.empty() ? Peer::Pe(receiver)
                                                                      : tl.PeerOf(c.direction);
                                  co_await tl.Send(to, v);
                                })
                    .ok());
    ASSERT_TRUE(h.runtime
                    ->AddKernel(receiver, 0,
                                [&](Tl& tl) -> Task<void> {
                                  const std::vector<uint64_t> shape = {1, n};
                                  Tensor got = co_await tl.Recv(Peer::Pe(sender), shape);
                                  recv_id = got.producer();
                                  const Tensor out = tl.Ref(1 << 20, shape, pb::FP32);
                                  co_await tl.Store(out, got);
                                })
                    .ok());
    const absl::Status status = h.runtime->Run();
    ASSERT_TRUE(status.ok()) << c.topology << ": " << status;
    EXPECT_EQ(h.Get(h.Hbm(receiver, 1 << 20, {1, n}, pb::FP32)), x) << c.topology;
    // The send issued when the load ended; delivery = that + hop latencies + bodies.
    const auto ops = h.Ops(".scheduler", sender);
    uint64_t load_end = 0;
    for (const auto& [id, rec] : ops) {
      if (rec.op() == "dma_load") load_end = rec.end_ps();
    }
    const topology::Router router(index, topology::Coord{chip->ucie().port_cube().row(),
                                                         chip->ucie().port_cube().col()});
    const topology::CubeId from = index.CubeOf(0), to = index.CubeOf(c.receiver_cube);
    const uint64_t noc = router.NocHops(from, to), ucie = router.UcieHops(from, to);
    const pb::Link& noc_link = chip->sip().noc().link();
    const pb::Link& ucie_link = chip->ucie().link();
    const uint64_t packet = chip->sip().noc().packet_bytes();
    const uint64_t packets = (c.bytes + packet - 1) / packet;
    uint64_t body = 0;  // the slowest link's time per packet
    if (noc > 0) body = std::max<uint64_t>(body, packet / noc_link.bytes_per_cycle());
    if (ucie > 0) body = std::max<uint64_t>(body, packet / ucie_link.bytes_per_cycle());
    const uint64_t deliver = load_end + (noc * noc_link.latency_cycles() +
                                         ucie * ucie_link.latency_cycles() + packets * body) *
                                            1000;
    // The receiving CPU's stall ends at the delivery.
    bool seen = false;
    for (const pb::TraceRecord& r : h.sim->op_log().records()) {
      if (r.has_stall() && r.stall().pe() == receiver && r.stall().cmd_id() == recv_id) {
        EXPECT_EQ(r.stall().to_ps(), deliver) << c.topology << " noc " << noc << " ucie " << ucie;
        seen = true;
      }
    }
    EXPECT_TRUE(seen) << c.topology;
  }
}

// Overflowing an arena is the kernel's fault (exit 4), naming the PE, the arena and the sizes.
TEST(RuntimeErrors, ArenaOverflowNamesPeArenaAndSizes) {
  Harness h(false);
  const uint64_t scratch = h.chip.sip().cube().pe().tcm().scratch_bytes();
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 0,
                              [&](Tl& tl) -> Task<void> {
                                tl.Alloc({scratch / 4 / 2});
                                tl.Alloc({scratch / 4});
                                co_return;
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_EQ(KindOf(status), ErrorKind::kKernelFault) << status;
  EXPECT_EQ(ExitCodeOf(status), kExitKernelFault);
  EXPECT_THAT(std::string(status.message()),
              ::testing::AllOf(HasSubstr("pe 1 (sip0.cube0.pe1)"), HasSubstr("scratch arena overflow"),
                               HasSubstr(absl::StrCat(scratch, " bytes needed")),
                               HasSubstr(absl::StrCat(scratch / 2, " of ", scratch))));
}

// A command of a kernel's that its PE refuses (a load from outside the PE's HBM region) is the
// kernel's fault, not the user's input: exit 4, the scheduler's one line.
TEST(RuntimeErrors, ARefusedCommandIsTheKernelsFault) {
  Harness h(false);
  const uint64_t region = h.chip.sip().cube().hbm_bytes() / h.chip.sip().cube().pes();
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {1024};
                                co_await tl.Load(tl.Ref(region - 1024, shape, pb::BF16));
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_EQ(KindOf(status), ErrorKind::kKernelFault) << status;
  EXPECT_EQ(ExitCodeOf(status), kExitKernelFault);
  EXPECT_THAT(std::string(status.message()),
              ::testing::AllOf(HasSubstr("pe 1 (sip0.cube0.pe1)"), HasSubstr("dma cmd"),
                               HasSubstr("outside the owner's region")));
}

// recv_async returns at once (the CPU goes on with other work); Wait blocks until the message
// is in; the value is the sender's.
TEST(RuntimeMessages, RecvAsyncDoesNotBlockAndWaitDoes) {
  Harness h(true);
  const uint64_t n = 2048;
  const std::vector<float> x = Random(n, 5);
  h.Put(h.Hbm(0, 0, {1, n}, pb::FP32), x);
  uint64_t recv_id = 0, marker_id = 0;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {1, n};
                                const Tensor big = tl.Alloc({8, 8192}, pb::FP32, Arena::kPersistent);
                                co_await tl.Exp(big, big);  // delay the send
                                const Tensor xh = tl.Ref(0, shape, pb::FP32);
                                Tensor v = co_await tl.Load(xh);
                                co_await tl.Send(tl.PeerOf("E"), v);
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {1, n};
                                Tensor pending = co_await tl.RecvAsync(tl.PeerOf("W"), shape);
                                recv_id = pending.producer();
                                const Tensor y = tl.Alloc({8, 128});
                                Tensor e = co_await tl.Exp(y);  // runs before the message is in
                                marker_id = e.producer();
                                Tensor got = co_await tl.Wait(pending);
                                const Tensor out = tl.Ref(1 << 20, shape, pb::FP32);
                                co_await tl.Store(out, got);
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(h.Get(h.Hbm(1, 1 << 20, {1, n}, pb::FP32)), x);
  EXPECT_EQ(h.Ops(".scheduler", 1).at(marker_id).start_ps(), 0u);
  bool waited = false;
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (r.has_stall() && r.stall().pe() == 1 && r.stall().cmd_id() == recv_id) {
      EXPECT_GT(r.stall().to_ps(), r.stall().from_ps());
      waited = true;
    }
  }
  EXPECT_TRUE(waited);
}

// ---- requests are isolated (several kernel instances on one PE) ----

// Op records named `op` (any unit).
std::vector<pb::OpRecord> OpsNamed(const Harness& h, const std::string& op) {
  std::vector<pb::OpRecord> out;
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (r.has_op() && r.op().op() == op) out.push_back(r.op());
  }
  return out;
}

// ---- IPCQ pops ----

// A receive posted while a two-chunk message streams in pops at its post (its issue time, after
// the recv issue cost): chunk 0, seen to arrive before the post, is popped then; chunk 1,
// arriving between the post call and its issue, is popped at the same instant by a pop of its
// own. Swept over post times around chunk 1's arrival (536 cycles: send issue 16, two chunks
// of 256 cycles on the link, latency 8); every run completes, at max(post, arrival).
TEST_F(RuntimeTiming, AReceivePostedAsTheLastChunkArrivesPopsEachChunkOnce) {
  const uint64_t chunk = chip_.sip().cube().ipcq().chunk_bytes();
  const uint64_t ipcq_bw = chip_.sip().cube().ipcq().link().bytes_per_cycle();
  const uint64_t arrive1 = realistic_.send_cycles() + 2 * chunk / ipcq_bw + ipcq_lat_;
  bool window = false;  // a post issued within recv_cycles after chunk 1's arrival
  for (uint64_t busy = 15000; busy <= 17500; busy += exp_rate_) {
    Harness h(false, "realistic");
    const std::vector<uint64_t> shape = {2 * chunk / 4};
    ASSERT_TRUE(h.runtime
                    ->AddKernel(1, 0,
                                [&](Tl& tl) -> Task<void> {
                                  co_await tl.Send(tl.PeerOf("W"), tl.Alloc(shape));
                                })
                    .ok());
    ASSERT_TRUE(h.runtime
                    ->AddKernel(0, 0,
                                [&](Tl& tl) -> Task<void> {
                                  const Tensor x = tl.Alloc({busy}, pb::FP32, Arena::kPersistent);
                                  co_await tl.Exp(x, x);
                                  co_await tl.Recv(tl.PeerOf("E"), shape);
                                })
                    .ok());
    const absl::Status status = h.runtime->Run();
    ASSERT_TRUE(status.ok()) << "busy " << busy << ": " << status;
    const std::vector<pb::OpRecord> recv = OpsNamed(h, "recv_ipcq");
    ASSERT_EQ(recv.size(), 1u);
    const uint64_t post = recv[0].issue_ps();
    EXPECT_EQ(recv[0].end_ps(), std::max(post, arrive1 * ps_)) << "busy " << busy;
    if (post > arrive1 * ps_ && post <= (arrive1 + realistic_.recv_cycles()) * ps_) window = true;
  }
  EXPECT_TRUE(window) << "no post issued just after chunk 1's arrival";
}

// PE 1's instances send in the opposite order of PE 0's receive posts: request 1's message is
// at the head while only request 0's receive waits, so the runtime stages it (pop at its
// arrival) and request 0 takes the next one; request 1's later receive takes the staged copy.
TEST_F(RuntimeTiming, TwoRequestsTakeTheirOwnIpcqMessages) {
  Harness h(true);
  const uint64_t n = 2048, bytes = n * 4;
  const std::vector<float> x0 = Random(n, 21), x1 = Random(n, 22);
  h.Put(h.Hbm(1, 0, {1, n}, pb::FP32), x0);
  h.Put(h.Hbm(1, 65536, {1, n}, pb::FP32), x1);
  const uint64_t sender_busy = 8 * 8192, receiver_busy = 8 * 32768;
  const auto sender = [&](uint64_t addr, bool busy) {
    return [&, addr, busy](Tl& tl) -> Task<void> {
      const std::vector<uint64_t> shape = {1, n};
      if (busy) {
        const Tensor big = tl.Alloc({sender_busy}, pb::FP32, Arena::kPersistent);
        co_await tl.Exp(big, big);
      }
      const Tensor xh = tl.Ref(addr, shape, pb::FP32);
      Tensor v = co_await tl.Load(xh);
      co_await tl.Send(tl.PeerOf("W"), v);
    };
  };
  const auto receiver = [&](uint64_t out_addr, bool busy) {
    return [&, out_addr, busy](Tl& tl) -> Task<void> {
      const std::vector<uint64_t> shape = {1, n};
      if (busy) {
        const Tensor big = tl.Alloc({receiver_busy}, pb::FP32, Arena::kPersistent);
        co_await tl.Exp(big, big);
      }
      Tensor got = co_await tl.Recv(tl.PeerOf("E"), shape);
      co_await tl.Store(tl.Ref(out_addr, shape, pb::FP32), got);
    };
  };
  ASSERT_TRUE(h.runtime->AddKernel(1, 0, sender(0, true)).ok());       // sends second
  ASSERT_TRUE(h.runtime->AddKernel(1, 1, sender(65536, false)).ok());  // sends first
  ASSERT_TRUE(h.runtime->AddKernel(0, 0, receiver(1 << 20, false)).ok());  // posts first
  ASSERT_TRUE(h.runtime->AddKernel(0, 1, receiver(2 << 20, true)).ok());   // posts late
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(h.Get(h.Hbm(0, 1 << 20, {1, n}, pb::FP32)), x0);
  EXPECT_EQ(h.Get(h.Hbm(0, 2 << 20, {1, n}, pb::FP32)), x1);
  // Request 1's message is popped into staging when it arrives.
  const uint64_t ipcq_bw = chip_.sip().cube().ipcq().link().bytes_per_cycle();
  const uint64_t arrive1 = latency_ + bytes / pe_bw_ + bytes / ipcq_bw + ipcq_lat_;
  const std::vector<pb::OpRecord> staged = OpsNamed(h, "stage_ipcq");
  ASSERT_EQ(staged.size(), 1u);
  EXPECT_EQ(staged[0].request_id(), 1u);
  EXPECT_EQ(staged[0].start_ps(), arrive1 * ps_);
  EXPECT_EQ(staged[0].unit_name(), "sip0.cube0.pe0.cpu");
  EXPECT_THAT(staged[0].label(), HasSubstr("request 0 waits"));
  // Request 1's receive takes it when posted; request 0's got its own message.
  for (const pb::OpRecord& r : OpsNamed(h, "recv_ipcq")) {
    if (r.request_id() == 1) {
      EXPECT_THAT(r.label(), HasSubstr("(staged)"));
      EXPECT_EQ(r.end_ps(), ExpCycles(receiver_busy) * ps_);
    } else {
      EXPECT_THAT(r.label(), ::testing::Not(HasSubstr("staged")));
      EXPECT_EQ(r.end_ps(),
                (ExpCycles(sender_busy) + latency_ + bytes / pe_bw_ + bytes / ipcq_bw + ipcq_lat_) *
                    ps_);
    }
  }
  // Sends carry their request in the op log.
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (r.has_issue() && r.issue().has_send()) {
      EXPECT_EQ(r.issue().send().request_id(), r.issue().request_id());
    }
  }
}

// Two message streams of one request on each of two PEs (two KV heads sharing the PEs): the
// streams send messages of equal size in one order and post their receives in the other. Each
// receive takes its own stream's message - over IPCQ (the other stream's message, at the head,
// is staged) and over the NOC - in data mode and, with the same op log, in timing mode.
TEST(RuntimeMessages, TwoStreamsOfOneRequestTakeTheirOwnMessages) {
  const uint64_t n = 256;
  const std::vector<float> x0 = Random(n, 31), x1 = Random(n, 32);
  // (sender, receiver, how the receiver names the sender, how the sender names the receiver)
  struct Link {
    uint32_t from, to;
    std::string what;
  };
  for (const Link& link : {Link{1, 0, "IPCQ"}, Link{4, 0, "NOC"}}) {
    std::string logs[2];
    for (const bool data : {true, false}) {
      Harness h(data, "zero", LoadSmall(), {0, 1});
      if (data) {
        h.Put(h.Hbm(link.from, 0, {1, n}, pb::FP32), x0);
        h.Put(h.Hbm(link.from, 4096, {1, n}, pb::FP32), x1);
      }
      const auto peer = [&](Tl& tl, uint32_t other) {
        return link.what == "IPCQ" ? tl.PeerOf(other == 0 ? "W" : "E") : Peer::Pe(other);
      };
      for (const uint32_t stream : {0u, 1u}) {
        // Stream 0 sends first and receives last.
        ASSERT_TRUE(h.runtime
                        ->AddKernel(link.from, 0, stream,
                                    [&, stream](Tl& tl) -> Task<void> {
                                      const std::vector<uint64_t> shape = {1, n}, busy = {8 * 4096};
                                      if (stream == 1) {
                                        const Tensor big = tl.Alloc(busy, pb::FP32);
                                        co_await tl.Exp(big, big);
                                      }
                                      Tensor v = co_await tl.Load(
                                          tl.Ref(stream * 4096, shape, pb::FP32));
                                      co_await tl.Send(peer(tl, link.to), v);
                                    })
                        .ok());
        ASSERT_TRUE(h.runtime
                        ->AddKernel(link.to, 0, stream,
                                    [&, stream](Tl& tl) -> Task<void> {
                                      const std::vector<uint64_t> shape = {1, n}, busy = {8 * 8192};
                                      if (stream == 0) {
                                        const Tensor big = tl.Alloc(busy, pb::FP32);
                                        co_await tl.Exp(big, big);
                                      }
                                      Tensor got = co_await tl.Recv(peer(tl, link.from), shape);
                                      co_await tl.Store(
                                          tl.Ref((1 + stream) << 20, shape, pb::FP32), got);
                                    })
                        .ok());
      }
      const absl::Status status = h.runtime->Run();
      ASSERT_TRUE(status.ok()) << link.what << ": " << status;
      if (data) {
        EXPECT_EQ(h.Get(h.Hbm(link.to, 1 << 20, {1, n}, pb::FP32)), x0) << link.what;
        EXPECT_EQ(h.Get(h.Hbm(link.to, 2 << 20, {1, n}, pb::FP32)), x1) << link.what;
      }
      if (link.what == "IPCQ") {
        EXPECT_EQ(OpsNamed(h, "stage_ipcq").size(), 1u);
      }
      for (const pb::TraceRecord& r : h.sim->op_log().records()) {
        logs[data] += r.SerializeAsString();
      }
    }
    EXPECT_EQ(logs[0], logs[1]) << link.what;
  }
}

// A PE takes one instance per (request, stream): a second one could not tell its messages apart.
TEST(RuntimeMessages, ASecondInstanceOfOneRequestAndStreamOnAPeIsRefused) {
  Harness h(false);
  const auto noop = [](Tl&) -> Task<void> { co_return; };
  ASSERT_TRUE(h.runtime->AddKernel(2, 3, 1, noop).ok());
  ASSERT_TRUE(h.runtime->AddKernel(2, 3, 2, noop).ok());
  ASSERT_TRUE(h.runtime->AddKernel(2, 4, 1, noop).ok());
  const absl::Status status = h.runtime->AddKernel(2, 3, 1, noop);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("pe 2 (sip0.cube0.pe2): a second kernel instance of request 3, stream 1"));
}

// A receive whose buffer holds another number of elements than the message fails its kernel
// with the same error in timing mode as in data mode.
TEST(RuntimeMessages, ASizeMismatchIsTheSameKernelErrorInBothModes) {
  std::string messages[2];
  for (const bool data : {true, false}) {
    Harness h(data);
    ASSERT_TRUE(h.runtime
                    ->AddKernel(1, 0,
                                [](Tl& tl) -> Task<void> {
                                  const std::vector<uint64_t> shape = {128};
                                  co_await tl.Send(tl.PeerOf("W"), tl.Alloc(shape));
                                })
                    .ok());
    ASSERT_TRUE(h.runtime
                    ->AddKernel(0, 0,
                                [](Tl& tl) -> Task<void> {
                                  const std::vector<uint64_t> shape = {64};
                                  co_await tl.Recv(tl.PeerOf("E"), shape);
                                })
                    .ok());
    const absl::Status status = h.runtime->Run();
    ASSERT_FALSE(status.ok()) << (data ? "data" : "timing") << " mode";
    messages[data] = std::string(status.message());
  }
  // pe 1's first message: MessageId(1, 1) (messaging.h).
  EXPECT_THAT(messages[0], HasSubstr("pe 0 (sip0.cube0.pe0): recv 1 of 64 elements got message "
                                     "2000000001 of 128 elements from pe 1"));
  EXPECT_EQ(messages[0], messages[1]);
}

// Credit with staging. PE 1: request 0 fills PE 0's queue (A1 48 KiB, A2 32 KiB, A3 the rest),
// then request 1's B1 (16 KiB) has no credit and blocks. PE 0: request 1 posts its receive at
// tB (after a 1 MiB load), request 0 at tA (after a long Exp). At tB A1 is staged: its pop
// returns 48 KiB of credit at tB + lat, when B1 departs and PE 1's request 1 goes on. A2 no
// longer fits the 64 KiB staging buffer (48 + 32 KiB): it stays at the head, so request 1's
// receive waits for request 0's receives at tA although B1 arrived long before.
TEST_F(RuntimeTiming, StagingReturnsCreditAndAFullBufferBlocksTheHead) {
  Harness h(false);
  const uint64_t queue = chip_.sip().cube().ipcq().queue_bytes();
  const uint64_t ipcq_bw = chip_.sip().cube().ipcq().link().bytes_per_cycle();
  const uint64_t a1 = 48 * 1024, a2 = 32 * 1024, a3 = queue - a1 - a2, b1 = 16 * 1024;
  ASSERT_LE(a1, kDemuxStagingBytes);
  ASSERT_GT(a1 + a2, kDemuxStagingBytes);
  const uint64_t load_bytes = 1 << 20, busy = 8 * 32768;
  uint64_t marker_id = 0, b_recv = 0;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Peer west = tl.PeerOf("W");
                                for (uint64_t b : {a1, a2, a3}) {
                                  const Tensor x = tl.Alloc({b / 4}, pb::FP32, Arena::kPersistent);
                                  co_await tl.Send(west, x);
                                }
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 1,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor x = tl.Alloc({b1 / 4}, pb::FP32);
                                co_await tl.Send(tl.PeerOf("W"), x);  // no credit: blocks
                                Tensor e = co_await tl.Exp(x);
                                marker_id = e.producer();
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor big = tl.Alloc({busy}, pb::FP32, Arena::kPersistent);
                                co_await tl.Exp(big, big);
                                const Peer east = tl.PeerOf("E");
                                for (uint64_t b : {a1, a2, a3}) {
                                  const std::vector<uint64_t> shape = {b / 4};
                                  co_await tl.Recv(east, shape);
                                }
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 1,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor k = tl.Ref(0, {load_bytes / 2 / 256, 256});
                                Tensor l = co_await tl.Load(k, Arena::kPersistent);
                                co_await tl.Wait(l);
                                const std::vector<uint64_t> shape = {b1 / 4};
                                Tensor got = co_await tl.Recv(tl.PeerOf("E"), shape);
                                b_recv = got.producer();
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  const uint64_t t_b = latency_ + load_bytes / pe_bw_;
  const uint64_t t_a = ExpCycles(busy);
  const uint64_t link_free = queue / ipcq_bw;  // A1..A3 serialised back to back from 0
  const uint64_t credit_back = t_b + ipcq_lat_;
  const uint64_t b1_arrive = credit_back + b1 / ipcq_bw + ipcq_lat_;
  ASSERT_GT(t_b, link_free + ipcq_lat_);  // A1 is in when request 1 posts
  ASSERT_GT(t_a, b1_arrive);              // B1 is in long before request 0 posts
  // A1 staged at tB; A2 only at tA, when request 0's first receive has freed A1's bytes (its
  // next receive is posted after that: request 1's receive still waits then).
  const std::vector<pb::OpRecord> staged = OpsNamed(h, "stage_ipcq");
  ASSERT_EQ(staged.size(), 2u);
  EXPECT_EQ(staged[0].request_id(), 0u);
  EXPECT_EQ(staged[0].bytes_written(), a1);
  EXPECT_EQ(staged[0].start_ps(), t_b * ps_);
  EXPECT_EQ(staged[1].bytes_written(), a2);
  EXPECT_EQ(staged[1].start_ps(), t_a * ps_);
  // The blocked sender goes on when the staging pop's credit is back.
  bool stalled = false;
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (r.has_stall() && r.stall().pe() == 1 && r.stall().request_id() == 1 &&
        r.stall().waits_on().find("no credit") != std::string::npos) {
      EXPECT_EQ(r.stall().from_ps(), 0u);
      EXPECT_EQ(r.stall().to_ps(), credit_back * ps_);
      stalled = true;
    }
  }
  EXPECT_TRUE(stalled);
  EXPECT_EQ(h.Ops(".scheduler", 1).at(marker_id).start_ps(), credit_back * ps_);
  // Head-of-line: request 1's receive ends when request 0's receives drain A2 and A3.
  const auto recvs = h.Ops(".cpu", 0);
  EXPECT_EQ(recvs.at(b_recv).end_ps(), t_a * ps_);
  int staged_recvs = 0;
  for (const pb::OpRecord& r : OpsNamed(h, "recv_ipcq")) {
    if (r.label().find("(staged)") == std::string::npos) continue;
    EXPECT_EQ(r.request_id(), 0u);
    EXPECT_EQ(r.end_ps(), t_a * ps_);
    ++staged_recvs;
  }
  EXPECT_EQ(staged_recvs, 2);
}

// NOC (and across SIPs, UCIe): two requests' messages from one PE are delivered in the
// opposite order of the receives' posts; each receive takes its own request's message, at its
// delivery.
TEST_F(RuntimeTiming, TwoRequestsTakeTheirOwnNocMessages) {
  struct Case {
    std::string topology;
    std::vector<uint32_t> cubes;  // the receiver is PE 0 of the second one
  };
  for (const Case& c : {Case{"topology/small.textproto", {0, 1}},
                        Case{"topology/chip_2sip.textproto", {0, 16}}}) {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(c.topology);
    ASSERT_TRUE(chip.ok());
    Harness h(true, "zero", *chip, c.cubes);
    const topology::ChipIndex index(h.chip);
    const uint32_t receiver = c.cubes[1] * index.pes_per_cube();
    const uint64_t n = 1024;
    const std::vector<float> x0 = Random(n, 31), x1 = Random(n, 32);
    h.Put(h.Hbm(0, 0, {1, n}, pb::FP32), x0);
    h.Put(h.Hbm(0, 65536, {1, n}, pb::FP32), x1);
    const auto sender = [&](uint64_t addr, bool busy) {
      return [&, addr, busy](Tl& tl) -> Task<void> {
        const std::vector<uint64_t> shape = {1, n};
        if (busy) {
          const Tensor big = tl.Alloc({8 * 8192}, pb::FP32, Arena::kPersistent);
          co_await tl.Exp(big, big);
        }
        const Tensor xh = tl.Ref(addr, shape, pb::FP32);
        Tensor v = co_await tl.Load(xh);
        co_await tl.Send(Peer::Pe(receiver), v);
      };
    };
    uint64_t recv_ids[2] = {0, 0};
    const auto recv = [&](uint32_t request) {
      return [&, request](Tl& tl) -> Task<void> {
        const std::vector<uint64_t> shape = {1, n};
        Tensor got = co_await tl.Recv(Peer::Pe(0), shape);
        recv_ids[request] = got.producer();
        co_await tl.Store(tl.Ref((request + 1) << 20, shape, pb::FP32), got);
      };
    };
    ASSERT_TRUE(h.runtime->AddKernel(0, 0, sender(0, true)).ok());       // sends second
    ASSERT_TRUE(h.runtime->AddKernel(0, 1, sender(65536, false)).ok());  // sends first
    ASSERT_TRUE(h.runtime->AddKernel(receiver, 0, recv(0)).ok());        // posts first
    ASSERT_TRUE(h.runtime->AddKernel(receiver, 1, recv(1)).ok());
    const absl::Status status = h.runtime->Run();
    ASSERT_TRUE(status.ok()) << c.topology << ": " << status;
    EXPECT_EQ(h.Get(h.Hbm(receiver, 1 << 20, {1, n}, pb::FP32)), x0) << c.topology;
    EXPECT_EQ(h.Get(h.Hbm(receiver, 2 << 20, {1, n}, pb::FP32)), x1) << c.topology;
    // Each receive ends at its own message's delivery: request 1's first, request 0's after
    // the sender's Exp (same route, so the gap is the Exp).
    const auto ops = h.Ops(".cpu", receiver);
    const uint64_t end0 = ops.at(recv_ids[0]).end_ps(), end1 = ops.at(recv_ids[1]).end_ps();
    EXPECT_EQ(end0 - end1, ExpCycles(8 * 8192) * ps_) << c.topology;
    EXPECT_EQ(ops.at(recv_ids[0]).request_id(), 0u);
    EXPECT_EQ(ops.at(recv_ids[1]).request_id(), 1u);
  }
}

// A request that never posts its receive: its 128 KiB message does not fit the staging buffer
// and blocks the queue head; request 0's receive behind it is reported as a deadlock, never a
// hang.
TEST_F(RuntimeTiming, ARequestThatNeverReceivesIsADeadlock) {
  Harness h(false);
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor big = tl.Alloc({8 * 8192}, pb::FP32, Arena::kPersistent);
                                co_await tl.Exp(big, big);
                                const Tensor x = tl.Alloc({256}, pb::FP32);
                                co_await tl.Send(tl.PeerOf("W"), x);
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 1,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor x = tl.Alloc({2 * kDemuxStagingBytes / 4}, pb::FP32);
                                co_await tl.Send(tl.PeerOf("W"), x);
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {256};
                                co_await tl.Recv(tl.PeerOf("E"), shape);
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 1,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor x = tl.Alloc({1024}, pb::FP32);
                                co_await tl.Exp(x);  // never receives
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              ::testing::AllOf(HasSubstr("deadlock"), HasSubstr("pe 0 (sip0.cube0.pe0) request 0"),
                               HasSubstr("recv"), HasSubstr("behind request 1's message")));
}

// A fused merge whose input is a posted receive (recv_async) still in flight does not make the
// CPU wait (realistic profile): PE 1 posts the receive (issued at recv), issues the lse_merge
// at once (issued at recv + ex_composite, IssueRecord at that time, the receive listed in
// recv_depends_on) and goes on: the next EXP issues at recv + ex_composite + primitive and
// starts then, long before the message lands. The runtime hands the merge to the scheduler at
// the message's arrival, where it starts: PE 0 sends after its EXP [8, 8192] (issued at
// primitive, ends ExpCycles later, then resume + send cost), the last of the message's bytes
// arrives bytes / ipcq_bw + ipcq latency later. Data: the merge reads the received values.
TEST_F(RuntimeTiming, MergeOnAPendingRecvAsyncIssuesAtOnceAndStartsAtTheArrival) {
  Harness h(true, "realistic");
  const uint64_t rows = 8, d = 128, n = rows * (d + 2), bytes = n * 4;
  const uint64_t busy = 8 * 8192;
  std::vector<float> in = Random(n, 31), acc = Random(n, 32);
  for (uint64_t i = rows; i < 2 * rows; ++i) {  // l > 0
    in[i] = std::fabs(in[i]) + 0.5f;
    acc[i] = std::fabs(acc[i]) + 0.5f;
  }
  const auto views = [&](const Tensor& buf) {
    const std::vector<uint64_t> full = {rows, d};
    return Accumulator{buf.Rows(0, rows), buf.Rows(rows, rows),
                       buf.Rows(2 * rows, rows * d).View(full)};
  };
  uint64_t recv_id = 0, merge_id = 0, marker_id = 0;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {n, 1};
                                const Tensor x = tl.Alloc(shape, pb::FP32, Arena::kPersistent);
                                EXPECT_TRUE(h.store->Write(x.ToRef(), in).ok());
                                const Tensor big = tl.Alloc({busy}, pb::FP32, Arena::kPersistent);
                                co_await tl.Exp(big, big);  // delays the send
                                co_await tl.Send(tl.PeerOf("E"), x);
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {n, 1};
                                const Tensor mine = tl.Alloc(shape, pb::FP32, Arena::kPersistent);
                                EXPECT_TRUE(h.store->Write(mine.ToRef(), acc).ok());
                                Tensor got = co_await tl.RecvAsync(tl.PeerOf("W"), shape);
                                recv_id = got.producer();
                                const Accumulator a = views(mine);
                                Tensor merged = co_await tl.LseMerge(a, views(got), a);
                                merge_id = merged.producer();
                                const Tensor y = tl.Alloc({8, 128});
                                Tensor e = co_await tl.Exp(y);  // runs before the message is in
                                marker_id = e.producer();
                                co_await tl.Wait(merged);
                                co_await tl.Store(tl.Ref(1 << 20, shape, pb::FP32), mine);
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;

  const uint64_t ipcq_bw = chip_.sip().cube().ipcq().link().bytes_per_cycle();
  const uint64_t prim = realistic_.primitive_cycles();
  const uint64_t send_issue =
      prim + ExpCycles(busy) + realistic_.resume_after_wait_cycles() + realistic_.send_cycles();
  const uint64_t arrival = send_issue + bytes / ipcq_bw + ipcq_lat_;
  const uint64_t merge_issue = realistic_.recv_cycles() + realistic_.ex_composite_cycles();
  const uint64_t marker_issue = merge_issue + prim;
  ASSERT_LT(marker_issue + ExpCycles(8 * 128), arrival);  // the test's premise

  std::map<uint64_t, pb::IssueRecord> issues;
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (r.has_issue() && r.issue().pe() == 1) issues[r.issue().cmd_id()] = r.issue();
  }
  ASSERT_TRUE(issues.contains(merge_id));
  EXPECT_EQ(issues.at(merge_id).issue_ps(), merge_issue * ps_);
  EXPECT_THAT(issues.at(merge_id).recv_depends_on(), ::testing::ElementsAre(recv_id));
  EXPECT_TRUE(issues.at(merge_id).depends_on().empty());
  EXPECT_EQ(issues.at(marker_id).issue_ps(), marker_issue * ps_);
  const auto ops = h.Ops(".scheduler", 1);
  EXPECT_EQ(ops.at(marker_id).start_ps(), marker_issue * ps_);  // the CPU did not wait
  const std::vector<pb::OpRecord> recvs = OpsNamed(h, "recv_ipcq");
  ASSERT_EQ(recvs.size(), 1u);
  EXPECT_EQ(recvs[0].end_ps(), arrival * ps_);
  EXPECT_EQ(ops.at(merge_id).start_ps(), arrival * ps_);  // handed over at the arrival
  EXPECT_EQ(ops.at(merge_id).issue_ps(), arrival * ps_);
  // PE 1's CPU waited on nothing before the marker issued (then on the marker itself, the
  // merge and the store).
  bool waited_on_merge = false;
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (!r.has_stall() || r.stall().pe() != 1) continue;
    EXPECT_GE(r.stall().from_ps(), marker_issue * ps_) << r.stall().waits_on();
    EXPECT_NE(r.stall().cmd_id(), recv_id);
    if (r.stall().cmd_id() == merge_id) waited_on_merge = true;
  }
  EXPECT_TRUE(waited_on_merge);

  // The merge read the received values: (m, l, O) merged row by row.
  const std::vector<float> out = h.Get(h.Hbm(1, 1 << 20, {n, 1}, pb::FP32));
  ASSERT_EQ(out.size(), n);
  for (uint64_t r = 0; r < rows; ++r) {
    const double m = std::max(acc[r], in[r]);
    const double ca = std::exp(acc[r] - m), cb = std::exp(in[r] - m);
    EXPECT_NEAR(out[r], m, 1e-6) << r;
    EXPECT_NEAR(out[rows + r], acc[rows + r] * ca + in[rows + r] * cb, 1e-5) << r;
    for (uint64_t c = 0; c < d; ++c) {
      const uint64_t i = 2 * rows + r * d + c;
      EXPECT_NEAR(out[i], acc[i] * ca + in[i] * cb, 1e-5) << r << "," << c;
    }
  }
}

// Two merges into one accumulator, each on its own pending receive, the second's message
// landing first (PE 3 sends at once, PE 0 after an EXP [8, 8192]): the second merge depends on
// the first (a scheduler dependency on a held command), so the runtime hands it over only after
// the first — the first starts at PE 0's message's arrival, the second when the first ends.
TEST_F(RuntimeTiming, AHeldCommandsDependentFollowsItToTheScheduler) {
  Harness h(true, "realistic");
  const uint64_t rows = 8, d = 128, n = rows * (d + 2), bytes = n * 4;
  const uint64_t busy = 8 * 8192;
  const auto views = [&](const Tensor& buf) {
    const std::vector<uint64_t> full = {rows, d};
    return Accumulator{buf.Rows(0, rows), buf.Rows(rows, rows),
                       buf.Rows(2 * rows, rows * d).View(full)};
  };
  const auto sender = [&](const std::string& to, bool delay) {
    return [&, to, delay](Tl& tl) -> Task<void> {
      const std::vector<uint64_t> shape = {n, 1};
      const Tensor x = tl.Alloc(shape, pb::FP32, Arena::kPersistent);
      if (delay) {
        const Tensor big = tl.Alloc({busy}, pb::FP32, Arena::kPersistent);
        co_await tl.Exp(big, big);
      }
      co_await tl.Send(tl.PeerOf(to), x);
    };
  };
  uint64_t merge1 = 0, merge2 = 0;
  ASSERT_TRUE(h.runtime->AddKernel(0, 0, sender("E", true)).ok());   // PE 0 -> PE 1, late
  ASSERT_TRUE(h.runtime->AddKernel(3, 0, sender("N", false)).ok());  // PE 3 -> PE 1, at once
  ASSERT_TRUE(h.runtime
                  ->AddKernel(1, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {n, 1};
                                const Tensor mine = tl.Alloc(shape, pb::FP32, Arena::kPersistent);
                                Accumulator a = views(mine);
                                Tensor w = co_await tl.RecvAsync(tl.PeerOf("W"), shape);
                                Tensor m1 = co_await tl.LseMerge(a, views(w), a);
                                merge1 = m1.producer();
                                a = Accumulator{a.m.WithProducer(merge1),
                                                a.l.WithProducer(merge1), m1};
                                Tensor s = co_await tl.RecvAsync(tl.PeerOf("S"), shape);
                                Tensor m2 = co_await tl.LseMerge(a, views(s), a);
                                merge2 = m2.producer();
                                co_await tl.Wait(m2);
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  const uint64_t ipcq_bw = chip_.sip().cube().ipcq().link().bytes_per_cycle();
  const uint64_t arrival_w = realistic_.primitive_cycles() + ExpCycles(busy) +
                             realistic_.resume_after_wait_cycles() + realistic_.send_cycles() +
                             bytes / ipcq_bw + ipcq_lat_;
  const uint64_t arrival_s = realistic_.send_cycles() + bytes / ipcq_bw + ipcq_lat_;
  ASSERT_LT(arrival_s, arrival_w);
  const auto ops = h.Ops(".scheduler", 1);
  EXPECT_EQ(ops.at(merge1).start_ps(), arrival_w * ps_);
  EXPECT_EQ(ops.at(merge2).start_ps(), ops.at(merge1).end_ps());
  EXPECT_THAT(ops.at(merge2).depends_on(), ::testing::Contains(merge1));
}

// ---- NOC receive flow control (noc.endpoint_queue_bytes, runtime.h) ----

// The small chip with a 16 KiB endpoint queue per PE (four NOC packets).
constexpr uint64_t kEndpointBytes = 16 * 1024;
pb::Chip SmallChipWithEndpoint() {
  pb::Chip chip = LoadSmall();
  chip.mutable_sip()->mutable_noc()->set_endpoint_queue_bytes(kEndpointBytes);
  return chip;
}
constexpr char kNoRoom[] = "NOC endpoint has no room";

// PE `pe`'s stall records whose wait names `what`.
std::vector<pb::StallRecord> StallsOn(const Harness& h, uint32_t pe, const std::string& what) {
  std::vector<pb::StallRecord> out;
  for (const pb::TraceRecord& r : h.sim->op_log().records()) {
    if (r.has_stall() && r.stall().pe() == pe &&
        r.stall().waits_on().find(what) != std::string::npos) {
      out.push_back(r.stall());
    }
  }
  return out;
}

// PE 4 (CUBE 1) busy on a long EXP and then receiving `sizes` (fp32 elements) from PE 0, in
// order, with blocking receives; `recv_ids` gets the receives' handles.
KernelFn BusyThenReceive(std::vector<uint64_t> sizes, std::vector<uint64_t>* recv_ids) {
  return [sizes, recv_ids](Tl& tl) -> Task<void> {
    const Tensor big = tl.Alloc({8 * 8192}, pb::FP32, Arena::kPersistent);
    co_await tl.Exp(big, big);
    for (uint64_t n : sizes) {
      const std::vector<uint64_t> shape = {n};
      Tensor got = co_await tl.Recv(Peer::Pe(0), shape, pb::FP32, Arena::kPersistent);
      recv_ids->push_back(got.producer());
    }
  };
}

// A message that fits the free endpoint queue leaves at once: the sender never waits, though
// the receiver posts its receive long after.
TEST_F(RuntimeTiming, NocMessageThatFitsTheEndpointQueueGoesAtOnce) {
  Harness h(false, "zero", SmallChipWithEndpoint(), {0, 1});
  uint64_t marker_id = 0;
  std::vector<uint64_t> recv_ids;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor x = tl.Alloc({kEndpointBytes / 4}, pb::FP32);
                                co_await tl.Send(Peer::Pe(4), x);  // the whole queue
                                const Tensor y = tl.Alloc({1024}, pb::FP32);
                                Tensor e = co_await tl.Exp(y);
                                marker_id = e.producer();
                              })
                  .ok());
  ASSERT_TRUE(h.runtime->AddKernel(4, 0, BusyThenReceive({kEndpointBytes / 4}, &recv_ids)).ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(h.Ops(".scheduler", 0).at(marker_id).start_ps(), 0u);
  EXPECT_TRUE(StallsOn(h, 0, kNoRoom).empty());
}

// The sender asks the receiving CPU for room and waits for the answer (same instant) holding
// its CPU: another instance ready meanwhile does not run first. Request 1's EXP is ready
// when request 0 sends; request 0's EXP still reaches the scheduler first and starts at 0, as
// if the send had not stopped it (zero issue costs: every issue is at 0).
TEST_F(RuntimeTiming, NocSendKeepsTheCpuUntilTheEndpointAnswers) {
  Harness h(false, "zero", SmallChipWithEndpoint(), {0, 1});
  uint64_t first = 0, second = 0;
  std::vector<uint64_t> recv_ids;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor x = tl.Alloc({1024}, pb::FP32);
                                co_await tl.Send(Peer::Pe(4), x);
                                const Tensor y = tl.Alloc({8192}, pb::FP32);
                                first = (co_await tl.Exp(y)).producer();
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 1,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor y = tl.Alloc({8192}, pb::FP32);
                                second = (co_await tl.Exp(y)).producer();
                              })
                  .ok());
  ASSERT_TRUE(h.runtime->AddKernel(4, 0, BusyThenReceive({1024}, &recv_ids)).ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  const std::map<uint64_t, pb::OpRecord> ops = h.Ops(".scheduler", 0);
  EXPECT_EQ(ops.at(first).start_ps(), 0u);
  EXPECT_GT(ops.at(second).start_ps(), 0u);
  EXPECT_TRUE(StallsOn(h, 0, kNoRoom).empty());
}

// A message bigger than the free queue waits for credit: 12 KiB fill the 16 KiB queue, the
// next 8 KiB wait (the sender stalls) until the receive of the first takes it from the queue —
// its credit comes back at that receive's completion, and the second message leaves then.
TEST_F(RuntimeTiming, NocMessageBiggerThanTheFreeQueueWaitsForCredit) {
  Harness h(false, "zero", SmallChipWithEndpoint(), {0, 1});
  std::vector<uint64_t> recv_ids;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor a = tl.Alloc({3 * 1024}, pb::FP32);
                                const Tensor b = tl.Alloc({2 * 1024}, pb::FP32);
                                co_await tl.Send(Peer::Pe(4), a);
                                co_await tl.Send(Peer::Pe(4), b);  // 4 KiB free: waits
                              })
                  .ok());
  ASSERT_TRUE(h.runtime->AddKernel(4, 0, BusyThenReceive({3 * 1024, 2 * 1024}, &recv_ids)).ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(recv_ids.size(), 2u);
  const auto ops = h.Ops(".cpu", 4);
  const std::vector<pb::StallRecord> stalls = StallsOn(h, 0, kNoRoom);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].from_ps(), 0u);
  EXPECT_EQ(stalls[0].to_ps(), ops.at(recv_ids[0]).end_ps());
  EXPECT_GT(ops.at(recv_ids[1]).end_ps(), ops.at(recv_ids[0]).end_ps());
}

// Sent before its receive, a message bigger than the whole queue waits for the receive's post
// and then lands in the posted buffer.
TEST_F(RuntimeTiming, NocMessageBiggerThanTheQueueWaitsForItsReceive) {
  Harness h(false, "zero", SmallChipWithEndpoint(), {0, 1});
  std::vector<uint64_t> recv_ids;
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const Tensor x = tl.Alloc({kEndpointBytes / 2}, pb::FP32);
                                co_await tl.Send(Peer::Pe(4), x);
                              })
                  .ok());
  ASSERT_TRUE(h.runtime->AddKernel(4, 0, BusyThenReceive({kEndpointBytes / 2}, &recv_ids)).ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  const pb::OpRecord recv = h.Ops(".cpu", 4).at(recv_ids.at(0));
  const std::vector<pb::StallRecord> stalls = StallsOn(h, 0, kNoRoom);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].to_ps(), recv.issue_ps());  // leaves at the post
  EXPECT_GT(recv.end_ps(), recv.issue_ps());      // and is delivered after it
}

// A posted receive takes a message four times the endpoint queue: no wait, the values arrive.
TEST(RuntimeMessages, PostedNocReceiveTakesAMessageBiggerThanTheQueue) {
  Harness h(true, "zero", SmallChipWithEndpoint(), {0, 1});
  const uint64_t n = kEndpointBytes;  // fp32: 4x the queue
  const std::vector<float> x = Random(n, 41);
  h.Put(h.Hbm(0, 0, {1, n}, pb::FP32), x);
  ASSERT_TRUE(h.runtime
                  ->AddKernel(0, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {1, n};
                                const Tensor xh = tl.Ref(0, shape, pb::FP32);
                                Tensor v = co_await tl.Load(xh);
                                co_await tl.Send(Peer::Pe(4), v);
                              })
                  .ok());
  ASSERT_TRUE(h.runtime
                  ->AddKernel(4, 0,
                              [&](Tl& tl) -> Task<void> {
                                const std::vector<uint64_t> shape = {1, n};
                                Tensor pending = co_await tl.RecvAsync(Peer::Pe(0), shape,
                                                                       pb::FP32,
                                                                       Arena::kPersistent);
                                Tensor got = co_await tl.Wait(pending);
                                const Tensor out = tl.Ref(1 << 20, shape, pb::FP32);
                                co_await tl.Store(out, got);
                              })
                  .ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(h.Get(h.Hbm(4, 1 << 20, {1, n}, pb::FP32)), x);
  EXPECT_TRUE(StallsOn(h, 0, kNoRoom).empty());
}

// Two requests share PE 4's endpoint queue. Request 1's 12 KiB message sits in the queue (its
// receive comes late); request 0's 8 KiB message finds 4 KiB free and waits — not for request
// 1's credit but for its own receive, whose post lets it into the posted buffer.
TEST_F(RuntimeTiming, TwoRequestsShareTheNocEndpointQueue) {
  Harness h(false, "zero", SmallChipWithEndpoint(), {0, 1});
  const auto sender = [](uint64_t n, bool busy) {
    return [n, busy](Tl& tl) -> Task<void> {
      if (busy) {
        const Tensor y = tl.Alloc({8 * 1024}, pb::FP32);
        co_await tl.Exp(y);  // request 1 sends first
      }
      const Tensor x = tl.Alloc({n}, pb::FP32);
      co_await tl.Send(Peer::Pe(4), x);
    };
  };
  uint64_t recv_ids[2] = {0, 0};
  const auto receiver = [&](uint32_t request, uint64_t n) {
    return [&, request, n](Tl& tl) -> Task<void> {
      const Tensor big = tl.Alloc({8 * 8192}, pb::FP32, Arena::kPersistent);
      co_await tl.Exp(big, big);  // request 1's EXP runs after request 0's: it receives later
      const std::vector<uint64_t> shape = {n};
      Tensor got = co_await tl.Recv(Peer::Pe(0), shape);
      recv_ids[request] = got.producer();
    };
  };
  ASSERT_TRUE(h.runtime->AddKernel(0, 0, sender(2 * 1024, true)).ok());
  ASSERT_TRUE(h.runtime->AddKernel(0, 1, sender(3 * 1024, false)).ok());
  ASSERT_TRUE(h.runtime->AddKernel(4, 0, receiver(0, 2 * 1024)).ok());
  ASSERT_TRUE(h.runtime->AddKernel(4, 1, receiver(1, 3 * 1024)).ok());
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(status.ok()) << status;
  const auto ops = h.Ops(".cpu", 4);
  const pb::OpRecord& r0 = ops.at(recv_ids[0]);
  const pb::OpRecord& r1 = ops.at(recv_ids[1]);
  ASSERT_LT(r0.issue_ps(), r1.issue_ps());
  const std::vector<pb::StallRecord> stalls = StallsOn(h, 0, kNoRoom);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].request_id(), 0u);
  EXPECT_EQ(stalls[0].to_ps(), r0.issue_ps());  // request 0's post, before request 1's receive
  EXPECT_EQ(r1.end_ps(), r1.issue_ps());        // request 1's message waited in the queue
}

// A ring of PE 0 of CUBEs 0..3: each PE sends a 32 KiB block (twice the endpoint queue) to the
// next CUBE's PE 0 and receives the previous one's. Sending first deadlocks — every send waits
// for room that only the receive behind it would make — and the report names every PE.
TEST(RuntimeMessages, NocRingThatSendsBeforeReceivingDeadlocks) {
  Harness h(false, "zero", SmallChipWithEndpoint(), {0, 1, 2, 3});
  const uint64_t n = kEndpointBytes / 2;  // fp32: 2x the queue
  for (uint32_t c = 0; c < 4; ++c) {
    const uint32_t next = ((c + 1) % 4) * 4, prev = ((c + 3) % 4) * 4;
    ASSERT_TRUE(h.runtime
                    ->AddKernel(c * 4, 0,
                                [n, next, prev](Tl& tl) -> Task<void> {
                                  const Tensor x = tl.Alloc({n}, pb::FP32, Arena::kPersistent);
                                  co_await tl.Send(Peer::Pe(next), x);
                                  const std::vector<uint64_t> shape = {n};
                                  co_await tl.Recv(Peer::Pe(prev), shape, pb::FP32,
                                                   Arena::kPersistent);
                                })
                    .ok());
  }
  const absl::Status status = h.runtime->Run();
  ASSERT_TRUE(absl::IsFailedPrecondition(status)) << status;
  const std::string message(status.message());
  EXPECT_THAT(message, HasSubstr("deadlock"));
  for (uint32_t c = 0; c < 4; ++c) {
    EXPECT_THAT(message, HasSubstr(absl::StrCat("pe ", c * 4, " (sip0.cube", c,
                                                ".pe0) request 0 waits on send to pe ",
                                                ((c + 1) % 4) * 4, " (", kNoRoom, ")")));
  }
  EXPECT_THAT(message, HasSubstr("32768 bytes, no receive posted for it and the endpoint queue"
                                 " of pe 4 (sip0.cube1.pe0) has 0 of 16384 bytes in use"));
}

// The same ring posting its receives first (recv_async), each block sent as two 16 KiB
// chunks: every chunk lands in its posted buffer, the ring completes and each PE holds its
// predecessor's block; timing mode and data mode give the same op log.
TEST(RuntimeMessages, NocRingThatPostsReceivesFirstCompletes) {
  const uint64_t n = kEndpointBytes / 2, half = n / 2;
  std::string logs[2];
  for (int data = 0; data < 2; ++data) {
    Harness h(data == 1, "realistic", SmallChipWithEndpoint(), {0, 1, 2, 3});
    std::vector<std::vector<float>> blocks;
    for (uint32_t c = 0; c < 4; ++c) {
      blocks.push_back(Random(n, 50 + c));
      if (data == 1) h.Put(h.Hbm(c * 4, 0, {1, n}, pb::FP32), blocks.back());
    }
    for (uint32_t c = 0; c < 4; ++c) {
      const uint32_t next = ((c + 1) % 4) * 4, prev = ((c + 3) % 4) * 4;
      ASSERT_TRUE(h.runtime
                      ->AddKernel(c * 4, 0,
                                  [half, next, prev](Tl& tl) -> Task<void> {
                                    const std::vector<uint64_t> shape = {1, half};
                                    Tensor r0 = co_await tl.RecvAsync(Peer::Pe(prev), shape,
                                                                      pb::FP32,
                                                                      Arena::kPersistent);
                                    Tensor r1 = co_await tl.RecvAsync(Peer::Pe(prev), shape,
                                                                      pb::FP32,
                                                                      Arena::kPersistent);
                                    const Tensor h0 = tl.Ref(0, shape, pb::FP32);
                                    const Tensor h1 = tl.Ref(half * 4, shape, pb::FP32);
                                    Tensor x0 = co_await tl.Load(h0);
                                    Tensor x1 = co_await tl.Load(h1);
                                    co_await tl.Send(Peer::Pe(next), x0);
                                    co_await tl.Send(Peer::Pe(next), x1);
                                    Tensor g0 = co_await tl.Wait(r0);
                                    Tensor g1 = co_await tl.Wait(r1);
                                    const Tensor o0 = tl.Ref(1 << 20, shape, pb::FP32);
                                    const Tensor o1 =
                                        tl.Ref((1 << 20) + half * 4, shape, pb::FP32);
                                    co_await tl.Store(o0, g0);
                                    co_await tl.Store(o1, g1);
                                  })
                      .ok());
    }
    const absl::Status status = h.runtime->Run();
    ASSERT_TRUE(status.ok()) << status;
    for (uint32_t c = 0; c < 4; ++c) {
      EXPECT_TRUE(StallsOn(h, c * 4, kNoRoom).empty()) << "pe " << c * 4;
      if (data == 1) {
        EXPECT_EQ(h.Get(h.Hbm(c * 4, 1 << 20, {1, n}, pb::FP32)), blocks[(c + 3) % 4])
            << "pe " << c * 4;
      }
    }
    for (const pb::TraceRecord& r : h.sim->op_log().records()) logs[data] += r.SerializeAsString();
  }
  EXPECT_EQ(logs[0], logs[1]);
}

}  // namespace
}  // namespace ahbm::kernels
