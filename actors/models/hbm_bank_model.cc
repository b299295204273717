#include "actors/models/hbm_bank_model.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/check.h"

namespace ahbm::sim {
namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

}  // namespace

HbmBankModel::HbmBankModel(const HbmBankTiming& timing)
    : timing_(timing),
      banks_(timing.banks()),
      group_next_col_(timing.stack_ids * timing.bank_groups, 0),
      group_next_act_(timing.stack_ids * timing.bank_groups, 0) {
  AHBM_CHECK(timing.banks() > 0 && timing.queue_depth > 0) << "HBM bank model without banks";
  // A refresh due again before the last one ends would starve every request.
  AHBM_CHECK(timing.refresh != HbmBankTiming::Refresh::kAllBank || timing.t_refi > timing.t_rfc)
      << "HBM bank model: t_refi " << timing.t_refi << " <= t_rfc " << timing.t_rfc;
  AHBM_CHECK(timing.refresh != HbmBankTiming::Refresh::kPerBank ||
             uint64_t{timing.t_refi_pb} * timing.banks() > timing.t_rfc_pb)
      << "HBM bank model: t_refi_pb x banks <= t_rfc_pb";
  next_refresh_ = kNever;
  if (timing_.refresh == HbmBankTiming::Refresh::kAllBank) next_refresh_ = timing_.t_refi;
  if (timing_.refresh == HbmBankTiming::Refresh::kPerBank) next_refresh_ = timing_.t_refi_pb;
  // The constants added to a stored time before it is compared with now (ReadyRow, ReadyCol).
  horizon_ = 1 + std::max({timing.t_rcd, timing.t_rcd_wr, timing.t_faw, timing.t_ccd_s,
                           timing.t_ccd_r, timing.t_burst, timing.t_rtw, timing.t_rrefd,
                           timing.t_cwl + timing.t_burst + timing.t_wtr_s});
}

std::string HbmModelName(const pb::HbmChannel& hbm) {
  if (hbm.model() != pb::BANK) {
    if (!hbm.has_fifo_efficiency_ppm()) return "fifo";
    return "fifo (efficiency " + std::to_string(hbm.fifo_efficiency_ppm()) + " ppm)";
  }
  const pb::HbmBankConfig& b = hbm.bank();
  return "bank (" + pb::HbmRefresh_Name(b.refresh()) + " refresh, " +
         pb::HbmScheduler_Name(b.scheduler()) + ", " + pb::HbmAddressMap_Name(b.address_map()) + ")";
}

HbmBankTiming BankTimingOf(const pb::HbmChannel& hbm) {
  const pb::HbmBankConfig& b = hbm.bank();
  HbmBankTiming t;
  t.stack_ids = b.stack_ids();
  t.bank_groups = b.bank_groups();
  t.banks_per_group = b.banks_per_group();
  t.columns = b.row_bytes() / b.burst_bytes();
  t.burst_bytes = b.burst_bytes();
  t.t_burst = b.burst_cycles();
  t.t_cl = b.t_cl_cycles();
  t.t_cwl = b.t_cwl_cycles();
  t.t_rcd = b.t_rcd_rd_cycles();
  t.t_rcd_wr = b.t_rcd_wr_cycles();
  t.t_rp = b.t_rp_cycles();
  t.t_ras = b.t_ras_cycles();
  t.t_rc = b.t_rc_cycles();
  t.t_wr = b.t_wr_cycles();
  t.t_rtp = b.t_rtp_cycles();
  t.t_ccd_s = b.t_ccd_s_cycles();
  t.t_ccd_l = b.t_ccd_l_cycles();
  t.t_ccd_r = b.t_ccd_r_cycles();
  t.t_rrd_s = b.t_rrd_s_cycles();
  t.t_rrd_l = b.t_rrd_l_cycles();
  t.t_faw = b.t_faw_cycles();
  t.t_wtr_s = b.t_wtr_s_cycles();
  t.t_rtw = b.t_rtw_cycles();
  t.refresh = b.refresh() == pb::ALL_BANK   ? HbmBankTiming::Refresh::kAllBank
              : b.refresh() == pb::PER_BANK ? HbmBankTiming::Refresh::kPerBank
                                            : HbmBankTiming::Refresh::kNone;
  t.t_rfc = b.t_rfc_cycles();
  t.t_refi = b.t_refi_cycles();
  t.t_rfc_pb = b.t_rfc_pb_cycles();
  t.t_refi_pb = b.t_refi_pb_cycles();
  t.t_rrefd = b.t_rrefd_cycles();
  t.scheduler = b.scheduler() == pb::FCFS ? HbmBankTiming::Scheduler::kFcfs
                                          : HbmBankTiming::Scheduler::kFrFcfs;
  t.queue_depth = b.queue_depth();
  return t;
}

