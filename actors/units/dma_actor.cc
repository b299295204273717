#include "actors/units/dma_actor.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "actors/pb_message.h"
#include "base/check.h"
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
void Record(UnitContext* ctx, DmaActorState& st, UnitId self_id, uint64_t cmd_id, DmaKind kind,
            uint64_t bytes, SimTime issue, SimTime start, SimTime end) {
  if (ctx == nullptr) return;
  pb::UnitStats& s = ctx->stats.At(self_id);
  s.set_ops(s.ops() + 1);
  s.set_busy_ps(s.busy_ps() + st.busy.Add(start.value(), end.value()));
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
  rec.set_cmd_id(cmd_id);
  rec.set_issue_ps(issue.value());
  rec.set_start_ps(start.value());
  rec.set_end_ps(end.value());
  if (write) {
    rec.set_bytes_written(bytes);
  } else {
    rec.set_bytes_read(bytes);
  }
  ctx->op_log->AddOp(std::move(rec));
}

// A planned HBM command waiting for its channels' grants.
DmaActorState::Pending& StartPending(DmaActorState& st, uint64_t cmd_id, UnitId requester,
                                     const DmaPlan& plan, SimTime now, uint64_t batch) {
  DmaActorState::Pending& p = st.pending[cmd_id];
  p.requester = requester;
  p.extra = st.model->ExtraLatency(plan);
  p.end = now;
  p.issue = now;
  p.kind = plan.kind;
  p.bytes = plan.useful_bytes.value();
  p.batch = batch;
  return p;
}

// One grant of command `cmd_id` from `channel`: true when the command has all its grants.
bool Grant(DmaActorState& st, UnitId self_id, uint64_t cmd_id, UnitId channel, SimTime start,
           SimTime done) {
  auto it = st.pending.find(cmd_id);
  AHBM_CHECK(it != st.pending.end())
      << "DMA unit " << self_id << ": HbmResponse for cmd " << cmd_id << ", which is not in flight";
  DmaActorState::Pending& p = it->second;
  AHBM_CHECK(p.outstanding.erase(channel) == 1)
      << "DMA unit " << self_id << ": unexpected HbmResponse from channel unit " << channel
      << " for cmd " << cmd_id;
  p.start = std::min(p.start, start);
  p.end = std::max(p.end, done + p.extra);
  return p.outstanding.empty();
}

}  // namespace

uint64_t SpanUnion::Add(uint64_t start, uint64_t end) {
  if (end <= start) return 0;
  uint64_t covered = 0;
  // Merge every span that overlaps or touches [start, end).
  auto it = spans_.upper_bound(start);
  if (it != spans_.begin() && std::prev(it)->second >= start) --it;
  uint64_t lo = start, hi = end;
  while (it != spans_.end() && it->first <= end) {
    covered += std::min(it->second, end) - std::max(it->first, start);  // >= 0: they touch
    lo = std::min(lo, it->first);
    hi = std::max(hi, it->second);
    it = spans_.erase(it);
  }
  spans_[lo] = hi;
  const uint64_t added = (end - start) - covered;
  total_ += added;
  return added;
}

