#!/bin/bash
# analyze_cli_test.sh: gpuanalyze end to end: exit codes and messages (DESIGN.md CLI
# conventions), info/dump on a fixture trace, load (idempotent, interrupted), report (text,
# CSV, HTML escaping and size), recommend, and the newcomer's one step `report TRACE.zst`
# with a fake gpureplay, and the damaged vectors of traces/invalid.
# Usage: analyze_cli_test.sh GPUANALYZE MKFIXTURE INVALID_VECTOR...
set -u
GA=$(realpath "$1")
MK=$(realpath "$2")
shift 2
TRUNC= FLIP= FUTURE=
for v in "$@"; do
  case "$v" in
    */truncated-mid-chunk.zst) TRUNC=$(realpath "$v") ;;
    */flipped-bit.zst) FLIP=$(realpath "$v") ;;
    */future-version.zst) FUTURE=$(realpath "$v") ;;
  esac
done
[ -n "$TRUNC" ] && [ -n "$FLIP" ] && [ -n "$FUTURE" ] || { echo "FAIL: traces/invalid vectors not given" >&2; exit 1; }
T=${TEST_TMPDIR:-$(mktemp -d)}/cli
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# run EXPECTED_RC CMD...: runs, keeps stdout/stderr in out/err, checks the exit code.
run() {
  local want=$1; shift
  "$@" >out 2>err
  local rc=$?
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, want $want; stderr: $(<err)"
}
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 600 "$1")"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "$1 has '$2'"; }
one_line() { [ "$(wc -l < err)" = 1 ] || fail "stderr is not one line: $(<err)"; }

# --- usage and versions
run 0 "$GA" --help; has out "usage: gpuanalyze COMMAND"; has out "recommend"
run 0 "$GA" report --help; has out "--html=FILE"; has out "--csv=DIR"
run 0 "$GA" --version; has out "gpuanalyze 0.1.0"; has out "SQLite 3."; has out "zstd 1."; has out "trace format 1"
run 2 "$GA"; has err "try 'gpuanalyze --help'"
run 2 "$GA" frobnicate; has err "unknown command 'frobnicate'"
run 2 "$GA" info; has err "missing TRACE"
run 2 "$GA" dump --bogus x.zst; has err "unknown option '--bogus'"
run 2 "$GA" info a.zst b.zst; has err "unexpected argument 'b.zst'"
run 2 "$GA" dump --limit=lots x.zst; has err "--limit"

# --- bad inputs: one clear line, exit 1
run 1 "$GA" info missing.zst; one_line; has err "gpuanalyze: error: cannot open 'missing.zst'"
echo "hello, I am not a trace" > notatrace.zst
run 1 "$GA" info notatrace.zst; one_line; has err "not a gpumem trace"
run 1 "$GA" load --db x.db notatrace.zst; one_line; has err "cannot open 'notatrace.zst'"
head -c 20000 /dev/urandom > corrupt.db
"$MK" trace fx.zst 50 || exit 1
run 1 "$GA" load --db corrupt.db fx.zst; one_line; has err "cannot open database 'corrupt.db'"
run 1 "$GA" report --db corrupt.db; one_line; has err "cannot open database 'corrupt.db'"
echo '{"format":"gpumem-results","version":1,"runs":[{"policy":"pytorch"' > broken.json
run 1 "$GA" load --db y.db broken.json; one_line; has err "cannot load 'broken.json'"

# --- the invalid vectors of traces/invalid: damage is reported, never hidden; salvaged by
# default, refused with --strict
run 0 "$GA" info "$FLIP"; has out "damage:         PARTIAL: 1 damaged chunk skipped, 40 events lost"
has out "first damage:   chunk 1 at offset 600: checksum mismatch"; has out "events:         110 in 3 chunks"
run 1 "$GA" info --strict "$FLIP"; one_line
has err "gpuanalyze: error: cannot read '$FLIP': chunk 1 at offset 600: checksum mismatch"
run 1 "$GA" info "$FUTURE"; one_line; has err "format version"
run 0 "$GA" info "$TRUNC"; has out "TRUNCATED, index missing"
run 0 "$GA" dump "$TRUNC"; has err "is truncated"

# --- info and dump
run 0 "$GA" info fx.zst
has out "events:         1500"; has out "alloc          750"; has out "free           750"
has out "10813440 bytes requested"; has out "streams:        2 (7, 9)"; has out "complete, index present"
has out "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,max_split_size_mb:128"
run 0 "$GA" dump --limit 4 fx.zst; [ "$(wc -l < out)" = 4 ] || fail "dump --limit 4 gave $(wc -l < out) lines"
has out "kind=alloc"
run 0 "$GA" dump --csv fx.zst; [ "$(grep -vc '^#' out)" = 1501 ] || fail "dump --csv rows: $(grep -vc '^#' out)"

