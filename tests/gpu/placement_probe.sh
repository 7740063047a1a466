#!/bin/bash
# placement_probe.sh: run every experiment of placement_probe.py in a fresh process, three times
# (does the placement repeat?), JSON lines on stdout. Needs a GPU and libcuda.so.1; no torch.
#   bash tests/gpu/placement_probe.sh > placement.jsonl
set -eu -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
for run in 1 2 3; do
  for exp in first_area regions holes release cpu_mmap small; do
    "$py" "$here/placement_probe.py" "$exp" | sed "s/^{/{\"run\": $run, /"
  done
done
