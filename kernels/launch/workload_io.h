// Reading a workload (`ahbm.pb.Workload`, proto/workload.proto): protobuf text format files and
// single fields given as `name=value` text (the `ahbm run` flags, DESIGN §6).
//
// Contract:
// - ParseWorkloadText / LoadWorkloadFile: as topology/loader.h does for chips. A parse error
//   (unknown field or extension, bad value, syntax) is InvalidArgument
//   `<source>:<line>:<col>: <protobuf's message> (source line: <that line, trimmed>)`, the
//   first error only; a missing or unreadable file is NotFound
//   `cannot read workload file "<path>": <reason>`. Field values are not validated here
//   (RunWorkload does that, launch.h).
// - SetWorkloadField sets one field from text: integers in decimal, in range of the field
//   (uint32 / uint64); bools `true` / `false`; enums by value name, case-insensitive
//   (`selftest_gemm`); strings as given. Errors are InvalidArgument `<name>: <reason>` (no
//   such field, not an integer, out of range, unknown enum value with the allowed names).
// - WorkloadFields lists every field in proto order with a one-line help for `ahbm help run`
//   and `ahbm help compare`: its meaning and unit, its values (enums), its default.
// - CheckGivenValues: a value given is a value used or refused. Every field has presence
//   (proto/workload.proto); a set field holding 0, an UNSPECIFIED enum value or "" is refused
//   with InvalidArgument "<field>: must be > 0 (got 0); leave it unset for the default (<d>)"
//   (enums: "<field>: <X>_UNSPECIFIED is the unset value; give one of ..."), except the
//   fields where 0 is a value: seed, sip, start_cube, start_pe, cube, short_long_threshold,
//   data, no_rotation. So a launcher may read an unset field's 0 as "use the default".
#ifndef AHBMSIM_KERNELS_LAUNCH_WORKLOAD_IO_H_
#define AHBMSIM_KERNELS_LAUNCH_WORKLOAD_IO_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/workload.pb.h"

namespace ahbm::launch {

absl::StatusOr<pb::Workload> ParseWorkloadText(std::string_view text,
                                               std::string_view source_name);
absl::StatusOr<pb::Workload> LoadWorkloadFile(const std::string& path);

absl::Status SetWorkloadField(pb::Workload& workload, const std::string& name,
                              const std::string& value);

struct WorkloadField {
  std::string name;
  // "head dimension, elements (default: 128)"; enums with their value names.
  std::string help;
};
std::vector<WorkloadField> WorkloadFields();

[[nodiscard]] absl::Status CheckGivenValues(const pb::Workload& workload);

// Nothing is silently ignored: InvalidArgument "<field>: not used by <kernel> (got <value>);
// leave it unset" for the first set field that is neither in `used` nor one every kernel
// uses (kernel, data, seed, issue_cost_profile). RunWorkload calls it with the kernel
// launcher's Fields() (launcher.h).
[[nodiscard]] absl::Status CheckUnusedWorkloadFields(const pb::Workload& workload,
                                                     const std::string& kernel,
                                                     const std::vector<std::string>& used);

}  // namespace ahbm::launch

#endif  // AHBMSIM_KERNELS_LAUNCH_WORKLOAD_IO_H_
