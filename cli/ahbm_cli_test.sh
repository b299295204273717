#!/usr/bin/env bash
# End-to-end checks of the ahbm binary: exit codes and one-line errors (DESIGN §6).
set -uo pipefail
ahbm=cli/ahbm
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect <exit code> <stdout+stderr pattern> <args...>
expect() {
  local want_rc=$1 pattern=$2
  shift 2
  local out rc
  out=$("$ahbm" "$@" 2>&1)
  rc=$?
  [[ $rc -eq $want_rc ]] || fail "ahbm $* exited $rc, want $want_rc: $out"
  grep -qE -- "$pattern" <<<"$out" || fail "ahbm $* printed no /$pattern/: $out"
}

# expect_one_line_error <pattern> <args...>: exit 2, exactly one line on stderr, nothing on stdout
expect_one_line_error() {
  local pattern=$1
  shift
  local out err rc
  out=$("$ahbm" "$@" 2>"$tmp/err")
  rc=$?
  err=$(cat "$tmp/err")
  [[ $rc -eq 2 ]] || fail "ahbm $* exited $rc, want 2"
  [[ -z "$out" ]] || fail "ahbm $* wrote to stdout on error: $out"
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "ahbm $* error is not one line: $err"
  grep -qE -- "$pattern" <<<"$err" || fail "ahbm $* error lacks /$pattern/: $err"
}

for chip in small chip_2sip chip_4sip; do
  expect 0 "topology/$chip.textproto: valid" validate --topology=topology/$chip.textproto
done
expect 0 "GB/s" validate --topology=topology/chip_4sip.textproto
expect 0 "usage: ahbm" help
expect 0 "--topology" help validate

sed 's/^sips: 1$/sips: 0/' topology/small.textproto >"$tmp/zero_sips.textproto"
grep -q '^sips: 0$' "$tmp/zero_sips.textproto" || fail "small.textproto has no top-level 'sips: 1' line"
expect_one_line_error 'sips must be > 0 \(got 0\)' validate --topology="$tmp/zero_sips.textproto"

{ cat topology/small.textproto; echo 'bogus_field: 1'; } >"$tmp/unknown.textproto"
expect_one_line_error 'unknown\.textproto:[0-9]+:[0-9]+: .*bogus_field' \
  validate --topology="$tmp/unknown.textproto"

expect_one_line_error 'no/such/file\.textproto' validate --topology=no/such/file.textproto
expect_one_line_error 'unknown flag --bogus' validate --bogus=1
expect_one_line_error "unknown command 'frobnicate'" frobnicate

# stream: an injected command stream with its report, op log and Chrome trace.
small=topology/small.textproto
expect 0 "binding sip0.cube0.pe[0-9].hbm" stream --topology=$small --count=8
for i in 1 2; do
  "$ahbm" stream --topology=$small --cubes=0,1 --count=8 --trace="$tmp/op$i.pb" \
    --report_json="$tmp/report$i.json" --chrome_trace="$tmp/chrome$i.json" >"$tmp/table$i.txt" ||
    fail "stream run $i exited $?"
done
cmp -s "$tmp/op1.pb" "$tmp/op2.pb" || fail "stream op logs differ between two runs"
cmp -s "$tmp/report1.json" "$tmp/report2.json" || fail "stream reports differ between two runs"
[[ -s "$tmp/op1.pb" ]] || fail "stream wrote an empty op log"
grep -q '"traceEvents"' "$tmp/chrome1.json" || fail "chrome trace lacks traceEvents"
grep -q '"latency_ps"' "$tmp/report1.json" || fail "report JSON lacks latency_ps"
# The printed report: per unit kind and the 10 busiest units; --units=all and the CSV: every unit.
grep -qE '^gemm +8 ' "$tmp/table1.txt" || fail "report table lacks the gemm kind row (8 units)"
[[ $(grep -c '\.gemm ' "$tmp/table1.txt") -lt 8 ]] || fail "summary table lists every GEMM"
grep -q '^10 busiest units:$' "$tmp/table1.txt" || fail "report table lacks the 10 busiest units"
"$ahbm" stream --topology=$small --cubes=0,1 --count=8 --units=all --report_csv="$tmp/units.csv" \
  >"$tmp/all.txt" || fail "stream --units=all exited $?"
grep -q 'sip0.cube1.pe3.gemm' "$tmp/all.txt" || fail "--units=all table lacks CUBE 1's GEMM"
units=$(($(wc -l <"$tmp/units.csv") - 1))
[[ $(grep -cE '^sip[0-9]+\.' "$tmp/all.txt") -eq $units ]] ||
  fail "--units=all lists $(grep -cE '^sip[0-9]+\.' "$tmp/all.txt") units, the CSV $units"
[[ $(wc -l <"$tmp/table1.txt") -lt 60 ]] || fail "summary report is $(wc -l <"$tmp/table1.txt") lines"
expect_one_line_error "--units: must be summary or all \(got 'some'\)" stream --topology=$small \
  --units=some
expect_one_line_error '--m: must be a positive integer' stream --topology=$small --m=0
expect_one_line_error '--count: must be a positive integer' stream --topology=$small --count=x
expect_one_line_error 'cubes: CUBE 99 is outside' stream --topology=$small --cubes=99
expect_one_line_error "issue_cost_profile: the chip has no profile named 'fast'" \
  stream --topology=$small --profile=fast
expect_one_line_error 'composite cmd 2: operand a: TCM range .* \(TCM overflow\)' stream --topology=$small --k=1000000000

