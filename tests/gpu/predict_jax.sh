#!/bin/bash
# predict_jax.sh (issue 26 item 3): `gpurec predict` on a JAX job, against memory_stats().
# The job is tests/gpu/predict_hf.py's jax_mlp (an MLP of 4 x 2048 trained under jit, 3 steps),
# run as users run it (`python3 predict_hf.py jax_mlp 4096 out/jax/rb4096`: the value twice).
# Why again: the corpus's recordings (traces/predicted/jax_mlp at batch 256, 512, 1024) do not
# make the same allocations (687, 722, 450: XLA's autotuner allocates scratch per candidate
# algorithm while it compiles, and the candidates change with the batch), so every prediction
# from them is refused; and at those values the job's pool is 514 MiB whatever the batch. Here
# the values are larger, and each is recorded twice by plain `gpurec` from the wheel:
#   cold: as users run it (compiling inside the recording);
#   warm: after an unrecorded run at the same value filled JAX's persistent compilation cache
#         (JAX_COMPILATION_CACHE_DIR), so the recording holds the job's own buffers only.
# Recorded at batch 2048, 4096, 8192; run unrecorded at 16384 and 32768 (2x, 4x) and at the
# recorded values, under growth (XLA_PYTHON_CLIENT_PREALLOCATE=false: peak_pool_bytes) and under
# preallocated fractions (XLA_PYTHON_CLIENT_MEM_FRACTION=F: out of memory or not).
# Then, on the device, gpurec predict from each set (2 and 3 recordings) at both targets, replayed
# by gpureplay under the same settings, against the real runs: the summary at the end.
# Usage (repository root, the wheel from tools/build_wheel in WHEEL_DIR, default .dev/predict):
#   OUT=/some/dir [FRACTIONS="0.01 0.02 0.04 0.08"] bash tests/gpu/predict_jax.sh [WHEEL_DIR]
# Output: $OUT/predict_jax/ (cold/ and warm/ with rec.vN.zst, runs.jsonl, runs/*.log, summary.txt,
# log.txt) and $OUT/predict_jax.tar.gz of it, packed again at the end. No new run starts after
# $BUDGET seconds (default 420).
set -u
OUT=${OUT:-/tmp/predict_jax_out}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WHEEL_DIR=${1:-$ROOT/.dev/predict}
R=$OUT/predict_jax
W=/tmp/predict_jax_work
rm -rf "$R" "$W"; mkdir -p "$R/cold" "$R/warm" "$R/runs" "$W"
exec > >(tee -a "$R/log.txt") 2>&1
echo "== predict_jax.sh $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -m pip install -q --force-reinstall --no-deps --no-index --break-system-packages "$WHEEL_DIR"/gpumem_tools-*.whl || exit 1
gpurec --version | head -2
python3 -c 'import jax; print("jax", jax.__version__, jax.devices())' || exit 1
cp "$ROOT/tests/gpu/predict_hf.py" "$W/"
RECORDED="2048 4096 8192"
TARGETS="16384 32768"
FRACTIONS=${FRACTIONS:-0.02 0.04 0.08} # FRACTIONS="0.01 0.02": 0.01 of an H200 is below the job's 1.83 GB in use at 32768
GROWTH=XLA_PYTHON_CLIENT_PREALLOCATE=false
export R W GROWTH

result_of() { # LOG: the job's GPUMEM_RESULT line's JSON, or null
  local res; res=$(grep -h '^GPUMEM_RESULT ' "$1" 2>/dev/null | tail -1 | cut -c15-)
  echo "${res:-null}"
}
export -f result_of

