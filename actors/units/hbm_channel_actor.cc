#include "actors/units/hbm_channel_actor.h"

#include <memory>
#include <utility>

#include "actors/pb_message.h"
#include "actors/time.h"
#include "proto/commands.pb.h"

namespace ahbm::sim {

caf::behavior HbmChannelBehavior(HbmChannelActor* self, Engine* engine, UnitId self_id,
                                 const pb::HbmChannel* config, StatsBoard* stats) {
  self->state.model.emplace(*config);
  return {[self, engine, self_id, stats](const std::shared_ptr<const pb::HbmRequest>& req) {
    const HbmOp op = req->write() ? HbmOp::kWrite : HbmOp::kRead;
    const SimTime now = engine->now();
    HbmChannelModel& model = *self->state.model;
    pb::UnitStats* s = stats != nullptr ? &stats->At(self_id) : nullptr;  // once per request
    const auto serve = [&](uint64_t bytes) {
      const HbmGrant grant = model.Access(now, Bytes(bytes), op);
      if (s != nullptr) {
        s->set_ops(s->ops() + 1);
        s->set_busy_ps(s->busy_ps() + (grant.free_at - grant.start).value());
        if (req->write()) {
          s->set_bytes_written(s->bytes_written() + bytes);
        } else {
          s->set_bytes_read(s->bytes_read() + bytes);
        }
      }
      return grant;
    };
    auto resp = std::make_shared<pb::HbmResponse>();
    resp->set_request_id(req->request_id());
    resp->set_bytes(req->bytes());
    resp->set_channel(self_id);
    if (req->parts_size() == 0) {
      const HbmGrant grant = serve(req->bytes());
      resp->set_start_ps(grant.start.value());
      resp->set_done_ps(grant.done.value());
    } else {
      // A batch: its parts back to back, in order, as separate requests would have been.
      for (const pb::HbmPart& part : req->parts()) {
        const HbmGrant grant = serve(part.bytes());
        pb::HbmPartGrant* g = resp->add_parts();
        g->set_request_id(part.request_id());
        g->set_start_ps(grant.start.value());
        g->set_done_ps(grant.done.value());
      }
    }
    engine->Send(self_id, SimTime(0), engine->current_src(),
                 std::shared_ptr<const pb::HbmResponse>(std::move(resp)));
  }};
}

void StartHbmChannelActor(Engine& engine, UnitId id, std::string name,
                          const pb::HbmChannel& config) {
  engine.Register(id, std::move(name),
                  engine.system().spawn(HbmChannelBehavior, &engine, id, &config,
                                        static_cast<StatsBoard*>(nullptr)));
}

void StartHbmChannelActor(UnitContext& ctx, uint32_t cube, uint32_t channel) {
  const UnitId id = ctx.index.HbmChannelUnit(ctx.index.CubeOf(cube), channel).value();
  ctx.engine->Register(id, ctx.engine->system().spawn(HbmChannelBehavior, ctx.engine, id,
                                                      &ctx.chip.sip().cube().hbm_channel(),
                                                      &ctx.stats));
}

}  // namespace ahbm::sim
