// The golden cases (tests/golden_test.cc): the fixed list of runs whose op log and report are
// kept in tests/golden/, as builders that other cross-unit tests run too (reply_ahead_test runs
// them with the declared shortcuts off). A case runs with RunKnobs: the defaults are the goldens'.
#ifndef AHBMSIM_TESTS_GOLDEN_CASES_H_
#define AHBMSIM_TESTS_GOLDEN_CASES_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/report.pb.h"
#include "proto/topology.pb.h"
#include "proto/trace.pb.h"

namespace ahbm::golden {

// What a case produces: the op log and the report (plus launch-only facts).
struct Outcome {
  std::vector<pb::TraceRecord> records;
  pb::Report report;
  std::string extra;  // lines before the report (status, reduce rounds)
  uint32_t islands = 1;  // the islands the run was simulated as (LaunchResult::islands)
  uint32_t group_scale = 1;  // LaunchResult::group_scale (one_group)
};

// Switches of a run that must not change its results.
struct RunKnobs {
  bool reply_ahead = true;  // ChipSimOptions::reply_ahead
  // LaunchOptions::message_trace_path (kernel cases; empty: none). A trace moves no result.
  std::string message_trace_path;
  // false: no op log is kept (Outcome::records holds only the header). It observes only.
  bool keep_op_log = true;
  bool islands = true;  // LaunchOptions::islands (kernel cases; false: one heap)
  bool one_group = false;  // LaunchOptions::one_group (kernel cases)
};

struct Case {
  std::string name;
  std::string topology;
  bool digest_only = false;  // full-chip: keep a digest of the text, not the text
  std::function<absl::StatusOr<Outcome>(const pb::Chip&, const RunKnobs&)> run;
};

// gtest prints a failing parameter by its name, not its bytes.
void PrintTo(const Case& c, std::ostream* os);

// The golden cases, in a fixed order (names unique: each is a file in tests/golden/).
std::vector<Case> AllCases();

// The small-topology cases and the first full-chip one: what a test running each case twice
// (with a knob of RunKnobs on and off) takes.
std::vector<Case> KnobCases();

// `w` run through launch::RunWorkload with `knobs`: op log, report and the launch facts (a
// Case's `run` for a workload).
absl::StatusOr<Outcome> LaunchOutcome(const pb::Chip& chip, const pb::Workload& w,
                                      const RunKnobs& knobs);

// The text a case's golden holds in full (small cases): op log, extra lines, report.
std::string RenderText(const Outcome& out);

}  // namespace ahbm::golden

#endif  // AHBMSIM_TESTS_GOLDEN_CASES_H_
