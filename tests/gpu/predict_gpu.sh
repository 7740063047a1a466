#!/bin/bash
# predict_gpu.sh: the corpus of gpurec predict (issue 19) in one call on the GPU machine
# (under 10 minutes on an H100: the runs go side by side while their memory fits).
# Needs .dist/ built here and carried (gpurec, libgpumem_inject.so, trace_csv, gpureplay, lib/):
#   bazel build //recorder:gpurec //recorder:libgpumem_inject.so //recorder:trace_csv //replay:gpureplay
#   rm -rf .dist && mkdir -p .dist/lib && cp bazel-bin/recorder/{gpurec,libgpumem_inject.so,trace_csv} \
#     bazel-bin/replay/gpureplay .dist/ && cp -L /usr/lib/x86_64-linux-gnu/{libjansson.so.4,libbsd.so.0,libmd.so.0} .dist/lib/
# What it does: tests/gpu/predict_corpus.py (its docstring says what each job is and how the
# largest value that fits is found for real), then tests/gpu/predict_table.py over the result.
# The GPT-2-like batch job's recordings at 4/8/16 and its runs under the default and
# expandable_segments:True are checked in (traces/predicted/, made by this script at commit
# 11a422f); this call adds that job's third setting and its largest-fit runs, and records and
# runs the other jobs.
# Output: $OUT/predicted.tar.xz: unpack it over traces/predicted/ (recordings, runs.jsonl per
# job, PREDICTION.md); $OUT/logs.tar.xz (every run's stdout/stderr); $OUT/log.txt; $OUT/PREDICTION.md.
#   run (from the repository root): OUT=... bash tests/gpu/predict_gpu.sh
set -u
OUT=${OUT:-/tmp/predout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/predwork
rm -rf "$W"; mkdir -p "$W" "$OUT"
PY=${PY:-python3}
exec > >(tee -a "$OUT/log.txt") 2>&1
for f in gpurec libgpumem_inject.so trace_csv gpureplay; do
  [ -e "$D/$f" ] || { echo "predict_gpu.sh: $D/$f is missing: build it and carry .dist/ (see the top of this file)"; exit 1; }
done
echo "== predict_gpu.sh $(date -u) commit $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c 'import torch, torchvision; print("torch", torch.__version__, "cuda", torch.version.cuda, "torchvision", torchvision.__version__)'
$D/gpurec --version | head -3
t0=$(date +%s)
$PY "$ROOT/tests/gpu/predict_corpus.py" --bin "$D" --work "$W/corpus" --budget "${BUDGET:-450}" --python "$PY"
echo "predict_corpus rc=$? in $(( $(date +%s) - t0 )) s"
# the table's directory: traces/predicted as checked in, with the new jobs and runs over it
T=$W/table
mkdir -p "$T"
cp "$ROOT"/traces/predicted/*.zst "$ROOT"/traces/predicted/runs.jsonl "$T/"
for d in "$W"/corpus/*/; do
  j=$(basename "$d"); mkdir -p "$T/$j"
  cp "$d"/runs.jsonl "$T/$j/" 2>/dev/null
  [ "$j" = gpt_batch ] || cp "$d"/rec.v*.torch.zst "$T/$j/" 2>/dev/null
done
echo "== predictions and the table (CPU): tests/gpu/predict_table.py"
$PY "$ROOT/tests/gpu/predict_table.py" --bin "$D" --dir "$T" --work "$W/tablework" > "$T/PREDICTION.md" 2> "$W/predict_table.err"
echo "predict_table rc=$?"; tail -5 "$W/predict_table.err"
cp "$T/PREDICTION.md" "$OUT/"
cat "$T/PREDICTION.md"
tar -C "$T" -cJf "$OUT/predicted.tar.xz" .
tar -C "$W/corpus" -cJf "$OUT/logs.tar.xz" --exclude='*.zst' . "$W/predict_table.err" 2>/dev/null
ls -la "$OUT"
echo "== done $(date -u) in $(( $(date +%s) - t0 )) s"
