#include "cluster/worker.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "caf/all.hpp"
#include "caf/io/all.hpp"
#include "caf/openssl/all.hpp"
#include "cluster/job_runner.h"
#include "cluster/placement.h"
#include "cluster/protocol.h"
#include "cluster/tls.h"
#include "sweep/job.h"
#include "sweep/job_pool.h"

namespace ahbm::cluster {

namespace {

// Jobs beyond --jobs at once (another client's, or a killed client's still running) wait here.
inline constexpr size_t kMaxWaitingJobs = 4096;

struct WaitingJob {
  caf::response_promise promise;
  uint64_t index;
  std::string bytes;
};

struct WorkerState {
  WorkerConfig config;
  uint32_t running = 0;
  std::deque<WaitingJob> waiting;
  uint64_t taken = 0;
  std::set<caf::node_id> clients;
};

using JobResultOrPromise = caf::result<job_atom, uint64_t, bool, std::string>;

void Log(const std::string& line) {
  std::fprintf(stderr, "ahbm worker: %s\n", line.c_str());
  std::fflush(stderr);
}

// Starts waiting jobs while fewer than --jobs run, each on its own job runner (job_runner.h).
void StartWaiting(caf::stateful_actor<WorkerState>* self) {
  WorkerState& st = self->state;
  while (st.running < st.config.slots && !st.waiting.empty()) {
    WaitingJob job = std::move(st.waiting.front());
    st.waiting.pop_front();
    ++st.running;
    const uint64_t index = job.index;
    self->request(SpawnJobRunner(self->system()), caf::infinite, job_atom::value, index,
                  std::move(job.bytes))
        .then(
            [self, promise = job.promise](job_atom, uint64_t i, bool ok,
                                          std::string& payload) mutable {
              --self->state.running;
              promise.deliver(job_atom::value, i, ok, std::move(payload));
              StartWaiting(self);
            },
            [self, promise = job.promise, index](caf::error& error) mutable {
              --self->state.running;
              promise.deliver(job_atom::value, index, false,
                              absl::StrCat("job ", index, ": ", self->system().render(error)));
              StartWaiting(self);
            });
  }
}

caf::behavior Worker(caf::stateful_actor<WorkerState>* self, WorkerConfig config) {
  self->state.config = std::move(config);
  return {
      [self](hello_atom, const std::string& build, const std::string& schema)
          -> std::tuple<hello_atom, bool, std::string, uint32_t, std::string> {
        WorkerState& st = self->state;
        std::string reason;
        if (build != st.config.build) {
          reason = absl::StrCat("build digest ", build, " differs from the worker's ",
                                st.config.build, " (run the same ahbm build on both)");
        } else if (schema != st.config.schema) {
          reason = absl::StrCat("schema digest ", schema, " differs from the worker's ",
                                st.config.schema);
        }
        const caf::node_id node =
            self->current_sender() ? self->current_sender()->node() : caf::node_id{};
        if (!reason.empty()) {
          Log(absl::StrCat("refused a client: ", reason));
          return {hello_atom::value, false, reason, 0, st.config.build};
        }
        st.clients.insert(node);
        Log(absl::StrCat("client ", caf::to_string(node), " accepted"));
        return {hello_atom::value, true, "", st.config.slots, st.config.build};
      },
      [self](job_atom, uint64_t index, std::string& bytes) -> JobResultOrPromise {
        WorkerState& st = self->state;
        const auto refuse = [index](const std::string& why) {
          return JobResultOrPromise(job_atom::value, index, false,
                                    absl::StrCat("job ", index, ": ", why));
        };
        const caf::node_id node =
            self->current_sender() ? self->current_sender()->node() : caf::node_id{};
        if (!st.clients.contains(node)) return refuse("refused: no hello from this client");
        if (bytes.size() > kMaxJobBytes) {
          return refuse(absl::StrCat(bytes.size(), " bytes, above the limit of ", kMaxJobBytes));
        }
        if (st.waiting.size() >= kMaxWaitingJobs) {
          return refuse(absl::StrCat("refused: ", st.waiting.size(), " jobs already waiting"));
        }
        ++st.taken;
        Log(absl::StrCat("took job ", index, " (", st.taken, " taken)"));
        if (st.config.exit_after != 0 && st.taken >= st.config.exit_after) {
          Log(absl::StrCat("exiting after ", st.taken, " jobs (--exit_after_jobs)"));
          std::_Exit(0);
        }
        st.waiting.push_back({self->make_response_promise(), index, std::move(bytes)});
        StartWaiting(self);
        return caf::delegated<job_atom, uint64_t, bool, std::string>();
      },
  };
}

}  // namespace

caf::actor SpawnWorker(caf::actor_system& system, const WorkerConfig& config) {
  return system.spawn(Worker, config);
}

absl::StatusOr<HostPort> ParseHostPort(const std::string& flag, const std::string& text,
                                       bool allow_port_zero) {
  const size_t colon = text.rfind(':');
  HostPort out;
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", text, "' is not host:port"));
  }
  out.host = text.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &port) || port > 65535 ||
      (port == 0 && !allow_port_zero)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": '", text, "' has no valid port (1-65535", allow_port_zero ? ", or 0" : "",
        ")"));
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

