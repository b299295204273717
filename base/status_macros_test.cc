#include "base/status_macros.h"

#include <string>

#include "gtest/gtest.h"

namespace ahbm {
namespace {

int calls = 0;

absl::Status Counted(absl::Status status) {
  ++calls;
  return status;
}

absl::Status TwoSteps(absl::Status first, bool* reached_second) {
  RETURN_IF_ERROR(Counted(first));
  *reached_second = true;
  return absl::OkStatus();
}

absl::StatusOr<int> Doubled(absl::StatusOr<int> in) {
  ASSIGN_OR_RETURN(const int value, in);
  return 2 * value;
}

absl::StatusOr<std::string> Both(absl::StatusOr<int> a, absl::StatusOr<int> b) {
  ASSIGN_OR_RETURN(int x, a);  // two in one scope
  ASSIGN_OR_RETURN(int y, b);
  RETURN_IF_ERROR(x == y ? absl::OkStatus() : absl::InvalidArgumentError("differ"));
  return std::to_string(x + y);
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsTheFailureAndEvaluatesOnce) {
  calls = 0;
  bool second = false;
  const absl::Status failed = TwoSteps(absl::NotFoundError("gone"), &second);
  EXPECT_EQ(failed, absl::NotFoundError("gone"));
  EXPECT_FALSE(second);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(TwoSteps(absl::OkStatus(), &second).ok());
  EXPECT_TRUE(second);
  EXPECT_EQ(calls, 2);
}

TEST(StatusMacrosTest, AssignOrReturnAssignsOrReturnsTheStatus) {
  EXPECT_EQ(*Doubled(21), 42);
  EXPECT_EQ(Doubled(absl::DataLossError("cut")).status(), absl::DataLossError("cut"));
  EXPECT_EQ(*Both(3, 3), "6");
  EXPECT_EQ(Both(3, absl::AbortedError("b")).status(), absl::AbortedError("b"));
  EXPECT_EQ(Both(3, 4).status(), absl::InvalidArgumentError("differ"));
}

}  // namespace
}  // namespace ahbm
