// `ahbm worker`: a process that takes simulation jobs from clients (`ahbm sweep` and
// `ahbm milestone` with --workers) over CAF's network layer and answers with their results.
//
// Contract:
// - --listen=ADDR:PORT (port 0: a free one). Loopback (127.0.0.0/8, ::1, localhost) may be
//   plain; any other address requires mutual TLS (--tls_cert, --tls_key, --tls_ca), checked
//   before listening (the key must match the certificate): a peer without a certificate of
//   that CA fails in the TLS handshake and never reaches the actor. Refusals exit 2 with one
//   line. Once listening it prints "ahbm worker: listening on ADDR:PORT (...)" on stderr and
//   writes the port to --port_file when given.
// - A client first passes the hello (protocol.h): build and schema digests equal, else it is
//   refused with one line naming both digests. Jobs from a node that did not pass it, above
//   kMaxJobBytes or malformed are refused with a reason; each job runs in a forked child
//   (job_runner.h), --jobs at once, the rest wait in arrival order (another client's, or jobs
//   of a killed client still running; 4096 at most, then refused). One line on stderr per
//   client accepted and job taken.
// - --exit_after_jobs=k: the worker exits at once when its k-th job arrives, answering none
//   still running (stands in for a machine that dies; tests of the client's re-runs).
// - --build_digest=X announces X instead of the binary's own digest (tests of the refusal).
#ifndef AHBMSIM_CLUSTER_WORKER_H_
#define AHBMSIM_CLUSTER_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "caf/actor.hpp"
#include "caf/actor_system.hpp"
#include "cli/flags.h"

namespace ahbm::cluster {

struct WorkerConfig {
  uint32_t slots = 1;       // jobs at once
  uint64_t exit_after = 0;  // --exit_after_jobs (0: never)
  std::string build;        // the build digest it compares and announces
  std::string schema;       // sweep::SchemaDigest()
};

// The worker's actor (the protocol of protocol.h), for RunWorker to publish and tests to call.
caf::actor SpawnWorker(caf::actor_system& system, const WorkerConfig& config);

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// "host:port" ("[::1]:port" for IPv6); InvalidArgument "--<flag>: ..." otherwise.
absl::StatusOr<HostPort> ParseHostPort(const std::string& flag, const std::string& text,
                                       bool allow_port_zero);
bool IsLoopback(const std::string& host);

std::vector<cli::FlagSpec> WorkerFlags();
absl::Status RunWorker(const cli::ParsedFlags& flags);

}  // namespace ahbm::cluster

#endif  // AHBMSIM_CLUSTER_WORKER_H_
