#!/bin/bash
# reliability_cli_test.sh: issue 12 items 4-6 end to end, every tool as a user runs it.
#  - salvage: a damaged trace gives its good chunks, marked partial in every output (info,
#    dump, gpureplay's table, --json and results file, the database, the text/HTML/CSV report);
#    --strict refuses it with one line and exit 1;
#  - atomic outputs under fault injection: /dev/full, a read-only directory, a small tmpfs that
#    fills up, a process killed mid-write: the old output survives byte for byte (or the new one
#    is complete), the exit code is 1 and the message names the path and the reason;
#  - the database with two processes at once: a report reads while a load holds the write lock,
#    a second load waits and then says the database is busy.
# The read-only directory and the tmpfs need a private mount namespace (unshare -m, as root or
# with user namespaces); without one those checks are skipped with a message.
# Usage: reliability_cli_test.sh GPUANALYZE GPUREPLAY GPUREC MKFIXTURE VECTOR...
set -u
GA=$(realpath "$1"); RP=$(realpath "$2"); GR=$(realpath "$3"); MK=$(realpath "$4")
shift 4
FLIP= DIDX=
for v in "$@"; do
  case "$v" in
    */flipped-bit.zst) FLIP=$(realpath "$v") ;;
    */damaged-index.zst) DIDX=$(realpath "$v") ;;
  esac
done
[ -n "$FLIP" ] && [ -n "$DIDX" ] || { echo "FAIL: traces/invalid vectors not given" >&2; exit 1; }
T=${TEST_TMPDIR:-$(mktemp -d)}/rel
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0 skips=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
skip() { echo "SKIP: $*" >&2; skips=$((skips + 1)); }
run() {
  local want=$1; shift
  "$@" >out 2>err
  local rc=$?
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, want $want; stderr: $(<err)"
}
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 800 "$1")"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "$1 has '$2'"; }
is() { [ "$(cat "$1")" = "$2" ] || fail "$1 is '$(cat "$1")', want '$2'"; }
same() { cmp -s "$1" "$2" || fail "$1 changed"; }
one_line() { [ "$(wc -l < err)" = 1 ] || fail "stderr is not one line: $(<err)"; }
cp "$FLIP" flip.zst && cp "$DIDX" didx.zst

