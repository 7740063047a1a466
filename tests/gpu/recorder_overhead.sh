#!/bin/bash
# recorder_overhead.sh: where the recorder's time goes (issue 15 item 1) and what callsites cost
# (item 3), in one call on the GPU machine. Every figure is a paired difference against the
# reference measured in the same round of the same run; rounds are interleaved (every variant a
# fresh process, the order rotated each round).
#
# Needs the binaries built here and carried in .dist/ (as the other tests/gpu scripts):
#   .dist/gpurec .dist/libgpumem_inject.so .dist/trace_csv [.dist/alloc_churn] [.dist/lib/]
#   [.dist/libcs_probe.so] (//recorder:testdata/libcs_probe.so: the callsite reader's check)
# .dist/alloc_churn is used when it has the launch/query/sync loops, else built there with nvcc.
#   run (from the repository root): bash tests/gpu/recorder_overhead.sh [STAGES]
#   STAGES: comma list of probe,calls,callsites,owner,rounds (default: all five)
#     probe     the callsite reader against this machine's Python (cs_probe_test.py): checks
#               and ns per capture
#     calls     driver calls per step of the Python loop (GPUMEM_DIAG=count_calls)
#     callsites what the default recording's callsites say for the Python loop (user and stack)
#     owner     NCCL (one rank) and expandable segments under --mode=native: VMM owners
#     rounds    the benchmark: per round, alloc_churn's alloc/launch/query/sync loops under 6
#               variants, then the host-bound PyTorch loop under 9 variants
# Environment: ROUNDS (3), BUDGET_S (540: no round starts unless the last one's duration still
# fits), PY (/opt/torch/.venv/bin/python3), CPUS (2-5: taskset pinning, when there are >= 8),
# PY_STEPS (120), C_EVENTS (100000), C_BLOCKS (7).
# Writes under $OUT: log.txt, results.jsonl, overhead.md (the tables), callsites.json, owner.json,
# calls.txt, recorder_overhead.tar.xz (all of it plus the traces' CSV summaries).
# Robust by construction: no `exec > >(tee)` (so no bare wait can hang on it), every process
# under timeout, every stage independent of the others' success.
set -u
T_START=$(date +%s)
OUT=${OUT:-/tmp/recovh}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
W=/tmp/recovh.work
rm -rf "$W"; mkdir -p "$W" "$OUT"
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PY=${PY:-/opt/torch/.venv/bin/python3}; [ -x "$PY" ] || PY=python3
WHAT=${1:-probe,calls,callsites,owner,rounds}
ROUNDS=${ROUNDS:-3}
BUDGET_S=${BUDGET_S:-540}
PY_STEPS=${PY_STEPS:-120}
C_EVENTS=${C_EVENTS:-100000}
C_BLOCKS=${C_BLOCKS:-7}
LOG=$OUT/log.txt
RES=$OUT/results.jsonl
: > "$RES"
has() { [[ ",$WHAT," == *",$1,"* ]]; }
log() { echo "$*" | tee -a "$LOG"; }
elapsed() { echo $(( $(date +%s) - T_START )); }
# run SECONDS CMD...: output appended to the log, the command bounded in time
run() { local t=$1; shift; timeout -k 10 "$t" "$@" >> "$W/out" 2>&1; local rc=$?; cat "$W/out" >> "$LOG"; return $rc; }
PIN=()
if command -v taskset > /dev/null && [ "$(nproc)" -ge 8 ]; then PIN=(taskset -c "${CPUS:-2-5}"); fi

log "== recorder_overhead.sh $WHAT  $(date -u)  rounds=$ROUNDS budget=${BUDGET_S}s pin=${PIN[*]:-none}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$LOG" 2>&1
timeout 60 "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' >> "$LOG" 2>&1
"$D/gpurec" --version >> "$LOG" 2>&1 || log "gpurec missing in $D: nothing recorded will run"
(cd "$ROOT" && git log --oneline -1 2>/dev/null) >> "$LOG"

# ---- alloc_churn ------------------------------------------------------------------------------
CHURN=""
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
if [ -x "$D/alloc_churn" ] && timeout 60 "$D/alloc_churn" 2 1 query > /dev/null 2>&1; then
  CHURN=$D/alloc_churn
elif [ -n "$NVCC" ] && timeout 180 "$NVCC" -O2 -o "$W/alloc_churn" "$ROOT/bench/recorder/alloc_churn.cu" >> "$LOG" 2>&1; then
  CHURN=$W/alloc_churn
fi
log "alloc_churn: ${CHURN:-none (no nvcc, and .dist/alloc_churn lacks the launch/query/sync loops): C loops skipped}"

