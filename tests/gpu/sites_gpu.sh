#!/bin/bash
# sites_gpu.sh: callsites by default (issue 15, item 3) on the GPU machine, one call, < 4 min.
# Needs .dist/ built here and carried: gpurec libgpumem_inject.so trace_csv gpureplay
# [gpuanalyze] (and .dist/lib/ if the build put libraries there).
#   run (from the repository root): PY=/opt/torch/.venv/bin/python3 bash tests/gpu/sites_gpu.sh [STAGES]
#   STAGES: comma list of job,bench,loop (default all)
# job:  tests/gpu/sites_job.py unrecorded, then recorded with the default (gpurec -o T -- ...,
#       nothing else): its allocations must carry the job's own lines (file:line:function) with
#       the counts and sizes the job made there; "Live at the peak, by callsite" (gpuanalyze's
#       table, and recomputed here from the trace) led by the job's 256 MiB line; no alloc_site
#       note left in the trace; PYTORCH_CUDA_ALLOC_CONF still unset in the job; the recorded
#       run's max_memory_reserved equal to the unrecorded one's and to the replay's peak.
# bench: tests/gpu/sites_bench.py under the default, twice (two processes): the hook's cost step
#       by step in one process (the host-bound loop's steps rotated between hook off, hook on,
#       and PyTorch's own stacks per allocation), and in a tight loop of cached allocations.
# loop: bench/recorder/rec_overhead.py (host-bound: ~1000 allocations per ~17 ms step), rounds
#       interleaved with the order rotated, every process pinned to CPUs 2-5: unrecorded; gpurec's
#       default without the callsite hook (GPUMEM_TORCH_SITES=0: the default before it); the
#       default (hook on). Overheads are per-round paired differences, median over rounds, and ns
#       per allocation (processes differ by several % on the device machine: bench is the
#       resolving measurement, loop the end-to-end one).
# Output: $OUT/sites.tar.xz (results, checks.txt, each run's out/err, traces) and $OUT/log.txt;
# checks.txt ends with "N checks, M failed".
set -u
OUT=${OUT:-/tmp/sitesout}
WHAT=${1:-job,bench,loop}
has() { [[ ",$WHAT," == *",$1,"* ]]; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
[ -d "$D/lib" ] && export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/siteswork
rm -rf "$W"; mkdir -p "$W/runs" "$W/rec" "$OUT"
PY=${PY:-python3}
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== sites_gpu.sh $WHAT  $(date -u)  commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
C10=$($PY -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10_cuda.so"))')
echo "libc10_cuda.so imports: $(nm -D "$C10" 2>/dev/null | grep -c ' U _ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE') (the hooked report)"
CPUS=${CPUS:-2-5}
PIN=(); command -v taskset >/dev/null && PIN=(taskset -c "$CPUS")

# run NAME VARIANT [env...] -- cmd...: one process (at most 120 s), output in runs/NAME.VARIANT.*
run() {
  local name=$1 var=$2; shift 2
  local envs=(X=1)
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local t0=$(date +%s%N)
  (cd "$W" && timeout 120 env "${envs[@]}" "${PIN[@]}" "$@" > "$W/runs/$name.$var.out" 2> "$W/runs/$name.$var.err")
  local rc=$?
  echo "$rc" > "$W/runs/$name.$var.rc"
  echo "  $(date +%T) $name $var rc=$rc $(( ($(date +%s%N) - t0) / 1000000 ))ms"
}

T0=$(date +%s)
if has job; then
  echo "== job: callsites of a default recording"
  J=("$PY" "$ROOT/tests/gpu/sites_job.py")
  run job unrec -- "${J[@]}"
  run job auto -- "$D/gpurec" -o "$W/rec/job.zst" -- "${J[@]}"
  grep -E '^(gpurec|\[gpurec\])' "$W/runs/job.auto.err" | cut -c1-300
  "$D/trace_csv" "$W/rec/job.zst" > "$W/job.csv" 2> "$W/job.csv.err"
  "$D/gpureplay" "$W/rec/job.zst" --policy=pytorch --json > "$W/job.replay.json" 2> "$W/job.replay.err"
  if "$D/gpuanalyze" --version >/dev/null 2>&1; then
    (cd "$W" && "$D/gpuanalyze" report -q rec/job.zst --gpureplay="$D/gpureplay" > ga.out 2> ga.err &&
       "$D/gpuanalyze" report --db rec/job.zst.db --csv=gacsv > ga.text 2>> ga.err)
    grep -A8 "Live at the peak, by callsite" "$W/ga.text" | head -10
  else
    echo "  (no .dist/gpuanalyze: its table is not checked, only the one recomputed here)"
  fi
fi
if has bench; then
  echo "== bench: the hook step by step in one process"
  for i in 1 2; do
    run bench r$i -- "$D/gpurec" -q -o "$W/rec/bench.r$i.zst" -- "$PY" "$ROOT/tests/gpu/sites_bench.py"
    grep '^RESULT' "$W/runs/bench.r$i.out" | cut -c1-600
    "$D/trace_csv" "$W/rec/bench.r$i.zst" 2>/dev/null | grep -E '^#kv.torch_history.allocs_with_callsite=' > "$W/bench.r$i.head"
  done
fi
if has loop; then
  echo "== loop: host-bound step time, rounds interleaved"
  L=("$PY" "$ROOT/bench/recorder/rec_overhead.py" --steps ${STEPS:-150} --warmup 20)
  VARS=(unrec nosites auto)
  for round in $(seq ${ROUNDS:-3}); do
    if [ $(( $(date +%s) - T0 )) -gt ${BUDGET:-150} ]; then
      echo "  budget spent: $((round - 1)) rounds"; break
    fi
    for k in 0 1 2; do
      v=${VARS[$(( (k + round - 1) % 3 ))]}
      case $v in
        unrec) run loop $v.r$round -- "${L[@]}" ;;
        nosites) run loop $v.r$round GPUMEM_TORCH_SITES=0 -- "$D/gpurec" -q -o "$W/rec/loop.$v.r$round.zst" -- "${L[@]}" ;;
        auto) run loop $v.r$round -- "$D/gpurec" -q -o "$W/rec/loop.$v.r$round.zst" -- "${L[@]}" ;;
      esac
    done
  done
  for f in "$W"/rec/loop.*.zst; do
    [ -f "$f" ] && echo "$(basename "$f") $("$D/trace_csv" "$f" 2>/dev/null | grep -E '^#kv.torch_history.(allocs_with_callsite|alloc_site_notes)=' | tr '\n' ' ')"
  done > "$W/loop.headers.txt"
  cat "$W/loop.headers.txt"
