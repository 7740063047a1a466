#!/bin/bash
# The callsite reader against real CPythons: the system python3 (3.11 on the CI machines) and
# every other CPython 3.10-3.13 this machine has under pyenv (the GPU machine's torch venv runs
# another minor version than the system's). At least one must run; each must pass.
set -u
LIB=recorder/testdata/libcs_probe.so
# An ASan build of the library (bazel test --config=asan) needs the ASan runtime first in an
# uninstrumented python: preload it (leak checks off: the interpreter's own allocations).
asan=$(ldd "$LIB" 2>/dev/null | awk '/libasan/ { print $3 }')
[ -n "$asan" ] && export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
ran=0 rc=0
for py in /usr/bin/python3 /root/.pyenv/versions/3.1[0-3].*/bin/python3; do
  [ -x "$py" ] || continue
  echo "== $py"
  "$py" recorder/testdata/cs_probe_test.py recorder/testdata/libcs_probe.so || rc=1
  ran=$((ran + 1))
done
[ $ran -gt 0 ] || { echo "no python3 found"; exit 1; }
exit $rc
