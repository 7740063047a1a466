#!/bin/bash
# memviz_check.sh: gpureplay --export-snapshot's pickles opened by torch's own memory_viz
# module on the GPU machine (torch is there, not here). Issue 14, item 7.
#
#   tests/gpu/memviz_check.sh [BINDIR]     (default BINDIR: .gpu-replay; results into $OUT)
#
# BINDIR holds gpureplay (a bazel -c opt build), lib/ with the shared libraries the GPU machine
# may lack and traces/ with the snapshots of traces/snapshots imported: tests/gpu/replay_gpu_pack.sh
# prepares it (.gpu-replay/). No GPU is used: the export is the simulator's; what needs that
# machine is torch. $OUT gets memviz_check.txt (this log) and memviz_check.tgz (pickles, pages).
#
# For two real traces of traces/ (a requests recording of a training job, and a PyTorch
# snapshot imported by gpurec), under PyTorch's default and under expandable segments:
#  1. the export, then tests/memviz/memviz_check.py (keys, types, memory_viz's backward walk);
#  2. torch: pickle.load; `python -m torch.cuda._memory_viz trace_plot | segment_plot | stats`
#     (stats asserts that each segment's blocks add up); trace_plot -s (the segments view);
#  3. torch's own snapshot of the same job beside the export: the keys of the entries, segments
#     and blocks that one has and the other lacks (traces/snapshots/infer_varlen.default.pickle).
set -u
BIN=${1:-.gpu-replay}
OUT=${OUT:-/tmp/memviz_check_out}
PY=${PY:-/opt/torch/.venv/bin/python}
mkdir -p "$OUT"
W=$(mktemp -d)
exec > >(tee "$OUT/memviz_check.txt") 2>&1
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
fail() { echo "FAIL: $*"; rc=1; }
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  "$BIN/gpureplay" --version | head -1
  $PY -c "import torch; print('torch', torch.__version__)"
}

[ -f "$BIN/traces/infer_varlen.zst" ] || fail "$BIN/traces/infer_varlen.zst missing (tests/gpu/replay_gpu_pack.sh makes it)"
for tr in traces/recorded/train_amp.requests.zst "$BIN/traces/infer_varlen.zst"; do
  for p in pytorch pytorch:expandable_segments:True; do
    n="$W/$(basename "$tr" .zst).${p//[:]/_}"
    echo "== $n"
    "$BIN/gpureplay" "$tr" --policy="$p" --export-snapshot="$n.pickle" || { fail "export $n"; continue; }
    $PY tests/memviz/memviz_check.py "$n.pickle" || fail "memviz_check $n"
    $PY -c "import pickle, torch; d = pickle.load(open('$n.pickle', 'rb')); print('pickle.load:', sorted(d))" ||
      fail "pickle.load $n"
    for plot in trace_plot segment_plot; do
      $PY -m torch.cuda._memory_viz $plot "$n.pickle" -o "$n.$plot.html" && grep -q add_local_files "$n.$plot.html" ||
        fail "$plot $n"
    done
    $PY -m torch.cuda._memory_viz trace_plot -s "$n.pickle" -o "$n.segments.html" || fail "trace_plot -s $n"
    $PY -m torch.cuda._memory_viz stats "$n.pickle" >"$n.stats.txt" || fail "stats $n"
    tail -4 "$n.stats.txt"
    ls -l "$n".*.html | awk '{print $5, $9}'
  done
done

echo "== keys: torch's own snapshot against the export"
$PY - "$W/infer_varlen.pytorch.pickle" <<'EOF' || rc=1
import pickle, sys
real = pickle.load(open("traces/snapshots/infer_varlen.default.pickle", "rb"))
ours = pickle.load(open(sys.argv[1], "rb"))
def keys(d, what):
    if what == "root": return set(d)
    if what == "entry": return set().union(*(set(e) for t in d["device_traces"] for e in t))
    if what == "segment": return set().union(*(set(s) for s in d["segments"]))
    if what == "block": return set().union(*(set(b) for s in d["segments"] for b in s["blocks"]))
for what in ("root", "entry", "segment", "block"):
    r, o = keys(real, what), keys(ours, what)
    print(f"{what}: torch only {sorted(r - o)}, export only {sorted(o - r)}")
EOF
tar -C "$W" -czf "$OUT/memviz_check.tgz" . 2>/dev/null
echo "memviz_check: $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
