#!/bin/bash
# context_check.sh: the CUDA context and module code that gpurec records (DEVICE_USAGE,
# recorder/cupti_devmem.c; issue 17 item 3) against what the job itself and nvidia-smi see, on
# one GPU, about a minute. A PyTorch job and a CuPy job (tests/gpu/context_job.py), each run
# unrecorded and under gpurec's default mode; each prints, right after CUDA starts and at the
# end, the whole device's count (mem_get_info total - free, the process alone on the GPU) and
# nvidia-smi's per-process count, each less its framework's reserve. The trace's records are
# printed beside them (trace_csv): method 0x1 NVML per process, 0x2 cuMemGetInfo whole device,
# sizes already less what the trace mapped at that moment.
# Needs .dist/ built here and carried (the command in the report / tests/gpu/predict_gpu.sh):
#   rm -rf .dist && mkdir -p .dist/lib && cp bazel-bin/recorder/{gpurec,libgpumem_inject.so,trace_csv} \
#     bazel-bin/analyze/gpuanalyze bazel-bin/replay/gpureplay .dist/ && \
#     cp -L /usr/lib/x86_64-linux-gnu/{libjansson.so.4,libbsd.so.0,libmd.so.0} .dist/lib/
#   run (from the repository root): bash tests/gpu/context_check.sh
# Output: $OUT/context_check.txt (this log) and $OUT/context_traces.tar.xz.
set -u
OUT=${OUT:-/tmp/ctxout}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.dist
[ -d "$D/lib" ] && export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
W=/tmp/ctxwork
rm -rf "$W"; mkdir -p "$W" "$OUT"
PY=${PY:-python3}
JOB=$ROOT/tests/gpu/context_job.py
exec > >(tee -a "$OUT/context_check.txt") 2>&1
cd "$W" || exit 1
echo "== context_check.sh $(date -u) commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
usage() { # the trace's DEVICE_USAGE records: t, device, method, MiB
  "$D/trace_csv" "$1" | awk -F, '$2 == "device_usage" {
    printf "  trace  t=%.3f s  device %s  %s  %.1f MiB\n", $1 / 1e9, $3, ($5 == "0x1" ? "NVML process     " : "cuMemGetInfo dev "), $6 / 1048576 }'
  "$D/trace_csv" "$1" | grep -c ',device_usage,' | sed 's/^/  device_usage records: /'
}
for fw in torch cupy; do
  echo "== $fw unrecorded"
  timeout 120 $PY "$JOB" $fw 2>&1 | grep GPUMEM_RESULT; echo "  rc=${PIPESTATUS[0]}"
  echo "== $fw under gpurec (default mode)"
  timeout 150 "$D/gpurec" -o $fw.zst -- $PY "$JOB" $fw 2>&1 | grep -E "GPUMEM_RESULT|^gpurec: .*zst|\[gpurec\]"
  echo "  rc=${PIPESTATUS[0]}"
  for f in $fw*.zst; do
    echo "  -- $f ($("$D/trace_csv" "$f" | grep -E '^#capture_mode|^#kv.device_usage' | tr '\n' ' '))"
    usage "$f"
    [ -x "$D/gpuanalyze" ] && "$D/gpuanalyze" info "$f" | sed -n '/^mapped:/,/^live at end/p' | sed 's/^/  info: /'
  done
done
echo "== with GPUMEM_DEVMEM=0 (samples off): no records"
GPUMEM_DEVMEM=0 timeout 120 "$D/gpurec" -o off.zst -- $PY "$JOB" torch >/dev/null 2>&1
for f in off*.zst; do usage "$f"; done
tar -C "$W" -cJf "$OUT/context_traces.tar.xz" . 2>/dev/null
echo "== done $(date -u)"
