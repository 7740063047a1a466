#!/bin/bash
# jax_corpus.sh: the JAX (and CuPy) corpus for the BFC model, in one call on the GPU machine.
# Needs .dist/ built here and carried: gpurec, libgpumem_inject.so, trace_csv.
# For each workload in traces/workloads/jax/, all jobs side by side (chain_rec and chain_unrec
# below say what each run is): the recordings in gpurec's requests and native modes, and
# unrecorded runs with JAX's own memory_stats under growth, tight fractions and preallocation.
# Run 1 of this corpus (2026-11-25 11:47, H100, commit 867b6cc) recorded with --mode=native and
# env overrides (async, platform); run 2 (this script) with gpurec's requests mode itself.
# Output: $OUT/jax_corpus.tar.xz (traces, stdout/stderr of each run, results.jsonl) + log.txt
set -u
OUT=${OUT:-/tmp/jaxout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/jaxwork
rm -rf "$W"; mkdir -p "$W/runs" "$OUT"
PY=${PY:-python3}
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== jax_corpus.sh $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices())'
$PY -c 'import cupy; print("cupy", cupy.__version__)'
$D/gpurec --version | head -3
JOBS=${JOBS:-"jax_train_shapes jax_infer_varlen jax_free_regrow jax_eager_grow jax_multi_shard"}
JD=$ROOT/traces/workloads/jax

# run NAME VARIANT [env...] -- cmd...: one run, output in runs/NAME.VARIANT.{out,err}, its
# GPUMEM_RESULT line tagged into results.jsonl
run() {
  local name=$1 var=$2; shift 2
  [ -e "$W/STOP" ] && { echo "  out of time: $name $var not run"; return; }
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local t0=$(date +%s%N)
  timeout 150 env "${envs[@]}" "$@" > "$W/runs/$name.$var.out" 2> "$W/runs/$name.$var.err"
  local rc=$?
  local secs=$(( ($(date +%s%N) - t0) / 1000000 ))
  local line=$(grep '^GPUMEM_RESULT ' "$W/runs/$name.$var.out" | tail -1 | cut -c15-)
  [ -n "$line" ] || line=null
  echo "{\"job\":\"$name\",\"variant\":\"$var\",\"rc\":$rc,\"ms\":$secs,\"env\":\"${envs[*]}\",\"result\":$line}" >> "$W/results.jsonl"
  echo "  $(date +%T) $name $var rc=$rc ${secs}ms"
}

body() {
# Chain A per job: the recordings. Requests mode is gpurec's default (XLA_PYTHON_CLIENT_ALLOCATOR=
# cuda_async, no preallocation: one exact request per XLA buffer); native mode under growth
# shows the BFC's regions as VMM maps (ground truth beside JAX's memory_stats).
chain_rec() {
  local j=$1 P="$PY $JD/$1.py"
  cd "$W"
  run $j rec.requests X=1 -- $D/gpurec -o "$W/$j.requests.zst" -- $P
  run $j rec.native XLA_PYTHON_CLIENT_PREALLOCATE=false -- $D/gpurec -o "$W/$j.native.zst" --mode=native -- $P
}
# Chain B per job, unrecorded: growth; growth at fractions 1.10x and 0.90x of growth's
# peak_bytes_in_use; preallocated at the first of those and at 0.15 of the device.
chain_unrec() {
  local j=$1 P="$PY $JD/$1.py"
  cd "$W"
  run $j growth XLA_PYTHON_CLIENT_PREALLOCATE=false -- $P
  read FA FB < <($PY - "$W/results.jsonl" "$j" <<'PYEOF'
import json, sys
peak = limit = None
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["job"] == sys.argv[2] and r["variant"] == "growth" and r["result"] and r["result"].get("stats"):
        s = r["result"]["stats"]; peak = s.get("peak_bytes_in_use"); limit = s.get("bytes_limit")
total = limit / 0.75 if limit else None  # bytes_limit = total * 0.75 under the default fraction
print("0.02 0.01" if not peak or not total else "%.6f %.6f" % (peak * 1.10 / total, peak * 0.90 / total))
PYEOF
)
  echo "  $j tight fractions A=$FA B=$FB"
  run $j tightA XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=$FA -- $P
  run $j tightB XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=$FB -- $P
  run $j pretightA XLA_PYTHON_CLIENT_MEM_FRACTION=$FA -- $P
  run $j pre15 XLA_PYTHON_CLIENT_MEM_FRACTION=.15 -- $P
}

echo "== all jobs side by side: recordings and unrecorded runs"
pids=()
for j in $JOBS; do
  chain_rec $j & pids+=($!)
  chain_unrec $j & pids+=($!)
done
C="$PY $ROOT/traces/workloads/cupy/cupy_varsize.py"
( cd "$W"
  run cupy_varsize rec.requests X=1 -- $D/gpurec -o "$W/cupy_varsize.requests.zst" -- $C
  run cupy_varsize rec.native X=1 -- $D/gpurec -o "$W/cupy_varsize.native.zst" --mode=native -- $C
  run cupy_varsize pool X=1 -- $C ) & pids+=($!)
wait "${pids[@]}"   # not a bare wait: that would wait for the tee above too
echo "== default preallocation (75%), one job at a time would not fit: one job"
run jax_train_shapes prealloc X=1 -- $PY $JD/jax_train_shapes.py

}
(body) &
bp=$!
( sleep ${BUDGET:-520}; touch "$W/STOP"; pkill -TERM -f 'traces/workloads|gpurec' ) &
wp=$!
wait $bp
kill $wp 2>/dev/null
echo "== CSV of every trace"
for f in "$W"/*.zst; do $D/trace_csv "$f" > "$f.csv" 2>/dev/null || echo "csv failed: $f"; done
ls -la "$W" | head -40
tar -C "$W" -cJf "$OUT/jax_corpus.tar.xz" .
ls -la "$OUT"
echo "== done $(date -u)"
