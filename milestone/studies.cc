// The studies: one function per ADR question (§9, §B), each with its grid and its answer
// function (what each answers: milestone/README.md "Studies"). Every answer reads only the
// study's CSV (study.h); ties between equal latencies go to the row met first in the CSV
// (point order) unless the answer says otherwise.
#include "milestone/studies.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/check.h"
#include "base/status_macros.h"
#include "sweep/job_pool.h"

namespace ahbm::milestone {

namespace {

using sweep::Param;
using sweep::Point;

// ---- building the grids ----

std::vector<std::string> Values(std::initializer_list<uint64_t> numbers) {
  std::vector<std::string> out;
  for (uint64_t n : numbers) out.push_back(absl::StrCat(n));
  return out;
}

// Llama3-70B attention, the milestone's shape (milestone.h; this library is below it).
constexpr uint32_t kHq = 64, kHkv = 8, kD = 128;

pb::Workload Llama(pb::Kernel kernel) {
  pb::Workload w;
  w.set_kernel(kernel);
  w.set_h_q(kHq);
  w.set_h_kv(kHkv);
  w.set_d(kD);
  return w;
}

pb::Workload Llama(pb::Kernel kernel, pb::Variant variant) {
  pb::Workload w = Llama(kernel);
  w.set_variant(variant);
  return w;
}

// The studies' own names and values: a grid that does not build is our bug.
std::vector<Point> Grid(const pb::Chip& chip, const pb::Workload& base,
                        const std::vector<Param>& params) {
  absl::StatusOr<std::vector<Point>> points = sweep::BuildGrid(chip, base, params);
  AHBM_CHECK(points.ok()) << points.status();
  return *std::move(points);
}

void Append(std::vector<Point>& to, std::vector<Point> more) {
  for (Point& p : more) to.push_back(std::move(p));
}

// Decode contexts (powers of two, 1K..128K; --quick: two of them).
std::vector<std::string> DecodeContexts(const StudyOptions& o) {
  return o.quick ? Values({1024, 8192})
                 : Values({1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072});
}

// ---- reading the CSV ----

struct Sample {
  std::vector<std::string> keys;  // the cells of the columns asked for
  double latency_ps = 0;
};

absl::Status MissingColumn(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": no such column in the CSV"));
}

// Rows with status "ok", in CSV order: the `keys` cells and latency_ps. InvalidArgument naming a
// missing column or an unreadable latency.
absl::StatusOr<std::vector<Sample>> Samples(const CsvTable& csv,
                                            const std::vector<std::string>& keys) {
  std::vector<size_t> at;
  for (const std::string& k : keys) {
    const std::optional<size_t> c = csv.Column(k);
    if (!c) return MissingColumn(k);
    at.push_back(*c);
  }
  const std::optional<size_t> latency = csv.Column("latency_ps");
  if (!latency) return MissingColumn("latency_ps");
  const std::optional<size_t> status = csv.Column("status");
  if (!status) return MissingColumn("status");
  std::vector<Sample> out;
  for (const std::vector<std::string>& row : csv.rows) {
    if (row[*status] != "ok") continue;
    Sample s;
    for (size_t c : at) s.keys.push_back(row[c]);
    if (!absl::SimpleAtod(row[*latency], &s.latency_ps)) {
      return absl::InvalidArgumentError(
          absl::StrCat("latency_ps: not a number (got '", row[*latency], "')"));
    }
    out.push_back(std::move(s));
  }
  if (out.empty()) return absl::InvalidArgumentError("status: no row ran");
  return out;
}

// The `keys` cells of the rows whose status is not "ok" (refused or failed).
std::vector<std::vector<std::string>> NotRun(const CsvTable& csv,
                                             const std::vector<std::string>& keys) {
  std::vector<std::vector<std::string>> out;
  const std::optional<size_t> status = csv.Column("status");
  if (!status) return out;
  for (const std::vector<std::string>& row : csv.rows) {
    if (row[*status] == "ok") continue;
    std::vector<std::string> cells;
    for (const std::string& k : keys) {
      if (const std::optional<size_t> c = csv.Column(k)) cells.push_back(row[*c]);
    }
    out.push_back(std::move(cells));
  }
  return out;
}

absl::StatusOr<uint64_t> Uint(absl::string_view column, const std::string& text) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(column, ": not a number (got '", text, "')"));
  }
  return v;
}

std::string Us(double ps) { return absl::StrFormat("%.3f us", ps / 1e6); }
std::string Times(double r) { return absl::StrFormat("%.2fx", r); }

// The least-latency sample of each group (groups by keys[group], ordered by their first row);
// ties to the first.
std::vector<std::pair<std::string, const Sample*>> BestPerGroup(const std::vector<Sample>& samples,
                                                                size_t group) {
  std::vector<std::pair<std::string, const Sample*>> best;
  for (const Sample& s : samples) {
    auto it = std::find_if(best.begin(), best.end(),
                           [&](const auto& b) { return b.first == s.keys[group]; });
    if (it == best.end()) {
      best.emplace_back(s.keys[group], &s);
    } else if (s.latency_ps < it->second->latency_ps) {
      it->second = &s;
    }
  }
  return best;
}

