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

// A check's figures as the child sends them: error and tolerance as exact hex floats, the note.
std::string Encode(const OutputError& e) {
  return absl::StrFormat("%a\t%a\t%s", e.max_abs_error, e.tolerance, e.note);
}

OutputError Decode(const std::string& bytes) {
  const std::vector<std::string> parts = absl::StrSplit(bytes, absl::MaxSplits('\t', 2));
  if (parts.size() != 3) return {kInf, 0, absl::StrCat("bad result from the child: '", bytes, "'")};
  return {std::strtod(parts[0].c_str(), nullptr), std::strtod(parts[1].c_str(), nullptr), parts[2]};
}

// In the child: the run, then its error.
OutputError RunAndCompare(const pb::Chip& chip, const pb::Workload& w) {
  launch::LaunchOptions options;
  options.keep_op_log = false;
  absl::StatusOr<launch::LaunchResult> run = launch::RunWorkload(chip, w, options);
  if (!run.ok()) return {kInf, 0, absl::StrCat("refused: ", run.status().message())};
  if (!run->runtime_status.ok()) return {kInf, 0, run->runtime_status.ToString()};
  return CompareWithReference(run->inputs, run->outputs);
}

}  // namespace

bool OutputError::ok() const {
  return note.empty() && std::isfinite(max_abs_error) && max_abs_error <= tolerance;
}

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

OutputError CompareWithReference(const std::map<std::string, host::NpyArray>& inputs,
                                 const std::map<std::string, host::NpyArray>& outputs) {
  OutputError error;
  size_t requests = 0;
  for (const auto& [stem, in] : inputs) requests += !stem.empty() && stem[0] == 'q';
  if (outputs.size() != requests || requests == 0) {
    return {kInf, 0, absl::StrCat(outputs.size(), " outputs for ", requests, " requests")};
  }
  for (const auto& [stem, o] : outputs) {
    const std::string suffix = stem.substr(std::min<size_t>(1, stem.size()));
    const auto q = inputs.find("q" + suffix), k = inputs.find("k" + suffix),
               v = inputs.find("v" + suffix);
    if (stem.empty() || stem[0] != 'o' || q == inputs.end() || k == inputs.end() ||
        v == inputs.end()) {
      return {kInf, 0, absl::StrCat("output '", stem, "' has no q, k, v inputs")};
    }
    const absl::StatusOr<std::vector<double>> want =
        testing::ReferenceAttention(q->second, k->second, v->second);
    if (!want.ok()) return {kInf, 0, std::string(want.status().message())};
    double vmax = 1;
    for (float x : v->second.data) vmax = std::max(vmax, double(std::abs(x)));
    error.max_abs_error =
        std::max(error.max_abs_error, testing::Compare(o.data, *want).max_abs);
    error.tolerance = std::max(error.tolerance, testing::kAttentionTolerance * vmax);
  }
  return error;
}

absl::StatusOr<std::vector<NumericCheck>> RunNumericChecks(
    const pb::Chip& chip, int workers, const NumericShape& shape,
    const std::function<void(size_t done, size_t n)>& on_done) {
  const std::vector<pb::Workload> workloads = NumericWorkloads(shape);
  for (const pb::Workload& w : workloads) {
    if (const absl::Status s = launch::ValidateWorkload(chip, w); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(s.message(), " (numerical check, ",
                                                 Lower(w.kernel()), " ", Lower(w.variant()), ")"));
    }
  }
  // Data-mode outputs stay in the child (sweep/job_pool.h): it compares and sends the figures.
  const std::vector<absl::StatusOr<std::string>> results = sweep::ForkEach(
      workloads.size(), workers,
      [&](size_t i) { return Encode(RunAndCompare(chip, workloads[i])); },
      [&, done = size_t{0}](size_t, const absl::StatusOr<std::string>&) mutable {
        if (on_done) on_done(++done, workloads.size());
      });
  std::vector<NumericCheck> checks;
  for (size_t i = 0; i < workloads.size(); ++i) {
    const pb::Workload& w = workloads[i];
    const OutputError e = results[i].ok()
                              ? Decode(*results[i])
                              : OutputError{kInf, 0, std::string(results[i].status().message())};
    checks.push_back({Lower(w.kernel()), Lower(w.variant()), ShapeText(w), e.max_abs_error,
                      e.tolerance, e.ok(), e.note});
  }
  return checks;
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
