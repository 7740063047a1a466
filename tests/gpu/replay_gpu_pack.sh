#!/bin/bash
# replay_gpu_pack.sh: build what tests/gpu/replay_gpu.sh needs and put it in .gpu-replay/
# (git-ignored through .git/info/exclude), ready to be carried to the GPU machine.
#   tests/gpu/replay_gpu_pack.sh [BAZEL_OUTPUT_BASE]
set -eu
cd "$(dirname "$0")/../.."
OB=${1:-/root/.cache/bazel-replay}
bazel --output_base="$OB" build --symlink_prefix=/ -c opt //replay:gpureplay //replay/cuda:cuda_backend_test //bench/replay:replay_synth //recorder:gpurec
B=$(bazel --output_base="$OB" info --symlink_prefix=/ -c opt bazel-bin 2>/dev/null)
rm -rf .gpu-replay
mkdir -p .gpu-replay/lib
cp "$B/replay/gpureplay" "$B/replay/cuda_backend_test" "$B/bench/replay/replay_synth" .gpu-replay/
for l in libjansson.so.4 libbsd.so.0 libmd.so.0; do cp -L /usr/lib/x86_64-linux-gnu/$l .gpu-replay/lib/; done
# the real traces: the default-setting PyTorch snapshots of traces/snapshots, imported
mkdir -p .gpu-replay/traces
for p in traces/snapshots/*.default.pickle; do
  "$B/recorder/gpurec" import "$p" -o ".gpu-replay/traces/$(basename "$p" .default.pickle).zst"
done
# and gpurec's own requests-mode recordings (their synchronous library allocations are
# external memory: the cuda backend takes them from the driver outside the policy)
for w in train_amp infer_varlen train_ckpt two_streams; do
  cp "traces/recorded/$w.requests.zst" .gpu-replay/traces/
done
# everything must resolve with lib/ alone besides the base system
LD_LIBRARY_PATH=.gpu-replay/lib ldd .gpu-replay/* 2>/dev/null | grep "not found" && exit 1
grep -qx "/.gpu-replay/" .git/info/exclude || echo "/.gpu-replay/" >>.git/info/exclude
du -sh .gpu-replay
