#!/bin/bash
# predict_hf_fit.sh: the largest-fit runs of issue 26's HuggingFace jobs (tests/gpu/predict_hf.py;
# JOB=hf_batch, the default, or hf_seq), unrecorded, with the allocator held to the table's
# emulated card (--cap-bytes: CAP_GIB, default 16 GiB: the table's cap of the job), under
# each setting of the table, at the given values (the predicted largest and the next ones):
# tests/gpu/predict_table.py then finds the real largest (a value that fits while the next does
# not) and checks `gpurec predict --fit`'s answer against it (equal or one step below, never above).
#   bash tests/gpu/predict_hf_fit.sh "DEFAULT_VALUES" "EXPANDABLE_VALUES" "MAX_SPLIT_VALUES"
#   JOB=hf_seq CAP_GIB=12 bash tests/gpu/predict_hf_fit.sh 2048 2048 2048   (a prediction "at least
#   2048 (--max)": the model's last position fits under each setting, or not)
# Five runs side by side (5 x 16 GiB fit on a 141 GiB H200; nine did not: real out-of-memory
# failures of the device, not of the cap, at 14.4 GB reserved).
# Output: $OUT/$JOB.fit.jsonl (lines for traces/predicted/$JOB/runs.jsonl), $OUT/log.txt.
set -u
OUT=${OUT:-/tmp/hffit}
HERE=$(cd "$(dirname "$0")" && pwd)
W=/tmp/hffitwork
rm -rf "$W"; mkdir -p "$W/runs" "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== predict_hf_fit.sh ${JOB:-hf_batch} $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
JOB=${JOB:-hf_batch}
CAP=$((${CAP_GIB:-16} << 30))
{
  for v in $1; do echo "- $v"; done
  for v in $2; do echo "expandable_segments:True $v"; done
  for v in $3; do echo "max_split_size_mb:128 $v"; done
} > "$W/list"
one() { # CONF VALUE
  local conf=$1 v=$2 t0 rc res
  [ "$conf" = - ] && conf=""
  cd "$W" || return
  t0=$(date +%s%N)
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 200 python3 "$HERE/predict_hf.py" "$JOB" "$v" "out/fit$v" --cap-bytes "$CAP" \
    > "$W/runs/fit.${conf:-default}.$v.log" 2>&1
  rc=$?
  res=$(grep -h '^GPUMEM_RESULT ' "$W/runs/fit.${conf:-default}.$v.log" | tail -1 | cut -c15-)
  [ -n "$res" ] || res=null
  echo "{\"run\":\"fit.${conf:-default}.v$v\",\"job\":\"$JOB\",\"value\":$v,\"conf\":\"$conf\",\"purpose\":\"fit\",\"cap_bytes\":$CAP,\"rc\":$rc,\"ms\":$(( ($(date +%s%N) - t0) / 1000000 )),\"result\":$res}" >> "$OUT/$JOB.fit.jsonl"
  echo "  $(date +%H:%M:%S) ${conf:-default} $v rc=$rc oom=$(echo "$res" | grep -o '"oom": [a-z]*')"
}
export -f one; export W OUT CAP HERE JOB
PYTORCH_CUDA_ALLOC_CONF= xargs -P 5 -L 1 bash -c 'one "$@"' _ < "$W/list"
for f in "$W"/runs/*.log; do tail -n 2 "$f"; done | grep -iv "^$\|GPUMEM_RESULT" | tail -n 20
