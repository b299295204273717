#include "kernels/attention/baseline.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/attention/lse_merge.h"
#include "kernels/attention/reduce_tree.h"
#include "kernels/host/placement.h"
#include "topology/ids.h"

namespace ahbm::kernels {

// Per rank: one-shot partial attention with blocking dots, then the ring fan-out: in each of
// the R − 1 steps a rank sends the partial it holds (its own first, then the one it last
// received) to its successor and merges the one from its predecessor.
Task<void> BaselineRank(Tl& tl, BaselineRankPlan p) {
  const std::vector<uint64_t> col = {1, 1};
  const std::vector<uint64_t> row = {1, p.d};
  const std::vector<uint64_t> qshape = {1, p.d};
  Tensor q = co_await tl.Load(tl.Ref(p.q_addr, qshape), Arena::kPersistent);
  Tensor m, l, o;
  if (p.len > 0) {
    const std::vector<uint64_t> kshape = {p.d, p.len};
    const std::vector<uint64_t> vshape = {p.len, p.d};
    Tensor s = co_await tl.Dot(q, tl.Ref(p.kt_addr, kshape));  // [1, len], blocking
    co_await tl.Scale(s, p.scale, s);
    m = co_await tl.Max(s);
    Tensor centred = co_await tl.Sub(s, m);
    const std::vector<uint64_t> pshape = {1, p.len};
    Tensor pr = tl.Alloc(pshape, pb::BF16);
    co_await tl.Exp(centred, pr);
    l = co_await tl.Sum(pr);
    o = co_await tl.Dot(pr, tl.Ref(p.v_addr, vshape));  // [1, d], blocking
  } else {
    m = co_await tl.Fill(col, kEmptyRowMax);
    l = co_await tl.Fill(col, 0.0f);
    o = co_await tl.Fill(row, 0.0f);
  }
  Tensor fm = m, fl = l, fo = o;  // what this rank forwards next
  for (uint32_t step = 0; step + 1 < p.ranks; ++step) {
    co_await tl.Send(p.next, fm);
    co_await tl.Send(p.next, fl);
    co_await tl.Send(p.next, fo);
    Tensor rm = co_await tl.Recv(p.prev, col);
    Tensor rl = co_await tl.Recv(p.prev, col);
    Tensor ro = co_await tl.Recv(p.prev, row);
    co_await LseMerge(tl, m, l, o, rm, rl, ro);
    fm = rm;
    fl = rl;
    fo = ro;
  }
  if (!p.store_output) co_return;
  Tensor out = tl.Alloc(row, pb::BF16);
  co_await tl.Div(o, l, out);
  co_await tl.Store(tl.Ref(p.o_addr, row), out);
}

namespace {

absl::Status Field(const std::string& field, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", reason));
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> BaselineCubes(const pb::Chip& chip, const DecodeConfig& cfg) {
  const topology::ChipIndex index(chip);
  if (cfg.sip >= index.sips()) {
    return Field("sip", absl::StrCat(cfg.sip, " is outside the chip's ", index.sips(), " SIPs"));
  }
  const uint32_t first = cfg.sip * index.cubes_per_sip();
  if (first + cfg.h_q > index.num_cubes()) {
    return Field("h_q", absl::StrCat("the baseline puts one query head per CUBE: ", cfg.h_q,
                                     " heads need ", cfg.h_q, " CUBEs from SIP ", cfg.sip,
                                     ", the chip has ", index.num_cubes() - first));
  }
  std::vector<uint32_t> cubes;
  for (uint32_t h = 0; h < cfg.h_q; ++h) cubes.push_back(first + h);
  return cubes;
}

absl::StatusOr<DecodeLaunch> LaunchBaseline(const pb::Chip& chip, const DecodeConfig& cfg,
                                            KernelRuntime& runtime, MemoryStore* store,
                                            const std::vector<DecodeInputs>& inputs) {
  const topology::ChipIndex index(chip);
  if (cfg.h_kv == 0 || cfg.h_q % cfg.h_kv != 0) {
    return Field("h_q", absl::StrCat("must be a multiple of h_kv = ", cfg.h_kv));
  }
  if (cfg.t_q != 1) return Field("t_q", "the baseline decodes one token (t_q = 1)");
  if (cfg.users != 1) return Field("users", "the baseline runs one request");
  if (cfg.s == 0) return Field("s", "must be > 0");
  const topology::Mesh& mesh = index.pe_mesh();
  if (cfg.p == 0 || cfg.p > mesh.size() || !(cfg.p <= mesh.cols() || cfg.p % mesh.cols() == 0) ||
      (cfg.p > 2 && cfg.p > mesh.cols() && (cfg.p / mesh.cols()) % 2 != 0)) {
    return Field("p", absl::StrCat(cfg.p, " PEs do not form a ring of the CUBE's ", mesh.rows(), "x",
                                   mesh.cols(), " PE mesh"));
  }
  absl::StatusOr<std::vector<uint32_t>> cubes = BaselineCubes(chip, cfg);
  if (!cubes.ok()) return cubes.status();
  const bool data = store != nullptr && !inputs.empty();
  const uint32_t g = cfg.h_q / cfg.h_kv;
  const uint32_t cols = std::min(cfg.p, mesh.cols());
  const uint32_t rows = cfg.p / cols;
  std::vector<uint32_t> ring;  // PE-in-CUBE in ring order
  for (uint32_t k : SnakeOrder(rows, cols)) ring.push_back((k / cols) * mesh.cols() + k % cols);
  const uint64_t block = (cfg.s + cfg.p - 1) / cfg.p;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.d)));