# --- load: idempotent; side by side ranks; interrupted load leaves the db as it was
"$MK" results fx.zst fx.json || exit 1
"$MK" trace r0.zst 40 0 && "$MK" trace r1.zst 60 1 || exit 1
run 0 "$GA" load --db a.db fx.zst fx.json
run 0 "$GA" report --db a.db --csv before
run 0 "$GA" load --db a.db fx.zst fx.json; has err "1 already there"
run 0 "$GA" report --db a.db --csv again
diff -r before again > /dev/null || fail "reloading changed the database"
GPUANALYZE_FAULT_AFTER_EVENTS=1000 run 1 "$GA" load --db a.db r0.zst r1.zst; one_line; has err "fault injected"
run 0 "$GA" report --db a.db --csv after
diff -r before after > /dev/null || fail "an interrupted load changed the database"
# A load killed outright (SIGKILL, no chance to roll back) while it holds its transaction (the
# test hook says when): it never committed, so the write-ahead log holds nothing the next open
# uses.
"$MK" trace big.zst 60000 3 || exit 1
GPUANALYZE_TEST_HOLD_MS=20000 "$GA" load -q --db a.db big.zst 2>hold.err &
pid=$!
for _ in $(seq 1 500); do grep -q "test hook: holding" hold.err 2>/dev/null && break; sleep 0.02; done
kill -9 "$pid" 2>/dev/null
wait "$pid"
krc=$?
if [ "$krc" = 137 ]; then
  [ -e a.db-wal ] || fail "no write-ahead log left by the killed load"
  run 0 "$GA" report --db a.db --csv killed
  diff -r before killed > /dev/null || fail "a killed load changed the database"
else
  echo "note: the load finished (rc $krc) before it could be killed; kill check skipped" >&2
  run 0 "$GA" load --db a.db big.zst  # keep going on a consistent db
  rm -f a.db && run 0 "$GA" load --db a.db fx.zst fx.json
fi
run 1 "$GA" load --strict --db a.db r0.zst "$FLIP"; one_line; has err "checksum mismatch"
run 0 "$GA" report --db a.db --csv after2
diff -r before after2 > /dev/null || fail "a --strict load that met a corrupt chunk changed the database"
run 0 "$GA" load --db a.db r0.zst r1.zst
run 0 "$GA" report --db a.db --csv ranks
[ "$(wc -l < ranks/ranks.csv)" = 3 ] || fail "ranks.csv: $(cat ranks/ranks.csv)"
has ranks/runs.csv "pytorch:expandable_segments:True"
has ranks/traces.csv "10813440"

# --- report: text, HTML escaped and small
run 0 "$GA" report --db a.db; has out "Policies side by side"; has out "keep the default (pytorch): no setting is reliably smaller"
run 0 "$GA" report --db a.db --html r.html
[ -s r.html ] || fail "no r.html"
[ "$(stat -c %s r.html)" -lt 5000000 ] || fail "r.html is $(stat -c %s r.html) bytes"
has r.html "&lt;script&gt;alert(1)&lt;/script&gt;"; lacks r.html "<script>alert(1)"
lacks r.html "<img src=x"; lacks r.html "<script>console.error"; lacks r.html "node-<b>"
has r.html "dygraphs 2.2.1"; has r.html 'class="chart-data"'

# --- recommend: the line to paste, saving, waste, warnings. An 8 MiB saving of 20 MiB is below
# the advice floor (64 MiB, issue 25): the default is kept, with the figures.
run 0 "$GA" recommend --db a.db
has out "keep the default (pytorch): no setting is reliably smaller"
has out "the smallest, pytorch:expandable_segments:True, reserves 12.00 MiB (12.00 MiB..12.00 MiB): a saving of at most 8.00 MiB"
has out "paste: nothing (the default)"
lacks out "paste: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
has out "waste: 9.69 MiB (48.4% of reserved) above the lower bound 10.31 MiB"
has out "warning: PYTORCH_CUDA_ALLOC_CONF: 'max_split_size_mb' is a native-allocator key: backend:cudaMallocAsync ignores it"

run 0 "$GA" load --db t.db "$TRUNC"
run 0 "$GA" recommend --db t.db; has out "warning: the trace is truncated"

