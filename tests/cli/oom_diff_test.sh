#!/bin/bash
# oom_diff_test.sh: gpuanalyze oom, diff, report over several traces and load of gpureplay's
# JSON lines (issue 14, items 4-6), on real traces (traces/recorded: PyTorch jobs recorded on an
# H200 in requests mode). Exit codes, stdout and stderr are compared; every figure oom gives is
# checked against gpureplay run on its own (the failing event, the capacity that fits, the
# setting that fits), and diff's peaks against gpuanalyze info.
# Usage: oom_diff_test.sh GPUANALYZE GPUREPLAY GPUREC TRAINCKPT DDP0 DDP1 JAXTRACE VALID_FILE...
#        (traces/valid/empty.zst among the VALID_FILEs)
set -u
GA=$(realpath "$1"); RP=$(realpath "$2"); GR=$(realpath "$3"); CKPT=$(realpath "$4"); D0=$(realpath "$5")
D1=$(realpath "$6"); JAX=$(realpath "$7")
shift 7
EMPTY=
ALLK=
for v in "$@"; do case "$v" in */empty.zst) EMPTY=$(realpath "$v");; */all-kinds.zst) ALLK=$(realpath "$v");; esac; done
[ -n "$EMPTY" ] || { echo "FAIL: traces/valid/empty.zst not given" >&2; exit 1; }
T=${TEST_TMPDIR:-$(mktemp -d)}/oomdiff
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# run NAME WANT_RC CMD...: stdout in NAME.out, stderr in NAME.err
run() {
  local name=$1 want=$2
  shift 2
  "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "$name: exit $rc, want $want: $(cat "$name.err")"
}
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(cat "$1")"; }
empty() { [ ! -s "$1" ] || fail "$1 not empty: $(cat "$1")"; }
json() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

# No OOM: said plainly, exit 0.
run none 0 "$GA" oom "$CKPT"
empty none.err
has none.out "no out-of-memory: all 2647 requests were served"

# A capacity the default setting does not fit.
run c700 0 "$GA" oom "$CKPT" --capacity=700MiB
empty c700.err
has c700.out "pytorch within 700.00 MiB (given)"
has c700.out "failed request: 75.00 MiB on stream 7, event 2538"
has c700.out "+ 128.25 MiB external"
has c700.out "too small: each block smaller than the request"
has c700.out "no setting of this framework fits 700.00 MiB"
# The failing event and the OOM count are gpureplay's own.
"$RP" "$CKPT" --policy=pytorch --capacity=700MiB --json >rp700.json 2>/dev/null || fail "gpureplay 700MiB"
[ "$(json rp700.json "d['first_oom_event']")" = 2538 ] || fail "gpureplay's first OOM: $(cat rp700.json)"
has c700.out "($(json rp700.json "d['ooms']") OOMs in all)"
# The capacity oom gives fits, 2 MiB less does not (gpureplay, independently).
cap=$(sed -n 's/^  capacity: \([0-9.]*\) MiB with pytorch.*/\1/p' c700.out)
[ -n "$cap" ] || fail "no capacity line: $(cat c700.out)"
mib=${cap%.*}
"$RP" "$CKPT" --policy=pytorch --capacity=${mib}MiB --json >fit.json 2>/dev/null
[ "$(json fit.json "d['ooms']")" = 0 ] || fail "gpureplay at ${mib} MiB: $(json fit.json "d['ooms']") OOMs"
"$RP" "$CKPT" --policy=pytorch --capacity=$((mib - 2))MiB --json >nofit.json 2>/dev/null
[ "$(json nofit.json "d['ooms']")" != 0 ] || fail "gpureplay at $((mib - 2)) MiB has no OOM: not the smallest"

# A capacity a setting fits: --json, and the setting it names replays without an OOM.
run c800 0 "$GA" oom "$CKPT" --capacity=800MiB --json
empty c800.err
[ "$(json c800.out "d['oom']")" = True ] || fail "c800: $(cat c800.out)"
spec=$(json c800.out "d['fix']['setting']")
[ -n "$spec" ] && [ "$spec" != None ] || fail "no setting for 800 MiB: $(cat c800.out)"
"$RP" "$CKPT" --policy="$spec" --capacity=800MiB --json >fix.json 2>/dev/null || fail "gpureplay --policy=$spec"
[ "$(json fix.json "d['ooms']")" = 0 ] || fail "the setting '$spec' has OOMs within 800 MiB"
[ "$(json c800.out "d['request']['size_bytes']")" = 104857600 ] || fail "c800 request: $(cat c800.out)"

