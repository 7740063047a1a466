#!/bin/bash
# predict_report_test.sh: the report's "peak against the value" section (analyze/
# ana_html_predict.c) end to end: a trace of gpurec predict names its recordings in its header,
# `gpuanalyze report` replays them through gpureplay under the trace's settings and draws them
# with the trace's own replay at its value; `--curve` names recordings for any trace. Every
# figure in the section's table is checked against gpureplay run on its own.
# Inputs: the hand-made CSV traces of testdata/ (affine8/16/32: a job whose truth is known).
set -u
RUNROOT=$PWD
GPUREC=$RUNROOT/recorder/gpurec
GPUREPLAY=$RUNROOT/replay/gpureplay
GA=$RUNROOT/analyze/gpuanalyze
DATA=$RUNROOT/recorder/predict/testdata
T=${TEST_TMPDIR:-/tmp/predict_report_test.$$}/r
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
export GPUREPLAY GPUREC
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
for f in affine8 affine16 affine32; do "$GPUREC" import -q "$DATA/$f.csv" -o "$f.zst" || bad "import $f"; done
"$GPUREC" predict -q affine8.zst@8 affine16.zst@16 --at=32 -o p32.zst || bad "predict"

# the section of a predicted trace: its recordings' points and its own, per setting
"$GA" report p32.zst --html p32.html -q > /dev/null 2> err.txt || bad "report p32: $(cat err.txt)"
grep -q '<h2 class="sub" id="curve">Peak reserved against the value</h2>' p32.html && ok "the section is there" \
  || bad "no section in p32.html"
n_set=$(grep -o '<g class="setting">' p32.html | wc -l)
n_rec=$(grep -o '<circle class="recorded"' p32.html | wc -l)
n_pred=$(grep -o '<rect class="predicted"' p32.html | wc -l)
[[ $n_set -ge 2 && $n_rec == $((2 * n_set)) && $n_pred == "$n_set" ]] \
  && ok "two recorded points and the predicted one per setting ($n_set settings)" \
  || bad "points: $n_set settings, $n_rec recorded, $n_pred predicted"
grep -q '<th>8 (recorded)</th><th>16 (recorded)</th><th>32 (predicted: this trace)</th>' p32.html \
  && ok "the table's columns" || bad "table columns"
# the default setting's row against gpureplay itself
row=$(grep -o '<tr><td>pytorch</td>[^\n]*</tr>' p32.html | head -1)
for f in affine8 affine16 p32; do
  want=$("$GPUREPLAY" --json -q -p pytorch "$f.zst" | python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['peak_reserved_bytes'])")
  txt=$(python3 -c "
import sys
v=$want
for u in ['B','KiB','MiB','GiB','TiB']:
    if v < 1024 or u == 'TiB': break
    v /= 1024.0
print('%d B' % v if u == 'B' else '%.2f %s' % (v, u))")
  [[ $row == *"<td>$txt"* ]] && ok "pytorch at $f: $txt, as gpureplay says" || bad "pytorch at $f: want $txt in $row"
done
# recordings that are gone: said, their points missing, the rest drawn
mkdir -p moved && cp p32.zst moved/ && (cd moved && "$GA" report p32.zst --html m.html -q > /dev/null 2>&1)
grep -q 'Recording <code>affine8.zst</code>: not found (its point is missing).' moved/m.html \
  && ok "a missing recording is said" || bad "missing recording not said"
# the largest value that fits per setting for the usual GPU sizes (analyze/ana_html_fit.c), as
# gpurec predict --fit answers it on its own
grep -q '<h2 class="sub" id="fit">The largest value that fits</h2>' p32.html && ok "the fit section is there" \
  || bad "no fit section in p32.html"
grep -q '<tr><th>setting</th><th>24 GiB</th><th>48 GiB</th><th>H100 80GB</th><th>H200 141GB</th></tr>' p32.html \
  && ok "the fit table's GPU sizes" || bad "fit table columns"
want=$("$GPUREC" predict -q affine8.zst@8 affine16.zst@16 --fit=24GiB --format=json --policy=pytorch \
  | python3 -c "import json,sys; s=json.load(sys.stdin)['settings'][0]; print(s['largest'] if s['state']=='fits' else 'over %d' % s['largest'] if s['state']=='at_least' else s['state'])")
row=$(sed -n '/<table class="fit">/,/<\/table>/p' p32.html | grep -o '<tr><td>pytorch</td><td>[^<]*</td>' | head -1)
[[ -n $want && $row == "<tr><td>pytorch</td><td>$want</td>" ]] && ok "24 GiB under pytorch: $want, as --fit says" \
  || bad "fit cell: '$row', want '$want'"
out=$("$GA" recommend --db p32.zst.db 2>&1)
[[ $out == *"p32.zst: the largest value that fits"* && $out == *"  24 GiB      as run (pytorch): $want"* ]] \
  && ok "recommend: the largest value that fits per card" || bad "recommend: $out"
grep -q '<table class="fitcurve">' p32.html && ok "the curve the search went through" || bad "no fit curve"
# only settings the job can run under (a PyTorch job's: not TensorFlow's BFC, XLA's preallocation,
# the driver's direct calls), in the fit table, the curve's table and recommend's lines
others=$(sed -n '/<table class="fit">/,/<\/table>/p' p32.html | grep -o '<tr><td>[^<]*</td>' | grep -v '<td>pytorch' | head -3)
[[ -z $others ]] && ok "the fit table: PyTorch's settings only" || bad "the fit table shows $others"
n_fit=$(sed -n '/<table class="fit">/,/<\/table>/p' p32.html | grep -c '<tr><td>pytorch')
[[ $n_fit -ge 4 ]] && ok "the fit table: $n_fit PyTorch settings" || bad "the fit table: $n_fit PyTorch settings"
others=$(sed -n '/<table class="curve">/,/<\/table>/p' p32.html | grep -o '<tr><td>[^<]*</td>' | grep -v '<td>pytorch' | head -3)
[[ -z $others ]] && ok "the curve's table: PyTorch's settings only" || bad "the curve's table shows $others"
[[ $out != *"bfc"* && $out != *"prealloc"* ]] && ok "recommend: PyTorch's settings only" || bad "recommend: $out"
# a recorded trace with the recordings given
"$GA" report affine32.zst --curve=affine8.zst@8 --curve=affine16.zst@16 --html r32.html -q > /dev/null 2> err.txt \
  || bad "report --curve: $(cat err.txt)"
[[ $(grep -o '<circle class="recorded"' r32.html | wc -l) -ge 4 && $(grep -c '<rect class="predicted"' r32.html) == 0 ]] \
  && ok "--curve: the recordings' points, no predicted one" || bad "--curve points"
# no recordings: no section
"$GA" report affine32.zst --html plain.html -q > /dev/null 2>&1
grep -q 'id="curve"' plain.html && bad "a section without recordings" || ok "no recordings, no section"
out=$("$GA" report affine32.zst --curve=affine8.zst --html x.html 2>&1); rc=$?
[[ $rc == 2 && $out == *"--curve: give a recording as TRACE.zst@VALUE, e.g. run8.zst@8"* ]] \
  && ok "--curve without a value: usage error" || bad "--curve usage: rc=$rc $out"
echo "$fails failure(s)"
[[ $fails == 0 ]]