fi

echo "== checks"
$PY - "$W" "$ROOT/tests/gpu/sites_job.py" > "$W/checks.txt" <<'PYEOF'
import glob, json, os, re, statistics, sys
W, JOB = sys.argv[1], sys.argv[2]
n = bad = 0
def check(name, ok, detail=""):
    global n, bad
    n += 1; bad += 0 if ok else 1
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""))
def rd(p):
    try: return open(p).read()
    except OSError: return ""
def result(name):
    for l in rd(os.path.join(W, "runs", name + ".out")).splitlines():
        if l.startswith("RESULT "): return json.loads(l[7:])
    return None

if os.path.exists(os.path.join(W, "runs", "job.auto.rc")):
    src = open(JOB).read().splitlines()
    def site(tag):
        for i, l in enumerate(src, 1):
            if "# SITE:" + tag in l:
                fn = next(re.match(r"def (\w+)", src[k]).group(1) for k in range(i - 1, -1, -1) if src[k].startswith("def "))
                return "%s:%d:%s" % (JOB, i, fn)
    sites = {t: site(t) for t in ("big", "loop", "model")}
    un, au = result("job.unrec"), result("job.auto")
    err = rd(os.path.join(W, "runs", "job.auto.err"))
    check("job: both runs finished", un is not None and au is not None and rd(os.path.join(W, "runs", "job.auto.rc")).strip() == "0")
    out = rd(os.path.join(W, "runs", "job.auto.out"))
    check("job: PYTORCH_CUDA_ALLOC_CONF left unset", "PYTORCH_CUDA_ALLOC_CONF=<unset>" in out)
    m = re.search(r"callsites for (\d+) of (\d+) allocations", err)
    check("job: the merge gave allocations callsites", m is not None and int(m.group(1)) > 0, m.group(0) if m else err[-300:])
    check("job: no warning from the hook", "[gpurec] no callsites" not in err)
    strings, evs = {}, []
    for l in rd(os.path.join(W, "job.csv")).splitlines():
        if l.startswith("#string."):
            k, v = l[8:].split("=", 1); strings[k] = v
        elif l and not l.startswith("#"):
            f = l.split(",")
            if len(f) >= 10 and f[1] != "kind": evs.append(f)
    allocs = [e for e in evs if e[1] == "alloc" and not int(e[7], 0) & 0x8]
    cs = lambda e: strings.get(e[9], "")
    by = {t: [e for e in allocs if cs(e) == s] for t, s in sites.items()}
    want = (au or {}).get("allocs", {})
    check("job: the 256 MiB line (%s)" % sites["big"], len(by["big"]) == want.get("big") == 1 and by["big"][0][5] == str(256 << 20),
          "%d allocs" % len(by["big"]))
    check("job: the loop line, one allocation per iteration", len(by["loop"]) == want.get("loop") == 40 and
          all(e[5] == str(1 << 20) for e in by["loop"]), "%d allocs" % len(by["loop"]))
    check("job: the forward's allocations name the call line", len(by["model"]) >= 20, "%d allocs" % len(by["model"]))
    with_cs = sum(1 for e in allocs if cs(e))
    print("  allocations: %d, with a callsite: %d; distinct callsites: %d" % (len(allocs), with_cs, len({cs(e) for e in allocs})))
    check("job: no alloc_site note left in the trace", not any(e[1] == "alloc_site" for e in evs))
    # live at the peak by callsite, recomputed: an allocation lives until its free is requested
    live, cur, peak, at = {}, 0, -1, {}
    for e in evs:
        if int(e[7], 0) & 0x8: continue
        if e[1] == "alloc":
            live[e[4]] = (int(e[5]), cs(e)); cur += int(e[5])
            if cur > peak:
                peak = cur; at = dict(live)
        elif e[1] in ("free_requested", "free") and e[4] in live:
            cur -= live.pop(e[4])[0]
    agg = {}
    for size, c in at.values(): agg[c] = agg.get(c, 0) + size
    top = sorted(agg.items(), key=lambda kv: -kv[1])[:5]
    print("  live at the peak by callsite (recomputed): " + "; ".join("%s %d" % kv for kv in top))
    check("job: live at the peak led by the 256 MiB line", bool(top) and top[0][0] == sites["big"] and top[0][1] >= 256 << 20)
    check("job: the loop's 40 MiB live at the peak under its line", agg.get(sites["loop"], 0) == 40 << 20)
    ga = os.path.join(W, "gacsv", "live_at_peak_by_callsite.csv")
    if os.path.exists(ga):
        rows = [l for l in open(ga).read().splitlines()[1:] if l]
        check("job: gpuanalyze's 'Live at the peak, by callsite' led by the job's line", bool(rows) and sites["big"] in rows[0], rows[0] if rows else "")
    try:
        rp = json.loads(rd(os.path.join(W, "job.replay.json")).splitlines()[0])
    except (IndexError, ValueError):
        rp = {}
    if un and au:
        check("job: max_memory_reserved the same recorded and not", un["max_memory_reserved"] == au["max_memory_reserved"],
              "%d vs %d" % (un["max_memory_reserved"], au["max_memory_reserved"]))
        check("job: replay == max_memory_reserved", rp.get("peak_reserved_bytes") == au["max_memory_reserved"],
              "%s vs %d" % (rp.get("peak_reserved_bytes"), au["max_memory_reserved"]))

