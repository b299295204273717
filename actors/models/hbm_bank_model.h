// A bank, row and refresh model of one HBM pseudo-channel (DESIGN §2), the pattern of
// Ramulator 2's HBM3 device and its FR-FCFS controller, at command level: ACT, PRE, RD, WR,
// all-bank and per-bank refresh, with the constraints of the stack id, bank group and bank
// levels. A plain class (STYLE 4): no CAF, no engine; time is whole cycles of the channel clock
// (CK). A BANK channel's server (units/hbm_channel_actor.h) times DMA chunks with it;
// hbm_patterns.h runs it on the calibration patterns.
//
// Contract:
// - Requests are one burst each (burst_bytes), to a decoded address (stack id, bank group, bank,
//   row, column). Add() queues one at its arrival cycle (non-decreasing); the queue holds at
//   most queue_depth requests (Full()).
// - Each cycle the controller may issue one row command (ACT, PRE, REF) and one column command
//   (RD, WR). Of the queued requests whose next command (ACT to a closed bank, PRE on a row
//   conflict, RD/WR on a row hit) meets every constraint now, FR-FCFS takes the oldest; FCFS
//   only ever looks at the oldest request. The row stays open (open-page policy); a PRE never
//   closes a row an older queued request still hits.
// - Constraints, in cycles: bank ACT->RD t_rcd, ACT->PRE t_ras, RD->PRE t_rtp, WR->PRE
//   t_cwl + t_burst + t_wr, PRE->ACT t_rp, ACT->ACT t_rc; bank group RD->RD / WR->WR t_ccd_l,
//   ACT->ACT t_rrd_l; stack id RD->RD t_ccd_s (t_ccd_r across stack ids); pseudo-channel data
//   bus t_burst per burst, ACT->ACT t_rrd_s, four ACTs per t_faw, RD->WR t_rtw, WR->RD
//   t_cwl + t_burst + t_wtr_s.
// - Refresh: kAllBank every t_refi: the open rows are precharged, REFab holds every bank for
//   t_rfc; kPerBank every t_refi_pb one bank (cycling banks, then stack ids), once closed, is
//   refreshed for t_rfc_pb (REF->REF t_rrefd). A due refresh goes before requests.
// - A read is done at its RD cycle + t_cl + t_burst; a write at its WR cycle + t_cwl + t_burst.
// - Run(until) issues every command due up to `until`, RunUntilRoom until the queue has room,
//   RunToEmpty until every request is served; TakeServed() hands back the served requests.
// - ServeCall() is what a channel server does with one DMA call: its bursts queued from its
//   arrival as room allows, every one served before it returns. The model is invariant under a
//   shift in time, so a call can be replayed from a memo (hbm_call_memo.h) through
//   AppendState / RestoreState.
#ifndef AHBMSIM_ACTORS_MODELS_HBM_BANK_MODEL_H_
#define AHBMSIM_ACTORS_MODELS_HBM_BANK_MODEL_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "proto/topology.pb.h"

namespace ahbm::sim {

struct HbmBankTiming {
  uint32_t stack_ids = 2, bank_groups = 4, banks_per_group = 4;
  uint32_t columns = 32;  // bursts per row
  uint32_t burst_bytes = 32;
  // Cycles of the channel clock (Ramulator 2 HBM3_6400Mbps, tCK 625 ps).
  uint32_t t_burst = 2, t_cl = 20, t_cwl = 10, t_rcd = 31, t_rcd_wr = 15, t_rp = 26, t_ras = 45,
           t_rc = 72, t_wr = 33, t_rtp = 9, t_ccd_s = 2, t_ccd_l = 4, t_ccd_r = 3, t_rrd_s = 4,
           t_rrd_l = 5, t_faw = 24, t_wtr_s = 7, t_rtw = 20;
  enum class Refresh : uint8_t { kNone, kAllBank, kPerBank };
  Refresh refresh = Refresh::kNone;
  uint32_t t_rfc = 560, t_rfc_pb = 320, t_refi = 6240, t_refi_pb = 195, t_rrefd = 8;
  enum class Scheduler : uint8_t { kFcfs, kFrFcfs };
  Scheduler scheduler = Scheduler::kFrFcfs;
  uint32_t queue_depth = 32;

