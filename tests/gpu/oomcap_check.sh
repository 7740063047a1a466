#!/bin/bash
# oomcap_check.sh: issue 25 item 4 on the GPU machine, one call: a PyTorch job that runs out of
# memory under torch.cuda.set_per_process_memory_fraction(0.02), recorded with plain `gpurec`
# from the wheel (installed into the machine's python3, as tests/gpu/stream_gpu.sh does).
#   bash tests/gpu/oomcap_check.sh WHEEL_DIR            (OOMCAP_FRACTION=0.02 by default)
#   OOMCAP_DRY=1 bash tests/gpu/oomcap_check.sh BIN_DIR  (no GPU: the job's plan as a CSV trace,
#       the tools from BIN_DIR; the advised run stands in as the replay's figure plus
#       OOMCAP_DRY_SHIFT bytes: checks the plumbing; tests/gpu/oomcap_check_test.sh)
# The job (tests/gpu/oomcap_job.py) dies of an uncaught OutOfMemoryError under PyTorch's default;
# a setting that keeps its kept tensors out of the big one's segments serves it within the limit.
# Checks:
#   1. the job runs out of memory unrecorded and recorded (gpurec passes its exit status through);
#   2. the trace holds the limit (torch.per_process_memory_fraction=F and the OOM's message);
#   3. the verdict replays within it: gpureplay's capacity less the recorded CUDA context is the
#      job's limit to the byte (F x cuMemGetInfo's total, as PyTorch computes it), and the default
#      replayed runs out of memory at the request the real run refused;
#   4. `gpuanalyze report` says it replayed within the limit the run set itself, and its advice
#      ("the smallest change that would have served it") is predicted to fit within the limit;
#   5. the advice run for real under the same fraction serves the job, and reserves what the
#      replay predicted, to the byte.
# Output: $OUT/oomcap.tar.xz (checks.txt, the trace, info, report, replay JSON, runs) and
# $OUT/log.txt; the summary line is "oomcap: N checks, M failed".
set -u
ARG=${1:?usage: oomcap_check.sh WHEEL_DIR (or OOMCAP_DRY=1 ... BIN_DIR)}
DRY=${OOMCAP_DRY:-}
FRACTION=${OOMCAP_FRACTION:-0.02}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
JOB=$ROOT/tests/gpu/oomcap_job.py
OUT=${OUT:-/tmp/oomcapout}
W=${OOMCAP_WORK:-/tmp/oomcapwork}
rm -rf "$W"; mkdir -p "$W/runs" "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
# tee runs beside the script: on exit, close its input and wait for it, so that whoever reads
# the script's output has all of it once the script is done (as advice_check.sh)
TEE=$!
trap 'exec >&- 2>&-; wait "$TEE"' EXIT
echo "== oomcap_check.sh fraction $FRACTION${DRY:+ (dry run)}  $(date -u)"
if [ -n "$DRY" ]; then
  export PATH=$(realpath "$ARG"):$PATH
else
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -m pip install -q --force-reinstall --no-deps --no-index --break-system-packages "$ARG"/gpumem_tools-*.whl || exit 1
  export PATH=$(dirname "$(command -v python3)"):$PATH
fi
for t in gpurec gpureplay gpuanalyze; do command -v $t >/dev/null || { echo "oomcap: $t not found"; exit 1; }; done
gpurec --version | head -1
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
CHECKS=$W/checks.txt
: > "$CHECKS"
check() { # NAME OK(0/1) DETAIL
  if [ "$2" = 1 ]; then echo "ok: $1  ($3)" | tee -a "$CHECKS"; else echo "FAIL: $1  ($3)" | tee -a "$CHECKS"; fi
}
line() { sed -n "s/^$2 //p" "$1" | tail -1; }
field() { python3 -c 'import json,sys; d=json.loads(sys.argv[1] or "{}"); print(d.get(sys.argv[2], ""))' "$1" "$2"; }
jfield() { python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).readline() or "{}"); print(d.get(sys.argv[2], ""))' "$1" "$2"; }
pack() {
  cp "$CHECKS" "$W/checks.txt" 2>/dev/null
  tar -C "$W" -cJf "$OUT/oomcap.tar.xz" . 2>/dev/null
  local n=$(grep -c '' "$CHECKS") f=$(grep -c '^FAIL' "$CHECKS")
  echo "oomcap: $n checks, $f failed"
}

