#include "kernels/runtime/runtime.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "proto/trace.pb.h"

namespace ahbm::kernels {
namespace {

// Data mode: commands applied to the memory store at completion, by the engine unit (or, for a
// DMA command, the DMA) that computes them (sim::DataPlane).
class StoreDataPlane : public sim::DataPlane {
 public:
  explicit StoreDataPlane(DataExecutor* executor) : executor_(executor) {}
  absl::Status Apply(const pb::DmaCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::GemmCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::CompositeCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::MathCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::SoftmaxPvCmd& cmd) override { return executor_->Execute(cmd); }
  absl::Status Apply(const pb::LseMergeCmd& cmd) override { return executor_->Execute(cmd); }

 private:
  DataExecutor* executor_;
};

}  // namespace

KernelRuntime::KernelRuntime(sim::ChipSim* sim, MemoryStore* store,
                             ErrorKind refused_command_kind)
    : sim_(sim), run_(sim, store) {
  sim::UnitContext& ctx = sim_->context();
  AHBM_CHECK(sim::FindIssueCostProfile(ctx.chip, ctx.issue_cost_profile) != nullptr)
      << "no issue cost profile " << ctx.issue_cost_profile;
  ctx.refused_command_kind = refused_command_kind;
  if (store != nullptr) {
    executor_.emplace(store);
    data_plane_ = std::make_unique<StoreDataPlane>(&*executor_);
    ctx.data = data_plane_.get();
  }
}

KernelRuntime::~KernelRuntime() {
  sim_->context().data = nullptr;
  // Shut the engine down before the instances (and their coroutine frames) go away.
  sim_->engine().Shutdown();
}

absl::Status KernelRuntime::AddKernel(uint32_t pe, uint32_t request_id, uint32_t stream,
                                      KernelFn fn) {
  if (ran_) return absl::FailedPreconditionError("AddKernel after Run");
  run_.AddRequestId(request_id);
  if (!kept_cubes_.empty() && !kept_cubes_.contains(pe / index().pes_per_cube())) {
    return absl::OkStatus();
  }
  auto it = pes_.find(pe);
  if (it != pes_.end()) {
    if (const Instance* other = it->second->FindInstance(request_id, stream)) {
      return absl::InvalidArgumentError(absl::StrCat(
          run_.PeName(pe), ": a second kernel instance of request ", request_id, ", stream ",
          stream, " (instance ", other->ordinal,
          " has it; their messages could not be told apart)"));
    }
  } else {
    RETURN_IF_ERROR(sim_->ClaimCpu(pe));
    it = pes_.emplace(pe, std::make_unique<PeRuntime>(run_, pe)).first;
    run_.AddKernelPe(pe);
    it->second->Start();
  }
  const uint32_t ordinal = static_cast<uint32_t>(instances_.size());
  instances_.push_back(&it->second->AddInstance(request_id, stream, std::move(fn), ordinal));
  return absl::OkStatus();
}

absl::Status KernelRuntime::Run() {
  AHBM_CHECK(!ran_) << "KernelRuntime::Run twice";
  ran_ = true;
  for (auto& [pe, runtime] : pes_) runtime->SplitArenas();
  if (run_.recording()) {
    for (const Instance* inst : instances_) {
      pb::InstanceRecord r;
      r.set_instance(inst->ordinal);
      r.set_pe(inst->pe);
      r.set_request_id(inst->request_id());
      r.set_stream(inst->stream);
      sim_->context().op_log->AddInstance(std::move(r));
    }
  }
  RETURN_IF_ERROR(sim_->Run());
  std::vector<std::string> waits;
  for (const Instance* inst : instances_) {
    if (inst->state() != sim::CpuInstance::State::kDone) {
      waits.push_back(Describe(*inst) + pes_.at(inst->pe)->HeadOfLine(*inst) +
                      NocSendWait(*inst));
    }
  }
  if (!waits.empty()) {
    return DeadlockError(absl::StrCat("deadlock: no event left; ", absl::StrJoin(waits, "; ")));
  }
  return absl::OkStatus();
}

std::string KernelRuntime::Describe(const Instance& inst) const {
  std::string what = inst.waiting_what.empty() ? "nothing (never ran)" : inst.WaitText();
  return absl::StrCat(run_.PeName(inst.pe), " request ", inst.request_id(),
                      inst.stream != 0 ? absl::StrCat(" stream ", inst.stream) : "", " waits on ",
                      what);
}

std::string KernelRuntime::NocSendWait(const Instance& inst) const {
  if (!inst.waiting_send) return "";
  const pb::NocSend* send = pes_.at(inst.pe)->UnsentNoc(inst.waiting_message);
  if (send == nullptr) return "";
  auto receiver = pes_.find(send->dst_pe());
  if (receiver == pes_.end()) return "";
  const sim::NocEndpointModel* endpoint = receiver->second->endpoint();
  if (endpoint == nullptr) return "";
  return absl::StrCat(": message ", send->message_id(), " of ", send->bytes(),
                      " bytes, no receive posted for it and the endpoint queue of ",
                      run_.PeName(send->dst_pe()), " has ", endpoint->queued_bytes().value(),
                      " of ", endpoint->queue_bytes().value(), " bytes in use");
}

std::vector<uint64_t> KernelRuntime::RequestLatencyPs(uint32_t requests) const {
  const std::vector<sim::SimTime>& done = run_.request_done();
  AHBM_CHECK(requests > 0 && done.size() % requests == 0)
      << done.size() << " request ids do not split into " << requests << " requests";
  const size_t per = done.size() / requests;
  std::vector<uint64_t> out(requests, 0);
  for (size_t id = 0; id < done.size(); ++id) {
    out[id / per] = std::max(out[id / per], done[id].value());
  }
  return out;
}

}  // namespace ahbm::kernels
