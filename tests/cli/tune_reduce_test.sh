#!/bin/bash
# tune_reduce_test.sh: issue 28 item 2. The tuner's search on a long trace's steady state (the
# warm-up, the distinct training steps, a few periods; replay/tool/tune/gpureplay_tune_period.c)
# must never change its advice against the search on every event, and must say which it did.
#  - every trace of the corpus given (traces/): `--tune --tune-reduce=always` (the reduced
#    search wherever a period is found, at any length) against `--tune-reduce=never`, with
#    and without hard limits: the default, grid, tuned and chosen points, the line to paste,
#    the capacity answers, all the same; at least the traces known to repeat are reduced;
#  - a synthetic training run (gmsynth: steps of one sequence length, one in 8 of another):
#    reduced to a small share of its events, the same advice;
#  - the default's capacity bisected beside the choice's spreads: the same as after them;
#  - `gpuanalyze report` of a trace past 1 M events: the tuner's advice, searched on the
#    steady state, said in the text and the HTML.
# Usage: tune_reduce_test.sh GPUREPLAY GPUANALYZE GMSYNTH TRACE...
#   TUNE_REDUCE_ONE_PASS=1 (the sanitizer runs, .bazelrc): the corpus searched with hard limits
#   only (the superset of the code: --no-limits skips the limits' search), not both ways, and
#   over the bounded space (--tune-mode=bounded: the same descent, reduction and confirmation
#   over fewer candidates; 10 s instead of 28 s of an idle 2-core machine under ASan + UBSan).
set -u
RP=$(realpath "$1"); GA=$(realpath "$2"); GS=$(realpath "$3"); shift 3
T=${TEST_TMPDIR:-$(mktemp -d)}/tune_reduce
rm -rf "$T" && mkdir -p "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
advice() { grep -E '^(default|grid|tuned|chosen):|^paste:|^capacity:|^fits' "$1"; }

# compare TRACE [gpureplay options]: RED=1 when the reduced search ran
compare() {
  local t=$1; shift
  RED=0
  "$RP" "$t" --tune --jobs=2 --tune-reduce=always "$@" >"$T/a.txt" 2>"$T/a.err" || { fail "$t $*: always: $(cat "$T/a.err")"; return; }
  grep -q '^searched on ' "$T/a.txt" || return 0
  "$RP" "$t" --tune --jobs=2 --tune-reduce=never "$@" >"$T/b.txt" 2>"$T/b.err" || { fail "$t $*: never: $(cat "$T/b.err")"; return; }
  advice "$T/b.txt" >"$T/b.adv"
  [ -s "$T/b.adv" ] || { fail "$t: no advice printed: $(head -c 2000 "$T/b.txt")"; return; }
  advice "$T/a.txt" | diff "$T/b.adv" - >"$T/d.txt" || fail "$t $*: the reduced search changed the advice: $(cat "$T/d.txt")"
  grep -q 'finalists confirmed on the whole trace' "$T/a.txt" || fail "$t: the search does not say it confirmed"
  RED=1
}

reduced=0 traces=0
passes=("--no-limits" "")
[ "${TUNE_REDUCE_ONE_PASS:-0}" = 1 ] && passes=("--tune-mode=bounded")
for t in "$@"; do
  case "$t" in *.zst) ;; *) continue ;; esac
  traces=$((traces + 1))
  for lim in "${passes[@]}"; do
    compare "$t" $lim
    [ "$RED" = 1 ] && reduced=$((reduced + 1)) && echo "reduced: $t $lim"
  done
done
echo "$traces traces, $reduced searches reduced"
[ "$traces" -ge 40 ] || fail "only $traces traces of the corpus given"
# the corpus's traces that repeat (JAX's native ones, the overhead loop, the bundled example)
[ "$reduced" -ge $((4 * ${#passes[@]})) ] || fail "only $reduced searches ran reduced"

cd "$T" || exit 1
"$GS" -o syn.zst --events 400000 --seed 3 || fail "gmsynth"
compare syn.zst --no-limits
[ "$RED" = 1 ] || fail "gmsynth's training loop was not reduced: $(head -5 a.txt)"
# a few percent of the events: the warm-up, the 2-3 kinds of step, their pairs
n=$(sed -n 's/^searched on \([0-9]*\) of 400000 events.*/\1/p' a.txt)
[ -n "$n" ] && [ "$n" -lt 80000 ] || fail "searched on ${n:-?} of 400000 events: $(grep searched a.txt)"
# a trace too large to hold in memory (made so by the test's limit): scanned and replayed from
# the file, every finalist and capacity in one decode of it; the same advice
cp a.txt mem.txt
GPUREPLAY_TEST_TUNE_LOAD_BYTES=1 "$RP" syn.zst --tune --jobs=2 --tune-reduce=always --no-limits >str.txt 2>&1 ||
  fail "streamed: $(cat str.txt)"
grep -q '^searched on ' str.txt || fail "streamed: not reduced: $(head -5 str.txt)"
advice mem.txt | diff - <(advice str.txt) || fail "streamed: another advice than in memory"
# the default's capacity bisected on the whole trace beside the choice's spreads (--jobs=2,
# gpureplay_tune_reduce.c) gives what it gives after them (--jobs=1): the same text, replays
# counted too; a run (seed 6) whose default needs more on the whole trace than where the
# reduced one said, so that it is bisected there
# (not under the sanitizers, TUNE_REDUCE_ONE_PASS: two whole 10^6-event tunes took ~30 s there;
# the optimized run keeps it)
if [ "${TUNE_REDUCE_ONE_PASS:-0}" != 1 ]; then
  "$GS" -o cap.zst --events 1000000 --seed 6 || fail "gmsynth"
  for j in 1 2; do
    GPUREPLAY_TUNE_TIMES=1 GPUREPLAY_TEST_TUNE_LOAD_BYTES=1 "$RP" cap.zst --tune --jobs=$j --tune-reduce=always \
      >cap$j.txt 2>cap$j.err || fail "capacity, --jobs=$j: $(cat cap$j.err)"
  done
  grep -q "default's capacity (beside) .* replays [1-9]" cap2.err ||
    fail "the default's capacity was not bisected beside the choice: $(grep 'tune phase' cap2.err)"
  untimed() { sed -E 's/[0-9]+\.[0-9]+ s;/X s;/' "$1"; }
  untimed cap1.txt | diff - <(untimed cap2.txt) || fail "the default's capacity beside the choice: another text"
fi
# under --tune-reduce=auto a short trace is searched whole
"$RP" syn.zst --tune --no-limits >auto.txt 2>&1 || fail "auto"
grep -q '^searched on' auto.txt && fail "a 400 000-event trace was reduced under auto"

# the report: past 1 M events, the tuner's advice searched on the steady state, said so
"$GS" -o long.zst --events 1100000 --seed 5 || fail "gmsynth"
GPUREPLAY=$RP "$GA" report long.zst --html long.html >rep.txt 2>rep.err || fail "report: $(cat rep.err)"
grep -q 'tuned (gpureplay --tune)' rep.txt || fail "no tuner's advice: $(cat rep.txt)"
grep -q 'searched on [0-9]* of 1100000 events: period [0-9]* events found at event [0-9]*' rep.txt ||
  fail "the report does not say how it searched: $(cat rep.txt)"
grep -q 'finalists confirmed on the whole trace' long.html || fail "the HTML does not say how it searched"

[ "$fails" -eq 0 ] && echo PASS
exit $((fails > 0))
