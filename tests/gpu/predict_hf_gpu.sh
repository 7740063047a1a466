#!/bin/bash
# predict_hf_gpu.sh: issue 26's corpus jobs (tests/gpu/predict_hf.py) in one call on the GPU
# machine: each job recorded by plain `gpurec` (default mode) at three values, run as users
# run it (`python3 predict_hf.py hf_batch 8 out/rb8`: the value twice in the command line),
# and run unrecorded at 2x and 4x the largest recorded value under the default and
# expandable_segments:True (the JAX job under BFC growth, XLA_PYTHON_CLIENT_PREALLOCATE=false).
# Runs go side by side (-P 8; max_memory_reserved is per process).
# Needs the wheel (tools/build_wheel) in $WHEEL_DIR (default .dev/predict), carried; predict_hf.py
# beside this script. No new run starts after $BUDGET seconds (default 270).
# Output: $OUT/hf.tar.xz: <job>/rec.vN.zst and <job>/runs.jsonl per job, log.txt.
#   run (from the repository root): OUT=... bash tests/gpu/predict_hf_gpu.sh
set -u
OUT=${OUT:-/tmp/hfout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
WHEEL_DIR=${WHEEL_DIR:-$ROOT/.dev/predict}
W=/tmp/hfwork
rm -rf "$W"; mkdir -p "$W/runs" "$OUT"
exec > >(tee -a "$W/log.txt") 2>&1
echo "== predict_hf_gpu.sh $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -m pip install -q --no-index --break-system-packages "$WHEEL_DIR"/gpumem_tools-*.whl || exit 1
gpurec --version | head -2
cp "$HERE/predict_hf.py" "$W/"
{
  for v in 4 8 16; do echo "rec hf_batch $v"; done
  for v in 128 256 384; do echo "rec hf_seq $v"; done
  for v in 16 32 64; do echo "rec resnet $v"; done
  for v in 256 512 1024; do echo "rec jax_mlp $v"; done
  for c in default expandable; do
    for v in 32 64; do echo "$c hf_batch $v"; done
    for v in 768 1536; do echo "$c hf_seq $v"; done
    for v in 128 256; do echo "$c resnet $v"; done
  done
  for v in 2048 4096 256 512 1024; do echo "growth jax_mlp $v"; done
} > "$W/list"
one() { # PURPOSE JOB VALUE
  local p=$1 j=$2 v=$3 d=$W/$2 t0 rc conf=""
  mkdir -p "$d"; cd "$W" || return
  t0=$(date +%s%N)
  case $p in
    rec) timeout 150 gpurec -o "$d/rec.v$v.zst" -- python3 predict_hf.py "$j" "$v" "out/$j/rb$v" > "$W/runs/$p.$j.$v.log" 2>&1;;
    default) env -u PYTORCH_CUDA_ALLOC_CONF timeout 150 python3 predict_hf.py "$j" "$v" "out/$j/rb$v.$p" > "$W/runs/$p.$j.$v.log" 2>&1;;
    expandable) conf=expandable_segments:True
      PYTORCH_CUDA_ALLOC_CONF=$conf timeout 150 python3 predict_hf.py "$j" "$v" "out/$j/rb$v.$p" > "$W/runs/$p.$j.$v.log" 2>&1;;
    growth) conf=XLA_PYTHON_CLIENT_PREALLOCATE=false
      XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 150 python3 predict_hf.py "$j" "$v" "out/$j/rb$v.$p" > "$W/runs/$p.$j.$v.log" 2>&1;;
  esac
  rc=$?
  local res; res=$(grep -h '^GPUMEM_RESULT ' "$W/runs/$p.$j.$v.log" | tail -1 | cut -c15-)
  [ -n "$res" ] || res=null
  local purpose=scale; [ "$p" = rec ] && purpose=rec
  echo "{\"run\":\"$p.v$v\",\"job\":\"$j\",\"value\":$v,\"conf\":\"$conf\",\"purpose\":\"$purpose\",\"cap_bytes\":0,\"rc\":$rc,\"ms\":$(( ($(date +%s%N) - t0) / 1000000 )),\"result\":$res}" >> "$d/runs.jsonl"
  echo "  $(date +%H:%M:%S) $p $j $v rc=$rc"
}
export -f one; export W
timeout ${BUDGET:-270} xargs -P 8 -L 1 bash -c 'one "$@"' _ < "$W/list"
tail -3 "$W"/runs/*.log | grep -v '^$' | grep -v GPUMEM_RESULT | tail -60
ls -la "$W"/*/
tar -C "$W" -cJf "$OUT/hf.tar.xz" --exclude=out --exclude=predict_hf.py .
echo "== done $(date -u)"