# --- the newcomer's one step: report TRACE.zst runs the sweep, loads, writes report.html
mkdir -p new && cp fx.zst new/job.zst && cd new || exit 1
GPUREPLAY="$MK" run 0 "$GA" report job.zst
[ -s report.html ] || fail "report TRACE did not write report.html"
[ -s job.zst.db ] || fail "report TRACE did not make job.zst.db"
has out "keep the default (pytorch): no setting is reliably smaller"  # 8 MiB of 20 MiB: below the floor (issue 25)
export ANA_FAKE_LOG="$PWD/fake.log"
GPUREPLAY="$MK" run 0 "$GA" report job.zst  # again: the trace has not changed, its replays are reused
has err "reusing the tuner's search and the 3 replays of job.zst in job.zst.db (the trace, gpureplay's version and the options have not changed"
GPUREPLAY="$MK" run 0 "$GA" report --no-tune job.zst  # the tuner's replays hold the sweep's grid
has err "reusing the tuner's search and the 3 replays of job.zst in job.zst.db"
[ -e fake.log ] && fail "a reused report ran gpureplay: $(<fake.log)"
GPUREPLAY="$MK" run 0 "$GA" report --db job.zst.db --csv again
[ "$(wc -l < again/runs.csv)" = 4 ] || fail "a second report TRACE loaded the runs again: $(<again/runs.csv)"
# another option that changes the figures: replayed again, the new runs replacing the old
# simulator runs; a real GPU's runs loaded by hand stay
"$MK" results job.zst rc.json && sed -i 's/"backend":"sim"/"backend":"cuda:0"/g' rc.json || exit 1
run 0 "$GA" load -q --db job.zst.db job.zst rc.json
GPUREPLAY="$MK" run 0 "$GA" report --strict job.zst; has err "wrote job.zst.db (the database: the trace and its replays; added to it)"
[ "$(<fake.log)" = "--tune -q --strict --no-limits" ] || fail "report --strict asked gpureplay for: $(<fake.log)"
GPUREPLAY="$MK" run 0 "$GA" report --db job.zst.db --csv again2
[ "$(wc -l < again2/runs.csv)" = 7 ] || fail "want the 3 new runs and the 3 of cuda:0: $(<again2/runs.csv)"
[ "$(grep -c ',cuda:0,' again2/runs.csv)" = 3 ] || fail "the cuda:0 runs: $(<again2/runs.csv)"
# another gpureplay version: replayed again
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "fake gpureplay 2"; exit 0; }\nexec "%s" "$@"\n' "$MK" >mk2; chmod +x mk2
: >fake.log
GPUREPLAY="$PWD/mk2" run 0 "$GA" report --strict job.zst; lacks err "reusing"
[ "$(<fake.log)" = "--tune -q --strict --no-limits" ] || fail "a new gpureplay version did not replay: $(<fake.log)"
# --no-tune: the sweep alone; the default: the tuner whatever the length (gpureplay reduces a
# long trace itself); --tune: its search even where no period is found
"$MK" trace job3.zst 30 || exit 1; : >fake.log
GPUREPLAY="$MK" run 0 "$GA" report --no-tune job3.zst; lacks err "the sweep's grid only"
GPUREPLAY="$MK" run 0 "$GA" report --no-tune --html l.html job.zst job3.zst --db long.db
[ "$(<fake.log)" = $'--sweep -q\n--sweep -q\n--sweep -q' ] || fail "--no-tune: gpureplay was asked: $(<fake.log)"
: >fake.log
GPUREPLAY="$MK" run 0 "$GA" report --tune --html l.html job.zst --db long2.db
[ "$(<fake.log)" = "--tune -q --tune-reduce=always --no-limits" ] || fail "--tune: gpureplay was asked: $(<fake.log)"
GPUREPLAY="$MK" run 2 "$GA" report --tune --no-tune job.zst; has err "--tune and --no-tune: give one"
# a database made before report_replays (an older gpuanalyze's sweep): it serves --no-tune as it
# always did; the default runs the tuner, whose search it does not hold, and notes it
GPUREPLAY="$MK" run 0 "$GA" report --no-tune job3.zst --db old.db --html o.html
sqlite3 old.db "DROP TABLE report_replays" || fail "sqlite3"
: >fake.log
GPUREPLAY="$MK" run 0 "$GA" report --no-tune job3.zst --db old.db --html o.html; has err "reusing the 3 replays of job3.zst"
GPUREPLAY="$MK" run 0 "$GA" report job3.zst --db old.db --html o.html; lacks err "reusing"
[ "$(<fake.log)" = "--tune -q --no-limits" ] || fail "an older database: gpureplay was asked: $(<fake.log)"
[ "$(sqlite3 old.db "SELECT what FROM report_replays")" = tune:no-limits ] || fail "no note of the tune in old.db"
unset ANA_FAKE_LOG
cp job.zst job2.zst
GPUREPLAY=/bin/false run 1 "$GA" report job2.zst; one_line; has err "cannot replay 'job2.zst': false failed (exit status 1)"
[ -e job2.zst.db ] && fail "a failed sweep left job2.zst.db behind"
GPUREPLAY= run 0 "$GA" report --gpureplay="$MK" --html second.html job.zst
[ -s second.html ] || fail "--gpureplay: no second.html"
cd ..

if [ "$fails" != 0 ]; then echo "$fails failure(s)" >&2; exit 1; fi
echo "all gpuanalyze CLI checks passed"
