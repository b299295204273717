// Workload files (protobuf text format) and single fields from text (`ahbm run` flags).
#include "kernels/launch/workload_io.h"

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ahbm::launch {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
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
  // protobuf reports a bad enum value at the token after it (here: the next line, then the end
  // of the input); the message points at the value instead (base/text_proto.h).
  w = ParseWorkloadText("kernel: NOT_A_KERNEL\n\n  s: 5\n", "w.textproto");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(),
            "w.textproto:1:9: Unknown enumeration value of \"NOT_A_KERNEL\" for field \"kernel\". "
            "(source line: kernel: NOT_A_KERNEL)");
  w = ParseWorkloadText("s: 5 kernel:\n NOT_A_KERNEL", "w.textproto");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(),
            "w.textproto:1:13: Unknown enumeration value of \"NOT_A_KERNEL\" for field \"kernel\". "
            "(source line: s: 5 kernel:)");
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
  EXPECT_TRUE(w.has_gemm_m());  // and stays "given" (CheckGivenValues refuses it)
}

TEST(SetWorkloadField, BadValuesAreOneLineErrorsNamingTheField) {
  pb::Workload w;
  const struct {
    std::string name, value, message;
  } cases[] = {
      {"kernel", "bogus",
       "kernel: unknown value; one of DECODE, PREFILL, SELFTEST_GEMM, "
       "SELFTEST_ALLREDUCE, SELFTEST_DEADLOCK, SELFTEST_ARENA_OVERFLOW (any case) (got 'bogus')"},
      // UNSPECIFIED is the unset value: leave the flag out.
      {"variant", "variant_unspecified", "variant: unknown value; one of OPT1, OPT2, OPT3"},
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
  EXPECT_THAT(fields.front().help, Not(HasSubstr("KERNEL_UNSPECIFIED")));
  EXPECT_EQ(fields.back().name, "ring_message_bytes");
  EXPECT_THAT(fields.back().help, HasSubstr("16384"));
}

// Every flag says what it means, its unit where it has one, and its default.
TEST(WorkloadFields, HelpGivesMeaningUnitAndDefault) {
  std::map<std::string, std::string> help;
  for (const WorkloadField& f : WorkloadFields()) {
    help[f.name] = f.help;
    EXPECT_THAT(f.help, Not(HasSubstr("workload field"))) << f.name;
    EXPECT_THAT(f.help, testing::AnyOf(HasSubstr("(default: "), HasSubstr("(required)"))) << f.name;
  }
  EXPECT_EQ(help["d"], "head dimension, elements (default: 128)");
  EXPECT_THAT(help["tile"], HasSubstr("keys (default: decode 256, prefill 128)"));
  EXPECT_THAT(help["s"], HasSubstr("tokens"));
  EXPECT_THAT(help["vector_len"], HasSubstr("fp32 elements"));
  EXPECT_THAT(help["level2_reduce"], HasSubstr("TREE, CHAIN, RING_REDUCE (default: TREE)"));
}

// A value given is a value used or refused: an explicit 0, UNSPECIFIED or "" is refused
// naming the field, from a flag or a file, except where 0 is a value.
TEST(CheckGivenValues, ExplicitZerosAreRefusedWhereZeroIsNoValue) {
  for (const char* field : {"h_q", "h_kv", "d", "s", "t_q", "max_context", "c", "p", "group_rows",
                            "group_cols", "tile", "q_tile", "kv_per_cube", "users", "gemm_m",
                            "gemm_k", "gemm_n", "vector_len"}) {
    pb::Workload w;
    ASSERT_TRUE(SetWorkloadField(w, field, "0").ok()) << field;
    const absl::Status s = CheckGivenValues(w);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << field;
    EXPECT_THAT(std::string(s.message()), StartsWith(absl::StrCat(field, ": must be > 0 (got 0)")));
  }
  for (const char* field : {"seed", "sip", "start_cube", "start_pe", "cube",
                            "short_long_threshold"}) {
    pb::Workload w;
    ASSERT_TRUE(SetWorkloadField(w, field, "0").ok()) << field;
    EXPECT_TRUE(CheckGivenValues(w).ok()) << field;
  }
  pb::Workload w;
  ASSERT_TRUE(SetWorkloadField(w, "data", "false").ok());
  ASSERT_TRUE(SetWorkloadField(w, "no_rotation", "false").ok());
  EXPECT_TRUE(CheckGivenValues(w).ok());
  EXPECT_TRUE(CheckGivenValues(pb::Workload()).ok());  // nothing given: every default
  ASSERT_TRUE(SetWorkloadField(w, "d", "0").ok());
  EXPECT_EQ(CheckGivenValues(w).message(),
            "d: must be > 0 (got 0); leave it unset for the default (128)");

  absl::StatusOr<pb::Workload> file = ParseWorkloadText("kernel: DECODE\ntile: 0\n", "w");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(std::string(CheckGivenValues(*file).message()), StartsWith("tile: must be > 0"));
  file = ParseWorkloadText("variant: VARIANT_UNSPECIFIED\n", "w");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(std::string(CheckGivenValues(*file).message()),
              StartsWith("variant: VARIANT_UNSPECIFIED is the unset value; give one of OPT1"));
  file = ParseWorkloadText("issue_cost_profile: \"\"\n", "w");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(std::string(CheckGivenValues(*file).message()),
              StartsWith("issue_cost_profile: empty; leave it unset"));
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
