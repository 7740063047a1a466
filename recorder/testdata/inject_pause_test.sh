#!/bin/bash
# gpumem_bench_cupti (rec_pause.c) end to end without a GPU: a stand-in libcupti.so keeps the
# callbacks per id and plays the driver; the injection library runs its real callback capture on
# it. Pausing (mode 0) must disable exactly the capture's driver callbacks (not the resource
# ones), lose the allocation made meanwhile, count the pause as a dropped record in the trace and
# say so once; resuming must record again; emptying (mode 2) keeps the callbacks but records
# nothing; where there is no callback capture there is nothing to pause.
set -u
LIB=$PWD/recorder/libgpumem_inject.so
FAKE=$PWD/recorder/testdata/fakecupti/libcupti.so
CSV=recorder/trace_csv
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
T=${TEST_TMPDIR:-/tmp}/injpause.$$
mkdir -p "$T"
asan=$(ldd "$LIB" 2>/dev/null | awk '/libasan/ { print $3 }')
[ -n "$asan" ] && export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
run() { # NAME EXTRA_PAUSES [env...] -> $out, $err, $csv
  local name=$1 extra=$2; shift 2
  rm -f "$T"/$name*.zst
  out=$(env -u GPUMEM_SELFTEST GPUMEM_DEVMEM=0 GPUMEM_CUPTI="$FAKE" GPUMEM_OUT="$T/$name.zst" "$@" \
        $PY recorder/testdata/inject_pause.py "$LIB" "$FAKE" "$extra" 2> "$T/err")
  err=$(cat "$T/err")
  csv=$("$CSV" "$T"/$name*.zst 2>&1)
}
run p 0
ncb=$(sed -n 's/^enabled \([0-9]*\) .*/\1/p' <<< "$out")
nres=$(sed -n 's/^enabled [0-9]* \([0-9]*\)/\1/p' <<< "$out")
check "before InitializeInjection: nothing to pause (-1)" '[[ $(grep ^before <<< "$out") == "before -1" ]]'
check "capture on: $ncb driver callbacks, $nres resource ones, the allocation seen" '[[ $ncb -gt 10 && $nres -ge 2 && $(grep ^alloc1 <<< "$out") == "alloc1 1" ]]'
check "pause: switched, then nothing left to switch" '[[ $(grep "^pause " <<< "$out") == "pause 1 again 0" ]]'
check "paused: no driver callback, the resource ones kept, the allocation unseen" '[[ $(grep "^paused enabled" <<< "$out") == "paused enabled 0 $nres" && $(grep ^alloc2 <<< "$out") == "alloc2 0" ]]'
check "resume: all back on, then nothing left to switch, the allocation seen" '[[ $(grep "^resume " <<< "$out") == "resume 1 again 0" && $(grep "^resumed enabled" <<< "$out") == "resumed enabled $ncb $nres" && $(grep ^alloc3 <<< "$out") == "alloc3 1" ]]'
check "said once on stderr" '[[ $err == "[gpurec] capture paused by gpumem_bench_cupti (benchmarks only): the driver calls made while paused are not in the trace; each pause counts as one record dropped" ]]'
check "empty (mode 2): switched, callbacks kept, the allocation dispatched; a mode 3 refused" '[[ $(grep "^empty [-0-9]" <<< "$out") == "empty 1 again 0 bad -1" && $(grep "^empty enabled" <<< "$out") == "empty enabled $ncb $nres" && $(grep ^alloc4 <<< "$out") == "alloc4 1" && $(grep "^capture" <<< "$out") == "capture 1" && $(grep ^alloc5 <<< "$out") == "alloc5 1" ]]'
allocs=$(awk -F, '$2 == "alloc" { print $5 "," $6 }' <<< "$csv" | tr '\n' ' ')
check "trace: the allocations made while capturing, not those paused or emptied" '[[ $allocs == "0x7f0000001000,4096 0x7f0000003000,12288 0x7f0000005000,20480 " ]]'
check "trace: the pause and the emptying counted as dropped records" '[[ $(grep "^#stats" <<< "$csv") == *" dropped=2 "* ]]'
echo "stats: $(grep "^#stats" <<< "$csv")"
run q 4
check "six pauses: six dropped records" '[[ $(grep "^#stats" <<< "$csv") == *" dropped=6 "* && $(grep -c "capture paused" <<< "$err") == 1 ]]'
run a 0 GPUMEM_CAPTURE=activity
check "activity capture: nothing to pause (-1), nothing dropped" '[[ $(grep "^pause " <<< "$out") == "pause -1 again -1" && $(grep "^resume " <<< "$out") == "resume -1 again -1" && $(grep "^empty [-0-9]" <<< "$out") == "empty -1 again -1 bad -1" && -z $err ]]'
run s 0 GPUMEM_SELFTEST=2
check "self-test: nothing to pause (-1)" '[[ $(grep "^pause " <<< "$out") == "pause -1 again -1" && -z $err ]]'
rm -rf "$T"
[ $fails == 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
