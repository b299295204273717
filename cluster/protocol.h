// What a client and an `ahbm worker` say to each other over CAF's network layer (caf::io,
// with CAF's OpenSSL module off loopback). Every message is a request with a reply:
//
//   (hello_atom, build_digest, schema_digest)
//       -> (hello_atom, accepted, reason, slots, worker_build_digest)
//   (job_atom, index, JobSpec bytes)
//       -> (job_atom, index, ok, JobResult bytes when ok, else the refusal in one line)
//
// A job from a node that has not passed the hello is refused. The digests: BuildDigest() (the
// executable's bytes: two builds of other code or flags differ) and sweep::SchemaDigest()
// (job.proto and what it imports).
#ifndef AHBMSIM_CLUSTER_PROTOCOL_H_
#define AHBMSIM_CLUSTER_PROTOCOL_H_

#include <string>

#include "caf/atom.hpp"

namespace ahbm::cluster {

using hello_atom = caf::atom_constant<caf::atom("hello")>;
using job_atom = caf::atom_constant<caf::atom("job")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using run_atom = caf::atom_constant<caf::atom("run")>;

// 16 hex digits over /proc/self/exe's bytes ("unknown" when it cannot be read), computed once.
const std::string& BuildDigest();

// A job's wire size above which a worker refuses it (a full-chip JobSpec is ~10 KiB).
inline constexpr size_t kMaxJobBytes = 64 << 20;

}  // namespace ahbm::cluster

#endif  // AHBMSIM_CLUSTER_PROTOCOL_H_
