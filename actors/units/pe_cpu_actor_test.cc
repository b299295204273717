// PE CPU tests (DESIGN §4): the issue step, the wait rule and switching between instances,
// with scripted instances on PE 0 of the small chip under the realistic profile (every
// primitive / load costs 16 cycles, resume after a wait 8; the clock is 1 GHz).
#include "actors/units/pe_cpu_actor.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "actors/chip_sim.h"
#include "actors/inject.h"
#include "gtest/gtest.h"
#include "proto/report.pb.h"
#include "proto/trace.pb.h"
#include "topology/loader.h"

namespace ahbm::sim {
namespace {

using inject::Hbm;
using inject::ProgramBuilder;
using inject::Tcm;

constexpr uint64_t kNs = 1000;  // ps per cycle

// A command stream of one request: auto-waits on `wait_for`, blocks on blocking commands.
class Script : public CpuInstance {
 public:
  Script(uint32_t request_id, CpuProgram program)
      : CpuInstance(request_id), program_(std::move(program)) {}

  bool Run(PeCpu& cpu) override {
    while (pc_ < program_.size()) {
      const CpuStep& step = program_[pc_];
      if (const uint64_t h = cpu.FirstPending(step.wait_for)) {
        cpu.Wait(*this, h, cpu.ready());
        return false;
      }
      const SimTime issue = cpu.IssueCommand(*this, step.command, step.wait_for);
      cpu.SendCommand(step.command, issue);
      ++pc_;
      if (IsBlocking(step.command)) {
        cpu.Wait(*this, CommandId(step.command), issue);
        return false;
      }
    }
    return true;
  }
  std::string WaitText() const override { return absl::StrCat("cmd ", waiting_on()); }

