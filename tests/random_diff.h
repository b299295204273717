// The random differential test's case runner (tests/README.md, "Random differential test").
//
// Contract, for one seed: the workload RandomWorkload(seed) runs on the small chip (with BANK
// HBM channels when the case says so)
// 1. in data mode (inputs drawn from the seed): the run must succeed and every request's
//    output o<r> must match the float64 reference (attention_reference.h) on the inputs the
//    kernels saw, within kTolerance (scaled by max |V|); NaN or Inf fails;
// 2. in timing mode: the run must succeed with the same op log as data mode (header aside:
//    it names the mode), and its report must hold latency >= roofline bound > 0;
// A refusal (RunWorkload's InvalidArgument) passes only if it is a capacity refusal (the
// message says what does not fit); any other refusal, a crash or a deadlock fails.
#ifndef AHBMSIM_TESTS_RANDOM_DIFF_H_
#define AHBMSIM_TESTS_RANDOM_DIFF_H_

#include <cstdint>
#include <functional>
#include <string>

#include "proto/topology.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::testing {

struct CaseResult {
  enum class Kind { kPassed, kRefusedCapacity, kFailed };
  Kind kind = Kind::kPassed;
  std::string what;  // failed: why; refused: the refusal
  std::string command;  // the `ahbm run` line that reproduces it
};

// topology/small.textproto and topology/small_bank.textproto (the same chip with the shipped
// chips' BANK HBM channels); paths relative to the workspace.
struct TestChips {
  pb::Chip fifo;
  pb::Chip bank;
};
TestChips LoadTestChips();

CaseResult RunCase(const TestChips& chips, uint64_t seed);

// The same checks for a given workload on a given chip (`topology` names it in the command);
// data-mode inputs come from `w.seed()`.
CaseResult RunWorkloadCase(const pb::Chip& chip, const std::string& topology, pb::Workload w);

// RunCase in a child process, so that a crash (a CHECK, a signal) fails this seed, names the
// signal and lets the next seeds run.
CaseResult RunCaseIsolated(const TestChips& chips, uint64_t seed);
// `run` in a child process; a crash reports `command` as the reproducer.
CaseResult Isolated(const std::function<CaseResult()>& run, const std::string& command);

}  // namespace ahbm::testing

#endif  // AHBMSIM_TESTS_RANDOM_DIFF_H_
