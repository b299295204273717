#include "milestone/plot.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "milestone/test_files.h"

namespace ahbm::milestone {
namespace {

namespace fs = std::filesystem;


void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A decode_c-like study CSV: latency by S and C; C = 8 wins from S = 16384 on, C = 4 below.
// The refused row (C = 16) would win everywhere if it were read as 0.
constexpr char kDecodeCsv[] =
    "s,c,workload,latency_ps,status\n"
    "4096,4,\"kernel=decode c=4\",2000000,ok\n"
    "4096,8,\"kernel=decode c=8\",3000000,ok\n"
    "4096,16,\"kernel=decode c=16\",,\"c: must be <= 8, got 16\"\n"
    "16384,4,\"kernel=decode c=4\",9000000,ok\n"
    "16384,8,\"kernel=decode c=8\",7000000,ok\n"
    "16384,16,\"kernel=decode c=16\",,\"c: must be <= 8, got 16\"\n"
    "8192,4,\"kernel=decode c=4\",4000000,ok\n"
    "8192,8,\"kernel=decode c=8\",4500000,ok\n";

PlotSpec LatencyBySpec() {
  PlotSpec spec;
  spec.title = "decode latency by C";
  spec.x = "s";
  spec.x_label = "context S (tokens)";
  spec.log_x = true;
  spec.series = {"c"};
  return spec;
}

TEST(PlotFileName, AsStudyHNamesThem) {
  EXPECT_EQ(PlotFileName("decode_c", 0), "sweep_decode_c.svg");
  EXPECT_EQ(PlotFileName("decode_c", 1), "sweep_decode_c_2.svg");
  EXPECT_EQ(PlotFileName("decode_c", 2), "sweep_decode_c_3.svg");
}

TEST(PlotStudy, EveryPlotBesideTheCsv) {
  const std::string dir = TestDir("study");
  Write(dir + "/sweep_decode_c.csv", kDecodeCsv);
  Study study;
  study.name = "decode_c";
  study.plots = {LatencyBySpec(), LatencyBySpec()};
  study.plots[1].argmin_series = true;
  absl::StatusOr<std::vector<std::string>> svgs = PlotStudy(study, dir);
  ASSERT_TRUE(svgs.ok()) << svgs.status();
  EXPECT_EQ(*svgs, (std::vector<std::string>{"sweep_decode_c.svg", "sweep_decode_c_2.svg"}));
  EXPECT_FALSE(Read(dir + "/sweep_decode_c_2.svg").empty());
  EXPECT_EQ(Read(dir + "/sweep_decode_c_2.dat"), "# best c\n4096 4\n8192 4\n16384 8\n");

  Write(dir + "/sweep_refused.csv", "s,c,latency_ps,status\n4096,16,,refused\n");
  Study refused = study;
  refused.name = "refused";
  absl::StatusOr<std::vector<std::string>> none = PlotStudy(refused, dir);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(fs::exists(dir + "/sweep_refused.svg"));

  study.plots[1].series = {"tile"};
  EXPECT_EQ(PlotStudy(study, dir).status().message(),
            "study decode_c: " + dir + "/sweep_decode_c.csv: no column \"tile\"");
}

TEST(PlotSvg, DrawsLabelsLegendAndSeries) {
  const std::string dir = TestDir("latency");
  Write(dir + "/sweep_decode_c.csv", kDecodeCsv);
  const std::string svg = dir + "/sweep_decode_c.svg";
  ASSERT_TRUE(PlotSvg(LatencyBySpec(), dir + "/sweep_decode_c.csv", svg).ok());

  const std::string text = Read(svg);
  ASSERT_FALSE(text.empty());
  EXPECT_TRUE(absl::StrContains(text, "<svg"));
  EXPECT_TRUE(absl::StrContains(text, "decode latency by C"));
  EXPECT_TRUE(absl::StrContains(text, "context S (tokens)"));
  EXPECT_TRUE(absl::StrContains(text, "latency (us)"));
  // The legend: its title names the series column, each entry a value.
  EXPECT_TRUE(absl::StrContains(text, ">c<"));
  EXPECT_TRUE(absl::StrContains(text, ">4<"));
  EXPECT_TRUE(absl::StrContains(text, ">8<"));

  // One block per series, x ascending, y in us; the refused C = 16 rows are left out.
  EXPECT_EQ(Read(dir + "/sweep_decode_c.dat"),
            "# 4\n4096 2\n8192 4\n16384 9\n"
            "\n\n"
            "# 8\n4096 3\n8192 4.5\n16384 7\n");
  const std::string script = Read(dir + "/sweep_decode_c.gp");
  EXPECT_TRUE(absl::StrContains(script, R"(set output "sweep_decode_c.svg")"));
  EXPECT_TRUE(absl::StrContains(script, "set logscale x"));
  EXPECT_FALSE(absl::StrContains(script, "set logscale y"));
  EXPECT_FALSE(absl::StrContains(script, dir)) << "the script names files beside it only";
}

TEST(PlotSvg, ArgminSeriesPlotsTheBestValuePerX) {
  const std::string dir = TestDir("argmin");
  Write(dir + "/sweep_decode_c.csv", kDecodeCsv);
  PlotSpec spec = LatencyBySpec();
  spec.title = "best C by S";
  spec.y_label = "best C";
  spec.argmin_series = true;
  ASSERT_TRUE(PlotSvg(spec, dir + "/sweep_decode_c.csv", dir + "/sweep_decode_c_2.svg").ok());
  // Per S ascending: C = 4 at 4096 and 8192 (4000000 < 4500000), C = 8 at 16384.
  EXPECT_EQ(Read(dir + "/sweep_decode_c_2.dat"), "# best c\n4096 4\n8192 4\n16384 8\n");
  EXPECT_TRUE(absl::StrContains(Read(dir + "/sweep_decode_c_2.svg"), "best C"));
}

// A log y axis ends at the data, not at whole decades, and has labelled tics even inside one
// decade; a few distinct x values get a tic each.
TEST(PlotSvg, LogYAxisFitsTheData) {
  const std::string dir = TestDir("log_y");
  Write(dir + "/s.csv",
        "s,c,latency_ps,status\n"
        "1024,4,2000000,ok\n"
        "8192,4,2300000,ok\n");
  PlotSpec spec = LatencyBySpec();
  spec.log_y = true;
  ASSERT_TRUE(PlotSvg(spec, dir + "/s.csv", dir + "/s.svg").ok());
  const std::string script = Read(dir + "/s.gp");
  // 2 .. 2.3 us with a 5 % margin each side: [1.90476, 2.415]; 1-2-5 and 1..9 give fewer than
  // three tics inside, steps of 0.2 give 2, 2.2, 2.4.
  EXPECT_TRUE(absl::StrContains(script, "set yrange [1.90476:2.415]\nset ytics (2, 2.2, 2.4)\n"))
      << script;
  EXPECT_TRUE(absl::StrContains(script, "set xtics (1024, 8192)\n")) << script;
  EXPECT_TRUE(absl::StrContains(script, "set autoscale noextend\n"));
}

TEST(PlotSvg, CategoricalXBecomesNamedTicks) {
  const std::string dir = TestDir("categorical");
  Write(dir + "/r.csv",
        "level1_reduce,level2_reduce,latency_ps,status\n"
        "tree,ring,5000000,ok\n"
        "tree,tree,4000000,ok\n"
        "'star',\"ring\nbuffer\",6000000,ok\n");
  PlotSpec spec;
  spec.title = "reduce topology";
  spec.x = "level1_reduce";
  spec.x_categorical = true;
  spec.x_label = R"(Level-1 "reduce" \ topology)";
  spec.series = {"level2_reduce"};
  ASSERT_TRUE(PlotSvg(spec, dir + "/r.csv", dir + "/r.svg").ok());
  // A line break in a series value stays inside its one comment line.
  EXPECT_EQ(Read(dir + "/r.dat"), "# ring\n0 5\n\n\n# tree\n0 4\n\n\n# ring buffer\n1 6\n");
  EXPECT_TRUE(absl::StrContains(Read(dir + "/r.gp"), R"(set xtics ("tree" 0, "'star'" 1))"));
  // Quotes and backslashes reach the SVG as written (XML-escaped or not).
  const std::string svg = Read(dir + "/r.svg");
  EXPECT_TRUE(absl::StrContains(svg, "'star'") || absl::StrContains(svg, "&apos;star&apos;"));
  EXPECT_TRUE(absl::StrContains(svg, R"(Level-1 "reduce" \ topology)") ||
              absl::StrContains(svg, R"(Level-1 &quot;reduce&quot; \ topology)"));
}

TEST(PlotSvg, SameInputsSameFiles) {
  const std::string a = TestDir("same_a");
  const std::string b = TestDir("same_b");
  Write(a + "/s.csv", kDecodeCsv);
  Write(b + "/s.csv", kDecodeCsv);
  ASSERT_TRUE(PlotSvg(LatencyBySpec(), a + "/s.csv", a + "/s.svg").ok());
  ASSERT_TRUE(PlotSvg(LatencyBySpec(), b + "/s.csv", b + "/s.svg").ok());
  EXPECT_EQ(Read(a + "/s.gp"), Read(b + "/s.gp"));
  EXPECT_EQ(Read(a + "/s.dat"), Read(b + "/s.dat"));
  EXPECT_EQ(Read(a + "/s.svg"), Read(b + "/s.svg")) << "gnuplot's SVG holds no date";
}

TEST(PlotSvg, MissingColumnIsNamed) {
  const std::string dir = TestDir("missing");
  Write(dir + "/s.csv", kDecodeCsv);
  PlotSpec spec = LatencyBySpec();
  spec.series = {"tile"};
  const absl::Status status = PlotSvg(spec, dir + "/s.csv", dir + "/s.svg");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), dir + "/s.csv: no column \"tile\"");
  EXPECT_FALSE(fs::exists(dir + "/s.svg"));
}

