#include "kernels/attention/lse_merge.h"

namespace ahbm::kernels {

Task<void> LseMerge(Tl& tl, Tensor& m, Tensor& l, Tensor& o, const Tensor& mb, const Tensor& lb,
                    const Tensor& ob) {
  Tensor mm = co_await tl.Maximum(m, mb);
  Tensor da = co_await tl.Sub(m, mm);
  Tensor sa = co_await tl.Exp(da);
  Tensor db = co_await tl.Sub(mb, mm);
  Tensor sb = co_await tl.Exp(db);
  co_await tl.Mul(l, sa, l);
  Tensor lbs = co_await tl.Mul(lb, sb);
  co_await tl.Add(l, lbs, l);
  co_await tl.Mul(o, sa, o);
  Tensor obs = co_await tl.Mul(ob, sb);
  co_await tl.Add(o, obs, o);
  m = mm;
}

}  // namespace ahbm::kernels
