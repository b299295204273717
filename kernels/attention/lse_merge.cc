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
