// ChipSim: one simulation of a chip — the engine, every unit actor of the chosen CUBEs, the op
// log and the report (DESIGN §3, §5). This is how tests, benchmarks, the kernel runtime and
// every `ahbm` command drive the simulation core: give PE CPUs command programs, Run(),
// read the op log and the report.
//
// Contract:
// - Create() spawns, for every CUBE of `options.cubes` (all CUBEs when empty): each PE's
//   scheduler, DMA, GEMM and MATH units, its IPCQ queues towards existing mesh neighbours,
//   every HBM pseudo-channel of the CUBE (an actor the DMAs message); and the NOC router of
//   every CUBE and the UCIe unit of every SIP of the chip (messages between built CUBEs cross
//   the others). The NOC routers and UCIe
//   units share one LinkNetworkModel owned here. PE CPUs are spawned by
//   SetProgram (one program per PE, before Run).
// - The op log starts with a TraceHeader (schema 1, topology name and digest, issue-cost
//   profile, per-tile flag) and is also streamed to options.op_log_stream if given.
// - Run() delivers events until none is left. It fails with the first error in event order
//   (one line naming the PE, the command and the reason; its kind, base/errors.h, says whose
//   fault: UnitContext::errors), or with a DeadlockError "deadlock: ..." listing what each
//   unfinished PE CPU waits on.
// - latency() = the time of the last event; the report's per-unit stats come from the units'
//   counters (exact busy time), its roofline from those counters (DESIGN §2): per PE, HBM bytes
//   moved by its DMA / its channels' peak bandwidth, GEMM tile-plan time (fill/drain excluded:
//   it depends on the schedule) and FLOPs at peak, MATH busy time, CPU issue time.
#ifndef AHBMSIM_ACTORS_CHIP_SIM_H_
#define AHBMSIM_ACTORS_CHIP_SIM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/engine.h"
#include "actors/models/link_network_model.h"
#include "actors/units/hbm_channel_actor.h"
#include "caf/actor.hpp"
#include "caf/actor_addr.hpp"
#include "actors/observe/message_trace.h"
#include "actors/observe/op_log.h"
#include "actors/units/command_stream.h"
#include "actors/units/unit_context.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::sim {

struct ChipSimOptions {
  std::string issue_cost_profile;       // empty: the chip's default_issue_cost_profile
  bool per_tile_events = false;
  bool per_tile_detail = false;
  bool reply_ahead = true;  // UnitContext::reply_ahead (false: tests of the declared shortcut)
  std::ostream* op_log_stream = nullptr;  // also stream the op log here (length-delimited)
  bool keep_op_log = true;              // false: op() records are only streamed, not kept
                                        // (neither kept nor streamed: none is built)
  std::vector<uint32_t> cubes;          // global CUBE indices to build; empty = all
  // CUBE islands (Engine::SetIslands): disjoint sets of built CUBEs that exchange no message,
  // together all of them; their units are simulated one island after the other. Fewer than two
  // sets: one island. With an op log, its records are put back in the single heap's order
  // (held until the run ends: OpLog "Event order"); not with a message trace.
  std::vector<std::vector<uint32_t>> islands;
  // One-group runs (kernels/launch/launch.h LaunchOptions::one_group): CUBE sets not built that
  // do exactly what the built `cubes` do, mirrors[k][i] the twin of cubes[i]. The report lists
  // each built CUBE unit's stats again under each twin's unit (ChipIndex::UnitInCube), so its
  // per-unit stats and roofline are the full chip's; latency and events stay the run's.
  std::vector<std::vector<uint32_t>> mirrors;
  std::string workload_summary;         // for the report
  // A recorded trace (`ahbm run --trace`): the header carries the chip, `workload`, the CUBEs
  // and their digests, and the kernel runtime adds Instance and Call records (replay input).
  bool record_calls = false;
  pb::Workload workload;
  // Every delivered message as a pb::Envelope, length-delimited (observe/message_trace.h).
  // Not with islands (the file is in the one heap's delivery order).
  std::ostream* message_trace_stream = nullptr;
  // BANK HBM channels: the call memo (hbm_call_memo.h; the same results, faster), off, or
  // checked against the simulation at every hit.
  HbmCallMemo::Mode hbm_call_memo = HbmCallMemo::Mode::kOn;
};

class ChipSim {
 public:
  // `chip` must have passed topology Validate(). Fails on an unknown issue-cost profile or a
  // CUBE index outside the chip.
  static absl::StatusOr<std::unique_ptr<ChipSim>> Create(const pb::Chip& chip,
                                                         ChipSimOptions options);
  ~ChipSim();

  // Gives global PE `pe` (in a built CUBE) its program; at most once per PE, before Run().
  absl::Status SetProgram(uint32_t pe, CpuProgram program);
  // Reserves PE `pe`'s CPU unit for a caller that spawns its own CPU actor there (the kernel
  // runtime); the same checks as SetProgram.
  absl::Status ClaimCpu(uint32_t pe);

  absl::Status Run();

  SimTime latency() const { return latency_; }
  uint64_t events() const { return engine_->events_processed(); }
  const observe::OpLog& op_log() const { return *op_log_; }
  // After Run(): the op log's records, moved out (cheaper than a copy for big runs).
  std::vector<pb::TraceRecord> TakeOpLogRecords() { return op_log_->TakeRecords(); }
  // `comm_critical_path_ps`: the workload's communication critical path (the kernels know
  // their static message schedule), added to the roofline (DESIGN §2). After Run(), before the
  // engine's Shutdown() (it reads the link units' counters).
  pb::Report BuildReport(uint64_t comm_critical_path_ps = 0) const;
  UnitContext& context() { return *ctx_; }
  HbmCallMemo::Stats hbm_call_memo_stats() const { return hbm_models_->memo_stats(); }
  Engine& engine() { return *engine_; }
  // The actors the engine has registered (spawned units: Create()'s, and the PE CPUs of
  // SetProgram / a caller's own), counted by unit kind; kinds with none are absent.
  std::map<topology::UnitKind, uint32_t> ActorCounts() const;

 private:
  ChipSim() = default;
  // BuildReport's copies of the built CUBEs' unit stats for ChipSimOptions::mirrors.
  void MirrorUnits(const topology::ChipIndex& index,
                   google::protobuf::RepeatedPtrField<pb::UnitStats>* units) const;

  ChipSimOptions options_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<observe::OpLog> op_log_;
  std::unique_ptr<observe::MessageTraceWriter> message_trace_;
  std::unique_ptr<UnitContext> ctx_;
  std::unique_ptr<HbmModelContext> hbm_models_;  // the HBM channels' call memos
  std::unique_ptr<LinkNetworkModel> network_;
  // Link units by id, for their stats: weak handles, so that Engine::Shutdown() can drop the
  // last strong one (a unit nobody holds needs no exit message).
  std::map<UnitId, caf::actor_addr> ipcqs_;
  std::vector<std::pair<UnitId, caf::actor_addr>> routers_, ucies_;
  std::set<uint32_t> cubes_;
  std::set<uint32_t> programmed_;
  SimTime latency_;
  bool ran_ = false;
  std::vector<std::unique_ptr<CommandStream>> streams_;  // SetProgram's, with their CPUs
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_CHIP_SIM_H_
