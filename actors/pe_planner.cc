#include "actors/pe_planner.h"

#include <algorithm>
#include <tuple>

#include "base/check.h"

namespace ahbm::sim {

OpId PePlanner::Add(OpSpec spec) {
  const OpId id = first_id_ + ops_.size();
  for (OpId dep : spec.deps) AHBM_CHECK(dep < id) << "op " << id << " depends on later op " << dep;
  AHBM_CHECK(spec.busy.value() > 0) << "op " << id << " has no work";
  // Ascending, so the retired dependencies are a prefix (Replan skips it; dependency order
  // does not matter to the plan).
  std::sort(spec.deps.begin(), spec.deps.end());
  // The earliest start known now: not before the last re-plan, nor before a dependency ends
  // (or could start, if it is new too); unknown while an input or a dependency is.
  std::optional<SimTime> earliest;
  if (!spec.waits_external) {
    earliest = now_;
    for (auto dep = std::lower_bound(spec.deps.begin(), spec.deps.end(), first_id_);
         dep != spec.deps.end() && earliest; ++dep) {
      const Op& d = ops_[*dep - first_id_];
      const std::optional<SimTime> after = d.timing ? d.timing->end : d.earliest;
      earliest = after ? std::max(*earliest, *after) : after;
    }
  }
  ops_.push_back(Op{std::move(spec), std::nullopt, std::nullopt, earliest});
  NoteInput(ops_.back(), earliest);
  return id;
}

void PePlanner::NoteInput(Op& o, std::optional<SimTime> earliest) {
  o.earliest = earliest;
  if (earliest) dirty_from_ = std::min(dirty_from_.value_or(*earliest), *earliest);
}

PePlanner::Op& PePlanner::op(OpId id) {
  AHBM_CHECK(id >= first_id_ && id < first_id_ + ops_.size()) << "unknown or retired op " << id;
  return ops_[id - first_id_];
}

void PePlanner::SetExternalReady(OpId id, SimTime ready) {
  Op& o = op(id);
  AHBM_CHECK(o.spec.waits_external) << "op " << id << " waits on no external input";
  AHBM_CHECK(!o.external_ready.has_value()) << "op " << id << " external input set twice";
  AHBM_CHECK(ready >= now_) << "op " << id << " external input in the past: " << ready
                            << " < " << now_;
  o.external_ready = ready;
  NoteInput(o, ready);  // its dependencies may start it later still
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
  if (!dirty_from_) return;
  const SimTime from = mode_ == Mode::kFull ? now_ : *dirty_from_;
  dirty_from_.reset();
  ReplanFrom(from);
}

void PePlanner::ReplanFrom(SimTime from) {
  ++plan_version_;
  EngineStates engines = committed_engines_;
  KeepDecisionsBefore(from, engines);
  CollectUndecided();
  by_start_ = scratch_.kept;  // the new decisions follow, none earlier
  DecideInOrder(engines);
  // Commit pops from the back (equal starts commit together, in any order).
  std::reverse(by_start_.begin(), by_start_.end());
}

// The planned decisions before `from` stand (see the contract): they keep their timings and
// hold their engines, as committed ops do.
void PePlanner::KeepDecisionsBefore(SimTime from, EngineStates& engines) {
  std::vector<std::pair<SimTime, OpId>>& kept = scratch_.kept;
  kept.clear();
  while (!by_start_.empty() && by_start_.back().first < from) {
    Op& o = op(by_start_.back().second);
    o.kept = true;
    std::optional<SimTime>& last = engines[static_cast<int>(o.spec.engine)].last_end;
    last = std::max(last.value_or(SimTime()), o.timing->end);
    kept.push_back(by_start_.back());
    by_start_.pop_back();
  }
}

// Per engine, the ready unplanned ops: `waiting` by ready time (a min-heap of (base, op)),
// `eligible` by key (a min-heap) once their ready edge is at or before a decision time on
// that engine. Decision times on one engine only grow, so an eligible op stays eligible.
namespace {
bool LaterBase(const std::pair<SimTime, uint32_t>& x, const std::pair<SimTime, uint32_t>& y) {
  return x > y;
}
}  // namespace

// Equal keys (never from the scheduler) go to the older op, so a plan depends on the inputs
// only, not on the order the heap saw them in (Rule 4, and the incremental re-plan).
bool PePlanner::LargerKey(uint32_t x, uint32_t y) const {
  const std::vector<Todo>& todo = scratch_.todo;
  return std::tie(todo[y].op->spec.key, y) < std::tie(todo[x].op->spec.key, x);
}

void PePlanner::MakeReady(uint32_t slot) {
  const Todo& t = scratch_.todo[slot];
  auto& waiting = scratch_.waiting[static_cast<int>(t.op->spec.engine)];
  waiting.emplace_back(t.base, slot);
  std::push_heap(waiting.begin(), waiting.end(), LaterBase);
}

// The ops to decide: uncommitted and not kept, in id order (a dependency before its
// dependents). Their ready times are kept incrementally: `base` is the latest known input,
// `pending` counts dependencies not yet timed; an op is ready once pending == 0 (and its
// external input is known). An op's ready time is max(now, its external input, its
// dependencies' ends); retired dependencies count as ended before now. Scratch buffers are
// members, reused from re-plan to re-plan; the dependents of todo[i] are
// edges[first_edge[i] .. first_edge[i + 1]) (CSR), built only when there are any.
void PePlanner::CollectUndecided() {
  std::vector<Todo>& todo = scratch_.todo;
  std::vector<std::pair<uint32_t, uint32_t>>& pairs = scratch_.pairs;  // (dep, dependent)
  todo.clear();
  pairs.clear();
  for (int e = 0; e < kNumPlannedEngines; ++e) {
    scratch_.waiting[e].clear();
    scratch_.eligible[e].clear();
  }
  OpId id = first_id_;
  for (Op& o : ops_) {
    const OpId this_id = id++;
    if (o.kept) {
      o.kept = false;
      continue;
    }
    if (o.committed) continue;
    o.timing.reset();  // in id order: every dependency (a lower id) is reset before it is read
    while (o.first_live_dep < o.spec.deps.size() && o.spec.deps[o.first_live_dep] < first_id_) {
      ++o.first_live_dep;  // retired: ended at or before now, for good
    }
    const auto slot = static_cast<uint32_t>(todo.size());
    o.slot = slot;
    Todo t{&o, this_id, now_};
    if (o.spec.waits_external) {
      if (o.external_ready) {
        t.base = std::max(t.base, *o.external_ready);
      } else {
        t.blocked = true;
      }
    }
    for (size_t k = o.first_live_dep; k < o.spec.deps.size(); ++k) {
      const Op& d = ops_[o.spec.deps[k] - first_id_];
      if (d.timing) {
        t.base = std::max(t.base, d.timing->end);
      } else {
        ++t.pending;
        pairs.emplace_back(d.slot, slot);
      }
    }
    todo.push_back(t);
    if (!t.blocked && t.pending == 0) MakeReady(slot);
  }
  if (pairs.empty()) return;
  std::vector<uint32_t>& first_edge = scratch_.first_edge;
  const size_t m = todo.size();
  first_edge.assign(m + 1, 0);
  for (const auto& [dep, dependent] : pairs) ++first_edge[dep + 1];
  for (size_t i = 0; i < m; ++i) first_edge[i + 1] += first_edge[i];
  scratch_.edges.resize(pairs.size());
  std::vector<uint32_t>& fill = scratch_.fill;
  fill.assign(first_edge.begin(), first_edge.end() - 1);
  for (const auto& [dep, dependent] : pairs) scratch_.edges[fill[dep]++] = dependent;
}

// Decides the collected ops one at a time, in start order (Rules 1 and 2).
void PePlanner::DecideInOrder(EngineStates& engines) {
  std::vector<Todo>& todo = scratch_.todo;
  const bool any_edges = !scratch_.pairs.empty();
  const auto larger_key = [this](uint32_t x, uint32_t y) { return LargerKey(x, y); };
  while (true) {
    // The next decision: the engine whose next start is earliest (Rule 2; ties to the lower
    // engine), and on it the ready op with the smallest key among those ready by then (Rule 1).
    // start = the first edge at or after max(earliest ready time, engine free); with eligible
    // ops waiting the engine is the later one (they were ready before its last op ended).
    int chosen_engine = -1;
    SimTime chosen_start;
    for (int e = 0; e < kNumPlannedEngines; ++e) {
      const auto& waiting = scratch_.waiting[e];
      const bool any_eligible = !scratch_.eligible[e].empty();
      if (!any_eligible && waiting.empty()) continue;
      const SimTime free = engines[e].last_end.value_or(SimTime());
      const SimTime start =
          clock_.NextEdge(any_eligible ? free : std::max(waiting.front().first, free));
      if (chosen_engine >= 0 && start >= chosen_start) continue;
      chosen_engine = e;
      chosen_start = start;
    }
    if (chosen_engine < 0) return;
    auto& waiting = scratch_.waiting[chosen_engine];
    auto& eligible = scratch_.eligible[chosen_engine];
    while (!waiting.empty() && clock_.NextEdge(waiting.front().first) <= chosen_start) {
      eligible.push_back(waiting.front().second);
      std::push_heap(eligible.begin(), eligible.end(), larger_key);
      std::pop_heap(waiting.begin(), waiting.end(), LaterBase);
      waiting.pop_back();
    }
    AHBM_CHECK(!eligible.empty()) << "no ready op at the decision time";
    std::pop_heap(eligible.begin(), eligible.end(), larger_key);
    const uint32_t chosen = eligible.back();
    eligible.pop_back();
    Op& op = *todo[chosen].op;
    std::optional<SimTime>& last = engines[chosen_engine].last_end;
    const bool idle = !last || chosen_start > *last;
    const Cycles cycles = op.spec.busy + (idle ? op.spec.fill_if_idle : Cycles(0));
    op.timing = OpTiming{chosen_start, chosen_start + clock_.ToTime(cycles)};
    last = op.timing->end;
    // Decisions come in start order: a later one starts no earlier (every engine's next
    // start only grows, and ops made ready now are ready after this one's end).
    AHBM_CHECK(by_start_.empty() || by_start_.back().first <= chosen_start)
        << "decision at " << chosen_start << " after one at " << by_start_.back().first;
    by_start_.emplace_back(chosen_start, todo[chosen].id);
    if (!any_edges) continue;
    for (uint32_t e = scratch_.first_edge[chosen]; e < scratch_.first_edge[chosen + 1]; ++e) {
      Todo& d = todo[scratch_.edges[e]];
      d.base = std::max(d.base, op.timing->end);
      if (--d.pending == 0 && !d.blocked) MakeReady(scratch_.edges[e]);
    }
  }
}

std::optional<OpTiming> PePlanner::RetiredTiming(OpId id) const {
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
