#include "cluster/job_runner.h"

#include <cstdint>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "caf/all.hpp"
#include "cluster/protocol.h"
#include "proto/job.pb.h"
#include "sweep/job.h"
#include "sweep/job_pool.h"

namespace ahbm::cluster {

namespace {

std::tuple<job_atom, uint64_t, bool, std::string> RunOne(uint64_t index,
                                                         const std::string& bytes) {
  pb::JobSpec spec;
  if (bytes.size() > kMaxJobBytes) {
    return {job_atom::value, index, false,
            absl::StrCat("job ", index, ": ", bytes.size(), " bytes, above the limit of ",
                         kMaxJobBytes)};
  }
  if (!spec.ParseFromString(bytes)) {
    return {job_atom::value, index, false,
            absl::StrCat("job ", index, ": not a JobSpec (", bytes.size(), " bytes)")};
  }
  absl::StatusOr<sweep::Job> job = sweep::FromSpec(spec);
  if (!job.ok()) {
    return {job_atom::value, index, false,
            absl::StrCat("job ", index, ": ", job.status().message())};
  }
  return {job_atom::value, index, true, sweep::ExecuteInChild(*job, index).SerializeAsString()};
}

// A class, not a function: CAF 0.17 spawns an argument-less function actor through a null
// std::shared_ptr<std::tuple<>> that it dereferences (UBSan: reference binding to null).
class JobRunner : public caf::event_based_actor {
 public:
  explicit JobRunner(caf::actor_config& config) : caf::event_based_actor(config) {}

  caf::behavior make_behavior() override {
    return {
        [this](job_atom, uint64_t index, const std::string& bytes) {
          quit();
          return RunOne(index, bytes);
        },
    };
  }
};

}  // namespace

caf::actor SpawnJobRunner(caf::actor_system& system) {
  return system.spawn<JobRunner, caf::detached>();
}

}  // namespace ahbm::cluster
