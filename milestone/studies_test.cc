#include "milestone/studies.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "milestone/test_files.h"
#include "milestone/study.h"
#include "topology/loader.h"

namespace ahbm::milestone {
namespace {

using ::testing::HasSubstr;

// ---- ParseCsv ----

TEST(ParseCsv, BareAndQuotedFields) {
  absl::StatusOr<CsvTable> t = ParseCsv(
      "a,b,c\n"
      "1,\"x, y\",\"say \"\"hi\"\"\"\n"
      "2,\"two\nlines\",\r\n"
      ",,\"\"\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->header, ::testing::ElementsAre("a", "b", "c"));
  ASSERT_EQ(t->rows.size(), 3u);
  EXPECT_THAT(t->rows[0], ::testing::ElementsAre("1", "x, y", "say \"hi\""));
  EXPECT_THAT(t->rows[1], ::testing::ElementsAre("2", "two\nlines", ""));
  EXPECT_THAT(t->rows[2], ::testing::ElementsAre("", "", ""));
  EXPECT_EQ(t->Column("b"), 1u);
  EXPECT_EQ(t->Column("d"), std::nullopt);
}

TEST(ParseCsv, LastLineWithoutNewline) {
  absl::StatusOr<CsvTable> t = ParseCsv("a,b\n1,2");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->rows.at(0), ::testing::ElementsAre("1", "2"));
}

TEST(ParseCsv, WidthMismatchNamesTheRecordsLine) {
  // The second record starts on line 4: the first holds a line break.
  absl::StatusOr<CsvTable> t = ParseCsv("a,b\n\"x\ny\",1\n1,2,3\n");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(t.status()));
  EXPECT_EQ(t.status().message(), "line 4: 3 fields, the header has 2");
}

TEST(ParseCsv, UnterminatedQuoteAndTextAfterAQuote) {
  absl::StatusOr<CsvTable> t = ParseCsv("a,b\n1,\"open\n");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "line 2: unterminated quoted field");
  t = ParseCsv("a\n\"x\"y\n");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "line 2: text after a closing quote");
  EXPECT_FALSE(ParseCsv("").ok());
}

// ---- the answers, from hand-made CSVs ----

const std::vector<Study>& Studies() {
  static const std::vector<Study>* studies = [] {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip.textproto");
    EXPECT_TRUE(chip.ok()) << chip.status();
    absl::StatusOr<std::vector<Study>> built = BuildStudies(*chip, StudyOptions{});
    EXPECT_TRUE(built.ok()) << built.status();
    return new std::vector<Study>(*std::move(built));
  }();
  return *studies;
}

const Study& Named(const std::string& name) {
  for (const Study& st : Studies()) {
    if (st.name == name) return st;
  }
  ADD_FAILURE() << "no study " << name;
  return Studies().front();
}

// A sweep CSV (sweep/README.md's columns): each row is the parameters' values, then the latency
// (empty for a row that did not run), then the status.
std::string Csv(const std::vector<std::string>& params,
                const std::vector<std::vector<std::string>>& rows,
                const std::string& workload = "kernel=decode") {
  std::string out = absl::StrCat(absl::StrJoin(params, ","),
                                 ",workload,latency_ps,roofline_bound_ps,roofline_ratio,binding,"
                                 "events,status\n");
  for (const std::vector<std::string>& r : rows) {
    const std::vector<std::string> values(r.begin(), r.end() - 2);
    const std::string& latency = r[r.size() - 2];
    const std::string& status = r.back();
    absl::StrAppend(&out, absl::StrJoin(values, ","), ",", workload, ",", latency, ",",
                    latency.empty() ? ",,,," : "1,1.0000,hbm,10,", status, "\n");
  }
  return out;
}

