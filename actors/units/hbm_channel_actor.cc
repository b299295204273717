#include "actors/units/hbm_channel_actor.h"

#include <memory>
#include <utility>

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

HbmChannelServer& HbmChannelTable::Add(UnitId unit, const pb::HbmChannel& config,
                                       StatsBoard* stats) {
  if (by_unit_.size() <= unit) by_unit_.resize(unit + 1);
  AHBM_CHECK(by_unit_[unit] == nullptr) << "HBM channel unit " << unit << " added twice";
  by_unit_[unit] = std::make_unique<HbmChannelServer>(unit, config, stats, context_);
  return *by_unit_[unit];
}

void HbmChannelTable::Missing(UnitId unit) {
  AHBM_CHECK(false) << "unit " << unit << " is not a simulated HBM channel";
  __builtin_unreachable();
}

caf::behavior HbmChannelBehavior(caf::event_based_actor*, Engine* engine,
                                 HbmChannelServer* server) {
  return {[engine, server](const Msg<pb::HbmRequest>& req) {
    const HbmOp op = req->write() ? HbmOp::kWrite : HbmOp::kRead;
    const SimTime now = engine->now();
    auto resp = std::make_shared<pb::HbmResponse>();
    resp->set_request_id(req->request_id());
    resp->set_bytes(req->bytes());
    resp->set_channel(server->unit());
    if (req->parts_size() == 0) {
      const HbmGrant grant = server->Serve(now, Bytes(req->bytes()), op);
      resp->set_start_ps(grant.start.value());
      resp->set_done_ps(grant.done.value());
    } else {
      for (const pb::HbmPart& part : req->parts()) {
        const HbmGrant grant = server->Serve(now, Bytes(part.bytes()), op);
        pb::HbmPartGrant* g = resp->add_parts();
        g->set_request_id(part.request_id());
        g->set_start_ps(grant.start.value());
        g->set_done_ps(grant.done.value());
      }
    }
    engine->Send(server->unit(), SimTime(0), engine->current_src(),
                 std::shared_ptr<const pb::HbmResponse>(std::move(resp)));
  }};
}

void StartHbmChannelActor(Engine& engine, HbmChannelTable& table, UnitId id, std::string name,
                          const pb::HbmChannel& config) {
  HbmChannelServer* server = &table.Add(id, config, /*stats=*/nullptr);
  engine.Register(id, std::move(name), engine.system().spawn(HbmChannelBehavior, &engine, server));
}

void AddHbmChannel(UnitContext& ctx, uint32_t cube, uint32_t channel) {
  AHBM_CHECK(ctx.hbm_channels != nullptr) << "UnitContext without an HBM channel table";
  const UnitId id = ctx.index.HbmChannelUnit(ctx.index.CubeOf(cube), channel).value();
  ctx.hbm_channels->Add(id, ctx.chip.sip().cube().hbm_channel(), &ctx.stats);
}

}  // namespace ahbm::sim
