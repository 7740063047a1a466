#!/bin/bash
# memviz_cli_test.sh: gpureplay --export-snapshot on real traces (issue 14, item 7).
#  - the round trip: a trace exported under a setting, the pickle imported by `gpurec import`,
#    replayed under the same setting: the same peak reserved, live and allocated bytes as the
#    direct replay (PyTorch's default, expandable segments, bfc and direct);
#  - the pickle as torch writes one and memory_viz reads it (memviz_check.py, python3's pickle;
#    skipped when python3 is missing), and torch's own _memory_viz (trace_plot, segment_plot,
#    stats) when torch is importable;
#  - bad input: one clear line, the exit code, nothing written.
# Exit codes, stdout and stderr are compared.
# Usage: memviz_cli_test.sh GPUREPLAY GPUREC CHECK_PY TRACE.zst SNAPSHOT.pickle
set -u
RP=$(realpath "$1"); GR=$(realpath "$2"); CHECK=$(realpath "$3"); TRACE=$(realpath "$4"); SNAP=$(realpath "$5")
T=${TEST_TMPDIR:-$(mktemp -d)}/memviz
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# run NAME WANT_RC CMD...: stdout in NAME.out, stderr in NAME.err
run() {
  local name=$1 want=$2
  shift 2
  "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "$name: exit $rc, want $want: $(cat "$name.err")"
}
same() { [ "$(cat "$1")" = "$2" ] || fail "$1: got '$(cat "$1")', want '$2'"; }
empty() { [ ! -s "$1" ] || fail "$1 not empty: $(cat "$1")"; }
peaks() { # TRACE POLICY [ARGS...]: peak reserved, live (lower bound), allocated as gpureplay --json says
  local t=$1 p=$2
  shift 2
  "$RP" "$t" --policy="$p" --json "$@" 2>/dev/null | head -1 >peaks.json
  for k in peak_reserved_bytes lower_bound_bytes peak_allocated_bytes; do
    sed -n "s/.*\"$k\": *\([0-9]*\).*/$k=\1/p" peaks.json
  done | tr '\n' ' '
}
PY=
command -v python3 >/dev/null && PY=python3
TORCH=
[ -n "$PY" ] && $PY -c "import torch" 2>/dev/null && TORCH=1

# A torch-history trace with callsites (a real snapshot imported) and a requests trace.
run imp 0 "$GR" import "$SNAP" -o hist.zst
for tr in "$TRACE" hist.zst; do
  for p in pytorch pytorch:expandable_segments:True bfc direct; do
    n=$(basename "$tr" .zst).${p//[:]/_}
    # bfc sizes its pool from the GPU's memory, which a snapshot does not say: given to all three
    run "$n.export" 0 "$RP" "$tr" --policy="$p" --device-memory=80GiB --export-snapshot="$n.pickle"
    grep -q "^gpureplay: wrote $n.pickle ($p, 1 device, [0-9]* entries, .*, peak reserved .* on device 0)$" "$n.export.err" ||
      fail "$n: the line on stderr: $(cat "$n.export.err")"
    empty "$n.export.out"
    run "$n.import" 0 "$GR" import "$n.pickle" -o "$n.zst"
    a=$(peaks "$tr" "$p" --device-memory=80GiB)
    b=$(peaks "$n.zst" "$p" --device-memory=80GiB)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$n: replayed directly '$a', through the pickle '$b'"
    if [ -n "$PY" ]; then
      run "$n.check" 0 $PY "$CHECK" "$n.pickle"
      grep -q "^ok: device 0: " "$n.check.out" || fail "$n: memviz_check: $(cat "$n.check.out")"
    fi
    if [ -n "$TORCH" ]; then
      for plot in trace_plot segment_plot; do
        run "$n.$plot" 0 $PY -m torch.cuda._memory_viz $plot "$n.pickle" -o "$n.$plot.html"
        grep -q "add_local_files" "$n.$plot.html" || fail "$n: torch's $plot wrote no viewer"
      done
      run "$n.stats" 0 $PY -m torch.cuda._memory_viz stats "$n.pickle"
      grep -q "^total_reserved: " "$n.stats.out" || fail "$n: torch's stats: $(cat "$n.stats.out")"
    fi
  done
done
# the frames of the imported snapshot's callsites come through
if [ -n "$PY" ]; then
  $PY -c "
import pickle
d = pickle.load(open('hist.pytorch.pickle', 'rb'))
fr = [f for e in d['device_traces'][0] for f in e['frames']]
assert fr and any(f['filename'].endswith('infer_varlen.py') and f['line'] > 0 for f in fr), fr[:3]
" || fail "hist.pytorch.pickle: no frames of the program"
fi
[ -z "$PY" ] && echo "SKIPPED: the python3 checks (no python3)"
[ -z "$TORCH" ] && echo "SKIPPED: torch's _memory_viz (torch is not importable here; tests/gpu/memviz_check.sh runs it)"

# Bad input: one line and try --help (usage, exit 2) or the cause (exit 1); nothing written.
run nopol 2 "$RP" "$TRACE" --export-snapshot=x.pickle
same nopol.err "gpureplay: --export-snapshot writes one --policy's simulated run over one trace: give one trace and one --policy, without --sweep, --tune, --explain-oom, --list-policies, -o, --json or --device
try 'gpureplay --help'"
run twopol 2 "$RP" "$TRACE" -p pytorch -p bfc --export-snapshot=x.pickle
same twopol.err "$(cat nopol.err)"
run sweep 2 "$RP" "$TRACE" -p pytorch --sweep --export-snapshot=x.pickle
same sweep.err "$(cat nopol.err)"
run async 2 "$RP" "$TRACE" -p async --export-snapshot=x.pickle
same async.err "gpureplay: 'async' is the driver's stream-ordered pool: the simulator models how much it reserves, not its segments, so there is no segment map to export (export pytorch, bfc, prealloc or direct)
try 'gpureplay --help'"
run nodir 1 "$RP" "$TRACE" -p pytorch --export-snapshot=/nonexistent-dir/x.pickle
[ "$(wc -l <nodir.err)" = 1 ] && grep -q "^gpureplay: error: .*/nonexistent-dir/x.pickle" nodir.err ||
  fail "nodir: want one error line naming the path: $(cat nodir.err)"
echo old >kept.pickle
run notrace 1 "$RP" missing.zst -p pytorch --export-snapshot=kept.pickle
[ "$(wc -l <notrace.err)" = 1 ] || fail "notrace: want one line: $(cat notrace.err)"
same kept.pickle old
for f in nopol twopol sweep async nodir notrace; do empty "$f.out"; done
[ ! -e x.pickle ] || fail "a refused export wrote x.pickle"

[ "$fails" = 0 ] && echo "PASS" && exit 0
echo "$fails failure(s)" >&2
exit 1
