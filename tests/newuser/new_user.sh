#!/usr/bin/env bash
# tests/newuser/new_user.sh: a new user's first hour, as CI runs it (tools/test calls this last,
# after the sanitizer builds): the README's commands with the tools where the README says they
# are (bazel-bin/), then the mistakes new users make (issue 18), each with its message and
# exit code. Checks first that bazel-bin is the optimised build: the README's tools must be.
# Usage: tests/newuser/new_user.sh     (from a checkout where `bazel build //:tools` has run)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
fails=0
fail() { echo "new_user: FAIL: $*" >&2; fails=$((fails + 1)); }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 1200 "$1")"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "$1 has '$2': $(grep -F -- "$2" "$1" | head -3)"; }
# run EXPECTED_RC CMD...: stdout in out, stderr in err; shows the command as the README does.
run() {
  local want=$1; shift
  echo "\$ ${*#"$bin"/}" | sed "s#$bin/##g"
  "$@" >out 2>err
  local rc=$?
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, want $want; stderr: $(<err)"
}

# ---- the README's tools are the optimised build -------------------------------------------
bazel build //:tools //recorder:gpumem_inject >/dev/null 2>&1 || bazel build //:tools //recorder:gpumem_inject
link=$(readlink bazel-bin)
case "$link" in
  */k8-opt/bin) ;;
  *) fail "bazel-bin is '$link', not the optimised build (k8-opt): the README's tools would be slow" ;;
esac
bin=$root/bazel-bin
for t in recorder/gpurec replay/gpureplay analyze/gpuanalyze; do
  [ -x "$bin/$t" ] || fail "$bin/$t missing"
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
python3 "$root/tests/newuser/mk_snapshots.py" . || fail "mk_snapshots.py"

# ---- the README's commands --------------------------------------------------------------------
snap=$root/traces/snapshots/infer_varlen.default.pickle
run 0 "$bin/recorder/gpurec" import "$snap" --gpu-memory=150109880320 -o infer.zst
has err "1838 snapshot entries -> 1838 events in infer.zst"
run 0 "$bin/analyze/gpuanalyze" info infer.zst
has out "peak live:      1.16 GiB"
run 0 "$bin/replay/gpureplay" infer.zst --sweep
has out "pytorch:expandable_segments:True"
run 0 "$bin/analyze/gpuanalyze" report infer.zst --html report.html
# the tuner's choice (the report's default, no hard limit): 60 MiB under the grid's best
has out "paste: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:69,max_non_split_rounding_mb:256"
has out "beats the sweep grid's best, pytorch:expandable_segments:True (1.23 GiB), by 60.00 MiB (4.8%)"
lacks out "per_process_memory_fraction"
run 0 "$bin/analyze/gpuanalyze" report --no-tune infer.zst --db sweep.db --html report.html
has out "paste: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
[ -s report.html ] || fail "no report.html"
# "Recording your own job": no GPU here, so the job runs unrecorded and says why.
run 0 "$bin/recorder/gpurec" -o train.zst -- python3 -c "print('training')"
has out "training"
has err "no trace written: the program never initialised CUDA"
run 0 "$bin/recorder/gpurec" import "$snap" -o train.zst
run 0 "$bin/analyze/gpuanalyze" report train.zst
has err "wrote train.zst.db"
# "Predicting a run you have not made": the hand-made traces of recorder/predict/testdata
td=$root/recorder/predict/testdata
for x in "affine8 train8" "affine16 train16" "affine32 real32" "algo4 train4"; do
  set -- $x
  run 0 "$bin/recorder/gpurec" import -q "$td/$1.csv" -o "$2.zst"
done
run 0 "$bin/recorder/gpurec" predict train8.zst@8 train16.zst@16 --at=32 -o train32.zst
has err "confidence 100.0%; 64 allocations, 64 matched in every recording"
run 0 "$bin/replay/gpureplay" train32.zst real32.zst
has out "predicted, not recorded: the job at 32, predicted from train8.zst@8 train16.zst@16"
[ "$(grep -c '66.00 MiB' out)" = 2 ] || fail "predicted and real peaks differ: $(<out)"
run 3 "$bin/recorder/gpurec" predict train4.zst@4 train8.zst@8 --at=16 -o train16p.zst
has err "record once more at 12, then: gpurec predict train8.zst@8 NEW.zst@12 --at=16"

# ---- the mistakes new users make ---------------------------------------------------------------
run 0 "$bin/analyze/gpuanalyze" report oom.pickle       # a snapshot of a job that ran out of memory
has out "OUT OF MEMORY: the recorded run failed 1 request"
has out "paste: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
run 1 "$bin/replay/gpureplay" oom.pickle
has err "\`gpurec import oom.pickle -o oom.zst\`"
run 1 "$bin/recorder/gpurec" import oom.zst -o x.zst
has err "already a gpumem trace: nothing to import"
run 2 "$bin/replay/gpureplay" oom.zst --sweeep
has err "did you mean '--sweep'?"
run 0 "$bin/replay/gpureplay" oom.zst -p PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
has out "pytorch:expandable_segments:True"
run 1 "$bin/recorder/gpurec" -o /nonexistent/dir/t.zst -- python3 -c pass
has err "the program was not started"
run 127 "$bin/recorder/gpurec" -- trian.py
has err "nothing was started"
run 1 "$bin/analyze/gpuanalyze" report --db typo.db
[ -e typo.db ] && fail "report --db typo.db made a database"
run 0 "$bin/analyze/gpuanalyze" -v report oom.zst
has err "reusing"
run 0 "$bin/recorder/gpurec" import nohist.pickle -o nohist.zst
has err "has no allocation history"

if [ "$fails" != 0 ]; then echo "new_user: $fails failure(s)" >&2; exit 1; fi
echo "new_user: the README's commands and the common mistakes behave as documented"
