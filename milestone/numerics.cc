#include "milestone/numerics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "kernels/launch/launch.h"
#include "sweep/job_pool.h"
#include "tests/attention_reference.h"

namespace ahbm::milestone {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string Lower(pb::Variant v) { return absl::AsciiStrToLower(pb::Variant_Name(v)); }
std::string Lower(pb::Kernel k) { return absl::AsciiStrToLower(pb::Kernel_Name(k)); }

std::string ShapeText(const pb::Workload& w) {
  std::string s = absl::StrCat("H_q ", w.h_q(), ", H_kv ", w.h_kv(), ", d ", w.d(), ", S ", w.s());
  if (w.has_c()) absl::StrAppend(&s, ", C ", w.c());
  if (w.has_p()) absl::StrAppend(&s, ", P ", w.p());
  return s;
}

}  // namespace

std::vector<pb::Workload> NumericWorkloads(const NumericShape& shape) {
  const std::vector<pb::Variant> decode = {
      pb::OPT1,         pb::OPT3,
      pb::OPT2,         pb::OPT2_LOOKAHEAD,
      pb::BASELINE_DOT, pb::BASELINE_FANOUT,
      pb::BASELINE_FANOUT_GROUP,
      pb::BASELINE_REV1_TREE,
      pb::SHORT_CONTEXT,
      pb::AUTO};
  const std::vector<pb::Variant> prefill = {
      pb::FLASH, pb::RING, pb::SHORT_CONTEXT, pb::BASELINE_DOT, pb::BASELINE_FANOUT, pb::AUTO};
  std::vector<pb::Workload> out;
  for (const auto& [kernel, variants, s] :
       {std::tuple{pb::DECODE, decode, shape.decode_s},
        std::tuple{pb::PREFILL, prefill, shape.prefill_s}}) {
    for (pb::Variant v : variants) {
      pb::Workload w;
      w.set_kernel(kernel);
      w.set_variant(v);
      w.set_h_q(shape.h_q);
      w.set_h_kv(shape.h_kv);
      w.set_d(shape.d);
      w.set_s(s);
      if (v == pb::BASELINE_FANOUT_GROUP) {  // 8 ranks, not the chip's 64 (numerics.h)
        w.set_c(2);
        w.set_p(4);
      }
      w.set_data(true);
      w.set_seed(kSeed);
      out.push_back(std::move(w));
    }
  }
  return out;
}

absl::Status ValidateNumericWorkloads(const pb::Chip& chip,
                                      const std::vector<pb::Workload>& workloads) {
  for (const pb::Workload& w : workloads) {
    if (const absl::Status s = launch::ValidateWorkload(chip, w); !s.ok()) {
      return WithMessage(s, absl::StrCat(s.message(), " (numerical check, ", Lower(w.kernel()), " ",
                                         Lower(w.variant()), ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<sweep::Job> NumericPoolJobs(const pb::Chip& chip,
                                        const std::vector<pb::Workload>& workloads) {
  // The outputs stay where the job runs: it compares them and sends the figures (job.h).
  std::vector<sweep::Job> jobs;
  for (const pb::Workload& w : workloads) {
    sweep::Job job{chip, w, {}};
    job.options.keep_op_log = false;
    job.reference_check = true;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<NumericCheck> ChecksFrom(const std::vector<pb::Workload>& workloads,
                                     const std::vector<pb::JobResult>& results) {
  std::vector<NumericCheck> checks;
  for (size_t i = 0; i < workloads.size(); ++i) {
    const pb::Workload& w = workloads[i];
    const pb::JobResult& r = results[i];
    const OutputError e =
        r.has_reference()
            ? OutputError{r.reference().max_abs_error(), r.reference().tolerance(),
                          r.reference().note()}
            : OutputError{kInf, 0, r.status_message()};  // the job died before comparing
    checks.push_back({Lower(w.kernel()), Lower(w.variant()), ShapeText(w), e.max_abs_error,
                      e.tolerance, e.ok(), e.note});
  }
  return checks;
}

absl::StatusOr<std::vector<NumericCheck>> RunNumericChecks(
    const pb::Chip& chip, int workers, const NumericShape& shape,
    const std::function<void(size_t done, size_t n)>& on_done) {
  const std::vector<pb::Workload> workloads = NumericWorkloads(shape);
  RETURN_IF_ERROR(ValidateNumericWorkloads(chip, workloads));
  size_t done = 0;
  const std::vector<pb::JobResult> results = sweep::JobPool(workers).Run(
      NumericPoolJobs(chip, workloads), [&](size_t, const pb::JobResult&) {
        if (on_done) on_done(++done, workloads.size());
      });
  return ChecksFrom(workloads, results);
}

std::string FormatNumericChecks(const std::vector<NumericCheck>& checks) {
  std::string out = absl::StrCat(
      "numerical check: data mode (seed ", kSeed, ") against the float64 reference; error = ",
      "max |O - O_ref|,\ntolerance = ", testing::kAttentionTolerance, " x max(1, max |V|)\n");
  absl::StrAppend(&out, absl::StrFormat("%-8s %-21s %-39s %11s %10s  %s\n", "kernel", "variant",
                                        "shape", "max abs err", "tolerance", "ok"));
  for (const NumericCheck& c : checks) {
    absl::StrAppend(&out, absl::StrFormat("%-8s %-21s %-39s %11.3e %10.3e  %s\n", c.kernel,
                                          c.variant, c.shape, c.max_abs_error, c.tolerance,
                                          c.ok ? "ok" : "FAIL"));
    if (!c.note.empty()) absl::StrAppend(&out, "  ", c.note.substr(0, 96), "\n");
  }
  return out;
}

}  // namespace ahbm::milestone
