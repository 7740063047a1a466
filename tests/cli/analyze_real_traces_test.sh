#!/bin/bash
# analyze_real_traces_test.sh: gpuanalyze on the real traces: the five PyTorch workloads of
# traces/snapshots (recorded on an H200, imported with gpurec) swept with the real gpureplay,
# and every trace of traces/valid. Checks that the loader takes them all in one transaction,
# that the analyzer's own lower bound (peak live requested bytes, from its one-pass scan)
# equals gpureplay's on every trace, that the live-at-peak view sums to it, that the
# histograms made at load equal the views recomputed from events, and that the report and the
# recommendation come out (PyTorch's real numbers for these runs are in traces/snapshots), and
# that the recommendation over gpureplay --tune's results is its choice.
# Usage: analyze_real_traces_test.sh GPUANALYZE GPUREC GPUREPLAY SNAPSHOT_DIR_FILE VALID_FILE...
set -u
command -v sqlite3 >/dev/null || { echo "FAIL: the sqlite3 shell is missing: apt-get install -y sqlite3" >&2; exit 1; }
GA=$(realpath "$1"); GR=$(realpath "$2"); RP=$(realpath "$3"); SNAPS=$(dirname "$(realpath "$4")")
shift 4
valid=()
for v in "$@"; do case "$v" in *.zst) valid+=("$(realpath "$v")");; esac; done
T=${TEST_TMPDIR:-$(mktemp -d)}/real
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
sql() { sqlite3 -batch -noheader rt.db "$1" 2>&1; }
inputs=()
for w in train_amp infer_varlen train_ckpt two_streams train_cnn; do
  "$GR" import "$SNAPS/$w.default.pickle" -o "$w.zst" 2>/dev/null || { fail "gpurec import $w"; continue; }
  "$RP" "$w.zst" --sweep -o "$w.json" >/dev/null || { fail "gpureplay $w"; continue; }
  inputs+=("$w.zst" "$w.json")
