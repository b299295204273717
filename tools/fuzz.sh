#!/usr/bin/env bash
# Runs one fuzz harness of tests/fuzz under libFuzzer (clang-14, ASan + UBSan;
# tests/fuzz/README.md).
#
#   tools/fuzz.sh <harness> [runs] [libFuzzer flags...]
#   tools/fuzz.sh npy_fuzz 10000000
#   tools/fuzz.sh trace_fuzz 0 -max_total_time=600      # runs 0: until the time is up
#
# The corpus grows in $AHBM_FUZZ_DIR/<harness>/corpus (default /tmp/ahbm-fuzz), seeded from
# tests/fuzz/corpus/<harness>/ (and the checked-in topologies for topology_fuzz). A crash, leak,
# sanitizer report or an input running over 30 s stops the run with the input written to
# $AHBM_FUZZ_DIR/<harness>/ (crash-*, leak-*, timeout-*): reproduce it with the bounded driver,
# `bazel run //tests/fuzz:<harness> -- $PWD/<file>`, fix it, and add it to the seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."

harness=${1:?usage: tools/fuzz.sh <harness> [runs] [libFuzzer flags...]}
runs=${2:-10000000}
[[ $runs == 0 ]] && runs=-1  # libFuzzer: no limit
shift $(( $# >= 2 ? 2 : 1 ))
if [[ ! -d tests/fuzz/corpus/$harness ]]; then
  echo "fuzz: no harness $harness (tests/fuzz/corpus/)" >&2
  exit 2
fi
tools/setup.sh --fuzz  # clang-14, its sanitizer runtimes and libFuzzer, when missing

bazel build --config=fuzz "//tests/fuzz:$harness" >&2
binary=$(bazel info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz/$harness

work=${AHBM_FUZZ_DIR:-/tmp/ahbm-fuzz}/$harness
mkdir -p "$work/corpus"
seeds=("$PWD/tests/fuzz/corpus/$harness")
# Inputs as large as the seeds (traces and reports of one-PE runs), not larger: the readers' cost
# grows with the input, and ten million executions must fit in minutes.
max_len=8192
if [[ $harness == topology_fuzz ]]; then seeds+=("$PWD/topology"); fi
# The harnesses read topology/*.textproto from the runfiles root.
cd "$binary.runfiles/ahbmsim"
exec "$binary" -runs="$runs" -timeout=30 -rss_limit_mb=4096 -max_len=$max_len \
  -artifact_prefix="$work/" -print_final_stats=1 "$@" "$work/corpus" "${seeds[@]}"
