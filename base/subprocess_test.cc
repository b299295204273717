#include "base/subprocess.h"

#include <string>

#include "gtest/gtest.h"

namespace ahbm {
namespace {

TEST(SubprocessTest, StdoutStderrAndTheExitCodeComeBackApart) {
  absl::StatusOr<ProgramResult> r =
      RunProgram({"sh", "-c", "echo out; echo err >&2; read x || echo eof; exit 7"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "out\neof\n");  // stdin is /dev/null
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->How(), "exit status 7");
}

TEST(SubprocessTest, ALargeOutputOnBothPipesDoesNotStall) {
  // 1 MiB on each pipe, well past a pipe's 64 KiB buffer, written interleaved.
  absl::StatusOr<ProgramResult> r = RunProgram(
      {"sh", "-c", "for i in $(seq 16); do head -c 65536 /dev/zero; head -c 65536 /dev/zero >&2; "
                   "done"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out.size(), 1u << 20);
  EXPECT_EQ(r->err.size(), 1u << 20);
  EXPECT_TRUE(r->ok());
}

TEST(SubprocessTest, ASignalIsReportedAsSuch) {
  absl::StatusOr<ProgramResult> r = RunProgram({"sh", "-c", "kill -9 $$"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->signal, 9);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->How(), "killed by signal 9");
}

TEST(SubprocessTest, AProgramNotOnThePathIsNotFound) {
  absl::StatusOr<ProgramResult> r = RunProgram({"ahbm-no-such-program", "x"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "ahbm-no-such-program: not found on PATH");
  EXPECT_FALSE(FindOnPath("ahbm-no-such-program").has_value());
  ASSERT_TRUE(FindOnPath("sh").has_value());
  EXPECT_EQ(FindOnPath("sh")->back(), 'h');
}

}  // namespace
}  // namespace ahbm
