#!/bin/bash
# gpureplay_cli_test.sh: gpureplay end to end: exit codes, stdout/stderr discipline, the
# --json keys, the results file, capacity what-ifs, determinism, --explain-oom, and every policy of the
# sweep under --check (invariants after every event) on a synthetic training-like trace.
# A real requests trace (two_streams) checks how synchronous allocations are read.
#   usage (bazel sh_test): gpureplay_cli_test.sh GPUREPLAY REPLAY_SYNTH REQUESTS_TRACE
set -u
GR=$1
SYNTH=$2
REQ=$3
T=${TEST_TMPDIR:-$(mktemp -d)}
fails=0

fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# run NAME EXPECTED_RC ARGS...: runs gpureplay, keeps stdout/stderr in $T/NAME.{out,err}
run() {
  local name=$1 want=$2
  shift 2
  "$GR" "$@" >"$T/$name.out" 2>"$T/$name.err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "$name: exit $rc, want $want (stderr: $(head -c 300 "$T/$name.err"))"
}

"$SYNTH" "$T/small.zst" 20000 7 || { echo "FAIL: cannot make a trace"; exit 1; }

# --help: stdout, exit 0, nothing on stderr
run help 0 --help
grep -q -- "--policy" "$T/help.out" || fail "help: no --policy in stdout"
grep -q "pytorch" "$T/help.out" || fail "help: policies not listed"
[ -s "$T/help.err" ] && fail "help: stderr not empty"

# --version
run version 0 --version
grep -q "^gpureplay " "$T/version.out" || fail "version: no tool line"
grep -q "^zstd " "$T/version.out" || fail "version: no zstd line"
grep -q "^trace format " "$T/version.out" || fail "version: no format line"

# bad usage: one line + try --help on stderr, exit 2, stdout empty
run badopt 2 "$T/small.zst" --no-such-option
grep -q "unknown option '--no-such-option'" "$T/badopt.err" || fail "badopt: message"
grep -q "try 'gpureplay --help'" "$T/badopt.err" || fail "badopt: no 'try --help'"
[ -s "$T/badopt.out" ] && fail "badopt: stdout not empty"
run notrace 2
grep -q "try 'gpureplay --help'" "$T/notrace.err" || fail "notrace: no 'try --help'"
run baddevice 2 "$T/small.zst" --device=tpu
grep -q "bad --device 'tpu'" "$T/baddevice.err" || fail "baddevice: message"

# bad policy key: exit 2, the key named; unknown policy: the known ones listed
run badkey 2 "$T/small.zst" --policy=pytorch:max_split_size_mb:128,bogus_key:1
grep -q "bogus_key" "$T/badkey.err" || fail "badkey: key not named: $(cat "$T/badkey.err")"
grep -q "try 'gpureplay --help'" "$T/badkey.err" || fail "badkey: no 'try --help'"
run badpolicy 2 "$T/small.zst" --policy=tcmalloc
grep -q "unknown policy 'tcmalloc'" "$T/badpolicy.err" || fail "badpolicy: message"
# tf: TensorFlow's words; a value TF would ignore is refused with what TF accepts; good ones
# replay like their bfc spelling
run badtf 2 "$T/small.zst" --policy=tf:TF_FORCE_GPU_ALLOW_GROWTH=True
[ "$(head -1 "$T/badtf.err")" = "gpureplay: bad --policy 'tf:TF_FORCE_GPU_ALLOW_GROWTH=True': tf: bad value for 'TF_FORCE_GPU_ALLOW_GROWTH': 'True' (TensorFlow accepts exactly true or false; it ignores anything else and keeps allow_growth)" ] ||
  fail "badtf: message: $(cat "$T/badtf.err")"
[ -s "$T/badtf.out" ] && fail "badtf: stdout not empty"
run tfgrowth 0 "$T/small.zst" --json --check -p tf:TF_FORCE_GPU_ALLOW_GROWTH=true,memory_limit=65536 -p bfc:growth,limit=64GiB
grep -o '"peak_reserved_bytes":[0-9]*' "$T/tfgrowth.out" | uniq -c | grep -q "^ *2 " ||
  fail "tfgrowth: tf and bfc spellings differ: $(grep -o '"peak_reserved_bytes":[0-9]*' "$T/tfgrowth.out")"

# missing trace: exit 1, the cause chain
run missing 1 "$T/does-not-exist.zst"
grep -q "^gpureplay: error: cannot open '$T/does-not-exist.zst': No such file or directory" \
  "$T/missing.err" || fail "missing: cause chain: $(cat "$T/missing.err")"