// Per context S (the numeric column keys[s_key]), the least-latency sample, S ascending.
absl::StatusOr<std::map<uint64_t, const Sample*>> BestPerS(const std::vector<Sample>& samples,
                                                           size_t s_key, absl::string_view s_name) {
  std::map<uint64_t, const Sample*> best;
  for (const Sample& s : samples) {
    absl::StatusOr<uint64_t> v = Uint(s_name, s.keys[s_key]);
    RETURN_IF_ERROR(v.status());
    auto [it, fresh] = best.emplace(*v, &s);
    if (!fresh && s.latency_ps < it->second->latency_ps) it->second = &s;
  }
  return best;
}

// Ranges of S with the same label, top range first: "8 for S >= 16384, 4 for S 2048..8192,
// 2 below"; one range: "8 for every S (1024..131072)".
std::string Ranges(const std::vector<std::pair<uint64_t, std::string>>& by_s) {
  struct Range {
    uint64_t lo, hi;
    std::string label;
  };
  std::vector<Range> ranges;
  for (const auto& [s, label] : by_s) {
    if (!ranges.empty() && ranges.back().label == label) {
      ranges.back().hi = s;
    } else {
      ranges.push_back({s, s, label});
    }
  }
  if (ranges.size() == 1) {
    return absl::StrCat(ranges[0].label, " for every S (", ranges[0].lo, "..", ranges[0].hi, ")");
  }
  std::vector<std::string> parts;
  for (size_t i = ranges.size(); i-- > 0;) {
    const Range& r = ranges[i];
    if (i + 1 == ranges.size()) {
      parts.push_back(absl::StrCat(r.label, " for S >= ", r.lo));
    } else if (i == 0) {
      parts.push_back(absl::StrCat(r.label, " below"));
    } else if (r.lo == r.hi) {
      parts.push_back(absl::StrCat(r.label, " for S ", r.lo));
    } else {
      parts.push_back(absl::StrCat(r.label, " for S ", r.lo, "..", r.hi));
    }
  }
  return absl::StrJoin(parts, ", ");
}

// ---- the studies ----

// §9.2 "the decode C knob": CUBEs per group against context length.
Study DecodeC(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "decode_c";
  st.adr = "§9.2";
  st.question = "Which decode C (CUBEs per group) for which S?";
  st.params = {{"s", DecodeContexts(o)}, {"c", o.quick ? Values({4, 8}) : Values({1, 2, 4, 8})}};
  st.points = Grid(chip, Llama(pb::DECODE, pb::OPT3), st.params);
  st.plots = {{.title = "decode opt3: latency vs context per C",
               .x = "s",
               .x_label = "context S (tokens)",
               .log_x = true,
               .log_y = true,
               .series = {"c"}},
              {.title = "decode opt3: the fastest C per context",
               .x = "s",
               .x_label = "context S (tokens)",
               .log_x = true,
               .y_label = "best C (CUBEs per group)",
               .y_scale = 1,
               .series = {"c"},
               .argmin_series = true}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples = Samples(csv, {"s", "c"});
    RETURN_IF_ERROR(samples.status());
    absl::StatusOr<std::map<uint64_t, const Sample*>> best = BestPerS(*samples, 0, "s");
    RETURN_IF_ERROR(best.status());
    std::vector<std::pair<uint64_t, std::string>> by_s;
    for (const auto& [s, sample] : *best) by_s.emplace_back(s, sample->keys[1]);
    return absl::StrCat("best C: ", Ranges(by_s));
  };
  return st;
}

// Latency vs context per variant (the milestone's decode panel across S).
Study DecodeVariants(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "decode_variants";
  st.adr = "§A, §9";
  st.question = "Which decode variant is fastest at which S?";
  st.params = {{"s", DecodeContexts(o)},
               {"variant", o.quick ? std::vector<std::string>{"opt1", "opt3", "opt2"}
                                   : std::vector<std::string>{"opt1", "opt3", "opt2",
                                                              "opt2_lookahead", "short_context",
                                                              "baseline_dot", "baseline_fanout",
                                                              "baseline_rev1_tree"}}};
  st.points = Grid(chip, Llama(pb::DECODE), st.params);
  st.plots = {{.title = "decode: latency vs context per variant",
               .x = "s",
               .x_label = "context S (tokens)",
               .log_x = true,
               .log_y = true,
               .series = {"variant"}}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples = Samples(csv, {"s", "variant"});
    RETURN_IF_ERROR(samples.status());
    absl::StatusOr<std::map<uint64_t, const Sample*>> best = BestPerS(*samples, 0, "s");
    RETURN_IF_ERROR(best.status());
    std::vector<std::pair<uint64_t, std::string>> by_s;
    for (const auto& [s, sample] : *best) by_s.emplace_back(s, sample->keys[1]);
    // The margin at the longest context: the runner-up.
    const auto& [top_s, top] = *best->rbegin();
    const Sample* second = nullptr;
    for (const Sample& s : *samples) {
      if (s.keys[0] != top->keys[0] || &s == top) continue;
      if (second == nullptr || s.latency_ps < second->latency_ps) second = &s;
    }
    std::string margin =
        absl::StrCat("; at S ", top_s, " ", top->keys[1], " ", Us(top->latency_ps));
    if (second != nullptr) {
      absl::StrAppend(&margin, ", next ", second->keys[1], " ",
                      Times(second->latency_ps / top->latency_ps));
    }
    return absl::StrCat("fastest: ", Ranges(by_s), margin);
  };
  return st;
}

