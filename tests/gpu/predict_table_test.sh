#!/bin/bash
# predict_table_test.sh: traces/predicted/PREDICTION.md must be what the committed recordings
# give today (predict_table.py --check: recomputes every prediction and replay, fails on any
# difference or on a silent miss above 5 %).
# Usage: predict_table_test.sh GPUREC GPUREPLAY PREDICT_TABLE_PY CORPUS_FILE...
set -u
B=${TEST_TMPDIR:-$(mktemp -d)}/bin
mkdir -p "$B"
ln -sf "$(realpath "$1")" "$B/gpurec"
ln -sf "$(realpath "$2")" "$B/gpureplay"
PT=$(realpath "$3"); shift 3
D=""
for f in "$@"; do case "$f" in *PREDICTION.md) D=$(dirname "$(realpath "$f")");; esac; done
exec python3 "$PT" --bin "$B" --dir "$D" --check "$D/PREDICTION.md"
