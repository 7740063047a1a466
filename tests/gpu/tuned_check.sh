#!/bin/bash
# tuned_check.sh: the report's default advice (the tuner without hard limits) run for real: each
# workload of traces/workloads under the setting `gpuanalyze report` pastes for its trace, and
# under the default, unrecorded, twice; PyTorch's own max_memory_reserved against the replay's
# figure (written in EXPECT below, from `gpureplay TRACE --policy=pytorch:CONF --json`).
#   run (from the repository root, on the GPU machine): bash tests/gpu/tuned_check.sh
set -u
OUT=${OUT:-/tmp/tunedcheck}
PY=${PY:-/opt/torch/.venv/bin/python3}
mkdir -p "$OUT"
exec > >(tee "$OUT/tuned_check.txt") 2>&1
echo "== tuned_check.sh $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
# workload | setting (PYTORCH_CUDA_ALLOC_CONF) | the replay's peak reserved (bytes)
EXPECT=(
  "infer_varlen|expandable_segments:True,max_split_size_mb:69,max_non_split_rounding_mb:256|1260388352"
  "infer_varlen||2640314368"
  "train_ckpt|expandable_segments:True,roundup_power2_divisions:[32:16,>:0]|715128832"
  "train_ckpt||868220928"
)
ok=0; n=0
for e in "${EXPECT[@]}"; do
  IFS='|' read -r w conf want <<<"$e"
  for r in 1 2; do
    line=$(cd traces/workloads && { [ -n "$conf" ] && export PYTORCH_CUDA_ALLOC_CONF="$conf"; timeout 120 "$PY" "$w.py"; } 2>/dev/null | grep -o '{.*"max_memory_reserved".*}' | tail -1)
    got=$(echo "$line" | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read())["max_memory_reserved"])' 2>/dev/null)
    n=$((n + 1)); [ "$got" = "$want" ] && ok=$((ok + 1))
    echo "$w run $r '${conf:-(default)}': real max_memory_reserved ${got:-?} replay $want $([ "$got" = "$want" ] && echo exact || echo DIFFERS)"
  done
done
echo "$ok of $n runs equal to the replay"