# ---- salvage: every reading tool, and --strict ------------------------------------------------
damage="chunk 1 at offset 600: checksum mismatch"
run 0 "$GA" info flip.zst; has out "events:         110 in 3 chunks"
has out "damage:         PARTIAL: 1 damaged chunk skipped, 40 events lost (290 bytes skipped)"
has out "first damage:   $damage"; is err ""
run 1 "$GA" info --strict flip.zst; one_line; is err "gpuanalyze: error: cannot read 'flip.zst': $damage"
run 0 "$GA" info didx.zst; has out "damage:         the index is damaged (chunks found by scanning)"
has out "events:         150 in 4 chunks"
run 1 "$GA" info --strict didx.zst; one_line; is err "gpuanalyze: error: cannot open 'didx.zst': index at offset 1440: checksum mismatch"
run 0 "$GA" dump flip.zst; [ "$(wc -l < out)" = 110 ] || fail "dump: $(wc -l < out) lines"
is err "gpuanalyze: warning: 'flip.zst' is damaged ($damage): 1 damaged chunk skipped, 40 events lost: the dump is partial"
run 1 "$GA" dump --strict flip.zst
run 0 "$RP" flip.zst
has out "PARTIAL: the trace is damaged ($damage): 1 damaged chunk skipped, 40 events lost: the replay is of what could be read"
is err "gpureplay: warning: 'flip.zst' is damaged ($damage): 1 damaged chunk skipped, 40 events lost; results marked partial (--strict refuses damaged traces)"
run 0 "$RP" --json flip.zst; has out '"events":110,'; has out '"partial":true,"coverage":{"complete":false,"why":"'
run 0 "$RP" --json "$T/didx.zst"; has out '"partial":false,"coverage":{"complete":false,"why":"the source dropped 2 records",'
run 0 "$RP" flip.zst --sweep -o flip.json
has flip.json '"trace_integrity":{"truncated":false,"seq_gaps":0,"dropped":0,"damaged_chunks":1,"lost_events":40,"uncounted_chunks":0,"index_damaged":false,"damage":"chunk 1 at offset 600: checksum mismatch"}'
run 1 "$RP" --strict flip.zst; one_line
is err "gpureplay: error: policy 'pytorch': cannot read 'flip.zst': $damage"
run 1 "$GA" load --strict --db s.db flip.zst; one_line; has err "cannot load 'flip.zst': $damage"
run 0 "$GA" load --db s.db flip.zst flip.json
has err "gpuanalyze: warning: 'flip.zst' is damaged ($damage): 1 damaged chunk skipped, 40 events lost; loaded what could be read, marked partial"
run 0 "$GA" report --db s.db
has out "warning: PARTIAL: the trace is damaged (1 damaged chunk skipped, 40 events lost): the figures cover the events that could be read"
has out "partial                1"
run 0 "$GA" report --db s.db --html s.html --csv s.csv
has s.html '<p class="partial">PARTIAL: the trace is damaged: 1 damaged chunk skipped, 40 events lost. The figures cover the events that could be read.</p>'
has s.csv/traces.csv ",partial,damaged_chunks,lost_events,index_damaged"
has s.csv/traces.csv ",1,1,40,0"
n_partial=$(sqlite3 s.db 'SELECT COUNT(*) FROM runs WHERE trace_partial=1' 2>&1)
[ "$n_partial" = 15 ] || fail "runs.trace_partial: $n_partial runs marked partial, want 15"  # no fallback value (issue 25)
# The one step, with the real gpureplay: salvaged by default, refused with --strict.
mkdir one && cp flip.zst one/job.zst && cd one || exit 1
run 0 "$GA" report --gpureplay="$RP" job.zst
has out "warning: PARTIAL: the trace is damaged"; has report.html 'class="partial"'
run 1 "$GA" report --strict --gpureplay="$RP" job2.zst; one_line; has err "cannot open 'job2.zst'"
cp job.zst job2.zst
run 1 "$GA" report --strict --gpureplay="$RP" job2.zst
has err "gpureplay: error: cannot read 'job2.zst': $damage"
has err "gpuanalyze: error: cannot replay 'job2.zst': gpureplay failed (exit status 1)"
cd ..

# ---- atomic outputs: a failed import keeps the old output ---------------------------------------
"$MK" trace good.zst 200 || exit 1
"$GA" dump --csv good.zst > good.csv || exit 1
run 0 "$GR" import good.csv -o out.zst
cp out.zst out.keep
printf '# gpumem trace, text form 1\nts_ns,kind\n1,alloc\n2,nosuchkind\n' > bad.csv
run 1 "$GR" import bad.csv -o out.zst; one_line; has err "gpurec: error: cannot import 'bad.csv': bad.csv:4:"
same out.zst out.keep
[ "$(ls -A | grep -c '\.tmp-')" = 0 ] || fail "a temporary file was left: $(ls -A)"

# ---- /dev/full: every output and stdout -----------------------------------------------------------
run 1 "$GR" import good.csv -o /dev/full; one_line; has err "No space left on device"
run 1 "$RP" good.zst -o /dev/full; one_line; is err "gpureplay: error: cannot write '/dev/full': No space left on device"
run 0 "$GA" load --db f.db good.zst
run 1 "$GA" report --db f.db --html /dev/full; one_line
is err "gpuanalyze: error: cannot write the HTML report: cannot write '/dev/full': No space left on device"
for cmd in "$GA info good.zst" "$GA dump good.zst" "$GA report --db f.db" "$GA recommend --db f.db" "$RP good.zst" \
           "$RP --json good.zst" "$GA --help" "$RP --version" "$GR --version"; do
  $cmd > /dev/full 2>err
  rc=$?
  [ "$rc" = 1 ] || fail "'$cmd > /dev/full' exited $rc, want 1"
  grep -q "cannot write to standard output: No space left on device" err || fail "'$cmd > /dev/full': $(<err)"
