#!/bin/bash
# recorder_gpu.sh: every GPU check of the recorder (issue 3) in one call on the GPU machine.
# Needs the binaries built here and carried in .dist/ (see tests/gpu/RESULTS.md "How"):
#   .dist/gpurec .dist/libgpumem_inject.so .dist/trace_csv .dist/alloc_sequence
# Writes under $OUT: log.txt, checks.json, bench.jsonl, recorded.tar.xz (traces + CSV summaries).
#   run (from the repository root): bash tests/gpu/recorder_gpu.sh [STAGES]
#   STAGES: comma list of seq,modes,capture,kill,workloads,peaks,bench,churn,size,cbcost,ddp,steps
#   (default: all but ddp, which needs two GPUs: kind nvidia-h200-x2, and steps, the ~4-minute
#   step-time benchmark of two loops with every variant: bench/recorder/rec_steps_run.py)
#   seq and capture check the default callback capture against the activity capture
#   (--capture=activity); bench measures both against no recorder and torch's memory history.
set -u
OUT=${OUT:-/tmp/recout}
WHAT=${1:-seq,modes,capture,kill,workloads,peaks,bench,churn,size}
has() { [[ ",$WHAT," == *",$1,"* ]]; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
W=/tmp/recwork
rm -rf "$W"; mkdir -p "$W"/rec "$W"/csv "$OUT"
PY=${PY:-python3}
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== recorder_gpu.sh $WHAT  $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
$D/gpurec --version
CHK="$PY $ROOT/tests/gpu/recorder_check.py"
tag() { sed "s/^RESULT /RESULT {\"variant\":\"$1\",\"round\":${round:-0}} /"; }
csv() { $D/trace_csv "$1" > "$W/csv/$(basename "$1").csv" 2> "$W/csv/$(basename "$1").err"; echo "csv rc=$? $1"; }

if has seq; then
  cd "$W"
  for cap in callbacks activity; do
    echo "== 1. alloc_sequence (CUDA C, known events), --capture=$cap"
    $D/gpurec -o "$W/rec/alloc_sequence.$cap.zst" --mode=native --capture=$cap -- $D/alloc_sequence > "$W/alloc_sequence.$cap.out"; echo "rc=$?"
    cat "$W/alloc_sequence.$cap.out"
    csv "$W/rec/alloc_sequence.$cap.zst"
    $CHK sequence "$W/alloc_sequence.$cap.out" "$W/csv/alloc_sequence.$cap.zst.csv" > "$OUT/seq_check.$cap.json"; echo "sequence check ($cap) rc=$?"
    cat "$OUT/seq_check.$cap.json"
  done
  echo "== 1b. no CUPTI: warning, program runs on"
  GPUMEM_CUPTI=/nonexistent $D/gpurec -o "$W/rec/nocupti.zst" -- $D/alloc_sequence > /dev/null; echo "rc=$?"
fi
if has modes; then
  echo "== 2. PyTorch loop in both modes + torch mode"
  for m in requests native torch; do
    $D/gpurec -o "$W/rec/loop_$m.zst" --mode=$m -- $PY "$ROOT/bench/recorder/rec_overhead.py" --steps 20 --warmup 2; echo "mode $m rc=$?"
  done
  for f in "$W"/rec/loop_*.zst; do csv "$f"; $CHK csv "$W/csv/$(basename "$f").csv" | cut -c1-600; done

fi
if has capture; then
  echo "== 2b. the same loop recorded by the callback and the activity capture: identical requests"
  L="$ROOT/bench/recorder/rec_overhead.py --steps 20 --warmup 2"
  for m in ${CAPTURE_MODES:-requests native}; do
    for cap in callbacks activity; do
      $D/gpurec -q -o "$W/rec/cap_${m}_$cap.zst" --mode=$m --capture=$cap -- $PY $L > /dev/null; echo "mode $m capture $cap rc=$?"
      csv "$W/rec/cap_${m}_$cap.zst"; $CHK csv "$W/csv/cap_${m}_$cap.zst.csv" | cut -c1-700
    done
    $CHK same "$W/csv/cap_${m}_callbacks.zst.csv" "$W/csv/cap_${m}_activity.zst.csv" | tee "$OUT/same_$m.json" | cut -c1-1500; echo "same ($m) rc=${PIPESTATUS[0]}"
    rm -f "$W"/csv/cap_${m}_*.csv
  done
fi
if has kill; then
  echo "== 3. SIGKILL mid-run -> readable truncated trace; SIGTERM -> complete trace"
  $D/gpurec -o "$W/rec/killed.zst" -- $PY "$ROOT/bench/recorder/rec_overhead.py" --steps 100000 &
  GP=$!; sleep 12; pkill -KILL -P $GP python3 || true; wait $GP; echo "gpurec rc=$? (137 expected)"
  csv "$W/rec/killed.zst"; tail -1 "$W/csv/killed.zst.csv"
  $D/gpurec -o "$W/rec/termed.zst" -- $PY "$ROOT/bench/recorder/rec_overhead.py" --steps 100000 &
  GP=$!; sleep 12; kill -TERM $GP; wait $GP; echo "gpurec rc=$? (143 expected)"
  csv "$W/rec/termed.zst"; tail -1 "$W/csv/termed.zst.csv"
fi

if has workloads; then
  echo "== 4. real workloads, requests mode"
  cd "$ROOT/traces/workloads"
  for wl in train_amp infer_varlen train_ckpt two_streams; do
    $D/gpurec -o "$W/rec/$wl.requests.zst" -- $PY $wl.py 2>&1 | tail -4
    csv "$W/rec/$wl.requests.zst"; $CHK csv "$W/csv/$wl.requests.zst.csv" | cut -c1-400
  done
  cd "$ROOT"
fi
if has peaks; then
  cd "$ROOT/traces/workloads"
  echo "== 4b. the same workloads without gpurec: default and expandable_segments:True"
  for wl in train_amp infer_varlen train_ckpt two_streams; do
    (env -u PYTORCH_CUDA_ALLOC_CONF $PY $wl.py | grep GPUMEM_RESULT | sed "s/^/$wl default /") & P1=$!
    (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $PY $wl.py | grep GPUMEM_RESULT | sed "s/^/$wl expandable /") & P2=$!
    wait $P1 $P2   # never a bare wait: it would wait for the tee above
  done
  cd "$ROOT"
fi

if has bench; then
  echo "== 5. overhead benchmark (sequential, 3 rounds, 200 timed steps each, every variant a fresh process)"
  B="$ROOT/bench/recorder/rec_overhead.py --steps 200 --warmup 20"
  for round in 1 2 3; do
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync $PY $B | tag requests_base
    $D/gpurec -q -o "$W/rec/bench_callbacks_$round.zst" -- $PY $B | tag requests_gpurec_callbacks
    $D/gpurec -q --capture=activity -o "$W/rec/bench_activity_$round.zst" -- $PY $B | tag requests_gpurec_activity
    GPUMEM_DIAG=empty_callbacks $D/gpurec -q -o "$W/rec/bench_empty_$round.zst" -- $PY $B | tag requests_cupti_empty_callbacks
    env -u PYTORCH_CUDA_ALLOC_CONF $PY $B | tag native_base
    $D/gpurec -q --mode=native -o "$W/rec/bench_native_$round.zst" -- $PY $B | tag native_gpurec_callbacks
    env -u PYTORCH_CUDA_ALLOC_CONF $PY $B --history nostacks | tag history_nostacks
    env -u PYTORCH_CUDA_ALLOC_CONF $PY $B --history python | tag history_python
  done | tee "$OUT/bench.jsonl"
  for f in "$W"/rec/bench_*_1.zst; do csv "$f"; tail -1 "$W/csv/$(basename "$f").csv"; $CHK csv "$W/csv/$(basename "$f").csv" | cut -c1-500; done
  ls -l "$W"/rec/bench_*.zst
  rm -f "$W"/rec/bench_*.zst "$W"/csv/bench_*.csv
fi
if has steps; then
  echo "== 5d. step time, host-bound MLP loop and GPU-bound LM loop; 6 variants x 3 rounds, pinned to CPUs 2-5"
  $PY "$ROOT/bench/recorder/rec_steps_run.py" --python "$(command -v $PY)" --gpurec $D/gpurec \
    --trace-csv $D/trace_csv --out "$OUT" --work "$W/steps" --rounds ${STEPS_ROUNDS:-3} \
    --cpus ${STEPS_CPUS:-2-5} --budget-s ${STEPS_BUDGET_S:-240}
  echo "steps rc=$?"
fi
if has churn; then
  echo "== 5c. ns per event without a framework: alloc_churn (cudaMallocAsync/cudaFreeAsync, 32 live)"
  for round in 1 2; do
    $D/alloc_churn | tag churn_base
    $D/gpurec -q --mode=native -o "$W/churn_cb.zst" -- $D/alloc_churn | tag churn_gpurec_callbacks
    $D/gpurec -q --mode=native --capture=activity -o "$W/churn_act.zst" -- $D/alloc_churn | tag churn_gpurec_activity
    GPUMEM_DIAG=empty_callbacks $D/gpurec -q --mode=native -o "$W/churn_empty.zst" -- $D/alloc_churn | tag churn_cupti_empty_callbacks
  done | tee "$OUT/churn.jsonl"
  for f in "$W"/churn_cb.zst "$W"/churn_act.zst; do $D/trace_csv "$f" 2>/dev/null | tail -1; done
  rm -f "$W"/churn_*.zst
fi
if has size; then
  echo "== 5b. size: PyTorch's snapshot vs gpurec's trace of the same 22-step loop"
  B0="$ROOT/bench/recorder/rec_overhead.py --steps 20 --warmup 2"
  env -u PYTORCH_CUDA_ALLOC_CONF $PY $B0 --history python --snapshot $W/hist_python.pickle | sed "s/^RESULT /RESULT {\"variant\":\"snapshot_size_python\"} /" | tee -a "$OUT/bench.jsonl"
  env -u PYTORCH_CUDA_ALLOC_CONF $PY $B0 --history nostacks --snapshot $W/hist_nostacks.pickle | sed "s/^RESULT /RESULT {\"variant\":\"snapshot_size_nostacks\"} /" | tee -a "$OUT/bench.jsonl"
  $D/gpurec -o "$W/rec/size_requests.zst" -- $PY $B0
  ls -l "$W"/rec/size_*.zst "$W"/*.pickle
  rm -f "$W"/*.pickle
fi

if has cbcost; then
  echo "== 5c. where gpurec's cost is: activity records only vs records + API callbacks"
  B="$ROOT/bench/recorder/rec_overhead.py --steps 200 --warmup 20"
  for round in 1 2; do
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync $PY $B | sed "s/^RESULT /RESULT {\"variant\":\"requests_base\",\"round\":$round} /"
    $D/gpurec -q -o "$W/cb_on.zst" -- $PY $B | sed "s/^RESULT /RESULT {\"variant\":\"requests_gpurec\",\"round\":$round} /"
    GPUMEM_CALLBACKS=0 $D/gpurec -q -o "$W/cb_off.zst" -- $PY $B | sed "s/^RESULT /RESULT {\"variant\":\"requests_gpurec_nocallbacks\",\"round\":$round} /"
  done | tee "$OUT/bench_cb.jsonl"
  rm -f "$W"/cb_*.zst
fi
if has ddp; then
  echo "== 6. torchrun --nproc_per_node=2: one trace per rank"
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  cd "$W"
  $D/gpurec -o "$W/rec/ddp.zst" -- torchrun --nproc_per_node=2 "$ROOT/tests/gpu/ddp_train.py"; echo "rc=$?"
  for f in "$W"/rec/ddp*.zst; do csv "$f"; $CHK csv "$W/csv/$(basename "$f").csv" | cut -c1-700; done
  cd "$ROOT"
fi

echo "== pack"
cd "$W" && tar -cJf "$OUT/recorded.tar.xz" rec csv *.out 2>/dev/null; ls -l "$OUT"
echo "== done $(date -u)"
