#!/usr/bin/env bash
# The README's knob tables (the ADR's open items, §5.2, §9.1, §9.4): each row one `ahbm run`,
# printed as a Markdown row "| <knob> | latency µs | × roofline | binding resource |".
# Usage: bench/knobs.sh [TABLE...]   (tables: klayout ring_reduce one_shot lookahead
#        ring_depth baseline_dot opt2_lookahead; none = all). Runs from the repository root
#        with a built //cli:ahbm (bazel build //cli:ahbm). Timing mode, deterministic.
set -euo pipefail
cd "$(dirname "$0")/.."
AHBM=${AHBM:-.bazel/bin/cli/ahbm}
[[ -x $AHBM ]] || { echo "build it first: bazel build //cli:ahbm" >&2; exit 2; }

row() {  # row LABEL ARGS...
  local label=$1; shift
  local out
  if ! out=$("$AHBM" run "$@" 2>&1); then
    echo "| $label | refused: $(echo "$out" | tail -1) | | |"
    return
  fi
  local lat ratio binding
  lat=$(echo "$out" | awk '/^latency:/ {printf "%.2f", $2 / 1e6}')
  ratio=$(echo "$out" | awk '/^roofline:/ {for (i = 1; i <= NF; ++i) if ($i == "ratio") {sub(",", "", $(i+1)); print $(i+1)}}')
  binding=$(echo "$out" | awk '/^roofline:/ {print $NF}' | sed 's/^sip[0-9]*\.cube[0-9]*\.pe[0-9]*\.//')
  echo "| $label | $lat | $ratio | $binding |"
}

header() { echo; echo "**$1** — \`ahbm run $2 <knob>\`"; echo; echo "| knob | latency µs | × roofline | binding |"; echo "|---|---:|---:|---|"; }

T4=--topology=topology/chip_4sip.textproto
TF=--topology=topology/chip_4sip_fifo.textproto
DEC="--kernel=decode --s=131072"
PRE="--kernel=prefill --s=8192"

klayout() {
  for topo in $T4 $TF; do
    header "K layout, decode opt3 and prefill ring ($topo)" "$topo"
    for l in tile_major transposed row_major; do
      row "decode --k_layout=$l" $topo $DEC --variant=opt3 --k_layout=$l
    done
    for l in tile_major transposed row_major; do
      row "prefill --k_layout=$l" $topo $PRE --variant=ring --k_layout=$l
    done
  done
}
ring_reduce() {
  header "Decode reduce collectives, opt3, S = 131072" "$T4 $DEC --variant=opt3"
  for t in tree chain ring_reduce; do
    row "--level1_reduce=$t" $T4 $DEC --variant=opt3 --level1_reduce=$t
  done
  for t in tree chain ring_reduce; do
    row "--level2_reduce=$t" $T4 $DEC --variant=opt3 --level2_reduce=$t
  done
}
one_shot() {
  header "One-shot decode against tiles, opt3" "$T4 --kernel=decode --variant=opt3"
  for s in 8192 32768 131072; do
    row "--s=$s --tile=256" $T4 --kernel=decode --variant=opt3 --s=$s
    row "--s=$s --one_shot=true" $T4 --kernel=decode --variant=opt3 --s=$s --one_shot=true
  done
}
lookahead() {
  for prof in zero realistic; do
    header "Issue-ahead depth, decode opt3 and prefill ring, profile $prof" "$T4 --issue_cost_profile=$prof"
    for l in 0 1 2 3; do
      row "decode --lookahead=$l" $T4 $DEC --variant=opt3 --lookahead=$l --issue_cost_profile=$prof
    done
    for l in 0 1 2 3; do
      row "prefill --lookahead=$l" $T4 $PRE --variant=ring --lookahead=$l --issue_cost_profile=$prof
    done
  done
  header "In-flight composites (topology override), decode opt3" "$T4 $DEC --variant=opt3"
  for m in 1 2 4 8; do
    row "--max_inflight_composites=$m" $T4 $DEC --variant=opt3 --max_inflight_composites=$m --lookahead=$(( m > 1 ? 1 : 0 ))
  done
}
ring_depth() {
  header "Ring depth and message size, prefill ring, S = 8192" "$T4 $PRE --variant=ring"
  for d in 1 2 3 4; do row "--ring_depth=$d" $T4 $PRE --variant=ring --ring_depth=$d; done
  for b in 4096 16384 65536; do row "--ring_message_bytes=$b" $T4 $PRE --variant=ring --ring_message_bytes=$b; done
}
baseline_dot() {
  header "Composites against blocking dots (ADR §1)" "$T4"
  row "decode opt1" $T4 $DEC --variant=opt1
  row "decode opt3" $T4 $DEC --variant=opt3
  row "decode baseline_dot" $T4 $DEC --variant=baseline_dot
  row "prefill ring" $T4 $PRE --variant=ring
  row "prefill baseline_dot" $T4 $PRE --variant=baseline_dot
}
opt2_lookahead() {
  for topo in $TF $T4; do
    for prof in zero realistic; do
      header "opt2 and opt2_lookahead, packed + fused reduce ($topo, $prof)" "$topo $DEC --reduce_payload=packed --reduce_merge=fused --issue_cost_profile=$prof"
      for v in opt3 opt2 opt2_lookahead; do
        row "--variant=$v" $topo $DEC --variant=$v --reduce_payload=packed --reduce_merge=fused --issue_cost_profile=$prof
      done
    done
  done
}

tables=("$@")
[[ ${#tables[@]} -gt 0 ]] || tables=(klayout ring_reduce one_shot lookahead ring_depth baseline_dot opt2_lookahead)
for t in "${tables[@]}"; do "$t"; done