std::string Answer(const std::string& study, const std::string& csv) {
  absl::StatusOr<CsvTable> table = ParseCsv(csv);
  EXPECT_TRUE(table.ok()) << table.status();
  absl::StatusOr<std::string> answer = Named(study).answer(*table);
  EXPECT_TRUE(answer.ok()) << answer.status();
  return answer.ok() ? *answer : "";
}

TEST(Answer, DecodeC) {
  EXPECT_EQ(Answer("decode_c", Csv({"s", "c"}, {{"1024", "4", "100", "ok"},
                                                 {"1024", "8", "200", "ok"},
                                                 {"16384", "4", "900", "ok"},
                                                 {"16384", "8", "800", "ok"},
                                                 {"131072", "8", "900", "ok"}})),
            "best C: 8 for S >= 16384, 4 below");
  // A middle range of one S, a refused row skipped (never read as 0), ties to the first row.
  EXPECT_EQ(Answer("decode_c", Csv({"s", "c"}, {{"1024", "4", "100", "ok"},
                                                 {"1024", "8", "200", "ok"},
                                                 {"4096", "4", "300", "ok"},
                                                 {"4096", "8", "250", "ok"},
                                                 {"16384", "2", "800", "ok"},
                                                 {"16384", "4", "900", "ok"},
                                                 {"16384", "8", "", "c: refused"},
                                                 {"65536", "8", "1000", "ok"},
                                                 {"65536", "4", "1000", "ok"}})),
            "best C: 8 for S >= 65536, 2 for S 16384, 8 for S 4096, 4 below");
  EXPECT_EQ(Answer("decode_c", Csv({"s", "c"}, {{"1024", "8", "100", "ok"},
                                                 {"2048", "8", "100", "ok"}})),
            "best C: 8 for every S (1024..2048)");
}

TEST(Answer, DecodeVariants) {
  EXPECT_EQ(Answer("decode_variants", Csv({"s", "variant"},
                                          {{"1024", "opt3", "2000000", "ok"},
                                           {"1024", "short_context", "1000000", "ok"},
                                           {"8192", "opt3", "3000000", "ok"},
                                           {"8192", "opt2", "4500000", "ok"},
                                           {"8192", "short_context", "", "variant: refused"}})),
            "fastest: opt3 for S >= 8192, short_context below; at S 8192 opt3 3.000 us, next "
            "opt2 1.50x");
}

TEST(Answer, Tile) {
  EXPECT_EQ(Answer("tile", Csv({"s", "tile"}, {{"4096", "64", "2000000", "ok"},
                                               {"4096", "256", "1000000", "ok"},
                                               {"4096", "one_shot", "900000", "ok"},
                                               {"131072", "256", "8000000", "ok"},
                                               {"131072", "512", "7000000", "ok"},
                                               {"131072", "one_shot", "", "tile: too big"}})),
            "S 4096: TILE 256 1.000 us, one-shot wins at 0.90x; S 131072: TILE 512 7.000 us, "
            "one-shot refused");
}

TEST(Answer, Pipeline) {
  // Within 1% of the best (1.000 us): 1.005 and 1.010 us; the least in-flight limit, then the
  // least lookahead, is (2, 1).
  EXPECT_EQ(Answer("pipeline", Csv({"s", "max_inflight_composites", "lookahead"},
                                   {{"8192", "1", "1", "2000000", "ok"},
                                    {"8192", "1", "2", "", "lookahead: refused"},
                                    {"8192", "2", "1", "1010000", "ok"},
                                    {"8192", "2", "2", "1000000", "ok"},
                                    {"8192", "4", "1", "1005000", "ok"},
                                    {"131072", "2", "1", "8000000", "ok"},
                                    {"131072", "4", "1", "8000000", "ok"},
                                    {"131072", "4", "2", "8100000", "ok"}})),
            "S 8192: in-flight 2, lookahead 1 within 1% of the best (in-flight 2, lookahead 2: "
            "1.000 us); S 131072: in-flight 2, lookahead 1 as fast as any (8.000 us); 1 refused");
}

