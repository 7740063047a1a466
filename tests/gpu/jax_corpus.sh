#!/bin/bash
# jax_corpus.sh: the JAX (and CuPy) corpus for the BFC model, in one call on the GPU machine.
# Needs .dist/ built here and carried: gpurec, libgpumem_inject.so, trace_csv.
# For each workload in traces/workloads/jax/:
#   rec.native    gpurec --mode=native, XLA_PYTHON_CLIENT_PREALLOCATE=false: the BFC's regions
#                 (VMM maps) with JAX's own memory_stats: ground truth for growth
#   rec.async     gpurec --mode=native, XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async, PREALLOCATE=false:
#                 one cudaMallocAsync per XLA buffer, exact sizes (the requests-mode candidate)
#   rec.platform  gpurec (requests mode as on main: XLA_PYTHON_CLIENT_ALLOCATOR=platform)
#   growth, growth2  unrecorded, PREALLOCATE=false (twice: determinism)
#   prealloc, pre50  unrecorded, preallocated at the default 0.75 and at 0.5
#   tightA, tightB   unrecorded growth at fractions 1.10x and 0.90x of growth's peak_bytes_in_use
#   pretightA        unrecorded, preallocated at tightA's fraction
# Output: $OUT/jax_corpus.tar.xz (traces, stdout/stderr of each run, results.jsonl) + log.txt
set -u
OUT=${OUT:-/tmp/jaxout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
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

job_phase1() {
  local j=$1 P="$PY $JD/$j.py"
  cd "$W"
  run $j rec.native XLA_PYTHON_CLIENT_PREALLOCATE=false -- $D/gpurec -o "$W/$j.native.zst" --mode=native -- $P
  run $j rec.async XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async -- $D/gpurec -o "$W/$j.async.zst" --mode=native -- $P
  run $j rec.platform X=1 -- $D/gpurec -o "$W/$j.platform.zst" -- $P
  run $j growth XLA_PYTHON_CLIENT_PREALLOCATE=false -- $P
  run $j growth2 XLA_PYTHON_CLIENT_PREALLOCATE=false -- $P
}

body() {
echo "== phase 1: recordings and growth runs, the jobs side by side"
pids=()
for j in $JOBS; do job_phase1 $j & pids+=($!); done
wait "${pids[@]}"   # not a bare wait: that would wait for the tee above too

echo "== phase 2: tight fractions (from growth's peak_bytes_in_use) and preallocation, one at a time"
TOTAL=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
for j in $JOBS; do
  P="$PY $JD/$j.py"
  read FA FB < <($PY - "$W/results.jsonl" "$j" <<'PYEOF'
import json, sys
peak = None; limit = None
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["job"] == sys.argv[2] and r["variant"] == "growth" and r["result"] and r["result"].get("stats"):
        s = r["result"]["stats"]; peak = s.get("peak_bytes_in_use"); limit = s.get("bytes_limit")
# bytes_limit = total * 0.75 under the default fraction
total = limit / 0.75 if limit else None
if not peak or not total:
    print("0.02 0.01")
else:
    print("%.6f %.6f" % (peak * 1.10 / total, peak * 0.90 / total))
PYEOF
)
  echo "  $j tight fractions A=$FA B=$FB"
  run $j tightA XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=$FA -- $P
  run $j tightB XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=$FB -- $P
  run $j pretightA XLA_PYTHON_CLIENT_MEM_FRACTION=$FA -- $P
  run $j prealloc X=1 -- $P
  run $j pre50 XLA_PYTHON_CLIENT_MEM_FRACTION=.5 -- $P
done

echo "== CuPy: default pool, pool off, async pool; recorded in requests mode (as on main)"
C="$PY $ROOT/traces/workloads/cupy/cupy_varsize.py"
cd "$W"
run cupy_varsize rec.pool X=1 -- $D/gpurec -o "$W/cupy_varsize.pool.zst" -- $C
run cupy_varsize rec.none GPUMEM_TEST_CUPY_ALLOCATOR=none -- $D/gpurec -o "$W/cupy_varsize.none.zst" -- $C
run cupy_varsize rec.async GPUMEM_TEST_CUPY_ALLOCATOR=async -- $D/gpurec -o "$W/cupy_varsize.async.zst" -- $C
run cupy_varsize pool X=1 -- $C

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
