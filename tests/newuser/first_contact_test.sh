#!/bin/bash
# first_contact_test.sh: issue 18, case by case: what a new user's first hour does, with the
# message, the exit code and the files left behind checked for each. Sections follow the
# issue's items: 1 the recorded OOM, 2 the likeliest first commands (the wrong kind of file),
# 3 capacity answers, 4 one name per figure and the clock, 5 long work (files named, replays
# reused, no empty database), 7 problems found before the job runs, 8 habits (did-you-mean,
# pasted settings, option order, --help pointers), 9 assumptions said out loud, and --help
# naming the inputs. Item 6 (bazel-bin is the optimised build) is checked by
# tests/newuser/new_user.sh, which tools/test runs after the sanitizer builds.
# Usage: first_contact_test.sh GPUREC GPUREPLAY GPUANALYZE MK_SNAPSHOTS.py REQUESTS_TRACE
set -u
REC=$(realpath "$1") RP=$(realpath "$2") GA=$(realpath "$3") MKS=$(realpath "$4") REQ=$(realpath "$5")
T=${TEST_TMPDIR:-$(mktemp -d)}/first-contact
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# run EXPECTED_RC CMD...: stdout in out, stderr in err, the exit code checked.
run() {
  local want=$1; shift
  "$@" >out 2>err
  local rc=$?
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, want $want; stderr: $(<err)"
}
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 1500 "$1")"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "$1 has '$2': $(head -c 1500 "$1")"; }
exists() { [ -e "$1" ] || fail "$1 was not written"; }
absent() { [ ! -e "$1" ] || fail "$1 was left behind"; }
# The files in the working directory, sorted: what a command left behind.
files() { ls -A | grep -vx 'out\|err' | sort | tr '\n' ' '; }
same_files() { [ "$(files)" = "$1" ] || fail "$2: files now '$(files)', were '$1'"; }

python3 "$MKS" . || { echo "FAIL: mk_snapshots.py" >&2; exit 1; }

# ---- 1. the job that ran out of memory: the headline of every output -----------------------
run 0 "$REC" import oom.pickle -o oom.zst
exists oom.zst
has err "gpurec: oom.pickle: the recorded run ran out of memory: 1 failed request, the first 1000.00 MiB on stream 0 (train.py:42:big_matmul)"
run 0 "$GA" info oom.zst
[ "$(sed -n 2p out)" = "OUT OF MEMORY:  the recorded run failed 1 request; the first: 1000.00 MiB on stream 0 of device 0 at event 82, t=40.500 ms" ] ||
  fail "info: the OOM is not the headline: $(head -3 out)"
has out "train.py:42:big_matmul"
has out "live then 1.47 GiB, reserved (segments) 1.70 GiB, free on the device 970.00 MiB"
run 0 "$RP" oom.zst --sweep
has out "recorded OOM: the run failed 1 request; the first: 1000.00 MiB on stream 0 at #82 t=40.500 ms (train.py:42:big_matmul)"
has out "replayed with capacity 2.65 GiB (what the recorded process had: 1.70 GiB reserved + 970.00 MiB free on the device at the failure"
# The recorded setting (the default) fails where the run failed; expandable segments fit.
grep -qE "^ +[0-9]+ .* 1  #82 t=0.041 s +pytorch$" out || fail "gpureplay: pytorch does not fail at the recorded OOM: $(cat out)"
grep -qE " 0  fits +pytorch:expandable_segments:True$" out || fail "gpureplay: expandable_segments does not fit: $(cat out)"
run 0 "$RP" oom.zst -p pytorch -p pytorch:expandable_segments:True -o oom.json
has err "wrote oom.json"
grep -q '"recorded_failures":{"count":1,"served":0,' oom.json || fail "results: pytorch's recorded failure: $(head -c 3000 oom.json)"
grep -q '"recorded_failures":{"count":1,"served":1,' oom.json || fail "results: expandable's served failure"
run 0 "$GA" report oom.zst
[ "$(sed -n 2p out)" = "  OUT OF MEMORY: the recorded run failed 1 request; the first: 1000.00 MiB on stream 0 at t=40.500 ms (train.py:42:big_matmul)" ] ||
  fail "report: the OOM is not the headline: $(head -3 out)"