# The live bytes alone exceed the device: no setting helps, by how much.
run c500 0 "$GA" oom "$CKPT" --capacity=500MiB
has c500.out "no setting helps: the live bytes alone exceed the device by 196.94 MiB (needs at least 696.94 MiB, has 500.00 MiB)"

# JAX (the BFC inside XLA's arena): the default's own limit (75% of the device) is what fails,
# and the setting oom names (the tuner's bisection on the memory fraction) replays without one.
run jax 0 "$GA" oom "$JAX" --capacity=1500MiB --json
[ "$(json jax.out "d['policy']")" = jax ] || fail "jax policy: $(cat jax.out)"
[ "$(json jax.out "d['free']['at_limit'] and d['free']['limit_bytes'] < 1500 * 1048576")" = True ] ||
  fail "jax: want the failure against the arena's limit: $(cat jax.out)"
jspec=$(json jax.out "d['fix']['setting']")
case "$jspec" in jax:XLA_PYTHON_CLIENT_MEM_FRACTION=*) ;; *) fail "jax setting: $jspec";; esac
"$RP" "$JAX" --policy="$jspec" --capacity=1500MiB --json >jfix.json 2>/dev/null || fail "gpureplay $jspec"
[ "$(json jfix.json "d['ooms']")" = 0 ] || fail "the setting '$jspec' has OOMs within 1500 MiB"
"$RP" "$JAX" --policy=jax --capacity=1500MiB --json >jdef.json 2>/dev/null
[ "$(json jdef.json "d['ooms']")" = "$(json jax.out "d['ooms']")" ] || fail "jax OOM count differs from gpureplay's"

# Bad input: a trace without allocations; usage errors; a pickle.
run emptyt 0 "$GA" oom "$EMPTY"
empty emptyt.err
has emptyt.out "the trace holds no allocation request"
printf '# gpumem trace, text form 1\n#capture_mode=synthetic\nts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context\n1,free,0,7,0x1000,0,device,0x0,0,0,0\n2,free,0,7,0x2000,0,device,0x0,0,0,0\n' >frees.csv
run nousage 2 "$GA" oom
has nousage.err "gpuanalyze: missing TRACE"
run badpol 2 "$GA" oom "$CKPT" --policy=nosuch
has badpol.err "bad --policy 'nosuch': unknown policy 'nosuch'"
run csvin 1 "$GA" oom frees.csv
has csvin.err "'frees.csv' is a gpumem trace in CSV text form: convert it with \`gpurec import frees.csv -o frees.zst\`"
"$GR" import frees.csv -o frees.zst 2>/dev/null || fail "gpurec import frees.csv"
run frees 0 "$GA" oom frees.zst
empty frees.err
has frees.out "the trace holds no allocation request for the replay (no GPU allocation, or frees only)"
run dfrees 0 "$GA" diff frees.zst "$EMPTY"
has dfrees.out "note: A has no GPU allocation (2 events, frees only): its figures are 0"

# diff: the two ranks of one DDP job; peaks are gpuanalyze info's.
run diff 0 "$GA" diff "$D0" "$D1" --csv dcsv
for i in 0 1; do
  f=$D0; [ $i = 1 ] && f=$D1
  peak=$("$GA" info "$f" | sed -n 's/^peak live: *\([^(]*\) (.*/\1/p' | sed 's/ *$//')
  grep -q "^peak live .*$peak" diff.out || fail "diff lacks info's peak '$peak' of $f: $(cat diff.out)"
done
has diff.out "peak reserved"
has diff.err "wrote diff_summary.csv, diff_callsites.csv and diff_timeline.csv into dcsv/"
[ "$(wc -l <dcsv/diff_timeline.csv)" = 1001 ] || fail "timeline rows: $(wc -l <dcsv/diff_timeline.csv)"
[ "$(head -1 dcsv/diff_timeline.csv)" = "t_share,a_ts_ns,b_ts_ns,a_live_bytes,b_live_bytes" ] || fail "timeline header"
[ "$(wc -l <dcsv/diff_summary.csv)" = 3 ] || fail "summary rows"
# The timeline's maximum is each trace's peak.
max0=$(cut -d, -f4 dcsv/diff_timeline.csv | sort -n | tail -1)
[ "$max0" = "$(sed -n 2p dcsv/diff_summary.csv | cut -d, -f6)" ] || fail "A's timeline max $max0 is not its peak"
# A trace against itself: nothing grows, nothing new.
run self 0 "$GA" diff "$CKPT" "$CKPT" --no-replay --json
[ "$(json self.out "d['new_callsites'] + d['gone_callsites']")" = 0 ] || fail "self diff: $(cat self.out)"
[ "$(json self.out "max(abs(c['growth_bytes']) for c in d['callsites'])")" = 0 ] || fail "self growth"
run diff1 2 "$GA" diff "$D0"
has diff1.err "diff takes two traces: A.zst B.zst"
run diffe 0 "$GA" diff "$EMPTY" "$D0" --no-replay
has diffe.out "note: A has no GPU allocation (0 events): its figures are 0"

