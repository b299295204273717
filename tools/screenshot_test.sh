#!/usr/bin/env bash
# tools/screenshot.sh: refusals (exit 2, one line naming the argument), then a small page with
# a plot rendered to a PNG of the asked size when chromium is installed.
set -euo pipefail

shot="tools/screenshot.sh"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }

expect_refusal() {  # expected stderr line, then the arguments
  local want="$1"; shift
  local rc=0
  "$shot" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc -eq 2 ]] || fail "$*: exit $rc, want 2"
  [[ "$(cat "$tmp/err")" == "$want" ]] || fail "$*: stderr '$(cat "$tmp/err")', want '$want'"
}

expect_refusal "$tmp/none.html: no such file" "$tmp/none.html"
printf '<!DOCTYPE html>\n<html><body><h1>page &lt;test&gt;</h1><img src="p.svg"></body></html>\n' \
  >"$tmp/index.html"
expect_refusal "--height: must be a positive number of pixels (got '0')" "$tmp/index.html" --height=0
expect_refusal "$tmp/no_dir/x.png: cannot write (no such directory, or not writable)" \
  "$tmp/index.html" "$tmp/no_dir/x.png"
expect_refusal "--width=3: unknown option (usage: tools/screenshot.sh <page.html> [out.png] [--height=N])" \
  "$tmp/index.html" --width=3

if ! command -v chromium >/dev/null; then
  echo "chromium not installed: the rendering part is skipped (tools/screenshot.sh installs it)"
  exit 0
fi
printf '<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100"><rect width="200" height="100" fill="#3b6ea5"/></svg>\n' \
  >"$tmp/p.svg"
export HOME="$tmp"  # chromium's profile
out=$("$shot" "$tmp/index.html" --height=300)
[[ "$out" == "$tmp/index.png" ]] || fail "printed '$out', want $tmp/index.png"
# A PNG, 1400 x 300: the signature, then IHDR's width and height (big-endian).
[[ "$(head -c 8 "$out" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] || fail "not a PNG"
size=$(od -An -tu1 -j16 -N8 "$out" | tr -s ' ' | sed 's/^ //')
[[ "$size" == "0 0 5 120 0 0 1 44" ]] || fail "PNG size bytes '$size', want 1400 x 300"
echo PASS
