// What every unit actor of one simulation shares: the engine, the chip, its numbering, and the
// run's observers (op log, per-unit stats). One per simulation, owned by its builder
// (actors/chip_sim.h) and outliving every unit. Units get a pointer at spawn.
//
// Sharing plain objects between actors is safe and deterministic here: the engine runs exactly
// one handler at a time, in event order (engine.h), so appends happen in event order.
#ifndef AHBMSIM_ACTORS_UNITS_UNIT_CONTEXT_H_
#define AHBMSIM_ACTORS_UNITS_UNIT_CONTEXT_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "actors/engine.h"
#include "proto/commands.pb.h"
#include "actors/observe/op_log.h"
#include "actors/time.h"
#include "base/check.h"
#include "base/errors.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "topology/ids.h"

namespace ahbm::sim {

class HbmModelContext;  // actors/models/hbm_timing_model.h

// Per-unit counters, indexed by the dense unit ids of topology::ChipIndex.
class StatsBoard {
 public:
  explicit StatsBoard(const topology::ChipIndex& index)
      : index_(index), units_(index.num_units()) {}

  // The counters of `unit` (its id, name and kind are filled only by AppendUsed: the names of
  // thousands of units were ~0.7 MB of a full-chip run).
  pb::UnitStats& At(UnitId unit) {
    AHBM_CHECK(unit < units_.size()) << "unit " << unit << " outside the chip";
    return units_[unit];
  }
  // The counters of `unit`, unnamed.
  const pb::UnitStats& Get(UnitId unit) const {
    AHBM_CHECK(unit < units_.size()) << "unit " << unit << " outside the chip";
    return units_[unit];
  }
  // Appends to `out` every unit that did any work (ops > 0), ascending id, named, utilisation =
  // busy / latency; an entry of `replaced` stands in for the board's counters of its unit.
  void AppendUsed(SimTime latency, const std::map<UnitId, pb::UnitStats>& replaced,
                  google::protobuf::RepeatedPtrField<pb::UnitStats>* out) const {
    auto next = replaced.begin();
    for (UnitId unit = 0; unit < units_.size(); ++unit) {
      const pb::UnitStats* s = &units_[unit];
      if (next != replaced.end() && next->first == unit) s = &(next++)->second;
      if (s->ops() == 0) continue;
      pb::UnitStats* u = out->Add();
      *u = *s;
      u->set_unit(unit);
      u->set_unit_name(index_.Name(topology::UnitId(unit)));
      u->set_kind(topology::UnitKindName(index_.KindOf(topology::UnitId(unit))));
      u->set_utilisation(latency.value() == 0 ? 0.0
                                              : static_cast<double>(s->busy_ps()) /
                                                    static_cast<double>(latency.value()));
    }
  }

 private:
  topology::ChipIndex index_;
  std::vector<pb::UnitStats> units_;
};

// Data mode (DESIGN §4): what a command computes, applied at the instant the command completes
// (so later commands, which depend on it, see its values) by the unit that computes it: the
// GEMM or MATH engine at the delivery of its EngineWork (engine_unit_actor.h), the PE
// scheduler for a DMA command. Implemented by the kernel runtime's memory store; null in timing
// mode, where no values exist and the timing is the same. An error stops the run (it goes to
// UnitContext::errors).
class DataPlane {
 public:
  virtual ~DataPlane() = default;
  virtual absl::Status Apply(const pb::DmaCmd& cmd) = 0;
  virtual absl::Status Apply(const pb::GemmCmd& cmd) = 0;
  virtual absl::Status Apply(const pb::CompositeCmd& cmd) = 0;
  virtual absl::Status Apply(const pb::MathCmd& cmd) = 0;
  virtual absl::Status Apply(const pb::SoftmaxPvCmd& cmd) = 0;
  virtual absl::Status Apply(const pb::LseMergeCmd& cmd) = 0;
};

// What a PE scheduler may ask of its PE's CPU (PeCpu implements it).
class CpuProbe {
 public:
  // True when the CPU can send its scheduler nothing more before the Completion of command
  // `handle` reaches it: every command it issued has been sent, the scheduler has received
  // `received` of them, which is all it sent, and its only unfinished instance waits on
  // `handle` alone (nothing but that Completion can make it issue again).
  virtual bool QuietUntil(uint64_t handle, uint64_t received) const = 0;

 protected:
  ~CpuProbe() = default;
};

struct UnitContext {
  UnitContext(Engine* engine_in, const pb::Chip& chip_in)
      : engine(engine_in), chip(chip_in), index(chip_in), stats(index) {}

  Engine* engine;
  pb::Chip chip;               // validated
  topology::ChipIndex index;
  StatsBoard stats;
  observe::OpLog* op_log = nullptr;  // null: no op log
  DataPlane* data = nullptr;         // null: timing mode
  HbmModelContext* hbm_models = nullptr;  // what the HBM channels' models share (call memos)
  bool per_tile_events = false;      // PE schedulers step tile by tile (tests: == closed form)
  // PE schedulers answer a blocking command ahead when its end is final (PeScheduler::ReplyAhead,
  // a declared shortcut: actors/README.md); false: always the plain wake-up at the end (tests).
  bool reply_ahead = true;
  bool per_tile_detail = false;      // op log: one record per tile op, not only per command
  bool record_calls = false;         // op log: the kernel runtime's Instance / Call records
  std::string issue_cost_profile;    // the PE CPUs' ADR-0064 profile (a name in the chip)
  // Whose fault a command the PE schedulers refuse is (pe_cpu_actor.h): the input's in a
  // command stream (the default), the kernel's under the kernel runtime (it sets kKernelFault).
  ErrorKind refused_command_kind = ErrorKind::kInput;
  // The run's failures (a refused command, a data-plane error, a kernel's fault), each with the
  // key of the event that raised it and its kind (base/errors.h).
  std::vector<std::pair<Engine::EventKey, absl::Status>> errors;
  void AddError(absl::Status status) {
    errors.emplace_back(engine->current_key(), std::move(status));
  }
  // The first error in event order (the single heap's, whatever the islands); null: none.
  const absl::Status* FirstError() const {
    const auto first = std::min_element(errors.begin(), errors.end(), [](const auto& a, const auto& b) {
      return a.first < b.first;
    });
    return first == errors.end() ? nullptr : &first->second;
  }
  std::map<uint32_t, std::string> cpu_waiting;  // global PE -> what its unfinished CPU waits on
  std::vector<const CpuProbe*> cpus;  // by global PE (set by PeCpu::Start); null: no PeCpu

  std::string Name(UnitId unit) const { return index.Name(topology::UnitId(unit)); }
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_UNITS_UNIT_CONTEXT_H_
