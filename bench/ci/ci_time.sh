#!/usr/bin/env bash
# bench/ci/ci_time.sh REPO [REV] [WORK]: the time and CPU of CI (.ci/run, i.e. tools/test) on a
# fresh clone of REPO at REV (default HEAD), as a fresh CI machine runs it: a HOME of its own, so
# no ~/.bazelrc disk cache and fresh Bazel output bases (tests/install/nocuda.sh's too); only
# the CUDA header wheels' download is copied in when this machine has it (~/.cache/gpumem/
# cuda-headers, 6 MB: what tools/cuda_headers would fetch from PyPI). Runs everything in a
# cgroup-v1 cpuacct group so that the Bazel servers and every test they start are counted.
# Prints the wall and CPU (user+sys) of the whole run, and CPU at each of tools/test's step lines
# ("tools/test: STEP: N s"). Machines are shared: compare CPU, and runs made side by side.
# Needs root (the cgroup, and nocuda.sh's mount namespace). Leaves WORK (default a mktemp dir:
# a few GB) for the logs and test logs; remove it after.
set -euo pipefail
src=$(realpath "$1"); rev=${2:-HEAD}
work=${3:-$(mktemp -d /tmp/ci_time.XXXXXX)}
cgroot=/sys/fs/cgroup/cpuacct
[[ -d $cgroot ]] || { echo "ci_time.sh: error: no cgroup-v1 cpuacct hierarchy at $cgroot" >&2; exit 1; }
mkdir -p "$work/home/.cache/gpumem"
git clone -q "$src" "$work/repo"
git -C "$work/repo" checkout -q "$rev"
[[ -d $HOME/.cache/gpumem/cuda-headers ]] && cp -r "$HOME/.cache/gpumem/cuda-headers" "$work/home/.cache/gpumem/"
cg=$cgroot/ci_time.$$
mkdir "$cg"
cpu() { echo "scale=1; $(cat "$cg/cpuacct.usage") / 1000000000" | bc; }
(
  echo $BASHPID >"$cg/cgroup.procs"
  export HOME=$work/home
  cd "$work/repo"
  t0=$(date +%s.%N)
  set +e
  .ci/run >"$work/ci.log" 2>&1 &
  # tools/test's step lines as they come, with the CPU of the run so far
  tail -n +1 -f --pid=$! "$work/ci.log" | grep --line-buffered '^tools/test: ' |
    while read -r l; do echo "$l (CPU so far: $(cpu) s)"; done
  wait $!; rc=$?
  t1=$(date +%s.%N)
  for ob in "$HOME"/.cache/bazel/_bazel_root/*/ "$HOME"/.cache/gpumem/bazel-nocuda; do
    [[ -d $ob ]] && bazel --output_base="$ob" shutdown >/dev/null 2>&1
  done
  echo "ci_time: $(git log --oneline -1 | cut -c1-60): rc=$rc wall $(echo "$t1 - $t0" | bc | cut -d. -f1) s," \
       "CPU $(cpu) s (user+sys: $(tr '\n' ' ' <"$cg/cpuacct.stat")USER_HZ); log $work/ci.log"
)
rmdir "$cg" 2>/dev/null || true
