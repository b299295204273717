#include "kernels/attention/lse_merge.h"

#include <vector>

namespace ahbm::kernels {

Task<void> FillEmptyRunning(Tl& tl, uint32_t rows, uint32_t d, Tensor (&m)[2], Tensor& l,
                            Tensor& o) {
  const std::vector<uint64_t> col = {rows, 1};
  const std::vector<uint64_t> full = {rows, d};
  m[0] = co_await tl.Fill(col, kEmptyRowMax, pb::FP32, Arena::kPersistent);
  m[1] = tl.Alloc(col, pb::FP32, Arena::kPersistent);
  l = co_await tl.Fill(col, 0.0f, pb::FP32, Arena::kPersistent);
  o = co_await tl.Fill(full, 0.0f, pb::FP32, Arena::kPersistent);
}

Task<void> LseMerge(Tl& tl, Tensor& m, Tensor& l, Tensor& o, const Tensor& mb, const Tensor& lb,
                    const Tensor& ob) {
  Tensor mm = tl.Alloc(m.shape(), pb::FP32);  // the new maximum; l and o merge in place
  co_await LseMergeInto(tl, m, l, o, mb, lb, ob, mm, l, o);
  m = mm;
}

Task<void> LseMergeInto(Tl& tl, const Tensor& m, const Tensor& l, const Tensor& o,
                        const Tensor& mb, const Tensor& lb, const Tensor& ob, const Tensor& m_out,
                        const Tensor& l_out, const Tensor& o_out) {
  Tensor mm = co_await tl.Maximum(m, mb, m_out);
  Tensor da = co_await tl.Sub(m, mm);
  Tensor sa = co_await tl.Exp(da);
  Tensor db = co_await tl.Sub(mb, mm);
  Tensor sb = co_await tl.Exp(db);
  co_await tl.Mul(l, sa, l_out);
  Tensor lbs = co_await tl.Mul(lb, sb);
  co_await tl.Add(l_out, lbs, l_out);
  co_await tl.Mul(o, sa, o_out);
  Tensor obs = co_await tl.Mul(ob, sb);
  co_await tl.Add(o_out, obs, o_out);
}

}  // namespace ahbm::kernels
