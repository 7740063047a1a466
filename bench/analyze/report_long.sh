#!/bin/bash
# report_long.sh: `gpuanalyze report` of a long trace, an old build against a new one, run
# alternated (old, new, old, new, ...) so that both see the same load on a shared machine.
# Each run gets a fresh database. Prints wall, user+sys CPU and max RSS (the largest of
# gpuanalyze and its gpureplay) per run, the medians and the new/old ratios, and the advice line
# each printed (so a faster answer is seen to be the same answer).
# Usage: report_long.sh OLD_DIR NEW_DIR TRACE [ROUNDS] [-- OLD_EXTRA_ARGS...]
#   OLD_DIR/NEW_DIR hold gpuanalyze and gpureplay; OLD_EXTRA_ARGS go to the old report only
#   (e.g. --tune: the old full search past 5 M events).
set -u
OLD=$(realpath "$1"); NEW=$(realpath "$2"); TR=$(realpath "$3"); ROUNDS=${4:-2}
shift $(($# < 4 ? $# : 4))
[ "${1:-}" = -- ] && shift
EXTRA=("$@")
W=$(mktemp -d)
run() { # LABEL DIR ARGS...
  local label=$1 dir=$2; shift 2
  rm -f "$W"/r.db*
  /usr/bin/time -f "%e %U %S %M" -o "$W/time" "$dir/gpuanalyze" report "$TR" --gpureplay="$dir/gpureplay" \
    --db "$W/r.db" --html "$W/r.html" "$@" >"$W/out" 2>"$W/err" || { echo "$label failed: $(tail -3 "$W/err")"; return; }
  read -r wall u s rss <"$W/time"
  printf '%s %s %.2f %d\n' "$label" "$wall" "$(echo "$u + $s" | bc)" "$((rss / 1024))" >>"$W/rows"
  printf '%-4s wall %7.2f s  cpu %7.2f s  rss %5d MiB  %s\n' "$label" "$wall" "$(echo "$u + $s" | bc)" \
    "$((rss / 1024))" "$(grep -m1 -E 'best policy:|paste:' "$W/out" | sed 's/^ *//')"
  grep -m1 -E 'searched on|no period found' "$W/out" | sed 's/^ */     /'
}
echo "$(date -u '+%F %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $TR"
for r in $(seq 1 "$ROUNDS"); do
  run old "$OLD" "${EXTRA[@]}"
  run new "$NEW"
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for col in 2 3 4; do
  o=$(awk -v c=$col '$1 == "old" {print $c}' "$W/rows" | median)
  n=$(awk -v c=$col '$1 == "new" {print $c}' "$W/rows" | median)
  name=$([ $col = 2 ] && echo "wall s" || { [ $col = 3 ] && echo "cpu s" || echo "rss MiB"; })
  printf 'median %-8s old %8s  new %8s  new/old %.3f\n' "$name" "$o" "$n" "$(echo "$n / $o" | bc -l)"
done
rm -rf "$W"
