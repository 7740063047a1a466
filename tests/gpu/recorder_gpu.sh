#!/bin/bash
# recorder_gpu.sh: every GPU check of the recorder (issue 3) in one call on the GPU machine.
# Needs the binaries built here and carried in .dist/ (see tests/gpu/RESULTS.md "How"):
#   .dist/gpurec .dist/libgpumem_inject.so .dist/trace_csv .dist/alloc_sequence
# Writes under $OUT: log.txt, checks.json, bench.jsonl, recorded.tar.xz (traces + CSV summaries).
#   run (from the repository root): bash tests/gpu/recorder_gpu.sh [STAGES]
#   STAGES: comma list of seq,modes,kill,workloads,peaks,bench,cbcost,ddp (default: all but ddp, which
#   needs two GPUs: kind nvidia-h200-x2)
set -u
OUT=${OUT:-/tmp/recout}
WHAT=${1:-seq,modes,kill,workloads,peaks,bench}
has() { [[ ",$WHAT," == *",$1,"* ]]; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
W=/tmp/recwork
rm -rf "$W"; mkdir -p "$W"/rec "$W"/csv "$OUT"
PY=python3
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== recorder_gpu.sh $WHAT  $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
$D/gpurec --version
CHK="$PY $ROOT/tests/gpu/recorder_check.py"
csv() { $D/trace_csv "$1" > "$W/csv/$(basename "$1").csv" 2> "$W/csv/$(basename "$1").err"; echo "csv rc=$? $1"; }

if has seq; then
  echo "== 1. alloc_sequence (CUDA C, known events)"
  cd "$W"
  $D/gpurec -o "$W/rec/alloc_sequence.zst" --mode=native -- $D/alloc_sequence > "$W/alloc_sequence.out"; echo "rc=$?"
  cat "$W/alloc_sequence.out"
  csv "$W/rec/alloc_sequence.zst"
  $CHK sequence "$W/alloc_sequence.out" "$W/csv/alloc_sequence.zst.csv" > "$OUT/seq_check.json"; echo "sequence check rc=$?"
  cat "$OUT/seq_check.json"
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
  echo "== 5. overhead benchmark (sequential, 2 rounds, 200 timed steps each)"
  B="$ROOT/bench/recorder/rec_overhead.py --steps 200 --warmup 20"
  for round in 1 2; do
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync $PY $B | sed "s/^RESULT /RESULT {\"variant\":\"requests_base\",\"round\":$round} /"
    $D/gpurec -q -o "$W/rec/bench_requests_$round.zst" -- $PY $B | sed "s/^RESULT /RESULT {\"variant\":\"requests_gpurec\",\"round\":$round} /"
    env -u PYTORCH_CUDA_ALLOC_CONF $PY $B | sed "s/^RESULT /RESULT {\"variant\":\"native_base\",\"round\":$round} /"
    $D/gpurec -q --mode=native -o "$W/rec/bench_native_$round.zst" -- $PY $B | sed "s/^RESULT /RESULT {\"variant\":\"native_gpurec\",\"round\":$round} /"
    env -u PYTORCH_CUDA_ALLOC_CONF $PY $B --history nostacks | sed "s/^RESULT /RESULT {\"variant\":\"history_nostacks\",\"round\":$round} /"
    env -u PYTORCH_CUDA_ALLOC_CONF $PY $B --history python | sed "s/^RESULT /RESULT {\"variant\":\"history_python\",\"round\":$round} /"
  done | tee "$OUT/bench.jsonl"
  for f in "$W"/rec/bench_*.zst; do csv "$f"; tail -1 "$W/csv/$(basename "$f").csv"; done
  echo "== 5b. size: PyTorch's snapshot vs gpurec's trace of the same 22-step loop"
  B0="$ROOT/bench/recorder/rec_overhead.py --steps 20 --warmup 2"
  env -u PYTORCH_CUDA_ALLOC_CONF $PY $B0 --history python --snapshot $W/hist_python.pickle | sed "s/^RESULT /RESULT {\"variant\":\"snapshot_size_python\"} /" | tee -a "$OUT/bench.jsonl"
  env -u PYTORCH_CUDA_ALLOC_CONF $PY $B0 --history nostacks --snapshot $W/hist_nostacks.pickle | sed "s/^RESULT /RESULT {\"variant\":\"snapshot_size_nostacks\"} /" | tee -a "$OUT/bench.jsonl"
  $D/gpurec -o "$W/rec/size_requests.zst" -- $PY $B0
  ls -l "$W"/rec/bench_*.zst "$W"/rec/size_*.zst "$W"/*.pickle
  rm -f "$W"/*.pickle "$W"/rec/bench_*.zst
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
