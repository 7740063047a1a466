#!/bin/bash
# screenshot.sh: regenerate docs/report.png, the README's picture of the report's first screen,
# on a real trace (the browser test renders its sibling, the same job run with expandable segments) (run from the repository root after
# `bazel build //analyze:gpuanalyze //replay:gpureplay`).
set -eu
T=$(mktemp -d)
TRACE=traces/recorded/stream_events/stream_handoff.default.late.torch.zst
cp "$TRACE" "$T/stream_handoff.default.late.torch.zst"
bazel-bin/replay/gpureplay "$T/stream_handoff.default.late.torch.zst" --sweep -o "$T/r.json" >/dev/null 2>&1
bazel-bin/analyze/gpuanalyze load -q --db "$T/r.db" "$T/stream_handoff.default.late.torch.zst" "$T/r.json"
bazel-bin/analyze/gpuanalyze report --db "$T/r.db" --html "$T/report.html" 2>/dev/null
# the trace's path as a user would have typed it, not the temporary directory
sed -i "s|$T/||g" "$T/report.html"
HOME=$T chromium --headless --disable-gpu --no-sandbox --no-first-run --disable-extensions --hide-scrollbars \
  --virtual-time-budget=5000 --window-size=1280,860 --screenshot="$T/report.png" "file://$T/report.html" 2>/dev/null
mkdir -p docs && cp "$T/report.png" docs/report.png
echo "docs/report.png: $(stat -c %s docs/report.png) bytes"
rm -rf "$T"
