#!/bin/bash
# rmm_perfetto_test.sh: issue 14 item 7. A RAPIDS RMM allocation log (as
# rmm.mr.LoggingResourceAdaptor writes it) imported with `gpurec import`, replayed by gpureplay
# (RMM's grid: direct and async model it), a bad log refused with its line; and gpureplay
# --export-perfetto: the JSON a trace viewer opens, its refusals, and nothing half-written.
# Usage: rmm_perfetto_test.sh GPUREC GPUREPLAY GPUANALYZE
set -u
GR=$(realpath "$1"); RP=$(realpath "$2"); GA=$(realpath "$3")
T=${TEST_TMPDIR:-$(mktemp -d)}/rmm
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 3000 "$1")"; }
same() { [ "$(cat "$1")" = "$2" ] || fail "$1: expected: $2"$'\n'"got: $(cat "$1")"; }

# 8 weights of 64 MiB on the default stream, then 10 steps that each take 4 activations of
# 96 MiB on a second stream (thread 2) and free them in reverse: peak live 896 MiB.
us=0
line() {
  printf '%s,%02d:%02d:%02d.%06d,%s\n' "$1" $((13 + us / 3600000000)) $((us / 60000000 % 60)) \
    $((us / 1000000 % 60)) $((us % 1000000)) "$2"
  us=$((us + 1500))
}
{
  echo "Thread,Time,Action,Pointer,Size,Stream"
  for i in 0 1 2 3 4 5 6 7; do line 140000000000001 "allocate,$(printf 0x%x $((0x7f0000000000 + i * 0x4000000))),67108864,0"; done
  for s in $(seq 1 10); do
    for j in 0 1 2 3; do line 140000000000002 "allocate,$(printf 0x%x $((0x7f1000000000 + j * 0x6000000))),100663296,0x55d0c0a1b2c0"; done
    for j in 3 2 1 0; do line 140000000000002 "free,$(printf 0x%x $((0x7f1000000000 + j * 0x6000000))),100663296,0x55d0c0a1b2c0"; done
  done
} >rmm_log.dev0.csv

"$GR" import rmm_log.dev0.csv -o t.zst >out.txt 2>err.txt; rc=$?
[ $rc = 0 ] || fail "import rc=$rc: $(cat err.txt)"
same out.txt ""
same err.txt "gpurec: rmm_log.dev0.csv: RAPIDS RMM log, 89 lines -> 48 allocations, 40 frees, 0 failed in t.zst (device 0, 2 threads, 2 streams, 0.131 s)
gpurec: note: 8 allocations (512.00 MiB) are never freed in the log: live to the end of the trace
gpurec: note: RMM's own pool resources (pool, arena, binning) are not modelled: \`gpureplay t.zst --policy=direct --policy=async\` replays cuda_memory_resource and cuda_async_memory_resource; --sweep adds what PyTorch's and TensorFlow's allocators would reserve for the same requests
gpurec: note: an RMM log does not say which GPU it was taken on: the replays will assume a size and say so. To give it: \`gpurec import rmm_log.dev0.csv --gpu-memory=SIZE -o t.zst\`"

"$RP" t.zst -p direct -p async >r.txt 2>&1 || fail "gpureplay rc=$?"
has r.txt "trace t.zst: 88 events, 48 allocs, lower bound 896.00 MiB, backend sim"
has r.txt "framework: RAPIDS RMM unknown; the trace holds requests: RAPIDS RMM's allocation log"
grep -qE '^ +[0-9]+ +896\.00 MiB .* direct$' r.txt || fail "direct reserves the live bytes: $(cat r.txt)"
"$RP" t.zst --sweep --list-policies >l.txt 2>&1 || fail "list rc=$?"
same l.txt $'direct\nasync\npytorch\npytorch:expandable_segments:True\nbfc:growth'
# gpuanalyze report takes the log itself (importing it) and advises no RMM setting.
mkdir rep && cp rmm_log.dev0.csv rep/ && (cd rep && GPUREC="$GR" GPUREPLAY="$RP" "$GA" report rmm_log.dev0.csv >r.txt 2>e.txt) ||
  fail "report rc=$?: $(cat rep/e.txt)"
has rep/r.txt "  framework: RAPIDS RMM unknown (an imported allocation log)"
has rep/r.txt "  no setting advised: RMM's pool resources (pool, arena, binning) are not modelled"
# The log itself given to gpureplay: what to do with it.
"$RP" rmm_log.dev0.csv >o.txt 2>e.txt; rc=$?
[ $rc = 1 ] || fail "gpureplay on the log: rc=$rc"
same e.txt "gpureplay: error: 'rmm_log.dev0.csv' is a RAPIDS RMM allocation log (CSV): convert it with \`gpurec import rmm_log.dev0.csv -o rmm_log.dev0.zst\`"

# A bad log: one line naming the line, exit 1, nothing written (an older trace kept).
head -5 rmm_log.dev0.csv >bad.csv
echo "140000000000001,13:00:00.900000,free,0x7fdead000000,64,0" >>bad.csv
cp t.zst keep.zst
"$GR" import bad.csv -o keep.zst >o.txt 2>e.txt; rc=$?
[ $rc = 1 ] || fail "bad log: rc=$rc"
same e.txt "gpurec: error: cannot import 'bad.csv': line 6: free of 0x7fdead000000, which is not allocated (no allocate line before it, or freed already)"
cmp -s t.zst keep.zst || fail "a failed import changed the older trace"

# --export-perfetto: the trace viewer's JSON, named on stderr.
"$RP" t.zst -p direct -p pytorch --export-perfetto=p.json >r.txt 2>e.txt; rc=$?
[ $rc = 0 ] || fail "export rc=$rc: $(cat e.txt)"
has e.txt "gpureplay: wrote p.json ("
has e.txt "): 48 of 48 allocations as slices (12 alive at the peak), "
python3 - p.json <<'PY' || fail "p.json: not the JSON expected"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
names = {e["name"] for e in ev if e["ph"] == "C"}
assert names == {"live bytes", "reserved: direct", "reserved: pytorch"}, names
live = max(e["args"]["bytes"] for e in ev if e["ph"] == "C" and e["name"] == "live bytes")
assert live == 896 << 20, live
x = [e for e in ev if e["ph"] == "X"]
assert len(x) == 48 and all(e["name"].endswith(("RMM thread 140000000000001", "RMM thread 140000000000002")) for e in x)
assert d["otherData"]["allocations"] == 48 and d["otherData"]["alive_at_peak"] == 12
PY
"$RP" t.zst t.zst --export-perfetto=p2.json >o.txt 2>e.txt; rc=$?
[ $rc = 2 ] || fail "two traces: rc=$rc"
same e.txt $'gpureplay: --export-perfetto writes the replay of one trace (without --tune, --explain-oom, --list-policies, --export-snapshot)\ntry \'gpureplay --help\''
"$RP" t.zst --export-perfetto=nodir/p.json >o.txt 2>e.txt; rc=$?
[ $rc = 1 ] || fail "no directory: rc=$rc"
has e.txt "nodir"
[ ! -e nodir/p.json ] && [ ! -e p2.json ] || fail "a refused export left a file"
[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo PASS