  uint32_t banks() const { return stack_ids * bank_groups * banks_per_group; }
};

// A burst's place in the pseudo-channel.
struct HbmBankAddress {
  uint32_t sid = 0, bank_group = 0, bank = 0;  // bank within its group
  uint32_t row = 0, column = 0;
};

// What one call (ServeCall) got: cycles of its first and last column command, and of its last
// byte.
struct HbmCallResult {
  uint64_t first_col = 0, last_col = 0, last_done = 0;
  bool operator==(const HbmCallResult&) const = default;
};

// Commands issued so far.
struct HbmCommandCounts {
  uint64_t act = 0, pre = 0, rd = 0, wr = 0, ref = 0;
  bool operator==(const HbmCommandCounts&) const = default;
};

// "fifo", or "bank (ALL_BANK refresh, FR_FCFS, BANK_GROUP_FIRST)": the report's hbm_model.
std::string HbmModelName(const pb::HbmChannel& hbm);

// The timing of a validated BANK channel (topology Validate()).
HbmBankTiming BankTimingOf(const pb::HbmChannel& hbm);

// Where burst `burst` (a channel-local address / burst_bytes) lies under `map`.
HbmBankAddress MapBurst(uint64_t burst, pb::HbmAddressMap map, const HbmBankTiming& t);
// The shift (in bursts, a whole number of rows over every bank) that `map` repeats under:
// MapBurst(b + k * RowShiftBursts) is MapBurst(b) k * RowShiftBursts / (columns * banks) rows
// further, in the same bank and column (the call memo keys calls relative to it).
uint64_t RowShiftBursts(pb::HbmAddressMap map, const HbmBankTiming& t);

class HbmBankModel {
 public:
  explicit HbmBankModel(const HbmBankTiming& timing);

  struct Request {
    uint64_t id = 0;
    HbmBankAddress address;
    bool write = false;
    uint64_t arrival = 0;  // cycle
    uint64_t column_at = 0;  // cycle of its column command (set when served)
    uint64_t done = 0;       // cycle the last byte is delivered (set when served)
    bool activated = false;  // it opened its row (an ACT of its own)
  };

  bool Full() const { return queued_ >= timing_.queue_depth; }
  bool Empty() const { return queued_ == 0; }
  // Queues `r` (arrival non-decreasing; the queue must not be Full()). Into an empty queue, the
  // refreshes that fell due while the channel was idle (before r.arrival) happen then.
  void Add(const Request& r);
  // Issues every command due at cycles <= until (the queue may empty earlier).
  void Run(uint64_t until) { Advance(until, /*until_room=*/false); }
  // Issues commands until the queue has room or is empty; returns the cycle reached.
  uint64_t RunUntilRoom() {
    Advance(UINT64_MAX, /*until_room=*/true);
    return now_;
  }
  // Issues commands until every queued request is served.
  void RunToEmpty() { Advance(UINT64_MAX, /*until_room=*/false); }
  // The requests whose column command has issued, in issue order (moved out).
  std::vector<Request> TakeServed();
  uint64_t now() const { return now_; }
  uint64_t commands(const std::string& name) const;
  const HbmCommandCounts& counts() const { return counts_; }
  const HbmBankTiming& timing() const { return timing_; }
  uint32_t BankIndex(const HbmBankAddress& a) const {
    return (a.sid * timing_.bank_groups + a.bank_group) * timing_.banks_per_group + a.bank;
  }

  // One call on an empty queue: the refreshes due while idle before `arrival` happen, then
  // `bursts` (all reads or all writes) are queued at max(arrival, now()) in order as the queue
  // has room, and every one is served.
  HbmCallResult ServeCall(uint64_t arrival, std::span<const HbmBankAddress> bursts, bool write);
  // With an empty queue: the refreshes due before `cycle` happen, and now() becomes `cycle` if
  // it was earlier.
  void IdleUntil(uint64_t cycle);

