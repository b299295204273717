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
grep -q 'sip0.cube1.pe3.gemm' "$tmp/table1.txt" || fail "report table lacks CUBE 1's GEMM"
expect_one_line_error '--m: must be a positive integer' stream --topology=$small --m=0
expect_one_line_error '--count: must be a positive integer' stream --topology=$small --count=x
expect_one_line_error 'cubes: CUBE 99 is outside' stream --topology=$small --cubes=99
expect_one_line_error "issue_cost_profile: the chip has no profile named 'fast'" \
  stream --topology=$small --profile=fast
expect_one_line_error 'composite cmd 2: operand a: TCM range .* \(TCM overflow\)' stream --topology=$small --k=1000000000

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all ahbm CLI checks passed"
