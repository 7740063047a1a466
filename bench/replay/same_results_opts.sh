#!/bin/bash
# same_results_opts.sh OLD_GPUREPLAY NEW_GPUREPLAY [TRACE...]: same_results.sh's question for the
# options a sweep does not take: each trace (default: every trace of traces/ but traces/invalid)
# replayed by both binaries under each option set below, one policy, --json; the JSON (time
# figures dropped), stderr and exit status must be equal byte for byte. Prints DIFF lines and
# exits 1 on any difference. Used for issue 28 item 1 (bench/RESULTS.md, helper "engine2").
set -u
OLD=$1 NEW=$2
shift 2
cd "$(dirname "$0")/../.." || exit 1
if [ $# -eq 0 ]; then mapfile -t T < <(find traces -name "*.zst" -not -path "*/invalid/*" | sort); set -- "${T[@]}"; fi
OPTS=("--policy=pytorch --event-timing=late" "--policy=pytorch --event-timing=early"
      "--policy=pytorch --capacity=512M" "--policy=bfc:growth --capacity=256M --preload=yes"
      "--policy=pytorch --preload=yes --event-timing=late --late-mallocs=3" "--policy=pytorch --sync-allocs=replay"
      "--policy=pytorch --vmm-buffers=requests --preload=yes" "--policy=pytorch --addresses=driver --preload=yes")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0 runs=0
for f in "$@"; do
  for o in "${OPTS[@]}"; do
    for side in old new; do
      b=$OLD
      [ $side = new ] && b=$NEW
      # shellcheck disable=SC2086 # the option set is words
      "$b" "$f" $o --json 2> "$W/$side.err" |
        sed -E 's/"(replay_seconds|events_per_second|created_unix_ns)":[^,}]*//g' > "$W/$side.out"
      echo "rc ${PIPESTATUS[0]}" >> "$W/$side.out"
    done
    runs=$((runs + 1))
    if ! cmp -s "$W/old.out" "$W/new.out" || ! cmp -s "$W/old.err" "$W/new.err"; then
      echo "DIFF $f $o"
      fail=1
    fi
  done
done
echo "$runs runs compared: $([ $fail = 0 ] && echo identical || echo differences)"
exit $fail