has out "the smallest change that would have served it: pytorch:expandable_segments:True"
has out "paste: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
has out "the default (pytorch) ran out of memory in replay (1 OOM, the first at event 82)"
# the tuner's choice beside it: the fastest that serves it (none is within 1 % of a 40 ms run)
has out "  tuned (gpureplay --tune): pytorch:max_split_size_mb:520,max_non_split_rounding_mb:1024,roundup_power2_divisions:[32:4,64:2,128:2,256:2,>:8], peak reserved 2.48 GiB, est. driver time 1.26..2.95 ms (p50..p99; budget 0.41 ms: none that serves every request is within it, this is the fastest)"
has out "the sweep grid's smallest, pytorch:expandable_segments:True (2.46 GiB), reserves 24.00 MiB less at more driver time (est. 7.21 ms)"
lacks out "saving vs default"
has report.html "OUT OF MEMORY: the recorded run failed 1 request"

# ---- 2. the likeliest first commands: each tool knows the other kinds of file ---------------
mkdir two && cd two || exit 1
cp ../oom.pickle snap.pickle
before=$(files)
run 1 "$RP" snap.pickle
has err "gpureplay: error: 'snap.pickle' is a PyTorch memory snapshot (pickle), not a gpumem trace: convert it with \`gpurec import snap.pickle -o snap.zst\`"
run 1 "$GA" info snap.pickle; has err "\`gpurec import snap.pickle -o snap.zst\`"
run 1 "$GA" load snap.pickle; has err "is a PyTorch memory snapshot (pickle)"
same_files "$before" "commands refusing a pickle"
# report on a pickle does the right thing: imports it beside itself, then reports
run 0 "$GA" report snap.pickle
has err "gpurec: snap.pickle: 82 snapshot entries -> 83 events in snap.zst"
has err "gpuanalyze: wrote snap.zst.db (the database: the trace and its replays; new)"
has err "gpuanalyze: wrote report.html (the report)"
lacks err "gpuanalyze-"   # no temporary file's name, no internal command line
has out "paste: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
same_files "report.html snap.pickle snap.zst snap.zst.db " "report snap.pickle"
# again: the trace it imported before is reused, not refused as someone else's
run 0 "$GA" report snap.pickle
has err "gpuanalyze: reusing snap.zst (imported from snap.pickle, which has not changed since)"
lacks err "was not imported from"
# the trace handed to the importer, and the other kinds
run 1 "$REC" import snap.zst -o again.zst
has err "gpurec: error: 'snap.zst' is already a gpumem trace: nothing to import (\`gpuanalyze info snap.zst\`, \`gpuanalyze report snap.zst\`)"
absent again.zst
run 1 "$REC" import snap.zst.db -o again.zst; has err "is a gpuanalyze database (SQLite), not a trace: \`gpuanalyze report --db snap.zst.db\`"
run 0 "$RP" snap.zst -p direct -o r.json
run 1 "$REC" import r.json -o again.zst; has err "'r.json' is a gpureplay results file, not a trace"
run 1 "$GA" report r.json; has err "load it with its trace, \`gpuanalyze load TRACE.zst r.json\`"
run 1 "$RP" snap.zst.db; has err "\`gpuanalyze report --db snap.zst.db\`"
absent again.zst
# a CSV trace: imported too
"$GA" dump --csv snap.zst > text.csv || fail "dump --csv"
run 0 "$GA" report text.csv --html text.html
has err "gpurec: text.csv: wrote text.zst"; exists text.zst; exists text.zst.db
has out "OUT OF MEMORY: the recorded run failed 1 request"
# a database given where a trace goes: reported on
run 0 "$GA" report snap.zst.db; has out "== trace 1: snap.zst"
cd ..

# ---- 3. capacity answers that mislead -------------------------------------------------------
run 0 "$RP" "$REQ" --capacity=1GiB --sweep -o cap.json
# Every setting runs out of 1 GiB here: none ranks by the memory it did not serve; the one
# that got furthest comes first, and no comparison with the bound is negative.
grep -qE -- " -[0-9]" out && fail "gpureplay: a negative figure: $(cat out)"
first_ooms=$(sed -n 's/.*  #\([0-9]*\) t=.*/\1/p' out | tr '\n' ' ')
[ "$first_ooms" = "$(echo "$first_ooms" | tr ' ' '\n' | grep . | sort -rn | tr '\n' ' ')" ] ||
  fail "gpureplay: OOM runs not ranked by how far they got: $first_ooms"
