#include "base/errors.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "gtest/gtest.h"

namespace ahbm {
namespace {

TEST(ErrorKindTest, EachMakerGivesItsKindCodeAndExit) {
  EXPECT_EQ(KindOf(DeadlockError("d")), ErrorKind::kDeadlock);
  EXPECT_EQ(DeadlockError("d").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ExitCodeOf(DeadlockError("d")), 3);
  EXPECT_EQ(KindOf(KernelFaultError("k")), ErrorKind::kKernelFault);
  EXPECT_EQ(ExitCodeOf(KernelFaultError("k")), 4);
  EXPECT_EQ(KindOf(InvariantError("i")), ErrorKind::kInvariant);
  EXPECT_EQ(InvariantError("i").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ExitCodeOf(InvariantError("i")), 70);
  EXPECT_EQ(InvariantError("i").message(), "i");
}

TEST(ErrorKindTest, WithoutAPayloadTheCodeDecides) {
  EXPECT_EQ(ExitCodeOf(absl::OkStatus()), 0);
  EXPECT_EQ(KindOf(absl::InvalidArgumentError("f: bad")), ErrorKind::kInput);
  EXPECT_EQ(KindOf(absl::NotFoundError("f")), ErrorKind::kInput);
  EXPECT_EQ(KindOf(absl::DataLossError("f")), ErrorKind::kInput);
  EXPECT_EQ(ExitCodeOf(absl::InvalidArgumentError("f")), 2);
  // A deadlock is a kind, not a message: a FailedPrecondition saying "deadlock" is other.
  EXPECT_EQ(KindOf(absl::FailedPreconditionError("deadlock: x")), ErrorKind::kOther);
  EXPECT_EQ(ExitCodeOf(absl::InternalError("x")), 1);
  EXPECT_EQ(ExitCodeOf(absl::UnavailableError("x")), 1);
}

TEST(ErrorKindTest, WithKindOverridesTheCodeAndLeavesOkAlone) {
  const absl::Status refused = absl::InvalidArgumentError("pe 3: cmd 7: TCM overflow");
  const absl::Status fault = WithKind(refused, ErrorKind::kKernelFault);
  EXPECT_EQ(KindOf(fault), ErrorKind::kKernelFault);
  EXPECT_EQ(fault.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fault.message(), refused.message());
  EXPECT_TRUE(WithKind(absl::OkStatus(), ErrorKind::kInvariant).ok());
}

absl::Status Fails() { return KernelFaultError("pe 1: arena overflow"); }
absl::StatusOr<int> Passes() {
  RETURN_IF_ERROR(Fails());
  return 1;
}

TEST(ErrorKindTest, TheKindSurvivesCopiesMacrosAndAnnotate) {
  const absl::StatusOr<int> passed = Passes();
  ASSERT_FALSE(passed.ok());
  EXPECT_EQ(KindOf(passed.status()), ErrorKind::kKernelFault);
  const absl::Status annotated = Annotate(passed.status(), "run 2: ");
  EXPECT_EQ(annotated.message(), "run 2: pe 1: arena overflow");
  EXPECT_EQ(annotated.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ExitCodeOf(annotated), 4);
  // Rebuilt from code and message alone it is lost (why Annotate exists).
  EXPECT_EQ(KindOf(absl::Status(annotated.code(), annotated.message())), ErrorKind::kOther);
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

TEST(ErrorKindTest, NamesRoundTrip) {
  for (ErrorKind kind : {ErrorKind::kInput, ErrorKind::kDeadlock, ErrorKind::kKernelFault,
                         ErrorKind::kInvariant, ErrorKind::kOther}) {
    ASSERT_TRUE(KindFromName(KindName(kind)).has_value()) << KindName(kind);
    EXPECT_EQ(*KindFromName(KindName(kind)), kind);
  }
  EXPECT_FALSE(KindFromName("deadlocked").has_value());
  EXPECT_EQ(KindName(ErrorKind::kKernelFault), "kernel fault");
}

TEST(ErrorKindTest, WithExitCodePassesAnotherProgramsCodeOn) {
  const absl::Status task = WithExitCode(absl::UnknownError("task 1 exited 7"), 7);
  EXPECT_EQ(ExitCodeOf(task), 7);
  EXPECT_EQ(KindOf(task), ErrorKind::kOther);
  EXPECT_EQ(ExitCodeOf(Annotate(task, "array job 4: ")), 7);  // context keeps it
  EXPECT_EQ(ExitCodeOf(WithExitCode(absl::InvalidArgumentError("x"), 255)), 255);
  // Outside 1..255 the kind decides; OK stays OK.
  EXPECT_EQ(ExitCodeOf(WithExitCode(absl::InvalidArgumentError("x"), 0)), kExitBadInput);
  EXPECT_EQ(ExitCodeOf(WithExitCode(absl::UnknownError("x"), 256)), kExitOther);
  EXPECT_TRUE(WithExitCode(absl::OkStatus(), 7).ok());
}

}  // namespace
}  // namespace ahbm
