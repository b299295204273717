#!/usr/bin/env bash
# Captures a report page (ahbm milestone's index.html) as a PNG with Debian's headless chromium,
# installed through apt when missing (root or sudo, like tools/setup.sh).
#
#   tools/screenshot.sh report/index.html [out.png] [--height=N]
#
# The window is 1400 px wide (the width the page is laid out for) and, unless --height is
# given, tall enough for the whole page: an estimate from the page's rows, headings and plots
# (milestone/page.h's layout). Prints the PNG's path (default: index.png beside the page).
set -euo pipefail

readonly usage="usage: tools/screenshot.sh <page.html> [out.png] [--height=N]"
usage() { echo "$usage" >&2; exit 2; }

page=""
out=""
height=""
for arg in "$@"; do
  case "$arg" in
    --height=*) height="${arg#--height=}"
                [[ "$height" =~ ^[1-9][0-9]*$ ]] || { echo "--height: must be a positive number of pixels (got '$height')" >&2; exit 2; } ;;
    -*) echo "$arg: unknown option ($usage)" >&2; exit 2 ;;
    *) if [[ -z "$page" ]]; then page="$arg"; elif [[ -z "$out" ]]; then out="$arg"; else usage; fi ;;
  esac
done
[[ -n "$page" ]] || usage
[[ -f "$page" ]] || { echo "$page: no such file" >&2; exit 2; }
page_abs=$(realpath "$page")
[[ -n "$out" ]] || out="$(dirname "$page_abs")/index.png"
out_dir=$(dirname "$out")
[[ -d "$out_dir" && -w "$out_dir" ]] || { echo "$out: cannot write (no such directory, or not writable)" >&2; exit 2; }
out_abs="$(realpath "$out_dir")/$(basename "$out")"

chromium_bin=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$chromium_bin" ]]; then
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "screenshot: need root (or sudo) to install chromium" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "screenshot: installing chromium" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q >/dev/null
  "${sudo[@]}" apt-get install -y -q --no-install-recommends chromium >/dev/null
  chromium_bin=$(command -v chromium)
fi

if [[ -z "$height" ]]; then
  # One line per table row, heading and plot in the page (milestone/page.cc writes them so):
  # panel tables and study cards stand two side by side (a pair as tall as its taller card;
  # a plot ~430 px at 1400 px, an answer a line per ~60 characters), the timeline is one
  # full-width plot.
  height=$(awk '
    function flush_studies(  i, a, b) {
      for (i = 0; i < n; i += 2) { a = card[i]; b = (i + 1 < n) ? card[i + 1] : 0; h += (a > b ? a : b) + 16 }
      n = 0
    }
    /<h2 id=/ { flush_studies(); section = $0; h += 70 }
    /<div class="study"/ { card[n++] = 40 }
    section ~ /"answers"/ && n > 0 {
      if (/<h3>/) card[n - 1] += 26 * (1 + int(length($0) / 80))
      if (/class="answer"/) card[n - 1] += 26 * (1 + int(length($0) / 60))
      if (/class="pick"/) card[n - 1] += 24
      if (/<img /) card[n - 1] += 430
      next
    }
    /<h3>/ { h += 45 }
    /<tr>/ { h += (section ~ /"panels"/) ? 14 : 30 }
    /class="wide"/ { h += 520 }
    /<p / { h += 40 }
    END { flush_studies(); print int(h + 150) }' "$page_abs")
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
rm -f "$out_abs"
# A stuck browser must not hang the caller: two minutes is ~30 times a report's render.
if ! timeout 120 "$chromium_bin" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --run-all-compositor-stages-before-draw --virtual-time-budget=5000 \
    --screenshot="$out_abs" --window-size="1400,$height" "file://$page_abs" >"$log" 2>&1 \
    || [[ ! -s "$out_abs" ]]; then
  echo "screenshot: chromium wrote no $out_abs:" >&2
  tail -n 5 "$log" >&2
  exit 1
fi
echo "$out_abs"
