#include "actors/units/pe_cpu_actor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/pb_message.h"
#include "base/check.h"
#include "proto/trace.pb.h"

namespace ahbm::sim {
namespace {

using cpu_start_atom = caf::atom_constant<caf::atom("cpustart")>;

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

std::vector<uint64_t> OwnDeps(const CpuCommand& command) {
  return std::visit(
      Overloaded{
          [](const std::shared_ptr<const pb::CompositeCmd>& c) {
            return std::vector<uint64_t>(c->depends_on().begin(), c->depends_on().end());
          },
          [](const std::shared_ptr<const pb::SoftmaxPvCmd>& c) {
            return std::vector<uint64_t>(c->depends_on().begin(), c->depends_on().end());
          },
          [](const std::shared_ptr<const pb::LseMergeCmd>& c) {
            return std::vector<uint64_t>(c->depends_on().begin(), c->depends_on().end());
          },
          [](const auto&) { return std::vector<uint64_t>(); },
      },
      command);
}

void FillIssue(const CpuCommand& command, pb::IssueRecord& rec) {
  std::visit(Overloaded{
                 [&](const std::shared_ptr<const pb::DmaCmd>& c) { *rec.mutable_dma() = *c; },
                 [&](const std::shared_ptr<const pb::CompositeCmd>& c) { *rec.mutable_composite() = *c; },
                 [&](const std::shared_ptr<const pb::SoftmaxPvCmd>& c) { *rec.mutable_softmax_pv() = *c; },
                 [&](const std::shared_ptr<const pb::GemmCmd>& c) { *rec.mutable_gemm() = *c; },
                 [&](const std::shared_ptr<const pb::MathCmd>& c) { *rec.mutable_math() = *c; },
                 [&](const std::shared_ptr<const pb::LseMergeCmd>& c) { *rec.mutable_lse_merge() = *c; },
             },
             command);
}

void Resume(PeCpuActor* self);

// Runs steps until the CPU blocks, stalls or the program ends.
void Resume(PeCpuActor* self) {
  PeCpuState& st = self->state;
  UnitContext* ctx = st.ctx;
  Engine* engine = ctx->engine;
  const SimTime now = engine->now();
  while (!st.failed && !st.blocked_on && !st.stall_from && st.pc < st.program.size()) {
    const CpuStep& step = st.program[st.pc];
    for (uint64_t handle : step.wait_for) {
      if (st.completed.contains(handle)) continue;
      st.stall_from = std::max(st.cpu, now);
      st.stalled_on = handle;
      ctx->cpu_waiting[st.pe] = absl::StrCat("cmd ", handle, " (auto-wait)");
      return;
    }
    const SimTime issue =
        st.clock->NextEdge(std::max(st.cpu, now)) +
        st.clock->ToTime(Cycles(IssueCycles(st.profile, step.command)));
    pb::UnitStats& stats = ctx->stats.At(st.self);
    stats.set_ops(stats.ops() + 1);
    stats.set_busy_ps(stats.busy_ps() + (issue - st.clock->NextEdge(std::max(st.cpu, now))).value());
    st.cpu = issue;
    const uint64_t id = CommandId(step.command);
    std::visit([&](const auto& c) { engine->Send(st.self, issue - now, st.scheduler, c); },
               step.command);
    if (ctx->op_log != nullptr) {
      pb::IssueRecord rec;
      rec.set_pe(st.pe);
      rec.set_cmd_id(id);
      rec.set_issue_ps(issue.value());
      std::vector<uint64_t> deps = step.wait_for;
      for (uint64_t d : OwnDeps(step.command)) deps.push_back(d);
      for (uint64_t d : deps) rec.add_depends_on(d);
      rec.set_blocking(IsBlocking(step.command));
      FillIssue(step.command, rec);
      ctx->op_log->AddIssue(std::move(rec));
    }
    ++st.pc;
    if (IsBlocking(step.command)) {
      st.blocked_on = id;
      ctx->cpu_waiting[st.pe] = absl::StrCat("cmd ", id, " (blocking)");
    }
  }
  if (st.pc == st.program.size() && !st.blocked_on && !st.stall_from) {
    ctx->cpu_waiting.erase(st.pe);
    st.done = true;
    st.finished = std::max(st.finished, st.cpu);
  }
}

void OnCompletion(PeCpuActor* self, const pb::Completion& done) {
  PeCpuState& st = self->state;
  const SimTime now = st.ctx->engine->now();
  st.completed[done.cmd_id()] = SimTime(done.end_ps());
  st.finished = std::max(st.finished, now);
  const SimTime resume = st.clock->ToTime(Cycles(st.profile.resume_after_wait_cycles()));
  if (st.blocked_on && *st.blocked_on == done.cmd_id()) {
    st.blocked_on.reset();
    st.cpu = std::max(st.cpu, now) + resume;
  } else if (st.stalled_on && *st.stalled_on == done.cmd_id()) {
    if (st.ctx->op_log != nullptr) {
      pb::StallRecord rec;
      rec.set_pe(st.pe);
      rec.set_waits_on(absl::StrCat("cmd ", done.cmd_id()));
      rec.set_cmd_id(done.cmd_id());
      rec.set_from_ps(st.stall_from->value());
      rec.set_to_ps(now.value());
      st.ctx->op_log->AddStall(std::move(rec));
    }
    st.stall_from.reset();
    st.stalled_on.reset();
    st.cpu = std::max(st.cpu, now) + resume;
  } else {
    return;
  }
  Resume(self);
}

}  // namespace

uint64_t CommandId(const CpuCommand& command) {
  return std::visit([](const auto& c) { return c->cmd_id(); }, command);
}

bool IsBlocking(const CpuCommand& command) {
  return std::visit(Overloaded{
                        [](const std::shared_ptr<const pb::DmaCmd>& c) { return c->dst().space() == pb::HBM; },
                        [](const std::shared_ptr<const pb::CompositeCmd>&) { return false; },
                        [](const std::shared_ptr<const pb::SoftmaxPvCmd>&) { return false; },
                        [](const std::shared_ptr<const pb::GemmCmd>&) { return true; },
                        [](const std::shared_ptr<const pb::MathCmd>&) { return true; },
                        [](const std::shared_ptr<const pb::LseMergeCmd>&) { return false; },
                    },
                    command);
}

uint32_t IssueCycles(const pb::IssueCostProfile& p, const CpuCommand& command) {
  return std::visit(
      Overloaded{
          [&](const std::shared_ptr<const pb::DmaCmd>& c) {
            return c->dst().space() == pb::HBM ? p.store_cycles() : p.load_cycles();
          },
          [&](const std::shared_ptr<const pb::CompositeCmd>&) { return p.composite_cycles(); },
          [&](const std::shared_ptr<const pb::SoftmaxPvCmd>&) { return p.ex_composite_cycles(); },
          [&](const std::shared_ptr<const pb::GemmCmd>&) { return p.dot_cycles(); },
          [&](const std::shared_ptr<const pb::MathCmd>&) { return p.primitive_cycles(); },
          [&](const std::shared_ptr<const pb::LseMergeCmd>&) { return p.ex_composite_cycles(); },
      },
      command);
}

const pb::IssueCostProfile* FindIssueCostProfile(const pb::Chip& chip, const std::string& name) {
  for (const pb::IssueCostProfile& p : chip.sip().cube().pe().issue_cost_profiles()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

caf::behavior PeCpuBehavior(PeCpuActor* self, UnitContext* ctx, UnitId self_id, uint32_t pe,
                            CpuProgram program) {
  PeCpuState& st = self->state;
  st.ctx = ctx;
  st.self = self_id;
  st.pe = pe;
  st.scheduler = ctx->index.PeUnit(topology::UnitKind::kPeScheduler, ctx->index.PeOf(pe)).value();
  const pb::IssueCostProfile* profile = FindIssueCostProfile(ctx->chip, ctx->issue_cost_profile);
  AHBM_CHECK(profile != nullptr) << "no issue cost profile '" << ctx->issue_cost_profile << "'";
  st.profile = *profile;
  st.clock = *ClockDomain::FromMHz(ctx->chip.sip().cube().pe().clock_mhz());
  st.program = std::move(program);
  ctx->cpu_waiting[pe] = "its start";
  return {
      [self](cpu_start_atom) { Resume(self); },
      [self](const std::shared_ptr<const pb::Completion>& done) { OnCompletion(self, *done); },
      [self](const std::shared_ptr<const pb::CommandError>& error) {
        PeCpuState& st = self->state;
        st.failed = true;
        st.ctx->errors.push_back(error->message());
        st.ctx->cpu_waiting.erase(st.pe);
      },
  };
}

void StartPeCpuActor(UnitContext& ctx, uint32_t pe, CpuProgram program) {
  const UnitId id = ctx.index.PeUnit(topology::UnitKind::kPeCpu, ctx.index.PeOf(pe)).value();
  ctx.engine->Register(id,
                       ctx.engine->system().spawn(PeCpuBehavior, &ctx, id, pe, std::move(program)));
  ctx.engine->Send(id, SimTime(0), id, cpu_start_atom::value);
}

}  // namespace ahbm::sim