std::vector<cli::FlagSpec> WorkerFlags() {
  return {
      {"listen",
       "ADDR:PORT to listen on (port 0: any free one); not loopback requires the --tls_ flags",
       "127.0.0.1:0"},
      {"tls_cert", "this worker's certificate (PEM), signed by --tls_ca", ""},
      {"tls_key", "its private key (PEM, no passphrase); must match --tls_cert", ""},
      {"tls_ca", "the CA certificate (PEM) a client's certificate must be signed by", ""},
      {"jobs", "jobs at once, one process each",
       absl::StrCat(sweep::DefaultWorkers(), " (the machine's cores)")},
      {"port_file", "write the port listened on here", ""},
      {"exit_after_jobs", "tests: exit at once when the k-th job arrives (0: never)", "0"},
      {"build_digest", "tests: announce this build digest instead of the binary's", ""},
  };
}

absl::Status RunWorker(const cli::ParsedFlags& flags) {
  absl::StatusOr<HostPort> listen =
      ParseHostPort("listen", flags.GetOr("listen", "127.0.0.1:0"), /*allow_port_zero=*/true);
  RETURN_IF_ERROR(listen.status());
  const TlsFiles tls{flags.GetOr("tls_cert", ""), flags.GetOr("tls_key", ""),
                     flags.GetOr("tls_ca", "")};
  RETURN_IF_ERROR(CheckTls(tls));
  if (!tls.enabled() && !IsLoopback(listen->host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen: ", listen->host, " is not loopback: give --tls_cert, --tls_key and --tls_ca "
        "(mutual TLS) to listen there"));
  }
  ASSIGN_OR_RETURN(const int slots, JobsFlag(flags));
  uint64_t exit_after = 0;
  if (const std::optional<std::string> text = flags.Get("exit_after_jobs");
      text && !absl::SimpleAtoi(*text, &exit_after)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--exit_after_jobs: must be a non-negative integer (got '", *text, "')"));
  }
  sweep::UseJobProgram("/proc/self/exe");  // no fork while CAF's threads run (job_pool.h)
  WorkerConfig config;
  config.slots = static_cast<uint32_t>(slots);
  config.exit_after = exit_after;
  config.build = flags.GetOr("build_digest", "");
  if (config.build.empty()) config.build = BuildDigest();
  config.schema = sweep::SchemaDigest();
  const std::string port_file = flags.GetOr("port_file", "");

  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  if (tls.enabled()) {
    cfg.load<caf::openssl::manager>();
    ApplyTls(tls, cfg);
  }
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system system{cfg};
  caf::actor worker = SpawnWorker(system, config);
  const caf::expected<uint16_t> port =
      tls.enabled() ? caf::openssl::publish(worker, listen->port, listen->host.c_str(), true)
                    : system.middleman().publish(worker, listen->port, listen->host.c_str(), true);
  if (!port) {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    return absl::InvalidArgumentError(absl::StrCat("--listen: cannot listen on ", listen->host,
                                                   ":", listen->port, ": ",
                                                   system.render(port.error())));
  }
  if (!port_file.empty()) {
    std::ofstream out(port_file, std::ios::trunc);
    out << *port << "\n";
    out.close();
    if (!out) {
      caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
      return absl::InvalidArgumentError(absl::StrCat("--port_file: cannot write ", port_file));
    }
  }
  Log(absl::StrCat("listening on ", listen->host, ":", *port, " (",
                   tls.enabled() ? "mutual TLS" : "plain, loopback", "), ", config.slots,
                   " jobs at once, build ", config.build, ", schema ", config.schema));
  caf::scoped_actor waiter{system};
  waiter->monitor(worker);
  waiter->receive([](const caf::down_msg&) {});
  return absl::OkStatus();
}

}  // namespace ahbm::cluster