bench = [result("bench.r%d" % i) for i in (1, 2)]
bench = [b for b in bench if b]
if os.path.exists(os.path.join(W, "runs", "bench.r1.rc")):
    check("bench: both processes finished", len(bench) == 2)
    print("\n| bench process | allocs/step | step ms: no hook / hook / PyTorch stacks | hook vs no hook (paired) | stacks vs no hook (paired) | tight loop ns/alloc: no hook / hook (added) |")
    print("|---|---:|---|---|---|---|")
    for i, b in enumerate(bench, 1):
        print("| %d | %d | %.3f / %.3f / %.3f | %+.4f ms, %+.2f %%, %+.0f ns/alloc | %+.4f ms, %+.2f %%, %+.0f ns/alloc | %.0f / %.0f (%+.0f) |" % (
            i, b["allocs_per_step"], b["step_ms_median_nohook"], b["step_ms_median_hook"], b["step_ms_median_stacks"],
            b["paired_ms_hook"], b["paired_pct_hook"], b["ns_per_alloc_hook"],
            b["paired_ms_stacks"], b["paired_pct_stacks"], b["ns_per_alloc_stacks"],
            b["tight_ns_per_alloc_nohook"], b["tight_ns_per_alloc_hook"], b["tight_ns_added"]))
    heads = {i: rd(os.path.join(W, "bench.r%d.head" % i)) for i in (1, 2)}
    check("bench: gpurec's sitecustomize had hooked before the program ran", all(b.get("hooked_by_sitecustomize") for b in bench))
    check("bench: its recordings carry callsites", all("allocs_with_callsite=" in h and "allocs_with_callsite=0" not in h for h in heads.values()),
          " ".join(h.strip() for h in heads.values()))

