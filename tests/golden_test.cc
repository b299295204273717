// Golden tests (tests/README.md, "Goldens first"): a fixed list of runs — every
// decode kernel variant and baseline, both issue-cost profiles, multi-user, causal T_q with
// empty ranks, the reduce options, every prefill variant, the self-test kernels and injected
// command streams — whose
// op log and report, rendered as text (golden_render.h), must equal tests/golden/<case>.txt
// byte for byte. Small-topology cases keep the whole text; full-chip cases keep a digest of
// it (64-bit FNV-1a) with the latency, event count and roofline in clear.
//
//   bazel test //tests:golden_test                  compare (fails naming the case and line)
//   bazel run //tests:golden_test -- --update       rewrite tests/golden/ in the source tree
//   bazel run //tests:golden_test -- --update --only=NAME[,NAME]   rewrite some cases
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "proto/topology.pb.h"
#include "tests/golden_cases.h"
#include "tests/golden_render.h"
#include "topology/loader.h"

namespace ahbm::golden {
namespace {

constexpr char kEventsLine[] = "report events=";

// ---- rendering, comparison, update -------------------------------------------------------

absl::StatusOr<std::string> Render(const Case& c) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(c.topology);
  RETURN_IF_ERROR(chip.status());
  absl::StatusOr<Outcome> out = c.run(*chip, RunKnobs());
  RETURN_IF_ERROR(out.status());
  std::string text = RenderText(*out);
  if (!c.digest_only) return text;
  // The digest leaves out the event count (in clear below), so that folding events (a speed change)
  // moves that line only.
  size_t lines = 0;
  std::string hashed;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(l, kEventsLine)) continue;
    absl::StrAppend(&hashed, l, "\n");
    ++lines;
  }
  hashed.pop_back();  // the text after the last '\n' is empty
  --lines;
  std::string digest = absl::StrCat("# digest of the op log + report text but its events line (",
                                    c.topology, ")\n", "lines=", lines, "\n", "op_log_records=",
                                    out->records.size(), "\n", "fnv1a64=", Fnv1a64Hex(hashed),
                                    "\n");
  digest += out->extra;
  RenderReportHeader(out->report, digest);
  return digest;
}

std::string GoldenPath(const std::string& root, const Case& c) {
  return absl::StrCat(root, root.empty() ? "" : "/", "tests/golden/", c.name, ".txt");
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n');
}

class GoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(GoldenTest, MatchesGolden) {
  const Case& c = GetParam();
  const std::string path = GoldenPath("", c);
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "case " << c.name << ": no golden " << path
                  << " (bazel run //tests:golden_test -- --update --only=" << c.name << ")";
  std::stringstream golden;
  golden << in.rdbuf();
  absl::StatusOr<std::string> now = Render(c);
  ASSERT_TRUE(now.ok()) << "case " << c.name << ": " << now.status();
  if (*now == golden.str()) return;
  const std::vector<std::string> want = Lines(golden.str()), got = Lines(*now);
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  // The text after the last '\n' (empty for a whole file) is the end of the file.
  const auto line = [&](const std::vector<std::string>& v) {
    return i + 1 < v.size() ? v[i] : i < v.size() && !v[i].empty() ? v[i] : "<end of file>";
  };
  // Only the event count moved? (Folding events changes it and nothing else.)
  bool only_events = want.size() == got.size();
  for (size_t j = i; only_events && j < want.size(); ++j) {
    only_events = want[j] == got[j] || (absl::StartsWith(want[j], kEventsLine) &&
                                        absl::StartsWith(got[j], kEventsLine));
  }
  ADD_FAILURE() << "case " << c.name << " differs from " << path << " at line " << i + 1
                << " (golden " << want.size() - 1 << " lines, now " << got.size() - 1 << "):\n"
                << "  golden: " << line(want) << "\n"
                << "  now:    " << line(got) << "\n"
                << (only_events ? "Only the event count differs.\n" : "")
                << "A change that must move a number updates the golden in its own commit with "
                   "the reason (tests/README.md).";
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Every file in tests/golden/ belongs to a case (a renamed or dropped case takes its file along).
TEST(GoldenFiles, EachBelongsToACase) {
  std::set<std::string> names;
  for (const Case& c : AllCases()) {
    EXPECT_TRUE(names.insert(c.name + ".txt").second) << "case " << c.name << " twice";
  }
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator("tests/golden")) {
    const std::string file = entry.path().filename().string();
    EXPECT_TRUE(names.contains(file)) << "tests/golden/" << file << " belongs to no case";
    seen += names.contains(file);
  }
  EXPECT_EQ(seen, names.size()) << "a case has no golden (bazel run //tests:golden_test -- --update)";
}

// `--update [--only=a,b]`: rewrite the goldens in the source tree (needs `bazel run`).
int Update(const std::set<std::string>& only) {
  const char* root = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (root == nullptr || *root == '\0') {
    std::cerr << "--update needs BUILD_WORKSPACE_DIRECTORY: run it as "
                 "`bazel run //tests:golden_test -- --update`\n";
    return 2;
  }
  int written = 0;
  for (const Case& c : AllCases()) {
    if (!only.empty() && !only.contains(c.name)) continue;
    absl::StatusOr<std::string> text = Render(c);
    if (!text.ok()) {
      std::cerr << "case " << c.name << ": " << text.status() << "\n";
      return 1;
    }
    const std::string path = GoldenPath(root, c);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << *text;
    out.close();
    if (!out) {
      std::cerr << "cannot write " << path << "\n";
      return 1;
    }
    size_t lines = 0;
    for (char ch : *text) lines += ch == '\n';
    std::cout << "wrote " << path << " (" << lines << " lines)\n";
    ++written;
  }
  if (!only.empty() && written != static_cast<int>(only.size())) {
    std::cerr << "--only named a case that does not exist\n";
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace ahbm::golden

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  bool update = false;
  std::set<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--update") {
      update = true;
    } else if (arg.starts_with("--only=")) {
      for (absl::string_view name : absl::StrSplit(arg.substr(7), ',')) only.emplace(name);
    } else {
      std::cerr << "unknown argument " << arg << " (--update [--only=NAME,...])\n";
      return 2;
    }
  }
  if (update) return ahbm::golden::Update(only);
  return RUN_ALL_TESTS();
}
