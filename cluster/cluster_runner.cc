#include "cluster/cluster_runner.h"

#include <cstdio>
#include <deque>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "caf/all.hpp"
#include "caf/io/all.hpp"
#include "caf/openssl/all.hpp"
#include "cluster/job_runner.h"
#include "cluster/protocol.h"
#include "cluster/worker.h"
#include "proto/job.pb.h"
#include "sweep/job.h"
#include "sweep/job_pool.h"

namespace ahbm::cluster {

namespace {

void Log(const std::string& line) {
  std::fprintf(stderr, "cluster: %s\n", line.c_str());
  std::fflush(stderr);
}

struct Slot {
  std::string name;
  caf::actor actor;  // a remote worker; null for this machine's cores
  uint32_t capacity = 0;
  std::set<size_t> inflight;  // positions in the job list
  bool alive = true;
  size_t jobs_done = 0;
  std::string lost;
};

// One RunNamed call, owned by the calling thread, which waits while the coordinator works.
struct RunState {
  const std::vector<size_t>* names = nullptr;
  const sweep::Runner::Done* on_done = nullptr;
  std::vector<std::string> specs;  // serialized JobSpecs ("" when the job has none)
  std::vector<pb::JobResult> results;
  std::vector<bool> done;
  size_t remaining = 0;
  std::deque<size_t> queue;
  std::vector<Slot>* slots = nullptr;
  std::chrono::milliseconds timeout{0};
  std::vector<std::pair<size_t, std::string>>* reruns = nullptr;
};

struct CoordinatorState {
  RunState* run = nullptr;
  caf::response_promise finished;
};

using Coordinator = caf::stateful_actor<CoordinatorState>;

void Dispatch(Coordinator* self);

void Finish(Coordinator* self) {
  RunState& run = *self->state.run;
  std::vector<std::string> losses;
  for (const Slot& slot : *run.slots) {
    if (!slot.lost.empty()) losses.push_back(absl::StrCat(slot.name, ": ", slot.lost));
  }
  for (size_t pos = 0; pos < run.done.size(); ++pos) {
    if (run.done[pos]) continue;
    run.results[pos] = sweep::FailedResult(absl::AbortedError(
        absl::StrCat("job ", (*run.names)[pos], ": not done: no worker left (",
                     absl::StrJoin(losses, "; "), ")")));
  }
  self->state.finished.deliver(true);
  self->quit();
}

void Complete(Coordinator* self, size_t pos, pb::JobResult result) {
  RunState& run = *self->state.run;
  if (run.done[pos]) return;
  run.done[pos] = true;
  run.results[pos] = std::move(result);
  --run.remaining;
  if (*run.on_done) (*run.on_done)((*run.names)[pos], run.results[pos]);
}

void Lose(Coordinator* self, size_t slot_index, const std::string& why) {
  RunState& run = *self->state.run;
  Slot& slot = (*run.slots)[slot_index];
  if (!slot.alive) return;
  slot.alive = false;
  slot.lost = why;
  std::vector<size_t> back;
  for (size_t pos : slot.inflight) {
    if (!run.done[pos]) back.push_back(pos);
  }
  slot.inflight.clear();
  std::vector<std::string> listed;
  for (auto it = back.rbegin(); it != back.rend(); ++it) run.queue.push_front(*it);
  for (size_t pos : back) {
    run.reruns->push_back({(*run.names)[pos], slot.name});
    listed.push_back(absl::StrCat((*run.names)[pos]));
  }
  Log(absl::StrCat("worker ", slot.name, " lost (", why, ")",
                   listed.empty() ? "" : absl::StrCat("; jobs ", absl::StrJoin(listed, ", "),
                                                      " run elsewhere")));
  if (slot.actor) self->demonitor(slot.actor);
}

void OnAnswer(Coordinator* self, size_t slot_index, size_t pos, bool ok, std::string& payload) {
  RunState& run = *self->state.run;
  Slot& slot = (*run.slots)[slot_index];
  if (!slot.alive) return;  // a late answer of a lost worker: its jobs ran elsewhere
  slot.inflight.erase(pos);
  pb::JobResult result;
  const size_t name = (*run.names)[pos];
  if (!ok) {
    result = sweep::FailedResult(absl::InternalError(
        absl::StrCat("worker ", slot.name, " refused it: ", payload)));
  } else if (!result.ParseFromString(payload)) {
    result = sweep::FailedResult(absl::InternalError(
        absl::StrCat("job ", name, ": worker ", slot.name, " sent a result cut short")));
  }
  ++slot.jobs_done;
  Complete(self, pos, std::move(result));
}

void Dispatch(Coordinator* self) {
  RunState& run = *self->state.run;
  bool any_alive = false;
  for (size_t s = 0; s < run.slots->size(); ++s) {
    Slot& slot = (*run.slots)[s];
    if (!slot.alive) continue;
    any_alive = true;
    while (slot.inflight.size() < slot.capacity && !run.queue.empty()) {
      const size_t pos = run.queue.front();
      run.queue.pop_front();
      if (run.done[pos]) continue;
      slot.inflight.insert(pos);
      const uint64_t name = (*run.names)[pos];
      const caf::actor target = slot.actor ? slot.actor : SpawnJobRunner(self->system());
      const auto timeout =
          slot.actor ? caf::duration(run.timeout) : caf::duration(caf::infinite);
      self->request(target, timeout, job_atom::value, name, run.specs[pos])
          .then(
              [self, s, pos](job_atom, uint64_t, bool ok, std::string& payload) {
                OnAnswer(self, s, pos, ok, payload);
                Dispatch(self);
              },
              [self, s](caf::error& error) {
                Lose(self, s, error == caf::sec::request_timeout
                                  ? "no answer in time (--worker_timeout)"
                                  : self->system().render(error));
                Dispatch(self);
              });
    }
  }
  if (run.remaining == 0 || !any_alive) Finish(self);
}

caf::behavior CoordinatorBehavior(Coordinator* self, RunState* run) {
  self->state.run = run;
  self->set_down_handler([self](caf::down_msg& down) {
    RunState& r = *self->state.run;
    for (size_t s = 0; s < r.slots->size(); ++s) {
      if ((*r.slots)[s].actor && (*r.slots)[s].actor.address() == down.source) {
        Lose(self, s, absl::StrCat("connection lost: ", self->system().render(down.reason)));
      }
    }
    Dispatch(self);
  });
  return {
      [self](run_atom) {
        self->state.finished = self->make_response_promise();
        RunState& r = *self->state.run;
        for (const Slot& slot : *r.slots) {
          if (slot.actor && slot.alive) self->monitor(slot.actor);
        }
        Dispatch(self);
        return caf::delegated<bool>();
      },
  };
}

}  // namespace

struct ClusterRunner::Impl {
  ClusterOptions options;
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> system;
  std::vector<Slot> slots;

