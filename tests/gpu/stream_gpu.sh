#!/bin/bash
# stream_gpu.sh: issue 24 on the GPU machine, one call: gpurec's default capture with PyTorch's
# allocator trace streamed (recorder/rec_torch_stream.c), as a user runs it: the wheel installed
# into the machine's python3, plain `gpurec -o t.zst -- python3 job.py`.
#   bash tests/gpu/stream_gpu.sh WHEEL_DIR [STAGES]      (STAGES: long,kill,cost; default all;
#   smoke: long's first job only, BIG_N=... TRAIN_STEPS=... shorten the jobs)
# long: tests/gpu/stream_jobs.py bigfirst (8 GiB first, then 2.2 M allocations) and train (a GPT
#       trained 600 steps with evaluations and checkpoints), each under the default and under
#       expandable_segments:True: run unrecorded and recorded; the recorded run's own
#       max_memory_reserved must equal the unrecorded one's and gpureplay's peak of the trace
#       under the same setting, to the byte; the trace says torch_history.source=stream.
# kill: stream_jobs.py killme recorded, the job SIGKILLed after 6 s: the trace (merged by gpurec
#       after the kill) holds at least every allocation the job had logged 1 s before the kill,
#       replays, and says PARTIAL (killed by SIGKILL) in gpurec's summary and in info.
# cost: stream_jobs.py loop 4, plain and recorded alternated 3 times: allocations per second.
# oomcap: stream_jobs.py capped recorded: the trace holds the limit the job set itself and the
#       OOM verdict (gpureplay --explain-oom) replays within it.
# costx: the loop (2 s) across processes, 5 rounds of plain / gpurec --mode=native / the default
#       without callsites / the default: whose part of the whole is whose (per second: all/2nd half).
# parts: tests/gpu/stream_cost.py under gpurec: each part of the streamed default priced in one
#       process (tracker idle / entries / callsites / CUPTI), a tight loop and a host-bound step.
# Output: $OUT/stream.tar.xz (checks.txt, results.jsonl, runs, replay JSON, info of each trace)
# and $OUT/log.txt; checks.txt ends with "N checks, M failed".
set -u
WHEELS=$1
WHAT=${2:-long,kill,cost,parts}
has() { [[ ",$WHAT," == *",$1,"* ]]; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/streamout}
W=/tmp/streamwork
rm -rf "$W"; mkdir -p "$W/runs" "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
JOBS=$ROOT/tests/gpu/stream_jobs.py
echo "== stream_gpu.sh $WHAT  $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -m pip install -q --force-reinstall --no-deps --no-index --break-system-packages "$WHEELS"/gpumem_tools-*.whl || exit 1
BIN=$(dirname "$(command -v python3)")
export PATH=$BIN:$PATH
gpurec --version | head -2
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
CHECKS=$W/checks.txt
: > "$CHECKS"
check() { # check NAME OK(0/1) DETAIL
  if [ "$2" = 1 ]; then echo "ok: $1  ($3)" | tee -a "$CHECKS"; else echo "FAIL: $1  ($3)" | tee -a "$CHECKS"; fi
}
result() { grep '^GPUMEM_RESULT ' "$1" | tail -1 | sed 's/^GPUMEM_RESULT //'; }
field() { python3 -c 'import json,sys; d=json.loads(sys.argv[1] or "{}"); print(d.get(sys.argv[2], ""))' "$1" "$2"; }

