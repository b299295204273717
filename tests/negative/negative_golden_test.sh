#!/usr/bin/env bash
# Negative goldens (tests/README.md): every row of tests/negative/table.txt is a bad input and the
# exact one line `ahbm` must print on stderr, with its exit code (2 bad input, 3 deadlock, 4 a
# kernel's fault; base/errors.h). A row passes when ahbm exits with that code, prints exactly that
# line on stderr and, for exit 2, nothing on stdout. Exit 0, 70 (our own bug), a signal or a hang
# fails it.
#
#   bazel test //tests:negative_golden_test
#   bazel run //tests:negative_golden_test -- --update [--only=name,name]
#
# --update rewrites the stderr lines of the table in the source tree with what ahbm prints now
# (rows whose exit code is right and whose message is one line; others are reported, not
# rewritten). Review the diff: the table is the contract.
#
# Row format (rows are separated by blank lines; '#' lines are comments):
#   name: <unique name>
#   make: <shell command>      0 or more, run first in the row's scratch dir $T (cwd: the
#                              runfiles root, $R; npy, put_byte and the ahbm binary $AHBM exist)
#   run: <ahbm's arguments>    word-split by the shell ($T, $R expanded)
#   exit: 2 | 3 | 4
#   stderr: <the exact line>   $T in the line stands for the scratch dir
set -uo pipefail

R=$PWD
AHBM=$R/cli/ahbm
table=tests/negative/table.txt
update=false
only=""
for arg in "$@"; do
  case $arg in
    --update) update=true ;;
    --only=*) only=,${arg#--only=}, ;;
    *) echo "negative_golden_test: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if $update; then
  [[ -n ${BUILD_WORKSPACE_DIRECTORY:-} ]] || { echo "--update needs bazel run" >&2; exit 2; }
  out_table=$BUILD_WORKSPACE_DIRECTORY/$table
fi
scratch=${TEST_TMPDIR:-$(mktemp -d)}/negative

