#!/bin/bash
# frameworks_check.sh: gpurec's framework detection and requests-mode switches on the GPU
# machine, one call: a PyTorch job, a JAX job, one process with both, and a user's own
# sitecustomize.py still running under gpurec's. Needs .dist/ (gpurec, libgpumem_inject.so,
# trace_csv, lib/). Output: $OUT/frameworks_check.tar.xz (traces, CSV headers, log).
set -u
OUT=${OUT:-/tmp/fwout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/fwwork
rm -rf "$W"; mkdir -p "$W/site" "$OUT"
PY=${PY:-python3}
exec > >(tee -a "$OUT/log.txt") 2>&1
cd "$W"
echo "== frameworks_check.sh $(date -u)"
hdr() { $D/trace_csv "$1" | grep '^#' | grep -v '^#string' ; }
echo "== PyTorch, requests mode"
$D/gpurec -o torch.zst -- $PY "$ROOT/traces/workloads/train_amp.py"; echo "rc=$?"
hdr torch.zst
echo "== JAX, requests mode"
$D/gpurec -o jax.zst -- $PY "$ROOT/traces/workloads/jax/jax_eager_grow.py"; echo "rc=$?"
hdr jax.zst
echo "== one process, torch and jax"
$D/gpurec -o both.zst -- $PY -c "import torch, jax, jax.numpy as jnp; a = torch.zeros(1 << 20, device='cuda'); b = jnp.ones(1 << 20); print(float(a.sum()), float(b.sum()))"; echo "rc=$?"
hdr both.zst
echo "== the user's own sitecustomize runs too"
echo 'print("USER SITECUSTOMIZE RAN")' > site/sitecustomize.py
PYTHONPATH=$W/site $D/gpurec -o site.zst -- $PY -c "import torch; torch.zeros(1, device='cuda'); print('ok')"; echo "rc=$?"
tar -C "$W" -cJf "$OUT/frameworks_check.tar.xz" --exclude=site .
echo "== done $(date -u)"