HbmBankAddress MapBurst(uint64_t burst, pb::HbmAddressMap map, const HbmBankTiming& t) {
  HbmBankAddress a;
  uint64_t rest = burst;
  auto take = [&rest](uint32_t n) {
    const uint32_t v = static_cast<uint32_t>(rest % n);
    rest /= n;
    return v;
  };
  if (map == pb::COLUMN_FIRST) {
    a.column = take(t.columns);
    a.sid = take(t.stack_ids);
    a.bank_group = take(t.bank_groups);
    a.bank = take(t.banks_per_group);
  } else {
    a.bank_group = take(t.bank_groups);
    a.column = take(t.columns);
    a.sid = take(t.stack_ids);
    a.bank = take(t.banks_per_group);
  }
  a.row = static_cast<uint32_t>(rest);
  if (map == pb::BANK_GROUP_FIRST_HASHED) {
    a.bank_group = static_cast<uint32_t>((a.bank_group + rest) % t.bank_groups);
    a.bank = static_cast<uint32_t>((a.bank + rest / t.bank_groups) % t.banks_per_group);
  }
  return a;
}

uint64_t RowShiftBursts(pb::HbmAddressMap map, const HbmBankTiming& t) {
  const uint64_t row = uint64_t{t.columns} * t.banks();
  return map == pb::BANK_GROUP_FIRST_HASHED ? row * t.bank_groups * t.banks_per_group : row;
}

void HbmBankModel::Add(const Request& r) {
  AHBM_CHECK(!Full()) << "HBM bank model: request " << r.id << " added to a full queue";
  AHBM_CHECK(r.address.sid < timing_.stack_ids && r.address.bank_group < timing_.bank_groups &&
             r.address.bank < timing_.banks_per_group && r.address.column < timing_.columns)
      << "HBM bank model: request " << r.id << " outside the pseudo-channel";
  if (queued_ == 0) IdleUntil(r.arrival);
  const uint32_t bank = BankIndex(r.address);
  Group* group = nullptr;
  for (uint32_t g : order_) {
    if (groups_[g].bank == bank && groups_[g].row == r.address.row) group = &groups_[g];
  }
  if (group == nullptr) {
    uint32_t slot = 0;
    while (slot < groups_.size() && groups_[slot].live()) ++slot;
    if (slot == groups_.size()) groups_.emplace_back();
    group = &groups_[slot];
    group->bank = bank;
    group->row = r.address.row;
    group->requests.clear();
    group->head = 0;
    order_.push_back(slot);  // the youngest request: last in age order
  }
  group->requests.emplace_back(next_seq_++, r);
  ++queued_;
}

HbmBankModel::Cmd HbmBankModel::NextCmd(const Request& r) const {
  const Bank& b = banks_[BankIndex(r.address)];
  if (!b.open) return Cmd::kAct;
  if (b.row != r.address.row) return Cmd::kPre;
  return r.write ? Cmd::kWrite : Cmd::kRead;
}

