#!/bin/bash
# cost_gpu.sh: where the default mode's cost goes (issue 24 item 5), one device call. Runs the
# host-bound step (bench rec_overhead.py, ~1000 allocations per step, 150 steps) and the
# allocation-bound loop (cost.py, 4 s) under: plain; gpurec default (stream + callsite hook);
# GPUMEM_TORCH_SITES=0 (stream alone); GPUMEM_TORCH_STREAM=0 (the history + hook, the previous
# default); GPUMEM_CALLSITES=none (stream, no callsites at all). Variants alternated, ROUNDS rounds.
# Also: gpurec -o /dev/full must be refused. Output: $OUT/cost.tar.gz.
set -u
S=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/costout}; W=/tmp/costwork; rm -rf "$W"; mkdir -p "$W" "$OUT"
ROUNDS=${1:-2}
exec > >(tee -a "$W/log.txt") 2>&1
echo "== cost_gpu.sh $(date -u)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pip install --no-index --no-deps --force-reinstall --break-system-packages -q "$S"/gpumem_tools-*.whl 2>&1 | tail -2
gpurec --version | head -2; python3 -c 'import torch; print("torch", torch.__version__)'
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
cd "$W"
echo "== devfull"; gpurec -o /dev/full -- python3 -c 'print(1)'; echo "  rc=$? $(ls /dev/full.zst 2>&1)"
T0=$(date +%s)
one() { # VARIANT JOB
  local v=$1 j=$2 f="$W/$2.$1.$r"
  local cmd=(python3 "$S/rec_overhead.py" --history none --steps 150)
  [ "$j" = loop ] && cmd=(python3 "$S/cost.py" 4)
  case $v in
    plain) "${cmd[@]}" > "$f.out" 2> "$f.err" ;;
    default) gpurec -o "$W/t.zst" -- "${cmd[@]}" > "$f.out" 2> "$f.err" ;;
    nosites) GPUMEM_TORCH_SITES=0 gpurec -o "$W/t.zst" -- "${cmd[@]}" > "$f.out" 2> "$f.err" ;;
    history) GPUMEM_TORCH_STREAM=0 gpurec -o "$W/t.zst" -- "${cmd[@]}" > "$f.out" 2> "$f.err" ;;
    nocs) gpurec --callsites=none -o "$W/t.zst" -- "${cmd[@]}" > "$f.out" 2> "$f.err" ;;
  esac
  echo "  $j $v $r: $(grep RESULT "$f.out" | head -c 200)"
  grep -h "streamed\|bytes/event" "$f.err" | head -2 | cut -c1-220 | sed 's/^/      /'
  rm -f "$W"/t*.zst
}
for r in $(seq 1 "$ROUNDS"); do
  for v in plain default nosites history nocs; do
    [ $(( $(date +%s) - T0 )) -gt 190 ] && break 2
    one $v step; one $v loop
  done
done
python3 - "$W" <<'PY'
import glob, json, os, statistics, sys
W = sys.argv[1]
def res(p):
    for l in open(p):
        if l.startswith("RESULT "): return json.loads(l[7:])
for job, key in (("step", "step_ms_median"), ("loop", "allocs")):
    base = None
    for v in ("plain", "default", "nosites", "history", "nocs"):
        xs = [res(p)[key] for p in sorted(glob.glob(os.path.join(W, "%s.%s.*.out" % (job, v)))) if res(p)]
        if not xs: continue
        m = statistics.median(xs)
        base = base or m
        print("%s %-8s %s median %.1f  ratio %.3f" % (job, v, [round(x, 1) for x in xs], m, m / base))
PY
tar czf "$OUT/cost.tar.gz" -C /tmp costwork