LOOP="$ROOT/bench/recorder/rec_overhead.py"
# tag ROUND STAGE VARIANT [LOOP]: prefix the benchmark's RESULT line with the run's tags
tag() { local l=""; [ -n "${4:-}" ] && l=",\"loop\":\"$4\""; grep '^RESULT ' "$W/out" | sed "s/^RESULT /RESULT {\"stage\":\"$2\",\"variant\":\"$3\",\"round\":$1$l} /" >> "$RES"; }

# ---- stage probe: the callsite reader against this Python ----------------------------------------
if has probe; then
  log "== probe: recorder/testdata/cs_probe_test.py with $PY"
  if [ -f "$D/libcs_probe.so" ]; then
    : > "$W/out"; run 120 "$PY" "$ROOT/recorder/testdata/cs_probe_test.py" "$D/libcs_probe.so"; log "probe rc=$?"
  else
    log "no $D/libcs_probe.so: skipped"
  fi
fi

# ---- stage calls: driver calls per step of the Python loop -------------------------------------
if has calls; then
  log "== calls: GPUMEM_DIAG=count_calls, the Python loop at 20 and 120 steps"
  : > "$OUT/calls.txt"
  for steps in 20 120; do
    : > "$W/out"
    GPUMEM_DIAG=count_calls run 300 "$D/gpurec" -q --mode=requests -o "$W/calls.zst" -- "$PY" "$LOOP" --steps $steps --warmup 5
    c=$(sed -n 's/.*count_calls: \([0-9]*\) driver calls, \([0-9]*\) of them.*/calls=\1 mem=\2/p' "$W/out" | tail -1)
    log "steps=$steps $c"; [ -n "$c" ] && echo "steps=$steps $c" >> "$OUT/calls.txt"
    rm -f "$W"/calls*.zst
  done
fi

# ---- stage callsites: what a default recording of the Python loop says -------------------------
if has callsites; then
  log "== callsites: the Python loop recorded with --callsites=user (default) and stack"
  for cs in user stack; do
    : > "$W/out"
    run 300 "$D/gpurec" --mode=requests --callsites=$cs -o "$W/cs_$cs.zst" -- "$PY" "$LOOP" --steps 10 --warmup 2
    log "gpurec rc=$?"
    timeout 120 "$D/trace_csv" "$W/cs_$cs.zst" > "$W/cs_$cs.csv" 2>> "$LOG"
    grep "^#kv.gpurec_callsites\|^#stats" "$W/cs_$cs.csv" >> "$LOG"
    timeout 120 "$PY" "$ROOT/bench/recorder/callsite_summary.py" "$W/cs_$cs.csv" 12 > "$OUT/callsites_$cs.json" 2>> "$LOG"
    cut -c1-3000 "$OUT/callsites_$cs.json" >> "$LOG"
  done
fi

# ---- stage owner: NCCL and expandable segments, native mode ------------------------------------
if has owner; then
  log "== owner: one-rank NCCL all_reduce and expandable segments under --mode=native"
  : > "$W/out"
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    run 300 "$D/gpurec" --mode=native -o "$W/owner.zst" -- "$PY" "$ROOT/tests/gpu/nccl_owner.py"
  log "gpurec rc=$?"
  timeout 120 "$D/trace_csv" "$W/owner.zst" > "$W/owner.csv" 2>> "$LOG"
  timeout 120 "$PY" "$ROOT/bench/recorder/callsite_summary.py" "$W/owner.csv" 20 > "$OUT/owner.json" 2>> "$LOG"
  cut -c1-4000 "$OUT/owner.json" >> "$LOG"
fi

# ---- stage rounds: the benchmark ---------------------------------------------------------------
C_VARIANTS=(base inert subscribed empty full_nocs full)
PY_VARIANTS=(${PY_VARIANTS:-requests_base requests_inert requests_subscribed requests_empty requests_full_nocs requests_full_user requests_full_stack native_base native_history_nostacks})

c_variant() { # ROUND VARIANT LOOP
  local r=$1 v=$2 l=$3 g=("$D/gpurec" -q --mode=native -o "$W/c.zst" --)
  local cmd=(${PIN[@]+"${PIN[@]}"} "$CHURN" "$C_EVENTS" "$C_BLOCKS" "$l")
  [ "$l" = sync ] && cmd=(${PIN[@]+"${PIN[@]}"} "$CHURN" 4000 "$C_BLOCKS" sync)
  : > "$W/out"
  case $v in
    base) run 120 "${cmd[@]}" ;;
    inert) GPUMEM_DIAG=inert run 120 "${g[@]}" "${cmd[@]}" ;;
    subscribed) GPUMEM_DIAG=subscribe_only run 120 "${g[@]}" "${cmd[@]}" ;;
    empty) GPUMEM_DIAG=empty_callbacks run 120 "${g[@]}" "${cmd[@]}" ;;
    full_nocs) run 120 "$D/gpurec" -q --mode=native --callsites=none -o "$W/c.zst" -- "${cmd[@]}" ;;
    full) run 120 "${g[@]}" "${cmd[@]}" ;;
  esac
  local rc=$?; [ $rc != 0 ] && log "c $l $v round $r: rc=$rc"
  tag "$r" c "$v" "$l"; rm -f "$W"/c*.zst
}