runs = {}
for f in glob.glob(os.path.join(W, "runs", "loop.*.out")):
    v, r = os.path.basename(f)[5:-4].rsplit(".r", 1)
    res = result("loop.%s.r%s" % (v, r))
    if res: runs[(v, int(r))] = res
if runs:
    rounds = sorted({r for _, r in runs})
    vars_ = ["unrec", "nosites", "auto"]
    print("\n| variant | step ms per round | median | vs reference per round | median overhead | ns per allocation |")
    print("|---|---|---:|---|---:|---:|")
    ref = {"nosites": "unrec", "auto": "nosites"}
    apst = statistics.median([x["allocs_per_step"] for x in runs.values() if x.get("allocs_per_step")])
    summary = {}
    for v in vars_:
        ms = [runs[(v, r)]["step_ms_median"] for r in rounds if (v, r) in runs]
        if not ms: continue
        line = "| %s | %s | %.3f |" % (v, " / ".join("%.3f" % x for x in ms), statistics.median(ms))
        if v in ref:
            d = [runs[(v, r)]["step_ms_median"] - runs[(ref[v], r)]["step_ms_median"] for r in rounds
                 if (v, r) in runs and (ref[v], r) in runs]
            pct = [100 * (runs[(v, r)]["step_ms_median"] / runs[(ref[v], r)]["step_ms_median"] - 1) for r in rounds
                   if (v, r) in runs and (ref[v], r) in runs]
            if d:
                md = statistics.median(d)
                summary[v] = (md, statistics.median(pct), md * 1e6 / apst)
                line += " vs %s: %s | %+.3f ms, %+.2f %% | %+.0f |" % (ref[v], " / ".join("%+.2f %%" % p for p in pct),
                                                                    md, statistics.median(pct), md * 1e6 / apst)
        else:
            line += " - | - | - |"
        print(line)
    print("allocations per step: %d; rounds: %d" % (apst, len(rounds)))
    heads = rd(os.path.join(W, "loop.headers.txt"))
    check("loop: every process finished", all(rd(os.path.join(W, "runs", "loop.%s.r%d.rc" % k)).strip() == "0" for k in runs))
    check("loop: default recordings carry callsites", all(
        re.search(r"loop\.auto\.r\d+\.zst .*allocs_with_callsite=[1-9]", l) for l in heads.splitlines() if ".auto." in l)
        and ".auto." in heads)
    check("loop: GPUMEM_TORCH_SITES=0 recordings carry none", not any("allocs_with_callsite" in l for l in heads.splitlines() if ".nosites." in l))
print("%d checks, %d failed" % (n, bad))
PYEOF
cat "$W/checks.txt"
cp -r "$W/runs" "$W/checks.txt" "$OUT/" 2>/dev/null
tar -C "$W" -cJf "$OUT/sites.tar.xz" . 2>/dev/null
echo "== done $(date -u) ($(( $(date +%s) - T0 )) s)"
