#include "actors/observe/timeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ahbm::observe {
namespace {

using topology::UnitKind;

uint64_t HandleKey(uint32_t pe, uint64_t handle) { return (uint64_t{pe} << 40) | handle; }

// Tie order of releases at the same time: the first wins.
int Rank(Timeline::Link::Edge edge) {
  switch (edge) {
    case Timeline::Link::Edge::kData:
      return 0;
    case Timeline::Link::Edge::kMessage:
      return 1;
    case Timeline::Link::Edge::kEngine:
      return 2;
    default:
      return 3;
  }
}

}  // namespace

const char* StepKindName(Step::Kind kind) {
  switch (kind) {
    case Step::Kind::kCommand:
      return "command";
    case Step::Kind::kSend:
      return "send";
    case Step::Kind::kRecv:
      return "recv";
  }
  return "?";
}

std::tuple<int, uint64_t, uint64_t, uint64_t> Step::Key() const {
  if (call != 0) return {0, instance, call, 0};
  return {1 + static_cast<int>(kind), pe, ordinal, 0};
}

std::string Step::Name() const {
  std::string out = absl::StrCat("pe ", pe);
  if (call != 0) absl::StrAppend(&out, " i", instance, " c", call - 1);
  absl::StrAppend(&out, " ", op);
  if (kind != Kind::kSend) absl::StrAppend(&out, " cmd ", cmd_id);
  if (message_id != 0) absl::StrAppend(&out, " msg ", message_id);
  if (!label.empty() && kind == Kind::kCommand) absl::StrAppend(&out, " '", label, "'");
  return out;
}

Timeline::Timeline(const pb::Chip& chip) : index_(chip) { cpus_.resize(index_.num_pes()); }

void Timeline::Add(const pb::TraceRecord& record) {
  switch (record.record_case()) {
    case pb::TraceRecord::kHeader:
      header_ = record.header();
      return;
    case pb::TraceRecord::kReport:
      report_ = record.report();
      return;
    case pb::TraceRecord::kIssue: {
      const pb::IssueRecord& i = record.issue();
      if (i.has_send() || i.cmd_id() == 0) return;  // sends: their op record has the key
      issue_of_cmd_[HandleKey(i.pe(), i.cmd_id())] = {i.instance(), i.call()};
      // Receives the command read (its scheduler record lists only scheduler dependencies).
      if (i.recv_depends_on_size() > 0) {
        auto& extra = recv_deps_[HandleKey(i.pe(), i.cmd_id())];
        extra.assign(i.recv_depends_on().begin(), i.recv_depends_on().end());
      }
      return;
    }
    case pb::TraceRecord::kStall: {
      const pb::StallRecord& s = record.stall();
      if (s.pe() >= cpus_.size()) return;
      cpus_[s.pe()].stalls.push_back({s.request_id(), s.cmd_id(), s.from_ps(), s.to_ps(), s.waits_on()});
      return;
    }
    case pb::TraceRecord::kOp:
      break;
    default:
      return;
  }
  const pb::OpRecord& o = record.op();
  if (o.unit() >= index_.num_units()) return;
  const UnitKind kind = index_.KindOf(topology::UnitId(o.unit()));
  const int64_t pe_of_unit = index_.GlobalPeOfUnit(topology::UnitId(o.unit()));
  if (pe_of_unit < 0) return;
  const uint32_t pe = static_cast<uint32_t>(pe_of_unit);
  if (kind == UnitKind::kGemm || kind == UnitKind::kMath || kind == UnitKind::kDma) {
    const uint64_t cmd = kind == UnitKind::kDma ? o.parent_cmd_id() : o.cmd_id();
    if (cmd == 0) return;
    pending_engine_.push_back({o.unit(), HandleKey(pe, cmd), static_cast<uint32_t>(ops_.size())});
    ops_.push_back({o.unit(), 0, o.start_ps(), o.end_ps()});
    return;
  }
  Step step;
  if (kind == UnitKind::kPeScheduler) {
    step.kind = Step::Kind::kCommand;
  } else if (kind == UnitKind::kPeCpu && absl::StartsWith(o.op(), "send_")) {
    step.kind = Step::Kind::kSend;
  } else if (kind == UnitKind::kPeCpu && absl::StartsWith(o.op(), "recv_")) {
    step.kind = Step::Kind::kRecv;
  } else {
    return;  // stage_ipcq and units without steps
  }
  step.pe = pe;
  step.request_id = o.request_id();
  step.cmd_id = step.kind == Step::Kind::kSend ? 0 : o.cmd_id();
  step.message_id = o.message_id();
  step.instance = o.instance();
  step.call = o.call();
  step.op = o.op();
  step.label = o.label();
  step.issue_ps = o.issue_ps();
  step.start_ps = o.start_ps();
  step.end_ps = o.end_ps();
  step.depends_on.assign(o.depends_on().begin(), o.depends_on().end());
  steps_.push_back(std::move(step));
}

