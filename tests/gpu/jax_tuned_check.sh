#!/bin/bash
# jax_tuned_check.sh: does the preallocation `gpureplay --tune` finds for each JAX corpus job
# fit the real job, and does 3 % less fail? One device call, every run side by side
# (preallocated arenas of 1-3 % of the device each). No recorder: JAX's own memory_stats().
# Output: $OUT/jax_tuned.jsonl (one line per run) + $OUT/log.txt.
set -u
OUT=${OUT:-/tmp/jtout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-python3}
mkdir -p "$OUT"
W=/tmp/jtwork; rm -rf "$W"; mkdir -p "$W"
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== jax_tuned_check.sh $(date -u)"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
# job, the fraction --tune chose (traces/recorded/jax, commit of this script)
TUNED="jax_train_shapes 0.014313
jax_infer_varlen 0.009186
jax_free_regrow 0.016022
jax_eager_grow 0.034744
jax_multi_shard 0.010773"
one() {  # job fraction variant
  local t0=$(date +%s%N)
  XLA_PYTHON_CLIENT_MEM_FRACTION=$2 timeout 300 $PY "$ROOT/traces/workloads/jax/$1.py" >"$W/$1.$3.out" 2>"$W/$1.$3.err"
  local rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local line=$(grep '^GPUMEM_RESULT ' "$W/$1.$3.out" | tail -1 | cut -c15-)
  echo "{\"job\":\"$1\",\"variant\":\"$3\",\"fraction\":$2,\"rc\":$rc,\"ms\":$ms,\"result\":${line:-null}}" >>"$OUT/jax_tuned.jsonl"
  echo "  $1 $3 F=$2 rc=$rc ${ms}ms"
}
pids=()
while read -r j f; do
  lo=$($PY -c "print('%.6f' % ($f * 0.97))")
  one "$j" "$f" tuned & pids+=($!)
  one "$j" "$lo" tuned_minus3 & pids+=($!)
done <<<"$TUNED"
wait "${pids[@]}"
echo "== done $(date -u)"
