#!/bin/bash
# snapshot_gpu.sh: one call on the GPU machine makes the snapshot corpus and the cross-policy
# measurements of issue 6 (see snapshot_runs.py for what runs). Needs torch there (python3 =
# /opt/torch/.venv/bin/python3); writes everything under $OUT (at most 8 files come back).
#   run: bash tests/gpu/snapshot_gpu.sh [late]   (late: only the 4 late-history snapshots)
set -u
OUT=${OUT:-/tmp/snapout}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.version.cuda)'
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
python3 tests/gpu/snapshot_runs.py "$OUT" "$@" 2>&1 | tee "$OUT/log.txt"
ls -l "$OUT"