uint64_t HbmBankModel::ReadyRow(uint32_t bank, Cmd cmd) const {
  const Bank& b = banks_[bank];
  if (cmd == Cmd::kPre) return b.next_pre;
  const uint32_t group = bank / timing_.banks_per_group;
  uint64_t t = std::max({b.next_act, group_next_act_[group], next_act_any_, refresh_busy_until_});
  if (act_count_ == 4) t = std::max(t, act_window_[0] + timing_.t_faw);
  return t;
}

uint64_t HbmBankModel::ReadyCol(const HbmBankAddress& a, bool write) const {
  const Bank& b = banks_[BankIndex(a)];
  const uint32_t group = a.sid * timing_.bank_groups + a.bank_group;
  uint64_t t = std::max(b.act_at + (write ? timing_.t_rcd_wr : timing_.t_rcd), group_next_col_[group]);
  if (any_col_) {
    t = std::max(t, last_col_ + (a.sid == last_col_sid_ ? timing_.t_ccd_s : timing_.t_ccd_r));
    t = std::max(t, last_col_ + timing_.t_burst);
    if (write && !last_col_write_) t = std::max(t, last_col_ + timing_.t_rtw);
    if (!write && last_col_write_) {
      t = std::max(t, last_col_ + timing_.t_cwl + timing_.t_burst + timing_.t_wtr_s);
    }
  }
  return t;
}

uint64_t HbmBankModel::Ready(const Request& r, Cmd cmd) const {
  const uint64_t arrival = r.arrival;
  if (cmd == Cmd::kRead || cmd == Cmd::kWrite) {
    return std::max(arrival, ReadyCol(r.address, cmd == Cmd::kWrite));
  }
  return std::max(arrival, ReadyRow(BankIndex(r.address), cmd));
}

void HbmBankModel::Issue(uint32_t g, Cmd cmd, uint64_t at) {
  Request& r = groups_[g].oldest();
  const uint32_t bank_index = BankIndex(r.address);
  Bank& b = banks_[bank_index];
  const uint32_t group = bank_index / timing_.banks_per_group;
  switch (cmd) {
    case Cmd::kAct:
      r.activated = true;
      b.open = true;
      b.row = r.address.row;
      b.act_at = at;
      b.next_pre = std::max(b.next_pre, at + timing_.t_ras);
      b.next_act = at + timing_.t_rc;
      group_next_act_[group] = at + timing_.t_rrd_l;
      next_act_any_ = at + timing_.t_rrd_s;
      if (act_count_ == 4) {
        std::copy(act_window_.begin() + 1, act_window_.end(), act_window_.begin());
        act_window_[3] = at;
      } else {
        act_window_[act_count_++] = at;
      }
      ++counts_.act;
      return;
    case Cmd::kPre:
      b.open = false;
      b.next_act = std::max(b.next_act, at + timing_.t_rp);
      ++counts_.pre;
      return;
    case Cmd::kRead:
    case Cmd::kWrite: {
      const bool write = cmd == Cmd::kWrite;
      group_next_col_[group] = at + timing_.t_ccd_l;
      last_col_ = at;
      any_col_ = true;
      last_col_sid_ = r.address.sid;
      last_col_write_ = write;
      b.next_pre = std::max(b.next_pre, at + (write ? timing_.t_cwl + timing_.t_burst + timing_.t_wr
                                                    : timing_.t_rtp));
      r.column_at = at;
      r.done = at + (write ? timing_.t_cwl : timing_.t_cl) + timing_.t_burst;
      ++(write ? counts_.wr : counts_.rd);
      served_.push_back(r);
      ++groups_[g].head;
      --queued_;
      order_stale_ = true;
      return;
    }
  }
}

