// The total length of a union of half-open intervals [start, end): overlapping or touching
// intervals count once, empty ones not at all. T is any ordered type with `-` and `+=` whose
// default value is zero (uint64_t, sim::SimTime).
#ifndef AHBMSIM_BASE_INTERVAL_UNION_H_
#define AHBMSIM_BASE_INTERVAL_UNION_H_

#include <algorithm>
#include <utility>
#include <vector>

namespace ahbm {

template <class T>
T UnionLength(std::vector<std::pair<T, T>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  T total{};
  bool open = false;
  T run_start{}, run_end{};
  for (const auto& [start, end] : intervals) {
    if (!(start < end)) continue;
    if (open && !(run_end < start)) {
      run_end = std::max(run_end, end);
      continue;
    }
    if (open) total += run_end - run_start;
    open = true;
    run_start = start;
    run_end = end;
  }
  if (open) total += run_end - run_start;
  return total;
}

}  // namespace ahbm

#endif  // AHBMSIM_BASE_INTERVAL_UNION_H_
