#!/bin/bash
# stream_parts_ab.sh: two builds of the streamed default priced on the GPU machine, alternated
# (issue 24 item 5): tests/gpu/stream_cost.py under plain gpurec, once per wheel per round,
# A B A B ... Each run's figures are paired within its own process (each state against that
# cycle's idle tracker), so A's and B's added cost compare across processes even when the
# machine's mode moves the absolute figures 2x between them.
#   bash tests/gpu/stream_parts_ab.sh WHEEL_DIR_A WHEEL_DIR_B [ROUNDS]     (ROUNDS: default 2)
#   STREAM_COST_ARGS="--cycles 150" as for stream_gpu.sh's parts stage.
# Output: $OUT/parts_ab.jsonl (one line per run: wheel, round, stream_cost.py's RESULT),
# $OUT/log.txt; prints a table: tight loop ns added per allocation and host-bound step % added
# (ours, entries, callsite, CUPTI), medians with 95 % intervals, per run.
set -u
A=$1
B=$2
ROUNDS=${3:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/streamabout}
W=/tmp/streamabwork
rm -rf "$W"
mkdir -p "$W" "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== stream_parts_ab.sh A=$A B=$B rounds=$ROUNDS  $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
BIN=$(dirname "$(command -v python3)")
export PATH=$BIN:$PATH
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
: > "$OUT/parts_ab.jsonl"
for round in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    dir=$A
    [ $side = B ] && dir=$B
    python3 -m pip install -q --force-reinstall --no-deps --no-index --break-system-packages "$dir"/gpumem_tools-*.whl || exit 1
    (cd "$W" && gpurec -q -o "$W/parts.zst" -- python3 "$ROOT/tests/gpu/stream_cost.py" ${STREAM_COST_ARGS:-} \
       > "$W/parts.$side$round.out" 2> "$W/parts.$side$round.err")
    rc=$?
    res=$(sed -n 's/^RESULT //p' "$W/parts.$side$round.out" | tail -1)
    [ -n "$res" ] || { echo "  $side round $round: no result (gpurec rc=$rc)"; tail -5 "$W/parts.$side$round.err"; }
    echo "{\"side\":\"$side\",\"wheel\":\"$dir\",\"round\":$round,\"rc\":$rc,\"result\":${res:-null}}" >> "$OUT/parts_ab.jsonl"
    rm -f "$W/parts.zst"
  done
done
python3 - "$OUT/parts_ab.jsonl" <<'EOF'
import json, sys
print("side round | tight idle ns, ours +ns [ci] | step idle ms, ours +% [ci], entries +%, callsite +%, cupti +%")
for line in open(sys.argv[1]):
    d = json.loads(line)
    r = d["result"]
    if not r:
        print("%s %d | no result" % (d["side"], d["round"]))
        continue
    t, s = r["tight_ns"], r["step_ms"]
    print("%s %d | %.0f, %+.0f [%.0f, %.0f] | %.1f, %+.2f [%.2f, %.2f], %+.2f, %+.2f, %+.2f" % (
        d["side"], d["round"], t["idle"], t["added_ours"], t["ci_ours"][0], t["ci_ours"][1],
        s["idle"], s["pct_ours"], 100 * s["ci_ours"][0] / s["idle"], 100 * s["ci_ours"][1] / s["idle"],
        s["pct_entries"], s["pct_callsite"], s["pct_cupti"]))
EOF
(cd /tmp && tar cJf "$OUT/parts_ab.tar.xz" streamabwork)
