#include "tests/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ahbm::testing {

absl::StatusOr<std::vector<double>> ReferenceAttention(const host::NpyArray& q,
                                                       const host::NpyArray& k,
                                                       const host::NpyArray& v) {
  if (q.shape.size() != 3 || k.shape.size() != 3 || k.shape != v.shape ||
      q.shape[2] != k.shape[2] || k.shape[0] == 0 || q.shape[0] % k.shape[0] != 0 ||
      q.shape[1] > k.shape[1]) {
    return absl::InvalidArgumentError(absl::StrCat("reference: q ", host::ShapeString(q.shape),
                                                   ", k ", host::ShapeString(k.shape), ", v ",
                                                   host::ShapeString(v.shape), " do not fit"));
  }
  const uint64_t h_q = q.shape[0], t_q = q.shape[1], d = q.shape[2];
  const uint64_t h_kv = k.shape[0], s = k.shape[1], g = h_q / h_kv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> out(h_q * t_q * d, 0.0);
  std::vector<double> score(s);
  for (uint64_t h = 0; h < h_q; ++h) {
    const uint64_t kv = h / g;
    for (uint64_t t = 0; t < t_q; ++t) {
      const uint64_t visible = s - t_q + t + 1;  // keys 0 .. S - T_q + t
      const float* qrow = &q.data[(h * t_q + t) * d];
      double top = -std::numeric_limits<double>::infinity();
      for (uint64_t j = 0; j < visible; ++j) {
        const float* krow = &k.data[(kv * s + j) * d];
        double dot = 0;
        for (uint64_t i = 0; i < d; ++i) dot += double(qrow[i]) * double(krow[i]);
        score[j] = dot * scale;
        top = std::max(top, score[j]);
      }
      double sum = 0;
      for (uint64_t j = 0; j < visible; ++j) {
        score[j] = std::exp(score[j] - top);
        sum += score[j];
      }
      double* orow = &out[(h * t_q + t) * d];
      for (uint64_t j = 0; j < visible; ++j) {
        const float* vrow = &v.data[(kv * s + j) * d];
        const double p = score[j] / sum;
        for (uint64_t i = 0; i < d; ++i) orow[i] += p * double(vrow[i]);
      }
    }
  }
  return out;
}

Deviation Compare(const std::vector<float>& got, const std::vector<double>& want) {
  Deviation dev;
  if (got.size() != want.size()) {
    dev.max_abs = std::numeric_limits<double>::infinity();
    return dev;
  }
  for (uint64_t i = 0; i < got.size(); ++i) {
    const double e = std::isfinite(got[i]) ? std::abs(double(got[i]) - want[i])
                                           : std::numeric_limits<double>::infinity();
    if (e > dev.max_abs) {
      dev.max_abs = e;
      dev.index = i;
    }
  }
  return dev;
}

}  // namespace ahbm::testing
