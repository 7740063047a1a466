#!/bin/bash
# defmode_gpu.sh: gpurec's default capture (--mode=auto, issue 15) on the GPU machine, one call.
# Needs .dist/ built here and carried (like tests/gpu/jax_corpus.sh): gpurec,
# libgpumem_inject.so, trace_csv, gpureplay (and .dist/lib/ if the build put libraries there).
#   run (from the repository root): bash tests/gpu/defmode_gpu.sh [STAGES]
#   STAGES: comma list of jobs,loop,snapcost,ddp,jax (default: all; ddp runs only with 2 GPUs)
# jobs:     four PyTorch jobs (traces/workloads train_amp, infer_varlen, two_streams;
#           tests/gpu/predict_job.py --batch 8) and train_amp under the user's
#           expandable_segments:True, each unrecorded and recorded with the default mode:
#           the job's own max_memory_reserved/max_memory_allocated must be equal in both runs,
#           the recording one trace (capture torch-history) with PYTORCH_CUDA_ALLOC_CONF as the
#           user set it, and its replay (gpureplay --policy=pytorch[:CONF]) at the real
#           max_memory_reserved to the byte.
# loop:     host-bound loop (bench/recorder/rec_overhead.py, ~1000 allocations per step):
#           unrecorded / PyTorch's history alone (context=None) / gpurec default / gpurec
#           requests, rounds interleaved; median step ms, overhead vs unrecorded per round.
# snapcost: the cost of torch.cuda.memory._snapshot() at 10/100/300 steps of that loop (what a
#           periodic dump bounding SIGKILL's loss would cost).
# ddp:      torchrun 2 ranks (tests/gpu/ddp_train.py) under the default: each rank's replay at
#           its own max_memory_reserved, equal to the unrecorded run's.
# jax:      the lead's check that XLA's platform vs cuda_async allocator make the same requests
#           (XLA assigns buffers at compile time): one JAX job recorded both ways, the request
#           sizes rounded up to 2 MiB compared as multisets.
# Output: $OUT/defmode.tar.xz (results.jsonl, replay JSON, checks.txt, each run's out/err,
# trace headers, the traces) and $OUT/log.txt; checks.txt ends with "N checks, M failed".
set -u
OUT=${OUT:-/tmp/defmodeout}
WHAT=${1:-jobs,loop,snapcost,ddp,jax}
has() { [[ ",$WHAT," == *",$1,"* ]]; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
[ -d "$D/lib" ] && export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/defmodework
rm -rf "$W"; mkdir -p "$W/runs" "$W/rec" "$OUT"
PY=${PY:-python3}
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== defmode_gpu.sh $WHAT  $(date -u)  commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
$D/gpurec --version | head -4
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF

# run NAME VARIANT [env...] -- cmd...: one run (at most 150 s), output in runs/NAME.VARIANT.{out,err},
# its GPUMEM_RESULT / RESULT lines tagged into results.jsonl
run() {
  local name=$1 var=$2; shift 2
  [ -e "$W/STOP" ] && { echo "  out of time: $name $var not run"; return; }
  local envs=(X=1)
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local t0=$(date +%s%N)
  (cd "$W" && timeout 150 env "${envs[@]}" "$@" > "$W/runs/$name.$var.out" 2> "$W/runs/$name.$var.err")
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  grep -E '^(GPUMEM_RESULT|RESULT) ' "$W/runs/$name.$var.out" | sed -E 's/^(GPUMEM_RESULT|RESULT) //' | while read -r line; do
    echo "{\"job\":\"$name\",\"variant\":\"$var\",\"rc\":$rc,\"ms\":$ms,\"result\":$line}" >> "$W/results.jsonl"
  done
  grep -qE '^(GPUMEM_RESULT|RESULT) ' "$W/runs/$name.$var.out" ||
    echo "{\"job\":\"$name\",\"variant\":\"$var\",\"rc\":$rc,\"ms\":$ms,\"result\":null}" >> "$W/results.jsonl"
  echo "  $(date +%T) $name $var rc=$rc ${ms}ms"
}

# replay TRACE JOB VARIANT POLICY: gpureplay's JSON beside the results
replay() {
  $D/gpureplay "$1" --policy="$4" --json > "$W/replay.$2.$3.json" 2> "$W/replay.$2.$3.err"
  echo "  replay $2 $3 ($4) rc=$?: $(head -c 300 "$W/replay.$2.$3.json")"
  $D/trace_csv "$1" 2>/dev/null | grep '^#' | grep -v '^#stats' > "$W/header.$2.$3.txt"
  local b=$(basename "${1%.zst}")
  ls "$(dirname "$1")" | grep -cE "^${b}(\.[a-z].*)?\.zst$" > "$W/files.$2.$3.txt"
}

body() {
if has jobs; then
  echo "== jobs: unrecorded vs gpurec's default"
  WL=$ROOT/traces/workloads
  for j in train_amp infer_varlen two_streams predict_job train_amp_expandable; do
    case $j in
      predict_job) P=("$PY" "$ROOT/tests/gpu/predict_job.py" --batch 8); E=() ;;
      train_amp_expandable) P=("$PY" "$WL/train_amp.py"); E=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) ;;
      *) P=("$PY" "$WL/$j.py"); E=() ;;
    esac
    run $j unrec "${E[@]}" -- "${P[@]}"
    run $j auto "${E[@]}" -- $D/gpurec -o "$W/rec/$j.zst" -- "${P[@]}"
    pol=pytorch; [ ${#E[@]} -gt 0 ] && pol="pytorch:${E[0]#PYTORCH_CUDA_ALLOC_CONF=}"
    [ -f "$W/rec/$j.zst" ] && replay "$W/rec/$j.zst" $j auto "$pol"
    grep '^gpurec:' "$W/runs/$j.auto.err" | cut -c1-400
  done
fi
if has loop; then
  echo "== loop: host-bound step time, rounds interleaved"
  L=("$PY" "$ROOT/bench/recorder/rec_overhead.py" --steps ${STEPS:-200} --warmup 30)
  for round in 1 2 3; do
    run loop unrec.r$round -- "${L[@]}"
    run loop history.r$round -- "${L[@]}" --history nostacks
    run loop auto.r$round -- $D/gpurec -q -o "$W/rec/loop.auto.r$round.zst" -- "${L[@]}"
    run loop requests.r$round -- $D/gpurec -q --mode=requests -o "$W/rec/loop.requests.r$round.zst" -- "${L[@]}"
    if [ -n "${LOOP_MORE:-}" ]; then  # where the default's cost goes: CUPTI's activity records instead of callbacks
      run loop auto_activity.r$round -- $D/gpurec -q --capture=activity -o "$W/rec/loop.act.r$round.zst" -- "${L[@]}"
      run loop auto_empty.r$round -- env GPUMEM_DIAG=empty_callbacks $D/gpurec -q -o "$W/rec/loop.empty.r$round.zst" -- "${L[@]}"
    fi
  done
  ls -la "$W"/rec/loop.* | head
fi
if has snapcost; then
  echo "== snapcost: torch.cuda.memory._snapshot() with the history on (no stacks)"
  run snapcost plain -- "$PY" "$ROOT/tests/gpu/defmode_snapcost.py"
  cat "$W/runs/snapcost.plain.out"
fi
if has ddp; then
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    echo "== ddp: torchrun 2 ranks, unrecorded and under the default"
    T=(torchrun --nproc_per_node=2 "$ROOT/tests/gpu/ddp_train.py")
    run ddp unrec NCCL_NVLS_ENABLE=0 -- "${T[@]}"
    run ddp auto NCCL_NVLS_ENABLE=0 -- $D/gpurec -o "$W/rec/ddp.zst" -- "${T[@]}"
    for r in 0 1; do
      f=$(ls "$W"/rec/ddp.rank$r.pid*.zst 2>/dev/null | head -1)
      [ -n "$f" ] && replay "$f" ddp rank$r pytorch
    done
  else
    echo "== ddp: skipped (one GPU; run with kind nvidia-h200-x2 or nvidia-h100-x2)"
  fi
fi
if has jax && $PY -c 'import jax' 2>/dev/null; then
  echo "== jax: cuda_async (the default's switch) vs platform: the same requests?"
  J=("$PY" "$ROOT/traces/workloads/jax/jax_train_shapes.py")
  run jax auto -- $D/gpurec -o "$W/rec/jax.auto.zst" -- "${J[@]}"
  run jax platform XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_PYTHON_CLIENT_PREALLOCATE=false -- \
      $D/gpurec --mode=native -o "$W/rec/jax.platform.zst" -- "${J[@]}"
  for v in auto platform; do $D/trace_csv "$W/rec/jax.$v.zst" > "$W/jax.$v.csv" 2>/dev/null; done
fi
}

(body) &
bp=$!
( sleep ${BUDGET:-540}; touch "$W/STOP" ) &
wp=$!
wait $bp   # not a bare wait: that would wait for the tee above too
kill $wp 2>/dev/null

echo "== checks"
$PY - "$W" > "$W/checks.txt" <<'PYEOF'
import collections, glob, json, os, statistics, sys
W = sys.argv[1]
res = collections.defaultdict(list)
for l in open(os.path.join(W, "results.jsonl")) if os.path.exists(os.path.join(W, "results.jsonl")) else []:
    r = json.loads(l)
    res[(r["job"], r["variant"])].append(r)
n = bad = 0
def check(name, ok, detail=""):
    global n, bad
    n += 1; bad += 0 if ok else 1
    print("%s: %s%s" % ("ok" if ok else "FAIL", name, ("  (" + detail + ")") if detail else ""))
def one(job, var):
    rs = [r for r in res.get((job, var), []) if r["result"]]
    return rs[0]["result"] if rs else None
def replay(job, var):
    p = os.path.join(W, "replay.%s.%s.json" % (job, var))
    try:
        return json.loads(open(p).readline())
    except Exception:
        return None
for job in ("train_amp", "infer_varlen", "two_streams", "predict_job", "train_amp_expandable"):
    u, a, rp = one(job, "unrec"), one(job, "auto"), replay(job, "auto")
    if not u or not a:
        check("%s: both runs gave results" % job, False, "unrec %s auto %s" % (bool(u), bool(a))); continue
    for k in ("max_memory_reserved", "max_memory_allocated"):
        check("%s: %s recorded == unrecorded" % (job, k), u[k] == a[k], "%s vs %s" % (a[k], u[k]))
    check("%s: PYTORCH_CUDA_ALLOC_CONF as the user set it" % job, a.get("alloc_conf", "") == u.get("alloc_conf", ""),
          repr(a.get("alloc_conf")))
    hdr = open(os.path.join(W, "header.%s.auto.txt" % job)).read() if os.path.exists(os.path.join(W, "header.%s.auto.txt" % job)) else ""
    check("%s: capture torch-history" % job, "#capture_mode=torch-history" in hdr)
    files = open(os.path.join(W, "files.%s.auto.txt" % job)).read().strip() if os.path.exists(os.path.join(W, "files.%s.auto.txt" % job)) else "?"
    check("%s: one trace" % job, files == "1", files)
    got = rp and rp.get("peak_reserved_bytes")
    check("%s: replay peak reserved == real max_memory_reserved" % job, got == u["max_memory_reserved"],
          "%s vs %s, %+.2f %%" % (got, u["max_memory_reserved"], 100.0 * ((got or 0) - u["max_memory_reserved"]) / u["max_memory_reserved"]))
    seen = [l for l in hdr.splitlines() if l.startswith("#kv.torch_history.")]
    print("   ", " ".join(s[4:] for s in seen))
# loop
loop = collections.defaultdict(list)
for (job, var), rs in res.items():
    if job == "loop" and rs and rs[0]["result"]:
        v, rnd = var.rsplit(".r", 1)
        loop[v].append((int(rnd), rs[0]["result"]["step_ms_median"], rs[0]["result"].get("allocs_per_step")))
if loop:
    print("\nhost-bound loop, median step ms per round (overhead vs unrecorded of the same round):")
    base = {r: ms for r, ms, _ in loop.get("unrec", [])}
    for v in ("unrec", "history", "auto", "requests", "auto_activity", "auto_empty"):
        rows = sorted(loop.get(v, []))
        ov = [100.0 * (ms - base[r]) / base[r] for r, ms, _ in rows if r in base]
        print("  %-13s %s  overhead median %s  allocs/step %s" % (v, " ".join("%.3f" % ms for _, ms, _ in rows),
              "%+.2f %%" % statistics.median(ov) if ov else "-", rows[0][2] if rows else "-"))
# snapshot cost
for r in res.get(("snapcost", "plain"), []):
    if r["result"]:
        x = r["result"]
        print("snapshot(): %d entries after %d steps: %.4f s per call (%.0f ns/entry), dump %.4f s, %d bytes; step %.3f ms"
              % (x["entries"], x["steps"], x["snapshot_s"], x["snapshot_ns_per_entry"], x["dump_s"], x["dump_bytes"], x["step_ms_median"]))
# ddp
du = [r["result"] for r in res.get(("ddp", "unrec"), []) if r["result"]]
da = [r["result"] for r in res.get(("ddp", "auto"), []) if r["result"]]
for rk in (0, 1):
    u = [x for x in du if x.get("rank") == rk]; a = [x for x in da if x.get("rank") == rk]
    if not u or not a:
        continue
    u, a = u[0], a[0]
    check("ddp rank %d: max_memory_reserved recorded == unrecorded" % rk, u["max_memory_reserved"] == a["max_memory_reserved"],
          "%s vs %s" % (a["max_memory_reserved"], u["max_memory_reserved"]))
    check("ddp rank %d: max_memory_allocated recorded == unrecorded" % rk, u["max_memory_allocated"] == a["max_memory_allocated"],
          "%s vs %s" % (a["max_memory_allocated"], u["max_memory_allocated"]))
    rp = replay("ddp", "rank%d" % rk)
    got = rp and rp.get("peak_reserved_bytes")
    check("ddp rank %d: replay == its max_memory_reserved" % rk, got == a["max_memory_reserved"], "%s vs %s" % (got, a["max_memory_reserved"]))
# jax: request sizes (rounded up to 2 MiB) of cuda_async's allocs vs platform's VMM maps
def jax_sizes(path, kinds):
    out, cols = [], None
    for line in open(path):
        if line.startswith("#"):
            continue
        f = line.rstrip("\n").split(",")
        if cols is None:
            cols = f; continue
        r = dict(zip(cols, f))
        if r["kind"] in kinds and r["mem_kind"] == "device":
            out.append((int(r["size"]) + (2 << 20) - 1) // (2 << 20) * (2 << 20))
    return collections.Counter(out)
pa, pp = os.path.join(W, "jax.auto.csv"), os.path.join(W, "jax.platform.csv")
if os.path.exists(pa) and os.path.exists(pp):
    a, p = jax_sizes(pa, {"alloc"}), jax_sizes(pp, {"vmm_map"})
    check("jax: cuda_async requests == platform requests (sizes rounded to 2 MiB)", a == p,
          "%d vs %d requests; differing sizes: %s" % (sum(a.values()), sum(p.values()), dict(list(((a - p) + (p - a)).items())[:8])))
print("\n%d checks, %d failed" % (n, bad))
PYEOF
cat "$W/checks.txt"
tar -C "$W" -cJf "$OUT/defmode.tar.xz" --exclude='*.csv' . || echo "tar rc=$?"
ls -la "$OUT"
echo "== done $(date -u)"
