#!/bin/sh
# hostile_test.sh GPUREC GPUREPLAY GPUANALYZE: runs the hostile corpus (run_hostile.py).
set -eu
d=tests/hostile
exec python3 "$d/run_hostile.py" --gpurec "$1" --gpureplay "$2" --gpuanalyze "$3" \
  --cases "$d/cases" --manifest "$d/MANIFEST" --gen "$d/gen_corpus.py" \
  --report "${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}/hostile_report.md"