// §9.3, §9.5: the KV tile, and one Q.K^T / softmax / P.V over a rank's whole block (§5.2).
Study Tile(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "tile";
  st.adr = "§9.3, §9.5";
  st.question = "Which decode TILE, and when does one-shot win?";
  const std::vector<std::string> contexts =
      o.quick ? Values({4096}) : Values({4096, 131072});
  const std::vector<std::string> tiles =
      o.quick ? Values({128, 256}) : Values({64, 128, 256, 512, 1024});
  // The tile column holds a TILE or "one_shot" (then the workload sets one_shot, no tile).
  st.params = {{"s", contexts}, {"tile", tiles}};
  pb::Workload one_shot = Llama(pb::DECODE, pb::OPT3);
  one_shot.set_one_shot(true);
  for (const std::string& s : contexts) {
    Append(st.points, Grid(chip, Llama(pb::DECODE, pb::OPT3), {{"s", {s}}, {"tile", tiles}}));
    for (Point& p : Grid(chip, one_shot, {{"s", {s}}})) {
      p.values.push_back("one_shot");
      st.points.push_back(std::move(p));
    }
  }
  st.params[1].values.push_back("one_shot");
  st.plots = {{.title = "decode opt3: latency vs KV tile",
               .x = "tile",
               .x_categorical = true,
               .x_label = "TILE (keys), or one-shot over the whole block",
               .log_y = true,
               .series = {"s"}}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples = Samples(csv, {"s", "tile"});
    RETURN_IF_ERROR(samples.status());
    std::vector<std::string> parts;
    for (const auto& [s, unused] : BestPerGroup(*samples, 0)) {
      const Sample* best_tile = nullptr;
      const Sample* shot = nullptr;
      for (const Sample& x : *samples) {
        if (x.keys[0] != s) continue;
        if (x.keys[1] == "one_shot") {
          shot = &x;
        } else if (best_tile == nullptr || x.latency_ps < best_tile->latency_ps) {
          best_tile = &x;
        }
      }
      std::string part = absl::StrCat("S ", s, ": ");
      if (best_tile != nullptr) {
        absl::StrAppend(&part, "TILE ", best_tile->keys[1], " ", Us(best_tile->latency_ps));
      }
      if (shot != nullptr && best_tile != nullptr) {
        const double r = shot->latency_ps / best_tile->latency_ps;
        absl::StrAppend(&part, r < 1 ? ", one-shot wins at " : ", one-shot ", Times(r));
      } else if (shot != nullptr) {
        absl::StrAppend(&part, "one-shot ", Us(shot->latency_ps));
      } else {
        bool refused = false;
        for (const auto& keys : NotRun(csv, {"s", "tile"})) {
          refused |= keys.size() == 2 && keys[0] == s && keys[1] == "one_shot";
        }
        if (refused) absl::StrAppend(&part, ", one-shot refused");
      }
      parts.push_back(part);
    }
    return absl::StrJoin(parts, "; ");
  };
  return st;
}

// §9.1: composites issued ahead (lookahead) against the scheduler's in-flight limit.
Study Pipeline(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "pipeline";
  st.adr = "§9.1";
  st.question = "How deep must the composite pipeline be?";
  st.params = {{"s", o.quick ? Values({8192}) : Values({8192, 131072})},
               {"max_inflight_composites", o.quick ? Values({2, 4}) : Values({1, 2, 4, 8})},
               {"lookahead", o.quick ? Values({1, 2}) : Values({1, 2, 3, 4})}};
  st.points = Grid(chip, Llama(pb::DECODE, pb::OPT3), st.params);
  st.plots = {{.title = "decode opt3: latency vs lookahead per in-flight limit",
               .x = "lookahead",
               .x_label = "lookahead (composites issued ahead)",
               .log_y = true,
               .series = {"s", "max_inflight_composites"}}};
  // "Smallest": the least in-flight limit (the hardware's cost), then the least lookahead.
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples =
        Samples(csv, {"s", "max_inflight_composites", "lookahead"});
    RETURN_IF_ERROR(samples.status());
    std::vector<std::string> parts;
    for (const auto& [s, best] : BestPerGroup(*samples, 0)) {
      const Sample* smallest = nullptr;
      std::pair<uint64_t, uint64_t> smallest_key;
      for (const Sample& x : *samples) {
        if (x.keys[0] != s || x.latency_ps > best->latency_ps * 1.01) continue;
        absl::StatusOr<uint64_t> inflight = Uint("max_inflight_composites", x.keys[1]);
        RETURN_IF_ERROR(inflight.status());
        absl::StatusOr<uint64_t> ahead = Uint("lookahead", x.keys[2]);
        RETURN_IF_ERROR(ahead.status());
        if (smallest == nullptr || std::make_pair(*inflight, *ahead) < smallest_key) {
          smallest = &x;
          smallest_key = {*inflight, *ahead};
        }
      }
      std::string part = absl::StrCat("S ", s, ": in-flight ", smallest->keys[1],
                                      ", lookahead ", smallest->keys[2]);
      if (smallest->latency_ps == best->latency_ps) {
        absl::StrAppend(&part, " as fast as any (", Us(best->latency_ps), ")");
      } else {
        absl::StrAppend(&part, " within 1% of the best (in-flight ", best->keys[1],
                        ", lookahead ", best->keys[2], ": ", Us(best->latency_ps), ")");
      }
      parts.push_back(part);
    }
    const size_t refused = NotRun(csv, {}).size();
    std::string tail = refused ? absl::StrCat("; ", refused, " refused") : "";
    return absl::StrCat(absl::StrJoin(parts, "; "), tail);
  };
  return st;
}

