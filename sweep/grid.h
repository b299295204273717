// A sweep's grid (`ahbm sweep`, sweep/README.md): parameters, each a workload field
// (kernels/launch/workload_io.h) or a topology field as a dotted path into pb::Chip
// (`sip.cube.pe.scheduler.max_inflight_composites`), the cartesian product of their values,
// and the rows the points give (CSV, JSON, table).
//
// Contract:
// - ResolveChipPath / SetChipField walk `path` through singular message fields of pb::Chip;
//   SetChipField sets the scalar at its end by protobuf reflection (pb::Chip's scalars:
//   unsigned integers in decimal within the field's range, enums by value name,
//   case-insensitive, strings as given). Its errors are InvalidArgument "<path>: <reason>" (no
//   such field in <message>, a repeated field, a path ending at a message or going through a
//   scalar, a value that does not parse). The chip is not re-validated here.
// - BuildGrid: a parameter name without a dot that is a workload field sets that field, any
//   other name is a chip path. An unknown name is InvalidArgument "--param: '<name>' is neither
//   a workload field nor a topology field (...)", a path that names no scalar "--param: ...",
//   a value that does not parse "--values: <param>: ..." (the whole sweep is refused). The
//   points are the cartesian product, first parameter outermost. A point whose chip fails
//   topology Validate() or whose workload fails launch::ValidateWorkload is kept with
//   `refused` set (a CSV row, not the end of the sweep).
// - The CSV header is `<param>...,workload,latency_ps,roofline_bound_ps,roofline_ratio,binding,
//   events,status` (sweep/README.md): the parameters' values as given, WorkloadSummary, the
//   report's figures, and `ok` or the point's one-line refusal or failure; a row that did not
//   run has empty figures. JSON: the same per row, numbers as JSON numbers. Same rows, same
//   bytes.
#ifndef AHBMSIM_SWEEP_GRID_H_
#define AHBMSIM_SWEEP_GRID_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "proto/job.pb.h"
#include "proto/topology.pb.h"
#include "proto/workload.pb.h"

namespace ahbm::sweep {

// The fields from pb::Chip down to the scalar `path` names: NotFound "<path>: no field '<name>'
// in <message>", InvalidArgument for a path through a repeated or scalar field or ending at a
// message.
absl::StatusOr<std::vector<const google::protobuf::FieldDescriptor*>> ResolveChipPath(
    const std::string& path);

absl::Status SetChipField(pb::Chip& chip, const std::string& path, const std::string& value);

struct Param {
  std::string name;
  std::vector<std::string> values;
};

struct Point {
  std::vector<std::string> values;  // one per parameter
  pb::Chip chip;
  pb::Workload workload;
  absl::Status refused;  // OK: the point runs
};

absl::StatusOr<std::vector<Point>> BuildGrid(const pb::Chip& chip, const pb::Workload& workload,
                                             const std::vector<Param>& params);

struct Row {
  std::vector<std::string> values;
  pb::Workload workload;
  absl::Status status;  // the refusal, the run's failure, or OK
  bool ran = false;     // the figures below are the run's (its report)
  uint64_t latency_ps = 0;
  uint64_t roofline_bound_ps = 0;
  double roofline_ratio = 0;
  std::string binding;
  uint64_t events = 0;
};

// A point's row: its refusal, or the job's result.
Row MakeRow(const Point& point, const pb::JobResult* result);

// "kernel=decode variant=opt3 s=8192": the workload's set fields in proto
// order, enums lower case.
std::string WorkloadSummary(const pb::Workload& workload);

std::string FormatCsv(const std::vector<Param>& params, const std::vector<Row>& rows);
std::string FormatJson(const std::vector<Param>& params, const std::vector<Row>& rows);
std::string FormatTable(const std::vector<Param>& params, const std::vector<Row>& rows);

}  // namespace ahbm::sweep

#endif  // AHBMSIM_SWEEP_GRID_H_