TEST(PlotSvg, UnreadableNumberNamesLineAndColumn) {
  const std::string dir = TestDir("nan");
  Write(dir + "/s.csv", "s,c,latency_ps,status\n4096,4,fast,ok\n");
  const absl::Status status = PlotSvg(LatencyBySpec(), dir + "/s.csv", dir + "/s.svg");
  EXPECT_EQ(status.message(), dir + "/s.csv line 2: latency_ps: not a number (\"fast\")");
}

TEST(PlotSvg, NoOkRowIsRefused) {
  const std::string dir = TestDir("none");
  Write(dir + "/s.csv", "s,c,latency_ps,status\n4096,16,,refused\n");
  const absl::Status status = PlotSvg(LatencyBySpec(), dir + "/s.csv", dir + "/s.svg");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), dir + "/s.csv: no row with status ok to plot");
}

TEST(PlotSvg, ArgminNeedsOneSeriesColumn) {
  const std::string dir = TestDir("argmin_two");
  Write(dir + "/s.csv", kDecodeCsv);
  PlotSpec spec = LatencyBySpec();
  spec.series = {"c", "workload"};
  spec.argmin_series = true;
  EXPECT_EQ(PlotSvg(spec, dir + "/s.csv", dir + "/s.svg").message(),
            dir + "/s.csv: argmin_series needs exactly one series column");
}