done

# ---- killed mid-write: the import of a big CSV killed at moments spread over its run: the old
# output survives byte for byte, or the new one is complete. A temporary file left behind
# shows a round that was killed while writing; at least one must have been.
"$MK" trace big.zst 4000 || exit 1
"$GA" dump --csv big.zst > big.csv || exit 1
start=$(date +%s%N); "$GR" import -q big.csv -o whole.zst || exit 1
took=$((($(date +%s%N) - start) / 1000000)); [ "$took" -gt 0 ] || took=1
midwrite=0
for i in $(seq 1 10); do
  cp out.keep out.zst
  "$GR" import -q big.csv -o out.zst 2>/dev/null & pid=$!
  sleep "$(awk -v t="$took" -v i="$i" 'BEGIN { printf "%.3f", t * i / 11000 }')"
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  if ls -A | grep -q '^\.out\.zst\.tmp-'; then midwrite=$((midwrite + 1)); rm -f .out.zst.tmp-*; fi
  cmp -s out.zst out.keep || cmp -s out.zst whole.zst || fail "round $i: out.zst is neither the old nor the new trace"
done
[ "$midwrite" -gt 0 ] || fail "no import was killed while writing (import takes ${took} ms)"
echo "import killed mid-write in $midwrite of 10 rounds (import takes ${took} ms)"
cp out.keep out.zst
# The same for the reports and the results file: killed at random moments, each output is
# either the old one or the complete new one.
"$MK" results big.zst big.json && "$GA" load -q --db k.db big.zst big.json || exit 1
"$GA" report --db k.db --html k.html && cp k.html k.keep || exit 1
"$RP" big.zst --sweep -o k.json >/dev/null 2>&1 && cp k.json kj.keep || exit 1
for i in $(seq 1 12); do
  "$GA" report --db k.db --html k.html 2>/dev/null & p1=$!
  "$RP" big.zst --sweep -o k.json >/dev/null 2>&1 & p2=$!
  sleep "0.0$((i % 10))"
  kill -9 "$p1" "$p2" 2>/dev/null; wait "$p1" "$p2" 2>/dev/null
  tail -c 8 k.html | grep -q '</html>' || fail "round $i: k.html is cut: $(tail -c 100 k.html)"
  python3 -c 'import json,sys; json.load(open("k.json"))' 2>/dev/null || fail "round $i: k.json is not whole JSON"
done
rm -f .k.html.tmp-* .k.json.tmp-*

