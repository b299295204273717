#!/usr/bin/env bash
# `ahbm milestone --quick` end to end: the report files (the panels' and each study's
# sweep_<name>.csv) exist, parse, hold the expected rows, the answers block is printed, and two
# runs — one process at a time, and two at once — write byte-identical files.
set -euo pipefail
ahbm=cli/ahbm
tmp=${TEST_TMPDIR:-$(mktemp -d)}
"$ahbm" milestone --quick --jobs=1 --out_dir="$tmp/a" >"$tmp/a.txt" 2>"$tmp/a.err"
"$ahbm" milestone --quick --jobs=2 --out_dir="$tmp/b" >"$tmp/b.txt" 2>/dev/null
studies="decode_c decode_variants tile pipeline reduce_topology ring ring_vs_reduce short_long
issue_cost query_split k_layout"
for f in milestone.json milestone.csv $(for s in $studies; do echo "sweep_$s.csv"; done); do
  cmp "$tmp/a/$f" "$tmp/b/$f" || { echo "FAIL: $f differs between two runs"; exit 1; }
done
# Each study's CSV: the sweep header (its parameters first), at least one row that ran.
for s in $studies; do
  head -1 "$tmp/a/sweep_$s.csv" | grep -q ',workload,latency_ps,roofline_bound_ps,roofline_ratio,binding,events,status$' ||
    { echo "FAIL: sweep_$s.csv header: $(head -1 "$tmp/a/sweep_$s.csv")"; exit 1; }
  grep -q ',ok$' "$tmp/a/sweep_$s.csv" || { echo "FAIL: sweep_$s.csv: no row ran"; exit 1; }
done
# The answers block: one line per study, each with an answer.
grep -q '^answers (ADR §9, §B):$' "$tmp/a.txt" || { echo "FAIL: no answers block"; exit 1; }
[[ $(sed -n '/^answers (ADR/,/^$/p' "$tmp/a.txt" | grep -c ' -> ') -eq 11 ]] ||
  { echo "FAIL: answers:"; sed -n '/^answers (ADR/,$p' "$tmp/a.txt"; exit 1; }
if sed -n '/^answers (ADR/,/^$/p' "$tmp/a.txt" | grep -q ' -> no answer: '; then
  echo "FAIL: a study without an answer:"; sed -n '/^answers (ADR/,$p' "$tmp/a.txt"; exit 1
fi
# The tables (the last line names the run's own folder).
cmp <(grep -v '^wrote ' "$tmp/a.txt") <(grep -v '^wrote ' "$tmp/b.txt") ||
  { echo "FAIL: the tables differ between two runs"; exit 1; }
# Not a terminal: one progress line per run, over every run (panels, studies, timeline,
# numerical checks), the last one "run n of n".
total=$(tail -1 "$tmp/a.err" | sed -n 's/.* run \([0-9]*\) of \([0-9]*\), .*/\1 \2/p')
read -r last n <<<"$total"
[[ -n "$n" && "$last" == "$n" && $(grep -c '^milestone: .* done, run [0-9]* of '"$n"', .* simulated events/s, ETA ' "$tmp/a.err") -eq $n ]] ||
  { echo "FAIL: progress lines:"; cat "$tmp/a.err"; exit 1; }
[[ $(grep -c '^milestone: single_user_decode ' "$tmp/a.err") -eq 16 ]] ||
  { echo "FAIL: panel progress lines"; exit 1; }
# The numerical check panel: every kernel ok.
sed -n '/^numerical check:/,/^$/p' "$tmp/a.txt" >"$tmp/checks.txt"
[[ $(grep -cE '^(decode|prefill) +[a-z_0-9]+ .* ok$' "$tmp/checks.txt") -eq 16 ]] ||
  { echo "FAIL: numerical checks:"; cat "$tmp/checks.txt"; exit 1; }
# The report folder: the page, every study's plot, the timeline; all byte-identical.
for f in index.html timeline.csv timeline.svg $(for s in $studies; do echo "sweep_$s.svg"; done); do
  [[ -s "$tmp/a/$f" ]] || { echo "FAIL: $f missing or empty"; exit 1; }
  cmp "$tmp/a/$f" "$tmp/b/$f" || { echo "FAIL: $f differs between two runs"; exit 1; }
done
for s in $studies; do
  grep -q "src=\"sweep_$s.svg\"" "$tmp/a/index.html" || { echo "FAIL: index.html lacks sweep_$s.svg"; exit 1; }
done
grep -q 'src="timeline.svg"' "$tmp/a/index.html" || { echo "FAIL: index.html lacks the timeline"; exit 1; }
if grep -qE '(src|href)="(https?:)?//' "$tmp/a/index.html"; then
  echo "FAIL: index.html loads something from the network"; exit 1
fi
# The tables (the answers after them are one line per study, however long).
lines_over=$(sed '/^answers (ADR/,$d' "$tmp/a.txt" | awk "length(\$0) > 100" | wc -l)
[[ $lines_over -eq 0 ]] ||
  { echo "FAIL: a table line is over 100 columns"; exit 1; }
python3 - "$tmp/a" <<'PY'
import csv, json, sys
d = sys.argv[1]
rows = json.load(open(f"{d}/milestone.json"))["rows"]
table = list(csv.DictReader(open(f"{d}/milestone.csv")))
assert len(rows) == 44 and len(table) == 44, (len(rows), len(table))
panels = [r["panel"] for r in rows]
# Decode under both issue-cost profiles (the topology's default first).
for p, n in [("single_user_decode", 16), ("multi_user_decode", 16),
             ("single_user_prefill", 6), ("multi_user_prefill", 6)]:
    assert panels.count(p) == n, (p, panels.count(p))
for r, c in zip(rows, table):
    assert r["variant"] == c["variant"] and str(r["latency_ps"]) == c["latency_ps"]
    for k in ["latency_ps", "roofline_ps", "ideal_ps", "events", "w_h_q", "util_hbm_channel_mean"]:
        assert isinstance(r[k], (int, float)) and not isinstance(r[k], bool), k
    assert r["latency_ps"] > 0 and r["ideal_ratio"] >= 1, r
    assert r["w_h_q"] == 64 and r["w_h_kv"] == 8 and r["w_d"] == 128
    assert len(r["topology_digest"]) == 16 and len(r["workload_digest"]) == 16
    req = r["request_latency_ps"]
    assert len(req) == (2 if r["panel"].startswith("multi") else 1), req
    assert max(req) == r["latency_ps"] == r["request_latency_max_ps"], r
    assert r["request_latency_min_ps"] == min(req), r
    assert r["cross_rank_bytes"] == r["ipcq_bytes"] + r["noc_bytes"], r
    assert r["cpu_ops_sum"] >= r["cpu_ops_max"] > 0, r
    assert r["reduce_rounds"] == r["reduce_rounds_level2"] + r["reduce_rounds_level1"] or \
        r["panel"].endswith("prefill"), r
    assert r["issue_cost_profile"] in ("zero", "realistic"), r
    if r["panel"].startswith("multi"):
        assert len(r["w_request_lengths"]) == 2, r["w_request_lengths"]
print("ok")
PY
echo "milestone --quick: files, schema, determinism ok"