bool HbmBankModel::RefreshStep(uint64_t at, bool& row_bus_used) {
  if (timing_.refresh == HbmBankTiming::Refresh::kNone || at < next_refresh_) return false;
  if (timing_.refresh == HbmBankTiming::Refresh::kAllBank) {
    // PREab once every open row may close, then REFab once every bank may activate.
    bool any_open = false;
    uint64_t pre_at = 0, ref_at = 0;
    for (const Bank& b : banks_) {
      any_open = any_open || b.open;
      if (b.open) pre_at = std::max(pre_at, b.next_pre);
      ref_at = std::max(ref_at, b.next_act);
    }
    if (any_open) {
      if (pre_at <= at && !row_bus_used) {
        for (Bank& b : banks_) {
          if (!b.open) continue;
          b.open = false;
          b.next_act = std::max(b.next_act, at + timing_.t_rp);
        }
        ++counts_.pre;
        row_bus_used = true;
      }
      return true;
    }
    if (ref_at <= at && !row_bus_used) {
      RefreshAll(at);
      row_bus_used = true;
      return false;
    }
    return true;
  }
  // Per bank: the due bank closes, then refreshes; the others go on.
  Bank& b = banks_[refresh_bank_];
  if (b.open) {
    if (b.next_pre <= at && !row_bus_used) {
      b.open = false;
      b.next_act = std::max(b.next_act, at + timing_.t_rp);
      ++counts_.pre;
      row_bus_used = true;
    }
    return false;
  }
  if (b.next_act <= at && at >= last_ref_ + timing_.t_rrefd && !row_bus_used) {
    RefreshBank(at);
    row_bus_used = true;
  }
  return false;
}

void HbmBankModel::RefreshAll(uint64_t at) {
  refresh_busy_until_ = at + timing_.t_rfc;
  next_refresh_ += timing_.t_refi;
  ++counts_.ref;
}

void HbmBankModel::RefreshBank(uint64_t at) {
  banks_[refresh_bank_].next_act = at + timing_.t_rfc_pb;
  last_ref_ = at;
  next_act_any_ = std::max(next_act_any_, at + timing_.t_rrefd);
  next_refresh_ += timing_.t_refi_pb;
  refresh_bank_ = (refresh_bank_ + 1) % timing_.banks();
  ++counts_.ref;
}

void HbmBankModel::RefreshWhileIdle(uint64_t cycle) {
  if (timing_.refresh == HbmBankTiming::Refresh::kNone) return;
  while (next_refresh_ < cycle) {
    const uint64_t due = std::max(next_refresh_, now_);
    if (timing_.refresh == HbmBankTiming::Refresh::kAllBank) {
      // PREab when the open rows may close, REFab when every bank may activate.
      uint64_t pre = due;
      bool any_open = false;
      for (const Bank& b : banks_) {
        if (b.open) pre = std::max(pre, b.next_pre);
        any_open = any_open || b.open;
      }
      uint64_t ref = pre;
      for (Bank& b : banks_) {
        if (b.open) {
          b.open = false;
          b.next_act = std::max(b.next_act, pre + timing_.t_rp);
        }
        ref = std::max(ref, b.next_act);
      }
      counts_.pre += any_open ? 1 : 0;
      RefreshAll(ref);
    } else {
      Bank& b = banks_[refresh_bank_];
      uint64_t ref = std::max(due, last_ref_ + timing_.t_rrefd);
      if (b.open) {
        b.open = false;
        b.next_act = std::max(b.next_act, std::max(ref, b.next_pre) + timing_.t_rp);
        ++counts_.pre;
      }
      RefreshBank(std::max(ref, b.next_act));
    }
  }
}

