#!/bin/bash
# overhead_table.py pairs each variant with its reference of the same round: checked on a small
# hand-made results file (two rounds, garbage lines among them).
set -u
out=$(python3 bench/recorder/overhead_table.py bench/recorder/testdata/overhead_results.jsonl \
      bench/recorder/testdata/overhead_calls.txt) || { echo "exit $?"; exit 1; }
fails=0
want() { grep -qF -- "$1" <<< "$out" && echo "ok   $1" || { echo "FAIL $1"; fails=$((fails + 1)); }; }
want "| empty: memory callbacks enabled, returning at once (GPUMEM_DIAG=empty_callbacks) | 480.0 / 500.0 | 490.0 | +105.0 (+100.0, +110.0) |"
want "| full: full recording, default (--callsites=user) | 540.0 | 540.0 | +160.0 (+160.0) |"
want "| subscribed: CUPTI subscribed, no driver callback enabled (GPUMEM_DIAG=subscribe_only) | 2100.0 | 2100.0 | +100.0 (+100.0) |"
want "1014, so 2028 recorded events per step"
want "| +0.650 ms (+0.600, +0.700) | +3.81 % | +321 |"
want "| +0.100 ms (+0.100) | +0.63 % | +33 |"
want "at 20 and 120 steps): 6000, of which 2000 memory calls"
[ $fails == 0 ] || { echo "$out"; exit 1; }
