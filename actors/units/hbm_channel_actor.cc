#include "actors/units/hbm_channel_actor.h"

#include <memory>
#include <utility>

#include "actors/pb_message.h"
#include "base/check.h"

namespace ahbm::sim {

HbmChannelServer::HbmChannelServer(UnitId unit, const pb::HbmChannel& config, StatsBoard* stats,
                                   HbmCallMemo* memo)
    : unit_(unit), model_(config), memo_(memo), stats_board_(stats) {
  if (config.model() != pb::BANK) return;
  timing_ = BankTimingOf(config);
  bank_ = std::make_unique<HbmBankModel>(timing_);
  if (memo_ == nullptr) {
    own_memo_ = std::make_unique<HbmCallMemo>(HbmCallMemo::Mode::kOff);
    memo_ = own_memo_.get();
  }
  map_ = config.bank().address_map();
  path_cycles_ = config.first_byte_latency_cycles() - (timing_.t_rcd + timing_.t_cl + timing_.t_burst);
}

void HbmChannelServer::Count(SimTime busy, Bytes bytes, HbmOp op) {
  if (stats_board_ == nullptr) return;
  if (stats_ == nullptr) stats_ = &stats_board_->At(unit_);
  stats_->set_ops(stats_->ops() + 1);
  stats_->set_busy_ps(stats_->busy_ps() + busy.value());
  if (op == HbmOp::kWrite) {
    stats_->set_bytes_written(stats_->bytes_written() + bytes.value());
  } else {
    stats_->set_bytes_read(stats_->bytes_read() + bytes.value());
  }
}

HbmGrant HbmChannelServer::Serve(SimTime now, Bytes bytes, HbmOp op) {
  AHBM_CHECK(bank_ == nullptr) << "HBM channel " << unit_ << ": a BANK channel needs addresses";
  const HbmGrant grant = model_.Access(now, bytes, op);
  Count(grant.free_at - grant.start, bytes, op);
  return grant;
}

HbmGrant HbmChannelServer::ServeChunks(SimTime now, std::span<const uint64_t> addrs,
                                       Bytes chunk_bytes, HbmOp op) {
  AHBM_CHECK(bank_ != nullptr) << "HBM channel " << unit_ << ": chunk addresses on a FIFO channel";
  AHBM_CHECK(!addrs.empty() && chunk_bytes.value() % timing_.burst_bytes == 0)
      << "HBM channel " << unit_ << ": " << addrs.size() << " chunks of " << chunk_bytes;
  const ClockDomain& clock = model_.clock();
  const uint64_t arrival = clock.ToCyclesCeil(now).value();
  const uint64_t bursts_per_chunk = chunk_bytes.value() / timing_.burst_bytes;
  chunks_.clear();
  for (uint64_t addr : addrs) chunks_.push_back(addr / timing_.burst_bytes);
  const HbmCallResult call =
      memo_->Serve(*bank_, map_, arrival, chunks_, static_cast<uint32_t>(bursts_per_chunk),
                   op == HbmOp::kWrite);
  HbmGrant grant;
  grant.start = clock.ToTime(Cycles(call.first_col));
  grant.free_at = clock.ToTime(Cycles(call.last_col + timing_.t_burst));
  grant.done = clock.ToTime(Cycles(call.last_done + path_cycles_));
  Count(clock.ToTime(Cycles(addrs.size() * bursts_per_chunk * timing_.t_burst)),
        chunk_bytes * addrs.size(), op);
  return grant;
}

HbmChannelServer& HbmChannelTable::Add(UnitId unit, const pb::HbmChannel& config,
                                       StatsBoard* stats) {
  if (by_unit_.size() <= unit) by_unit_.resize(unit + 1);
  AHBM_CHECK(by_unit_[unit] == nullptr) << "HBM channel unit " << unit << " added twice";
  HbmCallMemo* memo = nullptr;
  if (config.model() == pb::BANK) {
    const std::string bytes = config.SerializeAsString();
    for (const auto& [config_bytes, m] : memos_) {
      if (config_bytes == bytes) memo = m.get();
    }
    if (memo == nullptr) {
      memos_.emplace_back(bytes, std::make_unique<HbmCallMemo>(memo_mode_));
      memo = memos_.back().second.get();
    }
  }
  by_unit_[unit] = std::make_unique<HbmChannelServer>(unit, config, stats, memo);
  return *by_unit_[unit];
}

HbmCallMemo::Stats HbmChannelTable::memo_stats() const {
  HbmCallMemo::Stats sum;
  for (const auto& [config_bytes, m] : memos_) {
    sum.calls += m->stats().calls;
    sum.hits += m->stats().hits;
    sum.stored += m->stats().stored;
    sum.flushes += m->stats().flushes;
  }
  return sum;
}

void HbmChannelTable::Missing(UnitId unit) {
  AHBM_CHECK(false) << "unit " << unit << " is not a simulated HBM channel";
  __builtin_unreachable();
}

caf::behavior HbmChannelBehavior(caf::event_based_actor*, Engine* engine,
                                 HbmChannelServer* server) {
  return {[engine, server](const std::shared_ptr<const pb::HbmRequest>& req) {
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