done
[ "${#valid[@]}" -ge 3 ] || fail "fewer than 3 traces/valid vectors given"
"$GA" load -q --db rt.db "${inputs[@]}" "${valid[@]}" || fail "load failed"
want=$((5 + ${#valid[@]}))
[ "$(sql 'SELECT COUNT(*) FROM traces')" = "$want" ] || fail "traces: $(sql 'SELECT COUNT(*) FROM traces'), want $want"
[ "$(sql 'SELECT COUNT(DISTINCT trace_id) FROM v_runs')" = 5 ] || fail "runs not joined to their 5 traces"
# The analyzer's lower bound is the replayer's, computed independently.
bad=$(sql "SELECT t.path || ': ' || t.peak_live_bytes || ' vs ' || r.lower_bound_bytes FROM traces t
           JOIN v_runs r USING(trace_id) WHERE r.lower_bound_bytes <> t.peak_live_bytes")
[ -z "$bad" ] || fail "lower bounds differ: $bad"
bad=$(sql "SELECT t.path FROM traces t WHERE t.peak_live_bytes <>
           (SELECT COALESCE(SUM(size), 0) FROM v_live_at_peak p WHERE p.trace_id = t.trace_id)")
[ -z "$bad" ] || fail "live-at-peak does not sum to the peak: $bad"
n=$(sql "SELECT COUNT(*) FROM (SELECT trace_id,size_log2,allocs,bytes FROM size_histogram
         EXCEPT SELECT trace_id,size_log2,allocs,bytes FROM v_size_histogram)")
[ "$n" = 0 ] || fail "size_histogram differs from v_size_histogram ($n rows)"
n=$(sql "SELECT COUNT(*) FROM (SELECT * FROM lifetime_histogram EXCEPT SELECT * FROM v_lifetime_histogram)")
[ "$n" = 0 ] || fail "lifetime_histogram differs from v_lifetime_histogram ($n rows)"
# A reload changes nothing.
before=$(sql "SELECT COUNT(*) FROM events") 
"$GA" load -q --db rt.db "${inputs[@]}" "${valid[@]}" || fail "reload failed"
[ "$(sql 'SELECT COUNT(*) FROM events')" = "$before" ] || fail "reload added events"
"$GA" recommend --db rt.db > rec.txt || fail "recommend failed"
[ "$(grep -c '^  paste: ' rec.txt)" = 5 ] || fail "want a paste line for each of the 5 workloads: $(cat rec.txt)"
# infer_varlen: the real run reserved 2518 MiB by default and 1262 MiB with expandable segments.
grep -A6 '^infer_varlen.zst:' rec.txt | grep -q 'paste: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True' ||
  fail "infer_varlen: $(grep -A7 '^infer_varlen.zst:' rec.txt)"
"$GA" report --db rt.db --html rt.html --csv csv || fail "report failed"
[ -s rt.html ] && [ "$(stat -c %s rt.html)" -lt 5000000 ] || fail "rt.html missing or too big"
[ "$(ls csv/*.csv | wc -l)" -ge 9 ] || fail "csv: $(ls csv)"
# gpureplay --tune's results (without hard limits, as the report asks): the recommendation is
# its choice, with its driver time, the device it fits and the grid's smallest beside it
# (two_streams: expandable segments' 304 MiB costs more driver time than the budget, so the
# default's 420 MiB stays), and pastes what gpureplay pasted.
if [ -s two_streams.zst ]; then
  "$RP" two_streams.zst --tune --no-limits --jobs=2 -o ts.tune.json >ts.tune.txt 2>/dev/null || fail "gpureplay --tune"
  "$GA" load -q --db tune.db two_streams.zst ts.tune.json || fail "load of the tune results"
  "$GA" recommend --db tune.db >tune.txt || fail "recommend on the tune results"
  grep -q "^  tuned (gpureplay --tune): peak reserved 420.00 MiB, est. driver time [0-9.]*\.\.[0-9.]* ms (p50\.\.p99; budget [0-9.]* ms)$" tune.txt ||
    fail "tune: no tuned line: $(cat tune.txt)"
  grep -q "^  fits: a 16 GiB GPU, the smallest of 16/24/40/48/80/94/141 GiB it fits (it needs 308.00 MiB on the device)$" tune.txt ||
    fail "tune: no fits line: $(cat tune.txt)"
  grep -q "^  the sweep grid's smallest, pytorch:expandable_segments:True (304.00 MiB), reserves 116.00 MiB less at more driver time (est. 4.59 ms)$" tune.txt ||
    fail "tune: no grid line: $(cat tune.txt)"
  # the one step: report runs the same search by default and says the same
  "$GA" report two_streams.zst --db ts1.db --html ts1.html >ts1.txt 2>ts1.err || fail "report two_streams: $(cat ts1.err)"
  diff <(grep -v '^two_streams.zst:' tune.txt) <(grep -v '^two_streams.zst:' ts1.txt) >/dev/null ||
    fail "report's advice differs from recommend's over gpureplay --tune: $(diff tune.txt ts1.txt)"
  [ "$(grep '^  paste: ' tune.txt | sed 's/^  //')" = "$(grep '^paste: ' ts.tune.txt)" ] ||
    fail "tune: recommend pastes '$(grep '^  paste: ' tune.txt)', gpureplay '$(grep '^paste: ' ts.tune.txt)'"
fi
# an empty trace (no allocation) needs nothing: not the capacity search's lowest step (2 MiB)
for v in "${valid[@]}"; do case "$v" in */empty.zst) cp "$v" empty.zst;; esac; done
[ -s empty.zst ] || fail "traces/valid/empty.zst not given"
"$RP" empty.zst --tune >et.txt 2>&1 || fail "tune of empty.zst: $(cat et.txt)"
grep -q "needs 2.00 MiB" et.txt && fail "empty.zst: $(grep needs et.txt | head -3)"
grep -q "^chosen: .* needs nothing  pytorch (grid)$" et.txt || fail "empty.zst chosen: $(cat et.txt)"
grep -q "^capacity: the job allocates no device memory: it needs nothing and fits any GPU$" et.txt || fail "empty.zst capacity: $(cat et.txt)"
"$GA" report empty.zst --html e.html >er.txt 2>&1 || fail "report empty.zst: $(cat er.txt)"
grep -q "^  fits: any GPU; the job needs no device memory (the trace allocates none)$" er.txt || fail "report of empty.zst: $(cat er.txt)"
if [ "$fails" != 0 ]; then echo "$fails failure(s)" >&2; exit 1; fi
echo "real traces: $want loaded, lower bounds agree with gpureplay, report and recommendation made"
cat rec.txt
