#!/bin/bash
# self_check_test.sh: traces/recorded/selfcheck/TABLE.md is what the built tools give today, and
# every row is exact (self_check_table.sh exits 1 otherwise).
#   self_check_test.sh GPUANALYZE GPUREPLAY TABLE_SH TABLE_MD DIR
set -u
out=$(bash "$3" "$1" "$2" "$5") || { echo "FAIL: a row is not exact:"; echo "$out"; exit 1; }
if ! diff <(echo "$out") "$4"; then
  echo "FAIL: $4 differs from what the tools give (regenerate: bazel run //tests/tables:self_check_table -- \$PWD/traces/recorded/selfcheck > traces/recorded/selfcheck/TABLE.md)"
  exit 1
fi
echo "ok: $(grep -m1 ' exact: the replay' "$4")"