# 1. unrecorded and recorded: both run out of memory
if [ -n "$DRY" ]; then
  python3 "$JOB" --fraction "$FRACTION" --csv "$W/capped.csv" > "$W/runs/plain.out"; prc=1
  gpurec import "$W/capped.csv" -o "$W/capped.zst" > "$W/runs/rec.err" 2>&1; rrc=$((1 - $?))
  cp "$W/runs/plain.out" "$W/runs/rec.out"; echo "torch.OutOfMemoryError: (dry run) allowed" >> "$W/runs/rec.err"
else
  timeout 300 python3 "$JOB" --fraction "$FRACTION" > "$W/runs/plain.out" 2> "$W/runs/plain.err"; prc=$?
  (cd "$W" && timeout 300 gpurec -o "$W/capped.zst" -- python3 "$JOB" --fraction "$FRACTION") \
    > "$W/runs/rec.out" 2> "$W/runs/rec.err"; rrc=$?
fi
CAP=$(line "$W/runs/rec.out" GPUMEM_CAP)
echo "  the job's limit: ${CAP:-?} B; plan $(line "$W/runs/rec.out" GPUMEM_PLAN)"
grep -h "OutOfMemoryError" "$W/runs/rec.err" | tail -1 | cut -c1-300
check "the job runs out of memory unrecorded" $([ "$prc" != 0 ] && [ -z "$(line "$W/runs/plain.out" GPUMEM_RESULT)" ] && echo 1 || echo 0) "exit $prc"
check "the job runs out of memory under gpurec (its exit status passed through)" \
  $([ "$rrc" != 0 ] && grep -q "OutOfMemoryError" "$W/runs/rec.err" && [ -s "$W/capped.zst" ] && echo 1 || echo 0) "exit $rrc, trace $(stat -c %s "$W/capped.zst" 2>/dev/null || echo none) B"
[ -n "$CAP" ] && [ -s "$W/capped.zst" ] || { echo "oomcap: no limit or no trace: see runs/"; pack; exit 1; }

# 2. the trace holds the limit
gpuanalyze info "$W/capped.zst" > "$W/capped.info.txt" 2>&1
grep -E "per_process_memory_fraction|oom.message|gpu_mem_info_total" "$W/capped.info.txt" | cut -c1-300 | sed 's/^/  /'
check "the trace holds the fraction the job set, and for device 0" \
  $(grep -q "torch.per_process_memory_fraction=$FRACTION" "$W/capped.info.txt" && grep -q "torch.per_process_memory_fraction.0=$FRACTION" "$W/capped.info.txt" && echo 1 || echo 0) "fraction $FRACTION"
check "the trace holds the OOM's message" $(grep -q "oom.message=.*allowed" "$W/capped.info.txt" && echo 1 || echo 0) "$(grep -o 'oom.message=.\{0,80\}' "$W/capped.info.txt" | head -1)"

# 3. the verdict's limit and the replayed failure
gpureplay "$W/capped.zst" --policy=pytorch --json > "$W/default.json" 2> "$W/default.err"
gpureplay "$W/capped.zst" --explain-oom --json > "$W/explain.json" 2> "$W/explain.err"
capb=$(jfield "$W/default.json" capacity_bytes); ctx=$(jfield "$W/default.json" context_bytes)
check "the verdict replays within the job's own limit (capacity - CUDA context = the limit, to the byte)" \
  $([ -n "$capb" ] && [ $((capb - ${ctx:-0})) = "$CAP" ] && echo 1 || echo 0) "capacity ${capb:-none} - context ${ctx:-0} vs the limit $CAP"
