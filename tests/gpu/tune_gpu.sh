#!/bin/bash
# tune_gpu.sh: check gpureplay --tune's driver-time estimate against a real GPU (issue 13).
#
#   here:  bash tests/gpu/replay_gpu_pack.sh      (builds and fills .gpu-replay/)
#   there: bash tests/gpu/tune_gpu.sh [BINDIR]    (default .gpu-replay; results into $OUT)
#
# For two real requests recordings (train_ckpt, two_streams): gpureplay --tune on the
# simulator writes its points with their estimated driver time (results key "tune": p50 and
# p99 latencies of bench/RESULTS.md times the call counts). Four of them (the default, the best
# grid point, the tuned point, the chosen point; expandable segments too if it is not one of
# them) are replayed on sim and on cuda:0; the measured allocator time is the cuda replay's
# time minus the sim replay's (the same policy code, the same events: what differs is the
# driver calls), the best of 3 runs each. Table: $OUT/tune_gpu.md.
set -u
BIN=${1:-.gpu-replay}
OUT=${OUT:-/tmp/tune_gpu_out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
GR="$BIN/gpureplay"
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
} | tee "$OUT/tune_gpu_env.txt"
rc=0
for w in train_ckpt two_streams; do
  t="$BIN/traces/$w.requests.zst"
  "$GR" "$t" --tune --no-capacity --jobs=4 -o "$OUT/$w.tune.json" >"$OUT/$w.tune.txt" || rc=1
  python3 - "$OUT/$w.tune.json" >"$OUT/$w.specs" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
fam = [r for r in runs if r["policy"].startswith("pytorch")]
pick = []
for role in ("default", "chosen", "tuned"):
    pick += [r["policy"] for r in fam if r.get("tune", {}).get("role") == role]
grid = sorted((r for r in fam if r.get("tune", {}).get("from_grid") and r["ooms"] == 0),
              key=lambda r: r["peak_reserved_bytes"])
if grid: pick.append(grid[0]["policy"])
pick.append("pytorch:expandable_segments:True")
# and two fixed grid settings, so every trace has at least four distinct settings
pick += ["pytorch:max_split_size_mb:128", "pytorch:roundup_power2_divisions:4"]
seen = []
for p in pick:
    if p not in seen: seen.append(p)
print("\n".join(seen))
EOF
  while read -r spec; do
    for dev in sim cuda:0; do
      for i in 1 2 3; do
        "$GR" "$t" --device=$dev -p "$spec" --json >>"$OUT/$w.${dev/:/}.jsonl" || rc=1
      done
    done
  done <"$OUT/$w.specs"
done
python3 - "$OUT" >"$OUT/tune_gpu.md" <<'EOF'
import json, os, sys
out = sys.argv[1]
print("| trace | setting | driver calls | estimated (p50..p99) ms | measured ms (cuda - sim, best of 3) | error vs p50 |")
print("|---|---|---:|---:|---:|---:|")
for w in ("train_ckpt", "two_streams"):
    est = {r["policy"]: r for r in json.load(open(f"{out}/{w}.tune.json"))["runs"]}
    best = {}
    for dev in ("sim", "cuda:0"):
        for line in open(f"{out}/{w}.{dev.replace(':', '')}.jsonl"):
            r = json.loads(line)
            k = (r["policy"], dev)
            best[k] = min(best.get(k, 1e9), r["replay_seconds"])
    for spec in open(f"{out}/{w}.specs").read().split():
        e = est.get(spec, {}).get("tune", {})
        meas = (best[(spec, "cuda:0")] - best[(spec, "sim")]) * 1e3
        lo, hi = e.get("driver_time_p50_s", 0) * 1e3, e.get("driver_time_p99_s", 0) * 1e3
        r = est.get(spec, {})
        calls = r.get("device_alloc_calls", 0) + r.get("device_free_calls", 0)
        err = f"{100 * (lo - meas) / meas:+.0f} %" if meas > 0 and e else "-"
        print(f"| {w} | `{spec}` | {calls} | {lo:.2f}..{hi:.2f} | {meas:.2f} | {err} |")
EOF
cat "$OUT/tune_gpu.md"
exit $rc