# one job under one setting: unrecorded, recorded, replayed
long_job() { # NAME CONF ARGS...
  local name=$1 conf=$2; shift 2
  local tag=$name.${conf:+exp}${conf:-default}
  [ "${LONG_PLAIN:-1}" = 1 ] &&
    (PYTORCH_CUDA_ALLOC_CONF=$conf timeout 300 python3 "$JOBS" "$@" > "$W/runs/$tag.plain.out" 2> "$W/runs/$tag.plain.err")
  local t0=$(date +%s)
  (cd "$W" && PYTORCH_CUDA_ALLOC_CONF=$conf timeout 400 gpurec -o "$W/$tag.zst" -- python3 "$JOBS" "$@" \
     > "$W/runs/$tag.rec.out" 2> "$W/runs/$tag.rec.err")
  local rc=$? t1=$(date +%s)
  local u=$(result "$W/runs/$tag.plain.out") r=$(result "$W/runs/$tag.rec.out")
  echo "{\"job\":\"$tag\",\"plain\":${u:-null},\"recorded\":${r:-null},\"gpurec_rc\":$rc,\"gpurec_s\":$((t1 - t0))}" >> "$W/results.jsonl"
  local ur=$(field "$u" max_memory_reserved) rr=$(field "$r" max_memory_reserved)
  [ "${LONG_PLAIN:-1}" = 1 ] &&
    check "$tag: recorded run's max_memory_reserved == unrecorded" $([ -n "$ur" ] && [ "$ur" = "$rr" ] && echo 1 || echo 0) "$rr vs $ur"
  gpuanalyze info "$W/$tag.zst" > "$W/$tag.info.txt" 2>&1
  gpureplay "$W/$tag.zst" --policy="pytorch${conf:+:$conf}" --json > "$W/$tag.replay.json" 2> "$W/$tag.replay.err"
  local pr=$(python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(max(r["peak_reserved_bytes"] for r in rows) if rows else "")' "$W/$tag.replay.json" 2>/dev/null)
  check "$tag: replay peak reserved == real max_memory_reserved" $([ -n "$pr" ] && [ "$pr" = "$rr" ] && echo 1 || echo 0) "$pr vs $rr"
  grep -q 'torch_history.source.*stream\|source=stream' "$W/$tag.info.txt" "$W/runs/$tag.rec.err" 2>/dev/null
  check "$tag: requests streamed (not the history ring)" $([ $? = 0 ] && echo 1 || echo 0) "$(grep -h 'gpurec:' "$W/runs/$tag.rec.err" | tail -3 | tr '\n' ' ' | cut -c1-400)"
  local cs=$(grep -o 'allocs_with_callsite[ =:]*[0-9]*' "$W/$tag.info.txt" | grep -o '[0-9]*$' | head -1)
  check "$tag: the requests have their callsites" $([ "${cs:-0}" -gt 0 ] && echo 1 || echo 0) "allocs_with_callsite ${cs:-none}"
  ls -l "$W/$tag.zst" | awk '{print "  trace bytes " $5}'
  grep -E '^events:|^  (alloc|free|free_requested|segment_alloc) ' "$W/$tag.info.txt" | sed 's/^/  /'
}

if has long; then
  echo "== long jobs"
  has trainonly || long_job bigfirst "" bigfirst ${BIG_N:-2200000}
  has smoke || has trainonly || long_job bigfirst expandable_segments:True bigfirst ${BIG_N:-2200000}
  has smoke || long_job train "" train ${TRAIN_STEPS:-600}
  has smoke || [ "${TRAIN_EXPANDABLE:-1}" = 0 ] || long_job train expandable_segments:True train ${TRAIN_STEPS:-600}
fi

if has kill; then
  echo "== SIGKILL halfway"
  export KILLME_LOG=$W/killme.log
  (cd "$W" && gpurec -o "$W/killme.zst" -- python3 "$JOBS" killme > "$W/runs/killme.out" 2> "$W/runs/killme.err") &
  GP=$!
  sleep 8
  CH=$(pgrep -f "^python3 $JOBS killme" | head -1)  # the job, not gpurec (whose command line holds it too)
  KT=$(python3 -c 'import time; print(time.monotonic_ns())')
  kill -9 "$CH"
  wait $GP
  echo "  gpurec rc=$? (child SIGKILLed at monotonic $KT)"
  tail -3 "$W/runs/killme.err"
  gpuanalyze info "$W/killme.zst" > "$W/killme.info.txt" 2>&1
  ALLOCS=$(awk '$1=="alloc"{print $2}' "$W/killme.info.txt" | head -1)
  WANT=$(awk -v k="$KT" '$2 <= k - 1000000000 {n=$1} END{print n+0}' "$W/killme.log")
  LAST=$(tail -1 "$W/killme.log" | awk '{print $1}')
  check "killme: the trace holds every allocation logged 1 s before the kill" \
    $([ -n "$ALLOCS" ] && [ "$ALLOCS" -ge "$WANT" ] && echo 1 || echo 0) "$ALLOCS allocations in the trace, $WANT logged by kill-1s, $LAST by the last log line"
  gpureplay "$W/killme.zst" --json > "$W/killme.replay.json" 2> "$W/killme.replay.err"
  check "killme: the trace replays" $([ $? = 0 ] && echo 1 || echo 0) "$(head -c 200 "$W/killme.replay.json")"
  # issue 24 item 2: the merged trace of a killed job is not "complete": its header says killed by
  # SIGKILL, and gpurec's summary and info say PARTIAL first
  COV=$(grep '^coverage:' "$W/killme.info.txt" | head -1)
  check "killme: info says PARTIAL, killed by SIGKILL" \
    $([[ $COV == *"PARTIAL trace: it stops at"*"killed by SIGKILL"* ]] && echo 1 || echo 0) "$COV"
  check "killme: gpurec's summary says PARTIAL, not complete" \
    $(grep -q "killme.zst: PARTIAL trace: it stops at" "$W/runs/killme.err" && ! grep -q ", complete," "$W/runs/killme.err" && echo 1 || echo 0) \
    "$(grep -m1 'PARTIAL\|complete' "$W/runs/killme.err" | head -c 300)"
  echo "{\"job\":\"killme\",\"allocs_in_trace\":${ALLOCS:-null},\"logged_1s_before\":$WANT,\"logged_last\":${LAST:-null}}" >> "$W/results.jsonl"
fi

if has cost; then
  echo "== allocation-bound loop, plain vs recorded, alternated"
  for round in 1 2 3; do
    python3 "$JOBS" loop 4 > "$W/runs/loop.plain.$round.out" 2>&1
    (cd "$W" && gpurec -o "$W/loop.$round.zst" -- python3 "$JOBS" loop 4 > "$W/runs/loop.rec.$round.out" 2> "$W/runs/loop.rec.$round.err")
    p=$(field "$(result "$W/runs/loop.plain.$round.out")" per_second)
    r=$(field "$(result "$W/runs/loop.rec.$round.out")" per_second)
    echo "  round $round: plain $p/s recorded $r/s ratio $(python3 -c "print(round($r/$p, 3))" 2>/dev/null)"
    echo "{\"job\":\"loop\",\"round\":$round,\"plain_per_s\":${p:-null},\"recorded_per_s\":${r:-null}}" >> "$W/results.jsonl"
  done
fi

if has oomcap; then
  echo "== a job that runs out under a limit it set itself (set_per_process_memory_fraction(0.02))"
  (cd "$W" && gpurec -o "$W/capped.zst" -- python3 "$JOBS" capped > "$W/runs/capped.out" 2> "$W/runs/capped.err")
  echo "  gpurec rc=$?"; grep -E "OutOfMemoryError|allowed" "$W/runs/capped.err" | tail -1 | cut -c1-300
  CAP=$(sed -n 's/^GPUMEM_CAP //p' "$W/runs/capped.out")
  gpuanalyze info "$W/capped.zst" > "$W/capped.info.txt" 2>&1
  grep -E "per_process_memory_fraction|oom.message" "$W/capped.info.txt" | cut -c1-300
  check "capped: the trace holds the limit the job set" $(grep -q "torch.per_process_memory_fraction=0.02" "$W/capped.info.txt" && echo 1 || echo 0) "cap $CAP"
  gpuanalyze oom "$W/capped.zst" > "$W/capped.oom.txt" 2>&1
  sed 's/^/  /' "$W/capped.oom.txt" | head -12
  gpureplay "$W/capped.zst" --explain-oom --json > "$W/capped.oom.json" 2>/dev/null
  GOT=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("capacity_bytes") or "")' "$W/capped.oom.json" 2>/dev/null)
  check "capped: the OOM verdict replays within the job's own limit" \
    $([ -n "$GOT" ] && [ -n "$CAP" ] && [ "$GOT" -le "$CAP" ] && echo 1 || echo 0) "verdict's capacity ${GOT:-none} vs the limit $CAP"
  echo "{\"job\":\"capped\",\"cap\":${CAP:-null},\"verdict_capacity\":${GOT:-null}}" >> "$W/results.jsonl"
