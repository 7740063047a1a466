#!/bin/bash
# tune_compare.sh: how close gpureplay --tune gets, trace by trace (bench/RESULTS.md, issue 13).
# For each trace: the best point of the --sweep grid, the full search, the same descent over
# the bounded space, and every point of that bounded space replayed (exhaustive): the tuned
# point's peak reserved and the replays each took, as a markdown table on stdout.
#   usage: tune_compare.sh GPUREPLAY TRACE.zst...
set -eu
GR=$1
shift
echo "| trace | events | grid's best | search (replays) | bounded descent (replays) | exhaustive, bounded (replays) | search vs grid |"
echo "|---|---:|---:|---:|---:|---:|---|"
for t in "$@"; do
  ev=$("$GR" "$t" -p direct --json | sed -n 's/.*"events":\([0-9]*\).*/\1/p')
  cells=""
  for m in search bounded exhaustive; do
    out=$("$GR" "$t" --tune --tune-mode=$m --jobs=2 --no-capacity)
    n=$(printf '%s\n' "$out" | sed -n 's/^tune: .* in \([0-9]*\) replays.*/\1/p')
    tuned=$(printf '%s\n' "$out" | sed -n 's/^tuned: *\([0-9.]* [KMG]*i*B\) .*/\1/p')
    cells="$cells | $tuned ($n)"
    if [ $m = search ]; then
      grid=$(printf '%s\n' "$out" | sed -n 's/^grid: *\([0-9.]* [KMG]*i*B\) .*/\1/p')
      beat=$(printf '%s\n' "$out" | sed -n 's/^  the search beats the best grid point by \(.*\)$/\1 below/p')
    fi
  done
  echo "| $(basename "$t") | $ev | $grid$cells | ${beat:-none: the grid point is the best found} |"
done
