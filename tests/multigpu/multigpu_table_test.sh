#!/bin/bash
# Recompute traces/recorded/multigpu/PREDICTION.md's tables from its traces and runs.jsonl and
# diff them with the file (multigpu_table.py --check). Regenerate after a meant change with
#   python3 tests/multigpu/multigpu_table.py bazel-bin/replay/gpureplay bazel-bin/analyze/gpuanalyze \
#     traces/recorded/multigpu   (and paste below the file's introduction)
set -eu
R=${RUNFILES_DIR:-$0.runfiles}/${TEST_WORKSPACE:-gpumem}
D=$R/traces/recorded/multigpu
exec python3 "$R/tests/multigpu/multigpu_table.py" "$R/replay/gpureplay" "$R/analyze/gpuanalyze" "$D" --check "$D/PREDICTION.md"
