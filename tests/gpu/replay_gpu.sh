#!/bin/bash
# replay_gpu.sh: gpureplay on a real GPU, from binaries built elsewhere and carried along.
#
#   tests/gpu/replay_gpu.sh [BINDIR]      (default BINDIR: .gpu-replay; results into $OUT)
#
# BINDIR holds gpureplay, cuda_backend_test, replay_synth (bazel -c opt builds) and lib/
# with the shared libraries the GPU machine may lack (libjansson, libbsd, libmd). Prepare it with
# tests/gpu/replay_gpu_pack.sh on the build machine.
#
# What it does, in one call:
#  1. cuda_backend_test: sim and cuda agree exactly (reserved bytes, allocated, driver calls)
#     for pytorch, pytorch expandable, bfc, bfc:growth, prealloc, direct; async runs on the
#     driver's pool; a capacity gives the same OOMs on both.
#  2. The figures: a 200k-event synthetic training-like trace replayed on sim and cuda:0 for
#     pytorch default, expandable, bfc, prealloc, direct and async: per-policy driver call
#     latency p50/p99 and driver calls per 1000 requests; sim vs cuda peak reserved.
set -u
BIN=${1:-.gpu-replay}
OUT=${OUT:-/tmp/replay_gpu_out}
mkdir -p "$OUT"
T=$(mktemp -d)
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0

{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  "$BIN/gpureplay" --version
} | tee "$OUT/replay_gpu_env.txt"

echo "== 1. sim vs cuda (cuda_backend_test)"
"$BIN/cuda_backend_test" 2>&1 | tee "$OUT/replay_cuda_test.txt"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1

echo "== 2. figures"
"$BIN/replay_synth" "$T/train200k.zst" 200000 1 || exit 1
POL="-p pytorch -p pytorch:expandable_segments:True -p bfc -p prealloc -p direct"
"$BIN/gpureplay" "$T/train200k.zst" --device=sim --device-memory=16GiB $POL \
  -o "$OUT/replay_gpu_sim.json" || rc=1
"$BIN/gpureplay" "$T/train200k.zst" --device=cuda:0 --device-memory=16GiB $POL -p async \
  -o "$OUT/replay_gpu_cuda.json" || rc=1

python3 - "$OUT/replay_gpu_sim.json" "$OUT/replay_gpu_cuda.json" <<'PY' | tee "$OUT/replay_gpu_figures.md"
import json, sys
sim = {r["policy"]: r for r in json.load(open(sys.argv[1]))["runs"]}
cu = json.load(open(sys.argv[2]))["runs"]
print("| policy | requests | driver calls / 1000 requests | alloc p50 / p99 (us) | free p50 / p99 (us) | peak reserved cuda | sim | equal | driver in use at peak |")
print("|---|---|---|---|---|---|---|---|---|")
for r in cu:
    s = sim.get(r["policy"])
    calls = r["device_alloc_calls"] + r["device_free_calls"]
    per = 1000.0 * calls / max(1, r["requests"])
    l = r.get("latency_ns", {})
    us = lambda k: "%.1f" % (l.get(k, 0) / 1000.0)
    speak = s["peak_reserved_bytes"] if s else None
    print("| %s | %d | %.2f | %s / %s | %s / %s | %d | %s | %s | %d |" % (
        r["policy"], r["requests"], per, us("alloc_p50"), us("alloc_p99"), us("free_p50"),
        us("free_p99"), r["peak_reserved_bytes"], speak if s else "n/a",
        ("yes" if speak == r["peak_reserved_bytes"] else "NO") if s else "n/a",
        r.get("driver_used_bytes_at_peak", 0)))
PY
[ "${PIPESTATUS[0]}" = 0 ] || rc=1

echo "== 3. real traces (PyTorch snapshots, default settings): sim vs cuda"
# cuda twice: policies given the simulator's addresses (the default) and the driver's own
# (--cuda-addresses=real), where PyTorch's address-ordered best fit may choose differently.
RP="-p pytorch -p pytorch:expandable_segments:True -p bfc -p bfc:growth -p prealloc -p direct"
: >"$OUT/replay_gpu_real.jsonl"
for t in "$BIN"/traces/*.zst; do
  "$BIN/gpureplay" "$t" --device=sim --device-memory=16GiB $RP --json |
    sed 's/^{/{"mode":"sim",/' >>"$OUT/replay_gpu_real.jsonl" || rc=1
  for a in sim real; do
    "$BIN/gpureplay" "$t" --device=cuda:0 --cuda-addresses=$a --device-memory=16GiB $RP --json |
      sed "s/^{/{\"mode\":\"cuda-$a-addresses\",/" >>"$OUT/replay_gpu_real.jsonl" || rc=1
  done
done
python3 - "$OUT/replay_gpu_real.jsonl" <<'PY' | tee "$OUT/replay_gpu_real.md"
import json, os, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
key = lambda r: (os.path.basename(r["trace"]), r["policy"])
sim = {key(r): r for r in runs if r["mode"] == "sim"}
for mode in ("cuda-sim-addresses", "cuda-real-addresses"):
    print("\n%s:\n" % mode)
    print("| trace | policy | peak reserved sim | cuda | equal | driver calls sim / cuda |")
    print("|---|---|---|---|---|---|")
    bad = n = 0
    for r in runs:
        if r["mode"] != mode:
            continue
        s = sim[key(r)]
        eq = s["peak_reserved_bytes"] == r["peak_reserved_bytes"]
        bad += not eq
        n += 1
        print("| %s | %s | %d | %d | %s | %d / %d |" % (key(r)[0], r["policy"], s["peak_reserved_bytes"],
              r["peak_reserved_bytes"], "yes" if eq else "NO",
              s["device_alloc_calls"] + s["device_free_calls"], r["device_alloc_calls"] + r["device_free_calls"]))
    print("\n%s: %d of %d runs differ" % (mode, bad, n))
PY
echo "replay_gpu.sh: exit $rc"
exit $rc