absl::Status Timeline::Finish() {
  if (steps_.empty()) {
    return absl::InvalidArgumentError("the op log has no command, send or receive");
  }
  for (uint32_t s = 0; s < steps_.size(); ++s) {
    Step& step = steps_[s];
    if (step.kind == Step::Kind::kCommand) {
      const uint64_t key = HandleKey(step.pe, step.cmd_id);
      if (auto it = issue_of_cmd_.find(key); it != issue_of_cmd_.end() && it->second.second != 0) {
        step.instance = it->second.first;
        step.call = it->second.second;
      }
      if (auto it = recv_deps_.find(key); it != recv_deps_.end()) {
        step.depends_on.insert(step.depends_on.end(), it->second.begin(), it->second.end());
      }
    }
    if (step.kind != Step::Kind::kSend) by_handle_[HandleKey(step.pe, step.cmd_id)] = s;
    if (step.kind == Step::Kind::kSend) send_of_message_[step.message_id] = s;
    if (step.pe < cpus_.size()) cpus_[step.pe].issues.push_back({step.issue_ps, s});
  }
  // Ordinals: the n-th step of its kind on its PE in issue order.
  std::vector<uint32_t> order(steps_.size());
  for (uint32_t s = 0; s < order.size(); ++s) order[s] = s;
  auto issue_order = [this](uint32_t a, uint32_t b) {
    const Step& x = steps_[a];
    const Step& y = steps_[b];
    return std::tie(x.pe, x.kind, x.issue_ps, x.cmd_id, x.message_id, a) <
           std::tie(y.pe, y.kind, y.issue_ps, y.cmd_id, y.message_id, b);
  };
  std::sort(order.begin(), order.end(), issue_order);
  for (size_t i = 0; i < order.size(); ++i) {
    const Step& cur = steps_[order[i]];
    const bool same = i > 0 && steps_[order[i - 1]].pe == cur.pe && steps_[order[i - 1]].kind == cur.kind;
    steps_[order[i]].ordinal = same ? steps_[order[i - 1]].ordinal + 1 : 0;
  }
  for (uint32_t s = 0; s < steps_.size(); ++s) by_key_[steps_[s].Key()] = s;
  // Engine ops to their commands.
  ops_of_step_.assign(steps_.size(), {});
  std::vector<EngineOp> linked;
  for (const auto& [unit, key, op] : pending_engine_) {
    auto it = by_handle_.find(key);
    if (it == by_handle_.end() || steps_[it->second].kind != Step::Kind::kCommand) continue;
    EngineOp e = ops_[op];
    e.step = it->second;
    linked.push_back(e);
  }
  ops_ = std::move(linked);
  std::sort(ops_.begin(), ops_.end(), [](const EngineOp& a, const EngineOp& b) {
    return std::tie(a.unit, a.end_ps, a.start_ps, a.step) < std::tie(b.unit, b.end_ps, b.start_ps, b.step);
  });
  for (uint32_t i = 0; i < ops_.size(); ++i) ops_of_step_[ops_[i].step].push_back(i);
  pending_engine_.clear();
  issue_of_cmd_.clear();
  recv_deps_.clear();
  for (Cpu& cpu : cpus_) {
    std::sort(cpu.issues.begin(), cpu.issues.end());
    std::stable_sort(cpu.stalls.begin(), cpu.stalls.end(),
                     [](const Stall& a, const Stall& b) { return a.to_ps < b.to_ps; });
  }
  return absl::OkStatus();
}

