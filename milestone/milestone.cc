#include "milestone/milestone.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/errors.h"
#include "actors/observe/op_log.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "base/text_escape.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "kernels/launch/launch.h"
#include "sweep/job_pool.h"

namespace ahbm::milestone {

namespace {

const std::vector<pb::Variant>& DecodeVariants() {
  static const std::vector<pb::Variant> v = {pb::OPT1,
                                             pb::OPT3,
                                             pb::OPT2,
                                             pb::OPT2_LOOKAHEAD,
                                             pb::BASELINE_DOT,
                                             pb::BASELINE_FANOUT,
                                             pb::BASELINE_FANOUT_GROUP,
                                             pb::BASELINE_REV1_TREE,
                                             pb::AUTO};
  return v;
}

const std::vector<pb::Variant>& PrefillVariants() {
  static const std::vector<pb::Variant> v = {
      pb::FLASH, pb::RING, pb::SHORT_CONTEXT, pb::BASELINE_DOT, pb::BASELINE_FANOUT, pb::AUTO};
  return v;
}

// The multi-user mix: request r has S >> r tokens, at least `floor`.
std::vector<uint64_t> Mix(uint64_t s, uint32_t users, uint64_t floor) {
  std::vector<uint64_t> lengths;
  for (uint32_t r = 0; r < users; ++r) lengths.push_back(std::max(s >> r, std::min(s, floor)));
  return lengths;
}

std::string Lower(pb::Variant v) { return absl::AsciiStrToLower(pb::Variant_Name(v)); }

std::vector<uint64_t> Lengths(const pb::Workload& w) {
  if (w.request_lengths_size() > 0) return {w.request_lengths().begin(), w.request_lengths().end()};
  return {w.s()};
}

// The ADR kernel's minimal K/V bytes and FLOPs (milestone.h).
void MinimalWork(const pb::Workload& w, uint64_t* kv_bytes, uint64_t* flops) {
  *kv_bytes = 0;
  *flops = 0;
  for (uint64_t s : Lengths(w)) {
    *kv_bytes += 2ull * w.h_kv() * s * w.d() * 2;
    *flops += w.kernel() == pb::PREFILL ? 4ull * w.h_q() * w.d() * (s * (s + 1) / 2)
                                        : 4ull * w.h_q() * s * w.d();
  }
}

// One workload field as text: "" unset; enums by name; repeated joined by ';'.
std::string FieldText(const pb::Workload& w, const google::protobuf::FieldDescriptor* f,
                      bool json) {
  const google::protobuf::Reflection* r = w.GetReflection();
  using FD = google::protobuf::FieldDescriptor;
  if (f->is_repeated()) {
    std::vector<std::string> parts;
    for (int i = 0; i < r->FieldSize(w, f); ++i) {
      parts.push_back(absl::StrCat(r->GetRepeatedUInt64(w, f, i)));
    }
    return json ? absl::StrCat("[", absl::StrJoin(parts, ","), "]") : absl::StrJoin(parts, ";");
  }
  if (!r->HasField(w, f)) return json ? "null" : "";
  switch (f->cpp_type()) {
    case FD::CPPTYPE_UINT32:
      return absl::StrCat(r->GetUInt32(w, f));
    case FD::CPPTYPE_UINT64:
      return absl::StrCat(r->GetUInt64(w, f));
    case FD::CPPTYPE_BOOL:
      return r->GetBool(w, f) ? "true" : "false";
    case FD::CPPTYPE_ENUM:
      return json ? absl::StrCat("\"", r->GetEnum(w, f)->name(), "\"") : r->GetEnum(w, f)->name();
    case FD::CPPTYPE_STRING:
      return json ? absl::StrCat("\"", r->GetString(w, f), "\"") : r->GetString(w, f);
    default:
      return json ? "null" : "";
  }
}

// Per-kind utilisation (mean, max over the kind's units).
struct KindUtil {
  double mean = 0, max = 0;
};
constexpr const char* kKinds[] = {"hbm_channel", "gemm", "math", "dma", "ipcq", "noc", "pe_cpu"};

std::map<std::string, KindUtil> Utilisation(const pb::Report& report) {
  std::map<std::string, KindUtil> out;
  std::map<std::string, uint64_t> count;
  for (const pb::UnitStats& u : report.units()) {
    KindUtil& k = out[u.kind()];
    k.mean += u.utilisation();
    k.max = std::max(k.max, u.utilisation());
    ++count[u.kind()];
  }
  for (auto& [kind, k] : out) k.mean /= count[kind];
  return out;
}

uint64_t KindBytesRead(const pb::Report& report, const std::string& kind) {
  uint64_t bytes = 0;
  for (const pb::UnitStats& u : report.units()) {
    if (u.kind() == kind) bytes += u.bytes_read();
  }
  return bytes;
}

uint64_t KindBytesWritten(const pb::Report& report, const std::string& kind) {
  uint64_t bytes = 0;
  for (const pb::UnitStats& u : report.units()) {
    if (u.kind() == kind) bytes += u.bytes_written();
  }
  return bytes;
}

// Sum and max over the PE CPUs of a counter.
std::pair<uint64_t, uint64_t> CpuSumMax(const pb::Report& report,
                                        uint64_t (pb::UnitStats::*counter)() const) {
  uint64_t sum = 0, max = 0;
  for (const pb::UnitStats& u : report.units()) {
    if (u.kind() != "pe_cpu") continue;
    sum += (u.*counter)();
    max = std::max(max, (u.*counter)());
  }
  return {sum, max};
}

}  // namespace

RequestSpread Spread(const pb::Report& report) {
  std::vector<uint64_t> ps(report.request_latency_ps().begin(), report.request_latency_ps().end());
  if (ps.empty()) return {};
  std::sort(ps.begin(), ps.end());
  return {ps.front(), ps[(ps.size() - 1) / 2], ps.back()};
}

namespace {

// The numbers every row carries, in column order (name, value as JSON/CSV number text; a list
// as a JSON array, in CSV joined by ';').
std::vector<std::pair<std::string, std::string>> Figures(const Row& r, bool json) {
  const RequestSpread req = Spread(r.report);
  const std::string requests = absl::StrJoin(r.report.request_latency_ps(), json ? "," : ";");
  const auto [cpu_ops_sum, cpu_ops_max] = CpuSumMax(r.report, &pb::UnitStats::ops);
  const auto [stall_sum, stall_max] = CpuSumMax(r.report, &pb::UnitStats::stall_ps);
  const uint64_t ipcq_bytes = KindBytesWritten(r.report, "ipcq");
  const uint64_t noc_bytes = KindBytesRead(r.report, "noc");
  std::vector<std::pair<std::string, std::string>> f = {
      {"latency_ps", absl::StrCat(r.report.latency_ps())},
      {"roofline_ps", absl::StrCat(r.report.roofline().bound_ps())},
      {"roofline_ratio", absl::StrFormat("%.6f", r.report.roofline_ratio())},
      {"best_baseline_ratio", absl::StrFormat("%.6f", r.best_baseline_ratio)},
      {"ideal_ps", absl::StrCat(r.ideal_ps)},
      {"ideal_ratio", absl::StrFormat("%.6f", r.ideal_ratio)},
      {"ideal_pes", absl::StrCat(r.ideal_pes)},
      {"kv_min_bytes", absl::StrCat(r.kv_min_bytes)},
      {"min_flops", absl::StrCat(r.min_flops)},
      {"request_latency_min_ps", absl::StrCat(req.min)},
      {"request_latency_median_ps", absl::StrCat(req.median)},
      {"request_latency_max_ps", absl::StrCat(req.max)},
      {"request_latency_ps", json ? absl::StrCat("[", requests, "]") : requests},
      {"dma_bytes_read", absl::StrCat(KindBytesRead(r.report, "dma"))},
      {"ipcq_bytes", absl::StrCat(ipcq_bytes)},
      {"noc_bytes", absl::StrCat(noc_bytes)},
      {"cross_rank_bytes", absl::StrCat(ipcq_bytes + noc_bytes)},
      {"comm_critical_path_ps", absl::StrCat(r.report.roofline().comm_critical_path_ps())},
      {"reduce_rounds", absl::StrCat(r.reduce_rounds)},
      {"reduce_rounds_level2", absl::StrCat(r.level2_rounds)},
      {"reduce_rounds_level1", absl::StrCat(r.level1_rounds)},
      {"ring_rotations", absl::StrCat(r.ring_rotations)},
      {"cpu_ops_sum", absl::StrCat(cpu_ops_sum)},
      {"cpu_ops_max", absl::StrCat(cpu_ops_max)},
      {"cpu_stall_ps_sum", absl::StrCat(stall_sum)},
      {"cpu_stall_ps_max", absl::StrCat(stall_max)},
      {"composites", absl::StrCat(r.composites)},
      {"events", absl::StrCat(r.report.events())},
      {"group_scale", absl::StrCat(r.group_scale)}};
  const std::map<std::string, KindUtil> util = Utilisation(r.report);
  for (const char* kind : kKinds) {
    const auto it = util.find(kind);
    const KindUtil k = it == util.end() ? KindUtil{} : it->second;
    f.push_back({absl::StrCat("util_", kind, "_mean"), absl::StrFormat("%.6f", k.mean)});
    f.push_back({absl::StrCat("util_", kind, "_max"), absl::StrFormat("%.6f", k.max)});
  }
  return f;
}

// `text` as lines of at most 100 columns, each indented by two spaces.
std::string Wrap(const std::string& text) {
  std::string out, line;
  for (const absl::string_view word : absl::StrSplit(text, ' ')) {
    if (!line.empty() && line.size() + 1 + word.size() > 98) {
      absl::StrAppend(&out, "  ", line, "\n");
      line = "  ";
    } else if (!line.empty()) {
      line += ' ';
    }
    absl::StrAppend(&line, word);
  }
  absl::StrAppend(&out, "  ", line, "\n");
  return out;
}

}  // namespace

const std::vector<std::string>& PanelNames() {
  static const std::vector<std::string> names = {"single_user_decode", "multi_user_decode",
                                                 "single_user_prefill", "multi_user_prefill"};
  return names;
}

std::vector<std::string> IssueCostProfiles(const pb::Chip& chip) {
  const pb::Pe& pe = chip.sip().cube().pe();
  std::vector<std::string> names = {pe.default_issue_cost_profile()};
  for (const pb::IssueCostProfile& p : pe.issue_cost_profiles()) {
    if (p.name() != names.front()) names.push_back(p.name());
  }
  return names;
}

absl::StatusOr<std::vector<Job>> BuildJobs(const Options& options) {
  const uint64_t decode_s = options.quick ? 4096 : options.decode_context;
  const uint64_t prefill_s = options.quick ? 512 : options.prefill_context;
  const uint32_t users = options.quick ? 2 : options.users;
  if (decode_s == 0) return absl::InvalidArgumentError("--decode_context: must be > 0 (got 0)");
  if (prefill_s == 0) return absl::InvalidArgumentError("--prefill_context: must be > 0 (got 0)");
  if (users < 2 || users > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("--users: the multi-user panels run 2 to 16 requests (got ", users, ")"));
  }
  for (const std::string& p : options.panels) {
    if (std::find(PanelNames().begin(), PanelNames().end(), p) == PanelNames().end()) {
      return absl::InvalidArgumentError(absl::StrCat("--panels: unknown panel '", p, "'; one of ",
                                                     absl::StrJoin(PanelNames(), ", ")));
    }
  }
  for (const std::string& v : options.variants) {
    bool known = false;
    for (const auto* list : {&DecodeVariants(), &PrefillVariants()}) {
      for (pb::Variant x : *list) known |= Lower(x) == v;
    }
    if (!known) {
      std::vector<std::string> names;
      for (pb::Variant x : DecodeVariants()) names.push_back(Lower(x));
      for (pb::Variant x : PrefillVariants()) {
        if (std::find(names.begin(), names.end(), Lower(x)) == names.end()) {
          names.push_back(Lower(x));
        }
      }
      return absl::InvalidArgumentError(absl::StrCat("--variants: unknown variant '", v,
                                                     "'; one of ", absl::StrJoin(names, ", ")));
    }
  }
  const auto wanted = [&](pb::Variant v) {
    return options.variants.empty() || std::find(options.variants.begin(), options.variants.end(),
                                                 Lower(v)) != options.variants.end();
  };
  std::vector<Job> jobs;
  for (const std::string& panel : PanelNames()) {
    if (!options.panels.empty() &&
        std::find(options.panels.begin(), options.panels.end(), panel) == options.panels.end()) {
      continue;
    }
    const bool decode = panel.ends_with("decode");
    const bool multi = panel.starts_with("multi");
    // §9.6: decode runs under each profile (the first: unset, the topology's default).
    const size_t profiles = decode ? std::max<size_t>(1, options.issue_cost_profiles.size()) : 1;
    for (size_t profile = 0; profile < profiles; ++profile) {
      for (pb::Variant v : decode ? DecodeVariants() : PrefillVariants()) {
        if (v == pb::BASELINE_FANOUT_GROUP && (multi || options.quick)) continue;
        if (!wanted(v)) continue;
        pb::Workload w;
        if (profile > 0) w.set_issue_cost_profile(options.issue_cost_profiles[profile]);
        w.set_kernel(decode ? pb::DECODE : pb::PREFILL);
        w.set_variant(v);
        w.set_h_q(kHq);
        w.set_h_kv(kHkv);
        w.set_d(kD);
        const uint64_t s = decode ? decode_s : prefill_s;
        if (multi) {
          for (uint64_t len : Mix(s, users, decode ? 1024 : 128)) w.add_request_lengths(len);
        } else {
          w.set_s(s);
        }
        jobs.push_back({panel, std::move(w)});
      }
    }
  }
  if (jobs.empty()) {
    return absl::InvalidArgumentError(
        "--variants: none of them runs in the chosen panels (decode variants run in the decode "
        "panels, prefill variants in the prefill panels)");
  }
  return jobs;
}

