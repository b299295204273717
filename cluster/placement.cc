#include "cluster/placement.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "cluster/cluster_runner.h"
#include "cluster/protocol.h"
#include "base/status_macros.h"
#include "sweep/job.h"

namespace ahbm::cluster {

namespace {

constexpr const char* kPlacementFlags[] = {"jobs",     "workers", "local",  "worker_timeout",
                                           "tls_cert", "tls_key", "tls_ca", "shard",
                                           "resume"};

std::string List(const std::vector<size_t>& jobs) {
  const size_t shown = std::min<size_t>(jobs.size(), 20);
  std::string out = absl::StrJoin(jobs.begin(), jobs.begin() + shown, ", ");
  if (jobs.size() > shown) absl::StrAppend(&out, " and ", jobs.size() - shown, " more");
  return out;
}

// RunMode::plan: counts the jobs, runs none (each result ABORTED "planned, not run").
class PlanRunner : public sweep::Runner {
 public:
  explicit PlanRunner(size_t* count) : count_(count) {}
  std::vector<pb::JobResult> RunNamed(const std::vector<sweep::Job>& jobs,
                                      const std::vector<size_t>&, const Done&) override {
    *count_ = jobs.size();
    pb::JobResult planned;
    planned.set_status_code(static_cast<int32_t>(absl::StatusCode::kAborted));
    planned.set_status_message("planned, not run");
    return std::vector<pb::JobResult>(jobs.size(), planned);
  }

 private:
  size_t* count_;
};

}  // namespace

std::vector<cli::FlagSpec> PlacementFlags() {
  return {
      {"jobs", "simulations at once on this machine, one process each (no figure depends on it)",
       absl::StrCat(sweep::DefaultWorkers(), " (the machine's cores)")},
      {"workers",
       "comma-separated host:port of `ahbm worker`s to run jobs on as well (README: several "
       "machines)",
       ""},
      {"local", "with --workers: also run jobs on this machine's cores", "true",
       /*boolean=*/true},
      {"worker_timeout", "seconds a worker may take to answer one job before its jobs run "
                         "elsewhere", "600"},
      {"tls_cert", "with --workers off loopback: this client's certificate (PEM)", ""},
      {"tls_key", "its private key (PEM, no passphrase)", ""},
      {"tls_ca", "the CA certificate (PEM) the workers' certificates are signed by", ""},
      {"shard",
       "i/n: run only the jobs whose index % n == i and keep their results in --out_dir's "
       "jobs/; `ahbm merge` joins the n folders into the report",
       ""},
      {"resume", "take the results already in --out_dir's jobs/ and run only the rest", "false",
       /*boolean=*/true},
  };
}

bool IsPlacementFlag(std::string_view name) {
  for (const char* flag : kPlacementFlags) {
    if (name == flag) return true;
  }
  return false;
}

std::vector<std::string> CommandArgs(const cli::ParsedFlags& flags) {
  std::vector<std::string> args;
  for (const auto& [name, value] : flags.values()) {
    if (IsPlacementFlag(name) || name == "out_dir" || name == "out" || name == "json") continue;
    args.push_back(absl::StrCat("--", name, "=", value));
  }
  for (const auto& [name, value] : flags.repeated()) {
    args.push_back(absl::StrCat("--", name, "=", value));
  }
  return args;
}

absl::StatusOr<int> JobsFlag(const cli::ParsedFlags& flags) {
  int jobs = sweep::DefaultWorkers();
  if (const std::optional<std::string> text = flags.Get("jobs")) {
    if (!absl::SimpleAtoi(*text, &jobs) || jobs < 1 || jobs > 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat("--jobs: must be an integer from 1 to 1024 (got '", *text, "')"));
    }
  }
  return jobs;
}

Placement::~Placement() = default;

