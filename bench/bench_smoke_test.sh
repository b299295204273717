#!/usr/bin/env bash
# Smoke test: one cheap benchmark of each binary runs to the end without SkipWithError (which
# leaves the exit code 0 but marks the JSON "error_occurred") and reports its counters. Times are
# not checked (tests build without -c opt); bench/README.md is how to measure.
set -euo pipefail

out=${TEST_TMPDIR:-$(mktemp -d)}
run() {  # run NAME BINARY FILTER COUNTER...
  local name=$1 bin=$2 filter=$3
  shift 3
  "$bin" --benchmark_filter="$filter" --benchmark_min_time=0 \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json >"$out/$name.log" 2>&1 ||
    { cat "$out/$name.log"; echo "FAIL: $name exited non-zero"; exit 1; }
  if grep -q '"error_occurred": true' "$out/$name.json"; then
    cat "$out/$name.json"; echo "FAIL: $name: a benchmark skipped with an error"; exit 1
  fi
  grep -q '"run_type": "iteration"' "$out/$name.json" || { echo "FAIL: $name ran nothing"; exit 1; }
  local counter
  for counter in "$@"; do
    grep -q "\"$counter\":" "$out/$name.json" || { echo "FAIL: $name: no counter $counter"; exit 1; }
  done
  echo "ok: $name"
}

run decode bench/decode_bench '^Decode/opt2/zero/s:1024/' \
  events events_per_s sim_ns_per_s latency_ns
run prefill bench/prefill_bench '^Prefill/ring/s:512/' \
  events events_per_s latency_ns composites
run milestone bench/milestone_bench '^Milestone/single_user_decode/opt2/' \
  latency_us roofline_ratio util_hbm util_gemm util_math util_dma util_ipcq util_noc events
run replay bench/replay_bench '^(Run|Replay)/decode_opt3_s1024/' events latency_ns
run hbm bench/hbm_bench '^kv_same_bank/per_bank' pct_of_peak lat_mean_ns lat_max_ns
run hbm_memo bench/hbm_bench '^DecodeCalls/memo:on/refresh:all_bank' pct_of_peak hit_pct bursts_per_s
run engine bench/engine_bench '^BM_CompositeGemmStream/per_tile:0/' \
  events events_per_s sim_ns_per_s
run engine_fixed bench/engine_bench '^BM_ChipSimCreateShutdown/' \
  actors events create_ms run_ms teardown_ms