TEST(Answer, ReduceTopology) {
  EXPECT_EQ(Answer("reduce_topology",
                   Csv({"s", "level1_reduce", "level2_reduce"},
                       {{"1024", "tree", "tree", "2000000", "ok"},
                        {"1024", "chain", "tree", "1800000", "ok"},
                        {"1024", "ring_reduce", "ring_reduce", "", "level2_reduce: refused"},
                        {"131072", "tree", "tree", "8000000", "ok"},
                        {"131072", "tree", "chain", "8000000", "ok"}})),
            "best Level-1/Level-2: S 1024: chain/tree 1.800 us, 10.0% under tree/tree; S 131072: "
            "tree/tree 8.000 us, next tree/chain 1.00x");
}

TEST(Answer, Ring) {
  EXPECT_EQ(Answer("ring", Csv({"s", "ring_depth", "ring_message_bytes"},
                               {{"2048", "1", "16384", "3000000", "ok"},
                                {"2048", "2", "16384", "2000000", "ok"},
                                {"2048", "2", "65536", "1900000", "ok"},
                                {"2048", "3", "262144", "", "ring_message_bytes: too big"},
                                {"8192", "1", "4096", "5000000", "ok"},
                                {"8192", "2", "16384", "5000000", "ok"}})),
            "S 2048: best depth 2, 65536 B 1.900 us, 5.0% under the default (2, 16384 B), "
            "worst/best 1.58x (depth 1, 16384 B); S 8192: best depth 2, 16384 B 5.000 us, 0.0% "
            "under the default (2, 16384 B), worst/best 1.00x (depth 1, 4096 B)");
}

TEST(Answer, RingVsReduce) {
  // ADR formula 2S / (G ceil(log2(C P))), G = 64 / 8, C P = 64: S 512 -> 1024 / 48 = 21.3,
  // S 4096 -> 8192 / 48 = 170.7.
  const std::string csv = Csv({"s", "t_q", "kernel"},
                              {{"512", "1", "decode", "1000000", "ok"},
                               {"512", "1", "prefill", "5000000", "ok"},
                               {"512", "16", "decode", "6000000", "ok"},
                               {"512", "16", "prefill", "5000000", "ok"},
                               {"512", "32", "decode", "", "t_q: too many"},
                               {"512", "32", "prefill", "5100000", "ok"},
                               {"4096", "16", "decode", "1000000", "ok"},
                               {"4096", "16", "prefill", "2000000", "ok"},
                               {"32768", "8", "decode", "1000000", "ok"},
                               {"32768", "8", "prefill", "3000000", "ok"},
                               {"32768", "16", "decode", "2000000", "ok"},
                               {"32768", "16", "prefill", "4000000", "ok"}},
                              "kernel=decode h_q=64 h_kv=8 d=128 c=8 p=8");
  // S 32768: the reduce grows 125000 ps per token from T_q 8 to 16; it reaches the ring's
  // 4000000 ps at 16 + 2000000 / 125000 = 32. ADR: 65536 / 48 = 1365.3.
  EXPECT_EQ(Answer("ring_vs_reduce", csv),
            "S 512: ring from T_q 16, ADR formula T_q > 21.3; S 4096: reduce up to T_q 16 (the "
            "largest both ran; ring 2.00x), ADR formula T_q > 170.7; S 32768: reduce up to T_q "
            "16 (the largest both ran; ring 2.00x; the reduce's line through T_q 8, 16 meets the "
            "ring near T_q 32), ADR formula T_q > 1365.3");
  // Without C and P in the workload column the formula cannot be computed.
  absl::StatusOr<CsvTable> table =
      ParseCsv(Csv({"s", "t_q", "kernel"}, {{"512", "1", "decode", "1000000", "ok"}},
                   "kernel=decode h_q=64 h_kv=8"));
  ASSERT_TRUE(table.ok());
  absl::StatusOr<std::string> answer = Named("ring_vs_reduce").answer(*table);
  ASSERT_FALSE(answer.ok());
  EXPECT_THAT(answer.status().message(), HasSubstr("workload: no c="));
}

