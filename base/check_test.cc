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