// §9.2, §4.4: the collective of each reduce level (Level-1 between CUBEs, Level-2 between a
// CUBE's PEs), the chunked ring among them.
Study ReduceTopology(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "reduce_topology";
  st.adr = "§9.2, §4.4";
  st.question = "Which reduce collective per level?";
  const std::vector<std::string> kinds = {"tree", "chain", "ring_reduce"};
  st.params = {{"s", o.quick ? Values({1024}) : Values({1024, 131072})},
               {"level1_reduce", kinds},
               {"level2_reduce", kinds}};
  st.points = Grid(chip, Llama(pb::DECODE, pb::OPT3), st.params);
  st.plots = {{.title = "decode opt3: latency per reduce collective",
               .x = "level2_reduce",
               .x_categorical = true,
               .x_label = "Level-2 (IPCQ, between PEs) collective",
               .log_y = true,
               .series = {"s", "level1_reduce"}}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples =
        Samples(csv, {"s", "level1_reduce", "level2_reduce"});
    RETURN_IF_ERROR(samples.status());
    std::vector<std::string> parts;
    for (const auto& [s, best] : BestPerGroup(*samples, 0)) {
      std::string part = absl::StrCat("S ", s, ": ", best->keys[1], "/", best->keys[2], " ",
                                      Us(best->latency_ps));
      const Sample* tree = nullptr;
      for (const Sample& x : *samples) {
        if (x.keys[0] == s && x.keys[1] == "tree" && x.keys[2] == "tree") tree = &x;
      }
      if (tree == nullptr) {
        absl::StrAppend(&part, " (tree/tree did not run)");
      } else if (tree != best) {
        absl::StrAppend(&part, absl::StrFormat(", %.1f%% under tree/tree",
                                               100 * (1 - best->latency_ps / tree->latency_ps)));
      } else {
        // The default is best: by how much the runner-up is slower.
        const Sample* next = nullptr;
        for (const Sample& x : *samples) {
          if (x.keys[0] != s || &x == best) continue;
          if (next == nullptr || x.latency_ps < next->latency_ps) next = &x;
        }
        if (next != nullptr) {
          absl::StrAppend(&part, ", next ", next->keys[1], "/", next->keys[2], " ",
                          Times(next->latency_ps / best->latency_ps));
        }
      }
      parts.push_back(part);
    }
    return absl::StrCat("best Level-1/Level-2: ", absl::StrJoin(parts, "; "));
  };
  return st;
}

// §9.4: the prefill ring's receive depth and NOC message size.
Study Ring(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "ring";
  st.adr = "§9.4";
  st.question = "Which prefill ring depth and message size?";
  std::vector<std::string> bytes = o.quick ? Values({16384}) : Values({4096, 16384, 65536});
  const uint64_t queue = chip.sip().noc().endpoint_queue_bytes();
  if (!o.quick && queue > 65536) bytes.push_back(absl::StrCat(queue));
  st.params = {{"s", o.quick ? Values({2048}) : Values({2048, 8192})},
               {"ring_depth", o.quick ? Values({1, 2}) : Values({1, 2, 3, 4})},
               {"ring_message_bytes", bytes}};
  st.points = Grid(chip, Llama(pb::PREFILL, pb::RING), st.params);
  st.plots = {{.title = "prefill ring: latency vs message size per depth",
               .x = "ring_message_bytes",
               .x_label = "ring message (bytes)",
               .log_x = true,
               .log_y = true,
               .series = {"s", "ring_depth"}}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples =
        Samples(csv, {"s", "ring_depth", "ring_message_bytes"});
    RETURN_IF_ERROR(samples.status());
    std::vector<std::string> parts;
    for (auto [s, best] : BestPerGroup(*samples, 0)) {
      const Sample* worst = nullptr;
      const Sample* fallback = nullptr;  // the kernel's defaults: depth 2, 16 KiB
      for (const Sample& x : *samples) {
        if (x.keys[0] != s) continue;
        if (worst == nullptr || x.latency_ps > worst->latency_ps) worst = &x;
        if (x.keys[1] == "2" && x.keys[2] == "16384") fallback = &x;
      }
      // A tie with the default goes to the default.
      if (fallback != nullptr && fallback->latency_ps <= best->latency_ps) best = fallback;
      std::string part = absl::StrCat("S ", s, ": best depth ", best->keys[1], ", ",
                                      best->keys[2], " B ", Us(best->latency_ps));
      if (fallback != nullptr) {
        absl::StrAppend(&part,
                        absl::StrFormat(", %.1f%% under the default (2, 16384 B)",
                                        100 * (1 - best->latency_ps / fallback->latency_ps)));
      }
      absl::StrAppend(&part, ", worst/best ", Times(worst->latency_ps / best->latency_ps),
                      " (depth ", worst->keys[1], ", ", worst->keys[2], " B)");
      parts.push_back(part);
    }
    return absl::StrJoin(parts, "; ");
  };
  return st;
}

