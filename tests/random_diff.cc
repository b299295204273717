#include "tests/random_diff.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/launch/launch.h"
#include "tests/attention_reference.h"
#include "tests/random_workload.h"
#include "topology/loader.h"

namespace ahbm::testing {
namespace {

constexpr double kTolerance = kAttentionTolerance;

// A capacity refusal says what does not fit: TCM ("at most N request(s) fit", prefill's "N
// instance(s) per PE leave each B", the decode baselines' "the arena gives each B"), HBM ("its
// region holds"), the data-mode host bound ("would hold", "host memory").
bool IsCapacityRefusal(const std::string& message) {
  for (const char* words :
       {" fit", "holds", "would hold", "host memory", "leave each", "the arena gives each"}) {
    if (absl::StrContains(message, words)) return true;
  }
  return false;
}

// The op log without its header (which names the mode) and the report (data/timing line).
std::string Body(const std::vector<pb::TraceRecord>& log) {
  std::string bytes;
  for (const pb::TraceRecord& r : log) {
    if (r.has_header() || r.has_report()) continue;
    bytes += r.SerializeAsString();
  }
  return bytes;
}

// Every output against the reference; "" when all match.
std::string CheckOutputs(const launch::LaunchResult& run) {
  size_t requests = 0;
  for (const auto& [stem, in] : run.inputs) requests += !stem.empty() && stem[0] == 'q';
  if (run.outputs.size() != requests) {
    return absl::StrCat(run.outputs.size(), " outputs for ", requests, " requests");
  }
  for (const auto& [stem, o] : run.outputs) {
    if (stem.empty() || stem[0] != 'o') return absl::StrCat("unexpected output ", stem);
    const std::string suffix = stem.substr(1);
    auto q = run.inputs.find("q" + suffix), k = run.inputs.find("k" + suffix),
         v = run.inputs.find("v" + suffix);
    if (q == run.inputs.end() || k == run.inputs.end() || v == run.inputs.end()) {
      return absl::StrCat("output ", stem, " has no q/k/v", suffix, " inputs");
    }
    absl::StatusOr<std::vector<double>> want = ReferenceAttention(q->second, k->second, v->second);
    if (!want.ok()) return std::string(want.status().message());
    double vmax = 1;
    for (float x : v->second.data) vmax = std::max(vmax, double(std::abs(x)));
    const Deviation dev = Compare(o.data, *want);
    if (!dev.ok(kTolerance * vmax)) {
      const uint64_t d = o.shape.at(2), t_q = o.shape.at(1);
      return absl::StrCat("output ", stem, " ", host::ShapeString(o.shape), ": max abs error ",
                          dev.max_abs, " at [", dev.index / d / t_q, ", ", dev.index / d % t_q,
                          ", ", dev.index % d, "] (got ",
                          dev.index < o.data.size() ? o.data[dev.index] : NAN, ", want ",
                          dev.index < want->size() ? (*want)[dev.index] : NAN, "; tolerance ",
                          kTolerance * vmax, ")");
    }
  }
  return "";
}

std::string Command(const RandomCase& c, uint64_t seed) {
  return absl::StrCat("ahbm run --topology=",
                      c.bank_hbm ? "topology/small_bank.textproto" : "topology/small.textproto",
                      " --data --seed=", seed, " ", RunFlags(c.workload));
}

}  // namespace

TestChips LoadTestChips() {
  TestChips chips;
  for (auto [path, chip] : {std::pair{"topology/small.textproto", &chips.fifo},
                            std::pair{"topology/small_bank.textproto", &chips.bank}}) {
    absl::StatusOr<pb::Chip> loaded = topology::LoadTopologyFile(path);
    AHBM_CHECK(loaded.ok()) << loaded.status();
    *chip = *std::move(loaded);
  }
  return chips;
}

CaseResult RunCase(const TestChips& chips, uint64_t seed) {
  const RandomCase c = RandomWorkload(seed);
  pb::Workload w = c.workload;
  w.set_seed(seed);
  CaseResult result = RunWorkloadCase(c.bank_hbm ? chips.bank : chips.fifo, "", w);
  result.command = Command(c, seed);
  return result;
}

CaseResult RunWorkloadCase(const pb::Chip& chip, const std::string& topology, pb::Workload w) {
  CaseResult result;
  result.command = absl::StrCat("ahbm run --topology=", topology, " --data ", RunFlags(w));
  launch::LaunchOptions options;
  options.keep_op_log = true;

  w.set_data(true);
  absl::StatusOr<launch::LaunchResult> data = launch::RunWorkload(chip, w, options);
  if (!data.ok()) {
    const std::string message(data.status().message());
    const bool capacity = data.status().code() == absl::StatusCode::kInvalidArgument &&
                          IsCapacityRefusal(message);
    result.kind = capacity ? CaseResult::Kind::kRefusedCapacity : CaseResult::Kind::kFailed;
    result.what = absl::StrCat(capacity ? "" : "refused: ", message);
    return result;
  }
  result.kind = CaseResult::Kind::kFailed;
  if (!data->runtime_status.ok()) {
    result.what = absl::StrCat("data mode: ", data->runtime_status.ToString());
    return result;
  }
  if (std::string bad = CheckOutputs(*data); !bad.empty()) {
    result.what = absl::StrCat("data mode: ", bad);
    return result;
  }

  w.set_data(false);
  absl::StatusOr<launch::LaunchResult> timing = launch::RunWorkload(chip, w, options);
  if (!timing.ok()) {
    result.what = absl::StrCat("timing mode refused what data mode ran: ", timing.status().message());
    return result;
  }
  if (!timing->runtime_status.ok()) {
    result.what = absl::StrCat("timing mode: ", timing->runtime_status.ToString());
    return result;
  }
  if (Body(timing->op_log) != Body(data->op_log)) {
    result.what = "timing mode's op log differs from data mode's";
    return result;
  }
  const pb::Report& report = timing->report;
  if (report.roofline().bound_ps() == 0 || report.latency_ps() < report.roofline().bound_ps()) {
    result.what = absl::StrCat("roofline bound ", report.roofline().bound_ps(),
                               " ps is not a lower bound of the latency ", report.latency_ps(),
                               " ps (", report.roofline().binding_resource(), ")");
    return result;
  }
  result.kind = CaseResult::Kind::kPassed;
  return result;
}

CaseResult RunCaseIsolated(const TestChips& chips, uint64_t seed) {
  return Isolated([&] { return RunCase(chips, seed); }, Command(RandomWorkload(seed), seed));
}

CaseResult Isolated(const std::function<CaseResult()>& run, const std::string& command) {
  int fds[2];
  AHBM_CHECK(pipe(fds) == 0) << "pipe: " << std::strerror(errno);
  const pid_t pid = fork();
  AHBM_CHECK(pid >= 0) << "fork: " << std::strerror(errno);
  if (pid == 0) {
    close(fds[0]);
    const CaseResult r = run();
    // kind, then what and command separated by a NUL.
    const std::string out = absl::StrCat(static_cast<int>(r.kind), r.what, std::string(1, '\0'),
                                         r.command);
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) _exit(3);
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string in;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) in.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CaseResult r;
  const size_t nul = in.find('\0');
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !in.empty() && nul != std::string::npos) {
    r.kind = static_cast<CaseResult::Kind>(in[0] - '0');
    r.what = in.substr(1, nul - 1);
    r.command = in.substr(nul + 1);
    return r;
  }
  r.kind = CaseResult::Kind::kFailed;
  r.what = WIFSIGNALED(status) ? absl::StrCat("crashed: signal ", WTERMSIG(status), " (",
                                              strsignal(WTERMSIG(status)), ")")
                               : absl::StrCat("crashed: exit ", WEXITSTATUS(status));
  r.command = command;
  return r;
}

}  // namespace ahbm::testing