# npy FILE DESCR SHAPE COUNT [FLOAT_HEX]: a .npy file (format 1.0) with header dict
# {'descr': DESCR, 'fortran_order': False, 'shape': SHAPE, } and COUNT 4-byte values, each the
# little-endian bytes FLOAT_HEX (default 0000803f: 1.0f; 0000c07f: NaN).
npy() {
  local file=$1 descr=$2 shape=$3 count=$4 value=${5:-0000803f}
  local dict="{'descr': '$descr', 'fortran_order': False, 'shape': $shape, }"
  local len=$(( (10 + ${#dict} + 1 + 63) / 64 * 64 - 10 ))
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((len & 255)))\\x$(printf %02x $((len >> 8)))"
    printf '%s' "$dict"
    printf '%*s\n' $((len - ${#dict} - 1)) ''
    local bytes="" i
    for ((i = 0; i < 8; i += 2)); do bytes+="\\x${value:i:2}"; done
    for ((i = 0; i < count; ++i)); do printf "$bytes"; done
  } >"$file"
}
# put_byte FILE OFFSET HEX: overwrites one byte.
put_byte() { printf "\\x$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
export -f npy put_byte
export R AHBM

names=() makes=() runs=() exits=() stderrs=() lines=()
parse() {
  local name="" make="" run="" exit="" stderr="" line_no=0 start=0 line
  flush() {
    if [[ -n $name ]]; then
      names+=("$name"); makes+=("$make"); runs+=("$run"); exits+=("$exit")
      stderrs+=("$stderr"); lines+=("$start")
    fi
    name="" make="" run="" exit="" stderr=""
  }
  while IFS= read -r line || [[ -n $line ]]; do
    line_no=$((line_no + 1))
    case $line in
      "#"*) ;;
      "") flush ;;
      name:\ *) name=${line#name: }; start=$line_no ;;
      make:\ *) make+="${line#make: }"$'\n' ;;
      run:\ *) run=${line#run: } ;;
      exit:\ *) exit=${line#exit: } ;;
      stderr:\ *) stderr=${line#stderr: } ;;
      *) echo "$table:$line_no: not a row line: $line" >&2; exit 2 ;;
    esac
  done <"$table"
  flush
}
parse

failures=0 passed=0
declare -A seen new_stderr
for i in "${!names[@]}"; do
  name=${names[$i]}
  if [[ -n ${seen[$name]:-} ]]; then
    echo "FAIL $name: a second row of this name"
    failures=$((failures + 1))
    continue
  fi
  seen[$name]=1
  [[ -z $only || $only == *",$name,"* ]] || continue
  want_exit=${exits[$i]}
  if [[ $want_exit != 2 && $want_exit != 3 && $want_exit != 4 ]]; then
    echo "FAIL $name ($table:${lines[$i]}): exit must be 2, 3 or 4, not '$want_exit'"
    failures=$((failures + 1)); continue
  fi
  T=$scratch/$name
  rm -rf "$T"; mkdir -p "$T"; export T
  if [[ -n ${makes[$i]} ]] && ! (set -e; eval "${makes[$i]}") >"$T/.make.log" 2>&1; then
    echo "FAIL $name: its make step failed: $(tail -3 "$T/.make.log")"
    failures=$((failures + 1)); continue
  fi
  if ! eval "args=(${runs[$i]})" 2>"$T/.parse.log"; then
    echo "FAIL $name ($table:${lines[$i]}): its run line does not parse: $(cat "$T/.parse.log")"
    failures=$((failures + 1)); continue
  fi
  timeout 120 "$AHBM" "${args[@]}" >"$T/.stdout" 2>"$T/.stderr" </dev/null
  rc=$?
  got=$(cat "$T/.stderr")
  got=${got//$T/\$T}
  what=""
  case $rc in
    0) what="exited 0 on a bad input" ;;
    70) what="reached an internal error (exit 70)" ;;
    124) what="hung (killed after 120 s)" ;;
    2 | 3 | 4) [[ $rc == "$want_exit" ]] || what="exited $rc, want $want_exit" ;;
    *) what="exited $rc (crash or signal), want $want_exit" ;;
  esac
  if [[ -z $what && $(wc -l <"$T/.stderr") -ne 1 ]]; then
    what="printed $(wc -l <"$T/.stderr") lines on stderr, want one"
  fi
  if [[ -z $what && $rc == 2 && -s $T/.stdout ]]; then
    what="wrote to stdout: $(head -c 200 "$T/.stdout")"
  fi
  if [[ -z $what ]] && $update; then
    new_stderr[$name]=$got
    passed=$((passed + 1)); continue
  fi
  if [[ -z $what && $got != "${stderrs[$i]}" ]]; then
    what="printed a different line
  want: ${stderrs[$i]}
  got:  $got"
  fi
  if [[ -n $what ]]; then
    echo "FAIL $name ($table:${lines[$i]}): ahbm ${runs[$i]} $what"
    [[ $rc != 2 && $rc != 3 && $rc != 4 ]] && head -5 "$T/.stderr" | sed 's/^/  | /'
    failures=$((failures + 1))
  else
    passed=$((passed + 1))
  fi
done

if $update; then
  # Rewrite each updated row's stderr line (or add it after its exit line).
  tmp_table=$(mktemp)
  current=""
  while IFS= read -r line || [[ -n $line ]]; do
    case $line in
      name:\ *) current=${line#name: }; echo "$line" ;;
      stderr:\ *)
        if [[ -n ${new_stderr[$current]+x} ]]; then echo "stderr: ${new_stderr[$current]}"; else
          echo "$line"
        fi ;;
      exit:\ *)
        echo "$line"
        row_stderr=$(awk -v n="name: $current" '$0 == n {inrow = 1; next}
          inrow && /^$/ {exit} inrow && /^stderr: / {print}' "$table")
        if [[ -n ${new_stderr[$current]+x} && -z $row_stderr ]]; then
          echo "stderr: ${new_stderr[$current]}"
        fi ;;
      *) echo "$line" ;;
    esac
  done <"$table" >"$tmp_table"
  cp "$tmp_table" "$out_table"
  echo "updated $out_table: ${#new_stderr[@]} rows; $failures rows not updated"
fi

echo "negative goldens: $passed passed, $failures failed"
[[ $failures -eq 0 ]]
