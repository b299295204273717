// The worker actor's side of the protocol (protocol.h), called in-process: the hello, and
// every job it must refuse with a reason instead of crashing. The network, TLS and a dying
// worker are cluster_test.sh's.
#include "cluster/worker.h"

#include <string>
#include <vector>
#include <tuple>

#include "caf/all.hpp"
#include "cluster/protocol.h"
#include "gtest/gtest.h"
#include "proto/job.pb.h"
#include "sweep/job.h"
#include "sweep/job_pool.h"
#include "topology/loader.h"

namespace ahbm::cluster {
namespace {

class WorkerTest : public ::testing::Test {
 protected:
  WorkerTest() : system_(cfg_.set("scheduler.max-threads", 2)) {
    config_.slots = 1;
    config_.build = "feedfacefeedface";
    config_.schema = sweep::SchemaDigest();
    worker_ = SpawnWorker(system_, config_);
  }
  ~WorkerTest() override { caf::anon_send_exit(worker_, caf::exit_reason::user_shutdown); }

  // (accepted, reason, slots)
  std::tuple<bool, std::string, uint32_t> Hello(const std::string& build,
                                                const std::string& schema) {
    caf::scoped_actor self{system_};
    std::tuple<bool, std::string, uint32_t> out{false, "no answer", 0};
    self->request(worker_, caf::infinite, hello_atom::value, build, schema)
        .receive(
            [&](hello_atom, bool accepted, std::string& reason, uint32_t slots, std::string&) {
              out = {accepted, reason, slots};
            },
            [&](caf::error& error) { std::get<1>(out) = system_.render(error); });
    return out;
  }

  // (ok, payload)
  std::pair<bool, std::string> Job(uint64_t index, const std::string& bytes) {
    caf::scoped_actor self{system_};
    std::pair<bool, std::string> out{false, "no answer"};
    self->request(worker_, caf::infinite, job_atom::value, index, bytes)
        .receive([&](job_atom, uint64_t, bool ok, std::string& payload) { out = {ok, payload}; },
                 [&](caf::error& error) { out.second = system_.render(error); });
    return out;
  }

  pb::JobSpec SmallJob() {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
    EXPECT_TRUE(chip.ok()) << chip.status();
    sweep::Job job{*chip, {}, {}};
    job.workload.set_kernel(pb::DECODE);
    job.workload.set_variant(pb::OPT3);
    job.workload.set_h_q(8);
    job.workload.set_h_kv(2);
    job.workload.set_p(4);
    job.workload.set_s(1024);
    job.options.keep_op_log = false;
    return *sweep::ToSpec(job);
  }

  caf::actor_system_config cfg_;
  caf::actor_system system_;
  WorkerConfig config_;
  caf::actor worker_;
};

TEST_F(WorkerTest, RefusesAnotherBuildOrSchemaInOneLine) {
  const auto [accepted, reason, slots] = Hello("0123456789abcdef", config_.schema);
  EXPECT_FALSE(accepted);
  EXPECT_EQ(reason,
            "build digest 0123456789abcdef differs from the worker's feedfacefeedface (run the "
            "same ahbm build on both)");
  EXPECT_FALSE(std::get<0>(Hello(config_.build, "0000000000000000")));
  const auto [ok, why] = Job(4, SmallJob().SerializeAsString());
  EXPECT_FALSE(ok);
  EXPECT_EQ(why, "job 4: refused: no hello from this client");
}

TEST_F(WorkerTest, RunsAJobAsTheJobPoolDoes) {
  ASSERT_TRUE(std::get<0>(Hello(config_.build, config_.schema)));
  const pb::JobSpec spec = SmallJob();
  const auto [ok, bytes] = Job(7, spec.SerializeAsString());
  ASSERT_TRUE(ok) << bytes;
  pb::JobResult remote;
  ASSERT_TRUE(remote.ParseFromString(bytes));
  EXPECT_EQ(remote.status_code(), 0) << remote.status_message();
  EXPECT_GT(remote.report().latency_ps(), 0u);
  const pb::JobResult local = sweep::ExecuteJob(*sweep::FromSpec(spec));
  EXPECT_EQ(bytes, local.SerializeAsString());
}

TEST_F(WorkerTest, JobsBeyondItsSlotsWaitTheirTurn) {
  ASSERT_TRUE(std::get<0>(Hello(config_.build, config_.schema)));
  const std::string bytes = SmallJob().SerializeAsString();
  caf::scoped_actor self{system_};
  for (uint64_t i = 0; i < 4; ++i) {  // 4 jobs at once on 1 slot
    self->send(worker_, job_atom::value, i, bytes);
  }
  std::vector<uint64_t> answered;
  for (int k = 0; k < 4; ++k) {
    self->receive([&](job_atom, uint64_t i, bool ok, std::string& payload) {
      EXPECT_TRUE(ok) << payload;
      answered.push_back(i);
    });
  }
  EXPECT_EQ(answered, (std::vector<uint64_t>{0, 1, 2, 3}));
}

TEST_F(WorkerTest, RefusesMalformedOversizedAndInvalidJobsAndKeepsServing) {
  ASSERT_TRUE(std::get<0>(Hello(config_.build, config_.schema)));
  auto [ok, why] = Job(1, "\xff\xff\xff not a protobuf");
  EXPECT_FALSE(ok);
  EXPECT_EQ(why, "job 1: not a JobSpec (18 bytes)");
  std::tie(ok, why) = Job(2, std::string(kMaxJobBytes + 1, 'x'));
  EXPECT_FALSE(ok);
  EXPECT_EQ(why, "job 2: 67108865 bytes, above the limit of 67108864");
  pb::JobSpec broken = SmallJob();
  broken.mutable_chip()->set_sips(0);
  std::tie(ok, why) = Job(3, broken.SerializeAsString());
  EXPECT_FALSE(ok);
  EXPECT_TRUE(why.starts_with("job 3: job: chip: ")) << why;
  broken = SmallJob();
  broken.mutable_workload()->set_h_q(7);  // a refusal of the workload is the job's own result
  std::tie(ok, why) = Job(5, broken.SerializeAsString());
  ASSERT_TRUE(ok);
  pb::JobResult refused;
  ASSERT_TRUE(refused.ParseFromString(why));
  EXPECT_EQ(refused.status_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  std::tie(ok, why) = Job(6, SmallJob().SerializeAsString());
  EXPECT_TRUE(ok) << why;
}

}  // namespace
}  // namespace ahbm::cluster

// The jobs run in fresh processes of this binary (sweep::UseJobProgram("/proc/self/exe")).
int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == ahbm::sweep::kJobCommand) {
    return ahbm::sweep::JobChildMain();
  }
  ahbm::sweep::UseJobProgram("/proc/self/exe");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
