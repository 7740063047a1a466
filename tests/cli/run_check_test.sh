#!/bin/bash
# run_check_test.sh: the report checks its replay against the run it replays
# (analyze/ana_run_check.c). A trace of PyTorch's own history holds the run's segments; replayed
# under the setting the job ran with, the simulation must reserve what they did.
#  - traces/recorded/advice/fragment.zst: the replay is exact (1.05 GiB): said, in the text and
#    the HTML; the advice is a setting 480 MiB smaller.
#  - the same trace with one recorded segment more (the text form, edited: a segment the
#    requests never use, so the run reserved more than any replay can): the replay misses the
#    run by that much, said first; by 16 MiB the advice stands, by 256 MiB (past half of the
#    saving less the floor) it does not: every figure may be off by as much.
#  - traces/predicted/resnet/rec.v16.zst, a real miss: the driver placed three 20 MiB segments
#    top down, the model bottom up, and PyTorch's best fit broke a tie the other way; the replay
#    reserves 826 MiB, the run 834 MiB.
#  - a run that failed a request, and a trace in requests mode: nothing is said.
# Usage: run_check_test.sh GPUANALYZE GPUREPLAY GPUREC FRAGMENT RESNET16 REQUESTS
set -u
GA=$(realpath "$1"); RP=$(realpath "$2"); GR=$(realpath "$3")
FRAG=$(realpath "$4"); RES=$(realpath "$5"); REQ=$(realpath "$6")
T=${TEST_TMPDIR:-$(mktemp -d)}/run_check
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
export GPUREPLAY=$RP
fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# exact: said before the advice, which stands
cp "$FRAG" frag.zst
out=$("$GA" report -q --no-tune frag.zst --html frag.html 2>&1)
line=$(grep -n "checked against the run" <<< "$out" | cut -d: -f1)
adv=$(grep -n "paste:" <<< "$out" | head -1 | cut -d: -f1)
[[ $out == *"checked against the run: replayed under the setting it ran with (pytorch), it reserves 1.05 GiB, exactly what the run reserved (the allocator's own segments, in the trace)"* && -n $line && -n $adv && $line -lt $adv ]] \
  && ok "exact: said before the advice" || fail "exact: $out"
[[ $out == *"paste: PYTORCH_CUDA_ALLOC_CONF="* && $out != *"misses"* ]] && ok "exact: a setting advised" || fail "exact advice: $out"
grep -q '<p class="check check-exact" id="check"><b>Checked against this run</b>' frag.html \
  && ok "exact: the HTML says it" || fail "exact: no check in frag.html"

# the run reserved more than the replay: one segment the requests never touch, at the end
"$GA" dump --csv "$FRAG" > frag.csv || fail "dump"
last=$(grep -v '^#' frag.csv | tail -1 | cut -d, -f1)
miss() { # MiB -> frag_MiB.zst
  { cat frag.csv; echo "$((last + 1000)),segment_alloc,0,0,0x7a0000000000,$(($1 << 20)),device,0x0,0,0,0"; } > "m$1.csv"
  "$GR" import -q "m$1.csv" -o "frag_$1.zst" || fail "import m$1.csv"
}
miss 16
out=$("$GA" report -q --no-tune frag_16.zst --html m16.html 2>&1)
[[ $out == *"warning: the replay misses this run by 16.00 MiB (1.47 %): replayed under the setting it ran with (pytorch), it reserves 1.05 GiB; the run reserved 1.06 GiB (the allocator's own segments, in the trace). Every figure below may be off by as much: the advice asks a saving past it"* ]] \
  && ok "a miss of 16 MiB: said" || fail "miss 16: $out"
[[ $out == *"paste: PYTORCH_CUDA_ALLOC_CONF="* ]] && ok "a miss of 16 MiB: the advice stands (480 MiB saved)" || fail "miss 16 advice: $out"
grep -q '<p class="check check-off" id="check"><b>The replay misses this run by 16.00 MiB (1.47 %)</b>' m16.html \
  && ok "a miss: the HTML says it" || fail "miss 16: no check-off in m16.html"
grep -q '<b>Trust: off on this run</b> by 16.00 MiB' m16.html && ok "a miss: the trust line says it" \
  || fail "miss 16: trust line: $(grep -o '<p class="trust[^<]*<b>[^<]*' m16.html)"
miss 256
out=$("$GA" report -q --no-tune frag_256.zst 2>&1)
[[ $out == *"misses this run by 256.00 MiB"* && $out == *"keep the default (pytorch): no setting is reliably smaller"* &&
   $out == *"with what the replay cannot tell: timing, placement, its miss on this run)"* && $out == *"paste: nothing (the default)"* ]] \
  && ok "a miss of 256 MiB: no setting is reliably smaller" || fail "miss 256: $out"

# a run that failed a request: the replay serves it within the capacity, the run did not; its
# segments are not the figure to meet: no check
{ cat frag.csv; echo "$((last + 1000)),alloc_failed,0,0,0x0,$((64 << 30)),device,0x0,0,0,0"; } > failed.csv
"$GR" import -q failed.csv -o failed.zst || fail "import failed.csv"
out=$("$GA" report -q --no-tune failed.zst 2>&1)
[[ $out != *"checked against the run"* && $out != *"misses this run"* ]] && ok "a run that failed a request: no check" \
  || fail "failed: $out"

# a real miss
cp "$RES" resnet16.zst
out=$("$GA" report -q --no-tune resnet16.zst --html resnet16.html 2>&1)
grep -q '<div class="card rec"><div class="ct">It reserves</div><div class="cv">834.00 MiB</div><div class="cs">as the job ran: PyTorch&#39;s default (pytorch); the run&#39;s own segments (the replay: 826.00 MiB)</div>' resnet16.html \
  && ok "resnet at 16: the card shows what the run reserved, the replay beside it" || fail "resnet16 card: $(grep -o '<div class="card rec">.\{0,300\}' resnet16.html)"
[[ $out == *"warning: the replay misses this run by 8.00 MiB (0.96 %): replayed under the setting it ran with (pytorch), it reserves 826.00 MiB; the run reserved 834.00 MiB"* ]] \
  && ok "resnet at 16: the replay misses the run by 8 MiB, said" || fail "resnet16: $out"

# a prediction from recordings gpurec predict checked against their runs: said in the text and in
# the HTML's trust line (the trace's own text, escaped)
HB=$(dirname "$RES")/../hf_batch
"$GR" predict -q "$HB/rec.v8.zst@8" "$HB/rec.v16.zst@16" --at=32 -o hb32.zst -p pytorch:expandable_segments:True \
  || fail "predict hb32"
out=$("$GA" report -q --no-tune hb32.zst --html hb32.html 2>&1)
[[ $out == *"the recordings it was predicted from: each of 2 recordings, replayed under the setting its job ran with, reserves what its run reserved"* ]] \
  && ok "a predicted trace: its recordings' check said" || fail "predicted: $out"
grep -q '<b>Trust: unvalidated</b>: the trace is predicted (gpurec predict), not recorded; the recordings it was predicted from: each of 2 recordings' hb32.html \
  && ok "a predicted trace: the trust line says it" || fail "predicted trust: $(grep -o '<p class="trust.\{0,300\}' hb32.html)"

# no segments of the run in the trace: nothing to check, nothing said
cp "$REQ" req.zst
out=$("$GA" report -q --no-tune req.zst 2>&1)
[[ $out != *"checked against the run"* && $out != *"misses this run"* ]] && ok "requests mode: no check" || fail "requests: $out"

echo "$fails failure(s)"
[[ $fails == 0 ]]
