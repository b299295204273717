#include "sweep/reference_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "tests/attention_reference.h"

namespace ahbm::sweep {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

bool OutputError::ok() const {
  return note.empty() && std::isfinite(max_abs_error) && max_abs_error <= tolerance;
}

OutputError CompareWithReference(const std::map<std::string, host::NpyArray>& inputs,
                                 const std::map<std::string, host::NpyArray>& outputs) {
  OutputError error;
  size_t requests = 0;
  for (const auto& [stem, in] : inputs) requests += !stem.empty() && stem[0] == 'q';
  if (outputs.size() != requests || requests == 0) {
    return {kInf, 0, absl::StrCat(outputs.size(), " outputs for ", requests, " requests")};
  }
  for (const auto& [stem, o] : outputs) {
    const std::string suffix = stem.substr(std::min<size_t>(1, stem.size()));
    const auto q = inputs.find("q" + suffix), k = inputs.find("k" + suffix),
               v = inputs.find("v" + suffix);
    if (stem.empty() || stem[0] != 'o' || q == inputs.end() || k == inputs.end() ||
        v == inputs.end()) {
      return {kInf, 0, absl::StrCat("output '", stem, "' has no q, k, v inputs")};
    }
    const absl::StatusOr<std::vector<double>> want =
        testing::ReferenceAttention(q->second, k->second, v->second);
    if (!want.ok()) return {kInf, 0, std::string(want.status().message())};
    double vmax = 1;
    for (float x : v->second.data) vmax = std::max(vmax, double(std::abs(x)));
    error.max_abs_error =
        std::max(error.max_abs_error, testing::Compare(o.data, *want).max_abs);
    error.tolerance = std::max(error.tolerance, testing::kAttentionTolerance * vmax);
  }
  return error;
}

}  // namespace ahbm::sweep
