#!/usr/bin/env bash
# Runs one benchmark binary of two source trees alternately, one process at a time on one core
# (taskset -c 0), merges each side's runs into one Google Benchmark JSON and compares them with
# compare.py (Debian libbenchmark-tools). See bench/README.md.
#
#   bench/alternate.sh OLD_TREE NEW_TREE TARGET ROUNDS OUT_DIR [benchmark flags...]
#
# OLD_TREE, NEW_TREE: roots of two checkouts where `bazel build -c opt //bench:TARGET` has run
# (the binary is TREE/.bazel/bin/bench/TARGET, run from its runfiles folder). TARGET:
# decode_bench or engine_bench. ROUNDS: old, new, old, new, ... ROUNDS times each. Writes
# OUT_DIR/old.<i>.json, new.<i>.json, the merged old.json and new.json, and prints compare.py's
# table (a _pvalue row per benchmark needs ROUNDS >= 2; 9 or more for a trusted U test) and the
# ratio of the medians of real_time, new / old. Extra flags go to both binaries, e.g.
# --benchmark_filter=s:131072.
set -euo pipefail

if [[ $# -lt 5 ]]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
old_tree=$(cd "$1" && pwd)
new_tree=$(cd "$2" && pwd)
target=$3
rounds=$4
mkdir -p "$5"
out=$(cd "$5" && pwd)
shift 5

compare=/usr/share/benchmark/compare.py
[[ -f $compare ]] || { echo "alternate: $compare missing: apt-get install libbenchmark-tools python3-scipy" >&2; exit 1; }

run() {  # run SIDE TREE ROUND
  local bin="$2/.bazel/bin/bench/$target"
  [[ -x $bin ]] || { echo "alternate: $bin missing: (cd $2 && bazel build -c opt //bench:$target)" >&2; exit 1; }
  (cd "$bin.runfiles/ahbmsim" && taskset -c 0 "$bin" --benchmark_out="$out/$1.$3.json" \
    --benchmark_out_format=json "${flags[@]}" >"$out/$1.$3.log" 2>&1)
  echo "alternate: $1 round $3 done" >&2
}

flags=("$@")
for ((i = 1; i <= rounds; ++i)); do
  run old "$old_tree" "$i"
  run new "$new_tree" "$i"
done

# Merge each side's rounds: one context, every iteration run (aggregates dropped).
/usr/bin/python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
medians = {}
for side in ("old", "new"):
    merged = None
    for i in range(1, rounds + 1):
        with open(f"{out}/{side}.{i}.json") as f:
            doc = json.load(f)
        runs = [b for b in doc["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
        if merged is None:
            merged, doc["benchmarks"] = doc, runs
        else:
            merged["benchmarks"] += runs
    with open(f"{out}/{side}.json", "w") as f:
        json.dump(merged, f, indent=2)
    by_name = {}
    for b in merged["benchmarks"]:
        by_name.setdefault(b["name"], []).append(b["real_time"])
    medians[side] = {n: statistics.median(t) for n, t in by_name.items()}
print("median real_time, new / old:")
for name, old in medians["old"].items():
    new = medians["new"].get(name)
    if new is not None:
        print(f"  {name:60s} {new / old:6.3f}  (speed-up {old / new:5.2f}x)")
EOF
color=()
[[ -t 1 ]] || color=(--no-color)
/usr/bin/python3 "$compare" "${color[@]}" benchmarks "$out/old.json" "$out/new.json"
