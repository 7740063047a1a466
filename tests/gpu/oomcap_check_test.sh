#!/bin/bash
# oomcap_check_test.sh: tests/gpu/oomcap_check.sh without a GPU (its dry run: oomcap_job.py's
# plan written as the trace gpurec would record, the built tools). Every check passes when the
# advised run's stand-in reserves what the replay predicted; the exactness check fails when it
# reserves 2 MiB more; the archive and the summary line are written.
# Usage: oomcap_check_test.sh GPUREC GPUREPLAY GPUANALYZE
set -u
T=${TEST_TMPDIR:-$(mktemp -d)}
B=$T/bin
mkdir -p "$B"
ln -sf "$(realpath "$1")" "$B/gpurec"
ln -sf "$(realpath "$2")" "$B/gpureplay"
ln -sf "$(realpath "$3")" "$B/gpuanalyze"
HERE=$(dirname "$(realpath "$0")")
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
bash -n "$HERE/oomcap_check.sh" || fail "oomcap_check.sh does not parse"

OUT=$T/out1 OOMCAP_WORK=$T/w1 OOMCAP_DRY=1 bash "$HERE/oomcap_check.sh" "$B" > "$T/run1.txt" 2>&1
grep -q "^oomcap: 10 checks, 0 failed$" "$T/run1.txt" || fail "dry run: not 10 checks passed: $(cat "$T/run1.txt")"
grep -q "^ok: the report replays within the limit the run set itself" "$T/run1.txt" || fail "no verdict check"
grep -q "(pytorch:max_split_size_mb:[0-9]*: predicted [0-9]* B, limit 3002197606 B)" "$T/run1.txt" ||
  fail "the advice is not a max_split_size_mb within 3002197606 B: $(grep advises "$T/run1.txt")"
[ -s "$T/out1/oomcap.tar.xz" ] && tar -tJf "$T/out1/oomcap.tar.xz" | grep -q "checks.txt" || fail "no archive with checks.txt"

OUT=$T/out2 OOMCAP_WORK=$T/w2 OOMCAP_DRY=1 OOMCAP_DRY_SHIFT=2097152 bash "$HERE/oomcap_check.sh" "$B" > "$T/run2.txt" 2>&1
grep -q "^FAIL: the advice reserves what the replay predicted" "$T/run2.txt" || fail "a 2 MiB miss passed: $(cat "$T/run2.txt")"
grep -q "^oomcap: 10 checks, 1 failed$" "$T/run2.txt" || fail "the miss is not the only failure: $(tail -3 "$T/run2.txt")"

if [ "$fails" -gt 0 ]; then
  echo "$fails failure(s)"
  exit 1
fi
echo "oomcap_check_test: ok"