void HbmBankModel::Advance(uint64_t until, bool until_room) {
  auto oldest_first = [this](uint32_t a, uint32_t b) {
    return groups_[a].front().first < groups_[b].front().first;
  };
  while (now_ <= until && queued_ > 0 && !(until_room && !Full())) {
    if (order_stale_) {
      std::erase_if(order_, [this](uint32_t g) { return !groups_[g].live(); });
      std::sort(order_.begin(), order_.end(), oldest_first);
      order_stale_ = false;
    }
    bool row_bus = false, col_bus = false;
    const bool blocked = RefreshStep(now_, row_bus);
    bool issued = row_bus;
    // The bank a per-bank refresh waits to close takes no ACT.
    const bool pb_due = (timing_.refresh == HbmBankTiming::Refresh::kPerBank && now_ >= next_refresh_) || blocked;
    uint64_t next = kNever;
    bool row_needed = false;  // some request's next command is an ACT or a PRE
    {
      for (size_t i = 0; i < order_.size();) {
        const uint32_t g = order_[i];
        if (!groups_[g].live()) {  // served out this cycle
          ++i;
          continue;
        }
        const Request& r = groups_[g].oldest();
        if (timing_.scheduler == HbmBankTiming::Scheduler::kFcfs && i > 0) break;
        const Cmd cmd = NextCmd(r);
        const bool row_cmd = cmd == Cmd::kAct || cmd == Cmd::kPre;
        row_needed = row_needed || row_cmd;
        const uint32_t bank = BankIndex(r.address);
        bool allowed = !(row_cmd ? row_bus : col_bus);
        // A due per-bank refresh holds every request's row commands (it waits ahead of them,
        // as in Ramulator's priority buffer).
        // Only a request that opened its row itself (the active buffer) may still read.
        if (pb_due && (row_cmd || !r.activated)) allowed = false;
        if (cmd == Cmd::kPre) {
          // Never close a row an older queued request still hits.
          for (size_t j = 0; j < i && allowed; ++j) {
            const Group& other = groups_[order_[j]];
            if (other.live() && other.bank == bank && other.front().second.activated) allowed = false;
          }
        }
        const uint64_t ready = Ready(r, cmd);
        if (allowed && ready <= now_) {
          Issue(g, cmd, now_);
          issued = true;
          (row_cmd ? row_bus : col_bus) = true;
        } else if (allowed || ready > now_) {
          next = std::min(next, std::max(ready, now_ + 1));
        }
        ++i;
      }
    }
    // Only reads were due and one went: no command can go before the data bus frees (every
    // column command waits t_burst after the last, and no request needs a row command, and no
    // refresh falls due in between), so skip to then — the same timeline, fewer steps. Not
    // while a source waits for room, nor after the last request: either would see a later now().
    const bool only_reads = !until_room && queued_ > 0 && col_bus && !row_bus && !row_needed &&
                            !blocked && !pb_due &&
                            timing_.scheduler == HbmBankTiming::Scheduler::kFrFcfs &&
                            (timing_.refresh == HbmBankTiming::Refresh::kNone ||
                             next_refresh_ >= now_ + timing_.t_burst);
    if (only_reads) {
      now_ += timing_.t_burst;
    } else if (issued || blocked || next == kNever) {
      ++now_;
    } else {
      // Nothing can issue before `next` (nor a refresh before it is due).
      uint64_t wake = next;
      if (timing_.refresh != HbmBankTiming::Refresh::kNone) wake = std::min(wake, std::max(next_refresh_, now_ + 1));
      now_ = wake;
    }
  }
}

std::vector<HbmBankModel::Request> HbmBankModel::TakeServed() { return std::exchange(served_, {}); }

void HbmBankModel::IdleUntil(uint64_t cycle) {
  AHBM_CHECK(queued_ == 0) << "HBM bank model: IdleUntil with " << queued_ << " queued";
  if (cycle <= now_) return;
  RefreshWhileIdle(cycle);
  now_ = cycle;
}