  DecodeLaunch launch;
  launch.g = 1;
  launch.ranks_per_head = cfg.p;
  launch.cubes = *cubes;
  launch.outputs.emplace_back(cfg.h_q);
  host::HbmAllocator allocator(chip);
  const auto write = [&](uint32_t pe, uint64_t addr, std::vector<uint64_t> shape,
                         const std::vector<float>& values) -> absl::Status {
    pb::TensorRef ref;
    ref.set_space(pb::HBM);
    ref.set_pe(pe);
    ref.set_addr(addr);
    ref.set_dtype(pb::BF16);
    for (uint64_t dim : shape) ref.add_shape(dim);
    return store->Write(ref, values);
  };
  for (uint32_t h = 0; h < cfg.h_q; ++h) {
    const uint32_t hk = h / g;
    const uint32_t cube = (*cubes)[h];
    for (uint32_t r = 0; r < cfg.p; ++r) {
      const uint32_t pe = cube * index.pes_per_cube() + ring[r];
      const uint64_t begin = std::min<uint64_t>(r * block, cfg.s);
      const uint64_t len = std::min<uint64_t>(block, cfg.s - begin);
      BaselineRankPlan plan;
      plan.d = cfg.d;
      plan.scale = scale;
      plan.len = len;
      plan.ranks = cfg.p;
      const uint32_t next = ring[(r + 1) % cfg.p], prev = ring[(r + cfg.p - 1) % cfg.p];
      if (cfg.p > 1) {
        plan.next = Peer::Ipcq(DirectionTo(mesh, ring[r], next));
        plan.prev = Peer::Ipcq(DirectionTo(mesh, ring[r], prev));
      }
      absl::StatusOr<uint64_t> q = allocator.Allocate(pe, uint64_t{cfg.d} * 2);
      if (!q.ok()) return q.status();
      plan.q_addr = *q;
      if (len > 0) {
        absl::StatusOr<uint64_t> kt = allocator.Allocate(pe, uint64_t{cfg.d} * len * 2);
        absl::StatusOr<uint64_t> v = allocator.Allocate(pe, uint64_t{cfg.d} * len * 2);
        if (!kt.ok()) return kt.status();
        if (!v.ok()) return v.status();
        plan.kt_addr = *kt;
        plan.v_addr = *v;
      }
      if (data) {
        const DecodeInputs& in = inputs[0];
        std::vector<float> qv(in.q.data.begin() + uint64_t{h} * cfg.d,
                              in.q.data.begin() + uint64_t{h + 1} * cfg.d);
        if (absl::Status s = write(pe, plan.q_addr, {1, cfg.d}, qv); !s.ok()) return s;
        if (len > 0) {
          std::vector<float> kt(cfg.d * len), v(cfg.d * len);
          for (uint64_t t = 0; t < len; ++t) {
            for (uint32_t i = 0; i < cfg.d; ++i) {
              const uint64_t src = (uint64_t{hk} * cfg.s + begin + t) * cfg.d + i;
              kt[i * len + t] = in.k.data[src];  // transposed [d, len]
              v[t * cfg.d + i] = in.v.data[src];
            }
          }
          if (absl::Status s = write(pe, plan.kt_addr, {cfg.d, len}, kt); !s.ok()) return s;
          if (absl::Status s = write(pe, plan.v_addr, {len, cfg.d}, v); !s.ok()) return s;
        }
      }
      if (r == 0) {
        absl::StatusOr<uint64_t> o = allocator.Allocate(pe, uint64_t{cfg.d} * 2);
        if (!o.ok()) return o.status();
        plan.store_output = true;
        plan.o_addr = *o;
        launch.outputs[0][h] = DecodeLaunch::Output{pe, *o};
      }
      if (absl::Status s = runtime.AddKernel(pe, 0, [plan](Tl& tl) { return BaselineRank(tl, plan); });
          !s.ok()) {
        return s;
      }
    }
  }
  return launch;
}

}  // namespace ahbm::kernels