  // The call memo's view (hbm_call_memo.h), with an empty queue. AppendState appends what
  // decides how a call starting at t0 (>= now()) to rows [row_lo, row_hi] goes, provided no
  // refresh falls due before it ends: every time relative to t0, held at -horizon (below) when so
  // far back that no constraint can still see it; a bank closed, open on row_base + k (k given)
  // for a row in the call's range, or open on another row. AppendRefreshSchedule appends the
  // rest, for a call that meets a refresh: the next due cycle (exact), the bank refreshed next,
  // the last per-bank refresh. RestoreState(t0', row_base', state) sets the state they would
  // show as `state` from t0' and row_base' (a bank open on another row keeps its row; the
  // refresh schedule only if `state` holds it).
  void AppendState(uint64_t t0, uint64_t row_base, uint64_t row_lo, uint64_t row_hi,
                   std::vector<int32_t>& out) const;
  void AppendRefreshSchedule(uint64_t t0, std::vector<int32_t>& out) const;
  void RestoreState(uint64_t t0, uint64_t row_base, std::span<const int32_t> state);
  // Asks the cache for the banks' state, which AppendState reads next: a channel's model is
  // cold when its next call comes, and the loads are then in flight together.
  void PrefetchState() const {
    const char* p = reinterpret_cast<const char*>(banks_.data());
    const char* end = p + banks_.size() * sizeof(Bank);
    for (; p < end; p += 64) __builtin_prefetch(p);
  }
  // Cycle the next refresh falls due (UINT64_MAX: never).
  uint64_t refresh_due() const { return next_refresh_; }
  // The memo replays a call's commands as these counts and now() as `now`.
  void AddCounts(const HbmCommandCounts& delta, uint64_t now);

 private:
  struct Bank {
    bool open = false;
    uint32_t row = 0;
    uint64_t act_at = 0, next_act = 0, next_pre = 0;
  };
  enum class Cmd : uint8_t { kAct, kPre, kRead, kWrite };

  // The queued requests of one (bank, row), oldest first. Only the oldest can be the next to
  // issue: the others need the same command, meet the same constraints and arrived no earlier.
  struct Group {
    uint32_t bank = 0;
    uint32_t row = 0;
    std::vector<std::pair<uint64_t, Request>> requests;  // (arrival order, request)
    size_t head = 0;                                     // requests before it were served
    bool live() const { return head < requests.size(); }
    const std::pair<uint64_t, Request>& front() const { return requests[head]; }
    Request& oldest() { return requests[head].second; }
  };

  // The next command `r` needs and the first cycle >= now_ it may issue.
  Cmd NextCmd(const Request& r) const;
  uint64_t Ready(const Request& r, Cmd cmd) const;
  uint64_t ReadyRow(uint32_t bank, Cmd cmd) const;
  uint64_t ReadyCol(const HbmBankAddress& a, bool write) const;
  // Issues `cmd` for the oldest request of groups_[g].
  void Issue(uint32_t g, Cmd cmd, uint64_t at);
  // Refresh: the next refresh's due cycle and whether it can start now (banks closed).
  bool RefreshStep(uint64_t at, bool& row_bus_used);
  void Advance(uint64_t until, bool until_room);
  // The refreshes due before `cycle` on an idle channel, at their due times.
  void RefreshWhileIdle(uint64_t cycle);
  // REFab / the next REFpb at `at` (its bank closed).
  void RefreshAll(uint64_t at);
  void RefreshBank(uint64_t at);

  // Room for this many bank groups (over every stack id) inside the model: a call reads them
  // all, and an HBM channel's model is cold in the cache when its next call comes.
  static constexpr size_t kInlineGroups = 8;

  HbmBankTiming timing_;
  std::vector<Bank> banks_;
  absl::InlinedVector<uint64_t, kInlineGroups> group_next_col_, group_next_act_;  // by (sid, group)
  uint64_t last_col_ = 0;
  bool any_col_ = false;  // a column command was issued
  uint32_t last_col_sid_ = 0;
  bool last_col_write_ = false;
  uint64_t next_act_any_ = 0;
  // The last (up to) four ACT cycles, oldest first (t_faw): act_window_[0, act_count_).
  std::array<uint64_t, 4> act_window_{};
  uint32_t act_count_ = 0;
  uint64_t next_refresh_ = 0;        // due cycle of the next refresh (UINT64_MAX: none)
  uint32_t refresh_bank_ = 0;        // per-bank: the bank refreshed next
  uint64_t refresh_busy_until_ = 0;  // all-bank: REFab holds every bank until then
  uint64_t last_ref_ = 0;
  std::vector<Group> groups_;       // slots; a served-out group's slot is reused
  std::vector<uint32_t> order_;     // the live groups, oldest request first
  bool order_stale_ = false;
  uint64_t queued_ = 0, next_seq_ = 0;
  std::vector<Request> served_;
  uint64_t now_ = 0;
  HbmCommandCounts counts_;
  uint32_t horizon_ = 0;  // > every constant a stored time is compared with
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_MODELS_HBM_BANK_MODEL_H_