printf 'not a trace at all' >"$T/garbage.zst"
run garbage 1 "$T/garbage.zst"
grep -q "^gpureplay: error: cannot open '$T/garbage.zst': " "$T/garbage.err" || fail "garbage: message"

# a truncated trace (a killed recorder): replayed up to its last complete chunk, said so
sz=$(wc -c <"$T/small.zst")
head -c $((sz * 2 / 3)) "$T/small.zst" >"$T/truncated.zst"
run truncated 0 "$T/truncated.zst" -p direct
grep -q "note: the trace is truncated" "$T/truncated.out" || fail "truncated: no note: $(cat "$T/truncated.out" "$T/truncated.err")"

# default policy: pytorch; a table with the lower bound
run default 0 "$T/small.zst"
grep -q " pytorch$" "$T/default.out" || fail "default: pytorch row missing: $(cat "$T/default.out")"
grep -q "lower bound" "$T/default.out" || fail "default: no lower bound line"
[ -s "$T/default.err" ] && fail "default: stderr not empty (progress must be off when not a terminal)"

# --json: one object per run, DESIGN.md's keys in its order, then the additive ones
run json 0 "$T/small.zst" --json -p pytorch -p direct
[ "$(wc -l <"$T/json.out")" = 2 ] || fail "json: want 2 lines"
want="trace policy backend events peak_reserved_bytes peak_allocated_bytes peak_requested_bytes lower_bound_bytes fragmentation_at_peak device_alloc_calls device_free_calls alloc_retries ooms replay_seconds events_per_second external_allocs external_peak_bytes peak_reserved_plus_external_bytes context_bytes frameworks holds device recorded_mapped_peak_bytes trace_start_time_ns trace_pid capacity_bytes first_oom_event first_oom_ts_ns event_frees event_timing timing_sensitive partial coverage complete"
while read -r line; do
  got=$(printf '%s' "$line" | grep -o '"[a-z_]*":' | tr -d '":' | tr '\n' ' ' | sed 's/ $//')
  [ "$got" = "$want" ] || fail "json keys: got '$got'"
done <"$T/json.out"
grep -q '"policy":"direct"' "$T/json.out" || fail "json: direct run missing"
grep -q '"backend":"sim"' "$T/json.out" || fail "json: backend"

# a requests trace: the synchronous allocations (cuBLAS workspaces) are external memory, kept
# out of reserved and the lower bound; --sync-allocs=replay feeds them to the policy
run req 0 "$REQ" --json
grep -q '"external_allocs":3,"external_peak_bytes":67240960' "$T/req.out" || fail "req: external: $(cat "$T/req.out")"
grep -q '"peak_reserved_bytes":440401920,' "$T/req.out" || fail "req: peak reserved: $(cat "$T/req.out")"
grep -q '"lower_bound_bytes":283148288,' "$T/req.out" || fail "req: lower bound: $(cat "$T/req.out")"
run reqtable 0 "$REQ"
grep -q "^external: 3 synchronous allocs outside the framework's allocator, peak 64.13 MiB" "$T/reqtable.out" ||
  fail "reqtable: no external line: $(cat "$T/reqtable.out")"
run reqreplay 0 "$REQ" --json --sync-allocs=replay
grep -q '"external_allocs":0,' "$T/reqreplay.out" || fail "reqreplay: external counted"
grep -q '"lower_bound_bytes":350389248,' "$T/reqreplay.out" || fail "reqreplay: bound: $(cat "$T/reqreplay.out")"
run reqtable2 0 "$REQ" --sync-allocs=replay
grep -q "^external:" "$T/reqtable2.out" && fail "reqtable2: external line with --sync-allocs=replay"
# a synthetic trace has no async allocations: nothing is external unless asked
grep -q '"external_allocs":0,' "$T/json.out" || fail "json: synthetic trace has external allocs"
run synthext 0 "$T/small.zst" --json -p direct --sync-allocs=external
grep -q '"lower_bound_bytes":0,' "$T/synthext.out" || fail "synthext: all sync allocs external: $(cat "$T/synthext.out")"
run badsync 2 "$REQ" --sync-allocs=maybe
grep -q "bad --sync-allocs" "$T/badsync.err" || fail "badsync: message"

# the results file
run results 0 "$T/small.zst" -p pytorch -p bfc:growth -o "$T/results.json"
grep -q '"format":"gpumem-results"' "$T/results.json" || fail "results: format"
grep -q '"version":1' "$T/results.json" || fail "results: version"
for k in timeline fragmentation_mean first_oom_event anomalies trace_start_time_ns capacity_bytes external; do
  grep -q "\"$k\":" "$T/results.json" || fail "results: key $k missing"
