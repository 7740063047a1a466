#!/bin/bash
# jax_prediction_table.sh: run tests/tables/jax_prediction_table.py with the gpureplay next to it.
#   jax_prediction_table.sh DIR        print the table for the corpus in DIR
#   jax_prediction_table.sh --check    (bazel test) recompute traces/recorded/jax's table, diff
set -eu
R=${RUNFILES_DIR:-$0.runfiles}/${TEST_WORKSPACE:-gpumem}  # bazel test and bazel run: runfiles
[ -d "$R" ] || R=$(cd "$(dirname "$0")/../.." && pwd)
GR=$R/replay/gpureplay
if [ "${1:-}" = "--check" ]; then
  exec python3 "$R/tests/tables/jax_prediction_table.py" "$GR" "$R/traces/recorded/jax" --check "$R/traces/recorded/jax/PREDICTION.md"
fi
exec python3 "$R/tests/tables/jax_prediction_table.py" "$GR" "$1"
