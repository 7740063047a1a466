#!/bin/bash
# predict_gpu.sh: data for gpurec predict (issue 19) in one call on the GPU machine (~4 min).
# Needs .dist/ built here and carried (gpurec, libgpumem_inject.so, trace_csv, gpureplay, lib/):
#   bazel build //recorder:gpurec //recorder:libgpumem_inject.so //recorder:trace_csv //replay:gpureplay
#   rm -rf .dist && mkdir -p .dist/lib && cp bazel-bin/recorder/{gpurec,libgpumem_inject.so,trace_csv} \
#     bazel-bin/replay/gpureplay .dist/ && cp -L /usr/lib/x86_64-linux-gnu/{libjansson.so.4,libbsd.so.0,libmd.so.0} .dist/lib/
# The job: tests/gpu/predict_job.py, a GPT-2-like training loop (6 x 768, sequence 512, AdamW).
#  - recorded with `gpurec --mode=torch` (callsites from PyTorch's history) at batch 4, 8, 16
#    under the default allocator setting;
#  - run unrecorded at batch 4, 8, 16, 32, 64 under the default and expandable_segments:True,
#    each printing torch.cuda.max_memory_reserved (the truth a prediction is held to).
# Then, on the same machine (CPU only), tests/gpu/predict_table.py predicts 16, 32 and 64 from
# the recordings and writes the table (PREDICTION.md) beside them.
# Output: $OUT/predict_gpu.tar.xz (traces, runs.jsonl, stdout/stderr of each run,
# PREDICTION.md) + $OUT/log.txt + $OUT/PREDICTION.md.
#   run (from the repository root): OUT=... bash tests/gpu/predict_gpu.sh
set -u
OUT=${OUT:-/tmp/predout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/predwork
rm -rf "$W"; mkdir -p "$W/runs" "$OUT"
PY=${PY:-python3}
JOB="$ROOT/tests/gpu/predict_job.py"
exec > >(tee -a "$OUT/log.txt") 2>&1
for f in gpurec libgpumem_inject.so trace_csv gpureplay; do
  [ -e "$D/$f" ] || { echo "predict_gpu.sh: $D/$f is missing: build it and carry .dist/ (see the top of this file)"; exit 1; }
done
echo "== predict_gpu.sh $(date -u) commit $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
$D/gpurec --version | head -3

# run NAME CONF [cmd prefix...]: one run of the job; its GPUMEM_RESULT line tagged into runs.jsonl
run() {
  local name=$1 conf=$2 batch=$3; shift 3
  [ -e "$W/STOP" ] && { echo "  out of time: $name not run"; return; }
  local t0=$(date +%s%N)
  (cd "$W" && timeout 200 env PYTORCH_CUDA_ALLOC_CONF="$conf" "$@" $PY "$JOB" --batch "$batch" \
     > "$W/runs/$name.out" 2> "$W/runs/$name.err")
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local line=$(grep '^GPUMEM_RESULT ' "$W/runs/$name.out" | tail -1 | cut -c15-)
  [ -n "$line" ] || line=null
  echo "{\"run\":\"$name\",\"batch\":$batch,\"conf\":\"$conf\",\"rc\":$rc,\"ms\":$ms,\"result\":$line}" >> "$W/runs.jsonl"
  echo "  $(date +%T) $name rc=$rc ${ms}ms $line"
}

body() {
  echo "== recordings (torch mode, default setting) and the small unrecorded runs, side by side"
  pids=()
  for b in 4 8 16; do
    run rec.b$b "" $b $D/gpurec --mode=torch -o "$W/rec.b$b.zst" -- & pids+=($!)
  done
  for b in 4 8; do
    run real.b$b.default "" $b & pids+=($!)
    run real.b$b.expandable "expandable_segments:True" $b & pids+=($!)
  done
  wait "${pids[@]}"
  echo "== batch 16 and 32, both settings, side by side"
  pids=()
  for b in 16 32; do
    run real.b$b.default "" $b & pids+=($!)
    run real.b$b.expandable "expandable_segments:True" $b & pids+=($!)
  done
  wait "${pids[@]}"
  echo "== batch 64 (about 40 GB each): one at a time"
  run real.b64.default "" 64
  run real.b64.expandable "expandable_segments:True" 64
}
(body) &
bp=$!
( sleep ${BUDGET:-400}; touch "$W/STOP"; pkill -TERM -f 'predict_job.py' ) &
wp=$!
wait $bp
kill $wp 2>/dev/null
echo "== predictions (CPU): tests/gpu/predict_table.py"
$PY "$ROOT/tests/gpu/predict_table.py" --bin "$D" --dir "$W" > "$W/PREDICTION.md" 2> "$W/predict_table.err"
echo "predict_table rc=$?"; cat "$W/predict_table.err" | tail -20
cp "$W/PREDICTION.md" "$OUT/" 2>/dev/null
cat "$W/PREDICTION.md"
ls -la "$W" | head -40
tar -C "$W" -cJf "$OUT/predict_gpu.tar.xz" .
ls -la "$OUT"
echo "== done $(date -u)"