done

# capacity what-if: OOMs counted, the first one located, still exit 0
run capacity 0 "$T/small.zst" -p direct -p pytorch --capacity=1GiB
grep -q "capacity 1.00 GiB" "$T/capacity.out" || fail "capacity: header"
grep -q "#[0-9]* t=" "$T/capacity.out" || fail "capacity: no first-OOM location: $(cat "$T/capacity.out")"

# cuda without a driver: a clear error, exit 1 (skipped where a driver exists)
if ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1"; then
  run nocuda 1 "$T/small.zst" --device=cuda:0
  grep -q "^gpureplay: error: cuda:0: no CUDA driver (libcuda.so.1 not found)" "$T/nocuda.err" ||
    fail "nocuda: $(cat "$T/nocuda.err")"
fi

# determinism: the same replay twice gives the same numbers (timing fields aside)
strip() { sed -E 's/"replay_seconds":[^,]*,"events_per_second":[^}]*//' "$1"; }
run det1 0 "$T/small.zst" --json -p pytorch -p pytorch:expandable_segments:True -p bfc:growth
run det2 0 "$T/small.zst" --json -p pytorch -p pytorch:expandable_segments:True -p bfc:growth --jobs=2
[ "$(strip "$T/det1.out")" = "$(strip "$T/det2.out")" ] || fail "determinism: runs differ"

# --list-policies (what gpurec predict --fit asks): the settings in gpureplay's words, one a
# line, the sweep's the same the table ranks; nothing replayed, a bad key a usage error
run list 0 "$T/small.zst" --list-policies -p PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -p bfc
[ "$(cat "$T/list.out")" = "$(printf 'pytorch:expandable_segments:True\nbfc')" ] || fail "list: $(cat "$T/list.out")"
[ -s "$T/list.err" ] && fail "list: stderr not empty"
run listsweep 0 "$T/small.zst" --list-policies --sweep
[ "$(head -1 "$T/listsweep.out")" = "pytorch" ] && [ "$(wc -l < "$T/listsweep.out")" -ge 12 ] || fail "listsweep: $(cat "$T/listsweep.out")"
run listbad 2 "$T/small.zst" --list-policies -p pytorch:bogus_key:1
grep -q "bogus_key" "$T/listbad.err" && [ ! -s "$T/listbad.out" ] || fail "listbad: $(cat "$T/listbad.err")"
run listtune 2 "$T/small.zst" --list-policies --tune
run listout 2 "$T/small.zst" --list-policies -o "$T/list.json"

# the whole sweep with invariant checks after every event, ranked 1..N
run sweep 0 "$T/small.zst" --sweep --check --jobs=2
n=$(grep -c "^ *[0-9][0-9]* " "$T/sweep.out")
[ "$n" -ge 12 ] || fail "sweep: only $n policies ranked: $(cat "$T/sweep.err")"
grep -q "^   1 " "$T/sweep.out" || fail "sweep: no rank 1"
[ "$n" = "$(wc -l < "$T/listsweep.out")" ] || fail "sweep: $n ranked, --list-policies said $(wc -l < "$T/listsweep.out")"

# without --check the sweep copies the result of a setting another's run proves alike
# (gpureplay_same.c): every figure as the replays under --check give it, the table too. A copy
# keeps its lead's replay_seconds, which is how the test sees that some were copied.
run sweepcopy 0 "$T/small.zst" --sweep --jobs=2 -o "$T/copy.json"
run sweepeach 0 "$T/small.zst" --sweep --jobs=2 --check -o "$T/each.json"
diff <(grep -v "^gpureplay: wrote" "$T/sweepcopy.out") <(grep -v "^gpureplay: wrote" "$T/sweepeach.out") >/dev/null ||
  fail "sweepcopy: the table differs from the replayed one"
python3 - "$T/copy.json" "$T/each.json" <<'PY' || fail "sweepcopy: results differ from the replayed ones"
import json, sys
def load(p):
    return json.load(open(p))["runs"]
def strip(r):
    return {k: v for k, v in r.items() if k not in ("replay_seconds", "events_per_second")}