# run: the self-test kernels (kernels/selftest) through a workload file and/or flags.
# write_npy <file> <shape, e.g. "2, 4"> <element count> <one float32 as printf escapes>: every
# element the same value ('<f4', C order, format 1.0, header padded to 64 bytes).
write_npy() {
  local file=$1 shape=$2 count=$3 value=$4
  local dict="{'descr': '<f4', 'fortran_order': False, 'shape': ($shape), }"
  local hlen=$(((10 + ${#dict} + 1 + 63) / 64 * 64 - 10))
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
    printf '%s%*s\n' "$dict" $((hlen - ${#dict} - 1)) ''
    for ((i = 0; i < count; i++)); do printf "$value"; done
  } >"$file"
}
# The float32 elements of a .npy file, one per line.
read_npy() {
  local hlen
  hlen=$(od -A n -t u2 -j 8 -N 2 "$1" | tr -d ' ')
  od -A n -v -t f4 -j $((10 + hlen)) "$1" | tr -s ' ' '\n' | sed '/^$/d'
}
one='\x00\x00\x80\x3f'   # 1.0
half='\x00\x00\x00\x3f'  # 0.5
mkdir -p "$tmp/in" "$tmp/out" "$tmp/bad" "$tmp/empty"
write_npy "$tmp/in/a.npy" "2, 4" 8 "$one"
write_npy "$tmp/in/b.npy" "4, 3" 12 "$half"
expect 0 "selftest_gemm: out \[2, 3\] = A \[2, 4\]" run --topology=$small --kernel=selftest_gemm \
  --gemm_m=2 --gemm_k=4 --gemm_n=3 --data --inputs_dir="$tmp/in" --outputs_dir="$tmp/out"
got=$(read_npy "$tmp/out/o.npy" | sort -u)
[[ "$got" == "2" ]] || fail "gemm o.npy holds '$got', want every element 4 * 1.0 * 0.5 = 2"
[[ $(read_npy "$tmp/out/o.npy" | wc -l) -eq 6 ]] || fail "gemm o.npy does not hold 2 x 3 elements"
expect 0 "binding sip0.cube0.pe0" run --topology=$small --workload=kernels/selftest/gemm.textproto
expect 0 "A \[8, 64\]" run --topology=$small --workload=kernels/selftest/gemm.textproto \
  --gemm_k=64 --data=false
expect 0 "selftest_allreduce: ring all-reduce of 512 fp32 over IPCQ, 8 PEs of CUBE 5" \
  run --topology=topology/chip_2sip.textproto --kernel=SELFTEST_ALLREDUCE --vector_len=512 --cube=5
for i in 1 2; do
  "$ahbm" run --topology=$small --kernel=selftest_allreduce --vector_len=4096 --data \
    --trace="$tmp/run_op$i.pb" --report_json="$tmp/run_report$i.json" >/dev/null ||
    fail "allreduce run $i exited $?"
done
cmp -s "$tmp/run_op1.pb" "$tmp/run_op2.pb" || fail "run op logs differ between two runs"
[[ -s "$tmp/run_op1.pb" ]] || fail "run wrote an empty op log"

# Replay: a recorded decode run replayed with --trace_out gives the recorded trace byte for
# byte and the same report; on a what-if topology it runs; bad traces are one-line errors.
"$ahbm" run --topology=$small --kernel=decode --variant=opt2 --h_q=8 --h_kv=2 --c=4 --p=4 \
  --s=2048 --users=2 --trace="$tmp/rec.pb" --report_json="$tmp/rec.json" >/dev/null ||
  fail "recorded run exited $?"
"$ahbm" replay --trace="$tmp/rec.pb" --trace_out="$tmp/again.pb" \
  --report_json="$tmp/again.json" >/dev/null || fail "replay exited $?"
cmp -s "$tmp/rec.pb" "$tmp/again.pb" || fail "the replay's trace differs from the recording"
cmp -s "$tmp/rec.json" "$tmp/again.json" || fail "the replay's report differs from the recording's"
"$ahbm" replay --trace="$tmp/rec.pb" --message_trace="$tmp/messages.pb" >/dev/null ||
  fail "replay with a message trace exited $?"
[[ -s "$tmp/messages.pb" ]] || fail "replay wrote an empty message trace"
"$ahbm" run --topology=$small --kernel=decode --variant=opt2 --h_q=8 --h_kv=2 --c=4 --p=4 \
  --s=2048 --users=2 --message_trace="$tmp/run_messages.pb" >/dev/null || fail "run with a message trace exited $?"
cmp -s "$tmp/messages.pb" "$tmp/run_messages.pb" || fail "replay and run message traces differ"
sed 's/bytes_per_cycle: 32/bytes_per_cycle: 64/' topology/small.textproto >"$tmp/hbm_x2.textproto"
expect 0 "latency:" replay --trace="$tmp/rec.pb" --topology="$tmp/hbm_x2.textproto"
expect_one_line_error 'topology: the trace.s streams need 1 SIPs of 2x4 CUBEs' \
  replay --trace="$tmp/rec.pb" --topology=topology/chip_2sip.textproto
head -c 3000 "$tmp/rec.pb" >"$tmp/cut.pb"
expect_one_line_error 'cut.pb: op log record [0-9]+ .*truncated' replay --trace="$tmp/cut.pb"
expect_one_line_error 'no recorded calls' replay --trace="$tmp/op1.pb"
expect_one_line_error 'trace: cannot read no/such.pb' replay --trace=no/such.pb
expect_one_line_error '--trace: the trace to replay is required' replay

# The HBM bank model on one pattern; bad names are one line.
expect 0 "kv_same_bank +per_bank +[0-9.]+%" hbm --pattern=kv_same_bank --refresh=per_bank --bursts=2000
expect_one_line_error "--pattern: unknown 'zigzag'" hbm --pattern=zigzag
expect_one_line_error "--refresh: unknown 'y'" hbm --refresh=y
expect_one_line_error "--bursts: must be a positive integer \(got '0'\)" hbm --bursts=0
expect 0 "ahbm-4sip's channel \(tCK 0.500 ns" hbm --topology=topology/chip_4sip.textproto \
  --pattern=seq_bank_group --refresh=none --bursts=2000
expect_one_line_error "--topology: topology/small.textproto times HBM with the FIFO" hbm \
  --topology=topology/small.textproto

# The shipped chip's BANK channels with the call memo off, on and checked: one report.
for memo in off on verify; do
  "$ahbm" run --kernel=decode --variant=opt3 --s=4096 --hbm_call_memo=$memo \
    --report_json="$tmp/memo_$memo.json" >/dev/null 2>"$tmp/memo_$memo.err" ||
    fail "run --hbm_call_memo=$memo exited $?: $(cat "$tmp/memo_$memo.err")"
done
cmp -s "$tmp/memo_off.json" "$tmp/memo_on.json" || fail "the call memo changed the report"
cmp -s "$tmp/memo_off.json" "$tmp/memo_verify.json" || fail "verify changed the report"
grep -q '"hbm_model": "bank' "$tmp/memo_on.json" || fail "the shipped chip's report names no bank model"
grep -qE 'hbm call memo: [0-9]+ of [0-9]+ channel calls replayed' "$tmp/memo_on.err" ||
  fail "run printed no memo line: $(cat "$tmp/memo_on.err")"
expect_one_line_error "--hbm_call_memo: must be on, off or verify \(got 'maybe'\)" run \
  --topology=$small --hbm_call_memo=maybe

# One CUBE Group for the full chip (DESIGN §3): the same latency, the scale said below the
# table; where it does not apply, the reason and the full chip.
expect 0 "one group: CUBE set 1 of 8 simulated \([0-9]+ events\), the chip's figures scaled x8" \
  run --kernel=decode --variant=opt3 --s=4096 --one_group --report_json="$tmp/one_group.json"
[[ "$(grep '"latency_ps"' "$tmp/one_group.json")" == "$(grep '"latency_ps"' "$tmp/memo_on.json")" ]] ||
  fail "--one_group changed the latency"
expect 0 "one group: not used \(kv_per_cube > 1 puts several KV heads on one CUBE\); the full chip was simulated" \
  run --topology=$small --kernel=decode --variant=short_context --h_q=16 --h_kv=4 --p=4 \
  --kv_per_cube=2 --s=512 --one_group
expect_one_line_error "--one_group: must be true or false \(got 'maybe'\)" run \
  --topology=$small --kernel=decode --s=512 --one_group=maybe

# Diff: the recording against its 2x-HBM replay parts at a command's end; against its
# same-topology replay nowhere; two reports give the totals only; bad input is one line.
"$ahbm" replay --trace="$tmp/rec.pb" --topology="$tmp/hbm_x2.textproto" --trace_out="$tmp/fast.pb" \
  --report_json="$tmp/fast.json" >/dev/null || fail "what-if replay exited $?"
expect 0 "first divergence at [0-9]+ ps: pe [0-9]+ i[0-9]+ c[0-9]+ .* (issue|start|end)_ps [0-9]+ -> [0-9]+" \
  diff "$tmp/rec.pb" "$tmp/fast.pb"
expect 0 "critical path of B:" diff "$tmp/rec.pb" "$tmp/fast.pb" --path_rows=5
expect 0 "no matched step has other times" diff "$tmp/rec.pb" "$tmp/again.pb"
expect 0 "steps and critical paths: need two traces" diff "$tmp/rec.json" "$tmp/fast.json"
expect_one_line_error 'diff: give two runs' diff "$tmp/rec.pb"
expect_one_line_error 'cut.pb: op log record [0-9]+ .*truncated' diff "$tmp/rec.pb" "$tmp/cut.pb"
expect_one_line_error 'op1.pb: an op log without its chip' diff "$tmp/op1.pb" "$tmp/rec.pb"
expect_one_line_error "--path_rows: must be a positive integer \(got '0'\)" \
  diff "$tmp/rec.pb" "$tmp/fast.pb" --path_rows=0

# The deadlock demo exits 3 within seconds, naming every waiting PE.
out=$(timeout 30 "$ahbm" run --topology=$small --kernel=selftest_deadlock --cube=2 \
  --chrome_trace="$tmp/deadlock.json" 2>"$tmp/err")
rc=$?
[[ $rc -eq 3 ]] || fail "deadlock run exited $rc, want 3: $(cat "$tmp/err")"
[[ -z "$out" ]] || fail "deadlock run wrote to stdout: $out"
[[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "deadlock error is not one line: $(cat "$tmp/err")"
for pe in 0 1 2 3; do
  grep -q "deadlock: .*pe [0-9]* (sip0.cube2.pe$pe)" "$tmp/err" ||
    fail "deadlock error lacks pe $pe: $(cat "$tmp/err")"
done
grep -q '"traceEvents"' "$tmp/deadlock.json" || fail "deadlock run wrote no chrome trace"

# A kernel's fault (its arena overflows at run time) exits 4, one line naming the PE.
out=$(timeout 30 "$ahbm" run --topology=$small --kernel=selftest_arena_overflow --cube=1 \
  2>"$tmp/err")
rc=$?
[[ $rc -eq 4 ]] || fail "arena overflow run exited $rc, want 4: $(cat "$tmp/err")"
[[ -z "$out" ]] || fail "arena overflow run wrote to stdout: $out"
[[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "arena overflow error is not one line: $(cat "$tmp/err")"
grep -q "ahbm run: pe [0-9]* (sip0.cube1.pe0): scratch arena overflow: " "$tmp/err" ||
  fail "arena overflow error lacks the PE or the overflow: $(cat "$tmp/err")"

# Bad input: one line naming the file or the flag.
expect_one_line_error "$tmp/empty/a.npy: no such file" run --topology=$small \
  --workload=kernels/selftest/gemm.textproto --inputs_dir="$tmp/empty"
write_npy "$tmp/bad/a.npy" "8, 128" 1024 "$one"
write_npy "$tmp/bad/b.npy" "128, 255" 32640 "$one"
expect_one_line_error "$tmp/bad/b.npy: shape \[128, 255\] does not match .*\[128, 256\]" run \
  --topology=$small --workload=kernels/selftest/gemm.textproto --inputs_dir="$tmp/bad"
expect_one_line_error "--gemm_m: must be an integer .*\(got 'x'\)" run --topology=$small \
  --kernel=selftest_gemm --gemm_m=x
expect_one_line_error "--kernel: unknown value; one of .*SELFTEST_GEMM.* \(got 'gemm'\)" \
  run --topology=$small --kernel=gemm
expect_one_line_error "--data: must be true or false \(got 'yes'\)" run --topology=$small --data=yes
expect_one_line_error 'gemm_n: must be > 0 \(got 0\)' run --topology=$small \
  --workload=kernels/selftest/gemm.textproto --gemm_n=0
expect_one_line_error "cube: 99 is outside the chip's 8 CUBEs" run --topology=$small \
  --kernel=selftest_deadlock --cube=99
expect_one_line_error 's: must be > 0 \(the prompt length\)' run --topology=$small --kernel=prefill

# prefill: every variant runs on the small chip (numbers against the float64 reference are in
# kernels/attention/prefill_test); refused fields name themselves.
expect 0 "prefill FLASH" run --topology=$small --kernel=prefill --variant=flash --h_q=8 --h_kv=2 \
  --d=64 --s=300 --t_q=100
expect 0 "prefill BASELINE_FANOUT" run --topology=$small --kernel=prefill --variant=baseline_fanout \
  --h_q=8 --h_kv=2 --d=64 --s=300 --p=4
for variant in ring short_context; do
  expect 0 "roofline" run --topology=$small --kernel=prefill --variant=$variant --h_q=8 --h_kv=2 \
    --d=64 --s=300 --p=4 --query_split=striped
done
expect_one_line_error 'c: the ring gives each CUBE one query head of the group: C must equal G = 4 \(got 2\)' \
  run --topology=$small --kernel=prefill --variant=ring --h_q=8 --h_kv=2 --s=300 --p=4 --c=2
expect_one_line_error 'p: FLASH runs without SP' run --topology=$small --kernel=prefill \
  --variant=flash --h_q=8 --h_kv=2 --s=300 --p=4
expect_one_line_error 'reduce_payload: not used by PREFILL' run --topology=$small --kernel=prefill \
  --s=300 --reduce_payload=packed
expect_one_line_error "s: the prompts do not fit the PEs' HBM: tensor 'k\[0\]'" run --topology=$small \
  --kernel=prefill --variant=flash --h_q=8 --h_kv=1 --s=40000000
# The pipeline and ring knobs, and compare's baseline_dot row.
expect 0 "lookahead 2, ring_depth 3, ring_message_bytes 1024" run --topology=$small --kernel=prefill \
  --h_q=8 --h_kv=2 --d=64 --s=300 --p=4 --lookahead=2 --ring_depth=3 --ring_message_bytes=1024
expect_one_line_error 'ring_depth: receive buffers posted ahead must be 1 .. 4 \(got 5\)' run \
  --topology=$small --kernel=prefill --h_q=8 --h_kv=2 --s=300 --p=4 --ring_depth=5
"$ahbm" compare --kernel=prefill --topology=$small --h_q=8 --h_kv=2 --d=64 --s=300 --p=4 \
  --variants=ring,baseline_dot >"$tmp/compare_prefill.txt" 2>&1 ||
  fail "compare --kernel=prefill exited $?: $(cat "$tmp/compare_prefill.txt")"
grep -qE "^baseline_dot " "$tmp/compare_prefill.txt" ||
  fail "compare --kernel=prefill: no baseline_dot row: $(cat "$tmp/compare_prefill.txt")"

# decode: data mode on the small chip against the float64 reference is in
# kernels/attention/decode_test; here the command line: every variant runs, bad fields fail.
for variant in opt1 opt2 opt3 baseline_fanout; do
  c="--c=2 --tile=64"
  # One CUBE per head and one dot per rank's block: it refuses a C above 1 and any tile.
  [[ $variant == baseline_fanout ]] && c=
  expect 0 "roofline" run --topology=$small --kernel=decode --variant=$variant --h_q=8 --h_kv=2 \
    --d=64 --s=2000 $c --p=4
done
for variant in baseline_fanout baseline_fanout_group; do
  expect_one_line_error "tile: ${variant^^} reads each rank's whole KV block with one blocking dot" \
    run --topology=$small --kernel=decode --variant=$variant --h_q=8 --h_kv=2 --s=2000 --p=4 --tile=64
done
# A full-chip run prints a page (per unit kind, 10 busiest units), --units=all every unit.
"$ahbm" run --kernel=decode --s=2048 >"$tmp/full.txt" || fail "full-chip decode exited $?"
[[ $(wc -l <"$tmp/full.txt") -lt 60 ]] || fail "full-chip report is $(wc -l <"$tmp/full.txt") lines"
grep -qE '^hbm_channel +4096 ' "$tmp/full.txt" || fail "full-chip report lacks the hbm_channel row"
"$ahbm" run --kernel=decode --s=2048 --units=all >"$tmp/full_all.txt" || fail "--units=all exited $?"
[[ $(grep -cE '^sip[0-9]+\.' "$tmp/full_all.txt") -gt 7000 ]] || fail "--units=all lists too few units"
# Values without a reference: V = 0.5 everywhere makes every output 0.5 (the softmax weights
# sum to 1), whatever Q and K are. S = 100 with max_context 4096 leaves most of the 8 ranks
# empty and T_q = 4 is causal (this wrote NaN with exit 0 before empty ranks merged safely).
mkdir -p "$tmp/dec_in" "$tmp/dec_out" "$tmp/dec_saved" "$tmp/dec_again" "$tmp/batch_in" "$tmp/batch_out"
write_npy "$tmp/dec_in/q.npy" "8, 4, 64" 2048 "$one"
write_npy "$tmp/dec_in/k.npy" "2, 100, 64" 12800 "$one"
write_npy "$tmp/dec_in/v.npy" "2, 100, 64" 12800 "$half"
for variant in opt1 opt2 opt3; do
  rm -f "$tmp/dec_out/o.npy"
  expect 0 "decode $(echo $variant | tr a-z A-Z)" run --topology=$small --kernel=decode \
    --variant=$variant --h_q=8 --h_kv=2 --d=64 --s=100 --t_q=4 --max_context=4096 --c=2 --p=4 \
    --tile=128 --data --inputs_dir="$tmp/dec_in" --outputs_dir="$tmp/dec_out"
  got=$(read_npy "$tmp/dec_out/o.npy" | sort -u)
  [[ "$got" == "0.5" ]] || fail "decode $variant o.npy holds '$(echo $got | head -c 80)', want every element 0.5"
  [[ $(read_npy "$tmp/dec_out/o.npy" | wc -l) -eq 2048 ]] || fail "decode $variant o.npy is not [8, 4, 64]"
done
# Prefill in data mode, every variant: the same inputs (T_q = 4 of S = 100, causal) give 0.5.
for variant in flash ring short_context baseline_fanout baseline_dot; do
  rm -f "$tmp/dec_out/o.npy"
  extra=$([[ $variant == flash ]] && echo "" || echo "--p=4")
  expect 0 "prefill $(echo $variant | tr a-z A-Z)" run --topology=$small --kernel=prefill \
    --variant=$variant --h_q=8 --h_kv=2 --d=64 --s=100 --t_q=4 $extra --tile=32 --data \
    --inputs_dir="$tmp/dec_in" --outputs_dir="$tmp/dec_out"
  got=$(read_npy "$tmp/dec_out/o.npy" | sort -u)
  [[ "$got" == "0.5" ]] || fail "prefill $variant o.npy holds '$(echo $got | head -c 80)', want every element 0.5"
  [[ $(read_npy "$tmp/dec_out/o.npy" | wc -l) -eq 2048 ]] || fail "prefill $variant o.npy is not [8, 4, 64]"
done
# A batch of two requests with their own lengths reads q<r>/k<r>/v<r>.npy and writes o<r>.npy.
for r in 0 1; do
  len=$((r == 0 ? 7 : 300))
  write_npy "$tmp/batch_in/q$r.npy" "8, 1, 64" 512 "$one"
  write_npy "$tmp/batch_in/k$r.npy" "2, $len, 64" $((2 * len * 64)) "$half"
  write_npy "$tmp/batch_in/v$r.npy" "2, $len, 64" $((2 * len * 64)) "$one"
done
expect 0 "users 2" run --topology=$small --kernel=decode --h_q=8 --h_kv=2 --d=64 \
  --request_lengths=7,300 --c=2 --p=4 --tile=64 --data --inputs_dir="$tmp/batch_in" \
  --outputs_dir="$tmp/batch_out"
for r in 0 1; do
  got=$(read_npy "$tmp/batch_out/o$r.npy" | sort -u)
  [[ "$got" == "1" ]] || fail "batch o$r.npy holds '$(echo $got | head -c 80)', want every element 1"
done
expect_one_line_error 'k1.npy: shape \[2, 300, 64\] does not match .*\[2, 301, 64\]' run \
  --topology=$small --kernel=decode --h_q=8 --h_kv=2 --d=64 --request_lengths=7,301 --c=2 --p=4 \
  --data --inputs_dir="$tmp/batch_in"
# --save_inputs writes the generated inputs; running on them again gives the same o.npy.
expect 0 "decode OPT3" run --topology=$small --kernel=decode --h_q=8 --h_kv=2 --d=64 --s=2000 \
  --c=2 --p=4 --tile=64 --data --seed=3 --outputs_dir="$tmp/dec_saved" --save_inputs
for f in q k v o; do [[ -s "$tmp/dec_saved/$f.npy" ]] || fail "save_inputs wrote no $f.npy"; done
expect 0 "decode OPT3" run --topology=$small --kernel=decode --h_q=8 --h_kv=2 --d=64 --s=2000 \
  --c=2 --p=4 --tile=64 --data --inputs_dir="$tmp/dec_saved" --outputs_dir="$tmp/dec_again"
cmp -s "$tmp/dec_saved/o.npy" "$tmp/dec_again/o.npy" || fail "decode on the saved inputs differs"
expect_one_line_error 'save_inputs: needs outputs_dir' run --topology=$small --kernel=decode \
  --h_q=8 --h_kv=2 --d=64 --s=100 --c=2 --p=4 --data --save_inputs
expect_one_line_error 't_q: 4 query tokens exceed the context length 3' run --topology=$small \
  --kernel=decode --h_q=8 --h_kv=2 --d=64 --s=3 --t_q=4 --c=2 --p=4
expect_one_line_error 'users: 3 but request_lengths lists 2 requests' run --topology=$small \
  --kernel=decode --h_q=8 --h_kv=2 --d=64 --request_lengths=7,300 --users=3 --c=2 --p=4
# compare's default rows: opt1, opt3, opt2, baseline_dot, baseline_fanout and
# baseline_rev1_tree, ratios to baseline_fanout; baseline_fanout_group when named.
"$ahbm" compare --topology=$small --h_q=8 --h_kv=2 --d=64 --s=2000 --c=2 --p=4 --tile=64 \
  >"$tmp/compare.txt" 2>&1 || fail "compare exited $?: $(cat "$tmp/compare.txt")"
grep -qE "^baseline_fanout .* 1\.000 " "$tmp/compare.txt" || fail "compare: no baseline_fanout row at 1.000"
grep -q "^hbm:       fifo$" "$tmp/compare.txt" || fail "compare names no HBM model: $(head -5 "$tmp/compare.txt")"
for v in opt1 opt3 opt2 baseline_dot baseline_fanout baseline_rev1_tree; do
  [[ $(grep -cE "^$v " "$tmp/compare.txt") -eq 1 ]] || fail "compare: no one $v row: $(cat "$tmp/compare.txt")"
done
! grep -qE "^baseline_fanout_group " "$tmp/compare.txt" || fail "compare: baseline_fanout_group is not a default row"
"$ahbm" compare --topology=$small --h_q=8 --h_kv=2 --d=64 --s=2000 --c=2 --p=4 --tile=64 \
  --variants=opt3,baseline_fanout_group >"$tmp/compare_group.txt" 2>&1 || fail "compare group exited $?"
grep -qE "^baseline_fanout_group .* 7 +[0-9]+$" "$tmp/compare_group.txt" ||
  fail "compare: baseline_fanout_group row lacks its C·P - 1 = 7 rounds: $(cat "$tmp/compare_group.txt")"
expect_one_line_error "--variants: unknown variant 'opt9'" compare --topology=$small --variants=opt9
# The decode sweep's forms: compare takes them; bad values are one line naming the field.
"$ahbm" compare --topology=$small --h_q=8 --h_kv=2 --d=64 --s=2000 --c=2 --p=4 --tile=64 \
  --lookahead=2 --variants=opt3,opt2_lookahead,baseline_dot >"$tmp/compare_sweep.txt" 2>&1 ||
  fail "compare sweep exited $?: $(cat "$tmp/compare_sweep.txt")"
grep -qE "^opt2_lookahead " "$tmp/compare_sweep.txt" || fail "compare: no opt2_lookahead row"
expect_one_line_error 'lookahead: 4 composites issued ahead need 5 in flight' run --topology=$small \
  --kernel=decode --h_q=8 --h_kv=2 --d=64 --s=2000 --c=2 --p=4 --lookahead=4
expect_one_line_error 'one_shot: a rank' run --topology=$small \
  --kernel=decode --h_q=8 --h_kv=2 --d=64 --s=4000000 --c=2 --p=4 --one_shot
expect_one_line_error 'short_long_threshold: only the AUTO variant uses it' compare \
  --topology=$small --short_long_threshold=100
# compare --reduce_options: 12 rows, opt1/opt3/opt2 x {triplet, packed} x {primitive, fused};
# packed + fused issues fewer reduce commands and spends less time in the reduce than the ADR's
# triplet + primitive, for every variant.
"$ahbm" compare --topology=$small --h_q=8 --h_kv=2 --d=64 --s=2000 --c=2 --p=4 --tile=64 \
  --reduce_options >"$tmp/reduce_options.txt" 2>&1 || fail "compare --reduce_options exited $?"
rows=$(grep -cE '^opt[123] +(triplet|packed) +(primitive|fused) ' "$tmp/reduce_options.txt")
[[ $rows -eq 12 ]] || fail "compare --reduce_options printed $rows rows, want 12: $(cat "$tmp/reduce_options.txt")"
for v in opt1 opt3 opt2; do
  for p in triplet packed; do
    for m in primitive fused; do
      grep -qE "^$v +$p +$m " "$tmp/reduce_options.txt" || fail "compare --reduce_options lacks $v $p $m"
    done
  done
  # columns: variant payload merge latency sweep reduce roofline x_roof reduce_ops rounds events
  read -r adr_reduce adr_ops < <(awk -v v=$v '$1 == v && $2 == "triplet" && $3 == "primitive" {print $6, $9}' "$tmp/reduce_options.txt")
  read -r new_reduce new_ops < <(awk -v v=$v '$1 == v && $2 == "packed" && $3 == "fused" {print $6, $9}' "$tmp/reduce_options.txt")
  awk -v a="$adr_reduce" -v b="$new_reduce" 'BEGIN { exit !(b < a) }' ||
    fail "$v: packed+fused reduce_ns $new_reduce not below triplet+primitive $adr_reduce"
  [[ -n "$new_ops" && -n "$adr_ops" && $new_ops -lt $adr_ops ]] ||
    fail "$v: packed+fused reduce_ops '$new_ops' not below triplet+primitive '$adr_ops'"
done
expect_one_line_error '--variants: baseline_fanout has no ADR reduce' compare --topology=$small \
  --reduce_options --variants=opt2,baseline_fanout
expect_one_line_error '--reduce_options: runs every reduce_payload x reduce_merge' compare \
  --topology=$small --reduce_options --reduce_merge=fused
expect_one_line_error '--reduce_options: must be true or false' compare --topology=$small \
  --reduce_options=maybe
expect_one_line_error 'reduce_merge: BASELINE_FANOUT does not run the ADR reduce' run \
  --topology=$small --kernel=decode --variant=baseline_fanout --s=100 --c=2 --p=4 --reduce_merge=fused
expect_one_line_error 's: must be > 0' run --topology=$small --kernel=decode
# AUTO picks the kernel and its C: an explicit C is refused, the report says what it picked.
expect_one_line_error 'c: AUTO picks the kernel and its C; leave c unset or choose a variant' \
  run --kernel=decode --variant=auto --s=1024 --c=8
expect 0 'decode AUTO -> SHORT_CONTEXT \(S 1024 < threshold 2049; kv_per_cube 1, the fewest KV heads per CUBE that host the 8 KV heads' run --kernel=decode \
  --variant=auto --s=1024
expect 0 'decode AUTO -> OPT3 \(S 1024 >= threshold 512\)' run --kernel=decode --variant=auto \
  --s=1024 --short_long_threshold=512
expect_one_line_error 'h_q: must be a positive multiple of h_kv' run --topology=$small \
  --kernel=decode --h_q=9 --h_kv=2 --s=100 --c=2 --p=4
# Workloads too big for the chip or the host are refused up front (one line, exit 2, at once).
# expect_fast_refusal <pattern> <args...>: as expect_one_line_error, before any simulation.
# "Up front" without a clock: the refusal comes before the op log file is opened, so no
# simulation ran (a hang would hit the test's own timeout instead).
expect_fast_refusal() {
  local pattern=$1
  shift
  rm -f "$tmp/refused.pb"
  expect_one_line_error "$pattern" "$@" --trace="$tmp/refused.pb"
  [[ ! -e "$tmp/refused.pb" ]] || fail "ahbm $* opened its op log before refusing"
}
expect_fast_refusal 's: the KV caches of 1 request\(s\) need 800000028672 B \(745.06 GiB\) of HBM on pe 9 \(sip0.cube1.pe1\) .*its region holds 4294967296 B' \
  run --kernel=decode --s=100000000000
expect_fast_refusal "s: the baseline's K and V blocks .* need 5960.46 GiB of HBM on pe 0 \(sip0.cube0.pe0\)" \
  run --kernel=decode --variant=baseline_fanout --s=100000000000
expect_fast_refusal 'users: 32 request\(s\) x 1 KV head\(s\) = 32 kernel instances on pe 9 \(sip0.cube1.pe1\) need 54272 B of TCM scratch each.*at most 19 request\(s\) fit' \
  run --kernel=decode --s=4096 --users=32
expect_fast_refusal 'users: 300 request.* need 300 x 22720 B of the TCM persistent arena .*which holds 3080192 B beside 65536 B of message staging; at most 19' \
  run --kernel=decode --s=4096 --users=300
expect_fast_refusal 's, users: the KV caches of 4294967295 request\(s\) need' \
  run --kernel=decode --s=4096 --users=4294967295
expect_fast_refusal 'users: 64 request\(s\) .* at most 19 request\(s\) fit' \
  run --kernel=decode --s=4000000 --users=64 --data
expect_fast_refusal 'data: data mode would hold ~397.42 GiB on the host .* above its bound of 4.00 GiB' \
  run --kernel=decode --s=4000000 --users=8 --data
for k in 3 16; do
  expect_fast_refusal "kv_per_cube: must be 1, 2, 4 or 8 \(got $k\)" \
    run --kernel=decode --variant=short_context --s=1000 --kv_per_cube=$k
done
# The shipped topologies cite DESIGN where it is for everyone: beside the repository.
for chip in small chip_2sip chip_4sip; do
  grep -q '^# Numbers: \.\./shared/DESIGN\.md §2\.' topology/$chip.textproto ||
    fail "topology/$chip.textproto does not cite ../shared/DESIGN.md"
  ! grep -q '/work/' topology/$chip.textproto || fail "topology/$chip.textproto cites a local path"
done
expect_one_line_error 'gemm_m: not used by DECODE' run --topology=$small --kernel=decode --s=100 \
  --gemm_m=8
expect_one_line_error 'q.npy: no such file' run --topology=$small --kernel=decode --h_q=8 \
  --h_kv=2 --d=64 --s=100 --c=2 --p=4 --data --inputs_dir="$tmp/none"
expect_one_line_error 'h_q: not used by SELFTEST_GEMM \(got 64\)' run --topology=$small \
  --workload=kernels/selftest/gemm.textproto --h_q=64
{ cat kernels/selftest/gemm.textproto; echo 'bogus_field: 1'; } >"$tmp/unknown_workload.textproto"
expect_one_line_error 'unknown_workload\.textproto:[0-9]+:[0-9]+: .*bogus_field' \
  run --topology=$small --workload="$tmp/unknown_workload.textproto"
expect_one_line_error 'cannot read workload file "no/such/workload.textproto"' \
  run --topology=$small --workload=no/such/workload.textproto

# --version / version: the version, the git commit (or unknown) and the build type.
for v in --version version; do
  expect 0 '^ahbm [0-9.]+ \(commit ([0-9a-f]+(-dirty)?|unknown), (fastbuild|opt|dbg) build\)$' $v
done
# A command's help: help <command>, <command> --help and -h print it and exit 0.
for h in "help run" "run --help" "run -h" "run --kernel=decode --help"; do
  expect 0 "^ahbm run: run a workload's kernels \(decode, prefill, selftest_gemm" $h
done
expect 0 "--topology=topology/chip_4sip.textproto" run --help
expect 0 "--force" diff --help
expect 0 "decode \(or --kernel=prefill\)" help
# A value flag without its value is refused (--topology read a file named "true").
expect_one_line_error '^ahbm validate: --topology: needs a value \(--topology=\.\.\.\)$' \
  validate --topology
expect_one_line_error '^ahbm run: --workload: needs a value' run --workload=
expect_one_line_error '^ahbm run: --data: needs a value \(--data=true\|false\)$' run --data=
expect 0 "data mode" run --topology=$small --workload=kernels/selftest/gemm.textproto --data
# A binary file as topology or workload: one line, its bytes escaped, none raw.
head -c 400 "$ahbm" >"$tmp/garbage.textproto"
for args in "validate --topology=$tmp/garbage.textproto" \
  "run --topology=$small --workload=$tmp/garbage.textproto"; do
  expect_one_line_error 'garbage\.textproto:1:1: .*\(source line: \\x7fELF' $args
  "$ahbm" $args 2>"$tmp/err" >/dev/null
  ! LC_ALL=C grep -q '[^[:print:]]' "$tmp/err" ||
    fail "ahbm $args wrote raw bytes: $(od -c "$tmp/err" | head -3)"
done
# From another directory: the default topology and shipped files come from the install; a
# relative path that exists there is the user's.
abs_ahbm=$(cd "$(dirname "$ahbm")" && pwd)/$(basename "$ahbm")
mkdir -p "$tmp/elsewhere/topology"
sed 's/^name: "small"$/name: "mine"/' topology/small.textproto >"$tmp/elsewhere/topology/small.textproto"
for clean in "" "env -u RUNFILES_DIR -u TEST_SRCDIR"; do
  out=$(cd "$tmp/elsewhere" && $clean "$abs_ahbm" validate 2>&1) ||
    fail "validate from another directory ($clean) exited $?: $out"
  grep -q '^topology "ahbm-4sip"' <<<"$out" || fail "validate from another directory ($clean): $out"
  out=$(cd "$tmp/elsewhere" && $clean "$abs_ahbm" run --topology=topology/chip_2sip.textproto \
    --workload=kernels/selftest/gemm.textproto 2>&1) ||
    fail "a shipped topology and workload from another directory ($clean) exited $?: $out"
  out=$(cd "$tmp/elsewhere" && $clean "$abs_ahbm" validate --topology=topology/small.textproto 2>&1)
  grep -q '^topology "mine"' <<<"$out" ||
    fail "a relative path in the current directory was not used: $out"
done
# NaN or Inf in an input .npy is refused naming the file and the first element.
mkdir -p "$tmp/nan"
write_npy "$tmp/nan/a.npy" "2, 4" 8 '\x00\x00\xc0\x7f'
write_npy "$tmp/nan/b.npy" "4, 3" 12 "$half"
expect_one_line_error "$tmp/nan/a.npy: element \[0, 0\] is NaN \(inputs must be finite\)" run \
  --topology=$small --kernel=selftest_gemm --gemm_m=2 --gemm_k=4 --gemm_n=3 --data \
  --inputs_dir="$tmp/nan"
# Chips beyond what the tool simulates are refused at load, counted without overflow.
for sips in 1000000 4000000000; do
  sed "s/^sips: 1$/sips: $sips/" topology/small.textproto >"$tmp/sips.textproto"
  expect_one_line_error "sips \\* sip.cubes .* = [0-9]+ simulated units\) must be <= 1048576" \
    validate --topology="$tmp/sips.textproto"
done
# diff refuses runs of other workloads or chips, and a JSON that is no report, unless --force.
"$ahbm" run --topology=$small --kernel=decode --variant=opt2 --h_q=8 --h_kv=2 --c=4 --p=4 \
  --s=1024 --users=2 --trace="$tmp/other.pb" --report_json="$tmp/other.json" >/dev/null ||
  fail "recorded run of another workload exited $?"
expect_one_line_error "other.pb: not a run of .*rec.pb's streams: another workload \(A has s: 2048\)" \
  diff "$tmp/rec.pb" "$tmp/other.pb"
expect_one_line_error "other.json: not a run of .*rec.json's streams: another workload" \
  diff "$tmp/rec.json" "$tmp/other.json"
expect 0 "steps \(commands, sends, receives\)" diff "$tmp/rec.pb" "$tmp/other.pb" --force
echo '{}' >"$tmp/empty.json"
expect_one_line_error "empty.json: not a run's report: no topology_name" \
  diff "$tmp/rec.json" "$tmp/empty.json"
# A value given is a value used or refused: explicit zeros (flags and workload files), compare's
# s, rotation starts outside the group or CUBE.
small_decode="--topology=$small --kernel=decode --h_q=8 --h_kv=2 --s=100 --p=4"
for field in d t_q users tile c; do
  expect_one_line_error "^ahbm run: $field: must be > 0 \(got 0\); leave it unset for the default" \
    run $small_decode --$field=0
done
small_decode="$small_decode --c=2"
printf 'kernel: DECODE\nh_q: 8\nh_kv: 2\ns: 100\nc: 2\np: 4\nd: 0\n' >"$tmp/zero_d.textproto"
expect_one_line_error '^ahbm run: d: must be > 0 \(got 0\)' run --topology=$small \
  --workload="$tmp/zero_d.textproto"
expect_one_line_error '^ahbm compare: s: must be > 0 \(got 0\)' compare --topology=$small --s=0
expect_one_line_error '^ahbm run: start_cube: 1000 is outside the CUBE Group of C = 2: 0 \.\. 1$' \
  run $small_decode --start_cube=1000
expect_one_line_error "^ahbm run: start_pe: 9 is outside the CUBE's P = 4 PEs: 0 \.\. 3$" \
  run $small_decode --start_pe=9
# AUTO picks a C the chip hosts; chip_2sip's refusal of compare's defaults says which C fits.
expect 0 'decode AUTO -> OPT3 \(S 3000 >= threshold 2049; C 4, the largest C <= 8 that hosts 2 KV heads\)' \
  run --topology=$small --kernel=decode --variant=auto --h_q=2 --h_kv=2 --s=3000 --p=4
expect_one_line_error 'h_kv: 8 KV heads need 8 CUBE Groups of C = 8; SIPs 0\.\. have 4; C = 4 fits \(--c=4\)' \
  compare --topology=topology/chip_2sip.textproto --c=8
expect_one_line_error 'h_q: .* \(compare row baseline_fanout; --variants=opt1,opt3,opt2,baseline_dot,baseline_rev1_tree leaves out' \
  compare --topology=topology/chip_2sip.textproto
# Unset P and C follow the chip (P = the CUBE's PEs, decode C = the largest C <= 8 that hosts
# the KV heads, prefill ring C = G): the small chip runs the defaults, its workload line says so.
expect 0 'decode OPT3: H_q 64, H_kv 8, d 128, S 512, T_q 1, C 1, P 4, TILE 256' \
  run --topology=$small --kernel=decode --s=512
expect 0 'prefill RING: H_q 8, H_kv 1, d 128, S 512, T_q S, C 8, P 4' \
  run --topology=$small --kernel=prefill --variant=ring --h_q=8 --h_kv=1 --s=512
expect 0 'decode SHORT_CONTEXT: H_q 64, H_kv 8, d 128, S 512, T_q 1, C 1, P 4' \
  run --topology=$small --kernel=decode --variant=short_context --s=512
expect_one_line_error '^ahbm run: h_kv: the ring puts each KV head on C = G = 8 CUBEs .* at most h_kv = 1 fits \(h_q = 8\)$' \
  run --topology=$small --kernel=prefill --variant=ring --s=512
# The chunked ring reduce: its IPCQ cycle must close in one hop; rev1's baseline keeps its tree
# (compare runs that row with it).
expect 0 'decode OPT3: .* C 2, P 4' run $small_decode --level1_reduce=ring_reduce --level2_reduce=ring_reduce
expect_one_line_error '^ahbm run: level2_reduce: the ring over a 1x4 PE rectangle has a link that is not one IPCQ hop' \
  run --topology=topology/chip_4sip.textproto --kernel=decode --s=4096 --p=4 --level2_reduce=ring_reduce
expect_one_line_error '^ahbm run: level2_reduce: BASELINE_REV1_TREE reduces by rev1.s tree' \
  run --topology=$small --kernel=decode --variant=baseline_rev1_tree --s=512 --level2_reduce=ring_reduce
expect 0 'baseline_rev1_tree' compare --topology=$small --h_q=8 --h_kv=2 --s=512 --c=2 \
  --level2_reduce=ring_reduce --variants=opt3,baseline_rev1_tree
# TCM refusals name the field that made an instance too big.
for big in "d=4096:d: 4096 elements per head" "tile=100000:tile: 100000 keys" "t_q=64:t_q: 64 query tokens"; do
  expect_fast_refusal "^ahbm run: ${big#*:}: one kernel instance on .* at most ${big%%=*} = [0-9]+ fits$" \
    run --topology=$small --kernel=decode --h_q=8 --h_kv=1 --s=1000 --c=4 --p=4 --${big%%:*}
done
# Per-flag help: meaning, unit, default.
expect 0 '--d +head dimension, elements \(default: 128\)' help run
expect 0 '--tile +KV tile, keys \(default: decode 256, prefill 128\)' help compare

# ahbm sweep: a 2x2 grid (a workload field x a topology field), the same CSV on 1 and 2 jobs; a
# refused point is a row; bad flags exit 2 naming the flag.
sweep_grid=(sweep --topology=$small --kernel=decode --h_q=8 --h_kv=2 --p=4 --s=2000
  --param=variant --values=opt1,opt3 --param=sip.cube.pe.scheduler.max_inflight_composites --values=1,4)
expect 0 'opt3 +4 +[0-9.]+ ' "${sweep_grid[@]}" --jobs=1 --out="$tmp/sweep1.csv" --json="$tmp/sweep1.json"
expect 0 'opt3 +4 +[0-9.]+ ' "${sweep_grid[@]}" --jobs=2 --out="$tmp/sweep2.csv" --json="$tmp/sweep2.json"
cmp -s "$tmp/sweep1.csv" "$tmp/sweep2.csv" || fail "sweep CSV differs between --jobs=1 and --jobs=2"
cmp -s "$tmp/sweep1.json" "$tmp/sweep2.json" || fail "sweep JSON differs between --jobs=1 and --jobs=2"
[[ $(head -1 "$tmp/sweep1.csv") == "variant,sip.cube.pe.scheduler.max_inflight_composites,workload,latency_ps,roofline_bound_ps,roofline_ratio,binding,events,status" ]] ||
  fail "sweep CSV header: $(head -1 "$tmp/sweep1.csv")"
[[ $(grep -c ',ok$' "$tmp/sweep1.csv") -eq 4 ]] || fail "sweep CSV: want 4 ok rows: $(cat "$tmp/sweep1.csv")"
expect 0 'scheduler.tile_k must be > 0 \(got 0\)' sweep --topology=$small --kernel=decode --h_q=8 --h_kv=2 --p=4 --s=2000 \
  --param=sip.cube.pe.scheduler.tile_k --values=64,0
expect_one_line_error "^ahbm sweep: --param: 'nope' is neither a workload field nor a topology field" \
  sweep --topology=$small --param=nope --values=1
expect_one_line_error "^ahbm sweep: --param: 'sip.cube.pe.nope' is neither" \
  sweep --topology=$small --param=sip.cube.pe.nope --values=1
expect_one_line_error "^ahbm sweep: --values: s: must be an integer" sweep --topology=$small --param=s --values=1,x
expect_one_line_error "^ahbm sweep: --values: given without a --param" sweep --topology=$small --values=1
expect_one_line_error "^ahbm sweep: --jobs: must be an integer from 1 to 1024 \(got '0'\)" \
  sweep --topology=$small --param=s --values=512 --jobs=0
expect_one_line_error "^ahbm sweep: --out: cannot write $tmp/no/such/dir.csv" \
  sweep --topology=$small --param=s --values=512 --out=$tmp/no/such/dir.csv
# ahbm milestone: bad flags are refused before anything runs (the runs: milestone/).
expect_one_line_error '^ahbm milestone: --decode_context: must be > 0 \(got 0\)$' \
  milestone --decode_context=0 --out_dir="$tmp/ms"
expect_one_line_error '^ahbm milestone: --panels: unknown panel .decode.; one of single_user_decode' \
  milestone --panels=decode --out_dir="$tmp/ms"
expect_one_line_error '^ahbm milestone: --variants: unknown variant .opt9.; one of opt1, opt3' \
  milestone --variants=opt3,opt9 --out_dir="$tmp/ms"
expect_one_line_error '^ahbm milestone: --users: the multi-user panels run 2 to 16 requests \(got 17\)$' \
  milestone --users=17 --out_dir="$tmp/ms"
expect_one_line_error '^ahbm milestone: --jobs: must be an integer from 1 to 1024 \(got .0.\)$' \
  milestone --jobs=0 --out_dir="$tmp/ms"
expect_one_line_error "^ahbm milestone: --studies: unknown study 'nope' \(one of decode_c, " \
  milestone --studies=decode_c,nope --out_dir="$tmp/ms"
touch "$tmp/not_a_dir"
expect_one_line_error '^ahbm milestone: --out_dir: cannot create' \
  milestone --quick --out_dir="$tmp/not_a_dir/report"
expect_one_line_error 'h_q: .* \(milestone panel single_user_decode, variant baseline_fanout\)$' \
  milestone --topology=$small --panels=single_user_decode --out_dir="$tmp/ms"

# ahbm slurm where Slurm is not installed (no sbatch on PATH): exit 1 (the machine, not the
# input), one line; --dry_run needs no Slurm.
out=$(PATH=/nonexistent "$ahbm" slurm sweep --topology=$small --param=s --values=512,1024 \
  --tasks=2 --out_dir="$tmp/slurm" 2>&1)
rc=$?
[[ $rc -eq 1 && $out == "ahbm slurm: sbatch: not found on PATH (ahbm slurm needs Slurm's client \
commands here; --dry_run prints the scripts without them)" ]] ||
  fail "ahbm slurm without sbatch exited $rc: $out"
expect 0 '^#SBATCH --array=0-1$' slurm sweep --topology=$small --param=s --values=512,1024 \
  --tasks=2 --out_dir="$tmp/slurm" --dry_run

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all ahbm CLI checks passed"
