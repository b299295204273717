#include "actors/units/dma_actor.h"

#include <algorithm>
#include <vector>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "actors/msg.h"
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
void Record(UnitContext* ctx, DmaActorState& st, UnitId self_id, const pb::DmaCmd& cmd,
            const DmaPlan& plan, SimTime issue, SimTime start, SimTime end) {
  if (ctx == nullptr) return;
  const DmaKind kind = plan.kind;
  const uint64_t bytes = plan.useful_bytes.value();
  pb::UnitStats& s = ctx->stats.At(self_id);
  s.set_ops(s.ops() + 1);
  if (kind != DmaKind::kTcmCopy) {
    s.set_hbm_useful_bytes(s.hbm_useful_bytes() + bytes);
    s.set_hbm_charged_bytes(s.hbm_charged_bytes() + plan.charged_bytes.value());
  }
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
  rec.set_cmd_id(cmd.cmd_id());
  rec.set_parent_cmd_id(cmd.parent_cmd_id());
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

// What the channels granted one HBM command.
struct Served {
  SimTime start = SimTime::Max();
  SimTime end;
  UnitId last_channel = 0;  // the highest channel unit id that served it
};

// Serves every channel share of `plan` at `now`, in ascending channel order (folded requests).
Served ServeShares(DmaActorState& st, const DmaPlan& plan, SimTime now) {
  const HbmOp op = plan.kind == DmaKind::kHbmWrite ? HbmOp::kWrite : HbmOp::kRead;
  const SimTime extra = st.model->ExtraLatency(plan);
  Served served;
  served.end = now;
  for (const DmaChannelShare& share : plan.channels) {
    HbmChannelServer*& server = st.cube_channels[share.channel];
    if (server == nullptr) {
      server = &st.channels->At(st.index->HbmChannelUnit(plan.cube, share.channel).value());
    }
    const HbmGrant grant = server->Serve(
        {now, share.bytes, op, share.chunk_addrs, Bytes(share.bytes.value() / share.chunks)});
    served.start = std::min(served.start, grant.start);
    served.end = std::max(served.end, grant.done + extra);
    served.last_channel = std::max(served.last_channel, server->unit());
  }
  return served;
}

// True while an earlier command with this id ends after `now`; prunes ended ones now and then.
bool InFlight(DmaActorState& st, uint64_t cmd_id, SimTime now) {
  if (st.in_flight.size() >= 256) {
    absl::erase_if(st.in_flight, [now](const auto& entry) { return entry.second <= now; });
  }
  auto it = st.in_flight.find(cmd_id);
  return it != st.in_flight.end() && it->second > now;
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
                          uint32_t pe, HbmChannelTable* channels, UnitContext* ctx) {
  AHBM_CHECK(channels != nullptr) << "DMA unit " << self_id << " without HBM channels";
  self->state.model.emplace(*chip, pe);
  self->state.index.emplace(*chip);
  self->state.channels = channels;
  self->state.cube_channels.assign(self->state.index->channels_per_cube(), nullptr);
  return {
      [self, engine, self_id, ctx](const Msg<pb::DmaCmd>& cmd) {
        DmaActorState& st = self->state;
        const UnitId requester = engine->current_src();
        const uint64_t cmd_id = cmd->cmd_id();
        const SimTime now = engine->now();
        if (InFlight(st, cmd_id, now)) {
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
          const DmaTiming timing = st.model->Execute(*plan, now, {});
          SendCompletion(engine, self_id, requester, cmd_id, timing.start, timing.done);
          Record(ctx, st, self_id, *cmd, *plan, now, timing.start, timing.done);
          return;
        }
        AHBM_CHECK(!plan->channels.empty()) << "HBM plan without channels, cmd " << cmd_id;
        const Served served = ServeShares(st, *plan, now);
        st.in_flight[cmd_id] = served.end;
        Record(ctx, st, self_id, *cmd, *plan, now, served.start, served.end);
        SendCompletion(engine, self_id, requester, cmd_id, served.start, served.end);
      },
      [self, engine, self_id, ctx](const Msg<pb::DmaBatch>& batch) {
        DmaActorState& st = self->state;
        const UnitId requester = engine->current_src();
        const SimTime now = engine->now();
        AHBM_CHECK(batch->cmds_size() > 0)
            << "DMA unit " << self_id << ": empty batch " << batch->batch_id();
        struct Done {
          const pb::DmaCmd* cmd;
          uint64_t cmd_id;
          DmaPlan plan;
          Served served;
        };
        std::vector<Done> done;
        done.reserve(batch->cmds_size());
        for (const pb::DmaCmd& cmd : batch->cmds()) {
          const uint64_t cmd_id = cmd.cmd_id();
          absl::StatusOr<DmaPlan> plan = st.model->Plan(cmd);
          AHBM_CHECK(plan.ok()) << "DMA unit " << self_id << ": batch command refused: "
                                << plan.status();
          AHBM_CHECK(plan->kind == DmaKind::kHbmRead && !InFlight(st, cmd_id, now))
              << "DMA unit " << self_id << ": batch cmd " << cmd_id
              << " is not a new HBM read";
          const Served served = ServeShares(st, *plan, now);
          done.push_back({&cmd, cmd_id, *std::move(plan), served});
          st.in_flight[cmd_id] = done.back().served.end;
        }
        auto msg = std::make_shared<pb::DmaBatchDone>();
        msg->set_batch_id(batch->batch_id());
        msg->mutable_done()->Reserve(batch->cmds_size());
        for (const Done& d : done) {
          pb::Completion* c = msg->add_done();
          c->set_cmd_id(d.cmd_id);
          c->set_unit(self_id);
          c->set_start_ps(d.served.start.value());
          c->set_end_ps(d.served.end.value());
        }
        if (ctx != nullptr) {
          std::stable_sort(done.begin(), done.end(), [](const Done& a, const Done& b) {
            return a.served.last_channel < b.served.last_channel;
          });
          for (const Done& d : done) {
            Record(ctx, st, self_id, *d.cmd, d.plan, now, d.served.start, d.served.end);
          }
        }
        engine->Send(self_id, SimTime(0), requester,
                     std::shared_ptr<const pb::DmaBatchDone>(std::move(msg)));
      },
  };
}

void StartDmaActor(Engine& engine, UnitId id, std::string name, const pb::Chip& chip,
                   uint32_t pe, HbmChannelTable& channels) {
  engine.Register(id, std::move(name),
                  engine.system().spawn(DmaBehavior, &engine, id, &chip, pe, &channels,
                                        static_cast<UnitContext*>(nullptr)));
}

void StartDmaActor(UnitContext& ctx, uint32_t pe) {
  const UnitId id = ctx.index.PeUnit(topology::UnitKind::kDma, ctx.index.PeOf(pe)).value();
  ctx.engine->Register(id, ctx.engine->system().spawn(DmaBehavior, ctx.engine, id, &ctx.chip, pe,
                                                      ctx.hbm_channels, &ctx));
}

}  // namespace ahbm::sim