fi

if has costx; then
  echo "== allocation-bound loop across processes: plain, gpurec --mode=native (CUPTI only), the default without callsites, the default"
  PIN=${COSTX_PIN:+taskset -c $COSTX_PIN}  # COSTX_PIN=2,3: every process on the same two CPUs
  [ -n "$PIN" ] && echo "  pinned: $PIN"
  for round in $(seq ${COSTX_ROUNDS:-5}); do
    line="  round $round:"
    for v in ${COSTX_VARIANTS:-plain native nosites default}; do
      case $v in
        plain) $PIN python3 "$JOBS" loop 2 > "$W/runs/lx.$v.$round.out" 2>&1 ;;
        native) (cd "$W" && $PIN gpurec -q --mode=native -o "$W/lx.zst" -- python3 "$JOBS" loop 2 > "$W/runs/lx.$v.$round.out" 2>/dev/null) ;;
        nosites) (cd "$W" && GPUMEM_TORCH_SITES=0 $PIN gpurec -q -o "$W/lx.zst" -- python3 "$JOBS" loop 2 > "$W/runs/lx.$v.$round.out" 2>/dev/null) ;;
        default) (cd "$W" && $PIN gpurec -q -o "$W/lx.zst" -- python3 "$JOBS" loop 2 > "$W/runs/lx.$v.$round.out" 2>/dev/null) ;;
      esac
      r=$(result "$W/runs/lx.$v.$round.out")
      line="$line $v $(field "$r" per_second | cut -d. -f1)/$(field "$r" per_second_second_half | cut -d. -f1)"
      echo "{\"job\":\"loopx\",\"variant\":\"$v\",\"round\":$round,\"result\":${r:-null}}" >> "$W/results.jsonl"
    done
    echo "$line"
  done
  rm -f "$W"/lx*.zst
fi

if has parts; then
  echo "== each part of the streamed default, in one process"
  (cd "$W" && gpurec -q -o "$W/parts.zst" -- python3 "$ROOT/tests/gpu/stream_cost.py" ${STREAM_COST_ARGS:-} > "$W/runs/parts.out" 2> "$W/runs/parts.err")
  echo "  gpurec rc=$?"; tail -3 "$W/runs/parts.err"
  res=$(sed -n 's/^RESULT //p' "$W/runs/parts.out" | tail -1)
  check "parts: the bench ran" $([ -n "$res" ] && echo 1 || echo 0) "$(tail -c 300 "$W/runs/parts.out")"
  [ -n "$res" ] && echo "{\"job\":\"parts\",\"result\":$res}" >> "$W/results.jsonl"
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(json.dumps(r, indent=1, sort_keys=True))' "$res" 2>/dev/null
fi

n=$(grep -c '' "$CHECKS"); f=$(grep -c '^FAIL' "$CHECKS")
echo "$n checks, $f failed" | tee -a "$CHECKS"
rm -f "$W"/loop.*.zst
(cd /tmp && tar cJf "$OUT/stream.tar.xz" --exclude='*.zst' streamwork)
ls -l "$W"/*.zst
