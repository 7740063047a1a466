#!/bin/bash
# exact_gpu.sh: issue 11's GPU measurements in one device call (<= 8 minutes on an H100).
# Needs .dist/ built here and carried (like tests/gpu/jax_corpus.sh): gpurec,
# libgpumem_inject.so (+ lib/ if the build has one), trace_csv. python3 with torch 2.11.
#   1. the record_stream job family (traces/workloads/stream_handoff.py), unrecorded, REPS
#      (default 5) runs of each setting (default, expandable_segments:True) x timing (ontime,
#      late: a long side-stream kernel, sync: side stream synchronised before `del a`), one run
#      at a time and interleaved (so drift hits every cell alike), each printing torch's
#      max_memory_reserved (GPUMEM_RESULT);
#   2. the same family recorded once per setting x timing with `gpurec --mode=torch` (the
#      recorded history is what gpureplay's range is computed from), and once per timing in
#      requests mode;
#   3. the async pool: ASYNC_REPS (default 3) unrecorded runs of each traces/workloads/*.py
#      under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (max_memory_reserved = the
#      pool's high water), three of a script at a time, and train_cnn recorded in requests
#      mode (the other scripts' requests traces are in traces/recorded/).
# Output: $OUT/exact_gpu.tar.xz (traces, each run's stdout/stderr, results.jsonl) and log.txt.
# results.jsonl: one line per run {"job","variant","rep","rc","ms","env","result"}.
#   run (repository root): bash tests/gpu/exact_gpu.sh
# Afterwards, here (no GPU): the family's ranges against its real runs, and the async rows:
#   tar -C /tmp/exact -xJf exact_gpu.tar.xz
#   cp /tmp/exact/stream_handoff.*.torch.zst traces/recorded/stream_events/
#   grep '"job":"stream_handoff"' /tmp/exact/results.jsonl >> traces/recorded/stream_events/range_runs.jsonl
#   bazel run //tests/tables:range_table -- $PWD/traces/recorded/stream_events   (-> its PREDICTION.md)
#   grep '"variant":"async"' /tmp/exact/results.jsonl >> traces/recorded/range_runs.jsonl
#   bazel run //tests/tables:range_table -- $PWD/traces/recorded                 (-> PREDICTION.md's async table)
# (train_cnn's async rows need /tmp/exact/train_cnn.requests.zst in traces/recorded/ and in its
# BUILD's `requests` filegroup.)
set -u
OUT=${OUT:-/tmp/exactout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/exactwork
rm -rf "$W"; mkdir -p "$W/runs" "$OUT"
PY=${PY:-python3}
REPS=${REPS:-5}
ASYNC_REPS=${ASYNC_REPS:-3}
BUDGET=${BUDGET:-400}   # seconds of runs; packing follows (device call: timeout_s 480)
WL=$ROOT/traces/workloads
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== exact_gpu.sh $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
$D/gpurec --version | head -2
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }

# run JOB VARIANT REP [env...] -- cmd...: one run, output in runs/, its GPUMEM_RESULT line in
# results.jsonl. Skipped (and said) once the budget is spent.
run() {
  local job=$1 var=$2 rep=$3; shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  if [ "$(left)" -le 0 ]; then echo "  out of time: $job $var $rep not run"; return; fi
  local t0=$(date +%s%N) f="$W/runs/$job.$var.$rep"
  ( cd "$WL" && timeout 90 env "${envs[@]}" "$@" > "$f.out" 2> "$f.err" )
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local line=$(grep '^GPUMEM_RESULT ' "$f.out" | tail -1 | cut -c15-)
  [ -n "$line" ] || line=null
  echo "{\"job\":\"$job\",\"variant\":\"$var\",\"rep\":$rep,\"rc\":$rc,\"ms\":$ms,\"env\":\"${envs[*]}\",\"result\":$line}" >> "$W/results.jsonl"
  local res=$(echo "$line" | $PY -c 'import json,sys; r=json.loads(sys.stdin.read() or "null"); print(r and r["max_memory_reserved"])')
  echo "  $(date +%T) $job $var #$rep rc=$rc ${ms}ms max_memory_reserved=$res"
}

conf_of() { [ "$1" = expandable ] && echo "expandable_segments:True" || echo ""; }

echo "== 1. stream_handoff unrecorded: $REPS x {default,expandable} x {ontime,late,sync}, one at a time"
for rep in $(seq 1 "$REPS"); do
  for setting in default expandable; do
    for timing in ontime late sync; do
      run stream_handoff "$setting.$timing" "$rep" PYTORCH_CUDA_ALLOC_CONF="$(conf_of $setting)" \
          GPUMEM_TIMING=$timing -- $PY stream_handoff.py
    done
  done
done

echo "== 2. stream_handoff recorded: torch mode per setting x timing, requests mode per timing"
for setting in default expandable; do
  for timing in ontime late sync; do
    run stream_handoff "rec.torch.$setting.$timing" 1 PYTORCH_CUDA_ALLOC_CONF="$(conf_of $setting)" \
        GPUMEM_TIMING=$timing -- $D/gpurec -o "$W/stream_handoff.$setting.$timing.zst" --mode=torch \
        -- $PY stream_handoff.py
  done
done
for timing in ontime late sync; do
  run stream_handoff "rec.requests.$timing" 1 GPUMEM_TIMING=$timing -- \
      $D/gpurec -o "$W/stream_handoff.$timing.requests.zst" -- $PY stream_handoff.py
done

echo "== 3. async pool: $ASYNC_REPS runs of each workload under backend:cudaMallocAsync"
for py in train_amp infer_varlen train_ckpt train_cnn two_streams; do
  pids=()
  for rep in $(seq 1 "$ASYNC_REPS"); do
    run "$py" async "$rep" PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- $PY "$py.py" & pids+=($!)
  done
  wait "${pids[@]}"   # not a bare wait: that would wait for the tee above too
done
run train_cnn rec.requests 1 X=1 -- $D/gpurec -o "$W/train_cnn.requests.zst" -- $PY train_cnn.py

echo "== CSV of every trace"
for f in "$W"/*.zst; do [ -e "$f" ] && { $D/trace_csv "$f" > "$f.csv" 2>/dev/null || echo "csv failed: $f"; }; done
ls -la "$W" | head -60
tar -C "$W" -cJf "$OUT/exact_gpu.tar.xz" .
ls -la "$OUT"
echo "== done $(date -u), $(( $(date +%s) - T0 )) s"
