#include "cli/flags.h"

#include "gtest/gtest.h"

namespace ahbm::cli {
namespace {

const std::vector<FlagSpec> kSpecs = {{"topology", "chip config", "a.textproto"},
                                      {"data", "data mode", "", /*boolean=*/true}};

TEST(FlagsTest, ParsesValuesAndBareBooleans) {
  const absl::StatusOr<ParsedFlags> flags =
      ParseFlags("run", kSpecs, {"--topology=x/y.textproto", "--data"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->Get("topology"), "x/y.textproto");
  EXPECT_EQ(flags->Get("data"), "true");
}

TEST(FlagsTest, RepeatedFlagsKeepTheirOrder) {
  const std::vector<FlagSpec> specs = {{"param", "p", "", false, /*repeated=*/true},
                                       {"values", "v", "", false, /*repeated=*/true},
                                       {"jobs", "j", ""}};
  const absl::StatusOr<ParsedFlags> flags = ParseFlags(
      "sweep", specs, {"--param=s", "--values=1,2", "--jobs=2", "--param=c", "--values=4"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  const std::vector<std::pair<std::string, std::string>> want = {
      {"param", "s"}, {"values", "1,2"}, {"param", "c"}, {"values", "4"}};
  EXPECT_EQ(flags->repeated(), want);
  EXPECT_EQ(flags->Get("param"), std::nullopt);
  EXPECT_EQ(flags->Get("jobs"), "2");
  EXPECT_FALSE(ParseFlags("sweep", specs, {"--jobs=1", "--jobs=2"}).ok());
  EXPECT_FALSE(ParseFlags("sweep", specs, {"--param="}).ok());
}

TEST(FlagsTest, MissingFlagFallsBack) {
  const absl::StatusOr<ParsedFlags> flags = ParseFlags("run", kSpecs, {});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->Get("topology"), std::nullopt);
  EXPECT_EQ(flags->GetOr("topology", "d.textproto"), "d.textproto");
}

TEST(FlagsTest, ValueMayContainEquals) {
  const absl::StatusOr<ParsedFlags> flags = ParseFlags("run", kSpecs, {"--topology=a=b"});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->Get("topology"), "a=b");
}

TEST(FlagsTest, ErrorsNameTheFlag) {
  EXPECT_EQ(ParseFlags("run", kSpecs, {"--bogus=1"}).status().message(),
            "unknown flag --bogus for 'ahbm run' (see 'ahbm help run')");
  EXPECT_EQ(ParseFlags("run", kSpecs, {"--data", "--data=false"}).status().message(),
            "flag --data given twice");
  EXPECT_EQ(ParseFlags("run", kSpecs, {"topology"}).status().message(),
            "unexpected argument 'topology' for 'ahbm run' (flags are --name=value)");
}

// A value flag without its value was read as "true" (--topology read a file named "true").
TEST(FlagsTest, ValueFlagWithoutValueIsRefused) {
  EXPECT_EQ(ParseFlags("run", kSpecs, {"--topology"}).status().message(),
            "--topology: needs a value (--topology=...)");
  EXPECT_EQ(ParseFlags("run", kSpecs, {"--topology="}).status().message(),
            "--topology: needs a value (--topology=...)");
  EXPECT_EQ(ParseFlags("run", kSpecs, {"--data="}).status().message(),
            "--data: needs a value (--data=true|false)");
}

TEST(FlagsTest, PositionalArgumentsUpToTheCommandsCount) {
  absl::StatusOr<ParsedFlags> parsed = ParseFlags("diff", kSpecs, {"a.trace", "--data", "b.json"}, 2);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->positional(), (std::vector<std::string>{"a.trace", "b.json"}));
  EXPECT_EQ(parsed->Get("data"), "true");
  EXPECT_EQ(ParseFlags("diff", kSpecs, {"a", "b", "c"}, 2).status().message(),
            "unexpected argument 'c' for 'ahbm diff' (flags are --name=value)");
}

TEST(FlagsTest, BoolAndIntFlagsReadTheValueOrTheFallback) {
  const absl::StatusOr<ParsedFlags> flags = ParseFlags(
      "run", kSpecs, {"--data=maybe", "--topology=4294967297"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(BoolFlag(*flags, "data").status().message(),
            "--data: must be true or false (got 'maybe')");
  EXPECT_EQ(BoolFlag(*flags, "absent", true).value(), true);
  EXPECT_EQ(BoolFlag(*flags, "absent").value(), false);
  EXPECT_EQ(IntFlag(*flags, "topology", "1").value(), 4294967297u);  // no narrowing
  EXPECT_EQ(IntFlag(*flags, "absent", "7").value(), 7u);
  EXPECT_EQ(IntFlag(*flags, "absent", "0").status().message(),
            "--absent: must be a positive integer (got '0')");
  EXPECT_EQ(IntFlag(*flags, "absent", "0", /*zero_ok=*/true).value(), 0u);
  EXPECT_EQ(IntFlag(*flags, "absent", "-1", true).status().message(),
            "--absent: must be a non-negative integer (got '-1')");
}

TEST(FlagsTest, HelpListsEveryFlag) {
  const std::string help = FlagsHelp(kSpecs);
  EXPECT_NE(help.find("--topology=a.textproto"), std::string::npos);
  EXPECT_NE(help.find("--data"), std::string::npos);
  EXPECT_NE(help.find("data mode"), std::string::npos);
}

}  // namespace
}  // namespace ahbm::cli
