#!/bin/bash
# range_table.sh: run tests/tables/range_table.py with the gpureplay next to it.
#   range_table.sh DIR           print the range tables of DIR (traces + DIR/range_runs.jsonl)
#   range_table.sh --check DIR   (bazel test) recompute DIR's tables, diff with DIR/PREDICTION.md
#   range_table.sh --check DIR N   ... and fail when fewer than N real runs are inside their range
# DIR relative to the repository (bazel test: the runfiles); absolute paths are taken as given.
set -eu
R=${RUNFILES_DIR:-$0.runfiles}/${TEST_WORKSPACE:-gpumem}  # bazel test and bazel run: runfiles
[ -d "$R" ] || R=$(cd "$(dirname "$0")/../.." && pwd)
GR=$R/replay/gpureplay
if [ "${1:-}" = "--check" ]; then
  D=$R/$2
  exec python3 "$R/tests/tables/range_table.py" "$GR" "$D" "$D/range_runs.jsonl" --check "$D/PREDICTION.md" ${3:+--min-inside "$3"}
fi
D=$1
exec python3 "$R/tests/tables/range_table.py" "$GR" "$D" "$D/range_runs.jsonl"