// A workload field from the CSV's workload column ("kernel=decode h_q=64 ... c=8").
absl::StatusOr<uint64_t> WorkloadField(const std::string& summary, absl::string_view name) {
  for (absl::string_view token : absl::StrSplit(summary, ' ')) {
    if (absl::StartsWith(token, name) && token.size() > name.size() && token[name.size()] == '=') {
      return Uint(absl::StrCat("workload: ", name), std::string(token.substr(name.size() + 1)));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("workload: no ", name, "= in '", summary, "'"));
}

// §5.5: the decode reduce kernel against the prefill ring for T_q query tokens; the ADR
// predicts the ring wins for T_q > 2S / (G * ceil(log2(C*P))), G = h_q / h_kv.
Study RingVsReduce(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "ring_vs_reduce";
  st.adr = "§5.5";
  st.question = "From which T_q does the ring beat the reduce?";
  st.params = {{"s", o.quick ? Values({512}) : Values({512, 4096, 32768})},
               {"t_q", o.quick ? Values({1, 16}) : Values({1, 2, 4, 8, 16, 32, 64, 256})},
               {"kernel", {"decode", "prefill"}}};
  // C and P set, so the CSV carries what the formula needs.
  pb::Workload base = Llama(pb::DECODE);
  base.set_c(8);
  base.set_p(8);
  st.points = Grid(chip, base, st.params);
  st.plots = {{.title = "decode reduce vs prefill ring: latency vs query tokens",
               .x = "t_q",
               .x_label = "query tokens T_q",
               .log_x = true,
               .log_y = true,
               .series = {"kernel", "s"}}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples = Samples(csv, {"s", "t_q", "kernel", "workload"});
    RETURN_IF_ERROR(samples.status());
    std::vector<std::string> parts;
    for (const auto& [s_text, unused] : BestPerGroup(*samples, 0)) {
      absl::StatusOr<uint64_t> s = Uint("s", s_text);
      RETURN_IF_ERROR(s.status());
      std::map<uint64_t, std::pair<const Sample*, const Sample*>> by_tq;  // decode, prefill
      const Sample* shape = nullptr;
      for (const Sample& x : *samples) {
        if (x.keys[0] != s_text) continue;
        absl::StatusOr<uint64_t> tq = Uint("t_q", x.keys[1]);
        RETURN_IF_ERROR(tq.status());
        if (x.keys[2] == "decode") {
          by_tq[*tq].first = &x;
          shape = &x;
        } else {
          by_tq[*tq].second = &x;
        }
      }
      std::optional<uint64_t> crossover;
      // The two largest T_q both ran: (T_q, reduce, ring).
      std::vector<std::tuple<uint64_t, double, double>> compared;
      for (const auto& [tq, pair] : by_tq) {
        if (pair.first == nullptr || pair.second == nullptr) continue;
        compared.emplace_back(tq, pair.first->latency_ps, pair.second->latency_ps);
        if (!crossover && pair.second->latency_ps < pair.first->latency_ps) crossover = tq;
      }
      std::string part = absl::StrCat("S ", s_text, ": ");
      if (crossover) {
        absl::StrAppend(&part, "ring from T_q ", *crossover);
      } else if (!compared.empty()) {
        const auto [t2, reduce2, ring2] = compared.back();
        absl::StrAppend(&part, "reduce up to T_q ", t2, " (the largest both ran; ring ",
                        Times(ring2 / reduce2));
        // Beyond it (the reduce kernel refuses larger T_q): the reduce's line through the last
        // two points against the ring at the last.
        if (compared.size() >= 2) {
          const auto [t1, reduce1, ring1] = compared[compared.size() - 2];
          const double slope = (reduce2 - reduce1) / static_cast<double>(t2 - t1);
          if (slope > 0) {
            absl::StrAppend(&part, absl::StrFormat("; the reduce's line through T_q %d, %d "
                                                   "meets the ring near T_q %.0f",
                                                   t1, t2, t2 + (ring2 - reduce2) / slope));
          }
        }
        absl::StrAppend(&part, ")");
      } else {
        absl::StrAppend(&part, "no T_q ran on both");
      }
      if (shape != nullptr) {
        std::map<std::string, uint64_t> f;
        for (const char* name : {"h_q", "h_kv", "c", "p"}) {
          absl::StatusOr<uint64_t> v = WorkloadField(shape->keys[3], name);
          RETURN_IF_ERROR(v.status());
          if (*v == 0) return absl::InvalidArgumentError(absl::StrCat("workload: ", name, "=0"));
          f[name] = *v;
        }
        const double g = static_cast<double>(f["h_q"]) / f["h_kv"];
        const double rounds = std::ceil(std::log2(static_cast<double>(f["c"] * f["p"])));
        absl::StrAppend(&part, absl::StrFormat(", ADR formula T_q > %.1f",
                                               2.0 * *s / (g * std::max(rounds, 1.0))));
      }
      parts.push_back(part);
    }
    return absl::StrJoin(parts, "; ");
  };
  return st;
}

// §B "long/short context split", items 1-2: the short-context kernel (whole KV heads per CUBE)
// against the long kernel (decode opt3, prefill ring) by S, and its kv_per_cube (decode; prefill
// at kv_per_cube 1 only, the one-group run, to keep its cost small).
Study ShortLong(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "short_long";
  st.adr = "§B";
  st.question = "Up to which S does the short-context kernel win, with which kv_per_cube?";
  const std::vector<std::string> decode_s =
      o.quick ? Values({1024, 8192})
              : Values({512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072});
  const std::vector<std::string> prefill_s = o.quick ? Values({512}) : Values({512, 2048, 8192});
  const std::vector<std::string> per_cube = o.quick ? Values({1}) : Values({1, 2, 4, 8});
  // kv_per_cube is empty on the long kernel's rows (they refuse the field).
  std::vector<std::string> all_s = decode_s;
  for (const std::string& s : prefill_s) {
    if (std::find(all_s.begin(), all_s.end(), s) == all_s.end()) all_s.push_back(s);
  }
  st.params = {{"kernel", {"decode", "prefill"}},
               {"s", all_s},
               {"variant", {"short_context", "opt3", "ring"}},
               {"kv_per_cube", per_cube}};
  const auto add = [&](pb::Kernel kernel, const std::string& kernel_name,
                       const std::vector<std::string>& contexts,
                       const std::vector<std::string>& kv, pb::Variant long_variant,
                       const std::string& long_name) {
    for (const std::string& s : contexts) {
      for (Point& p :
           Grid(chip, Llama(kernel, pb::SHORT_CONTEXT), {{"s", {s}}, {"kv_per_cube", kv}})) {
        p.values = {kernel_name, s, "short_context", p.values[1]};
        st.points.push_back(std::move(p));
      }
      for (Point& p : Grid(chip, Llama(kernel, long_variant), {{"s", {s}}})) {
        p.values = {kernel_name, s, long_name, ""};
        st.points.push_back(std::move(p));
      }
    }
  };
  add(pb::DECODE, "decode", decode_s, per_cube, pb::OPT3, "opt3");
  add(pb::PREFILL, "prefill", prefill_s, Values({1}), pb::RING, "ring");
  st.plots = {{.title = "short-context kernel vs the long kernel (decode opt3, prefill ring)",
               .x = "s",
               .x_label = "context S (tokens)",
               .log_x = true,
               .log_y = true,
               .series = {"kernel", "variant", "kv_per_cube"}}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples =
        Samples(csv, {"kernel", "s", "variant", "kv_per_cube"});
    RETURN_IF_ERROR(samples.status());
    std::vector<std::string> parts;
    for (const auto& [kernel, unused] : BestPerGroup(*samples, 0)) {
      // Per S: the best short_context row and the long kernel's row.
      std::map<uint64_t, std::pair<const Sample*, const Sample*>> by_s;
      std::string long_name;
      std::set<std::string> kv_tried;  // the kv_per_cube values that ran
      for (const Sample& x : *samples) {
        if (x.keys[0] != kernel) continue;
        absl::StatusOr<uint64_t> s = Uint("s", x.keys[1]);
        RETURN_IF_ERROR(s.status());
        auto& [short_best, long_row] = by_s[*s];
        if (x.keys[2] != "short_context") {
          long_row = &x;
          long_name = x.keys[2];
        } else {
          kv_tried.insert(x.keys[3]);
          if (short_best == nullptr || x.latency_ps < short_best->latency_ps) short_best = &x;
        }
      }
      std::optional<uint64_t> threshold;
      std::map<std::string, int> wins;  // kv_per_cube: contexts where it is the best short one
      uint64_t lo = 0, hi = 0;
      int compared = 0;
      for (const auto& [s, pair] : by_s) {
        if (pair.first == nullptr || pair.second == nullptr) continue;
        ++compared;
        if (lo == 0) lo = s;
        hi = s;
        ++wins[pair.first->keys[3]];
        if (pair.first->latency_ps < pair.second->latency_ps) threshold = s;
      }
      std::string part = absl::StrCat(kernel, ": ");
      if (compared == 0) {
        absl::StrAppend(&part, "no S ran both kernels");
      } else {
        absl::StrAppend(&part, threshold
                                   ? absl::StrCat("short_context wins up to S ", *threshold)
                                   : absl::StrCat(long_name, " wins at every S (", lo, "..", hi,
                                                  ")"));
        if (kernel == "decode") absl::StrAppend(&part, " (ADR §B: 262144)");
        std::string best;
        int most = 0;
        for (const auto& [k, n] : wins) {
          if (n > most) best = k, most = n;
        }
        if (kv_tried.size() > 1) {
          absl::StrAppend(&part, ", best kv_per_cube ", best, " (the fastest short_context at ",
                          most, " of ", compared, " S)");
        }
      }
      parts.push_back(part);
    }
    return absl::StrJoin(parts, "; ");
  };
  return st;
}

// §9.6 "when to revisit opt2": the CPU's issue cost per command, zero against realistic.
Study IssueCost(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "issue_cost";
  st.adr = "§9.6";
  st.question = "Does opt2 beat opt3 once commands cost CPU time?";
  std::vector<std::string> profiles;
  for (const pb::IssueCostProfile& p : chip.sip().cube().pe().issue_cost_profiles()) {
    profiles.push_back(p.name());
  }
  // A chip without profiles: the shipped names, whose runs then fail as rows.
  if (profiles.empty()) profiles = {"zero", "realistic"};
  st.params = {{"s", o.quick ? Values({8192}) : Values({8192, 131072})},
               {"issue_cost_profile", profiles},
               {"variant", o.quick ? std::vector<std::string>{"opt3", "opt2"}
                                   : std::vector<std::string>{"opt1", "opt3", "opt2",
                                                              "opt2_lookahead"}}};
  st.points = Grid(chip, Llama(pb::DECODE), st.params);
  st.plots = {{.title = "decode: latency per variant and issue-cost profile",
               .x = "variant",
               .x_categorical = true,
               .x_label = "decode variant",
               .log_y = true,
               .series = {"issue_cost_profile", "s"}}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples =
        Samples(csv, {"issue_cost_profile", "s", "variant"});
    RETURN_IF_ERROR(samples.status());
    std::vector<std::string> parts;
    for (const auto& [profile, unused] : BestPerGroup(*samples, 0)) {
      std::vector<std::string> ratios;
      std::vector<std::string> order;  // contexts, first-seen
      std::map<std::string, std::pair<const Sample*, const Sample*>> by_s;  // opt2, opt3
      for (const Sample& x : *samples) {
        if (x.keys[0] != profile) continue;
        if (!by_s.contains(x.keys[1])) order.push_back(x.keys[1]);
        auto& pair = by_s[x.keys[1]];
        if (x.keys[2] == "opt2") pair.first = &x;
        if (x.keys[2] == "opt3") pair.second = &x;
      }
      for (const std::string& s : order) {
        const auto& [opt2, opt3] = by_s[s];
        if (opt2 == nullptr || opt3 == nullptr) continue;
        ratios.push_back(absl::StrCat(Times(opt2->latency_ps / opt3->latency_ps), " at S ", s));
      }
      parts.push_back(absl::StrCat(
          profile, ": opt2/opt3 ", ratios.empty() ? "not both ran" : absl::StrJoin(ratios, ", ")));
    }
    return absl::StrCat(absl::StrJoin(parts, "; "), " (< 1.00x: opt2 wins)");
  };
  return st;
}

// Per group (keys[0]), each other label's latency against the reference label's:
// "<group>: <label> 1.23x, ..." — or "<reference> did not run".
std::string AgainstReference(const std::vector<Sample>& samples, const std::string& reference,
                             absl::string_view group_word) {
  std::vector<std::string> parts;
  for (const auto& [group, best] : BestPerGroup(samples, 0)) {
    const Sample* ref = nullptr;
    for (const Sample& x : samples) {
      if (x.keys[0] == group && x.keys[1] == reference) ref = &x;
    }
    std::string part = absl::StrCat(group_word, group, ": ");
    if (ref == nullptr) {
      absl::StrAppend(&part, reference, " did not run");
    } else {
      std::vector<std::string> others;
      for (const Sample& x : samples) {
        if (x.keys[0] != group || &x == ref) continue;
        others.push_back(absl::StrCat(x.keys[1], " ", Times(x.latency_ps / ref->latency_ps)));
      }
      absl::StrAppend(&part, best->keys[1], " best; ",
                      others.empty() ? "no other ran" : absl::StrJoin(others, ", "), " of ",
                      reference);
    }
    parts.push_back(part);
  }
  return absl::StrJoin(parts, "; ");
}

// §B-3: how prefill spreads a head's query tiles over a CUBE's PEs (causal work balance).
Study QuerySplit(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "query_split";
  st.adr = "§B-3";
  st.question = "Which prefill query split?";
  st.params = {{"s", o.quick ? Values({2048}) : Values({2048, 8192})},
               {"query_split", {"zigzag", "contiguous", "striped"}}};
  st.points = Grid(chip, Llama(pb::PREFILL, pb::RING), st.params);
  st.plots = {{.title = "prefill ring: latency per query split",
               .x = "query_split",
               .x_categorical = true,
               .x_label = "query split over a CUBE's PEs",
               .log_y = true,
               .series = {"s"}}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples = Samples(csv, {"s", "query_split"});
    RETURN_IF_ERROR(samples.status());
    return AgainstReference(*samples, "zigzag", "S ");
  };
  return st;
}

// §B-2: the K cache's layout in HBM, decode and prefill.
Study KLayout(const pb::Chip& chip, const StudyOptions& o) {
  Study st;
  st.name = "k_layout";
  st.adr = "§B-2";
  st.question = "What does each K layout cost against tile_major?";
  const std::vector<std::string> layouts = {"tile_major", "transposed", "row_major"};
  st.params = {{"kernel", {"decode", "prefill"}}, {"k_layout", layouts}};
  pb::Workload decode = Llama(pb::DECODE, pb::OPT3);
  decode.set_s(131072);
  pb::Workload prefill = Llama(pb::PREFILL, pb::RING);
  prefill.set_s(2048);
  for (const pb::Workload* base : {&decode, &prefill}) {
    for (Point& p : Grid(chip, *base, {{"k_layout", layouts}})) {
      p.values.insert(p.values.begin(), base == &decode ? "decode" : "prefill");
      st.points.push_back(std::move(p));
    }
  }
  st.plots = {{.title = "K layout: decode opt3 (S 131072) and prefill ring (S 2048)",
               .x = "k_layout",
               .x_categorical = true,
               .x_label = "K cache layout in HBM",
               .log_y = true,
               .series = {"kernel"}}};
  st.answer = [](const CsvTable& csv) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<Sample>> samples = Samples(csv, {"kernel", "k_layout"});
    RETURN_IF_ERROR(samples.status());
    return AgainstReference(*samples, "tile_major", "");
  };
  return st;
}

}  // namespace

