#!/bin/bash
# partial_test.sh: a trace whose PyTorch history ring filled (its first 8 GiB fell out) says so
# in the first lines of gpurec import, gpuanalyze info, gpureplay (text and --json),
# gpuanalyze report (text and HTML) and recommend, with the window, what was alive at its start
# and "lower bound"; the same job recorded from its start prints none of it (issue 24 item 2).
# Usage: partial_test.sh GPUANALYZE GPUREC GPUREPLAY MKPICKLE
set -u
GA=$(realpath "$1"); GR=$(realpath "$2"); RP=$(realpath "$3"); MK=$(realpath "$4")
T=${TEST_TMPDIR:-$(mktemp -d)}/partial
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# first N FILE WANT: one of FILE's first N lines has WANT
first() { head -n "$1" "$2" | grep -qF -- "$3" || fail "$2: its first $1 lines lack '$3': $(head -n 6 "$2")"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "$1 has '$2'"; }
"$MK" . || { echo "FAIL: partial_mkpickle" >&2; exit 1; }
# gpureplay is found beside gpuanalyze by the one-step report: give it one
mkdir -p bin && ln -sf "$GA" bin/gpuanalyze && ln -sf "$GR" bin/gpurec && ln -sf "$RP" bin/gpureplay

W="PARTIAL trace: it covers the run from t=0.000 s (event 3) on; alive at its start: 1.00 GiB in 1 request (reserved 10.00 GiB)"
"$GR" import ring.pickle --gpu-memory=80GiB -o ring.zst 2>imp.err || fail "gpurec import ring: $(<imp.err)"
first 2 imp.err "gpurec: ring.zst: $W"
first 2 imp.err "a peak before it cannot be seen, so every figure is a lower bound"
"$GA" info ring.zst >info.out 2>&1 || fail "info: $(<info.out)"
first 2 info.out "coverage:       $W"
grep -qF "integrity:      file complete, trace PARTIAL (see coverage)" info.out || fail "info integrity: $(<info.out)"
"$RP" ring.zst >rp.out 2>&1 || fail "gpureplay: $(<rp.out)"
first 1 rp.out "$W"
"$RP" ring.zst --json >rp.json 2>&1 || fail "gpureplay --json: $(<rp.json)"
tr -d ' ' <rp.json | grep -qF "\"coverage\":{\"complete\":false,\"why\":\"PyTorch'shistorystartsaftertherundid" ||
  fail "json: $(head -c 600 rp.json)"
grep -qF '"from_event":3' rp.json || grep -qF '"from_event": 3' rp.json || fail "json window: $(head -c 600 rp.json)"
grep -qF '"lower_bound":true' rp.json || grep -qF '"lower_bound": true' rp.json || fail "json lower_bound"
PATH="$T/bin:$PATH" "$GA" report ring.zst --db ring.db --html ring.html >rep.out 2>rep.err || fail "report: $(<rep.err)"
first 2 rep.out "  $W"
grep -q 'fits: a [0-9]* GiB GPU' rep.out && fail "report says 'fits' without a lower bound: $(<rep.out)"
grep -qF "fits: no GPU smaller than 16 GiB (a lower bound: the trace is partial; it needs at least 1.00 GiB on the device)" rep.out ||
  fail "report: no lower-bound fits line: $(<rep.out)"
"$RP" ring.zst --tune >tune.out 2>&1 || fail "gpureplay --tune: $(<tune.out)"
first 1 tune.out "$W"
grep -qF "capacity: the job needs at least 1.00 GiB with the default; under" tune.out || fail "tune capacity: $(grep capacity tune.out)"
grep -qF "<p class=\"partial\" id=\"coverage\"><b>PARTIAL trace</b>: it covers the run from t=0.000 s (event 3) on" ring.html ||
  fail "html banner: $(grep -o 'id=\"coverage\".\{0,200\}' ring.html)"
grep -qF "The job needs at least" ring.html || fail "html: no 'needs at least' card"
"$GA" recommend --db ring.db >recm.out 2>&1 || fail "recommend: $(<recm.out)"
first 2 recm.out "  $W"

# The same job from its start: complete, nothing said.
"$GR" import full.pickle --gpu-memory=80GiB -o full.zst 2>imp2.err || fail "gpurec import full: $(<imp2.err)"
"$GA" info full.zst >info2.out 2>&1 || fail "info full"
"$RP" full.zst >rp2.out 2>&1 || fail "gpureplay full"
"$RP" full.zst --json >rp2.json 2>&1 || fail "gpureplay --json full"
PATH="$T/bin:$PATH" "$GA" report full.zst --db full.db --html full.html >rep2.out 2>rep2.err || fail "report full: $(<rep2.err)"
for f in imp2.err info2.out rp2.out rep2.out full.html; do lacks "$f" "PARTIAL"; done
grep -qF "integrity:      complete," info2.out || fail "info full integrity: $(<info2.out)"
grep -qF '"complete":true' rp2.json || grep -qF '"complete": true' rp2.json || fail "json full: $(head -c 300 rp2.json)"
grep -qF "The job needs at least" full.html && fail "html full says 'at least'"
grep -qF "fits: a 16 GiB GPU" rep2.out || fail "full report: $(<rep2.out)"
# The complete trace shows the real peak (the 8 GiB the ring dropped), the partial one only its tail's.
grep -qF "peak live:      8.00 GiB" info2.out || fail "full peak: $(grep 'peak live' info2.out)"
grep -qF "peak live:      1.00 GiB" info.out || fail "partial peak: $(grep 'peak live' info.out)"

[ "$fails" = 0 ] && echo PASS || { echo "$fails failure(s)" >&2; exit 1; }
