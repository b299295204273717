#include "sweep/job.h"

#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/observe/op_log.h"
#include "base/errors.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "sweep/reference_check.h"
#include "topology/validate.h"

namespace ahbm::sweep {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every file `file` imports, then `file` (each once, dependencies first).
void CollectFiles(const google::protobuf::FileDescriptor* file,
                  std::set<const google::protobuf::FileDescriptor*>* seen,
                  std::vector<const google::protobuf::FileDescriptor*>* order) {
  if (!seen->insert(file).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) CollectFiles(file->dependency(i), seen, order);
  order->push_back(file);
}

}  // namespace

pb::JobResult ExecuteJob(const Job& job) {
  pb::JobResult out;
  launch::LaunchOptions options = job.options;
  if (job.reference_check) options.keep_op_log = false;
  absl::StatusOr<launch::LaunchResult> result =
      launch::RunWorkload(job.chip, job.workload, options);
  SetJobStatus(result.ok() ? result->runtime_status : result.status(), &out);
  if (job.reference_check) {
    OutputError error;
    if (!result.ok()) {
      error = {kInf, 0, absl::StrCat("refused: ", result.status().message())};
    } else if (!result->runtime_status.ok()) {
      error = {kInf, 0, result->runtime_status.ToString()};
    } else {
      error = CompareWithReference(result->inputs, result->outputs);
    }
    pb::ReferenceCheck* check = out.mutable_reference();
    check->set_max_abs_error(error.max_abs_error);
    check->set_tolerance(error.tolerance);
    check->set_note(error.note);
  }
  if (!result.ok()) return out;
  *out.mutable_report() = std::move(result->report);
  out.set_reduce_rounds(result->reduce_rounds);
  out.set_level2_rounds(result->level2_rounds);
  out.set_level1_rounds(result->level1_rounds);
  out.set_ring_rotations(result->ring_rotations);
  out.set_composites(result->composites);
  out.set_grid_composites(result->grid_composites);
  out.set_islands(result->islands);
  out.set_group_scale(result->group_scale);
  for (pb::TraceRecord& r : result->op_log) *out.add_op_log() = std::move(r);
  return out;
}

absl::StatusOr<pb::JobSpec> ToSpec(const Job& job) {
  const launch::LaunchOptions& o = job.options;
  if (!o.inputs_dir.empty() || !o.outputs_dir.empty() || !o.trace_path.empty() ||
      !o.message_trace_path.empty() || o.save_inputs) {
    return absl::FailedPreconditionError(
        "job: reads or writes files (inputs, outputs, traces); it runs on this machine only");
  }
  pb::JobSpec spec;
  *spec.mutable_chip() = job.chip;
  *spec.mutable_workload() = job.workload;
  pb::JobOptions* out = spec.mutable_options();
  out->set_per_tile_detail(o.per_tile_detail);
  out->set_reply_ahead(o.reply_ahead);
  out->set_islands(o.islands);
  out->set_keep_op_log(o.keep_op_log);
  out->set_hbm_call_memo(static_cast<uint32_t>(o.hbm_call_memo));
  out->set_one_group(o.one_group);
  out->set_reference_check(job.reference_check);
  return spec;
}

absl::StatusOr<Job> FromSpec(const pb::JobSpec& spec) {
  if (const absl::Status s = topology::Validate(spec.chip()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job: chip: ", s.message()));
  }
  const pb::JobOptions& o = spec.options();
  if (o.hbm_call_memo() > static_cast<uint32_t>(sim::HbmCallMemo::Mode::kVerify)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job: options.hbm_call_memo: unknown mode ", o.hbm_call_memo()));
  }
  Job job;
  job.chip = spec.chip();
  job.workload = spec.workload();
  job.options.per_tile_detail = o.per_tile_detail();
  job.options.reply_ahead = o.reply_ahead();
  job.options.islands = o.islands();
  job.options.keep_op_log = o.keep_op_log();
  job.options.hbm_call_memo = static_cast<sim::HbmCallMemo::Mode>(o.hbm_call_memo());
  job.options.one_group = o.one_group();
  job.reference_check = o.reference_check();
  return job;
}

std::string SpecDigest(const pb::JobSpec& spec) { return observe::MessageDigest(spec); }

std::string SchemaDigest() {
  std::set<const google::protobuf::FileDescriptor*> seen;
  std::vector<const google::protobuf::FileDescriptor*> files;
  CollectFiles(pb::JobSpec::descriptor()->file(), &seen, &files);
  std::string bytes;
  for (const google::protobuf::FileDescriptor* file : files) {
    google::protobuf::FileDescriptorProto proto;
    file->CopyTo(&proto);
    absl::StrAppend(&bytes, observe::MessageDigest(proto));
  }
  return observe::BytesDigest(bytes);
}

void SetJobStatus(const absl::Status& status, pb::JobResult* out) {
  out->set_status_code(static_cast<int32_t>(status.code()));
  out->set_status_message(std::string(status.message()));
  out->clear_error_kind();
  if (!status.ok()) out->set_error_kind(std::string(KindName(KindOf(status))));
}

absl::Status JobStatus(const pb::JobResult& result) {
  absl::Status status(static_cast<absl::StatusCode>(result.status_code()), result.status_message());
  if (std::optional<ErrorKind> kind = KindFromName(result.error_kind())) {
    status = WithKind(std::move(status), *kind);
  }
  return status;
}

pb::JobResult FailedResult(const absl::Status& status) {
  pb::JobResult result;
  SetJobStatus(status, &result);
  return result;
}

}  // namespace ahbm::sweep