absl::StatusOr<std::vector<Study>> BuildStudies(const pb::Chip& chip, const StudyOptions& options) {
  std::vector<Study> studies;
  for (Study (*build)(const pb::Chip&, const StudyOptions&) :
       {DecodeC, DecodeVariants, Tile, Pipeline, ReduceTopology, Ring, RingVsReduce, ShortLong,
        IssueCost, QuerySplit, KLayout}) {
    studies.push_back(build(chip, options));
  }
  return studies;
}

absl::StatusOr<std::vector<Study>> SelectStudies(std::vector<Study> studies,
                                                 std::string_view names_view) {
  const std::string names(names_view);
  if (names.empty() || names == "all") return studies;
  if (names == "none") return std::vector<Study>{};
  std::set<std::string> wanted;
  std::vector<std::string> known;
  for (const Study& st : studies) known.push_back(st.name);
  for (const std::string& name : std::vector<std::string>(absl::StrSplit(names, ','))) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--studies: unknown study '", name,
                                                     "' (one of ", absl::StrJoin(known, ", "),
                                                     ", all, none)"));
    }
    wanted.insert(name);
  }
  std::vector<Study> out;
  for (Study& st : studies) {
    if (wanted.contains(st.name)) out.push_back(std::move(st));
  }
  return out;
}

