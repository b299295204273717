// Running another program and reading what it printed (`ahbm slurm`: sbatch, squeue, scancel).
//
// Contract:
// - FindOnPath: the first executable file `name` in a folder of $PATH, or nullopt.
// - RunProgram(argv): argv[0] is looked up on $PATH unless it holds a '/'; the program runs
//   with stdin from /dev/null, this process's environment and folder, and is waited for. Its
//   stdout and stderr come back whole and apart (read together, so neither pipe can fill and
//   stall it). NotFound "<program>: not found on PATH" when it is not there; Internal when a
//   pipe or the spawn fails. A program that runs is never an error here: its exit code (or
//   the signal that ended it) is in the result for the caller to judge.
#ifndef AHBMSIM_BASE_SUBPROCESS_H_
#define AHBMSIM_BASE_SUBPROCESS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ahbm {

std::optional<std::string> FindOnPath(const std::string& name);

struct ProgramResult {
  int exit_code = -1;  // -1 when a signal ended it
  int signal = 0;      // the signal that ended it, or 0
  std::string out;     // its stdout
  std::string err;     // its stderr
  bool ok() const { return exit_code == 0; }
  // "exit status 7" or "killed by signal 9".
  std::string How() const;
};

absl::StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv);

}  // namespace ahbm

#endif  // AHBMSIM_BASE_SUBPROCESS_H_