copy, each = load(sys.argv[1]), load(sys.argv[2])
assert [strip(r) for r in copy] == [strip(r) for r in each], "figures differ"
secs = [r["replay_seconds"] for r in copy]
assert len(set(secs)) < len(secs), "no setting was copied"
PY
# the same on a trace whose frees wait on stream events (the timing range's followers copied too)
run sweepcopyreq 0 "$REQ" --sweep --jobs=2 -o "$T/copyreq.json"
run sweepeachreq 0 "$REQ" --sweep --jobs=2 --check -o "$T/eachreq.json"
python3 - "$T/copyreq.json" "$T/eachreq.json" <<'PY' || fail "sweepcopyreq: results differ from the replayed ones"
import json, sys
def runs(p):
    return [{k: v for k, v in r.items() if k not in ("replay_seconds", "events_per_second")}
            for r in json.load(open(p))["runs"]]
assert runs(sys.argv[1]) == runs(sys.argv[2])
assert any("peak_reserved_range" in r for r in runs(sys.argv[1])), "no timing range"
PY

# --tune on a real trace (two_streams): the grid's best is expandable segments (304 MiB); the
# search finds a setting below every grid point, says by how much, and answers capacity
run tune 0 "$REQ" --tune --jobs=2
[ -s "$T/tune.err" ] && fail "tune: stderr not empty: $(cat "$T/tune.err")"
grep -q "^default:  420.00 MiB " "$T/tune.out" || fail "tune: default: $(cat "$T/tune.out")"
grep -q "^grid:     304.00 MiB .* pytorch:expandable_segments:True (grid)$" "$T/tune.out" || fail "tune: grid line"
grep -q "^tuned:    280.00 MiB " "$T/tune.out" || fail "tune: tuned line: $(grep tuned "$T/tune.out")"
grep -q "^  the search beats the best grid point by 24.00 MiB (7.9%)$" "$T/tune.out" || fail "tune: no beat line"
grep -q "^paste: PYTORCH_CUDA_ALLOC_CONF=.*per_process_memory_fraction:" "$T/tune.out" || fail "tune: paste line"
grep -q "^capacity: the job needs 376.00 MiB with the default and fits a 16 GiB GPU with headroom " "$T/tune.out" ||
  fail "tune: capacity sentence: $(grep capacity "$T/tune.out")"
# the same answer on one core (the timing on the first line aside), and the results file holds it
run tune1 0 "$REQ" --tune --jobs=1 -o "$T/tune.json"
[ "$(tail -n +2 "$T/tune.out")" = "$(tail -n +2 "$T/tune1.out")" ] || fail "tune: --jobs=1 differs from --jobs=2"
tuned=$(sed -n 's/^tuned: .*  \(pytorch:[^ ]*\)$/\1/p' "$T/tune.out")
grep -qF "\"policy\":\"$tuned\"" "$T/tune.json" || fail "tune: tuned point '$tuned' not in the results file"
grep -q "^gpureplay: wrote $T/tune.json$" "$T/tune1.err" || fail "tune: no 'wrote' line"
# the search is at least as good as every point of the bounded space, replayed one by one
run tunex 0 "$REQ" --tune --tune-mode=exhaustive --no-capacity
mib() { sed -n 's/^tuned: *\([0-9.]*\) MiB.*/\1/p' "$1"; }
awk -v a="$(mib "$T/tune.out")" -v b="$(mib "$T/tunex.out")" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= b + 0) }' ||
  fail "tune: search $(mib "$T/tune.out") MiB worse than exhaustive $(mib "$T/tunex.out") MiB"
run tunesweep 2 "$REQ" --tune --sweep
grep -q "^gpureplay: --tune searches on the simulator by itself" "$T/tunesweep.err" || fail "tunesweep: message"
run tunemode 2 "$REQ" --tune --tune-mode=fast
grep -q "bad --tune-mode" "$T/tunemode.err" || fail "tunemode: message"
run tunebudget 2 "$REQ" --budget=0.5
grep -q "go with --tune" "$T/tunebudget.err" || fail "tunebudget: message"
# --no-limits: no point of the search holds a memory fraction, and the header says so
run tunenl 0 "$REQ" --tune --no-limits --no-capacity
grep -q "no hard limits searched (--no-limits)" "$T/tunenl.out" || fail "tunenl: $(head -1 "$T/tunenl.out")"
! grep -E "^(tuned|chosen): " "$T/tunenl.out" | grep -q "per_process_memory_fraction" ||
  fail "tunenl: a hard limit chosen: $(grep -E '^(tuned|chosen): ' "$T/tunenl.out")"
awk -v a="$(mib "$T/tune.out")" -v b="$(mib "$T/tunenl.out")" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= b + 0) }' ||
  fail "tunenl: without limits $(mib "$T/tunenl.out") MiB, below the full search's $(mib "$T/tune.out") MiB"
run tunenl2 2 "$REQ" --no-limits
grep -q "go with --tune" "$T/tunenl2.err" || fail "tunenl2: message"