caf::behavior DmaBehavior(DmaActor* self, Engine* engine, UnitId self_id, const pb::Chip* chip,
                          uint32_t pe, UnitContext* ctx) {
  self->state.model.emplace(*chip, pe);
  self->state.index.emplace(*chip);
  return {
      [self, engine, self_id, ctx](const std::shared_ptr<const pb::DmaCmd>& cmd) {
        DmaActorState& st = self->state;
        const UnitId requester = engine->current_src();
        const uint64_t cmd_id = cmd->cmd_id();
        if (st.pending.contains(cmd_id)) {
          SendError(engine, self_id, requester, cmd_id,
                    absl::StrCat("DMA of pe ", st.model->pe(), ": cmd ", cmd_id,
                                 " is already in flight on this DMA"));
          return;
        }
        absl::StatusOr<DmaPlan> plan = st.model->Plan(*cmd);
        if (!plan.ok()) {
          SendError(engine, self_id, requester, cmd_id, std::string(plan.status().message()));
          return;
        }
        if (plan->kind == DmaKind::kTcmCopy) {
          const DmaTiming timing = st.model->Execute(*plan, engine->now(), {});
          SendCompletion(engine, self_id, requester, cmd_id, timing.start, timing.done);
          Record(ctx, st, self_id, cmd_id, plan->kind, plan->useful_bytes.value(), engine->now(),
                 timing.start, timing.done);
          return;
        }
        AHBM_CHECK(!plan->channels.empty()) << "HBM plan without channels, cmd " << cmd_id;
        DmaActorState::Pending& p = StartPending(st, cmd_id, requester, *plan, engine->now(), 0);
        const bool write = plan->kind == DmaKind::kHbmWrite;
        for (const DmaChannelShare& share : plan->channels) {  // ascending channel order
          const UnitId channel = st.index->HbmChannelUnit(plan->cube, share.channel).value();
          p.outstanding.insert(channel);
          auto req = std::make_shared<pb::HbmRequest>();
          req->set_request_id(cmd_id);
          req->set_channel(channel);
          req->set_bytes(share.bytes.value());
          req->set_write(write);
          engine->Send(self_id, SimTime(0), channel,
                       std::shared_ptr<const pb::HbmRequest>(std::move(req)));
        }
      },
      [self, engine, self_id, ctx](const std::shared_ptr<const pb::HbmResponse>& resp) {
        DmaActorState& st = self->state;
        std::vector<uint64_t> finished;
        if (resp->parts_size() == 0) {
          if (Grant(st, self_id, resp->request_id(), resp->channel(), SimTime(resp->start_ps()),
                    SimTime(resp->done_ps()))) {
            finished.push_back(resp->request_id());
          }
        } else {
          for (const pb::HbmPartGrant& g : resp->parts()) {
            if (Grant(st, self_id, g.request_id(), resp->channel(), SimTime(g.start_ps()),
                      SimTime(g.done_ps()))) {
              finished.push_back(g.request_id());
            }
          }
        }
        for (uint64_t cmd_id : finished) {
          auto it = st.pending.find(cmd_id);
          DmaActorState::Pending& p = it->second;
          Record(ctx, st, self_id, cmd_id, p.kind, p.bytes, p.issue, p.start, p.end);
          if (p.batch == 0) {
            SendCompletion(engine, self_id, p.requester, cmd_id, p.start, p.end);
          } else {
            DmaActorState::Batch& b = st.batches.at(p.batch);
            pb::Completion& c = b.done[cmd_id];
            c.set_cmd_id(cmd_id);
            c.set_unit(self_id);
            c.set_start_ps(p.start.value());
            c.set_end_ps(p.end.value());
            if (b.done.size() == b.cmds.size()) {
              auto msg = std::make_shared<pb::DmaBatchDone>();
              msg->set_batch_id(p.batch);
              for (uint64_t id : b.cmds) *msg->add_done() = b.done.at(id);
              engine->Send(self_id, SimTime(0), b.requester,
                           std::shared_ptr<const pb::DmaBatchDone>(std::move(msg)));
              st.batches.erase(p.batch);
            }
          }
          st.pending.erase(it);
        }
      },
      [self, engine, self_id](const std::shared_ptr<const pb::DmaBatch>& batch) {
        DmaActorState& st = self->state;
        const UnitId requester = engine->current_src();
        AHBM_CHECK(batch->cmds_size() > 0 && !st.batches.contains(batch->batch_id()))
            << "DMA unit " << self_id << ": empty or repeated batch " << batch->batch_id();
        DmaActorState::Batch& b = st.batches[batch->batch_id()];
        b.requester = requester;
        // Per channel unit (ascending = channel order): the parts, in batch order.
        std::map<UnitId, pb::HbmRequest> requests;
        for (const pb::DmaCmd& cmd : batch->cmds()) {
          const uint64_t cmd_id = cmd.cmd_id();
          absl::StatusOr<DmaPlan> plan = st.model->Plan(cmd);
          AHBM_CHECK(plan.ok()) << "DMA unit " << self_id << ": batch command refused: "
                                << plan.status();
          AHBM_CHECK(plan->kind == DmaKind::kHbmRead && !st.pending.contains(cmd_id))
              << "DMA unit " << self_id << ": batch cmd " << cmd_id
              << " is not a new HBM read";
          b.cmds.push_back(cmd_id);
          DmaActorState::Pending& p =
              StartPending(st, cmd_id, requester, *plan, engine->now(), batch->batch_id());
          for (const DmaChannelShare& share : plan->channels) {
            const UnitId channel = st.index->HbmChannelUnit(plan->cube, share.channel).value();
            p.outstanding.insert(channel);
            pb::HbmRequest& req = requests[channel];
            req.set_channel(channel);
            req.set_bytes(req.bytes() + share.bytes.value());
            pb::HbmPart* part = req.add_parts();
            part->set_request_id(cmd_id);
            part->set_bytes(share.bytes.value());
          }
        }
        for (auto& [channel, req] : requests) {
          engine->Send(self_id, SimTime(0), channel,
                       std::shared_ptr<const pb::HbmRequest>(
                           std::make_shared<pb::HbmRequest>(std::move(req))));
        }
      },
  };
}

void StartDmaActor(Engine& engine, UnitId id, std::string name, const pb::Chip& chip,
                   uint32_t pe) {
  engine.Register(id, std::move(name),
                  engine.system().spawn(DmaBehavior, &engine, id, &chip, pe,
                                        static_cast<UnitContext*>(nullptr)));
}

void StartDmaActor(UnitContext& ctx, uint32_t pe) {
  const UnitId id = ctx.index.PeUnit(topology::UnitKind::kDma, ctx.index.PeOf(pe)).value();
  ctx.engine->Register(id, ctx.engine->system().spawn(DmaBehavior, ctx.engine, id, &ctx.chip, pe,
                                                      &ctx));
}

}  // namespace ahbm::sim
