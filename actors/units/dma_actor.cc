#include "actors/units/dma_actor.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "actors/command_check.h"
#include "actors/message_pool.h"
#include "actors/msg.h"
#include "base/check.h"
#include "base/errors.h"
#include "proto/commands.pb.h"

namespace ahbm::sim {
namespace {

void SendError(Engine* engine, UnitId self_id, UnitId dst, uint64_t cmd_id, std::string message) {
  auto err = std::make_shared<pb::DmaError>();
  err->set_cmd_id(cmd_id);
  err->set_message(std::move(message));
  engine->Send(self_id, SimTime(0), dst, std::shared_ptr<const pb::DmaError>(std::move(err)));
}

void SendCompletion(Engine* engine, UnitId self_id, UnitId dst, uint64_t cmd_id, SimTime start,
                    SimTime end) {
  auto done = std::make_shared<pb::Completion>();
  done->set_cmd_id(cmd_id);
  done->set_unit(self_id);
  done->set_start_ps(start.value());
  done->set_end_ps(end.value());
  engine->Send(self_id, SimTime(0), dst, std::shared_ptr<const pb::Completion>(std::move(done)));
}

// Stats and op log of one finished command (ctx may be null).
// Commands overlap: busy_ps counts the union of their [start, end) spans.
// `op_seq`: the op log place reserved for its record at issue, or kNoOpSeq (append now).
constexpr uint64_t kNoOpSeq = UINT64_MAX;
void Record(UnitContext* ctx, DmaActorState& st, UnitId self_id, const DmaCallCmd& cmd,
            SimTime issue, uint64_t op_seq) {
  if (ctx == nullptr) return;
  const DmaKind kind = cmd.kind;
  const uint64_t bytes = cmd.useful_bytes.value();
  pb::UnitStats& s = ctx->stats.At(self_id);
  s.set_ops(s.ops() + 1);
  if (kind != DmaKind::kTcmCopy) {
    s.set_hbm_useful_bytes(s.hbm_useful_bytes() + bytes);
    s.set_hbm_charged_bytes(s.hbm_charged_bytes() + cmd.charged_bytes.value());
  }
  s.set_busy_ps(s.busy_ps() + st.busy.Add(cmd.start.value(), cmd.end.value()));
  const bool write = kind == DmaKind::kHbmWrite;
  if (write) {
    s.set_bytes_written(s.bytes_written() + bytes);
  } else {
    s.set_bytes_read(s.bytes_read() + bytes);
  }
  if (ctx->op_log == nullptr) return;
  pb::OpRecord rec;
  rec.set_unit(self_id);
  rec.set_unit_name(ctx->Name(self_id));
  rec.set_op(kind == DmaKind::kHbmRead ? "dma_read" : write ? "dma_write" : "dma_copy");
  rec.set_cmd_id(cmd.cmd_id);
  rec.set_parent_cmd_id(cmd.parent_cmd_id);
  rec.set_issue_ps(issue.value());
  rec.set_start_ps(cmd.start.value());
  rec.set_end_ps(cmd.end.value());
  if (write) {
    rec.set_bytes_written(bytes);
  } else {
    rec.set_bytes_read(bytes);
  }
  if (op_seq == kNoOpSeq) {
    ctx->op_log->AddOp(std::move(rec));
  } else {
    ctx->op_log->FillOp(op_seq, std::move(rec));
  }
}

// The channel requests are pooled: their parts and address lists keep their capacity, up to a
// size (a large batch's request is freed, not kept: it would pin its capacity in the pool).
struct KeepSmallRequest {
  bool operator()(const pb::HbmRequest& r) const {
    return r.part_cmd().Capacity() <= 64 && r.chunk_addrs().Capacity() <= 1024;
  }
};
// A full chip's DMAs have about one request per channel in flight at an instant (4,096 on
// chip_4sip): the pool keeps that many rather than freeing and making them again.
using RequestPool = MessagePool<pb::HbmRequest, ClearMessage<pb::HbmRequest>,
                                PoolAllocator<pb::HbmRequest>, KeepSmallRequest, 4096>;
// A batch's answer: its Completions (cleared, kept) are reused by the next batch.
struct KeepSmallBatchDone {
  bool operator()(const pb::DmaBatchDone& d) const { return d.done_size() <= 64; }
};
using BatchDonePool = MessagePool<pb::DmaBatchDone, ClearMessage<pb::DmaBatchDone>,
                                  PoolAllocator<pb::DmaBatchDone>, KeepSmallBatchDone>;

// A new call of `requester` issued now; returns its slot (the requests' request_id).
uint32_t OpenCall(DmaActorState& st, UnitId requester, SimTime now, bool batch, uint64_t batch_id) {
  uint32_t slot;
  if (st.free_calls.empty()) {
    slot = static_cast<uint32_t>(st.calls.size());
    st.calls.emplace_back();
  } else {
    slot = st.free_calls.back();
    st.free_calls.pop_back();
  }
  DmaCall& call = st.calls[slot];
  call.requester = requester;
  call.issue = now;
  call.batch = batch;
  call.batch_id = batch_id;
  call.pending = 0;
  call.first_op_seq = kNoOpSeq;
  call.cmds.clear();
  return slot;
}

// Adds command `cmd` planned as `plan` to call `slot`: its shares join the call's requests.
void AddToCall(DmaActorState& st, uint32_t slot, const pb::DmaCmd& cmd, const DmaPlan& plan) {
  DmaCall& call = st.calls[slot];
  const uint64_t index = call.cmds.size();
  DmaCallCmd& c = call.cmds.emplace_back();
  c.cmd_id = cmd.cmd_id();
  c.parent_cmd_id = cmd.parent_cmd_id();
  c.kind = plan.kind;
  c.useful_bytes = plan.useful_bytes;
  c.charged_bytes = plan.charged_bytes;
  c.extra = st.model->ExtraLatency(plan);
  c.end = call.issue;
  for (const DmaChannelShare& share : plan.channels) {
    std::shared_ptr<pb::HbmRequest>& req = st.outgoing[share.channel];
    if (req == nullptr) {
      st.outgoing_channels.push_back(share.channel);
      req = RequestPool::Make();
      req->set_request_id(slot);
      req->set_channel(st.first_channel + share.channel);
      req->set_write(plan.kind == DmaKind::kHbmWrite);
    }
    req->add_part_cmd(index);
    req->add_part_bytes(share.bytes.value());
    req->add_part_chunks(static_cast<uint32_t>(share.chunks));
    if (!share.chunk_addrs.empty()) {
      req->mutable_chunk_addrs()->Add(share.chunk_addrs.begin(), share.chunk_addrs.end());
    }
  }
}

// Sends call `slot`'s requests, ascending channel, and reserves its commands' op records.
void SendCall(DmaActorState& st, Engine* engine, UnitId self_id, UnitContext* ctx, uint32_t slot) {
  DmaCall& call = st.calls[slot];
  if (ctx != nullptr && ctx->op_log != nullptr) {
    call.first_op_seq = ctx->op_log->ReserveOp();
    for (size_t i = 1; i < call.cmds.size(); ++i) ctx->op_log->ReserveOp();
  }
  std::sort(st.outgoing_channels.begin(), st.outgoing_channels.end());
  for (const uint32_t channel : st.outgoing_channels) {
    std::shared_ptr<pb::HbmRequest>& req = st.outgoing[channel];
    ++call.pending;
    const UnitId unit = req->channel();
    engine->Send(self_id, SimTime(0), unit, std::shared_ptr<const pb::HbmRequest>(std::move(req)));
    req = nullptr;
  }
  st.outgoing_channels.clear();
  AHBM_CHECK(call.pending > 0) << "DMA unit " << self_id << ": a call without HBM channels";
}

// True while an earlier command with this id ends after `now`; prunes ended ones now and then.
bool InFlight(DmaActorState& st, uint64_t cmd_id, SimTime now) {
  if (st.in_flight.size() >= 256) {
    absl::erase_if(st.in_flight, [now](const auto& entry) { return entry.second <= now; });
  }
  auto it = st.in_flight.find(cmd_id);
  return it != st.in_flight.end() && it->second > now;
}

void OnCmd(DmaActorState& st, Engine* engine, UnitId self_id, UnitContext* ctx,
           const pb::DmaCmd& cmd) {
  const UnitId requester = engine->current_src();
  const uint64_t cmd_id = cmd.cmd_id();
  const SimTime now = engine->now();
  if (InFlight(st, cmd_id, now)) {
    SendError(engine, self_id, requester, cmd_id,
              absl::StrCat("DMA of pe ", st.model->pe(), ": cmd ", cmd_id,
                           " is already in flight on this DMA"));
    return;
  }
  DmaPlan* const plan = &st.plan;
  if (const absl::Status status = st.model->PlanInto(cmd, *plan); !status.ok()) {
    SendError(engine, self_id, requester, cmd_id, std::string(status.message()));
    return;
  }
  if (plan->kind == DmaKind::kTcmCopy) {
    const DmaTiming timing = st.model->Execute(*plan, now, {});
    SendCompletion(engine, self_id, requester, cmd_id, timing.start, timing.done);
    DmaCallCmd copy{.cmd_id = cmd_id,
                    .parent_cmd_id = cmd.parent_cmd_id(),
                    .kind = plan->kind,
                    .useful_bytes = plan->useful_bytes,
                    .charged_bytes = plan->charged_bytes,
                    .start = timing.start,
                    .end = timing.done};
    Record(ctx, st, self_id, copy, now, kNoOpSeq);
    return;
  }
  AHBM_CHECK(!plan->channels.empty()) << "HBM plan without channels, cmd " << cmd_id;
  const uint32_t slot = OpenCall(st, requester, now, /*batch=*/false, /*batch_id=*/0);
  AddToCall(st, slot, cmd, *plan);
  st.in_flight[cmd_id] = SimTime::Max();
  SendCall(st, engine, self_id, ctx, slot);
}

void OnBatch(DmaActorState& st, Engine* engine, UnitId self_id, UnitContext* ctx,
             const pb::DmaBatch& batch) {
  const SimTime now = engine->now();
  AHBM_CHECK(batch.cmds_size() > 0)
      << "DMA unit " << self_id << ": empty batch " << batch.batch_id();
  const uint32_t slot = OpenCall(st, engine->current_src(), now, /*batch=*/true, batch.batch_id());
  for (const pb::DmaCmd& cmd : batch.cmds()) {
    const uint64_t cmd_id = cmd.cmd_id();
    DmaPlan* const plan = &st.plan;
    const absl::Status status = st.model->PlanInto(cmd, *plan);
    AHBM_CHECK(status.ok()) << "DMA unit " << self_id << ": batch command refused: " << status;
    AHBM_CHECK(plan->kind == DmaKind::kHbmRead && !InFlight(st, cmd_id, now))
        << "DMA unit " << self_id << ": batch cmd " << cmd_id << " is not a new HBM read";
    AddToCall(st, slot, cmd, *plan);
    st.in_flight[cmd_id] = SimTime::Max();
  }
  SendCall(st, engine, self_id, ctx, slot);
}

// The last answer of call `slot` has arrived: the requester's Completion or DmaBatchDone, the
// records and stats.
void Finish(DmaActorState& st, Engine* engine, UnitId self_id, UnitContext* ctx, uint32_t slot) {
  DmaCall& call = st.calls[slot];
  for (const DmaCallCmd& c : call.cmds) st.in_flight[c.cmd_id] = c.end;
  if (!call.batch) {
    const DmaCallCmd& c = call.cmds.front();
    Record(ctx, st, self_id, c, call.issue, call.first_op_seq);
    SendCompletion(engine, self_id, call.requester, c.cmd_id, c.start, c.end);
  } else {
    std::shared_ptr<pb::DmaBatchDone> msg = BatchDonePool::Make();
    msg->set_batch_id(call.batch_id);
    for (const DmaCallCmd& c : call.cmds) {
      pb::Completion* done = msg->add_done();
      done->set_cmd_id(c.cmd_id);
      done->set_unit(self_id);
      done->set_start_ps(c.start.value());
      done->set_end_ps(c.end.value());
    }
    if (ctx != nullptr && ctx->op_log != nullptr) {
      // The op log lists a batch's commands by their last channel (stats need no order).
      std::stable_sort(
          call.cmds.begin(), call.cmds.end(),
          [](const DmaCallCmd& a, const DmaCallCmd& b) { return a.last_channel < b.last_channel; });
    }
    if (ctx != nullptr) {
      for (size_t i = 0; i < call.cmds.size(); ++i) {
        Record(ctx, st, self_id, call.cmds[i], call.issue,
               call.first_op_seq == kNoOpSeq ? kNoOpSeq : call.first_op_seq + i);
      }
    }
    engine->Send(self_id, SimTime(0), call.requester,
                 std::shared_ptr<const pb::DmaBatchDone>(std::move(msg)));
  }
  // A large batch's command list is freed, not kept in the slot for the next call.
  if (call.cmds.capacity() > 64) std::vector<DmaCallCmd>().swap(call.cmds);
  st.free_calls.push_back(slot);
}

void OnAnswer(DmaActorState& st, Engine* engine, UnitId self_id, UnitContext* ctx,
              const pb::HbmResponse& resp) {
  AHBM_CHECK(resp.request_id() < st.calls.size() && st.calls[resp.request_id()].pending > 0)
      << "DMA unit " << self_id << ": an answer to no call in flight (" << resp.request_id() << ")";
  const uint32_t slot = static_cast<uint32_t>(resp.request_id());
  DmaCall& call = st.calls[slot];
  AHBM_CHECK(resp.start_ps_size() == resp.part_cmd_size() &&
             resp.done_ps_size() == resp.part_cmd_size())
      << "DMA unit " << self_id << ": a malformed answer from channel " << resp.channel();
  for (int i = 0; i < resp.part_cmd_size(); ++i) {
    AHBM_CHECK(resp.part_cmd(i) < call.cmds.size())
        << "DMA unit " << self_id << ": channel " << resp.channel() << " answered for no command";
    DmaCallCmd& c = call.cmds[resp.part_cmd(i)];
    c.start = std::min(c.start, SimTime(resp.start_ps(i)));
    c.end = std::max(c.end, SimTime(resp.done_ps(i)) + c.extra);
    c.last_channel = std::max(c.last_channel, resp.channel());
  }
  if (--call.pending == 0) Finish(st, engine, self_id, ctx, slot);
}

// Data mode: a completed command's values (the scheduler's DmaData, just before its Completion).
void OnData(DmaActorState& st, UnitId self_id, UnitContext* ctx, const pb::DmaData& data) {
  AHBM_CHECK(ctx != nullptr && ctx->data != nullptr)
      << "DMA unit " << self_id << ": DmaData without a data plane (timing mode)";
  if (const absl::Status status = ctx->data->Apply(data.cmd()); !status.ok()) {
    // The command passed the scheduler's checks: the data plane refusing it is our bug.
    ctx->AddError(InvariantError(absl::StrCat(PeName(ctx->index, st.model->pe()), ": ", data.op(),
                                              " cmd ", data.cmd().cmd_id(), ": data: ",
                                              status.message())));
  }
}

}  // namespace

uint64_t SpanUnion::Add(uint64_t start, uint64_t end) {
  if (end <= start) return 0;
  // Merge every span that overlaps or touches [start, end): those from the first ending at or
  // after `start` up to the last starting at or before `end`.
  const auto first = std::lower_bound(spans_.begin(), spans_.end(), start,
                                      [](const Span& s, uint64_t t) { return s.end < t; });
  auto last = first;
  uint64_t covered = 0;
  Span merged{start, end};
  for (; last != spans_.end() && last->start <= end; ++last) {
    covered += std::min(last->end, end) - std::max(last->start, start);  // >= 0: they touch
    merged.start = std::min(merged.start, last->start);
    merged.end = std::max(merged.end, last->end);
  }
  if (first == last) {
    spans_.insert(first, merged);
  } else {
    *first = merged;
    spans_.erase(first + 1, last);
  }
  const uint64_t added = (end - start) - covered;
  total_ += added;
  return added;
}

caf::behavior DmaBehavior(DmaActor* self, Engine* engine, UnitId self_id, const pb::Chip* chip,
                          uint32_t pe, UnitContext* ctx) {
  self->state.model.emplace(*chip, pe);
  const topology::ChipIndex index(*chip);
  self->state.first_channel = index.HbmChannelUnit(index.PeOf(pe).cube_id(), /*channel=*/0).value();
  self->state.outgoing.resize(index.channels_per_cube());
  // The handlers are tried in order (unit_actor.h): the most frequent message first (a
  // channel's answer; a decode K or V tile spans 8 channels).
  return self->Handlers(
      [self, engine, self_id, ctx](const Msg<pb::HbmResponse>& resp) {
        OnAnswer(self->state, engine, self_id, ctx, *resp);
      },
      [self, engine, self_id, ctx](const Msg<pb::DmaBatch>& batch) {
        OnBatch(self->state, engine, self_id, ctx, *batch);
      },
      [self, engine, self_id, ctx](const Msg<pb::DmaCmd>& cmd) {
        OnCmd(self->state, engine, self_id, ctx, *cmd);
      },
      [self, self_id, ctx](const Msg<pb::DmaData>& data) {
        OnData(self->state, self_id, ctx, *data);
      });
}

void StartDmaActor(Engine& engine, UnitId id, std::string name, const pb::Chip& chip, uint32_t pe) {
  engine.Register(id, std::move(name),
                  engine.system().spawn(DmaBehavior, &engine, id, &chip, pe,
                                        static_cast<UnitContext*>(nullptr)));
}

void StartDmaActor(UnitContext& ctx, uint32_t pe) {
  const UnitId id = ctx.index.PeUnit(topology::UnitKind::kDma, ctx.index.PeOf(pe)).value();
  ctx.engine->Register(
      id, ctx.engine->system().spawn(DmaBehavior, ctx.engine, id, &ctx.chip, pe, &ctx));
}

}  // namespace ahbm::sim