HbmCallResult HbmBankModel::ServeCall(uint64_t arrival, std::span<const HbmBankAddress> bursts,
                                      bool write) {
  AHBM_CHECK(queued_ == 0 && !bursts.empty()) << "HBM bank model: a call needs bursts and an empty queue";
  IdleUntil(arrival);
  served_.clear();
  HbmCallResult result{kNever, 0, 0};
  auto collect = [&] {
    for (const Request& r : served_) {
      result.first_col = std::min(result.first_col, r.column_at);
      result.last_col = std::max(result.last_col, r.column_at);
      result.last_done = std::max(result.last_done, r.done);
    }
    served_.clear();
  };
  Request r;
  r.write = write;
  for (const HbmBankAddress& a : bursts) {
    if (Full()) {
      RunUntilRoom();
      collect();
    }
    r.address = a;
    r.arrival = std::max(arrival, now_);
    Add(r);
    ++r.id;
  }
  RunToEmpty();
  collect();
  return result;
}

namespace {

// `t` relative to t0, held at -horizon (and at -t0: a time is never negative).
inline int32_t Rel(uint64_t t, uint64_t t0, uint32_t horizon) {
  if (t >= t0) return static_cast<int32_t>(std::min<uint64_t>(t - t0, INT32_MAX));
  return -static_cast<int32_t>(std::min<uint64_t>({t0 - t, horizon, t0}));
}

// Rel(t, t0, horizon) for one t0, as a clamp to [t0 - min(horizon, t0), t0 + INT32_MAX]: no
// branch per time (AppendState makes ~100 of them per call).
class RelTo {
 public:
  RelTo(uint64_t t0, uint32_t horizon)
      : t0_(t0), lo_(t0 - std::min<uint64_t>(horizon, t0)), hi_(t0 + INT32_MAX) {}
  int32_t operator()(uint64_t t) const {
    return static_cast<int32_t>(static_cast<int64_t>(std::clamp(t, lo_, hi_) - t0_));
  }

 private:
  uint64_t t0_, lo_, hi_;
};

inline uint64_t Abs(int32_t rel, uint64_t t0) { return static_cast<uint64_t>(static_cast<int64_t>(t0) + rel); }

}  // namespace

void HbmBankModel::AppendState(uint64_t t0, uint64_t row_base, uint64_t row_lo, uint64_t row_hi,
                               std::vector<int32_t>& out) const {
  const uint32_t h = horizon_;
  const RelTo rel(t0, h);
  const int32_t idle = rel(0);  // a time so far back it binds nothing
  // Written through a pointer into room for the longest state (this runs for every call).
  const size_t start = out.size();
  out.resize(start + 5 * banks_.size() + 2 * group_next_col_.size() + 6 + act_count_ + 1);
  int32_t* p = out.data() + start;
  // Each bank writes all five slots and keeps 1, 3 or 5 of them (no branch on its state):
  // 0: closed and idle; 3, next ACT, next PRE: closed; 1, k, ACT, next ACT, next PRE: open on
  // row_base + k, a row of the call's; 2, 0, ACT, next ACT, next PRE: open on another row.
  for (const Bank& b : banks_) {
    const int32_t next_act = rel(b.next_act), next_pre = rel(b.next_pre);
    const bool in_call = b.row >= row_lo && b.row <= row_hi;
    const bool idle_closed = next_act == idle && next_pre == idle;
    const int32_t row =
        in_call ? static_cast<int32_t>(static_cast<int64_t>(b.row) - static_cast<int64_t>(row_base))
                : 0;
    p[0] = b.open ? (in_call ? 1 : 2) : (idle_closed ? 0 : 3);
    p[1] = b.open ? row : next_act;
    p[2] = b.open ? rel(b.act_at) : next_pre;
    p[3] = next_act;
    p[4] = next_pre;
    p += b.open ? 5 : (idle_closed ? 1 : 3);
  }
  for (uint64_t t : group_next_col_) *p++ = rel(t);
  for (uint64_t t : group_next_act_) *p++ = rel(t);
  // The last column command, while it may still bind.
  const bool binds = any_col_ && last_col_ + h > t0;
  *p++ = binds ? 1 : 0;
  *p++ = binds ? rel(last_col_) : 0;
  *p++ = binds ? static_cast<int32_t>(last_col_sid_) : 0;
  *p++ = binds && last_col_write_ ? 1 : 0;
  *p++ = rel(next_act_any_);
  *p++ = static_cast<int32_t>(act_count_);
  for (uint32_t i = 0; i < act_count_; ++i) *p++ = rel(act_window_[i]);
  *p++ = rel(refresh_busy_until_);
  out.resize(static_cast<size_t>(p - out.data()));
}

