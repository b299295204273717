#include "actors/units/hbm_channel_actor.h"

#include <memory>
#include <span>
#include <utility>

#include "actors/message_pool.h"
#include "actors/msg.h"
#include "base/check.h"

namespace ahbm::sim {

HbmChannelServer::HbmChannelServer(UnitId unit, const pb::HbmChannel& config, StatsBoard* stats,
                                   HbmModelContext& context)
    : unit_(unit),
      model_(MakeHbmTimingModel(config, context)),
      needs_addresses_(HbmModelNeedsAddresses(config)),
      stats_board_(stats) {}

HbmGrant HbmChannelServer::Serve(const HbmAccess& access) {
  AHBM_CHECK(!needs_addresses_ || !access.chunk_addrs.empty())
      << "HBM channel " << unit_ << ": its timing model needs the chunks' addresses";
  const HbmService s = model_->Serve(access);
  if (stats_board_ != nullptr) {
    if (stats_ == nullptr) stats_ = &stats_board_->At(unit_);
    stats_->set_ops(stats_->ops() + 1);
    stats_->set_busy_ps(stats_->busy_ps() + s.busy.value());
    if (access.op == HbmOp::kWrite) {
      stats_->set_bytes_written(stats_->bytes_written() + access.bytes.value());
    } else {
      stats_->set_bytes_read(stats_->bytes_read() + access.bytes.value());
    }
  }
  return s.grant;
}

namespace {

// The answer pool keeps each message's parts (and their capacity) across reuse, up to a size
// (a large batch's answer is freed, not kept).
struct KeepSmallResponse {
  bool operator()(const pb::HbmResponse& r) const { return r.part_cmd().Capacity() <= 64; }
};
// As many as a full chip's channels answer at one instant (see dma_actor.cc's RequestPool).
using ResponsePool = MessagePool<pb::HbmResponse, ClearMessage<pb::HbmResponse>,
                                 PoolAllocator<pb::HbmResponse>, KeepSmallResponse, 4096>;

void ServeRequest(HbmChannelState& st, Engine* engine, const pb::HbmRequest& req) {
  HbmChannelServer& server = *st.server;
  const HbmOp op = req.write() ? HbmOp::kWrite : HbmOp::kRead;
  const SimTime now = engine->now();
  const int parts = req.part_cmd_size();
  AHBM_CHECK(req.part_bytes_size() == parts && req.part_chunks_size() == parts)
      << "HBM channel " << server.unit() << ": a malformed request (parallel part arrays differ)";
  std::shared_ptr<pb::HbmResponse> resp = ResponsePool::Make();
  resp->set_request_id(req.request_id());
  resp->set_channel(server.unit());
  resp->mutable_part_cmd()->CopyFrom(req.part_cmd());
  resp->mutable_start_ps()->Reserve(parts);
  resp->mutable_done_ps()->Reserve(parts);
  const std::span<const uint64_t> addrs(req.chunk_addrs().data(),
                                        static_cast<size_t>(req.chunk_addrs_size()));
  size_t next_addr = 0;
  for (int i = 0; i < parts; ++i) {
    const uint32_t chunks = req.part_chunks(i);
    AHBM_CHECK(chunks > 0) << "HBM channel " << server.unit() << ": a part without chunks";
    std::span<const uint64_t> chunk_addrs;
    if (!addrs.empty()) {
      AHBM_CHECK(next_addr + chunks <= addrs.size())
          << "HBM channel " << server.unit() << ": fewer chunk addresses than chunks";
      chunk_addrs = addrs.subspan(next_addr, chunks);
      next_addr += chunks;
    }
    const HbmGrant grant = server.Serve(
        {now, Bytes(req.part_bytes(i)), op, chunk_addrs, Bytes(req.part_bytes(i) / chunks)});
    resp->add_start_ps(grant.start.value());
    resp->add_done_ps(grant.done.value());
  }
  AHBM_CHECK(next_addr == addrs.size())
      << "HBM channel " << server.unit() << ": more chunk addresses than chunks";
  engine->Send(server.unit(), SimTime(0), engine->current_src(),
               std::shared_ptr<const pb::HbmResponse>(std::move(resp)));
}

}  // namespace

caf::behavior HbmChannelBehavior(HbmChannelActor* self, Engine* engine, UnitId id,
                                 const pb::HbmChannel* config, StatsBoard* stats,
                                 HbmModelContext* context) {
  self->state.server.emplace(id, *config, stats, *context);
  return self->Handlers([self, engine](const Msg<pb::HbmRequest>& req) {
    ServeRequest(self->state, engine, *req);
  });
}

void StartHbmChannelActor(Engine& engine, HbmModelContext& context, UnitId id, std::string name,
                          const pb::HbmChannel& config) {
  engine.Register(id, std::move(name),
                  engine.system().spawn(HbmChannelBehavior, &engine, id, &config,
                                        static_cast<StatsBoard*>(nullptr), &context));
}

void StartHbmChannelActor(UnitContext& ctx, uint32_t cube, uint32_t channel) {
  AHBM_CHECK(ctx.hbm_models != nullptr) << "UnitContext without an HBM model context";
  const UnitId id = ctx.index.HbmChannelUnit(ctx.index.CubeOf(cube), channel).value();
  ctx.engine->Register(id, ctx.engine->system().spawn(HbmChannelBehavior, ctx.engine, id,
                                                      &ctx.chip.sip().cube().hbm_channel(),
                                                      &ctx.stats, ctx.hbm_models));
}

}  // namespace ahbm::sim
