#include "actors/pe_planner.h"

#include <algorithm>

#include "base/check.h"

namespace ahbm::sim {

OpId PePlanner::Add(OpSpec spec) {
  const OpId id = first_id_ + ops_.size();
  for (OpId dep : spec.deps) AHBM_CHECK(dep < id) << "op " << id << " depends on later op " << dep;
  AHBM_CHECK(spec.busy.value() > 0) << "op " << id << " has no work";
  // Ascending, so the retired dependencies are a prefix (Replan skips it; dependency order
  // does not matter to the plan).
  std::sort(spec.deps.begin(), spec.deps.end());
  ops_.push_back(Op{std::move(spec), std::nullopt, std::nullopt, false});
  dirty_ = true;
  return id;
}

PePlanner::Op& PePlanner::op(OpId id) {
  AHBM_CHECK(id >= first_id_ && id < first_id_ + ops_.size()) << "unknown or retired op " << id;
  return ops_[id - first_id_];
}

const PePlanner::Op* PePlanner::Find(OpId id) const {
  if (id < first_id_) return nullptr;  // retired: ended at or before now_
  AHBM_CHECK(id < first_id_ + ops_.size()) << "unknown op " << id;
  return &ops_[id - first_id_];
}

void PePlanner::SetExternalReady(OpId id, SimTime ready) {
  Op& o = op(id);
  AHBM_CHECK(o.spec.waits_external) << "op " << id << " waits on no external input";
  AHBM_CHECK(!o.external_ready.has_value()) << "op " << id << " external input set twice";
  AHBM_CHECK(ready >= now_) << "op " << id << " external input in the past: " << ready
                            << " < " << now_;
  o.external_ready = ready;
  dirty_ = true;
}

void PePlanner::Commit(SimTime now) {
  // by_start_ lists the planned, uncommitted ops latest start first; their timings are the
  // last full re-plan's until the next one.
  while (!by_start_.empty() && by_start_.back().first < now) {
    Op& o = op(by_start_.back().second);
    by_start_.pop_back();
    o.committed = true;
    std::optional<SimTime>& last = committed_engines_[static_cast<int>(o.spec.engine)].last_end;
    last = std::max(last.value_or(SimTime()), o.timing->end);
  }
}

void PePlanner::Retire(SimTime now) {
  while (!ops_.empty() && ops_.front().committed && ops_.front().timing->end <= now) {
    if (retired_.empty()) retired_first_ = first_id_;
    retired_.push_back(*ops_.front().timing);
    ops_.pop_front();
    ++first_id_;
  }
}

void PePlanner::Replan(SimTime now) {
  AHBM_CHECK(now >= now_) << "re-plan back in time: " << now << " < " << now_;
  Commit(now);
  now_ = now;
  Retire(now);
  if (!dirty_) return;
  dirty_ = false;
  std::array<EngineState, kNumPlannedEngines> engines = committed_engines_;

  // Ready times of the ops to plan, kept incrementally: `base` is the latest known input,
  // `pending` counts dependencies not yet timed; an op is ready once pending == 0 (and its
  // external input is known). An op's ready time is max(now, its external input, its
  // dependencies' ends); retired dependencies count as ended before now.
  // Scratch buffers are members, reused from re-plan to re-plan (no allocation per re-plan);
  // the dependents of op i are edges_[first_edge_[i] .. first_edge_[i + 1]) (CSR).
  const size_t n = ops_.size();
  std::vector<SimTime>& base = scratch_.base;
  std::vector<uint32_t>& pending = scratch_.pending;
  std::vector<uint8_t>& blocked = scratch_.blocked;
  std::vector<uint32_t>& todo = scratch_.todo;
  std::vector<uint32_t>& first_edge = scratch_.first_edge;
  std::vector<uint32_t>& edges = scratch_.edges;
  std::vector<std::pair<uint32_t, uint32_t>>& pairs = scratch_.pairs;  // (dep, dependent)
  base.assign(n, now_);
  pending.assign(n, 0);
  blocked.assign(n, 0);
  todo.clear();
  pairs.clear();
  for (size_t i = 0; i < n; ++i) {
    Op& o = ops_[i];
    // Uncommitted timings are re-decided. Reset here, in id order: every dependency (a lower
    // id) has been reset before an op reads it.
    if (!o.committed) o.timing.reset();
    if (o.timing) continue;
    todo.push_back(static_cast<uint32_t>(i));
    while (o.first_live_dep < o.spec.deps.size() && o.spec.deps[o.first_live_dep] < first_id_) {
      ++o.first_live_dep;  // retired: ended at or before now, for good
    }
    if (o.spec.waits_external) {
      if (o.external_ready) {
        base[i] = std::max(base[i], *o.external_ready);
      } else {
        blocked[i] = 1;
      }
    }
    for (size_t k = o.first_live_dep; k < o.spec.deps.size(); ++k) {
      const OpId dep = o.spec.deps[k];
      const Op* d = Find(dep);
      if (d == nullptr) continue;  // retired: ended at or before now
      if (d->timing) {
        base[i] = std::max(base[i], d->timing->end);
      } else {
        ++pending[i];
        pairs.emplace_back(static_cast<uint32_t>(dep - first_id_), static_cast<uint32_t>(i));
      }
    }
  }
  first_edge.assign(n + 1, 0);
  for (const auto& [dep, dependent] : pairs) ++first_edge[dep + 1];
  for (size_t i = 0; i < n; ++i) first_edge[i + 1] += first_edge[i];
  edges.resize(pairs.size());
  {
    std::vector<uint32_t>& fill = scratch_.fill;
    fill.assign(first_edge.begin(), first_edge.end() - 1);
    for (const auto& [dep, dependent] : pairs) edges[fill[dep]++] = dependent;
  }
  const auto ready = [&](uint32_t i) { return !blocked[i] && pending[i] == 0; };
  while (true) {
    // The next decision: the engine whose next start is earliest (Rule 2), and on it the
    // ready op with the smallest key (Rule 1).
    int chosen = -1;
    SimTime chosen_start;
    int chosen_engine = 0;
    for (int e = 0; e < kNumPlannedEngines; ++e) {
      std::optional<SimTime> earliest;
      for (uint32_t i : todo) {
        const Op& o = ops_[i];
        if (o.timing || static_cast<int>(o.spec.engine) != e || !ready(i)) continue;
        earliest = std::min(earliest.value_or(base[i]), base[i]);
      }
      if (!earliest) continue;
      const SimTime start =
          clock_.NextEdge(std::max(*earliest, engines[e].last_end.value_or(SimTime())));
      if (chosen >= 0 && start >= chosen_start) continue;
      int best = -1;
      for (uint32_t i : todo) {
        const Op& o = ops_[i];
        if (o.timing || static_cast<int>(o.spec.engine) != e || !ready(i)) continue;
        if (clock_.NextEdge(base[i]) > start) continue;
        if (best < 0 || o.spec.key < ops_[best].spec.key) best = static_cast<int>(i);
      }
      AHBM_CHECK(best >= 0) << "no ready op at the decision time";
      chosen = best;
      chosen_start = start;
      chosen_engine = e;
    }
    if (chosen < 0) break;
    Op& op = ops_[chosen];
    std::optional<SimTime>& last = engines[chosen_engine].last_end;
    const bool idle = !last || chosen_start > *last;
    const Cycles cycles = op.spec.busy + (idle ? op.spec.fill_if_idle : Cycles(0));
    op.timing = OpTiming{chosen_start, chosen_start + clock_.ToTime(cycles)};
    last = op.timing->end;
    for (uint32_t e = first_edge[chosen]; e < first_edge[chosen + 1]; ++e) {
      const uint32_t d = edges[e];
      base[d] = std::max(base[d], op.timing->end);
      --pending[d];
    }
    // Drop planned ops from the scan list now and then (keeps each scan O(unplanned)).
    if (todo.size() > 64) {
      std::erase_if(todo, [&](uint32_t i) { return ops_[i].timing.has_value(); });
    }
  }
  by_start_.clear();
  for (size_t i = 0; i < n; ++i) {
    const Op& o = ops_[i];
    if (!o.committed && o.timing) by_start_.emplace_back(o.timing->start, first_id_ + i);
  }
  std::sort(by_start_.begin(), by_start_.end(), std::greater<>());
}

std::optional<OpTiming> PePlanner::timing(OpId id) const {
  const Op* o = Find(id);
  if (o != nullptr) return o->timing;
  AHBM_CHECK(id >= retired_first_ && id - retired_first_ < retired_.size() &&
             retired_[id - retired_first_].has_value())
      << "op " << id << " is retired and released";
  return retired_[id - retired_first_];
}

void PePlanner::Release(OpId id) {
  if (id < retired_first_ || id - retired_first_ >= retired_.size()) return;  // live or gone
  retired_[id - retired_first_].reset();
  while (!retired_.empty() && !retired_.front().has_value()) {
    retired_.pop_front();
    ++retired_first_;
  }
}

bool PePlanner::committed(OpId id) const {
  const Op* o = Find(id);
  return o == nullptr || o->committed;
}

std::optional<SimTime> PePlanner::NextBoundaryAfter(SimTime t) const {
  std::optional<SimTime> next;
  for (const Op& o : ops_) {
    if (!o.timing) continue;
    for (SimTime b : {o.timing->start, o.timing->end}) {
      if (b > t) next = std::min(next.value_or(b), b);
    }
  }
  return next;
}

}  // namespace ahbm::sim