void HbmBankModel::AppendRefreshSchedule(uint64_t t0, std::vector<int32_t>& out) const {
  // A refresh due before t0 is overdue (the channel was busy): it goes first.
  const int64_t due = static_cast<int64_t>(next_refresh_) - static_cast<int64_t>(t0);
  AHBM_CHECK(due > INT32_MIN && due < INT32_MAX) << "HBM bank model: refresh due " << due << " cycles away";
  out.insert(out.end(), {static_cast<int32_t>(due), static_cast<int32_t>(refresh_bank_),
                         Rel(last_ref_, t0, horizon_)});
}

void HbmBankModel::RestoreState(uint64_t t0, uint64_t row_base, std::span<const int32_t> state) {
  AHBM_CHECK(queued_ == 0) << "HBM bank model: RestoreState with " << queued_ << " queued";
  size_t at = 0;
  auto next = [&] { return state[at++]; };
  const uint64_t idle = Abs(Rel(0, t0, horizon_), t0);
  for (Bank& b : banks_) {
    const int32_t how = next();
    b.open = how == 1 || how == 2;
    if (how == 0) {
      b.next_act = b.next_pre = idle;
      continue;
    }
    if (how == 3) {
      b.next_act = Abs(next(), t0);
      b.next_pre = Abs(next(), t0);
      continue;
    }
    const int32_t row = next();
    if (how == 1) b.row = static_cast<uint32_t>(static_cast<int64_t>(row_base) + row);
    b.act_at = Abs(next(), t0);
    b.next_act = Abs(next(), t0);
    b.next_pre = Abs(next(), t0);
  }
  for (uint64_t& t : group_next_col_) t = Abs(next(), t0);
  for (uint64_t& t : group_next_act_) t = Abs(next(), t0);
  any_col_ = next() != 0;
  last_col_ = Abs(next(), t0);
  last_col_sid_ = static_cast<uint32_t>(next());
  last_col_write_ = next() != 0;
  next_act_any_ = Abs(next(), t0);
  act_count_ = static_cast<uint32_t>(next());
  AHBM_CHECK(act_count_ <= act_window_.size())
      << "HBM bank model: " << act_count_ << " ACTs in t_faw";
  for (uint32_t i = 0; i < act_count_; ++i) act_window_[i] = Abs(next(), t0);
  refresh_busy_until_ = Abs(next(), t0);
  if (at < state.size()) {  // the refresh schedule follows
    next_refresh_ = Abs(next(), t0);
    refresh_bank_ = static_cast<uint32_t>(next());
    last_ref_ = Abs(next(), t0);
  }
  AHBM_CHECK(at == state.size()) << "HBM bank model: a restored state of " << state.size()
                                 << " values, " << at << " read";
}

void HbmBankModel::AddCounts(const HbmCommandCounts& delta, uint64_t now) {
  counts_.act += delta.act;
  counts_.pre += delta.pre;
  counts_.rd += delta.rd;
  counts_.wr += delta.wr;
  counts_.ref += delta.ref;
  now_ = now;
}

uint64_t HbmBankModel::commands(const std::string& name) const {
  if (name == "ACT") return counts_.act;
  if (name == "PRE") return counts_.pre;
  if (name == "RD") return counts_.rd;
  if (name == "WR") return counts_.wr;
  if (name == "REF") return counts_.ref;
  return 0;
}

}  // namespace ahbm::sim