 private:
  CpuProgram program_;
  size_t pc_ = 0;
};

// The scripts on PE 0, run to the end; the op log's issue and stall records.
struct CpuRun {
  std::unique_ptr<ChipSim> sim;
  std::vector<pb::IssueRecord> issues;
  std::vector<pb::StallRecord> stalls;
  std::map<uint64_t, uint64_t> end_ps;  // scheduler record per command
  pb::UnitStats cpu_stats;
};

CpuRun RunScripts(std::vector<std::unique_ptr<Script>> scripts) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  EXPECT_TRUE(chip.ok()) << chip.status();
  ChipSimOptions options;
  options.cubes = {0};
  options.issue_cost_profile = "realistic";
  absl::StatusOr<std::unique_ptr<ChipSim>> sim = ChipSim::Create(*chip, options);
  EXPECT_TRUE(sim.ok()) << sim.status();
  CpuRun run;
  run.sim = std::move(*sim);
  EXPECT_TRUE(run.sim->ClaimCpu(0).ok());
  PeCpu cpu(run.sim->context(), /*pe=*/0, /*runtime=*/nullptr);
  for (const auto& s : scripts) cpu.AddInstance(s.get());
  cpu.Start();
  EXPECT_TRUE(run.sim->Run().ok());
  const pb::Report report = run.sim->BuildReport();  // reads the link units: before Shutdown
  run.sim->engine().Shutdown();  // before `cpu` and the scripts go
  for (const pb::TraceRecord& r : run.sim->op_log().records()) {
    if (r.has_issue()) run.issues.push_back(r.issue());
    if (r.has_stall()) run.stalls.push_back(r.stall());
    if (r.has_op() && r.op().unit_name().ends_with(".scheduler")) {
      run.end_ps[r.op().cmd_id()] = r.op().end_ps();
    }
  }
  for (const pb::UnitStats& s : report.units()) {
    if (s.unit() == cpu.unit()) run.cpu_stats = s;
  }
  for (const auto& s : scripts) EXPECT_EQ(s->state(), CpuInstance::State::kDone);
  return run;
}

// One blocking EXP on [8, 128] fp32 in TCM at `in` -> `out`.
void Exp(ProgramBuilder& p, uint64_t in, uint64_t out, std::vector<uint64_t> wait_for = {}) {
  p.Math(pb::EXP, {Tcm(0, in, pb::FP32, {8, 128})}, Tcm(0, out, pb::FP32, {8, 128}),
         std::move(wait_for));
}

// A blocking command: issue at edge(cpu) + 16, then the CPU waits; the wait is real (the op
// takes time), so a StallRecord covers it and the next issue pays resume 8 + issue 16.
TEST(PeCpuTest, BlockingCommandStallsAndPaysResumeOnTheCpuClock) {
  ProgramBuilder p;
  Exp(p, 0, 4096);
  Exp(p, 8192, 12288);
  std::vector<std::unique_ptr<Script>> scripts;
  scripts.push_back(std::make_unique<Script>(/*request_id=*/0, p.Build()));
  CpuRun run = RunScripts(std::move(scripts));
  ASSERT_EQ(run.issues.size(), 2u);
  EXPECT_EQ(run.issues[0].issue_ps(), 16 * kNs);
  EXPECT_TRUE(run.issues[0].blocking());
  const uint64_t end1 = run.end_ps.at(1);
  EXPECT_EQ(run.issues[1].issue_ps(), end1 + (8 + 16) * kNs);
  ASSERT_EQ(run.stalls.size(), 2u);
  EXPECT_EQ(run.stalls[0].cmd_id(), 1u);
  EXPECT_EQ(run.stalls[0].from_ps(), 16 * kNs);
  EXPECT_EQ(run.stalls[0].to_ps(), end1);
  EXPECT_EQ(run.cpu_stats.ops(), 2u);
  EXPECT_EQ(run.cpu_stats.busy_ps(), 2 * 16 * kNs);  // issue costs only
}

// Two instances: the CPU starts the lower request id first (not creation order), and switches
// to the other while the first waits; issue costs serialise on the one CPU clock.
TEST(PeCpuTest, InstancesRunOneAtATimeInRequestIdOrder) {
  ProgramBuilder a(/*first_cmd_id=*/1);
  Exp(a, 0, 4096);
  ProgramBuilder b(/*first_cmd_id=*/2);
  Exp(b, 8192, 12288);
  std::vector<std::unique_ptr<Script>> scripts;
  scripts.push_back(std::make_unique<Script>(/*request_id=*/2, a.Build()));
  scripts.push_back(std::make_unique<Script>(/*request_id=*/1, b.Build()));
  CpuRun run = RunScripts(std::move(scripts));
  ASSERT_EQ(run.issues.size(), 2u);
  EXPECT_EQ(run.issues[0].request_id(), 1u);
  EXPECT_EQ(run.issues[0].issue_ps(), 16 * kNs);
  EXPECT_EQ(run.issues[1].request_id(), 2u);
  EXPECT_EQ(run.issues[1].issue_ps(), 32 * kNs);  // no resume: request 2 never waited
}

// The CPU runs ahead of the event clock: ten loads leave it at 160 cycles, after the first
// load has landed, so the auto-wait on that load is not real — no StallRecord, no resume cost.
TEST(PeCpuTest, AWaitTheCpuRanPastCostsNothing) {
  ProgramBuilder p;
  std::vector<uint64_t> loads;
  for (uint64_t i = 0; i < 10; ++i) {
    loads.push_back(p.Dma(Hbm(0, i * 4096, pb::BF16, {128}), Tcm(0, 65536 + i * 256, pb::BF16, {128})));
  }
  Exp(p, 0, 4096, /*wait_for=*/{loads[0]});
  std::vector<std::unique_ptr<Script>> scripts;
  scripts.push_back(std::make_unique<Script>(/*request_id=*/0, p.Build()));
  CpuRun run = RunScripts(std::move(scripts));
  ASSERT_EQ(run.issues.size(), 11u);
  ASSERT_LT(run.end_ps.at(loads[0]), 160 * kNs);  // the premise
  EXPECT_EQ(run.issues[10].issue_ps(), (160 + 16) * kNs);
  ASSERT_EQ(run.issues[10].depends_on_size(), 1);
  EXPECT_EQ(run.issues[10].depends_on(0), loads[0]);
  // The only stall is the EXP's own (blocking) wait.
  ASSERT_EQ(run.stalls.size(), 1u);
  EXPECT_EQ(run.stalls[0].cmd_id(), run.issues[10].cmd_id());
}

}  // namespace
}  // namespace ahbm::sim
