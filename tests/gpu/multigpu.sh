#!/bin/bash
# multigpu.sh: issue 17's recordings on a two-GPU machine (kind nvidia-h100-x2), one call.
# Needs .dist/ built here and carried (gpurec, libgpumem_inject.so, trace_csv; .dist/lib/).
#   run (from the repository root): bash tests/gpu/multigpu.sh
# Jobs (tests/gpu/multigpu_jobs.py): ddp (DDP over NCCL, rank 1 three times rank 0's batch),
# nccl (collectives only), twodev (one process, half of the model on each GPU). Each runs
#   unrec.1, unrec.2   unrecorded, default allocator: PyTorch's own peaks per rank and device,
#                      twice (does the driver or NCCL move them?)
#   exp                unrecorded under expandable_segments:True (the cross-setting check)
#   async              unrecorded under backend:cudaMallocAsync (issue 17 item 4: does the
#                      backend itself move rank 0's max_memory_allocated?)
#   auto               gpurec's default (--mode=auto): the recordings of traces/recorded/multigpu
#   requests           gpurec --mode=requests (item 4: what requests mode changes)
#   stacks             gpurec --stacks=python (ddp only: callsites for the cross-rank report)
# The replays run afterwards, on the CPU, from the traces (traces/recorded/multigpu/BUILD).
# Output: $OUT/multigpu.tar.xz (results.jsonl, each run's out/err, the traces) and $OUT/log.txt.
set -u
OUT=${OUT:-/tmp/multigpuout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
[ -d "$D/lib" ] && export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/multigpuwork
rm -rf "$W"; mkdir -p "$W/runs" "$W/rec" "$OUT"
PY=${PY:-python3}
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== multigpu.sh  $(date -u)  commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
nvidia-smi topo -m 2>/dev/null | head -4
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
$D/gpurec --version | head -2
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
export NCCL_NVLS_ENABLE=0  # NVLink multicast off (KINDS.md)
JOBS="$ROOT/tests/gpu/multigpu_jobs.py"

# run JOB VARIANT [env...] -- cmd...: one run (at most 120 s); GPUMEM_RESULT lines -> results.jsonl
run() {
  local job=$1 var=$2; shift 2
  local envs=(X=1)
  if [ $(( $(date +%s) - T0 )) -gt ${BUDGET:-480} ]; then echo "  out of time: $job $var not run"; return; fi
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local t0=$(date +%s%N)
  (cd "$W" && timeout 120 env "${envs[@]}" "$@" > "$W/runs/$job.$var.out" 2> "$W/runs/$job.$var.err")
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  grep '^GPUMEM_RESULT ' "$W/runs/$job.$var.out" | sed 's/^GPUMEM_RESULT //' | while read -r line; do
    echo "{\"job\":\"$job\",\"variant\":\"$var\",\"rc\":$rc,\"ms\":$ms,\"result\":$line}" >> "$W/results.jsonl"
  done
  echo "  $(date +%T) $job $var rc=$rc ${ms}ms $(grep -c '^GPUMEM_RESULT' "$W/runs/$job.$var.out") results"
  [ $rc -ne 0 ] && tail -5 "$W/runs/$job.$var.err"
}

T0=$(date +%s)
for job in ${JOBS_RUN:-ddp twodev nccl}; do
  if [ $job = twodev ]; then T=("$PY" "$JOBS" twodev)
  else T=(torchrun --standalone --nproc_per_node=2 "$JOBS" $job); fi
  echo "== $job"
  run $job unrec.1 -- "${T[@]}"
  run $job unrec.2 -- "${T[@]}"
  run $job exp PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- "${T[@]}"
  run $job async PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- "${T[@]}"
  run $job auto -- $D/gpurec -o "$W/rec/$job.auto.zst" -- "${T[@]}"
  grep '^gpurec:' "$W/runs/$job.auto.err" | cut -c1-300
  run $job requests -- $D/gpurec --mode=requests -o "$W/rec/$job.requests.zst" -- "${T[@]}"
  [ $job = ddp ] && run $job stacks -- $D/gpurec --stacks=python -o "$W/rec/$job.stacks.zst" -- "${T[@]}"
done
ls -la "$W/rec"
for f in "$W"/rec/*.zst; do
  echo "-- $(basename "$f"): $($D/trace_csv "$f" 2>/dev/null | grep -E '^#(rank|device|capture|gpu)' | tr '\n' ' ' | cut -c1-300)"
done
tar -C "$W" -cJf "$OUT/multigpu.tar.xz" results.jsonl runs rec
echo "== done $(date -u)"