TEST(Answer, ShortLong) {
  EXPECT_EQ(Answer("short_long", Csv({"kernel", "s", "variant", "kv_per_cube"},
                                     {{"decode", "1024", "short_context", "1", "1000000", "ok"},
                                      {"decode", "1024", "short_context", "2", "900000", "ok"},
                                      {"decode", "1024", "opt3", "", "2000000", "ok"},
                                      {"decode", "4096", "short_context", "1", "2500000", "ok"},
                                      {"decode", "4096", "short_context", "2", "2400000", "ok"},
                                      {"decode", "4096", "opt3", "", "2000000", "ok"},
                                      {"decode", "8192", "short_context", "1", "", "s: refused"},
                                      {"decode", "8192", "opt3", "", "3000000", "ok"},
                                      {"prefill", "512", "short_context", "1", "3000000", "ok"},
                                      {"prefill", "512", "ring", "", "2000000", "ok"}})),
            "decode: short_context wins up to S 1024 (ADR §B: 262144), best kv_per_cube 2 (the "
            "fastest short_context at 2 of 2 S); prefill: ring wins at every S (512..512)");
  EXPECT_EQ(Answer("short_long", Csv({"kernel", "s", "variant", "kv_per_cube"},
                                     {{"decode", "1024", "short_context", "1", "3000000", "ok"},
                                      {"decode", "1024", "opt3", "", "2000000", "ok"},
                                      {"prefill", "512", "short_context", "1", "", "refused"}})),
            "decode: opt3 wins at every S (1024..1024) (ADR §B: 262144)");
}

TEST(Answer, IssueCost) {
  EXPECT_EQ(Answer("issue_cost", Csv({"s", "issue_cost_profile", "variant"},
                                     {{"8192", "zero", "opt3", "1000000", "ok"},
                                      {"8192", "zero", "opt2", "900000", "ok"},
                                      {"8192", "realistic", "opt3", "1000000", "ok"},
                                      {"8192", "realistic", "opt2", "1200000", "ok"},
                                      {"131072", "zero", "opt2", "", "variant: refused"}})),
            "zero: opt2/opt3 0.90x at S 8192; realistic: opt2/opt3 1.20x at S 8192 (< 1.00x: opt2 "
            "wins)");
}

TEST(Answer, QuerySplit) {
  EXPECT_EQ(Answer("query_split", Csv({"s", "query_split"},
                                      {{"2048", "zigzag", "1000000", "ok"},
                                       {"2048", "contiguous", "1280000", "ok"},
                                       {"2048", "striped", "990000", "ok"}})),
            "S 2048: striped best; contiguous 1.28x, striped 0.99x of zigzag");
}

TEST(Answer, KLayout) {
  EXPECT_EQ(Answer("k_layout", Csv({"kernel", "k_layout"},
                                   {{"decode", "tile_major", "1000000", "ok"},
                                    {"decode", "transposed", "1790000", "ok"},
                                    {"prefill", "transposed", "1000000", "ok"},
                                    {"prefill", "row_major", "", "k_layout: refused"}})),
            "decode: tile_major best; transposed 1.79x of tile_major; prefill: tile_major did not "
            "run");
}

