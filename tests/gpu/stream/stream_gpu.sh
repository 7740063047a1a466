#!/bin/bash
# stream_gpu.sh: issue 24's GPU checks of gpurec's default mode with PyTorch's requests streamed
# (recorder/rec_tracker.c), one device call. Run from the repository root with this folder
# carried as .dev/stream (the wheel, trace_csv, the jobs beside this script):
#   bash .dev/stream/stream_gpu.sh [STAGES]   STAGES: smoke,big,train,kill,cost,devfull (all)
# big:   bigfirst.py (8 GiB first, then 2.1 M allocations), default and expandable_segments:True;
# train: train.py (nanoGPT-style GPT, eval + checkpoint), default and expandable_segments:True;
#        each recorded with plain `gpurec -o t.zst -- python3 job.py`, replayed with gpureplay
#        --policy=pytorch[:CONF]: peak reserved == the job's own max_memory_reserved (the tracker
#        changes no allocator decision, so the recorded run's own figure is the truth);
# kill:  killed.py SIGKILLed after 10 s: the trace's allocations >= the job's count 1 s before;
# cost:  cost.py (torch.empty loop, 4 s) and bench rec_overhead.py (host-bound step), plain and
#        recorded, alternated 3 rounds;
# devfull: gpurec -o /dev/full refused.
# The wheel is force-installed: a warm machine may hold another build of the same version,
# which a plain pip install keeps (this script's first run measured such a build).
# Output: $OUT/stream.tar.gz (log, checks, results, replay JSON, gpurec stderr, small traces).
set -u
S=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/streamout}
W=/tmp/streamwork
rm -rf "$W"; mkdir -p "$W" "$OUT"
WHAT=${1:-smoke,big,train,kill,cost,devfull}
has() { [[ ",$WHAT," == *",$1,"* ]]; }
exec > >(tee -a "$W/log.txt") 2>&1
echo "== stream_gpu.sh $WHAT $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -m pip install --no-index --no-deps --force-reinstall --break-system-packages -q "$S"/gpumem_tools-*.whl 2>&1 | tail -2
python3 -c 'import torch; print("torch", torch.__version__)'
command -v gpurec gpureplay
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
cd "$W"
T0=$(date +%s)
left() { echo $(( 320 - ($(date +%s) - T0) )); }

# rec NAME CONF -- args: record the job, replay the trace
rec() {
  local name=$1 conf=$2; shift 3
  local t=$(date +%s%N)
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 200 gpurec -o "$W/$name.zst" -- "$@" > "$W/$name.out" 2> "$W/$name.err"
  echo "  $name rc=$? $(( ($(date +%s%N) - t) / 1000000 )) ms"; tail -5 "$W/$name.err" | sed 's/^/    /'
  ls -la "$W/$name".* 2>/dev/null | awk '{print "    " $5, $9}'
  local pol=pytorch; [ -n "$conf" ] && pol="pytorch:$conf"
  gpureplay "$W/$name.zst" --policy="$pol" --json > "$W/$name.replay.json" 2> "$W/$name.replay.err"
  echo "    replay rc=$? $(head -c 300 "$W/$name.replay.err")"
}

if has smoke; then
  echo "== smoke"
  rec smoke "" -- python3 -c 'import torch; x = torch.empty(1000, device="cuda"); del x; print("RESULT {\"max_memory_reserved\": %d}" % torch.cuda.max_memory_reserved())'
  cat "$W/smoke.err"
fi
if has big; then
  echo "== big $(left) s left"
  rec big "" -- python3 "$S/bigfirst.py" 2100000
  rec big_exp "expandable_segments:True" -- python3 "$S/bigfirst.py" 2100000
fi
if has train; then
  echo "== train $(left) s left"
  rec train "" -- python3 "$S/train.py" 35
  rec train_exp "expandable_segments:True" -- python3 "$S/train.py" 35
fi
if has kill; then
  echo "== kill $(left) s left"
  gpurec -o "$W/killed.zst" -- python3 "$S/killed.py" "$W/killed.log" > "$W/killed.out" 2> "$W/killed.err" &
  GP=$!
  sleep 12
  CH=$(pgrep -P $GP | head -1)
  python3 -c 'import time; print("%.6f" % time.monotonic())' > "$W/killed.killtime"
  kill -9 "$CH"; wait $GP; echo "  gpurec rc=$?"; cat "$W/killed.err"
  "$S/trace_csv" "$W/killed.zst" > "$W/killed.csv" 2> "$W/killed.csv.err"; echo "  trace_csv rc=$?"
  gpureplay "$W/killed.zst" --policy=pytorch --json > "$W/killed.replay.json" 2> "$W/killed.replay.err"
  echo "  replay rc=$?"; ls -la "$W"/killed*
fi
if has devfull; then
  echo "== devfull"
  gpurec -o /dev/full -- python3 -c 'print(1)'; echo "  rc=$?"; ls -la /dev/full.zst 2>&1 | head -1
fi
if has cost; then
  echo "== cost $(left) s left"
  for r in 1 2 3; do
    [ "$(left)" -lt 60 ] && { echo "  out of time"; break; }
    python3 "$S/cost.py" 4 > "$W/cost.plain.$r.out" 2>&1; tail -1 "$W/cost.plain.$r.out"
    gpurec -q -o "$W/cost.$r.zst" -- python3 "$S/cost.py" 4 > "$W/cost.rec.$r.out" 2> "$W/cost.rec.$r.err"; tail -1 "$W/cost.rec.$r.out"
    python3 "$S/rec_overhead.py" --history none --steps 150 > "$W/step.plain.$r.out" 2>&1; tail -1 "$W/step.plain.$r.out"
    gpurec -q -o "$W/step.$r.zst" -- python3 "$S/rec_overhead.py" --history none --steps 150 > "$W/step.rec.$r.out" 2> "$W/step.rec.$r.err"; tail -1 "$W/step.rec.$r.out"
    ls -la "$W/cost.$r.zst" "$W/step.$r.zst" | awk '{print "    " $5, $9}'
  done
fi
echo "== checks"
python3 "$S/stream_checks.py" "$W" | tee "$W/checks.txt"
rm -f "$W"/*.csv /tmp/stream_ckpt.pt
mkdir -p "$W/traces"; for f in smoke killed; do [ -f "$W/$f.zst" ] && cp "$W/$f.zst" "$W/traces/"; done
rm -f "$W"/*.zst
tar czf "$OUT/stream.tar.gz" -C /tmp streamwork
echo "== done $(date -u)"
