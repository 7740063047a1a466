#!/bin/bash
# advice_check.sh (issue 25, successor of tuned_check.sh): `gpuanalyze report`'s advice for
# every recorded corpus job (traces/recorded/*.requests.zst: four PyTorch jobs; traces/recorded/jax:
# five JAX jobs) run for real, unrecorded, next to the framework's default. Checks that the
# advised run reserves what the replay predicted (to the byte) and never more than the default.
# The ADVICE table below is what `gpuanalyze report TRACE` pasted at the commit that made it and
# `gpureplay TRACE --policy=SPEC --json`'s peak_reserved_bytes (driver placement, the default).
#   run (from the repository root, on the GPU machine): bash tests/gpu/advice_check.sh
# Real figures: PyTorch's max_memory_reserved; JAX's memory_stats() peak_pool_bytes.
set -u
OUT=${OUT:-/tmp/advicecheck}
PY=${PY:-/opt/torch/.venv/bin/python3}
ROOT=$(pwd)
mkdir -p "$OUT/advice"
R=$OUT/advice
exec > >(tee "$R/advice_check.txt") 2>&1
echo "== advice_check.sh $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF XLA_PYTHON_CLIENT_PREALLOCATE XLA_PYTHON_CLIENT_MEM_FRACTION
# job | dir | advised environment (what the report pastes; empty: keep the default) | predicted bytes
ADVICE=(
  "infer_varlen|.||2640314368"
  "train_amp|.|PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True|1075838976"
  "train_ckpt|.|PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,roundup_power2_divisions:[32:16,>:0]|715128832"
  "two_streams|.||440401920"
  "jax_train_shapes|jax|XLA_PYTHON_CLIENT_PREALLOCATE=false|2183135232"
  "jax_infer_varlen|jax|XLA_PYTHON_CLIENT_PREALLOCATE=false|1075838976"
  "jax_free_regrow|jax|XLA_PYTHON_CLIENT_PREALLOCATE=false|2149580800"
  "jax_eager_grow|jax|XLA_PYTHON_CLIENT_PREALLOCATE=false|4297064448"
  "jax_multi_shard|jax|XLA_PYTHON_CLIENT_PREALLOCATE=false|2149580800"
)
figure() { # the real figure from a GPUMEM_RESULT line on stdin
  "$PY" -c '
import json, sys
r = None
for l in sys.stdin:
    if l.startswith("GPUMEM_RESULT "): r = json.loads(l[14:])
if r is None: print("?"); sys.exit()
if "max_memory_reserved" in r: print(r["max_memory_reserved"])
else:
    s = r.get("stats") or {}
    print(s.get("peak_pool_bytes", s.get("pool_bytes", "?")))'
}
run_one() { # DIR JOB ENV
  (cd "$ROOT/traces/workloads/$1" && if [ -n "$3" ]; then export "$3"; fi; timeout 90 "$PY" "$2.py" 2>"$R/$2.${4}.err") | tee "$R/$2.$4.out" | figure
}
echo "| job | advice (pasted) | predicted (B) | real, advised (B) | real, default (B) | verdict |"
echo "|---|---|---:|---:|---:|---|"
n=0; exact=0; worse=0
for e in "${ADVICE[@]}"; do
  IFS='|' read -r job dir env want <<<"$e"
  got=$(run_one "$dir" "$job" "$env" advised)
  if [ -n "$env" ]; then dflt=$(run_one "$dir" "$job" "" default); else dflt=$got; fi
  v="DIFFERS"; [ "$got" = "$want" ] && v="exact"
  case "$got$dflt" in *"?"*) v="NO RUN";; *) [ "$got" -gt "$dflt" ] && { v="$v, MORE THAN THE DEFAULT"; worse=$((worse + 1)); };; esac
  n=$((n + 1)); [ "$got" = "$want" ] && exact=$((exact + 1))
  echo "| $job | \`${env:-(default kept)}\` | $want | $got | $dflt | $v |"
done
echo
echo "$exact of $n advised runs exact to the byte; $worse reserve more than the default"
