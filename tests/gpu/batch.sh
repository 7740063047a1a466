#!/bin/bash
# batch.sh: several GPU scripts of tests/gpu in one device call, each with its own $OUT/<name>/
# and a wall-clock share, so one slow stage cannot starve the rest.
#   bash tests/gpu/batch.sh 'NAME:SECONDS:COMMAND' ...
# e.g. bash tests/gpu/batch.sh 'sites:240:bash tests/gpu/sites_gpu.sh' \
#        'memviz:90:bash tests/gpu/memviz_check.sh .gpu-replay'
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOP=${OUT:-/tmp/batchout}
mkdir -p "$TOP"
for spec in "$@"; do
  name=${spec%%:*}; rest=${spec#*:}; secs=${rest%%:*}; cmd=${rest#*:}
  mkdir -p "$TOP/$name"
  echo "== $(date -u +%T) $name (at most ${secs}s): $cmd" | tee -a "$TOP/batch.txt"
  (cd "$ROOT" && OUT="$TOP/$name" timeout --kill-after=10 "$secs" bash -c "$cmd" > "$TOP/$name/stdout.txt" 2>&1)
  echo "   $(date -u +%T) $name rc=$?" | tee -a "$TOP/batch.txt"
  tail -5 "$TOP/$name/stdout.txt" | sed 's/^/   | /'
done