uint64_t Timeline::last_end_ps() const {
  uint64_t end = 0;
  for (const Step& s : steps_) end = std::max(end, s.end_ps);
  return end;
}

int64_t Timeline::Find(const std::tuple<int, uint64_t, uint64_t, uint64_t>& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? -1 : static_cast<int64_t>(it->second);
}

int64_t Timeline::StepOf(uint32_t pe, uint64_t handle) const {
  auto it = by_handle_.find(HandleKey(pe, handle));
  return it == by_handle_.end() ? -1 : static_cast<int64_t>(it->second);
}

Timeline::Release Timeline::ReleaseOf(uint32_t s) const {
  const Step& step = steps_[s];
  Release best{Link::Edge::kIssue, step.issue_ps, -1, ""};
  auto consider = [&best](Link::Edge edge, uint64_t at, int64_t pred, std::string note) {
    if (at > best.at || (at == best.at && Rank(edge) < Rank(best.edge))) {
      best = {edge, at, pred, std::move(note)};
    }
  };
  for (uint64_t d : step.depends_on) {
    const int64_t p = StepOf(step.pe, d);
    if (p >= 0 && p != s) consider(Link::Edge::kData, steps_[p].end_ps, p, "");
  }
  if (step.kind == Step::Kind::kRecv) {
    if (auto it = send_of_message_.find(step.message_id); it != send_of_message_.end()) {
      consider(Link::Edge::kMessage, steps_[it->second].issue_ps, it->second, "");
    }
  }
  // Engine contention: only the serial engines (GEMM, MATH) queue one command behind another.
  const uint64_t ready = best.at;
  for (uint32_t i : ops_of_step_[s]) {
    const EngineOp& o = ops_[i];
    const UnitKind kind = index_.KindOf(topology::UnitId(o.unit));
    if (kind != UnitKind::kGemm && kind != UnitKind::kMath) continue;
    if (o.start_ps <= ready) continue;
    uint64_t own_ready = 0;  // the step's own ops on other units that had ended by then
    for (uint32_t j : ops_of_step_[s]) {
      const EngineOp& other = ops_[j];
      if (other.unit != o.unit && other.end_ps <= o.start_ps) {
        own_ready = std::max(own_ready, other.end_ps);
      }
    }
    if (own_ready >= o.start_ps) continue;
    // An op of another command on this unit that ended exactly when this one started.
    auto it = std::lower_bound(ops_.begin(), ops_.end(), std::make_pair(o.unit, o.start_ps),
                               [](const EngineOp& e, const std::pair<uint32_t, uint64_t>& k) {
                                 return std::tie(e.unit, e.end_ps) < std::tie(k.first, k.second);
                               });
    for (; it != ops_.end() && it->unit == o.unit && it->end_ps == o.start_ps; ++it) {
      if (it->step == s) continue;
      consider(Link::Edge::kEngine, o.start_ps, it->step, index_.Name(topology::UnitId(o.unit)));
      break;
    }
  }
  return best;
}

std::string Timeline::HeldBy(uint32_t s) const {
  const Step& step = steps_[s];
  if (step.kind == Step::Kind::kRecv) return "message";
  if (step.kind == Step::Kind::kSend) return "send";
  // Tie order: gemm, math, dma.
  std::pair<uint64_t, const char*> by_kind[] = {{0, "gemm"}, {0, "math"}, {0, "dma"}};
  for (uint32_t i : ops_of_step_[s]) {
    const EngineOp& o = ops_[i];
    const UnitKind kind = index_.KindOf(topology::UnitId(o.unit));
    const size_t k = kind == UnitKind::kGemm ? 0 : kind == UnitKind::kMath ? 1 : 2;
    by_kind[k].first += o.end_ps - o.start_ps;
  }
  const auto* most = &by_kind[0];
  for (const auto& k : by_kind) {
    if (k.first > most->first) most = &k;
  }
  return most->first > 0 ? most->second : "run";
}

