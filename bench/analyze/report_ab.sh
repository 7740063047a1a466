#!/bin/bash
# report_ab.sh: `gpuanalyze report` of one trace by two builds, alternated (old, new, old, new,
# ...), so that a noisy machine's load falls on both alike; the medians of wall and CPU time
# (user+sys, gpuanalyze and its gpureplay) and max RSS, the ratios new/old, and whether the two
# give the same advice (the paste line, the tuned line, the capacity line). Each run a fresh
# database. Usage: report_ab.sh OLD_BIN_DIR NEW_BIN_DIR TRACE [ROUNDS] [CPUS]
#   a BIN_DIR holds gpuanalyze and gpureplay; CPUS (e.g. "2,3"): pin the runs with taskset.
set -u
OLD=$(realpath "$1"); NEW=$(realpath "$2"); TR=$(realpath "$3"); ROUNDS=${4:-3}; CPUS=${5:-}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }
pin() { if [ -n "$CPUS" ]; then taskset -c "$CPUS" "$@"; else "$@"; fi; }
run() { # LABEL BIN_DIR
  rm -f "$W"/r.db*
  local t0 t1 u s rss
  t0=$(date +%s.%N)
  pin /usr/bin/time -f "%U %S %M" -o "$W/time" "$2/gpuanalyze" report "$TR" --gpureplay="$2/gpureplay" \
    --db "$W/r.db" --html "$W/r.html" -j 2 >"$W/out.$1" 2>"$W/err" || { echo "$1 failed: $(tail -3 "$W/err")"; return; }
  t1=$(date +%s.%N)
  read -r u s rss <"$W/time"
  echo "$1 $(calc "$t1 - $t0") $(calc "$u + $s") $((rss / 1024))" >>"$W/rows"
  printf '%-4s wall %7.2f s  cpu %7.2f s  rss %5d MiB\n' "$1" "$(calc "$t1 - $t0")" "$(calc "$u + $s")" $((rss / 1024))
}
echo "$(date -u '+%F %H:%M UTC'), $(basename "$TR"), ${CPUS:-all} CPUs of $(nproc --all), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  run old "$OLD"
  run new "$NEW"
done
median() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for col in 2 3 4; do
  o=$(awk -v c=$col '$1 == "old" {print $c}' "$W/rows" | median)
  n=$(awk -v c=$col '$1 == "new" {print $c}' "$W/rows" | median)
  name=$([ $col = 2 ] && echo "wall s" || { [ $col = 3 ] && echo "cpu s" || echo "rss MiB"; })
  printf 'median %-8s old %8s  new %8s  new/old %s\n' "$name" "$o" "$n" "$([ -n "$o" ] && [ -n "$n" ] && calc "$n / $o" || echo -)"
done
adv() { grep -E 'paste:|tuned \(gpureplay|best policy:|fits:|saving vs default' "$1"; }
if diff <(adv "$W/out.old") <(adv "$W/out.new") >/dev/null; then echo "advice: the same ($(adv "$W/out.new" | grep -m1 paste: | sed 's/^ *//'))"
else echo "advice DIFFERS:"; diff <(adv "$W/out.old") <(adv "$W/out.new"); fi
grep -m1 -E 'searched on|no period found' "$W/out.new" | sed 's/^ */new: /' | cut -c1-200