  ~Impl() {
    for (Slot& slot : slots) slot.actor = nullptr;
    system.reset();
  }
};

ClusterRunner::ClusterRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterRunner::~ClusterRunner() = default;

absl::StatusOr<std::unique_ptr<ClusterRunner>> ClusterRunner::Create(
    const ClusterOptions& options) {
  RETURN_IF_ERROR(CheckTls(options.tls));
  std::vector<HostPort> addresses;
  for (const std::string& text : options.workers) {
    absl::StatusOr<HostPort> address = ParseHostPort("workers", text, false);
    RETURN_IF_ERROR(address.status());
    if (!options.tls.enabled() && !IsLoopback(address->host)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--workers: ", text, " is not loopback: give --tls_cert, --tls_key and --tls_ca "
          "(workers off this machine speak mutual TLS only)"));
    }
    addresses.push_back(*address);
  }
  sweep::UseJobProgram("/proc/self/exe");  // no fork while CAF's threads run (job_pool.h)
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->cfg = std::make_unique<caf::actor_system_config>();
  impl->cfg->load<caf::io::middleman>();
  if (options.tls.enabled()) {
    impl->cfg->load<caf::openssl::manager>();
    ApplyTls(options.tls, *impl->cfg);
  }
  impl->cfg->set("scheduler.max-threads", 2);
  impl->system = std::make_unique<caf::actor_system>(*impl->cfg);
  caf::actor_system& system = *impl->system;
  // Reaching a worker and its hello: a live one answers in milliseconds, so a frozen one
  // is not waited for as long as a job may take.
  const std::chrono::milliseconds hello_timeout =
      std::min(options.timeout, std::chrono::milliseconds(30000));
  std::vector<std::string> unreached;
  {
    caf::scoped_actor self{system};
    const caf::io::middleman_actor manager = options.tls.enabled()
                                                 ? system.openssl_manager().actor_handle()
                                                 : system.middleman().actor_handle();
    for (size_t w = 0; w < addresses.size(); ++w) {
      const std::string& name = options.workers[w];
      caf::actor worker;
      std::string why;
      self->request(manager, hello_timeout, caf::connect_atom::value, addresses[w].host,
                    addresses[w].port)
          .receive(
              [&](const caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>&) {
                worker = caf::actor_cast<caf::actor>(std::move(ptr));
                if (!worker) why = "no actor published there";
              },
              [&](caf::error& error) { why = system.render(error); });
      if (!worker) {
        Log(absl::StrCat("worker ", name, " not reached (", why, "); going on without it"));
        unreached.push_back(absl::StrCat(name, ": ", why));
        continue;
      }
      uint32_t slots = 0;
      std::string refused;
      self->request(worker, hello_timeout, hello_atom::value, BuildDigest(),
                    sweep::SchemaDigest())
          .receive(
              [&](hello_atom, bool accepted, std::string& reason, uint32_t offered,
                  std::string&) {
                if (!accepted) refused = reason;
                slots = offered;
              },
              [&](caf::error& error) { why = system.render(error); });
      if (!refused.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--workers: ", name, " refused this client: ", refused));
      }
      if (slots == 0) {
        Log(absl::StrCat("worker ", name, " did not answer the hello (", why,
                         "); going on without it"));
        unreached.push_back(absl::StrCat(name, ": ", why));
        continue;
      }
      impl->slots.push_back(Slot{name, worker, slots});
    }
  }
  if (options.local_slots > 0) {
    impl->slots.push_back(Slot{"local", caf::actor{}, static_cast<uint32_t>(options.local_slots)});
  }
  if (impl->slots.empty()) {
    return absl::UnavailableError(absl::StrCat("--workers: none reached (",
                                               absl::StrJoin(unreached, "; "),
                                               ") and --local=false"));
  }
  return std::unique_ptr<ClusterRunner>(new ClusterRunner(std::move(impl)));
}