# oom and diff run gpureplay (the analyzer does not link it): --json is gpureplay
# --explain-oom's object with the paste line added; gpureplay's failures are one line of ours.
"$RP" "$CKPT" --explain-oom --capacity=800MiB --json --jobs=2 >x800.json 2>x800.err || fail "gpureplay --explain-oom"
empty x800.err
python3 -c "
import json; a=json.load(open('c800.out')); b=json.load(open('x800.json'))
assert a['fix'].pop('paste').startswith('PYTORCH_CUDA_ALLOC_CONF='), a['fix']
assert a == b, (a, b)" || fail "oom --json is not gpureplay --explain-oom's object: $(cat c800.out x800.json)"
mkdir -p alone && cp "$GA" alone/gpuanalyze
run nogr 1 env -u GPUREPLAY PATH=/usr/bin:/bin alone/gpuanalyze oom "$CKPT"
empty nogr.out
[ "$(cat nogr.err)" = "gpuanalyze: error: gpureplay not found (beside gpuanalyze, \$GPUREPLAY, PATH): oom replays the trace with it (--gpureplay=PATH)" ] ||
  fail "nogr: $(cat nogr.err)"
run badgr 1 "$GA" oom "$CKPT" --gpureplay=/nonexistent/gpureplay
[ "$(cat badgr.err)" = "gpuanalyze: error: cannot explain why '$CKPT' runs out of memory: cannot run '/nonexistent/gpureplay': No such file or directory" ] ||
  fail "badgr: $(cat badgr.err)"
