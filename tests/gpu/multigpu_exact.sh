#!/bin/bash
# multigpu_exact.sh: the two-GPU exactness rows (traces/recorded/multigpu/PREDICTION.md) again with
# the recorder of today's default, as users run it: the wheel installed, plain `gpurec -o J.zst --
# torchrun ...` (issue 24's "every exactness table unchanged": those traces were recorded before
# the requests were streamed). Needs two GPUs (kind nvidia-h200-x2).
# For each job of tests/gpu/multigpu_jobs.py (ddp, nccl: torchrun with 2 ranks; twodev: one
# process on both devices): unrecorded under the default and under expandable_segments:True,
# recorded under the default; then gpureplay of each trace under both settings, one result per
# device, against PyTorch's own max_memory_reserved and max_memory_allocated of the same rank
# and device, to the byte. JOBS=ddp1 (DDP's two ranks on one device, over gloo) runs on one GPU.
#   bash tests/gpu/multigpu_exact.sh WHEEL_DIR [JOBS]
# Output: $OUT/multigpu_exact.txt ("N checks, M failed" at the end), $OUT/multigpu_exact.tgz.
set -u
WHEEL_DIR=$1
JOBS=${2:-"ddp nccl twodev"}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/mgexact}
W=/tmp/mgexactwork
rm -rf "$W"; mkdir -p "$W" "$OUT"
R=$OUT/multigpu_exact.txt
: > "$R"
exec > >(tee -a "$OUT/log.txt") 2>&1
export NCCL_NVLS_ENABLE=0 # NVLink multicast off (the device library's KINDS.md)
python3 -m pip install -q --force-reinstall --no-deps --no-index --break-system-packages "$WHEEL_DIR"/gpumem_tools-*.whl || exit 1
echo "== multigpu_exact.sh $(date -u) $(gpurec --version | head -1)"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
JOBPY=$ROOT/tests/gpu/multigpu_jobs.py
for job in $JOBS; do
  if [ "$job" = twodev ]; then cmd=(python3 "$JOBPY" "$job"); else cmd=(torchrun --standalone --nproc_per_node=2 "$JOBPY" "$job"); fi
  (cd "$W" && timeout 240 "${cmd[@]}" > "$W/$job.unrec.out" 2> "$W/$job.unrec.err")
  (cd "$W" && PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 240 "${cmd[@]}" > "$W/$job.exp.out" 2> "$W/$job.exp.err")
  (cd "$W" && timeout 240 gpurec -q -o "$W/$job.zst" -- "${cmd[@]}" > "$W/$job.rec.out" 2> "$W/$job.rec.err")
  echo "  $job: $(ls "$W" | grep "^$job\..*zst" | tr '\n' ' ')"
  python3 - "$job" "$W" >> "$R" <<'EOF'
import glob, json, subprocess, sys
job, w = sys.argv[1], sys.argv[2]
def results(path):
    # torchrun's ranks share one stdout: a rank's line can end after the other's (two results on
    # one line), so each result is decoded where it starts, not line by line
    dec = json.JSONDecoder()
    return [dec.raw_decode(part)[0] for part in open(path).read().split("GPUMEM_RESULT ")[1:]]
real = {"pytorch": results("%s/%s.unrec.out" % (w, job)),
        "pytorch:expandable_segments:True": results("%s/%s.exp.out" % (w, job))}
traces = sorted(glob.glob("%s/%s.rank*.zst" % (w, job))) or sorted(glob.glob("%s/%s.zst" % (w, job)))
if not traces:
    print("FAIL: %s: no trace recorded" % job)
for t in traces:
    rank = int(t.split(".rank")[1].split(".")[0]) if ".rank" in t else 0
    for policy, runs in real.items():
        out = subprocess.run(["gpureplay", t, "--policy=" + policy, "--json"], capture_output=True, text=True)
        reps = [json.loads(l) for l in out.stdout.splitlines() if l.strip().startswith("{")]
        if not reps:
            print("FAIL: %s %s %s: no replay (%s)" % (job, t.split("/")[-1], policy, out.stderr[-200:].strip()))
        for rep in reps:
            dev = rep.get("device")
            rs = [r for r in runs if r["device"] == dev and (r["world_size"] == 1 or r["rank"] == rank)]
            if len(rs) != 1:
                print("FAIL: %s %s device %s %s: %d real runs match" % (job, t.split("/")[-1], dev, policy, len(rs)))
                continue
            for key, want in (("peak_reserved_bytes", "max_memory_reserved"), ("peak_allocated_bytes", "max_memory_allocated")):
                got, real_v = rep.get(key), rs[0][want]
                print("%s: %s %s device %s %s: replay %s == real %s  (%s vs %s)" % (
                    "ok" if got == real_v else "FAIL", job, t.split("/")[-1], dev, policy, key, want, got, real_v))
EOF
done
n=$(grep -c '^ok\|^FAIL' "$R"); f=$(grep -c '^FAIL' "$R")
echo "$n checks, $f failed" >> "$R"
cat "$R"
(cd /tmp && tar czf "$OUT/multigpu_exact.tgz" mgexactwork)
