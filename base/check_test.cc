#include "base/check.h"

#include "gtest/gtest.h"

namespace ahbm {
namespace {

TEST(CheckTest, PassingCheckEvaluatesConditionOnceAndNotTheMessage) {
  int evaluations = 0;
  int streamed = 0;
  AHBM_CHECK(++evaluations == 1) << ++streamed;
  EXPECT_EQ(evaluations, 1);
  EXPECT_EQ(streamed, 0);
}

TEST(CheckTest, BindsNoTrailingElse) {
  bool took_else = false;
  if (false)
    AHBM_CHECK(true) << "never";
  else
    took_else = true;
  EXPECT_TRUE(took_else);
}

TEST(CheckDeathTest, FailingCheckAbortsWithConditionAndContext) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int got = 0;
  EXPECT_DEATH(AHBM_CHECK(got > 0) << "rows must be > 0 (got " << got << ")",
               "CHECK failed: got > 0 rows must be > 0 \\(got 0\\)");
}

TEST(CheckDeathTest, FailingCheckAsksForABugReportAndExits70) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        SetBugReportContext("ahbm run --kernel=decode", "ahbm 0.1 (commit abc123)");
        AHBM_CHECK(1 + 1 == 3) << "arithmetic";
      },
      ::testing::ExitedWithCode(kExitInternalBug),
      "CHECK failed: 1 \\+ 1 == 3 arithmetic\n"
      "This is an internal error of the simulator \\(a bug in ahbmsim, not in your input\\)\\. "
      "Please report it with this message,\n  the command: ahbm run --kernel=decode,\n"
      "  the build:   ahbm 0.1 \\(commit abc123\\)");
}

TEST(CheckDeathTest, DcheckIsACheckUnlessNdebug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int evaluations = 0;
  auto fails = [&] { return ++evaluations == 0; };
#ifdef NDEBUG
  AHBM_DCHECK(fails()) << "compiled out";
  EXPECT_EQ(evaluations, 0);
#else
  EXPECT_DEATH(AHBM_DCHECK(fails()), "CHECK failed: fails\\(\\)");
#endif
}

}  // namespace
}  // namespace ahbm