TEST(PlotSvg, GnuplotMissingSaysHowToInstall) {
  const std::string dir = TestDir("no_gnuplot");
  Write(dir + "/s.csv", kDecodeCsv);
  const char* path = std::getenv("PATH");
  const std::string saved = path != nullptr ? path : "";
  setenv("PATH", dir.c_str(), /*overwrite=*/1);
  const absl::Status status = PlotSvg(LatencyBySpec(), dir + "/s.csv", dir + "/s.svg");
  setenv("PATH", saved.c_str(), /*overwrite=*/1);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "gnuplot not found: tools/setup.sh installs gnuplot-nox");
}

TEST(PlotSvg, GnuplotErrorIsReported) {
  const std::string dir = TestDir("bad_script");
  Write(dir + "/bad.gp", "set output 'bad.svg'\nplot 'no_such.dat' using 1:2\n");
  const absl::Status status = RunGnuplot(dir + "/bad.gp", dir + "/bad.svg");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StartsWith(status.message(), "gnuplot " + dir + "/bad.gp: ")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "no_such.dat")) << status;
}

TEST(PlotSvg, UnwritableDirectoryIsNamed) {
  const std::string dir = TestDir("unwritable");
  Write(dir + "/s.csv", kDecodeCsv);
  const absl::Status status = PlotSvg(LatencyBySpec(), dir + "/s.csv", dir + "/no_such_dir/s.svg");
  EXPECT_EQ(status.message(), dir + "/no_such_dir/s.dat: cannot write");
}

}  // namespace
}  // namespace ahbm::milestone