python3 -c "
b=bytearray(open('$CKPT','rb').read()); b[len(b)//2]^=0xff; open('flip.zst','wb').write(b)"
run flip 1 "$GA" oom flip.zst --strict
[ "$(cat flip.err)" = "gpuanalyze: error: cannot read 'flip.zst': chunk 1 at offset 798: checksum mismatch" ] ||
  fail "flip: $(cat flip.err)"
run dnogr 0 env -u GPUREPLAY PATH=/usr/bin:/bin alone/gpuanalyze diff "$D0" "$D1"
has dnogr.err "gpuanalyze: warning: gpureplay not found (beside gpuanalyze, \$GPUREPLAY, PATH): the diff goes without peak reserved"
grep -q "^peak reserved" dnogr.out && fail "dnogr: a peak reserved without gpureplay: $(cat dnogr.out)"
# diff's peak reserved is gpureplay's own figure for the setting the job ran with.
"$RP" "$D0" -p pytorch --event-timing=recorded --json >d0.json 2>/dev/null || fail "gpureplay $D0"
run dj 0 "$GA" diff "$D0" "$D1" --json
[ "$(json dj.out "d['a']['peak_reserved_bytes']")" = "$(json d0.json "d['peak_reserved_plus_external_bytes']")" ] ||
  fail "diff's peak reserved of A is not gpureplay's: $(cat dj.out | head -c 300)"

# report over two traces, one database; load reads what gpureplay --json writes.
run rep 0 "$GA" report "$D0" "$D1" --gpureplay "$RP" --html two.html
[ "$(grep -c '^  paste: ' rep.out)" = 2 ] || fail "report over two traces: $(cat rep.out)"
has rep.err "wrote report.db"
[ -s two.html ] || fail "two.html missing"
"$RP" "$D0" --sweep --json >lines.json 2>/dev/null || fail "gpureplay --json"
run lines 0 "$GA" load --db lines.db "$D0" lines.json
has lines.err "1 results files (0 already there)"
run lines2 0 "$GA" recommend --db lines.db
has lines2.out "paste: "

# Issue 14 items 4-5 in the HTML. A report whose replay runs out of memory opens with "Why it
# ran out", and its figures are `gpuanalyze oom --json`'s (c700 above: the same capacity).
cp "$CKPT" ck.zst
run repoom 0 "$GA" report ck.zst --capacity=700MiB --gpureplay "$RP" --html oom.html
has repoom.err "ck.zst runs out of memory: asking gpureplay --explain-oom why"
"$GA" oom ck.zst --capacity=700MiB --json --gpureplay "$RP" >oomj.out 2>/dev/null || fail "oom --json 700"
python3 - oom.html oomj.out <<'PY' || fail "the report's 'Why it ran out' differs from gpuanalyze oom --json"
import json, re, sys
h = open(sys.argv[1]).read(); o = json.load(open(sys.argv[2]))
m = re.search(r'<section class="oom" id="oom-1" data-event="(\d+)" data-size="(\d+)" data-live="(\d+)" '
              r'data-free="(\d+)" data-fits-capacity="(\d+)" data-ooms="(\d+)"><h2 class="sub">Why it ran out</h2>', h)
assert m, "no section"
assert h.index('Why it ran out') < h.index('What the job needs') if 'What the job needs' in h else True
ev, size, live, free, fits, ooms = map(int, m.groups())
assert ev == o['request']['event'] and size == o['request']['size_bytes'], (ev, size, o['request'])
assert live == o['live']['bytes'] and ooms == o['ooms'], (live, o['live'], ooms)
assert free == o['free']['free_bytes'] and fits == o['fix']['capacity_bytes'], (free, fits, o['free'], o['fix'])
assert h.index('<section class="oom"') < h.index('class="cards"'), "not the first section"
PY
# A trace whose recorded run failed: no --capacity needed, the same section from the recorded failure.
cp "$ALLK" ak.zst
run repak 0 "$GA" report ak.zst --gpureplay "$RP" --html ak.html
has repak.err "ak.zst runs out of memory: asking gpureplay --explain-oom why"
"$GA" oom ak.zst --json --gpureplay "$RP" >akj.out 2>/dev/null || fail "oom --json all-kinds"
python3 - ak.html akj.out <<'PY' || fail "ak.html's 'Why it ran out' differs from gpuanalyze oom --json"
import json, re, sys
h = open(sys.argv[1]).read(); o = json.load(open(sys.argv[2]))
m = re.search(r'<section class="oom" id="oom-1" data-event="(\d+)" data-size="(\d+)" data-live="(\d+)"', h)
assert m and o['recorded_failures'] == 1, (m, o['recorded_failures'])
assert tuple(map(int, m.groups())) == (o['request']['event'], o['request']['size_bytes'], o['live']['bytes']), m.groups()
PY
# A report that does not run out of memory has no such section.
! grep -q 'class="oom"' two.html || fail "two.html (no OOM) has a 'Why it ran out'"

# report A B: the two-runs section, its figures those of `gpuanalyze diff A B --json`.
cp "$JAX" jx.zst
run rep2 0 "$GA" report ck.zst jx.zst --gpureplay "$RP" --html two2.html --db two2.db
has rep2.err "wrote two2.html (the report, opening with the two runs side by side)"
run dj2 0 "$GA" diff ck.zst jx.zst --gpureplay "$RP" --json --html d2.html
has dj2.err "wrote d2.html (the two runs side by side)"
for h in two2.html d2.html; do
  python3 - $h dj2.out <<'PY' || fail "$h: the two-runs figures differ from gpuanalyze diff --json"
import json, re, sys
h = open(sys.argv[1]).read(); d = json.load(open(sys.argv[2]))
def row(i):
    m = re.search(r'id="%s" data-a="(\d+)" data-b="(\d+)"' % i, h); assert m, i; return tuple(map(int, m.groups()))
assert row("diff-peak-live") == (d['a']['peak_live_bytes'], d['b']['peak_live_bytes'])
assert row("diff-peak-reserved") == (d['a']['peak_reserved_bytes'], d['b']['peak_reserved_bytes'])
assert row("diff-allocs") == (d['a']['allocs'], d['b']['allocs'])
assert row("diff-callsites") == (d['a']['callsites'], d['b']['callsites'])
assert 'callsites new in B</div><div class="cv">%d<' % d['new_callsites'] in h
g = re.findall(r'<tr data-a="(\d+)" data-b="(\d+)"><td class="t">', h)
want = [(c['a_peak_bytes'], c['b_peak_bytes']) for c in d['callsites']][:15]
assert [tuple(map(int, x)) for x in g] == want, (g, want)
assert h.count('data-chart="chart-diff"') == 1
PY
done

[ "$fails" = 0 ] && echo PASS
exit $((fails > 0))
