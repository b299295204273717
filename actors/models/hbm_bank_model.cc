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
  if (timing_.refresh == HbmBankTiming::Refresh::kAllBank) next_refresh_ = timing_.t_refi;
  if (timing_.refresh == HbmBankTiming::Refresh::kPerBank) next_refresh_ = timing_.t_refi_pb;
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
  return a;
}

uint32_t HbmBankModel::BankIndex(const HbmBankAddress& a) const {
  return (a.sid * timing_.bank_groups + a.bank_group) * timing_.banks_per_group + a.bank;
}

void HbmBankModel::Add(const Request& r) {
  AHBM_CHECK(!Full()) << "HBM bank model: request " << r.id << " added to a full queue";
  AHBM_CHECK(r.address.sid < timing_.stack_ids && r.address.bank_group < timing_.bank_groups &&
             r.address.bank < timing_.banks_per_group && r.address.column < timing_.columns)
      << "HBM bank model: request " << r.id << " outside the pseudo-channel";
  if (queued_ == 0 && r.arrival > now_) {
    RefreshWhileIdle(r.arrival);
    now_ = r.arrival;
  }
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
  if (act_window_.size() == 4) t = std::max(t, act_window_.front() + timing_.t_faw);
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
      act_window_.push_back(at);
      if (act_window_.size() > 4) act_window_.pop_front();
      ++acts_;
      return;
    case Cmd::kPre:
      b.open = false;
      b.next_act = std::max(b.next_act, at + timing_.t_rp);
      ++pres_;
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
      r.done = at + (write ? timing_.t_cwl : timing_.t_cl) + timing_.t_burst;
      ++(write ? writes_ : reads_);
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
        ++pres_;
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
      ++pres_;
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
  ++refs_;
}

void HbmBankModel::RefreshBank(uint64_t at) {
  banks_[refresh_bank_].next_act = at + timing_.t_rfc_pb;
  last_ref_ = at;
  next_act_any_ = std::max(next_act_any_, at + timing_.t_rrefd);
  next_refresh_ += timing_.t_refi_pb;
  refresh_bank_ = (refresh_bank_ + 1) % timing_.banks();
  ++refs_;
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
      pres_ += any_open ? 1 : 0;
      RefreshAll(ref);
    } else {
      Bank& b = banks_[refresh_bank_];
      uint64_t ref = std::max(due, last_ref_ + timing_.t_rrefd);
      if (b.open) {
        b.open = false;
        b.next_act = std::max(b.next_act, std::max(ref, b.next_pre) + timing_.t_rp);
        ++pres_;
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

uint64_t HbmBankModel::commands(const std::string& name) const {
  if (name == "ACT") return acts_;
  if (name == "PRE") return pres_;
  if (name == "RD") return reads_;
  if (name == "WR") return writes_;
  if (name == "REF") return refs_;
  return 0;
}

}  // namespace ahbm::sim
