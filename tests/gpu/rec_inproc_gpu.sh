#!/bin/bash
# rec_inproc_gpu.sh: what gpurec's default recording costs a host-bound PyTorch loop, part by part,
# measured in one process (issue 15: "+1 % at most"; processes differ by 10-20 % on the device
# machine). One call, < 3 min on an H100.
# Needs .dist/ built here and carried: gpurec libgpumem_inject.so trace_csv gpureplay (and
# .dist/lib/ if the build put libraries there).
#   run (from the repository root): PY=/opt/torch/.venv/bin/python3 bash tests/gpu/rec_inproc_gpu.sh
# Two processes (the between-process check), each: gpurec -q -o T -- python3
# tests/gpu/rec_inproc_bench.py, whose steps rotate between none / history / history + CUPTI's
# callbacks returning at once / history + CUPTI capturing / default (+ the callsite hook) and
# report paired differences (ms, %, ns per allocation, 95 % intervals): each part's increment
# and the whole default against none; the same for a tight loop of cached allocations. Each trace must say it was paused (dropped records counted, gpureplay's note), and
# is then discarded: it lacks what happened while paused.
# Output: $OUT/inproc.tar.xz (runs, checks.txt) and $OUT/log.txt; checks.txt ends "N checks, M failed".
set -u
OUT=${OUT:-/tmp/inprocout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
[ -d "$D/lib" ] && export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/inprocwork
rm -rf "$W"; mkdir -p "$W/runs" "$W/rec" "$OUT"
PY=${PY:-python3}
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== rec_inproc_gpu.sh  $(date -u)  commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
CPUS=${CPUS:-2-5}
PIN=(); command -v taskset >/dev/null && PIN=(taskset -c "$CPUS")
T0=$(date +%s)
for i in 1 2; do
  t=$(date +%s%N)
  (cd "$W" && timeout 150 "${PIN[@]}" "$D/gpurec" -q -o "$W/rec/b$i.zst" -- "$PY" "$ROOT/tests/gpu/rec_inproc_bench.py" \
     ${BENCH_ARGS:-} > "$W/runs/b$i.out" 2> "$W/runs/b$i.err")
  echo $? > "$W/runs/b$i.rc"
  echo "  $(date +%T) process $i rc=$(<"$W/runs/b$i.rc") $(( ($(date +%s%N) - t) / 1000000 ))ms"
  grep -v '^RESULT' "$W/runs/b$i.err" | head -5
  f=$(ls "$W"/rec/b$i*.zst 2>/dev/null | grep -v '\.db$' | head -1)
  if [ -n "$f" ]; then
    "$D/trace_csv" "$f" 2>/dev/null | grep '^#stats' > "$W/runs/b$i.stats"
    "$D/gpureplay" "$f" --policy=pytorch > "$W/runs/b$i.replay" 2>&1
    rm -f "$W"/rec/b$i*  # paused on purpose: not a trace of the program (rec_pause.c)
  fi
done
echo "== checks"
$PY - "$W" > "$W/checks.txt" <<'PYEOF'
import json, os, sys
W = sys.argv[1]
n = bad = 0
def check(name, ok, detail=""):
    global n, bad
    n += 1; bad += 0 if ok else 1
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""))
def rd(p):
    try: return open(os.path.join(W, "runs", p)).read()
    except OSError: return ""
res = []
for i in (1, 2):
    r = next((json.loads(l[7:]) for l in rd("b%d.out" % i).splitlines() if l.startswith("RESULT ")), None)
    check("process %d finished (gpurec rc %s)" % (i, rd("b%d.rc" % i).strip()), r is not None, "" if r else rd("b%d.err" % i)[-300:])
    if not r: continue
    res.append(r)
    check("process %d ran under the default: hooked, CUPTI capturing, history on" % i,
          r["hooked_by_sitecustomize"] and r["cupti_on_at_start"] and r["history_on_at_start"] is not False)
    st = rd("b%d.stats" % i)
    check("process %d: its trace counts the %d pauses as dropped records" % (i, r["cupti_pauses"]),
          r["cupti_pauses"] > 0 and " dropped=%d " % r["cupti_pauses"] in st, st.strip())
    check("process %d: gpureplay says so" % i, "its source dropped" in rd("b%d.replay" % i))
    check("process %d: said once on stderr" % i, rd("b%d.err" % i).count("capture paused by gpumem_bench_cupti") == 1)
def f(r, k, unit):
    lo, hi = r[("paired_ms_ci_" if unit == "ms" else "tight_ns_ci_") + k]
    if unit == "ms":
        return "%+.4f ms [%+.4f, %+.4f], %+.2f %%, %+.0f ns/alloc" % (r["paired_ms_" + k], lo, hi, r["paired_pct_" + k], r["ns_per_alloc_" + k])
    return "%+.0f [%+.0f, %+.0f]" % (r["tight_ns_added_" + k], lo, hi)
if res:
    print("\nhost-bound loop, paired per cycle (median [95 %% CI]); allocations per step: %s" % " / ".join("%d" % r["allocs_per_step"] for r in res))
    for i, r in enumerate(res, 1):
        print("process %d, step ms: none %.3f / hist %.3f / hist+dispatch %.3f / hist+CUPTI %.3f / default %.3f (steady default %.3f)" % (
            i, r["step_ms_median_none"], r["step_ms_median_hist"], r["step_ms_median_hist_dispatch"],
            r["step_ms_median_hist_cupti"], r["step_ms_median_default"], r["step_ms_steady_default"]))
    print("| what | against | " + " | ".join("process %d" % i for i in range(1, len(res) + 1)) + " |")
    print("|---|---|" + "---|" * len(res))
    rows = [("PyTorch's history", "none", "hist"), ("CUPTI's dispatch (empty callbacks)", "hist", "dispatch"),
            ("our capture in the callbacks", "hist + dispatch", "capture"), ("CUPTI capture, all", "hist", "cupti"),
            ("callsite hook", "hist + CUPTI", "hook"), ("**the default recording**", "none", "default")]
    for what, against, k in rows:
        print("| %s | %s | %s |" % (what, against, " | ".join(f(r, k, "ms") for r in res)))
    print("\ntight loop of cached allocations, ns per allocation (paired per cycle, median [95 % CI])")
    for i, r in enumerate(res, 1):
        print("process %d: none %.0f / hist %.0f / hist+dispatch %.0f / hist+CUPTI %.0f / default %.0f" % (
            i, r["tight_ns_none"], r["tight_ns_hist"], r["tight_ns_hist_dispatch"], r["tight_ns_hist_cupti"], r["tight_ns_default"]))
    print("| what | " + " | ".join("process %d" % i for i in range(1, len(res) + 1)) + " |")
    print("|---|" + "---|" * len(res))
    for what, against, k in rows:
        print("| %s | %s |" % (what, " | ".join(f(r, k, "ns") for r in res)))
    print("\n" + res[0]["gpu"] + ", torch " + res[0]["torch"])
print("%d checks, %d failed" % (n, bad))
PYEOF
cat "$W/checks.txt"
cp -r "$W/runs" "$W/checks.txt" "$OUT/" 2>/dev/null
tar -C "$W" -cJf "$OUT/inproc.tar.xz" runs checks.txt 2>/dev/null
echo "== done $(date -u) ($(( $(date +%s) - T0 )) s)"
