// Workload files (protobuf text format) and single fields from text (`ahbm run` flags).
#include "kernels/launch/workload_io.h"

#include <string>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ahbm::launch {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(WorkloadFile, TheShippedExampleParses) {
  absl::StatusOr<pb::Workload> w = LoadWorkloadFile("kernels/selftest/gemm.textproto");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->kernel(), pb::SELFTEST_GEMM);
  EXPECT_EQ(w->gemm_m(), 8u);
  EXPECT_EQ(w->gemm_k(), 128u);
  EXPECT_EQ(w->gemm_n(), 256u);
  EXPECT_TRUE(w->data());
}

TEST(WorkloadFile, UnknownFieldsAreRefusedWithLineAndColumn) {
  absl::StatusOr<pb::Workload> w =
      ParseWorkloadText("kernel: SELFTEST_GEMM\n  bogus_field: 1\n", "w.textproto");
  ASSERT_TRUE(absl::IsInvalidArgument(w.status())) << w.status();
  EXPECT_THAT(std::string(w.status().message()),
              testing::AllOf(StartsWith("w.textproto:2:"), HasSubstr("bogus_field"),
                             HasSubstr("(source line: bogus_field: 1)")));
  w = ParseWorkloadText("kernel: NOT_A_KERNEL\n", "w.textproto");
  ASSERT_FALSE(w.ok());
  // protobuf reports a bad enum value at the token after it (here: the next line).
  EXPECT_THAT(std::string(w.status().message()),
              testing::AllOf(testing::MatchesRegex("w\\.textproto:[0-9]+:[0-9]+: .*"),
                             HasSubstr("NOT_A_KERNEL"), HasSubstr("kernel")));
}

TEST(WorkloadFile, MissingFileIsNotFound) {
  absl::StatusOr<pb::Workload> w = LoadWorkloadFile("no/such/workload.textproto");
  ASSERT_TRUE(absl::IsNotFound(w.status())) << w.status();
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("cannot read workload file \"no/such/workload.textproto\""));
}

TEST(SetWorkloadField, ParsesEveryKindOfField) {
  pb::Workload w;
  ASSERT_TRUE(SetWorkloadField(w, "kernel", "selftest_gemm").ok());
  EXPECT_EQ(w.kernel(), pb::SELFTEST_GEMM);
  ASSERT_TRUE(SetWorkloadField(w, "kernel", "Selftest_AllReduce").ok());
  EXPECT_EQ(w.kernel(), pb::SELFTEST_ALLREDUCE);
  ASSERT_TRUE(SetWorkloadField(w, "gemm_m", "4294967295").ok());
  EXPECT_EQ(w.gemm_m(), 4294967295u);
  ASSERT_TRUE(SetWorkloadField(w, "seed", "18446744073709551615").ok());
  EXPECT_EQ(w.seed(), 18446744073709551615u);
  ASSERT_TRUE(SetWorkloadField(w, "data", "true").ok());
  EXPECT_TRUE(w.data());
  ASSERT_TRUE(SetWorkloadField(w, "issue_cost_profile", "realistic").ok());
  EXPECT_EQ(w.issue_cost_profile(), "realistic");
  ASSERT_TRUE(SetWorkloadField(w, "gemm_m", "0").ok());  // explicit zero overrides
  EXPECT_EQ(w.gemm_m(), 0u);
}

TEST(SetWorkloadField, BadValuesAreOneLineErrorsNamingTheField) {
  pb::Workload w;
  const struct {
    std::string name, value, message;
  } cases[] = {
      {"kernel", "bogus",
       "kernel: unknown value; one of KERNEL_UNSPECIFIED, DECODE, PREFILL, SELFTEST_GEMM, "
       "SELFTEST_ALLREDUCE, SELFTEST_DEADLOCK (any case) (got 'bogus')"},
      {"gemm_m", "x", "gemm_m: must be an integer in [0, 4294967295] (got 'x')"},
      {"gemm_m", "-1", "gemm_m: must be an integer"},
      {"gemm_m", "4294967296", "gemm_m: must be an integer in [0, 4294967295] (got '4294967296')"},
      {"s", "1e9", "s: must be an integer in [0, 18446744073709551615] (got '1e9')"},
      {"data", "yes", "data: must be true or false (got 'yes')"},
      {"bogus", "1", "bogus: no such workload field"},
  };
  for (const auto& c : cases) {
    const absl::Status s = SetWorkloadField(w, c.name, c.value);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.name << "=" << c.value;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.name << "=" << c.value;
  }
}

TEST(WorkloadFields, ListsEveryFieldInProtoOrder) {
  const std::vector<WorkloadField> fields = WorkloadFields();
  ASSERT_EQ(fields.size(), static_cast<size_t>(pb::Workload::descriptor()->field_count()));
  EXPECT_EQ(fields.front().name, "kernel");
  EXPECT_THAT(fields.front().help, HasSubstr("SELFTEST_DEADLOCK"));
  EXPECT_EQ(fields.back().name, "kv_bank_layout");
  EXPECT_THAT(fields.back().help, HasSubstr("INTERLEAVED"));
}

TEST(SetWorkloadField, RepeatedFieldTakesACommaSeparatedList) {
  pb::Workload w;
  ASSERT_TRUE(SetWorkloadField(w, "request_lengths", "7,300,1000").ok());
  ASSERT_EQ(w.request_lengths_size(), 3);
  EXPECT_EQ(w.request_lengths(2), 1000u);
  ASSERT_TRUE(SetWorkloadField(w, "request_lengths", "5").ok());  // replaces, not appends
  ASSERT_EQ(w.request_lengths_size(), 1);
  const absl::Status bad = SetWorkloadField(w, "request_lengths", "7,x");
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_THAT(std::string(bad.message()), HasSubstr("request_lengths: must be a comma-separated"));
}

}  // namespace
}  // namespace ahbm::launch