std::vector<Timeline::Link> Timeline::CriticalPath() const {
  std::vector<Link> back;
  if (steps_.empty()) return back;
  int64_t cur = 0;
  for (uint32_t s = 1; s < steps_.size(); ++s) {
    const Step& a = steps_[s];
    const Step& b = steps_[cur];
    if (std::make_tuple(-static_cast<int64_t>(a.end_ps), a.pe, a.Key()) <
        std::make_tuple(-static_cast<int64_t>(b.end_ps), b.pe, b.Key())) {
      cur = s;
    }
  }
  std::vector<bool> seen(steps_.size(), false);
  // A CPU issue span; merged into the row before it (in walk order) when they touch.
  auto add_cpu = [&back](uint32_t pe, uint64_t from, uint64_t to) {
    if (!back.empty() && back.back().edge == Link::Edge::kCpu && back.back().pe == pe &&
        back.back().from_ps == to) {
      back.back().from_ps = from;
      ++back.back().calls;
      return;
    }
    back.push_back({Link::Edge::kCpu, -1, pe, 1, from, to, "", "cpu"});
  };
  uint64_t until = steps_[cur].end_ps;  // the time the current row hands on at
  while (cur >= 0 && !seen[cur]) {
    seen[cur] = true;
    const Step& step = steps_[cur];
    const Release r = ReleaseOf(static_cast<uint32_t>(cur));
    back.push_back({r.edge, cur, step.pe, 0, std::min(r.at, until), until, r.note,
                    HeldBy(static_cast<uint32_t>(cur))});
    if (r.edge != Link::Edge::kIssue) {
      until = r.at;
      cur = r.pred;
      continue;
    }
    // Back along the PE's CPU from the issue.
    uint32_t pe = step.pe;
    uint32_t request = step.request_id;
    uint64_t t = step.issue_ps;
    cur = -1;
    while (true) {
      const Cpu& cpu = cpus_[pe];
      // The latest issue strictly before t.
      auto it = std::lower_bound(cpu.issues.begin(), cpu.issues.end(), std::make_pair(t, uint32_t{0}));
      const bool has_prev = it != cpu.issues.begin();
      const std::pair<uint64_t, uint32_t> prev = has_prev ? *std::prev(it) : std::make_pair(uint64_t{0}, 0u);
      // The latest stall of this request that ended at or before t.
      const Stall* stall = nullptr;
      auto st = std::upper_bound(cpu.stalls.begin(), cpu.stalls.end(), t,
                                 [](uint64_t v, const Stall& x) { return v < x.to_ps; });
      while (st != cpu.stalls.begin()) {
        --st;
        if (st->request_id == request) {
          stall = &*st;
          break;
        }
      }
      // A stall that starts at t (zero length) would not move the walk back: skipped, so that
      // every turn of this loop goes strictly earlier (a damaged trace cannot make it spin).
      if (stall != nullptr && stall->from_ps < t && (!has_prev || stall->to_ps >= prev.first)) {
        const int64_t pred = stall->cmd_id != 0 ? StepOf(pe, stall->cmd_id) : -1;
        const uint64_t from = pred >= 0 ? std::min(steps_[pred].end_ps, t) : stall->from_ps;
        back.push_back({Link::Edge::kWait, -1, pe, 0, from, t, stall->waits_on, "wait"});
        if (pred >= 0 && !seen[pred]) {
          until = from;
          cur = pred;
          break;
        }
        t = stall->from_ps;  // a queue wait (or a step already on the path): on along the CPU
        continue;
      }
      if (!has_prev) {
        if (t > 0) add_cpu(pe, 0, t);  // the first issue's own cost
        break;
      }
      add_cpu(pe, prev.first, t);  // issue cost: the CPU was issuing the previous call
      t = prev.first;
      request = steps_[prev.second].request_id;
    }
  }
  std::reverse(back.begin(), back.end());
  return back;
}

}  // namespace ahbm::observe
