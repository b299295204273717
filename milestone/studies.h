// Running the studies (study.h; the list and what each answers: milestone/README.md
// "Studies") for `ahbm milestone`.
//
// Contract:
// - RunStudies runs every study's runnable points (not refused) in ONE sweep::JobPool call
//   (timing mode, no op log, LaunchOptions::one_group), results in job order, so the files do
//   not depend on `workers`; each study's rows (sweep::MakeRow, point order) become
//   <out_dir>/sweep_<name>.csv (sweep::FormatCsv), and its answer is computed from that CSV
//   text re-read by ParseCsv — the same answer a reader derives from the report folder.
// - A study whose answer cannot be derived (no row ran, say) keeps its CSV; the outcome holds
//   the answer's error and FormatAnswers prints "no answer: <why>".
// - The only error is a file that cannot be written: InvalidArgument "--out_dir: ...".
#ifndef AHBMSIM_MILESTONE_STUDIES_H_
#define AHBMSIM_MILESTONE_STUDIES_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "milestone/study.h"
#include "proto/job.pb.h"
#include "sweep/job.h"

namespace ahbm::milestone {

// The studies `--studies` names: "" or "all" every one, "none" none, else a comma-separated
// list of study names (report order kept). InvalidArgument "--studies: unknown study '<x>'
// (one of ...)".
absl::StatusOr<std::vector<Study>> SelectStudies(std::vector<Study> studies,
                                                 std::string_view names);

struct StudyOutcome {
  std::string name;
  std::string adr;
  std::string question;
  std::string csv;                     // as written to sweep_<name>.csv
  absl::StatusOr<std::string> answer;  // Study::answer(ParseCsv(csv))
};

// Called as each run finishes (finishing order; for progress displays only): its study, how
// many runs are done (1 .. n), n, and the simulated events of the finished runs.
using StudyProgress =
    std::function<void(const std::string& study, size_t done, size_t n, uint64_t events)>;

absl::StatusOr<std::vector<StudyOutcome>> RunStudies(const std::vector<Study>& studies,
                                                     const std::filesystem::path& out_dir,
                                                     int workers, const StudyProgress& progress);

// RunStudies in two steps (command.cc runs every job of the milestone in one list): the
// runnable points' jobs in study and point order (`job_study`, optional: each job's study
// name), then the outcomes from their results, writing the CSVs.
std::vector<sweep::Job> StudyPoolJobs(const std::vector<Study>& studies,
                                      std::vector<std::string>* job_study);
absl::StatusOr<std::vector<StudyOutcome>> OutcomesFrom(const std::vector<Study>& studies,
                                                       const std::vector<pb::JobResult>& results,
                                                       const std::filesystem::path& out_dir);

// "answers (ADR §9, §B):" then one line per study: "<adr> <question> -> <answer>".
std::string FormatAnswers(const std::vector<StudyOutcome>& outcomes);

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_STUDIES_H_
