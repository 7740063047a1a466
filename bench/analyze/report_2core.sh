#!/bin/bash
# report_2core.sh: issue 28 item 2's figures on two idle cores: `gpuanalyze report` of a 10 M-event
# and a 10^8-event synthetic trace (gmsynth), pinned to two CPUs of an otherwise idle machine
# (taskset), so that wall times are those of the 2-core machine CI runs on without its neighbours.
# The reference, run alternated with it in the same call: the same report with --no-tune (the
# sweep's grid alone: what the report did past 5 M events before the tuner searched a long trace
# on its steady state). Each run gets a fresh database.
# Usage: report_2core.sh BIN_DIR GMSYNTH [CPUS] [ROUNDS]
#   BIN_DIR holds gpuanalyze and gpureplay (a wheel's bin, or bazel-bin's); CPUS default "0,1".
#   REPORT_2CORE_BIG=0 skips the 10^8-event trace (its report takes minutes).
# Prints one line per run (wall, user+sys CPU, max RSS, the advice line) and the medians.
set -u
BIN=$(realpath "$1"); GM=$(realpath "$2"); CPUS=${3:-0,1}; ROUNDS=${4:-2}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pin() { taskset -c "$CPUS" "$@"; }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; } # no bc on the GPU machines
run() { # LABEL TRACE ARGS...
  local label=$1 tr=$2; shift 2
  rm -f "$W"/r.db*
  local t0 t1
  t0=$(date +%s.%N)
  pin /usr/bin/time -f "%U %S %M" -o "$W/time" "$BIN/gpuanalyze" report "$tr" --gpureplay="$BIN/gpureplay" \
    --db "$W/r.db" --html "$W/r.html" -j 2 "$@" >"$W/out" 2>"$W/err" || { echo "$label failed: $(tail -3 "$W/err")"; return; }
  t1=$(date +%s.%N)
  read -r u s rss <"$W/time"
  local wall cpu; wall=$(calc "$t1 - $t0"); cpu=$(calc "$u + $s")
  echo "$label $(basename "$tr") $wall $cpu $((rss / 1024))" >>"$W/rows"
  printf '%-5s %-10s wall %7.2f s  cpu(gpuanalyze, its gpureplay) %7.2f s  rss %5d MiB  %s\n' "$label" \
    "$(basename "$tr")" "$wall" "$cpu" "$((rss / 1024))" \
    "$(grep -m1 -E 'paste:' "$W/out" | sed 's/^ *//' | cut -c1-120)"
  grep -m1 -E 'searched on|no period found|grid alone|the sweep' "$W/out" | sed 's/^ */      /' | cut -c1-160
}
echo "$(date -u '+%F %H:%M UTC'), CPUs $CPUS of $(nproc --all), load $(cut -d' ' -f1-3 /proc/loadavg)"
pin "$GM" -o "$W/t10m.zst" --events 10000000 >/dev/null
for r in $(seq 1 "$ROUNDS"); do
  run tuner "$W/t10m.zst"
  run grid "$W/t10m.zst" --no-tune
done
if [ "${REPORT_2CORE_BIG:-1}" = 1 ]; then
  t0=$(date +%s)
  pin "$GM" -o "$W/t100m.zst" --events 100000000 >/dev/null
  echo "gmsynth 10^8 events: $(( $(date +%s) - t0 )) s"
  run tuner "$W/t100m.zst"
fi
median() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for tr in t10m.zst t100m.zst; do
  for col in 3 4 5; do
    t=$(awk -v c=$col -v f="$tr" '$1 == "tuner" && $2 == f {print $c}' "$W/rows" | median)
    g=$(awk -v c=$col -v f="$tr" '$1 == "grid" && $2 == f {print $c}' "$W/rows" | median)
    [ -z "$t" ] && continue
    name=$([ $col = 3 ] && echo "wall s" || { [ $col = 4 ] && echo "cpu s" || echo "rss MiB"; })
    printf 'median %-9s %-8s tuner %8s  grid %8s  tuner/grid %s\n' "$tr" "$name" "$t" "${g:--}" \
      "$([ -n "$g" ] && calc "$t / $g" || echo -)"
  done
done