# ---- a read-only directory and a small tmpfs (private mount namespace) --------------------------
mkdir -p ro full
cp out.keep ro/out.zst && cp out.keep full/out.zst && cp k.keep ro/r.html
cat > mounts.sh <<EOF
set -u
mount --bind ro ro && mount -o remount,ro,bind ro || exit 77
mount -t tmpfs -o size=8k tmpfs full || exit 77
cp out.keep full/out.zst
echo "== ro import"; "$GR" import big.csv -o ro/out.zst; echo "rc=\$?"
echo "== ro html"; "$GA" report --db k.db --html ro/r.html; echo "rc=\$?"
echo "== ro results"; "$RP" good.zst -o ro/r.json; echo "rc=\$?"
echo "== ro csv"; "$GA" report --db k.db --csv ro/csv; echo "rc=\$?"
echo "== full import"; "$GR" import big.csv -o full/out.zst; echo "rc=\$?"
cmp -s full/out.zst out.keep && echo "full/out.zst kept"
ls -A full | grep -c tmp- | sed 's/^/temporaries: /'
echo "== full html"; "$GA" report --db k.db --html full/r.html; echo "rc=\$?"
ls -A full
EOF
if unshare -m bash mounts.sh > mounts.out 2>&1; then
  has mounts.out "gpurec: error: cannot write 'ro/out.zst': directory 'ro': Read-only file system"
  has mounts.out "gpuanalyze: error: cannot write the HTML report: cannot write 'ro/r.html': cannot create a file in 'ro': Read-only file system"
  has mounts.out "gpureplay: error: cannot write 'ro/r.json': directory 'ro': Read-only file system"
  has mounts.out "gpuanalyze: error: cannot write CSV into 'ro/csv': cannot create the directory: Read-only file system"
  has mounts.out "gpurec: error: cannot import 'big.csv': big.csv:"; has mounts.out "No space left on device"
  has mounts.out "full/out.zst kept"; has mounts.out "temporaries: 0"
  has mounts.out "gpuanalyze: error: cannot write the HTML report: cannot write 'full/r.html': No space left on device"
  [ "$(grep -c '^rc=1$' mounts.out)" = 6 ] || fail "want 6 failures (rc=1): $(cat mounts.out)"
  same ro/out.zst out.keep; same ro/r.html k.keep
else
  [ $? = 77 ] || fail "mounts.sh: $(cat mounts.out)"
  skip "no private mount namespace here (unshare -m): read-only directory and small tmpfs checks not run"
fi

# ---- the database, two processes at once ------------------------------------------------------
"$MK" trace a.zst 100 0 && "$MK" trace b.zst 200 1 && "$MK" trace c.zst 50 || exit 1
run 0 "$GA" load --db two.db a.zst
GPUANALYZE_TEST_HOLD_MS=4000 "$GA" load --db two.db b.zst >bg.out 2>bg.err &
bg=$!
for _ in $(seq 1 200); do grep -q "test hook: holding" bg.err && break; sleep 0.02; done
has bg.err "gpuanalyze: test hook: holding the load's transaction for 4000 ms after 4096 events"
start=$(date +%s%N)
run 0 "$GA" report --db two.db --csv during       # reads while the load holds the write lock
took=$((($(date +%s%N) - start) / 1000000))
[ "$took" -lt 2000 ] || fail "the report waited ${took} ms for the load"
[ "$(wc -l < during/traces.csv)" = 2 ] || fail "the report saw the unfinished load: $(cat during/traces.csv)"
run 1 "$GA" load --wait 1 --db two.db c.zst; one_line
is err "gpuanalyze: error: database 'two.db' is busy: another process (a gpuanalyze load?) is writing to it; waited 1 s for it to finish (--wait=SECONDS waits longer)"
run 0 "$GA" load --db two.db c.zst                 # waits for the first (default 30 s), then loads
wait "$bg" || fail "the holding load failed: $(cat bg.err)"
run 0 "$GA" report --db two.db --csv after
[ "$(wc -l < after/traces.csv)" = 4 ] || fail "want 3 traces: $(cat after/traces.csv)"
# The same path recorded again: replaced, with a warning, never two answers for one job.
"$MK" trace a.zst 150 0 || exit 1
run 0 "$GA" load --db two.db a.zst
has err "gpuanalyze: warning: 'a.zst' has changed since it was loaded on "
has err "(trace 1, 3000 events): replacing that trace and its replay runs"
run 0 "$GA" report --db two.db --csv replaced
[ "$(wc -l < replaced/traces.csv)" = 4 ] || fail "want 3 traces after the replace: $(cat replaced/traces.csv)"
grep -q ',a.zst,.*,4500,' replaced/traces.csv || fail "a.zst was not replaced: $(cat replaced/traces.csv)"

if [ "$fails" != 0 ]; then echo "$fails failure(s)" >&2; exit 1; fi
echo "all reliability checks passed ($skips skipped)"
