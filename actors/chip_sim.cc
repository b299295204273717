#include "actors/chip_sim.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/text_escape.h"
#include "actors/models/hbm_bank_model.h"
#include "actors/observe/report.h"
#include "actors/units/dma_actor.h"
#include "actors/units/engine_unit_actor.h"
#include "actors/units/hbm_channel_actor.h"
#include "actors/units/ipcq_actor.h"
#include "actors/units/noc_router_actor.h"
#include "actors/units/ucie_actor.h"
#include "actors/units/pe_scheduler.h"
#include "base/check.h"
#include "base/errors.h"

namespace ahbm::sim {

using topology::UnitKind;

namespace {

// Gives every unit of an island's CUBEs that island (see ChipSimOptions::islands); the UCIe
// units and the routers of CUBEs not built belong to none.
absl::Status SetIslands(const std::vector<std::vector<uint32_t>>& islands,
                        const std::set<uint32_t>& built, const topology::ChipIndex& index,
                        bool message_trace, Engine& engine) {
  if (islands.size() < 2) return absl::OkStatus();
  if (message_trace) {
    return absl::InvalidArgumentError(
        "islands: not with a message trace (it records the one heap's delivery order)");
  }
  std::vector<uint32_t> island_of_cube(index.num_cubes(), Engine::kNoIsland);
  size_t covered = 0;
  for (uint32_t i = 0; i < islands.size(); ++i) {
    for (uint32_t cube : islands[i]) {
      if (!built.contains(cube) || island_of_cube[cube] != Engine::kNoIsland) {
        return absl::InvalidArgumentError(absl::StrCat(
            "islands: CUBE ", cube, " is not built or is in two islands"));
      }
      island_of_cube[cube] = i;
      ++covered;
    }
  }
  if (covered != built.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("islands: cover ", covered, " of the ", built.size(), " CUBEs built"));
  }
  std::vector<uint32_t> island_of_unit(index.num_units(), Engine::kNoIsland);
  for (uint32_t id = 0; id < index.num_units(); ++id) {
    const int64_t cube = index.GlobalCubeOfUnit(topology::UnitId(id));
    if (cube >= 0) island_of_unit[id] = island_of_cube[cube];
  }
  engine.SetIslands(std::move(island_of_unit));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChipSim>> ChipSim::Create(const pb::Chip& chip,
                                                         ChipSimOptions options) {
  std::unique_ptr<ChipSim> sim(new ChipSim());
  const std::string profile = options.issue_cost_profile.empty()
                                  ? chip.sip().cube().pe().default_issue_cost_profile()
                                  : options.issue_cost_profile;
  if (FindIssueCostProfile(chip, profile) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("issue_cost_profile: the chip has no profile named '",
                     PrintableAscii(profile), "'"));
  }
  // Units are named by the chip index, and only when a diagnostic prints one.
  sim->engine_ = std::make_unique<Engine>(
      [index = topology::ChipIndex(chip)](UnitId id) { return index.Name(topology::UnitId(id)); });
  sim->op_log_ = std::make_unique<observe::OpLog>(options.op_log_stream, options.keep_op_log);
  sim->ctx_ = std::make_unique<UnitContext>(sim->engine_.get(), chip);
  UnitContext& ctx = *sim->ctx_;
  sim->hbm_models_ = std::make_unique<HbmModelContext>(options.hbm_call_memo);
  ctx.hbm_models = sim->hbm_models_.get();
  // No record is built when none is kept or streamed: every emitter skips a null op log, and
  // the records (and the unit-name strings they carry) were ~1 M allocations per full-chip run.
  // op_log() still holds the header.
  ctx.op_log = options.keep_op_log || options.op_log_stream != nullptr ? sim->op_log_.get()
                                                                       : nullptr;
  ctx.per_tile_events = options.per_tile_events;
  ctx.reply_ahead = options.reply_ahead;
  ctx.per_tile_detail = options.per_tile_detail;
  ctx.issue_cost_profile = profile;

