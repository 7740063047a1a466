#!/bin/bash
# frameworks_exact.sh: the JAX and CuPy exactness rows again with a new recorder (issue 24's
# "every exactness table unchanged"), as users run it: the wheel installed, plain
# `gpurec -o t.zst -- python3 job.py`. For each job: one unrecorded run (the framework's own
# figures), one recorded run, and gpureplay of the recording under the unrecorded run's setting:
#   JAX (traces/workloads/jax/): growth (XLA_PYTHON_CLIENT_PREALLOCATE=false), the `jax` policy:
#       replayed peak pool == memory_stats()'s peak_pool_bytes, replayed peak in use ==
#       peak_bytes_in_use (JAX's num_allocs counts BFC allocations, not the requests a recording
#       under cuda_async holds: printed beside the committed trace's count, not compared);
#   CuPy (traces/workloads/cupy/cupy_varsize.py): its default pool, the `cupy` policy: replayed
#       peak reserved >= the pool's total sampled after each step (the figure CuPy gives), and
#       the allocations recorded == those of the trace committed in traces/recorded/jax.
#   bash tests/gpu/frameworks_exact.sh WHEEL_DIR [JOBS]
# Output: $OUT/frameworks_exact.txt (one line per check, "N checks, M failed" at the end).
set -u
WHEEL_DIR=$1
JOBS=${2:-"jax_train_shapes jax_infer_varlen jax_eager_grow cupy_varsize"}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/fwexact}
W=/tmp/fwexactwork
rm -rf "$W"; mkdir -p "$W" "$OUT"
R=$OUT/frameworks_exact.txt
: > "$R"
exec > >(tee -a "$OUT/log.txt") 2>&1
python3 -m pip install -q --force-reinstall --no-deps --no-index --break-system-packages "$WHEEL_DIR"/gpumem_tools-*.whl || exit 1
echo "== frameworks_exact.sh $(date -u) $(gpurec --version | head -1)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
unset PYTORCH_CUDA_ALLOC_CONF XLA_PYTHON_CLIENT_PREALLOCATE XLA_PYTHON_CLIENT_MEM_FRACTION XLA_PYTHON_CLIENT_ALLOCATOR
result() { sed -n 's/^GPUMEM_RESULT //p' "$1" | tail -1; }
for job in $JOBS; do
  case $job in
    cupy_*) script=$ROOT/traces/workloads/cupy/$job.py; envs=() ;;
    *) script=$ROOT/traces/workloads/jax/$job.py; envs=(XLA_PYTHON_CLIENT_PREALLOCATE=false) ;;
  esac
  (cd "$W" && timeout 200 env "${envs[@]}" python3 "$script" > "$W/$job.unrec.out" 2> "$W/$job.unrec.err")
  (cd "$W" && timeout 200 gpurec -q -o "$W/$job.zst" -- python3 "$script" > "$W/$job.rec.out" 2> "$W/$job.rec.err")
  echo "  $job: rc unrec/rec done; $(tail -1 "$W/$job.rec.err")"
  python3 - "$job" "$(result "$W/$job.unrec.out")" "$W/$job.zst" "$ROOT" >> "$R" <<'EOF'
import json, subprocess, sys
job, res, trace, root = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def check(name, ok, detail):
    print("%s: %s: %s  (%s)" % ("ok" if ok else "FAIL", job, name, detail))
try:
    res = json.loads(res)
except ValueError:
    check("the unrecorded run printed its figures", False, res[:200]); sys.exit()
def replay(t, spec):
    out = subprocess.run(["gpureplay", t, "--policy=" + spec, "--json", "-q"], capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1]) if out.returncode == 0 and out.stdout else {"error": out.stderr[-300:]}
def allocs(t):
    out = subprocess.run(["gpuanalyze", "info", t], capture_output=True, text=True).stdout
    for line in out.splitlines():
        w = line.split()
        if len(w) >= 2 and w[0] == "alloc":
            return int(w[1])
    return None
if job.startswith("jax"):
    st = res.get("stats") or {}
    r = replay(trace, "jax:XLA_PYTHON_CLIENT_PREALLOCATE=false")
    check("replayed peak pool == peak_pool_bytes", r.get("peak_reserved_bytes") == st.get("peak_pool_bytes"),
          "%s vs %s" % (r.get("peak_reserved_bytes"), st.get("peak_pool_bytes")))
    check("replayed peak in use == peak_bytes_in_use", r.get("peak_allocated_bytes") == st.get("peak_bytes_in_use"),
          "%s vs %s" % (r.get("peak_allocated_bytes"), st.get("peak_bytes_in_use")))
    old = "%s/traces/recorded/jax/%s.requests.zst" % (root, job)
    print("info: %s: allocations recorded %s, the committed trace (H100: XLA's autotuning may differ) %s, "
          "JAX's num_allocs under BFC %s" % (job, allocs(trace), allocs(old), st.get("num_allocs")))
else:
    r = replay(trace, "cupy")
    sampled = res.get("pool_peak_total_bytes_sampled")
    check("replayed peak reserved >= the pool's sampled peak", (r.get("peak_reserved_bytes") or 0) >= (sampled or 1 << 62),
          "%s vs %s" % (r.get("peak_reserved_bytes"), sampled))
    old = "%s/traces/recorded/jax/%s.requests.zst" % (root, job)
    check("allocations recorded == the committed trace's", allocs(trace) == allocs(old) and allocs(old),
          "%s vs %s" % (allocs(trace), allocs(old)))
EOF
done
n=$(grep -c '^ok\|^FAIL' "$R"); f=$(grep -c '^FAIL' "$R")
echo "$n checks, $f failed" >> "$R"
cat "$R"
(cd /tmp && tar czf "$OUT/fwexact.tgz" fwexactwork)
