#include "base/text_escape.h"

#include "gtest/gtest.h"

namespace ahbm {
namespace {

TEST(CsvField, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(CsvField("opt3"), "opt3");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField("cr\r"), "\"cr\r\"");
}

TEST(JsonString, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(JsonString("plain"), "\"plain\"");
  EXPECT_EQ(JsonString("q\"b\\"), "\"q\\\"b\\\\\"");
  EXPECT_EQ(JsonString("n\nr\rt\t"), "\"n\\nr\\rt\\t\"");
  EXPECT_EQ(JsonString(std::string("\x01", 1)), "\"\\u0001\"");
  EXPECT_EQ(JsonString("µs"), "\"µs\"");
}

TEST(PrintableAscii, EscapesEveryByteOutsidePrintableAscii) {
  EXPECT_EQ(PrintableAscii("key 'descr': <f4"), "key 'descr': <f4");
  EXPECT_EQ(PrintableAscii(std::string("a\nb\tc\x93\0d", 8)), "a\\nb\\tc\\x93\\x00d");
}

}  // namespace
}  // namespace ahbm
