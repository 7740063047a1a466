#!/bin/bash
# analyze_browser_test.sh: the HTML report opened in a real headless browser (Debian's
# chromium): it renders, the dygraphs charts are there (canvas elements), the console has no
# errors, and strings from the trace and the results file (a <script> in the command line, HTML
# in callsites, a policy named like a script injection, U+2028) come out as text, never as markup.
# Usage: analyze_browser_test.sh GPUANALYZE MKFIXTURE
set -u
GA=$(realpath "$1")
MK=$(realpath "$2")
T=${TEST_TMPDIR:-$(mktemp -d)}/browser
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$CHROME" ]; then
  echo "FAIL: no chromium on PATH: apt-get install -y chromium" >&2
  exit 1
fi
"$MK" trace fx.zst 200 && "$MK" results fx.zst fx.json || exit 1
"$MK" trace r1.zst 100 1 || exit 1
"$GA" load -q --db r.db fx.zst fx.json r1.zst || exit 1
"$GA" report --db r.db --html report.html || exit 1

export HOME=$T/home && mkdir -p "$HOME"
# --virtual-time-budget lets the page's scripts run to completion before the DOM is dumped.
timeout 120 "$CHROME" --headless --disable-gpu --no-sandbox --no-first-run --disable-extensions \
  --enable-logging=stderr --v=0 --virtual-time-budget=5000 --dump-dom "file://$T/report.html" \
  > dom.html 2> chrome.log
rc=$?
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
[ "$rc" = 0 ] || fail "chromium exited $rc: $(tail -5 chrome.log)"
[ -s dom.html ] || fail "empty DOM"
# One chart per trace; dygraphs draws each on canvas elements inside its div.
charts=$(grep -o 'class="chart"' dom.html | wc -l)
[ "$charts" = 2 ] || fail "want 2 charts, found $charts"
canvases=$(grep -o '<canvas' dom.html | wc -l)
[ "$canvases" -ge 4 ] || fail "want >= 2 canvases per chart, found $canvases (the charts did not render)"
grep -q 'dygraph-legend' dom.html || fail "no dygraph legend in the DOM"
grep -q 'dygraph-axis-label' dom.html || fail "no dygraph axis labels (the charts did not render)"
# Console: every console message and uncaught error is logged as ...:CONSOLE(...)
if grep -q ':CONSOLE' chrome.log; then fail "console messages: $(grep ':CONSOLE' chrome.log)"; fi
# Hostile strings are text.
grep -q '&lt;script&gt;alert(1)&lt;/script&gt;' dom.html || fail "the command line is not shown escaped"
! grep -q '<script>alert' dom.html || fail "a <script> from the trace became markup"
! grep -q '<img src="x"' dom.html || fail "an <img> from a callsite became markup"
! grep -q '<script>console.error' dom.html || fail "a <script> from a policy name became markup"
grep -q 'Recommendation' dom.html || fail "no recommendation section"
if [ "$fails" != 0 ]; then
  echo "$fails failure(s); chromium log tail:" >&2
  tail -20 chrome.log >&2
  exit 1
fi
echo "report renders in $("$CHROME" --version 2>/dev/null): $charts charts, $canvases canvases, no console errors"