  pb::TraceHeader header;
  header.set_schema_version(observe::kTraceSchemaVersion);
  header.set_topology_name(chip.name());
  header.set_topology_digest(observe::MessageDigest(chip));
  header.set_issue_cost_profile(profile);
  header.set_per_tile_detail(options.per_tile_detail);
  if (options.record_calls) {
    if (ctx.op_log == nullptr) {
      return absl::InvalidArgumentError("record_calls: needs an op log (kept or streamed)");
    }
    *header.mutable_chip() = chip;
    *header.mutable_workload() = options.workload;
    header.set_workload_digest(observe::MessageDigest(options.workload));
    ctx.record_calls = true;
  }
  // A trace lists the CUBEs built; so does any op log of a one-group run (what it observes).
  if (options.record_calls || !options.mirrors.empty()) {
    for (uint32_t c : options.cubes) header.add_cubes(c);
  }
  sim->op_log_->SetHeader(std::move(header));

  const uint32_t num_cubes = ctx.index.num_cubes();
  if (options.cubes.empty()) {
    for (uint32_t c = 0; c < num_cubes; ++c) sim->cubes_.insert(c);
  }
  for (uint32_t c : options.cubes) {
    if (c >= num_cubes) {
      return absl::InvalidArgumentError(
          absl::StrCat("cubes: CUBE ", c, " is outside the chip's ", num_cubes, " CUBEs"));
    }
    sim->cubes_.insert(c);
  }
  RETURN_IF_ERROR(SetIslands(options.islands, sim->cubes_, ctx.index,
                             options.message_trace_stream != nullptr, *sim->engine_));
  // Islands deliver island by island: the op log puts its records back in the single heap's
  // order (OpLog "Event order"), so it is the same log with islands or without.
  if (ctx.op_log != nullptr && sim->engine_->islands() > 1) {
    sim->op_log_->BeginEventOrder([engine = sim->engine_.get()] { return engine->order_key(); });
  }
  if (options.message_trace_stream != nullptr) {
    sim->message_trace_ =
        std::make_unique<observe::MessageTraceWriter>(options.message_trace_stream);
    sim->engine_->SetMessageTracer(sim->message_trace_.get());
  }
  const uint32_t pes = ctx.index.pes_per_cube();
  for (uint32_t cube : sim->cubes_) {
    for (uint32_t p = 0; p < pes; ++p) {
      const uint32_t pe = cube * pes + p;
      StartPeSchedulerActor(ctx, pe);
      StartDmaActor(ctx, pe);
      StartEngineUnitActor(ctx, UnitKind::kGemm, pe);
      StartEngineUnitActor(ctx, UnitKind::kMath, pe);
    }
    for (uint32_t ch = 0; ch < ctx.index.channels_per_cube(); ++ch) {
      StartHbmChannelActor(ctx, cube, ch);
    }
  }
  // PE-to-PE queues towards existing neighbours, NOC routers, UCIe units.
  const topology::Mesh& pe_mesh = ctx.index.pe_mesh();
  for (uint32_t cube : sim->cubes_) {
    for (uint32_t p = 0; p < pes; ++p) {
      const uint32_t pe = cube * pes + p;
      for (topology::Dir dir : topology::kAllDirs) {
        if (!pe_mesh.Neighbour(p, dir)) continue;
        sim->ipcqs_.emplace(ctx.index.IpcqUnit(ctx.index.PeOf(pe), dir).value(),
                            StartIpcqActor(*sim->engine_, chip, pe, dir).address());
      }
    }
  }
  // Every router and UCIe unit: messages between built CUBEs cross the others.
  sim->network_ = std::make_unique<LinkNetworkModel>(chip);
  for (uint32_t cube = 0; cube < num_cubes; ++cube) {
    const topology::CubeId id = ctx.index.CubeOf(cube);
    const caf::actor router = StartNocRouterActor(*sim->engine_, chip, id, sim->network_.get());
    sim->routers_.emplace_back(ctx.index.NocRouterUnit(id).value(), router.address());
  }
  for (uint32_t sip = 0; sip < ctx.index.sips(); ++sip) {
    const caf::actor ucie = StartUcieActor(*sim->engine_, chip, sip, sim->network_.get());
    sim->ucies_.emplace_back(ctx.index.UcieUnit(sip).value(), ucie.address());
  }
  sim->options_ = std::move(options);
  return sim;
}

std::map<UnitKind, uint32_t> ChipSim::ActorCounts() const {
  std::map<UnitKind, uint32_t> counts;
  for (UnitId id : engine_->RegisteredUnits()) ++counts[ctx_->index.KindOf(topology::UnitId(id))];
  return counts;
}

ChipSim::~ChipSim() {
  if (engine_) engine_->Shutdown();
}

absl::Status ChipSim::SetProgram(uint32_t pe, CpuProgram program) {
  RETURN_IF_ERROR(ClaimCpu(pe));
  streams_.push_back(std::make_unique<CommandStream>(*ctx_, pe, std::move(program)));
  streams_.back()->Start();
  return absl::OkStatus();
}

absl::Status ChipSim::ClaimCpu(uint32_t pe) {
  if (ran_) return absl::FailedPreconditionError("SetProgram after Run");
  const uint32_t cube = pe / ctx_->index.pes_per_cube();
  if (pe >= ctx_->index.num_pes() || !cubes_.contains(cube)) {
    return absl::InvalidArgumentError(absl::StrCat("pe ", pe, " is not in a simulated CUBE"));
  }
  if (!programmed_.insert(pe).second) {
    return absl::InvalidArgumentError(absl::StrCat("pe ", pe, " already has a program"));
  }
  return absl::OkStatus();
}

absl::Status ChipSim::Run() {
  AHBM_CHECK(!ran_) << "ChipSim::Run twice";
  ran_ = true;
  engine_->Run();
  if (op_log_->in_event_order()) op_log_->EndEventOrder();
  latency_ = engine_->now();
  if (const absl::Status* first = ctx_->FirstError()) return *first;
  if (!ctx_->cpu_waiting.empty()) {
    std::vector<std::string> lines;
    for (const auto& [pe, what] : ctx_->cpu_waiting) {
      lines.push_back(absl::StrCat(ctx_->index.Name(ctx_->index.PeUnit(UnitKind::kPeCpu,
                                                                       ctx_->index.PeOf(pe))),
                                   " waits on ", what));
    }
    return DeadlockError(absl::StrCat("deadlock: no event left; ", absl::StrJoin(lines, "; ")));
  }
  return absl::OkStatus();
}

void ChipSim::MirrorUnits(const topology::ChipIndex& index,
                          google::protobuf::RepeatedPtrField<pb::UnitStats>* units) const {
  std::map<int64_t, uint32_t> position;  // built CUBE -> its place in options_.cubes
  for (uint32_t i = 0; i < options_.cubes.size(); ++i) position[options_.cubes[i]] = i;
  std::vector<pb::UnitStats> all(units->begin(), units->end());
  for (const pb::UnitStats& s : *units) {
    const int64_t cube = index.GlobalCubeOfUnit(topology::UnitId(s.unit()));
    AHBM_CHECK(cube >= 0) << s.unit_name() << " was used in a one-group run (nothing may cross "
                             "UCIe there)";
    for (const std::vector<uint32_t>& twins : options_.mirrors) {
      pb::UnitStats& copy = all.emplace_back(s);
      const topology::UnitId twin = index.UnitInCube(topology::UnitId(s.unit()), twins.at(position.at(cube)));
      copy.set_unit(twin.value());
      copy.set_unit_name(index.Name(twin));
    }
  }
  std::sort(all.begin(), all.end(), [](const pb::UnitStats& a, const pb::UnitStats& b) {
    return a.unit() < b.unit();
  });
  units->Clear();
  for (pb::UnitStats& s : all) *units->Add() = std::move(s);
}

pb::Report ChipSim::BuildReport(uint64_t comm_critical_path_ps) const {
  const UnitContext& ctx = *ctx_;
  pb::Report report;
  report.set_topology_name(ctx.chip.name());
  report.set_workload_summary(options_.workload_summary);
  report.set_issue_cost_profile(ctx.issue_cost_profile);
  report.set_hbm_model(HbmModelName(ctx.chip.sip().cube().hbm_channel()));
  report.set_latency_ps(latency_.value());
  report.set_events(engine_->events_processed());
  AHBM_CHECK(!engine_->shut_down()) << "BuildReport after the engine's Shutdown: the link units "
                                       "whose counters it reads are gone";
  // Link units keep their own counters; they replace the board's (IPCQ: busy = link
  // serialisation time; NOC router, UCIe: the time at least one link leaving the unit was busy).
  std::map<UnitId, pb::UnitStats> links;
  const auto link = [&](UnitId id) -> pb::UnitStats& { return links[id] = ctx.stats.Get(id); };
  for (const auto& [id, addr] : ipcqs_) {
    const IpcqActorState& st = IpcqStateOf(caf::actor_cast<caf::actor>(addr));
    if (st.sent_messages == 0) continue;
    pb::UnitStats& s = link(id);
    s.set_ops(st.sent_messages);
    s.set_bytes_written(st.stats().sent_bytes.value());
    s.set_busy_ps(st.stats().link_busy.value());
  }
  for (const auto& [id, addr] : routers_) {
    const NocRouterActorState& router = NocRouterStateOf(caf::actor_cast<caf::actor>(addr));
    const NocRouterStats& st = router.stats;
    if (st.injected_messages + st.forwarded_messages + st.delivered_messages == 0) continue;
    pb::UnitStats& s = link(id);
    s.set_ops(st.forwarded_messages);
    s.set_bytes_written(st.forwarded_bytes);
    s.set_bytes_read(st.delivered_bytes);
    s.set_busy_ps(network_->NocRouterBusy(router.cube).value());
  }
  for (const auto& [id, addr] : ucies_) {
    const UcieActorState& ucie = UcieStateOf(caf::actor_cast<caf::actor>(addr));
    const UcieStats& st = ucie.stats;
    if (st.forwarded_messages == 0) continue;
    pb::UnitStats& s = link(id);
    s.set_ops(st.forwarded_messages);
    s.set_bytes_written(st.forwarded_bytes);
    s.set_busy_ps(network_->UcieBusy(ucie.sip).value());
  }
  ctx.stats.AppendUsed(latency_, links, report.mutable_units());
  if (!options_.mirrors.empty()) MirrorUnits(ctx.index, report.mutable_units());

  const pb::Cube& cube = ctx.chip.sip().cube();
  const double channel_bytes_per_ps =
      static_cast<double>(cube.hbm_channel().bytes_per_cycle()) * cube.hbm_channel().clock_mhz() /
      1e6;
  const double peak_flops_per_ps = 2.0 * cube.pe().gemm().array_rows() *
                                   cube.pe().gemm().array_cols() * cube.pe().clock_mhz() / 1e6;
  std::vector<observe::PeResourceUse> pes;
  std::vector<const pb::UnitStats*> by_unit(ctx.index.num_units(), nullptr);
  for (const pb::UnitStats& s : report.units()) by_unit[s.unit()] = &s;
  const auto stat = [&](UnitKind kind, uint32_t pe) {
    return by_unit[ctx.index.PeUnit(kind, ctx.index.PeOf(pe)).value()];
  };
  for (uint32_t pe = 0; pe < ctx.index.num_pes(); ++pe) {
    const pb::UnitStats* cpu = stat(UnitKind::kPeCpu, pe);
    const pb::UnitStats* dma = stat(UnitKind::kDma, pe);
    const pb::UnitStats* gemm = stat(UnitKind::kGemm, pe);
    const pb::UnitStats* math = stat(UnitKind::kMath, pe);
    if (!cpu && !dma && !gemm && !math) continue;
    observe::PeResourceUse use;
    use.pe = pe;
    const std::string cpu_name =
        ctx.index.Name(ctx.index.PeUnit(UnitKind::kPeCpu, ctx.index.PeOf(pe)));
    use.pe_name = cpu_name.substr(0, cpu_name.rfind('.'));
    // The PE's channels (DmaModel's address map: its region), whoever asked: another PE's
    // remote reads load them too, and chunk waste occupies them like useful bytes.
    const uint32_t per_pe = ctx.index.channels_per_pe();
    const topology::PeId pe_id = ctx.index.PeOf(pe);
    for (uint32_t ch = pe_id.pe * per_pe; ch < (pe_id.pe + 1) * per_pe; ++ch) {
      const pb::UnitStats* channel = by_unit[ctx.index.HbmChannelUnit(pe_id.cube_id(), ch).value()];
      if (channel != nullptr) use.hbm_bytes += channel->bytes_read() + channel->bytes_written();
    }
    use.hbm_bytes_per_ps = channel_bytes_per_ps * ctx.index.channels_per_pe();
    use.gemm_tile_plan_ps = gemm ? gemm->work_ps() : 0;
    use.gemm_flops = gemm ? gemm->flops() : 0;
    use.gemm_peak_flops_per_ps = peak_flops_per_ps;
    use.math_ps = math ? math->busy_ps() : 0;
    use.cpu_issue_ps = cpu ? cpu->busy_ps() : 0;
    pes.push_back(std::move(use));
  }
  *report.mutable_roofline() = observe::ComputeRoofline(pes, comm_critical_path_ps);
  report.set_roofline_ratio(observe::RooflineRatio(latency_.value(), report.roofline().bound_ps()));
  return report;
}

}  // namespace ahbm::sim
