#!/bin/bash
# long_merge_test.sh: a streamed recording (gmsynth --streamed: the training loop as gpurec's
# default mode leaves a process's trace before its merge) merged by `gpurec import`, read by
# gpuanalyze info and replayed by gpureplay (issue 24 item 4). Progress shows on a terminal only;
# a recording cut at 60 % merges as far as it goes and says where it stops.
# Usage: long_merge_test.sh GMSYNTH GPUREC GPUANALYZE GPUREPLAY
set -u
GS=$(realpath "$1"); GR=$(realpath "$2"); GA=$(realpath "$3"); RP=$(realpath "$4")
T=${TEST_TMPDIR:-$(mktemp -d)}/longmerge
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

"$GS" -o rec.zst --events 1500000 --streamed --callsites || { echo "FAIL: gmsynth --streamed" >&2; exit 1; }
"$GR" import rec.zst -o m.zst 2>imp.err || fail "gpurec import: $(<imp.err)"
[[ $(wc -l <imp.err) == 1 ]] || fail "stderr not a terminal: one line, no progress: $(<imp.err)"
grep -qF "gpurec: rec.zst: PyTorch's streamed requests (" imp.err || fail "import line: $(<imp.err)"
"$GA" info m.zst >info.out 2>&1 || fail "info: $(<info.out)"
grep -qF "capture mode:   torch-history" info.out || fail "info: not merged: $(<info.out)"
grep -qF "setting:        torch_history.source=stream" info.out || fail "info: source"
grep -qF "setting:        coverage=complete" info.out || fail "info: coverage: $(grep coverage info.out)"
n=$(sed -n 's/^events: *\([0-9]*\) in.*/\1/p' info.out)
(( n > 1400000 )) || fail "merged events: '$n'"
"$RP" m.zst --json >rp.json 2>rp.err || fail "gpureplay: $(<rp.err)"
grep -q '"peak_reserved_bytes":[1-9]' rp.json || fail "gpureplay --json: $(head -c 400 rp.json)"

# on a terminal: the two passes' progress on stderr (script gives the command a terminal)
if command -v script >/dev/null; then
  script -qfc "'$GR' import rec.zst -o t.zst" /dev/null >tty.out 2>&1 </dev/null
  tr '\r' '\n' <tty.out | grep -qE "^gpurec: merging rec.zst: pass 1 of 2 \(reading\), chunk [0-9]+ of [0-9]+" ||
    fail "no pass 1 progress on a terminal: $(tr '\r' '\n' <tty.out | head -5)"
  tr '\r' '\n' <tty.out | grep -qE "^gpurec: merging rec.zst: pass 2 of 2 \(writing\), chunk ([0-9]+) of \1 \(100%\)" ||
    fail "no pass 2 progress to 100%: $(tr '\r' '\n' <tty.out | tail -5)"
  cmp -s t.zst m.zst || fail "the merge on a terminal wrote other bytes"
fi

# cut at 60 %: merged as far as it goes, partial, the end said
sz=$(stat -c %s rec.zst)
head -c $((sz * 6 / 10)) rec.zst >cut.zst
"$GR" import cut.zst -o cm.zst 2>cut.err || fail "gpurec import of a cut recording: $(<cut.err)"
"$GA" info cm.zst >cinfo.out 2>&1 || fail "info cut: $(<cinfo.out)"
grep -qF "coverage:       PARTIAL trace" cinfo.out || fail "cut: not partial: $(head -3 cinfo.out)"
grep -qE "^setting: +coverage.why=cupti_lost truncated$" cinfo.out || fail "cut: why: $(grep coverage cinfo.out)"
cn=$(sed -n 's/^events: *\([0-9]*\) in.*/\1/p' cinfo.out)
grep -qE "^setting: +coverage.to_event=$cn$" cinfo.out || fail "cut: to_event is not the $cn events: $(grep to_event cinfo.out)"
(( cn > n / 3 && cn < n * 3 / 4 )) || fail "cut: $cn of $n events"
"$RP" cm.zst >crp.out 2>&1 || fail "gpureplay cut: $(<crp.out)"
head -1 crp.out | grep -qF "PARTIAL trace" || fail "gpureplay cut: first line: $(head -1 crp.out)"

(( fails == 0 )) && echo "ok" || exit 1
