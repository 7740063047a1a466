#!/bin/bash
# self_check.sh: does the replay of a real job, under the setting it ran with, give what the
# job itself reserved? (analyze/ana_run_check.c makes every report say so; this measures it on
# real models nobody here wrote: tests/gpu/self_check_jobs.py). One device call (~5 min, H200):
#   bash tests/gpu/self_check.sh WHEEL_DIR            (WHEEL_DIR holds gpumem_tools-*.whl)
# Per job and setting:
#   1. recorded by plain `gpurec -o T.zst -- python3 self_check_jobs.py JOB BATCH` (default mode),
#      which prints the recorded run's own max_memory_reserved;
#   2. run again unrecorded (the recorder must not change what the job reserves);
#   3. `gpureplay T.zst -p SETTING -o R.json`: the replay's peak reserved, and the peak of the
#      run's own segments in the trace (recorded_mapped_peak_bytes);
#   4. `gpuanalyze report --no-tune`: its line "checked against the run" or "the replay misses".
# Output: $OUT/self_check.txt (log, table at its end) and $OUT/selfcheck.tar.gz (the traces, the
# replays' JSON, the reports' text, every run's result line, and runs.jsonl: one line per job
# whose runs both gave a figure, the form traces/recorded/selfcheck/runs.jsonl keeps and
# tests/tables/self_check_table.sh reads), packed after every job.
# SELF_JOBS="job:batch:setting ..." overrides the list (setting: default or expandable).
set -u
WHEELS=${1:?usage: self_check.sh WHEEL_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/selfcheck}
W=${SELF_WORK:-/tmp/selfwork}/selfcheck
rm -rf "$W"; mkdir -p "$W" "$OUT"
exec > >(tee "$OUT/self_check.txt") 2>&1
TEE=$!
trap 'exec >&- 2>&-; wait "$TEE"' EXIT
echo "== self_check.sh $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -m pip install -q --force-reinstall --no-deps --no-index --break-system-packages "$WHEELS"/gpumem_tools-*.whl || exit 1
export PATH=$(dirname "$(command -v python3)"):$PATH
gpurec --version | head -1
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
JOBS=${SELF_JOBS:-"tv_resnet18:64:default tv_resnet50:16:default tv_resnet50:48:default tv_resnet50:16:expandable
 tv_resnet50_bf16:32:default tv_mobilenet_v3:64:default tv_vgg11_bn:32:default tv_densenet121:32:default
 tv_densenet121:32:expandable tv_efficientnet_b0:64:default tv_convnext_tiny:32:default timm_vit_small:32:default
 hf_bert:32:default hf_bert:32:expandable hf_t5:16:default hf_llama_bf16:8:default hf_llama_bf16:8:expandable
 hf_vit:32:default"}
result() { sed -n 's/^GPUMEM_RESULT //p' "$1" | tail -1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read() or "{}").get("max_memory_reserved", "-"))'; }
echo "| job | batch | setting | unrecorded run | recorded run | its segments in the trace | replay | report says |" > "$W/table.md"
echo "|---|---:|---|---:|---:|---:|---:|---|" >> "$W/table.md"
cd "$ROOT/tests/gpu" || exit 1
for j in $JOBS; do
  IFS=: read -r job b set <<< "$j"
  n=$job.b$b.$set
  conf=""; pol=pytorch
  [[ $set == expandable ]] && conf=expandable_segments:True && pol=pytorch:expandable_segments:True
  echo "== $n"
  ( [[ -n $conf ]] && export PYTORCH_CUDA_ALLOC_CONF=$conf
    timeout 120 gpurec -o "$W/$n.zst" -- python3 self_check_jobs.py "$job" "$b" > "$W/$n.rec.out" 2> "$W/$n.rec.err"
    echo "rec rc=$?"
    timeout 120 python3 self_check_jobs.py "$job" "$b" > "$W/$n.plain.out" 2> "$W/$n.plain.err"
    echo "plain rc=$?" )
  tail -3 "$W/$n.rec.err"
  rec=$(result "$W/$n.rec.out"); plain=$(result "$W/$n.plain.out")
  gpureplay -q -p "$pol" -o "$W/$n.json" "$W/$n.zst" > /dev/null 2> "$W/$n.replay.err"
  read -r rep seg <<< "$(python3 -c "
import json
r = json.load(open('$W/$n.json'))['runs'][0]
print(r['peak_reserved_bytes'], r.get('recorded_mapped_peak_bytes', 0))" 2>/dev/null)"
  gpuanalyze report -q --no-tune --db "$W/$n.db" --html "$W/$n.html" "$W/$n.zst" > "$W/$n.report.txt" 2>&1
  said=$(grep -o 'checked against the run[^(]*\|the replay misses this run by [^:]*' "$W/$n.report.txt" | head -1)
  echo "recorded run $rec, unrecorded $plain, segments $seg, replay $rep: ${said:-(no check line)}"
  echo "| $job | $b | $set | $plain | $rec | ${seg:--} | ${rep:--} | ${said:-none} |" >> "$W/table.md"
  python3 - "$W" "$n" "$job" "$b" "$set" >> "$W/runs.jsonl" <<'PY'
import json, sys
w, n, job, batch, setting = sys.argv[1:]
def result(path):
    for line in open(path):
        if line.startswith("GPUMEM_RESULT "):
            return json.loads(line[len("GPUMEM_RESULT "):])
rec, plain = result("%s/%s.rec.out" % (w, n)), result("%s/%s.plain.out" % (w, n))
if rec and plain:
    print(json.dumps({"trace": n + ".zst", "job": job, "batch": int(batch), "setting": setting,
                      "alloc_conf": rec["alloc_conf"], "recorded_max_memory_reserved": rec["max_memory_reserved"],
                      "unrecorded_max_memory_reserved": plain["max_memory_reserved"], "device": rec["device"],
                      "torch": rec["torch"]}))
PY
  rm -f "$W/$n.db"
  tar -C "$(dirname "$W")" -czf "$OUT/selfcheck.tar.gz" selfcheck
done
echo; cat "$W/table.md"
