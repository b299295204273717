// Mutual TLS for workers and clients (CAF's OpenSSL module): the three files each side needs
// and their checks before anything listens or connects.
//
// Contract: CheckTls(files, flag_prefix) returns OK for no files at all (plain, loopback only)
// and for a certificate, key and CA file that each read and parse and whose key matches the
// certificate (CAF loads them at the first connection and a mismatched pair then ends the
// process); otherwise InvalidArgument naming the flag: "--tls_key: does not match the
// certificate in <path>", "--tls_cert: given without --tls_key and --tls_ca" ...
// Apply(files, cfg) sets CAF's openssl.certificate / key / cafile options.
#ifndef AHBMSIM_CLUSTER_TLS_H_
#define AHBMSIM_CLUSTER_TLS_H_

#include <string>

#include "absl/status/status.h"
#include "caf/actor_system_config.hpp"

namespace ahbm::cluster {

struct TlsFiles {
  std::string cert, key, ca;
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

absl::Status CheckTls(const TlsFiles& files);
void ApplyTls(const TlsFiles& files, caf::actor_system_config& cfg);

}  // namespace ahbm::cluster

#endif  // AHBMSIM_CLUSTER_TLS_H_
