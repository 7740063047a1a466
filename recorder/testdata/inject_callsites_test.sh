#!/bin/bash
# The injection library end to end, without a GPU: a Python program records synthetic
# allocations (GPUMEM_SELFTEST) and the trace carries its callsites (GPUMEM_CALLSITES).
set -u
LIB=$PWD/recorder/libgpumem_inject.so
CSV=recorder/trace_csv
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
T=${TEST_TMPDIR:-/tmp}/injcs.$$
mkdir -p "$T"
# An ASan build of the library (bazel test --config=asan) needs the ASan runtime first in an
# uninstrumented python: preload it (leak checks off: the interpreter's own allocations).
asan=$(ldd "$LIB" 2>/dev/null | awk '/libasan/ { print $3 }')
[ -n "$asan" ] && export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
run() { # MODE -> $T/MODE.zst, stdout in $out, stderr in $err, CSV in $csv
  rm -f "$T"/$1*.zst
  out=$(GPUMEM_SELFTEST=20 GPUMEM_SELFTEST_VMM=1 GPUMEM_OUT="$T/$1.zst" GPUMEM_CALLSITES=$1 \
        $PY recorder/testdata/inject_callsites.py "$LIB" 2> "$T/err"); err=$(cat "$T/err")
  csv=$("$CSV" "$T"/$1.pid*.zst)
}
str() { sed -n "s/^#string\.\([0-9]*\)=\(.*\)$/\1 \2/p" <<< "$csv"; }  # "id text" lines
id_of() { str | awk -v t="$1" 'substr($0, index($0, " ") + 1) == t { print $1 }'; }

run user
site=${out#CALLED_FROM }
check "user: program ran" '[[ $out == CALLED_FROM* && -z $err ]]'
check "user: header says user" '[[ $(grep "^#kv.gpurec_callsites=" <<< "$csv") == "#kv.gpurec_callsites=user" ]]'
sid=$(id_of "$site")
check "user: the calling line is a string ($site)" '[[ -n $sid ]]'
nal=$(grep -c ",alloc," <<< "$csv")
check "user: every alloc carries it ($nal allocs)" '[[ $nal == 10 && $(grep ",alloc," <<< "$csv" | awk -F, -v s=$sid "\$10 != s" | wc -l) == 0 ]]'
check "user: frees carry none" '[[ $(grep ",free," <<< "$csv" | awk -F, "\$10 != \"\" && \$10 != 0" | wc -l) == 0 ]]'
vid=$(id_of "[libffi.so.8] < $site")
check "user: the VMM reserve names its owner, then the line" '[[ -n $vid && $(grep -c ",vmm_reserve,.*,$vid," <<< "$csv") == 1 ]]'

run stack
check "stack: header" '[[ $(grep "^#kv.gpurec_callsites=" <<< "$csv") == "#kv.gpurec_callsites=stack" ]]'
check "stack: frame then module" '[[ $(str | grep -c "^[0-9]* $site < .*inject_callsites.py:[0-9]*:<module>$") == 1 ]]'

run none
check "none: no strings" '[[ -z $(str) && $(grep "^#kv.gpurec_callsites=" <<< "$csv") == "#kv.gpurec_callsites=none" ]]'
check "none: events still recorded" '[[ $(grep -c ",alloc," <<< "$csv") == 10 ]]'

run bogus
check "bogus: one warning naming it" '[[ $err == "[gpurec] GPUMEM_CALLSITES=bogus: not none, user or stack; recording without callsites" ]]'
check "bogus: recorded without callsites" '[[ -z $(str) && $(grep -c ",alloc," <<< "$csv") == 10 ]]'

# no Python in the process: allocations carry nothing, the VMM reserve its owner
rm -f "$T"/noppy*.zst
GPUMEM_SELFTEST=20 GPUMEM_SELFTEST_VMM=1 GPUMEM_OUT="$T/nopy.zst" CUDA_INJECTION64_PATH=$LIB recorder/fake_cuda_app
csv=$("$CSV" "$T"/nopy.pid*.zst)
check "no Python: header says why" '[[ $(grep "^#kv.gpurec_callsites=" <<< "$csv") == "#kv.gpurec_callsites=user; no Python in this process" ]]'
check "no Python: one string, the owner (the program)" '[[ $(str) == "1 [fake_cuda_app]" ]]'
echo "owner without Python: $(str)"
# the launcher's option
err=$(recorder/gpurec --callsites=bogus -- true 2>&1); rc=$?
check "gpurec --callsites=bogus: exit 2 naming it" '[[ $rc == 2 && $err == "gpurec: error: unknown --callsites '"'"'bogus'"'"' (user, stack or none)"* ]]'
out=$(GPUMEM_SELFTEST=20 recorder/gpurec -q --callsites=stack -o "$T/g.zst" -- $PY recorder/testdata/inject_callsites.py 2>&1); rc=$?
csv=$("$CSV" "$T/g.zst")
check "gpurec --callsites=stack reaches the library" '[[ $rc == 0 && $(grep "^#kv.gpurec_callsites=" <<< "$csv") == "#kv.gpurec_callsites=stack" && $(str | grep -c " < ") == 1 ]]'
out=$(recorder/gpurec --help)
check "gpurec --help names --callsites" '[[ $out == *"--callsites=WHAT"* ]]'
rm -rf "$T"
[ $fails == 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