std::vector<sweep::Job> StudyPoolJobs(const std::vector<Study>& studies,
                                      std::vector<std::string>* job_study) {
  launch::LaunchOptions options;
  options.keep_op_log = false;
  options.one_group = true;
  std::vector<sweep::Job> jobs;
  for (const Study& st : studies) {
    for (const Point& p : st.points) {
      if (!p.refused.ok()) continue;
      jobs.push_back({p.chip, p.workload, options});
      if (job_study != nullptr) job_study->push_back(st.name);
    }
  }
  return jobs;
}

absl::StatusOr<std::vector<StudyOutcome>> RunStudies(const std::vector<Study>& studies,
                                                     const std::filesystem::path& out_dir,
                                                     int workers, const StudyProgress& progress) {
  std::vector<std::string> job_study;
  const std::vector<sweep::Job> jobs = StudyPoolJobs(studies, &job_study);
  size_t done = 0;
  uint64_t events = 0;
  const std::vector<pb::JobResult> results =
      sweep::JobPool(workers).Run(jobs, [&](size_t i, const pb::JobResult& result) {
        ++done;
        events += result.report().events();
        if (progress) progress(job_study[i], done, jobs.size(), events);
      });
  return OutcomesFrom(studies, results, out_dir);
}

absl::StatusOr<std::vector<StudyOutcome>> OutcomesFrom(const std::vector<Study>& studies,
                                                       const std::vector<pb::JobResult>& results,
                                                       const std::filesystem::path& out_dir) {
  std::vector<StudyOutcome> outcomes;
  size_t next = 0;
  for (const Study& st : studies) {
    std::vector<sweep::Row> rows;
    for (const Point& p : st.points) {
      rows.push_back(sweep::MakeRow(p, p.refused.ok() ? &results[next++] : nullptr));
    }
    StudyOutcome outcome{st.name, st.adr, st.question, sweep::FormatCsv(st.params, rows),
                         absl::InternalError("unset")};
    const std::filesystem::path path = out_dir / absl::StrCat("sweep_", st.name, ".csv");
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << outcome.csv;
    out.close();
    if (!out) {
      return absl::InvalidArgumentError(absl::StrCat("--out_dir: cannot write ", path.string()));
    }
    absl::StatusOr<CsvTable> table = ParseCsv(outcome.csv);
    AHBM_CHECK(table.ok()) << table.status();  // FormatCsv's own output
    outcome.answer = st.answer(*table);
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

std::string FormatAnswers(const std::vector<StudyOutcome>& outcomes) {
  std::string out = "answers (ADR §9, §B):\n";
  for (const StudyOutcome& o : outcomes) {
    absl::StrAppend(
        &out, o.adr, " ", o.question, " -> ",
        o.answer.ok() ? *o.answer : absl::StrCat("no answer: ", o.answer.status().message()), "\n");
  }
  return out;
}

}  // namespace ahbm::milestone