run 0 "$GA" load --db cap.db "$REQ" cap.json
run 0 "$GA" recommend --db cap.db
has out "every setting ran out of memory in replay within 1.00 GiB; the job needs at least 1.03 GiB on the device"
run 0 "$GA" report --db cap.db --csv capcsv
awk -F, 'NR > 1 && $0 ~ /,-[0-9]/' capcsv/runs.csv | grep -q . && fail "report: a negative figure: $(cat capcsv/runs.csv)"
# A policy that ran out of memory never ranks above one that did not (the OOM trace above:
# pytorch fails once, expandable_segments fits).
run 0 "$RP" oom.zst -p pytorch -p pytorch:expandable_segments:True
[ "$(awk '/^ +1 /{print $NF}' out)" = "pytorch:expandable_segments:True" ] || fail "gpureplay: the OOM run ranks first: $(cat out)"

# ---- 4. one name, one meaning; the clock ---------------------------------------------------
run 0 "$GA" info "$REQ"
peak_info=$(sed -n 's/^peak live: *\([0-9.]* [KMG]iB\).*/\1/p' out)
[ "$peak_info" = "1.03 GiB" ] || fail "info: peak live '$peak_info'"
has out "start time:     2026-11-21 12:17:26.369 UTC (t=0: the times below count from here)"
has out "duration:       3.117 s (first event t=298.917 ms, last t=3.415 s)"
has out "at event 3179, t=3.394 s"   # inside [first, last]: the same clock
run 0 "$GA" report --db cap.db
has out "peak_live_bytes        1.03 GiB"
has out "start_time             2026-11-21 12:17:26.369 UTC"
lacks out "headroom"
run 0 "$RP" "$REQ"
has out "lower bound 929.01 MiB"
has out "needs at least 1.03 GiB (both together)"

# ---- 5. long work: files named, replays reused, no empty database ---------------------------
mkdir five && cd five || exit 1
cp "$REQ" job.zst
run 0 "$GA" report job.zst
has err "wrote job.zst.db"; has err "wrote report.html"
lacks err $'\r'   # no progress when stderr is not a terminal
# Run twice: the unchanged trace's replays are reused (a gpureplay that fails proves it).
GPUREPLAY=/bin/false run 0 "$GA" report job.zst
has err "reusing the tuner's search and the 17 replays of job.zst in job.zst.db (the trace, gpureplay's version and the options have not changed; delete job.zst.db to replay it again)"
# A new recording under the same name: replayed again into a fresh job.zst.db, not reported
# beside the old one.
cp ../oom.zst job.zst
run 0 "$GA" report job.zst
has err "job.zst changed since job.zst.db was made: made it afresh"
has out "OUT OF MEMORY"
[ "$(grep -c '^job.zst:' out)" = 1 ] || fail "the old recording is still reported: $(cat out)"
before=$(files)
run 1 "$GA" report --db typo.db
has err "gpuanalyze: error: cannot open database 'typo.db': no such file"
run 1 "$GA" recommend --db typo.db
same_files "$before" "report --db typo.db"
cd ..

