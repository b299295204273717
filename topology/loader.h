// Reads a chip topology (`ahbm.pb.Chip` in protobuf text format, e.g. topology/small.textproto)
// and validates it.
//
// Contract: a returned Chip has passed Validate() (topology/validate.h). Every error is one
// line that names its source:
//   parse error   InvalidArgument `<source>:<line>:<col>: <protobuf's message> (source line:
//                 <that line, trimmed>)` or `... (at end of input)` — 1-based, at protobuf's
//                 position (for an unknown field: just after its name), the first error only. The
//                 quoted line names the field where protobuf's message does not. Unknown fields and
//                 extensions are errors.
//   bad value     InvalidArgument `<source>: <Validate's message>`.
//   no file       NotFound `cannot read topology file "<path>": <reason>`.
#ifndef AHBM_TOPOLOGY_LOADER_H_
#define AHBM_TOPOLOGY_LOADER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/topology.pb.h"

namespace ahbm::topology {

// Parses `text`; `source_name` (usually the file path) only labels error messages.
absl::StatusOr<pb::Chip> ParseTopologyText(std::string_view text, std::string_view source_name);

// Reads the file at `path` and parses it as ParseTopologyText(contents, path) does.
absl::StatusOr<pb::Chip> LoadTopologyFile(const std::string& path);

}  // namespace ahbm::topology

#endif  // AHBM_TOPOLOGY_LOADER_H_
