#!/usr/bin/env bash
# `ahbm milestone --quick` end to end: the report files exist, parse, hold the expected rows,
# and two runs — one process at a time, and two at once — write byte-identical files.
set -euo pipefail
ahbm=cli/ahbm
tmp=${TEST_TMPDIR:-$(mktemp -d)}
"$ahbm" milestone --quick --jobs=1 --out_dir="$tmp/a" >"$tmp/a.txt" 2>"$tmp/a.err"
"$ahbm" milestone --quick --jobs=2 --out_dir="$tmp/b" >"$tmp/b.txt" 2>/dev/null
for f in milestone.json milestone.csv; do
  cmp "$tmp/a/$f" "$tmp/b/$f" || { echo "FAIL: $f differs between two runs"; exit 1; }
done
# The tables (the last line names the run's own folder).
cmp <(grep -v '^wrote ' "$tmp/a.txt") <(grep -v '^wrote ' "$tmp/b.txt") ||
  { echo "FAIL: the tables differ between two runs"; exit 1; }
# Not a terminal: one progress line per run.
[[ $(grep -c '^milestone: .* done, run [0-9]* of 44, ' "$tmp/a.err") -eq 44 ]] ||
  { echo "FAIL: progress lines:"; cat "$tmp/a.err"; exit 1; }
lines_over=$(grep -v "^wrote " "$tmp/a.txt" | awk "length(\$0) > 100" | wc -l)
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