# one line per run: KIND VALUE [FRACTION]
one() {
  local kind=$1 v=$2 f=${3:-} log="$R/runs/$1.$2${3:+.$3}.log" rc conf t0 oom=false
  cd "$W" || return
  t0=$(date +%s%N)
  case $kind in
    cold) conf=""
      timeout 200 gpurec -o "$R/cold/rec.v$v.zst" -- python3 predict_hf.py jax_mlp "$v" "out/jax/rb$v" > "$log" 2>&1;;
    warm) conf="" # the cache filled by an unrecorded run under the recorder's own XLA settings first
      export JAX_COMPILATION_CACHE_DIR=$W/cache.v$v JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 \
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1
      XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async XLA_PYTHON_CLIENT_PREALLOCATE=false \
        timeout 200 python3 predict_hf.py jax_mlp "$v" "out/jax/rb$v" > "$log.fill" 2>&1
      timeout 200 gpurec -o "$R/warm/rec.v$v.zst" -- python3 predict_hf.py jax_mlp "$v" "out/jax/rb$v" > "$log" 2>&1;;
    growth) conf=$GROWTH
      env $GROWTH timeout 200 python3 predict_hf.py jax_mlp "$v" "out/jax/rb$v.growth" > "$log" 2>&1;;
    frac) conf="XLA_PYTHON_CLIENT_MEM_FRACTION=$f"
      XLA_PYTHON_CLIENT_MEM_FRACTION=$f timeout 200 python3 predict_hf.py jax_mlp "$v" "out/jax/rb$v.f$f" > "$log" 2>&1;;
  esac
  rc=$?
  grep -q 'RESOURCE_EXHAUSTED\|Out of memory\|out of memory' "$log" && oom=true
  local purpose=scale; case $kind in cold|warm) purpose=rec;; esac
  echo "{\"run\":\"$kind.v$v${f:+.f$f}\",\"job\":\"jax_mlp\",\"kind\":\"$kind\",\"value\":$v,\"conf\":\"$conf\",\"purpose\":\"$purpose\",\"rc\":$rc,\"oom\":$oom,\"ms\":$(( ($(date +%s%N) - t0) / 1000000 )),\"result\":$(result_of "$log")}" >> "$R/runs.jsonl"
  echo "  $(date +%H:%M:%S) $kind $v ${f:+fraction $f }rc=$rc oom=$oom"
}
export -f one
{
  for v in $RECORDED; do echo "cold $v"; echo "warm $v"; done
  for v in $TARGETS $RECORDED; do echo "growth $v"; done
  for v in $TARGETS; do for f in $FRACTIONS; do echo "frac $v $f"; done; done
} > "$W/list"
# recordings first, side by side (each warm line fills its own cache, then records); the real runs
# after them (the fractions preallocate: at most 0.08 x 4 of the GPU at once)
timeout "${BUDGET:-420}" bash -c 'grep -E "^(cold|warm) " "$0" | xargs -P 6 -L 1 bash -c '"'"'one "$@"'"'"' _;
  grep -vE "^(cold|warm) " "$0" | xargs -P 4 -L 1 bash -c '"'"'one "$@"'"'"' _' "$W/list"

# the predictions, here on the device: from each set at each target, replayed under growth and
# under each fraction (the jax policy in JAX's words), against the real runs
{
  echo "set | recordings | target | setting | gpurec predict | predicted peak pool (B) / OOM | real peak_pool_bytes (B) / OOM"
  for set in cold warm; do
    for recs in "4096 8192" "2048 4096 8192"; do
      args=(); for v in $recs; do args+=("$R/$set/rec.v$v.zst@$v"); done
      for t in $TARGETS; do
        pol=("-p" "jax:$GROWTH"); for f in $FRACTIONS; do pol+=("-p" "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=$f"); done
        p=$R/$set/pred.${recs// /_}.at$t.zst
        gpurec predict "${args[@]}" --at="$t" -o "$p" "${pol[@]}" > "$R/runs/predict.$set.${recs// /_}.$t.txt" 2>&1
        prc=$?
        for s in "$GROWTH" $(for f in $FRACTIONS; do echo "XLA_PYTHON_CLIENT_MEM_FRACTION=$f"; done); do
          pred=-
          # a setting the per-setting check refused: its range, not a figure
          ref=$(grep -F "REFUSED  jax:$s: " "$R/runs/predict.$set.${recs// /_}.$t.txt" | sed 's/.*; \([0-9]* in [0-9.]* bytes\))$/\1/')
          if [ -n "$ref" ]; then
            pred="refused ($ref)"
          elif [ -f "$p" ]; then
            pred=$(gpureplay "$p" --policy="jax:$s" --json -q 2>/dev/null | tail -1 |
              python3 -c 'import json,sys; r=json.load(sys.stdin); print(r.get("peak_reserved_bytes"), "OOM" if r.get("ooms") else "fits")' 2>/dev/null)
          fi
          kind=growth; f=""; case $s in *FRACTION=*) kind=frac; f=${s#*=};; esac
          real=$(python3 - "$R/runs.jsonl" "$kind" "$t" "$f" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] == sys.argv[2] and r["value"] == int(sys.argv[3]) and (sys.argv[2] != "frac" or r["run"].endswith("f" + sys.argv[4])):
        res = r.get("result") or {}
        print(res.get("peak_pool_bytes"), "OOM" if r["oom"] or r["rc"] else "fits")
        break
else:
    print("no run")
PY
)
          echo "$set | ${recs// /, } | $t | $s | rc=$prc | ${pred:-?} | $real"
        done
      done
    done
  done
} > "$R/summary.txt"
echo "== summary (gpurec predict rc: 0 answered, 3 refused; its stderr in runs/predict.*.txt)"
cat "$R/summary.txt"
for v in $RECORDED; do
  for set in cold warm; do
    [ -f "$R/$set/rec.v$v.zst" ] && echo "$set $v: $(gpureplay "$R/$set/rec.v$v.zst" --json -q 2>/dev/null | tail -1 | grep -o '"events":[0-9]*')"
  done
done
tar -C "$OUT" -czf "$OUT/predict_jax.tar.gz" predict_jax
echo "== done $(date -u): $OUT/predict_jax.tar.gz"