live=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("live",{}).get("bytes",""))' "$W/explain.json" 2>/dev/null)
plan=$(line "$W/runs/rec.out" GPUMEM_PLAN)
want_live=$(python3 -c 'import json,sys; p=json.loads(sys.argv[1]); print(p["rounds"]*p["keep"])' "$plan" 2>/dev/null)
check "the default replayed runs out where the real run did (its kept tensors live, the big one refused)" \
  $([ "$(jfield "$W/default.json" ooms)" -ge 1 ] 2>/dev/null && [ -n "$want_live" ] && [ "${live:-x}" = "$want_live" ] && echo 1 || echo 0) \
  "replay's OOMs $(jfield "$W/default.json" ooms), live at its first ${live:-?} B vs the job's ${want_live:-?} B"

# 4. the report's verdict and advice
(cd "$W" && gpuanalyze report --db="$W/capped.db" --html="$W/capped.html" "$W/capped.zst") > "$W/report.txt" 2> "$W/report.err"
sed 's/^/  /' "$W/report.txt" | head -20
check "the report replays within the limit the run set itself" \
  $(grep -q "replayed within .*(the limit the recorded run set itself: .*set_per_process_memory_fraction($FRACTION, 0)" "$W/report.txt" && echo 1 || echo 0) \
  "$(grep -o 'replayed within.*' "$W/report.txt" | head -1 | cut -c1-200)"
spec=$(sed -n 's/^  the smallest change that would have served it: \([^ ]*\) (peak reserved.*/\1/p' "$W/report.txt" | head -1)
paste=$(sed -n 's/^  paste: //p' "$W/report.txt" | head -1)
pred=
if [ -n "$spec" ]; then
  gpureplay "$W/capped.zst" --policy="$spec" --json > "$W/advised.json" 2> "$W/advised.err"
  pred=$(jfield "$W/advised.json" peak_reserved_bytes)
fi
check "the report advises a change predicted to fit within the limit" \
  $([ -n "$pred" ] && [ "$(jfield "$W/advised.json" ooms)" = 0 ] && [ "$pred" -le "$CAP" ] && echo 1 || echo 0) "${spec:-no advice}: predicted ${pred:-?} B, limit $CAP B"

# 5. the advice run for real under the same fraction
if [ -n "$spec" ] && [ -n "$paste" ]; then
  if [ -n "$DRY" ]; then
    # the stand-in reserves the prediction plus OOMCAP_DRY_SHIFT (a miss, for the test of the check)
    echo "GPUMEM_RESULT {\"max_memory_reserved\": $((pred + ${OOMCAP_DRY_SHIFT:-0})), \"alloc_conf\": \"dry\"}" > "$W/runs/advised.out"; arc=0
  else
    ( set -a; eval "$paste"; set +a; exec timeout 300 python3 "$JOB" --fraction "$FRACTION" ) \
      > "$W/runs/advised.out" 2> "$W/runs/advised.err"; arc=$?
  fi
  res=$(line "$W/runs/advised.out" GPUMEM_RESULT)
  real=$(field "$res" max_memory_reserved)
  check "the advice, run for real under the same limit, serves the job" $([ "$arc" = 0 ] && [ -n "$real" ] && echo 1 || echo 0) "exit $arc under $paste"
  check "the advice reserves what the replay predicted, within the limit" \
    $([ -n "$real" ] && [ "$real" = "$pred" ] && [ "$real" -le "$CAP" ] && echo 1 || echo 0) "real ${real:-?} B, predicted $pred B, limit $CAP B"
  echo "{\"fraction\":$FRACTION,\"cap\":$CAP,\"verdict_capacity\":${capb:-null},\"context\":${ctx:-null},\"advice\":\"$spec\",\"predicted\":${pred:-null},\"real\":${real:-null},\"advised_rc\":$arc}" > "$W/result.json"
fi
pack