TEST(Answer, EveryStudyNamesAMissingColumnAndNeedsARowThatRan) {
  for (const Study& st : Studies()) {
    SCOPED_TRACE(st.name);
    // Only the figures: every parameter column is missing.
    absl::StatusOr<CsvTable> bare = ParseCsv("workload,latency_ps,status\nw,100,ok\n");
    ASSERT_TRUE(bare.ok());
    absl::StatusOr<std::string> answer = st.answer(*bare);
    ASSERT_FALSE(answer.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(answer.status()));
    EXPECT_THAT(answer.status().message(), HasSubstr(": no such column in the CSV"));
    // Every column there, no row ran.
    std::vector<std::string> names;
    std::vector<std::string> empty_row;
    for (const sweep::Param& p : st.params) names.push_back(p.name), empty_row.push_back("x");
    empty_row.push_back("");
    empty_row.push_back("refused");
    absl::StatusOr<CsvTable> refused = ParseCsv(Csv(names, {empty_row}));
    ASSERT_TRUE(refused.ok()) << refused.status();
    answer = st.answer(*refused);
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.status().message(), "status: no row ran");
  }
}

TEST(Answer, UnreadableLatencyNamesTheColumn) {
  absl::StatusOr<CsvTable> table = ParseCsv(Csv({"s", "c"}, {{"1024", "4", "fast", "ok"}}));
  ASSERT_TRUE(table.ok());
  absl::StatusOr<std::string> answer = Named("decode_c").answer(*table);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().message(), "latency_ps: not a number (got 'fast')");
}

// ---- BuildStudies, SelectStudies ----

std::string Key(const sweep::Point& p) { return absl::StrJoin(p.values, "|"); }

TEST(BuildStudies, EveryStudyOnTheMilestoneChip) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip.textproto");
  ASSERT_TRUE(chip.ok());
  absl::StatusOr<std::vector<Study>> quick = BuildStudies(*chip, StudyOptions{.quick = true});
  ASSERT_TRUE(quick.ok());
  std::set<std::string> names;
  for (const Study& st : Studies()) {
    SCOPED_TRACE(st.name);
    EXPECT_TRUE(names.insert(st.name).second) << "twice";
    EXPECT_EQ(st.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"),
              std::string::npos);
    EXPECT_FALSE(st.adr.empty());
    EXPECT_FALSE(st.question.empty());
    EXPECT_FALSE(st.plots.empty());
    ASSERT_FALSE(st.points.empty());
    size_t runnable = 0;
    for (const sweep::Point& p : st.points) {
      ASSERT_EQ(p.values.size(), st.params.size()) << Key(p);
      // Each value is one the study lists (the plot's columns), or empty (not set on this row).
      for (size_t i = 0; i < p.values.size(); ++i) {
        const std::vector<std::string>& listed = st.params[i].values;
        EXPECT_TRUE(p.values[i].empty() ||
                    std::find(listed.begin(), listed.end(), p.values[i]) != listed.end())
            << st.params[i].name << " = " << p.values[i];
      }
      runnable += p.refused.ok();
    }
    EXPECT_GT(runnable, 0u);
  }
  EXPECT_EQ(names, (std::set<std::string>{"decode_c", "decode_variants", "tile", "pipeline",
                                          "reduce_topology", "ring", "ring_vs_reduce",
                                          "short_long", "issue_cost", "query_split",
                                          "k_layout"}));
  // --quick: the same studies in the same order, each a subset of its full grid.
  ASSERT_EQ(quick->size(), Studies().size());
  size_t full_points = 0, quick_points = 0;
  for (size_t i = 0; i < quick->size(); ++i) {
    const Study& q = (*quick)[i];
    const Study& full = Studies()[i];
    SCOPED_TRACE(q.name);
    EXPECT_EQ(q.name, full.name);
    std::set<std::string> keys;
    for (const sweep::Point& p : full.points) keys.insert(Key(p));
    for (const sweep::Point& p : q.points) EXPECT_TRUE(keys.contains(Key(p))) << Key(p);
    full_points += full.points.size();
    quick_points += q.points.size();
  }
  EXPECT_LT(quick_points * 4, full_points);
}

