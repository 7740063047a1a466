#!/bin/bash
# tests/gpu/rec_inproc_bench.py without a GPU: a stand-in torch (testdata/mocktorch) whose step
# costs 1 ms + MOCK_HIST_MS with the history on + MOCK_CUPTI_MS with CUPTI's memory callbacks
# enabled (capturing or empty),
# the real injection library on the stand-in libcupti.so and libc10_cuda.so. The bench must switch
# each part as it says (it exits if a switch does nothing) and find the costs back as its paired
# differences; the trace must count every pause as a dropped record.
# args: libgpumem_inject.so libcupti.so(stand-in) fakec10-dir trace_csv
set -u
LIB=$PWD/$1 CUPTI=$PWD/$2 FAKE=$PWD/$(dirname "$3") CSV=$4
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
T=${TEST_TMPDIR:-/tmp}/inprocbench.$$
mkdir -p "$T"
asan=$(ldd "$LIB" 2>/dev/null | awk '/libasan/ { print $3 }')
[ -n "$asan" ] && export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
out=$(env -u GPUMEM_SELFTEST GPUMEM_MODE=auto GPUMEM_TORCH_STACKS=none GPUMEM_DEVMEM=0 GPUMEM_OUT="$T/b.zst" \
      CUDA_INJECTION64_PATH="$LIB" GPUMEM_CUPTI="$CUPTI" MOCK_FAKEC10="$FAKE" MOCK_HIST_MS=2 MOCK_CUPTI_MS=4 \
      PYTHONPATH="$PWD/tests/gpu/testdata/mocktorch" \
      $PY tests/gpu/rec_inproc_bench.py --cycles 16 --warmup 1 --blocks 3 --block-iters 20 --steady 2 2> "$T/err")
rc=$?
res=$(sed -n 's/^RESULT //p' <<< "$out")
get() { $PY -c 'import json, sys; r = json.loads(sys.argv[1]); print(eval(sys.argv[2], {"r": r}, r))' "$res" "$1"; }
check "the bench ran (rc $rc)" '[[ $rc == 0 && -n $res ]]'
[ -n "$res" ] || { cat "$T/err"; exit 1; }
check "it started in the default: hooked, CUPTI on, history on" '[[ $(get "hooked_by_sitecustomize and cupti_on_at_start and history_on_at_start") == True ]]'
check "history found back: 2 ms ($(get paired_ms_hist))" '[[ $(get "1.6 < paired_ms_hist < 2.6") == True ]]'
check "CUPTI found back: 4 ms ($(get paired_ms_cupti)), all of it dispatch ($(get paired_ms_dispatch), capture $(get paired_ms_capture))" '[[ $(get "3.6 < paired_ms_cupti < 4.6 and 3.6 < paired_ms_dispatch < 4.6 and -0.5 < paired_ms_capture < 0.5") == True ]]'
check "both in hist_cupti and default against none ($(get paired_ms_hist_cupti), $(get paired_ms_default))" '[[ $(get "5.5 < paired_ms_hist_cupti < 6.7 and 5.5 < paired_ms_default < 6.7") == True ]]'
check "the hook costs the mock nothing ($(get paired_ms_hook))" '[[ $(get "-0.5 < paired_ms_hook < 0.5") == True ]]'
check "per allocation: 1000 per step, 2 ms of history = 2000 ns" '[[ $(get "allocs_per_step == 1000 and 1600 < ns_per_alloc_hist < 2600") == True ]]'
check "the tight loop measured every state" '[[ $(get "all(\"tight_ns_\" + s in r for s in (\"none\", \"hist\", \"hist_dispatch\", \"hist_cupti\", \"default\"))") == True ]]'
# every cycle (16 + 1 warm-up, 3 + 2 of the tight loop) leaves the capturing mode at least once
check "the trace counts each of the bench's $(get cupti_pauses) pauses as a dropped record" '[[ $(get "cupti_pauses >= 22") == True && $("$CSV" "$T"/b*.zst | grep "^#stats") == *" dropped=$(get cupti_pauses) "* ]]'
echo "$("$CSV" "$T"/b*.zst | grep "^#stats")"
rm -rf "$T"
[ $fails == 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
