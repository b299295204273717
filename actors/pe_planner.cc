#include "actors/pe_planner.h"

#include <algorithm>

#include "base/check.h"

namespace ahbm::sim {

OpId PePlanner::Add(OpSpec spec) {
  const OpId id = first_id_ + ops_.size();
  for (OpId dep : spec.deps) AHBM_CHECK(dep < id) << "op " << id << " depends on later op " << dep;
  AHBM_CHECK(spec.busy.value() > 0) << "op " << id << " has no work";
  ops_.push_back(Op{std::move(spec), std::nullopt, std::nullopt, false});
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
}

std::optional<SimTime> PePlanner::ReadyTime(const Op& o) const {
  SimTime ready = now_;
  if (o.spec.waits_external) {
    if (!o.external_ready) return std::nullopt;
    ready = std::max(ready, *o.external_ready);
  }
  for (OpId dep : o.spec.deps) {
    const Op* d = Find(dep);
    if (d == nullptr) continue;
    if (!d->timing) return std::nullopt;
    ready = std::max(ready, d->timing->end);
  }
  return ready;
}

void PePlanner::Commit(SimTime now) {
  for (Op& o : ops_) {
    if (o.committed || !o.timing || o.timing->start >= now) continue;
    o.committed = true;
    std::optional<SimTime>& last = committed_engines_[static_cast<int>(o.spec.engine)].last_end;
    last = std::max(last.value_or(SimTime()), o.timing->end);
  }
}

void PePlanner::Retire(SimTime now) {
  while (!ops_.empty() && ops_.front().committed && ops_.front().timing->end <= now) {
    retired_[first_id_] = *ops_.front().timing;
    ops_.pop_front();
    ++first_id_;
  }
}

void PePlanner::Replan(SimTime now) {
  AHBM_CHECK(now >= now_) << "re-plan back in time: " << now << " < " << now_;
  Commit(now);
  now_ = now;
  Retire(now);
  for (Op& o : ops_) {
    if (!o.committed) o.timing.reset();
  }
  std::array<EngineState, kNumPlannedEngines> engines = committed_engines_;
  while (true) {
    // The next decision: the engine whose next start is earliest (Rule 2), and on it the
    // ready op with the smallest key (Rule 1).
    Op* chosen = nullptr;
    SimTime chosen_start;
    int chosen_engine = 0;
    for (int e = 0; e < kNumPlannedEngines; ++e) {
      std::optional<SimTime> earliest;
      for (const Op& o : ops_) {
        if (o.timing || static_cast<int>(o.spec.engine) != e) continue;
        if (const std::optional<SimTime> r = ReadyTime(o)) earliest = std::min(earliest.value_or(*r), *r);
      }
      if (!earliest) continue;
      const SimTime start =
          clock_.NextEdge(std::max(*earliest, engines[e].last_end.value_or(SimTime())));
      if (chosen != nullptr && start >= chosen_start) continue;
      Op* best = nullptr;
      for (Op& o : ops_) {
        if (o.timing || static_cast<int>(o.spec.engine) != e) continue;
        const std::optional<SimTime> r = ReadyTime(o);
        if (!r || clock_.NextEdge(*r) > start) continue;
        if (best == nullptr || o.spec.key < best->spec.key) best = &o;
      }
      AHBM_CHECK(best != nullptr) << "no ready op at the decision time";
      chosen = best;
      chosen_start = start;
      chosen_engine = e;
    }
    if (chosen == nullptr) break;
    std::optional<SimTime>& last = engines[chosen_engine].last_end;
    const bool idle = !last || chosen_start > *last;
    const Cycles cycles = chosen->spec.busy + (idle ? chosen->spec.fill_if_idle : Cycles(0));
    chosen->timing = OpTiming{chosen_start, chosen_start + clock_.ToTime(cycles)};
    last = chosen->timing->end;
  }
}

std::optional<OpTiming> PePlanner::timing(OpId id) const {
  const Op* o = Find(id);
  if (o != nullptr) return o->timing;
  auto it = retired_.find(id);
  AHBM_CHECK(it != retired_.end()) << "op " << id << " is retired and released";
  return it->second;
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