absl::Status ValidateJobs(const pb::Chip& chip, const std::vector<Job>& jobs) {
  for (const Job& job : jobs) {
    const absl::Status s = launch::ValidateWorkload(chip, job.workload);
    if (!s.ok()) {
      return WithMessage(s, absl::StrCat(s.message(), " (milestone panel ", job.panel,
                                         ", variant ", Lower(job.workload.variant()), ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<sweep::Job> PanelPoolJobs(const pb::Chip& chip, const std::vector<Job>& jobs) {
  launch::LaunchOptions launch_options;
  launch_options.keep_op_log = false;
  // A workload symmetric across CUBE sets simulates one and reports the chip (launch.h: exact
  // latency, per-PE roofline and per-kind sums; kernels/launch/one_group_test).
  launch_options.one_group = true;
  std::vector<sweep::Job> pool_jobs;
  for (const Job& job : jobs) pool_jobs.push_back({chip, job.workload, launch_options});
  return pool_jobs;
}

absl::StatusOr<std::vector<Row>> RunJobs(const pb::Chip& chip, const std::vector<Job>& jobs,
                                         const Progress& progress, int workers) {
  // Every job is validated before any runs: a refusal comes at once, naming its row.
  RETURN_IF_ERROR(ValidateJobs(chip, jobs));
  // The runs are independent: on `workers` processes at once (sweep::JobPool), results in job
  // order, so the rows never depend on the core count.
  size_t done = 0;
  uint64_t events = 0;
  const auto on_done = [&](size_t i, const pb::JobResult& result) {
    events += result.report().events();
    if (progress) progress(jobs[i], ++done, jobs.size(), events);
  };
  const std::vector<pb::JobResult> results =
      sweep::JobPool(workers).Run(PanelPoolJobs(chip, jobs), on_done);
  return RowsFrom(chip, jobs, results);
}

absl::StatusOr<std::vector<Row>> RowsFrom(const pb::Chip& chip, const std::vector<Job>& jobs,
                                          const std::vector<pb::JobResult>& results) {
  AHBM_CHECK(results.size() == jobs.size()) << results.size() << " results, " << jobs.size();
  std::vector<Row> rows;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    const pb::JobResult& result = results[i];
    if (const absl::Status s = sweep::JobStatus(result); !s.ok()) {
      return WithMessage(s, absl::StrCat(s.message(), " (milestone panel ", job.panel,
                                         ", variant ", Lower(job.workload.variant()), ")"));
    }
    Row row;
    row.panel = job.panel;
    row.variant = Lower(job.workload.variant());
    row.workload = job.workload;
    row.report = result.report();
    row.reduce_rounds = result.reduce_rounds();
    row.level2_rounds = result.level2_rounds();
    row.level1_rounds = result.level1_rounds();
    row.ring_rotations = result.ring_rotations();
    row.composites = result.composites();
    row.group_scale = std::max<uint32_t>(1, result.group_scale());
    MinimalWork(job.workload, &row.kv_min_bytes, &row.min_flops);
    rows.push_back(std::move(row));
  }
  // Ratios: to the panel's fastest baseline, and to the ideal: the ADR kernel's minimal K/V
  // bytes and FLOPs on the most PEs any row of the panel uses (the ADR kernels' placement), so
  // a row that leaves PEs idle is not flattered by an ideal on its own few PEs.
  const auto pes_of = [](const Row& r) {
    uint32_t pes = 0;
    for (const pb::UnitStats& u : r.report.units()) {
      if (u.kind() == "gemm" && u.flops() > 0) ++pes;
    }
    return pes;
  };
  std::map<std::string, uint32_t> panel_pes;
  for (const Row& row : rows) panel_pes[row.panel] = std::max(panel_pes[row.panel], pes_of(row));
  const pb::Pe& pe = chip.sip().cube().pe();
  const double hbm_bytes_per_ps =
      pe.hbm_channels() * static_cast<double>(chip.sip().cube().hbm_channel().bytes_per_cycle()) *
      chip.sip().cube().hbm_channel().clock_mhz() / 1e6;
  const double flops_per_ps =
      2.0 * pe.gemm().array_rows() * pe.gemm().array_cols() * pe.clock_mhz() / 1e6;
  for (Row& row : rows) {
    uint64_t best = 0;
    for (const Row& other : rows) {
      if (other.panel != row.panel || !other.variant.starts_with("baseline") ||
          other.report.issue_cost_profile() != row.report.issue_cost_profile()) {
        continue;
      }
      const uint64_t l = other.report.latency_ps();
      best = best == 0 ? l : std::min(best, l);
    }
    const uint32_t pes = panel_pes[row.panel];
    const double latency = static_cast<double>(row.report.latency_ps());
    row.best_baseline_ratio = best == 0 ? 0 : latency / best;
    row.ideal_pes = pes;
    if (pes > 0) {
      row.ideal_ps = static_cast<uint64_t>(std::max(row.kv_min_bytes / (pes * hbm_bytes_per_ps),
                                                    row.min_flops / (pes * flops_per_ps)));
    }
    row.ideal_ratio = row.ideal_ps == 0 ? 0 : latency / row.ideal_ps;
  }
  return rows;
}

std::string AutoPick(const pb::Report& report) {
  const std::string& s = report.workload_summary();
  const size_t at = s.find("AUTO");
  const size_t colon = s.find("): ");
  if (at == std::string::npos || colon == std::string::npos) return s;
  return s.substr(at, colon + 1 - at);
}

std::string FormatTables(const std::vector<Row>& rows) {
  std::string out;
  size_t begin = 0;  // the panel's first row
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const bool first = i == 0 || rows[i - 1].panel != r.panel;
    if (first) begin = i;
    // The panel's first profile fills the table; its next profile (if any) gives a column.
    const std::string& profile = rows[begin].report.issue_cost_profile();
    if (r.report.issue_cost_profile() != profile) continue;
    std::string other;
    const Row* twin = nullptr;
    for (size_t j = begin; j < rows.size() && rows[j].panel == r.panel; ++j) {
      const std::string& p = rows[j].report.issue_cost_profile();
      if (p == profile) continue;
      if (other.empty()) other = p;
      if (p == other && rows[j].variant == r.variant) twin = &rows[j];
    }
    if (first) {
      const std::vector<uint64_t> lengths = Lengths(r.workload);
      absl::StrAppend(&out, i == 0 ? "" : "\n", r.panel, ": S ", absl::StrJoin(lengths, ", "),
                      ", issue cost ", profile, "\n");
      absl::StrAppend(&out, absl::StrFormat("%-21s %11s %8s %7s %8s", "variant", "latency_us",
                                            "x_base", "x_roof", "x_ideal"));
      if (!other.empty()) absl::StrAppend(&out, absl::StrFormat(" %12s", other + "_us"));
      absl::StrAppend(&out, "  binding\n");
    }
    const std::string x_base =
        r.best_baseline_ratio == 0 ? "-" : absl::StrFormat("%.3f", r.best_baseline_ratio);
    const std::string x_ideal = r.ideal_ratio == 0 ? "-" : absl::StrFormat("%.3f", r.ideal_ratio);
    absl::StrAppend(&out, absl::StrFormat("%-21s %11.3f %8s %7.3f %8s", r.variant,
                                          r.report.latency_ps() / 1e6, x_base,
                                          r.report.roofline_ratio(), x_ideal));
    if (!other.empty()) {
      absl::StrAppend(&out, twin == nullptr
                                ? absl::StrFormat(" %12s", "-")
                                : absl::StrFormat(" %12.3f", twin->report.latency_ps() / 1e6));
    }
    absl::StrAppend(&out, "  ", r.report.roofline().binding_resource(), "\n");
    if (r.report.request_latency_ps_size() > 1) {
      const RequestSpread req = Spread(r.report);
      absl::StrAppend(&out,
                      absl::StrFormat("  requests min / median / max us: %.3f / %.3f / %.3f\n",
                                      req.min / 1e6, req.median / 1e6, req.max / 1e6));
    }
    if (r.variant == "auto") {
      absl::StrAppend(&out, Wrap(absl::StrCat("pick: ", AutoPick(r.report))));
    }
  }
  return out;
}

namespace {

// Every column: identity, figures, the workload's fields, tool and digests.
std::vector<std::pair<std::string, std::string>> Columns(const pb::Chip& chip, const Row& r,
                                                         const ToolInfo& tool, bool json) {
  auto str = [json](const std::string& s) { return json ? JsonString(s) : CsvField(s); };
  std::vector<std::pair<std::string, std::string>> c = {
      {"panel", str(r.panel)},
      {"variant", str(r.variant)},
      {"binding", str(r.report.roofline().binding_resource())},
      {"workload_summary", str(r.report.workload_summary())},
      {"issue_cost_profile", str(r.report.issue_cost_profile())},
      {"hbm_model", str(r.report.hbm_model())}};
  for (auto& f : Figures(r, json)) c.push_back(std::move(f));
  const google::protobuf::Descriptor* d = pb::Workload::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    c.push_back(
        {absl::StrCat("w_", d->field(i)->name()), FieldText(r.workload, d->field(i), json)});
  }
  c.push_back({"tool_version", str(tool.version)});
  c.push_back({"tool_commit", str(tool.commit)});
  c.push_back({"topology", str(chip.name())});
  c.push_back({"topology_digest", str(observe::MessageDigest(chip))});
  c.push_back({"workload_digest", str(observe::MessageDigest(r.workload))});
  return c;
}

}  // namespace

std::string ToCsv(const pb::Chip& chip, const std::vector<Row>& rows, const ToolInfo& tool) {
  std::string out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto cols = Columns(chip, rows[i], tool, /*json=*/false);
    if (i == 0) {
      std::vector<std::string> names;
      for (const auto& [name, value] : cols) names.push_back(name);
      absl::StrAppend(&out, absl::StrJoin(names, ","), "\n");
    }
    std::vector<std::string> values;
    for (const auto& [name, value] : cols) values.push_back(value);
    absl::StrAppend(&out, absl::StrJoin(values, ","), "\n");
  }
  return out;
}

std::string ToJson(const pb::Chip& chip, const std::vector<Row>& rows, const ToolInfo& tool) {
  std::string out = "{\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<std::string> fields;
    for (const auto& [name, value] : Columns(chip, rows[i], tool, /*json=*/true)) {
      fields.push_back(absl::StrCat("\"", name, "\": ", value));
    }
    absl::StrAppend(&out, i == 0 ? "\n" : ",\n", "    {", absl::StrJoin(fields, ", "), "}");
  }
  absl::StrAppend(&out, "\n  ]\n}\n");
  return out;
}

}  // namespace ahbm::milestone
