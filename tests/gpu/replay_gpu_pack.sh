#!/bin/bash
# replay_gpu_pack.sh: build what tests/gpu/replay_gpu.sh needs and put it in .gpu-replay/
# (git-ignored through .git/info/exclude), ready to be carried to the GPU machine.
#   tests/gpu/replay_gpu_pack.sh [BAZEL_OUTPUT_BASE]
set -eu
cd "$(dirname "$0")/../.."
OB=${1:-/root/.cache/bazel-replay}
bazel --output_base="$OB" build --symlink_prefix=/ -c opt //replay:gpureplay //replay:cuda_backend_test //bench/replay:replay_synth
B=$(bazel --output_base="$OB" info --symlink_prefix=/ -c opt bazel-bin 2>/dev/null)
rm -rf .gpu-replay
mkdir -p .gpu-replay/lib
cp "$B/replay/gpureplay" "$B/replay/cuda_backend_test" "$B/bench/replay/replay_synth" .gpu-replay/
cp -L /usr/lib/x86_64-linux-gnu/libjansson.so.4 .gpu-replay/lib/
grep -qx "/.gpu-replay/" .git/info/exclude || echo "/.gpu-replay/" >>.git/info/exclude
du -sh .gpu-replay