TEST(BuildStudies, AnyChipGivesEveryStudy) {
  // The small chip cannot hold Llama3-70B and defines no issue-cost profiles: the studies are
  // still built, their points refused rows.
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok());
  absl::StatusOr<std::vector<Study>> studies = BuildStudies(*chip, StudyOptions{});
  ASSERT_TRUE(studies.ok());
  EXPECT_EQ(studies->size(), Studies().size());
  for (const Study& st : *studies) EXPECT_FALSE(st.points.empty()) << st.name;
}

TEST(SelectStudies, NamesAllNoneAndUnknown) {
  EXPECT_EQ(SelectStudies(Studies(), "all")->size(), Studies().size());
  EXPECT_TRUE(SelectStudies(Studies(), "none")->empty());
  absl::StatusOr<std::vector<Study>> two = SelectStudies(Studies(), "tile,decode_c");
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].name, "decode_c");  // report order
  EXPECT_EQ((*two)[1].name, "tile");
  absl::StatusOr<std::vector<Study>> bad = SelectStudies(Studies(), "decode_c,nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_THAT(bad.status().message(), HasSubstr("--studies: unknown study 'nope' (one of "));
}

// ---- RunStudies on the small chip ----


TEST(RunStudies, WritesTheCsvAndAnswersFromIt) {
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/small.textproto");
  ASSERT_TRUE(chip.ok()) << chip.status();
  pb::Workload base;
  base.set_kernel(pb::DECODE);
  base.set_variant(pb::OPT3);
  base.set_h_q(8);
  base.set_h_kv(2);
  base.set_p(4);
  Study st;
  st.name = "tiny";
  st.adr = "§0";
  st.question = "Which S is slowest?";
  st.params = {{"s", {"1024", "2048"}}, {"tile", {"64", "100000"}}};
  absl::StatusOr<std::vector<sweep::Point>> points = sweep::BuildGrid(*chip, base, st.params);
  ASSERT_TRUE(points.ok()) << points.status();
  st.points = *points;
  ASSERT_FALSE(st.points[1].refused.ok());  // TILE 100000: a refused row
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    const std::optional<size_t> status = csv.Column("status");
    if (!status) return absl::InvalidArgumentError("status: no such column in the CSV");
    size_t ok = 0;
    for (const auto& row : csv.rows) ok += row[*status] == "ok";
    return absl::StrCat(ok, " of ", csv.rows.size(), " ran");
  };
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "run_studies";
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  size_t calls = 0;
  absl::StatusOr<std::vector<StudyOutcome>> one =
      RunStudies({st}, dir / "a", /*workers=*/1,
                 [&](const std::string& name, size_t, size_t n, uint64_t) {
                   EXPECT_EQ(name, "tiny");
                   EXPECT_EQ(n, 2u);
                   ++calls;
                 });
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(calls, 2u);
  absl::StatusOr<std::vector<StudyOutcome>> two = RunStudies({st}, dir / "b", 2, nullptr);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(one->size(), 1u);
  const StudyOutcome& o = one->front();
  ASSERT_TRUE(o.answer.ok()) << o.answer.status();
  EXPECT_EQ(*o.answer, "2 of 4 ran");
  EXPECT_EQ(Read(dir / "a" / "sweep_tiny.csv"), o.csv);
  EXPECT_EQ(Read(dir / "b" / "sweep_tiny.csv"), o.csv);  // 1 and 2 workers, same bytes
  EXPECT_THAT(o.csv, ::testing::StartsWith("s,tile,workload,latency_ps,"));
  EXPECT_EQ(FormatAnswers(*one), "answers (ADR §9, §B):\n§0 Which S is slowest? -> 2 of 4 ran\n");

  absl::StatusOr<std::vector<StudyOutcome>> nowhere =
      RunStudies({st}, dir / "missing" / "dir", 1, nullptr);
  ASSERT_FALSE(nowhere.ok());
  EXPECT_THAT(nowhere.status().message(), HasSubstr("--out_dir: cannot write "));
}

}  // namespace
}  // namespace ahbm::milestone