# frees that wait on stream events (two_streams' record_stream hand-over: 20 frees on another
# stream): the line, the range column, the JSON keys (recorded = early in a requests trace;
# late by 3 mallocs the default setting needs 16 MiB more); one timing only; bad values
run events 0 "$REQ" -p pytorch
grep -q "^stream events: 20 frees waited on events recorded on other streams" "$T/events.out" ||
  fail "events: no stream-events line: $(cat "$T/events.out")"
grep -q "range (low..high)" "$T/events.out" || fail "events: no range column"
run eventsjson 0 "$REQ" -p pytorch --json --late-mallocs=3
grep -q '"event_frees":20,"event_timing":"recorded","timing_sensitive":true,"peak_reserved_range":{"low_bytes":440401920,"high_bytes":457179136,"moved_by":"stream_events","early_bytes":440401920,"late_bytes":457179136,"late_mallocs":3}' \
  "$T/eventsjson.out" || fail "eventsjson: $(cat "$T/eventsjson.out")"
run eventslate 0 "$REQ" -p pytorch --event-timing=late
grep -q "replayed with every event late only" "$T/eventslate.out" || fail "eventslate: $(cat "$T/eventslate.out")"
grep -q "range (low..high)" "$T/eventslate.out" && fail "eventslate: a range column without a range"
run badtiming 2 "$REQ" --event-timing=sometimes
grep -q "bad --event-timing (range, recorded, early or late)" "$T/badtiming.err" || fail "badtiming: message"
run badlate 2 "$REQ" --late-mallocs=2000000
grep -q "late-mallocs must be at most 1000000" "$T/badlate.err" || fail "badlate: message"

# the async pool on the simulator: a range, said to be one
run asyncsim 0 "$REQ" -p async
grep -q "^async pool (simulated): " "$T/asyncsim.out" || fail "asyncsim: no pool line: $(cat "$T/asyncsim.out" "$T/asyncsim.err")"
grep -qE "^   1 .*MiB\.\.[0-9.]+ MiB +async$" "$T/asyncsim.out" || fail "asyncsim: no range: $(cat "$T/asyncsim.out")"

# --explain-oom (what `gpuanalyze oom` reads): one JSON object; its failing event is the plain
# replay's first OOM, and the setting it names replays without one within the same capacity
jv() { python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).readline()); print($2)" "$1"; }
run xoom 0 "$REQ" --explain-oom --json --capacity=360MiB --jobs=2
[ -s "$T/xoom.err" ] && fail "explain-oom: stderr not empty: $(cat "$T/xoom.err")"
[ "$(wc -l <"$T/xoom.out")" = 1 ] || fail "explain-oom: not one line: $(cat "$T/xoom.out")"
[ "$(jv "$T/xoom.out" "d['oom'], d['policy'], d['capacity_bytes']")" = "True pytorch 377487360" ] ||
  fail "explain-oom: $(cat "$T/xoom.out")"
run xoomp 0 "$REQ" -p pytorch --capacity=360MiB --json
[ "$(jv "$T/xoom.out" "d['request']['event']")" = "$(jv "$T/xoomp.out" "d['first_oom_event']")" ] ||
  fail "explain-oom: failing event differs from the replay's first OOM"
xspec=$(jv "$T/xoom.out" "d['fix']['setting']")
run xfix 0 "$REQ" -p "$xspec" --capacity=360MiB --json
[ "$(jv "$T/xfix.out" "d['ooms']")" = 0 ] || fail "explain-oom: the setting '$xspec' has OOMs within 360 MiB"
run xnojson 2 "$REQ" --explain-oom
grep -q "^gpureplay: --explain-oom prints one JSON object: add --json" "$T/xnojson.err" || fail "xnojson: $(cat "$T/xnojson.err")"
run xtwo 2 "$REQ" "$REQ" --explain-oom --json
grep -q "^gpureplay: --explain-oom takes one trace$" "$T/xtwo.err" || fail "xtwo: $(cat "$T/xtwo.err")"
run xsweep 2 "$REQ" --explain-oom --json --sweep
grep -q "without --sweep, --tune, -o or --device" "$T/xsweep.err" || fail "xsweep: $(cat "$T/xsweep.err")"
run xpol 2 "$REQ" --explain-oom --json -p nosuch
grep -q "^gpureplay: bad --policy 'nosuch': unknown policy 'nosuch'" "$T/xpol.err" || fail "xpol: $(cat "$T/xpol.err")"

if [ "$fails" -ne 0 ]; then
  echo "$fails failure(s)"
  exit 1
fi
echo "PASS"