# ---- 7. problems found before the job runs, not after ---------------------------------------
mkdir seven && cd seven || exit 1
run 1 "$REC" -o /nonexistent/dir/t.zst -- touch started
has err "gpurec: error: cannot write '/nonexistent/dir/t.zst': directory '/nonexistent/dir' does not exist; the program was not started"
absent started
run 1 "$REC" import ../oom.pickle -o /nonexistent/dir/t.zst
has err "gpurec: error: cannot write '/nonexistent/dir/t.zst': directory '/nonexistent/dir' does not exist"
lacks err "cannot import '../oom.pickle'"
run 1 "$RP" ../oom.zst -o /nonexistent/dir/r.json
has err "gpureplay: error: cannot write '/nonexistent/dir/r.json': directory '/nonexistent/dir' does not exist"
[ -s out ] && fail "gpureplay replayed before finding its output cannot be written"
run 127 "$REC" -- nonexistent_cmd_18
has err "gpurec: error: cannot run 'nonexistent_cmd_18': No such file or directory (not found in PATH); nothing was started"
lacks err "never initialised CUDA"
PYTORCH_CUDA_ALLOC_CONF=expandable_segment:True run 0 "$REC" --mode=native -- true
has err "gpurec: warning: PYTORCH_CUDA_ALLOC_CONF=expandable_segment:True: unknown key 'expandable_segment' (did you mean 'expandable_segments'?)"
[ "$(head -1 err | cut -c1-16)" = "gpurec: warning:" ] || fail "the setting is not checked before the launch: $(cat err)"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128 run 0 "$REC" --mode=native -- true
lacks err "PYTORCH_CUDA_ALLOC_CONF"
cd ..

# ---- 8. habits ------------------------------------------------------------------------------
run 2 "$RP" oom.zst --sweeep
has err "gpureplay: unknown option '--sweeep' (did you mean '--sweep'?)"
run 2 "$RP" oom.zst -p pytorch:expandable_segment:True
has err "pytorch: unknown key 'expandable_segment' (did you mean 'expandable_segments'?)"
run 2 "$RP" oom.zst -p pytroch
has err "unknown policy 'pytroch' (did you mean 'pytorch'?"
# the line users paste is the policy it names
run 0 "$RP" oom.zst --json -p PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -p "PYTORCH_ALLOC_CONF='max_split_size_mb:128'"
has out '"policy":"pytorch:expandable_segments:True"'
has out '"policy":"pytorch:max_split_size_mb:128"'
# options before or after the command
run 0 "$GA" -q report --db cap.db --csv opts
[ -s err ] && fail "-q before the command is not in force: $(cat err)"
run 0 "$GA" report -q --db cap.db --csv opts2
run 2 "$GA" reprot oom.zst; has err "unknown command 'reprot' (did you mean 'report'?)"
run 2 "$GA" oom.zst; has err "missing command before 'oom.zst'"
# a usage error points to the subcommand's own --help
run 2 "$GA" report --html; has err "try 'gpuanalyze report --help'"
run 2 "$REC" import oom.pickle; has err "try 'gpurec import --help'"

# ---- 9. assumptions said out loud -----------------------------------------------------------
run 0 "$REC" import oom.pickle -o assumed.zst
has err "gpurec: note: a snapshot does not say which GPU it was taken on"
run 0 "$RP" assumed.zst -p pytorch
has out "device memory: 2.65 GiB assumed (the capacity), the trace does not say which GPU it came from"
run 0 "$REC" import oom.pickle --gpu-memory=16GiB -o told.zst
lacks err "does not say which GPU"
run 0 "$RP" told.zst -p pytorch
lacks out "assumed"
run 0 "$GA" report --db oom.zst.db
[ "$(sed -n 2p out)" = "OUT OF MEMORY: the recorded run failed 1 request; the first: 1000.00 MiB on stream 0 at t=40.500 ms (train.py:42:big_matmul); the recommendation below says which setting would have served it" ] ||
  fail "report --db: the OOM does not head the trace's section: $(head -3 out)"
has out "note: the trace does not say its GPU's memory; the replays assumed 2.65 GiB"
run 0 "$REC" import nohist.pickle -o nohist.zst
has err "gpurec: warning: 'nohist.pickle' has no allocation history (the snapshot was taken without torch.cuda.memory._record_memory_history())"

# ---- --help names the kinds of input each tool takes ----------------------------------------
run 0 "$REC" --help; has out "SNAPSHOT.pickle|TRACE.csv"
run 0 "$REC" import --help; has out "torch.cuda.memory._dump_snapshot pickle"
run 0 "$RP" --help; has out "Input: gpumem traces (.zst"
run 0 "$GA" --help; has out "Inputs: gpumem traces (.zst), gpureplay results (.json), databases (.db)"
run 0 "$GA" report --help; has out "TRACE.zst | SNAPSHOT.pickle | TRACE.csv | DB.db"

if [ "$fails" != 0 ]; then echo "$fails failure(s)" >&2; exit 1; fi
echo "all first-contact checks passed"
