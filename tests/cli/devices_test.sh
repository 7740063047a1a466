#!/bin/bash
# devices_test.sh: a process with memory on two devices (issue 17, item 1): every device is
# replayed with its own allocator state, the table, the JSON, the results file and the
# recommendation carry the device, and the job's advice names the device that limits it.
# The trace is hand-written (the CSV text form): device 0 holds 3 x 100 MiB, device 1 holds
# 6 x 100 MiB at once, so their lower bounds are 300 and 600 MiB whatever the policy.
# Usage: devices_test.sh GPUANALYZE GPUREPLAY GPUREC
set -u
GA=$(realpath "$1"); RP=$(realpath "$2"); GR=$(realpath "$3")
T=${TEST_TMPDIR:-$(mktemp -d)}/dev
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 3000 "$1")"; }
{
  echo "# gpumem trace, text form 1"
  echo "#capture_mode=requests"
  echo "#pid=9"
  echo "#start_time_ns=1795000000000000000"
  echo "#gpu_total_mem=85899345920"
  echo "#kv.framework.pytorch=2.11.0"
  echo "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context"
  t=100
  for d in 0 1; do
    n=$((3 + 3 * d))
    for i in $(seq 1 $n); do
      echo "$t,alloc,$d,7,$(printf 0x%x $((0x10000000000 * (d + 1) + i * 0x10000000))),104857600,device,0x3,0,0,1"
      t=$((t + 10))
    done
    for i in $(seq 1 $n); do
      echo "$t,free,$d,7,$(printf 0x%x $((0x10000000000 * (d + 1) + i * 0x10000000))),0,device,0x3,0,0,1"
      t=$((t + 10))
    done
  done
} >two.csv
"$GR" import two.csv -o two.zst 2>/dev/null || fail "import rc=$?"
"$RP" two.zst -p pytorch -p direct >t.txt 2>&1 || fail "gpureplay rc=$?"
has t.txt "trace two.zst, device 0 (of 2, each replayed alone)"
has t.txt "trace two.zst, device 1 (of 2, each replayed alone)"
[ "$(grep -c 'lower bound 300.00 MiB' t.txt)" = 1 ] || fail "device 0's bound: $(cat t.txt)"
[ "$(grep -c 'lower bound 600.00 MiB' t.txt)" = 1 ] || fail "device 1's bound: $(cat t.txt)"
"$RP" two.zst -p direct --json >j.json 2>/dev/null || fail "json rc=$?"
grep -q '"lower_bound_bytes":314572800,.*"device":0' j.json || fail "json device 0: $(cat j.json)"
grep -q '"lower_bound_bytes":629145600,.*"device":1' j.json || fail "json device 1: $(cat j.json)"
"$GA" report two.zst --html r.html >r.txt 2>&1 || fail "report rc=$?"
has r.txt "device 0:"
has r.txt "device 1:"
has r.txt "the job: device 1 limits it"
# the tuner (report's default) searches each device alone, as the sweep replays each
"$RP" two.zst --tune >tn.txt 2>&1 || fail "tune rc=$?"
has tn.txt "device 0 (of 2, each tuned alone):"
has tn.txt "device 1 (of 2, each tuned alone):"
[ "$(grep -c '^  *tuned (gpureplay --tune): peak reserved 300.00 MiB' r.txt)" = 1 ] || fail "device 0's tuned line: $(cat r.txt)"
[ "$(grep -c '^  *tuned (gpureplay --tune): peak reserved 600.00 MiB' r.txt)" = 1 ] || fail "device 1's tuned line: $(cat r.txt)"
[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo PASS