std::vector<pb::JobResult> ClusterRunner::RunNamed(const std::vector<sweep::Job>& jobs,
                                                   const std::vector<size_t>& names,
                                                   const Done& on_done) {
  RunState run;
  run.names = &names;
  run.on_done = &on_done;
  run.results.resize(jobs.size());
  run.done.assign(jobs.size(), false);
  run.slots = &impl_->slots;
  run.timeout = impl_->options.timeout;
  run.reruns = &reruns_;
  for (size_t pos = 0; pos < jobs.size(); ++pos) {
    absl::StatusOr<pb::JobSpec> spec = sweep::ToSpec(jobs[pos]);
    if (!spec.ok()) {
      run.specs.emplace_back();
      run.done[pos] = true;
      run.results[pos] = sweep::FailedResult(spec.status());
      if (on_done) on_done(names[pos], run.results[pos]);
      continue;
    }
    run.specs.push_back(spec->SerializeAsString());
    run.queue.push_back(pos);
    ++run.remaining;
  }
  if (run.remaining == 0) return run.results;
  caf::actor_system& system = *impl_->system;
  caf::actor coordinator = system.spawn(CoordinatorBehavior, &run);
  caf::scoped_actor self{system};
  self->request(coordinator, caf::infinite, run_atom::value)
      .receive([](bool) {}, [](caf::error&) {});
  return std::move(run.results);
}

namespace {

// "127.0.0.1:4001 5<unit>, local 3<unit>", a lost worker marked.
std::string JobsPerSlot(const std::vector<Slot>& slots, const char* unit) {
  std::vector<std::string> parts;
  for (const Slot& slot : slots) {
    parts.push_back(
        absl::StrCat(slot.name, " ", slot.jobs_done, unit, slot.alive ? "" : " (lost)"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

std::string ClusterRunner::Tally() const { return JobsPerSlot(impl_->slots, ""); }

std::string ClusterRunner::Summary() const {
  std::string out = JobsPerSlot(impl_->slots, " jobs");
  if (!reruns_.empty()) {
    std::vector<std::string> listed;
    for (const auto& [name, from] : reruns_) listed.push_back(absl::StrCat(name, " (", from, ")"));
    absl::StrAppend(&out, "; re-run after a loss: jobs ", absl::StrJoin(listed, ", "));
  }
  return out;
}

}  // namespace ahbm::cluster