py_variant() { # ROUND VARIANT
  local r=$1 v=$2 B=("$LOOP" --steps "$PY_STEPS" --warmup 15)
  local g=("$D/gpurec" -q --mode=requests -o "$W/p.zst" --)
  : > "$W/out"
  case $v in
    requests_base) PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync run 300 ${PIN[@]+"${PIN[@]}"} "$PY" "${B[@]}" ;;
    requests_inert) GPUMEM_DIAG=inert run 300 ${PIN[@]+"${PIN[@]}"} "${g[@]}" "$PY" "${B[@]}" ;;
    requests_subscribed) GPUMEM_DIAG=subscribe_only run 300 ${PIN[@]+"${PIN[@]}"} "${g[@]}" "$PY" "${B[@]}" ;;
    requests_empty) GPUMEM_DIAG=empty_callbacks run 300 ${PIN[@]+"${PIN[@]}"} "${g[@]}" "$PY" "${B[@]}" ;;
    requests_full_nocs) run 300 ${PIN[@]+"${PIN[@]}"} "$D/gpurec" -q --mode=requests --callsites=none -o "$W/p.zst" -- "$PY" "${B[@]}" ;;
    requests_full_user) run 300 ${PIN[@]+"${PIN[@]}"} "${g[@]}" "$PY" "${B[@]}" ;;
    requests_full_stack) run 300 ${PIN[@]+"${PIN[@]}"} "$D/gpurec" -q --mode=requests --callsites=stack -o "$W/p.zst" -- "$PY" "${B[@]}" ;;
    native_base) env -u PYTORCH_CUDA_ALLOC_CONF timeout -k 10 300 ${PIN[@]+"${PIN[@]}"} "$PY" "${B[@]}" >> "$W/out" 2>&1 ;;
    native_history_nostacks) env -u PYTORCH_CUDA_ALLOC_CONF timeout -k 10 300 ${PIN[@]+"${PIN[@]}"} "$PY" "${B[@]}" --history nostacks >> "$W/out" 2>&1 ;;
  esac
  local rc=$?; [ $rc != 0 ] && log "py $v round $r: rc=$rc"
  [[ $v == native_* ]] && cat "$W/out" >> "$LOG"
  if [ -f "$W/p.zst" ] && [ "$r" = 1 ]; then # the events each recording variant wrote, once
    timeout 60 "$D/trace_csv" "$W/p.zst" 2>/dev/null | tail -1 | sed "s/^/$v: /" >> "$LOG"
  fi
  tag "$r" py "$v"; rm -f "$W"/p*.zst
}

rotate() { # N ITEMS...: the items rotated left by N
  local n=$1; shift; local a=("$@") k=${#a[@]} i
  for ((i = 0; i < k; i++)); do echo "${a[$(( (i + n) % k ))]}"; done
}

if has rounds; then
  last=0
  for ((r = 1; r <= ROUNDS; r++)); do
    if (( $(elapsed) + last > BUDGET_S )); then
      log "== round $r not started: $(elapsed) s used, the last round took $last s, budget $BUDGET_S s"
      break
    fi
    t0=$(date +%s)
    log "== round $r ($(elapsed) s used)"
    if [ -n "$CHURN" ]; then
      for l in alloc launch query sync; do
        for v in $(rotate $((r - 1)) "${C_VARIANTS[@]}"); do c_variant $r $v $l; done
      done
    fi
    for v in $(rotate $((r - 1)) "${PY_VARIANTS[@]}"); do py_variant $r $v; done
    last=$(( $(date +%s) - t0 ))
    log "   round $r took $last s"
  done
fi

# ---- tables and pack ---------------------------------------------------------------------------
log "== tables"
timeout 60 "$PY" "$ROOT/bench/recorder/overhead_table.py" "$RES" "$OUT/calls.txt" > "$OUT/overhead.md" 2>> "$LOG"
cat "$OUT/overhead.md" | tee -a "$LOG"
cp "$W"/*.csv "$OUT/" 2>/dev/null
(cd "$OUT" && tar -cJf "$W/recorder_overhead.tar.xz" --exclude=recorder_overhead.tar.xz . 2>/dev/null && rm -f ./*.csv && mv "$W/recorder_overhead.tar.xz" .)
log "== done $(date -u), $(elapsed) s"
ls -l "$OUT"
