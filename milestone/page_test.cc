#include "milestone/page.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ahbm::milestone {
namespace {

PagePanel Panel(const std::string& name, std::vector<uint64_t> s, bool multi_user) {
  PagePanel panel;
  panel.name = name;
  panel.s = std::move(s);
  const std::optional<RequestLatencyUs> requests =
      multi_user ? std::optional<RequestLatencyUs>({12.5, 25.25, 50.0}) : std::nullopt;
  panel.rows = {
      {"opt1", 180.0, 0.31, 1.42, 1.9, "HBM", requests},
      {"opt3", 150.5, 0.26, 1.18, 1.6, "HBM", requests},
      {"baseline_dot", 580.25, 1.0, 2.2, 6.1, "GEMM", requests},
      {"auto", 150.5, 0.26, 1.18, 1.6, "HBM", std::nullopt},
  };
  panel.auto_pick = "AUTO picks opt3: S >= 8192 and C = 8";
  return panel;
}

PageInput Input() {
  PageInput in;
  in.title = "ahbm milestone: Llama3-70B attention (ADR-0060)";
  in.command = "./ahbm milestone --quick --out_dir=report";
  in.version = "0.25.0";
  in.commit = "518f49e";
  in.topology_name = "chip_4sip";
  in.topology_digest = "9f2c1a";
  in.panels = {Panel("single_user_decode", {131072}, false),
               Panel("multi_user_decode", {131072, 65536, 32768, 16384}, true),
               Panel("single_user_prefill", {8192}, false),
               Panel("multi_user_prefill", {8192, 4096, 2048, 1024}, true)};
  in.studies = {
      {"decode_c",
       "§9.2",
       "Which C for decode?",
       "best C: 8 for S >= 16384, 4 for S < 16384",
       "sweep_decode_c.csv",
       {"sweep_decode_c.svg", "sweep_decode_c_2.svg"}},
      {"tile",
       "§9.3, §9.5",
       "Which TILE, and when one-shot?",
       "best TILE: 256 & one-shot \"wins\"",
       "sweep_tile.csv",
       {"sweep_tile.svg"}},
  };
  in.timeline_svg = "timeline.svg";
  in.checks = {{"decode", "opt3", "H_q 64, H_kv 8, d 128, S 2048", 3.1e-3, 1e-2, true, ""},
               {"prefill", "ring", "H_q 64, H_kv 8, d 128, S 128", 2.5e-2, 1e-2, false,
                "o1 has NaN & <no> value"}};
  in.files = {{"milestone.json", "a1b2"}, {"milestone.csv", ""}};
  return in;
}

size_t Find(const std::string& html, const std::string& text) {
  const size_t at = html.find(text);
  EXPECT_NE(at, std::string::npos) << "missing: " << text;
  return at;
}

TEST(IndexHtml, SectionsInOrder) {
  const std::string html = IndexHtml(Input());
  EXPECT_TRUE(absl::StartsWith(html, "<!DOCTYPE html>\n"));
  EXPECT_TRUE(absl::EndsWith(html, "</html>\n"));
  const size_t panels = Find(html, "<h2 id=\"panels\">");
  const size_t answers = Find(html, "<h2 id=\"answers\">");
  const size_t timeline = Find(html, "<h2 id=\"timeline\">");
  const size_t checks = Find(html, "<h2 id=\"checks\">");
  const size_t files = Find(html, "<h2 id=\"files\">");
  EXPECT_LT(panels, answers);
  EXPECT_LT(answers, timeline);
  EXPECT_LT(timeline, checks);
  EXPECT_LT(checks, files);
  // The four panels, in the input's order, before the answers.
  size_t last = panels;
  for (const char* name :
       {"single_user_decode", "multi_user_decode", "single_user_prefill", "multi_user_prefill"}) {
    const size_t at = Find(html, std::string("<h3>") + name + "</h3>");
    EXPECT_LT(last, at);
    last = at;
  }
  EXPECT_LT(last, answers);
}

TEST(IndexHtml, RowsAnswersPlotsChecksDigests) {
  const std::string html = IndexHtml(Input());
  Find(html,
       "<td>opt3</td><td class=\"num\">150.50</td><td class=\"num\">0.26</td>"
       "<td class=\"num\">1.18</td><td class=\"num\">1.60</td><td>HBM</td>");
  // Per-request latencies in the multi-user panels only.
  Find(html, "<td class=\"num\">12.50 / 25.25 / 50.00</td>");
  EXPECT_EQ(Find(html, "requests min / med / max"),
            html.find("requests min / med / max", Find(html, "multi_user_decode")));
  Find(html, "AUTO picks opt3: S &gt;= 8192 and C = 8");
  Find(html, "S = 131072, 65536, 32768, 16384 tokens");
  Find(html, "§9.2 &mdash; Which C for decode?");
  Find(html, "<img src=\"sweep_decode_c.svg\"");
  Find(html, "<img src=\"sweep_decode_c_2.svg\"");
  Find(html, "<a href=\"sweep_tile.csv\">");
  Find(html, "<img src=\"timeline.svg\"");
  Find(html,
       "<td class=\"num\">2.50e-02</td><td class=\"num\">1.00e-02</td>"
       "<td class=\"bad\">FAIL: o1 has NaN &amp; &lt;no&gt; value</td>");
  Find(html, "<code>a1b2</code>");
  Find(html, "<code>-</code>");  // milestone.csv: no digest given
  Find(html, "<code>9f2c1a</code>");
}

TEST(IndexHtml, TextIsEscaped) {
  PageInput in = Input();
  in.studies[0].answer = "best C: 8 for S >= 16384, 4 for S < 16384 <script>alert(1)</script>";
  const std::string html = IndexHtml(in);
  Find(html,
       "best C: 8 for S &gt;= 16384, 4 for S &lt; 16384 &lt;script&gt;alert(1)&lt;/script&gt;");
  Find(html, "best TILE: 256 &amp; one-shot &quot;wins&quot;");
  EXPECT_FALSE(absl::StrContains(html, "<script"));
}

TEST(IndexHtml, SelfContained) {
  const std::string html = IndexHtml(Input());
  EXPECT_FALSE(absl::StrContains(html, "http")) << "nothing fetched, no link out";
  EXPECT_FALSE(absl::StrContains(html, "<script"));
  EXPECT_FALSE(absl::StrContains(html, "<link"));
  EXPECT_FALSE(absl::StrContains(html, "@import"));
  EXPECT_FALSE(absl::StrContains(html, "url("));
}

TEST(IndexHtml, EmptySectionsSaySo) {
  PageInput in = Input();
  in.panels[0].s.clear();  // no S line rather than "S =  tokens"
  in.studies.clear();
  in.timeline_svg.clear();
  in.checks.clear();
  const std::string html = IndexHtml(in);
  Find(html, "No study was run.");
  Find(html, "No timeline was drawn.");
  Find(html, "No numerical check was run.");
  EXPECT_FALSE(absl::StrContains(html, "<img src=\"timeline.svg\""));
  EXPECT_FALSE(absl::StrContains(html, "S =  tokens"));
  Find(html, "S = 131072, 65536, 32768, 16384 tokens");
}

TEST(IndexHtml, Deterministic) {
  const std::string html = IndexHtml(Input());
  EXPECT_EQ(html, IndexHtml(Input()));
  // Kept with the test outputs (bazel-testlogs/.../outputs.zip) for a look with
  // tools/screenshot.sh.
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (dir != nullptr) std::ofstream(std::string(dir) + "/index.html") << html;
}

}  // namespace
}  // namespace ahbm::milestone
