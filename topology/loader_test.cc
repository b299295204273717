#include "topology/loader.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ahbm::topology {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

TEST(LoaderTest, LoadsShippedChip) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFile("topology/chip_2sip.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_EQ(chip->name(), "ahbm-2sip");
  EXPECT_EQ(chip->sips(), 2u);
  EXPECT_EQ(chip->sip().cubes(), 16u);
  EXPECT_EQ(chip->sip().cube().pes(), 8u);
  EXPECT_EQ(chip->sip().cube().hbm_pseudo_channels(), 64u);
  EXPECT_EQ(chip->sip().cube().hbm_bytes(), uint64_t{32} << 30);
  EXPECT_EQ(chip->sip().cube().pe().default_issue_cost_profile(), "zero");
}

TEST(LoaderTest, LoadsFullScaleChip) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFile("topology/chip_4sip.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_EQ(chip->sips(), 4u);
  EXPECT_EQ(chip->sip().cubes(), 16u);
}

TEST(LoaderTest, LoadsSmallChip) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_EQ(chip->sips(), 1u);
  EXPECT_EQ(chip->sip().cubes(), 8u);
  EXPECT_EQ(chip->sip().cube().pes(), 4u);
  EXPECT_EQ(chip->sip().cube().hbm_pseudo_channels(), 32u);
  EXPECT_EQ(chip->sip().cube().hbm_bytes(), uint64_t{16} << 30);
}

// The shipped and full-scale chips differ only in name and SIP count.
TEST(LoaderTest, FullScaleChipIsShippedChipWithFourSips) {
  absl::StatusOr<pb::Chip> shipped = LoadTopologyFile("topology/chip_2sip.textproto");
  absl::StatusOr<pb::Chip> full = LoadTopologyFile("topology/chip_4sip.textproto");
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  ASSERT_TRUE(full.ok()) << full.status();
  shipped->set_name(full->name());
  shipped->set_sips(4);
  EXPECT_EQ(shipped->SerializeAsString(), full->SerializeAsString());
}

TEST(LoaderTest, UnknownFieldNamesFileLineAndField) {
  const std::string text = absl::StrReplaceAll(
      ReadFile("topology/small.textproto"),
      {{"first_byte_latency_cycles: 100", "first_byte_latency_cycles: 100\n      bogus: 1"}});
  absl::StatusOr<pb::Chip> chip = ParseTopologyText(text, "topology/x.textproto");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message = Message(chip.status());
  // The line is 1-based: count the lines up to the inserted field.
  const int line = 1 + std::count(text.begin(), text.begin() + text.find("bogus"), '\n');
  // Protobuf reports the position just after the unknown name: column 7 + 5.
  EXPECT_EQ(message, absl::StrCat("topology/x.textproto:", line,
                                  ":12: Message type \"ahbm.pb.HbmChannel\" has no field named "
                                  "\"bogus\". (source line: bogus: 1)"));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
}

TEST(LoaderTest, UnknownTopLevelFieldIsRejected) {
  absl::StatusOr<pb::Chip> chip = ParseTopologyText("name: \"a\"\ncolor: 3\n", "t.textproto");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chip.status().message(),
            "t.textproto:2:6: Message type \"ahbm.pb.Chip\" has no field named \"color\". "
            "(source line: color: 3)");
}

TEST(LoaderTest, BadSyntaxNamesFileAndPosition) {
  absl::StatusOr<pb::Chip> chip = ParseTopologyText("name: \"a\"\nsips 2\n", "t.textproto");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message = Message(chip.status());
  EXPECT_EQ(message, "t.textproto:2:6: Expected \":\", found \"2\". (source line: sips 2)");
}

TEST(LoaderTest, UnclosedMessageSaysEndOfInput) {
  absl::StatusOr<pb::Chip> chip = ParseTopologyText("name: \"a\"\nsip {\n  cubes: 8\n", "t.tp");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chip.status().message(), "t.tp:4:1: Expected identifier, got: (at end of input)");
}

TEST(LoaderTest, WrongValueTypeNamesField) {
  absl::StatusOr<pb::Chip> chip = ParseTopologyText("sips: \"two\"\n", "t.textproto");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chip.status().message(),
            "t.textproto:1:7: Expected integer, got: \"two\" (source line: sips: \"two\")");
}

TEST(LoaderTest, LongSourceLineIsCut) {
  const std::string value(100, '7');
  absl::StatusOr<pb::Chip> chip = ParseTopologyText(absl::StrCat("sips: ", value), "t.textproto");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(chip.status()),
              HasSubstr(absl::StrCat("(source line: sips: ", value.substr(0, 74), "...)")));
}

// A binary file (here an ELF header and a terminal escape) is quoted as escaped text, never as
// raw bytes: the message holds printable ASCII only.
TEST(LoaderTest, GarbageIsQuotedEscaped) {
  constexpr char kBytes[] = "\x7f" "ELF\x02\x01\x01\x00\x1b[31m\xff\xfe red";
  const std::string garbage(kBytes, sizeof(kBytes) - 1);
  absl::StatusOr<pb::Chip> chip = ParseTopologyText(garbage, "t.bin");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message = Message(chip.status());
  for (const char c : message) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int{static_cast<unsigned char>(c)} << " in "
                                       << absl::CHexEscape(message);
  }
  EXPECT_THAT(message, HasSubstr("(source line: \\x7fELF\\x02\\x01\\x01\\x00\\x1b[31m"));
}

TEST(LoaderTest, RepeatedScalarFieldIsRejected) {
  absl::StatusOr<pb::Chip> chip = ParseTopologyText("sips: 2\nsips: 4\n", "t.textproto");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(chip.status()), HasSubstr("t.textproto:2:"));
  EXPECT_THAT(Message(chip.status()), HasSubstr("\"sips\""));
}

TEST(LoaderTest, InvalidValueNamesFileAndFieldPath) {
  const std::string text = absl::StrReplaceAll(ReadFile("topology/small.textproto"),
                                               {{"bytes_per_cycle: 32", "bytes_per_cycle: 0"}});
  absl::StatusOr<pb::Chip> chip = ParseTopologyText(text, "topology/x.textproto");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chip.status().message(),
            "topology/x.textproto: sip.cube.hbm_channel.bytes_per_cycle must be > 0 (got 0)");
}

TEST(LoaderTest, EmptyTextFailsValidation) {
  absl::StatusOr<pb::Chip> chip = ParseTopologyText("", "empty.textproto");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chip.status().message(), "empty.textproto: name must not be empty");
}

TEST(LoaderTest, MissingFileIsNotFoundNamingThePath) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFile("topology/no_such.textproto");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(chip.status().message(),
            "cannot read topology file \"topology/no_such.textproto\": No such file or directory");
}

TEST(LoaderTest, DirectoryIsNotFoundNamingThePath) {
  absl::StatusOr<pb::Chip> chip = LoadTopologyFile("topology");
  ASSERT_EQ(chip.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(chip.status()), HasSubstr("cannot read topology file \"topology\": "));
  EXPECT_THAT(Message(chip.status()), Not(HasSubstr("\n")));
}

}  // namespace
}  // namespace ahbm::topology
