#!/bin/bash
# old_new_speed.sh OLD_DIR NEW_DIR TRACE [ROUNDS]: replay speed of two builds, as ratios measured
# in the same run (these machines are noisy). Each DIR holds a replay_bench and a gpureplay
# (copied out of bazel-bin). ROUNDS (default 5) rounds, old and new alternated within each:
#   - `replay_bench speed TRACE`: CPU M events/s per setting, one core, events in memory;
#   - `gpureplay TRACE --sweep -j2 -p pytorch:roundup_power2_divisions:2` (16 settings): wall and
#     user+sys CPU seconds (/usr/bin/time); then the same with --event-timing=recorded (no timing
#     range, no placement spread: the 16 point replays alone, 12 fewer than the default's 28).
# Prints the median of each figure for old and new and new/old (events/s: > 1 is faster;
# seconds: < 1 is faster), as a markdown table. Used for bench/RESULTS.md (issue 28 item 1).
set -eu
OLD=$1 NEW=$2 TRACE=$3 ROUNDS=${4:-5}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for r in $(seq "$ROUNDS"); do
  for side in old new; do
    d=$OLD
    [ $side = new ] && d=$NEW
    "$d/replay_bench" speed "$TRACE" | awk -v s=$side '/M events\/s CPU/ { sub(/^ +/, ""); name = $1;
      if ($1 == "(engine") name = "engine-only"; if ($1 == "reference:") name = "decode";
      for (i = 1; i <= NF; i++) if ($i == "M") { print s, name, $(i - 1); break } }' >> "$W/speed"
    /usr/bin/time -f "%e %U %S" -o "$W/t" "$d/gpureplay" "$TRACE" --sweep -j2 \
      -p pytorch:roundup_power2_divisions:2 > /dev/null
    read -r wall user sys < "$W/t"
    echo "$side sweep16_wall_s $wall" >> "$W/speed"
    echo "$side sweep16_cpu_s $(echo "$user + $sys" | bc)" >> "$W/speed"
    # the same 16 settings without the timing range and the placement spread (12 more replays)
    /usr/bin/time -f "%e %U %S" -o "$W/t" "$d/gpureplay" "$TRACE" --sweep -j2 --event-timing=recorded \
      -p pytorch:roundup_power2_divisions:2 > /dev/null
    read -r wall user sys < "$W/t"
    echo "$side sweep16_nospread_wall_s $wall" >> "$W/speed"
    echo "$side sweep16_nospread_cpu_s $(echo "$user + $sys" | bc)" >> "$W/speed"
  done
done
python3 - "$W/speed" "$ROUNDS" <<'PY'
import statistics, sys
rows = {}
order = []
for line in open(sys.argv[1]):
    side, name, v = line.split()
    if name not in order:
        order.append(name)
    rows.setdefault((side, name), []).append(float(v))
print("| figure (median of %s, old/new alternated) | old | new | new / old |" % sys.argv[2])
print("|---|---:|---:|---:|")
for name in order:
    unit = "s" if name.endswith("_s") else "M ev/s"
    if ("old", name) not in rows or ("new", name) not in rows:  # a figure one build has not
        side = "old" if ("old", name) in rows else "new"
        v = "%.2f %s" % (statistics.median(rows[(side, name)]), unit)
        print("| %s | %s | %s | - |" % (name, v if side == "old" else "-", v if side == "new" else "-"))
        continue
    o, n = statistics.median(rows[("old", name)]), statistics.median(rows[("new", name)])
    print("| %s | %.2f %s | %.2f %s | %.2f |" % (name, o, unit, n, unit, n / o if o else float("nan")))
PY
