#!/bin/bash
# same_results.sh OLD_GPUREPLAY NEW_GPUREPLAY [TRACE...]: does a speed change leave every figure
# as it was? For each trace (default: every trace of traces/ but traces/invalid), both binaries
# run `--sweep -j2 -o R.json`; the results files (timings and creation time dropped) and the
# printed tables must be equal byte for byte. Prints DIFF lines and exits 1 on any difference.
# Used for issue 13 part 5 (bench/RESULTS.md, "Speed of the replay for the search").
set -u
OLD=$1 NEW=$2
shift 2
cd "$(dirname "$0")/../.."
if [ $# -eq 0 ]; then set -- $(find traces -name '*.zst' -not -path '*/invalid/*' | sort); fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
for f in "$@"; do
  for side in old new; do
    b=$OLD
    [ $side = new ] && b=$NEW
    mkdir -p "$W/$side"
    rm -f "$W/$side/r.json"
    "$b" "$f" --sweep -j2 -o "$W/$side/r.json" 2>&1 | sed "s#$W/$side/#R/#" > "$W/$side/out.txt"
    python3 - "$W/$side/r.json" "$W/$side/r.norm" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    d = None
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("replay_seconds", "events_per_second", "created_unix_ns")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
json.dump(strip(d), open(sys.argv[2], "w"), sort_keys=True)
PY
  done
  if ! cmp -s "$W/old/r.norm" "$W/new/r.norm" || ! cmp -s "$W/old/out.txt" "$W/new/out.txt"; then
    echo "DIFF $f"
    fail=1
  fi
done
echo "$# traces compared: $([ $fail = 0 ] && echo identical || echo differences)"
exit $fail
