// The `ahbm milestone` command (cli/ahbm.cc registers it): flags, the run with a progress line
// on stderr, the tables on stdout, milestone.json and milestone.csv in --out_dir.
//
// Contract: a bad flag is InvalidArgument "--<flag>: <reason>" (exit 2), given before anything
// runs: --decode_context / --prefill_context 0 or not a number, --users outside 2..16, an
// unknown panel, an --out_dir that cannot be created or written. Progress: before each run one
// line "milestone: <panel> <variant>, run i of n, <events/s> simulated events/s, ETA <s> s",
// redrawn in place (\r) when stderr is a terminal, one line each otherwise (wall-clock: stderr
// only, never in the files).
#ifndef AHBMSIM_MILESTONE_COMMAND_H_
#define AHBMSIM_MILESTONE_COMMAND_H_

#include <vector>

#include "absl/status/status.h"
#include "cli/flags.h"
#include "milestone/milestone.h"
#include "proto/topology.pb.h"

namespace ahbm::milestone {

std::vector<cli::FlagSpec> MilestoneFlags();

// `chip`: the --topology flag's chip, loaded by the caller.
absl::Status RunMilestoneCommand(const cli::ParsedFlags& flags, const pb::Chip& chip,
                                 const ToolInfo& tool);

}  // namespace ahbm::milestone

#endif  // AHBMSIM_MILESTONE_COMMAND_H_