absl::StatusOr<std::unique_ptr<Placement>> MakePlacement(const cli::ParsedFlags& flags,
                                                        const PlacementRequest& request) {
  auto placement = std::unique_ptr<Placement>(new Placement());
  placement->out_dir_ = request.out_dir;
  ASSIGN_OR_RETURN(const int jobs, JobsFlag(flags));
  absl::StatusOr<bool> local = cli::BoolFlag(flags, "local", true);
  RETURN_IF_ERROR(local.status());
  absl::StatusOr<bool> resume = cli::BoolFlag(flags, "resume");
  RETURN_IF_ERROR(resume.status());
  double timeout_s = 600;
  if (const std::optional<std::string> text = flags.Get("worker_timeout")) {
    if (!absl::SimpleAtod(*text, &timeout_s) || !std::isfinite(timeout_s) || timeout_s <= 0 ||
        timeout_s > 7 * 24 * 3600) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--worker_timeout: must be seconds, more than 0 and at most a week (got '", *text,
          "')"));
    }
  }
  if (const std::optional<std::string> text = flags.Get("shard")) {
    absl::StatusOr<sweep::Shard> shard = sweep::ParseShard(*text);
    RETURN_IF_ERROR(shard.status());
    placement->shard_ = *shard;
  }
  if (request.out_dir.empty() && (placement->shard_.count > 0 || *resume)) {
    return absl::InvalidArgumentError(absl::StrCat(
        placement->shard_.count > 0 ? "--shard" : "--resume",
        ": needs --out_dir (the folder that keeps the jobs' results)"));
  }
  std::vector<std::string> workers;
  if (const std::optional<std::string> text = flags.Get("workers"); text && !text->empty()) {
    workers = absl::StrSplit(*text, ',');
  }
  if (workers.empty()) {
    if (!*local) return absl::InvalidArgumentError("--local: false needs --workers");
    for (const char* flag : {"tls_cert", "tls_key", "tls_ca", "worker_timeout"}) {
      if (flags.Get(flag)) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag, ": only with --workers"));
      }
    }
  }
  if (request.mode.plan != nullptr) {
    placement->planner_ = std::make_unique<PlanRunner>(request.mode.plan);
    placement->top_ = placement->planner_.get();
    return placement;
  }
  sweep::Runner* inner = nullptr;
  if (!request.mode.merge) {
    if (workers.empty()) {
      placement->pool_ = std::make_unique<sweep::JobPool>(jobs);
      inner = placement->pool_.get();
    } else {
      ClusterOptions options;
      options.workers = workers;
      options.local_slots = *local ? jobs : 0;
      options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
      options.tls = {flags.GetOr("tls_cert", ""), flags.GetOr("tls_key", ""),
                     flags.GetOr("tls_ca", "")};
      absl::StatusOr<std::unique_ptr<ClusterRunner>> cluster = ClusterRunner::Create(options);
      RETURN_IF_ERROR(cluster.status());
      placement->cluster_ = *std::move(cluster);
      inner = placement->cluster_.get();
    }
  }
  if (request.out_dir.empty()) {
    placement->top_ = inner;
    return placement;
  }
  pb::StoreManifest manifest;
  manifest.set_command(request.command);
  for (std::string& arg : CommandArgs(flags)) manifest.add_args(std::move(arg));
  manifest.set_build_digest(BuildDigest());
  manifest.set_schema_digest(sweep::SchemaDigest());
  sweep::StoreOptions store{request.out_dir, *resume || request.mode.merge, request.mode.merge,
                            placement->shard_};
  absl::StatusOr<std::unique_ptr<sweep::StoreRunner>> runner =
      sweep::StoreRunner::Create(inner, store, std::move(manifest));
  RETURN_IF_ERROR(runner.status());
  placement->store_ = *std::move(runner);
  placement->top_ = placement->store_.get();
  return placement;
}

std::string Placement::ProgressNote() const {
  return cluster_ ? absl::StrCat("jobs per worker: ", cluster_->Tally()) : "";
}

absl::Status Placement::Finish(const std::vector<pb::JobResult>& results) const {
  if (planner_) return absl::OkStatus();
  if (cluster_) std::fprintf(stderr, "cluster: %s\n", cluster_->Summary().c_str());
  if (store_ && store_->taken() > 0) {
    std::fprintf(stderr, "store: %zu jobs taken from %s, %zu run\n", store_->taken(),
                 sweep::StoreFolder(out_dir_).c_str(), store_->ran());
  }
  if (store_ && !store_->missing().empty()) {
    return absl::NotFoundError(absl::StrCat("no result for jobs ", List(store_->missing()),
                                            " in the folders given (a shard cut short)"));
  }
  std::vector<size_t> lost;
  std::string why;
  for (size_t i = 0; i < results.size(); ++i) {
    const pb::JobResult& r = results[i];
    if (r.status_code() != static_cast<int32_t>(absl::StatusCode::kAborted)) continue;
    if (shard_.count > 0 && i % shard_.count != shard_.index) continue;  // another shard's
    lost.push_back(i);
    if (why.empty()) why = r.status_message();
  }
  if (!lost.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "jobs ", List(lost), " not done (", why, ")",
        out_dir_.empty() ? "" : "; the others are kept: run again with --resume"));
  }
  if (store_ && !store_->write_status().ok()) return store_->write_status();
  if (partial()) {
    std::fprintf(stderr, "shard %u/%u: %zu jobs run, results in %s; join the shards with "
                 "ahbm merge\n", shard_.index, shard_.count, store_->ran() + store_->taken(),
                 sweep::StoreFolder(out_dir_).c_str());
  }
  return absl::OkStatus();
}

}  // namespace ahbm::cluster
