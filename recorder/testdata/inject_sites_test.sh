#!/bin/bash
# gpurec's default mode gives PyTorch's requests their callsites (rec_sites.c), end to end without
# a GPU: stand-ins for libc10.so and libc10_cuda.so, the injection library in self-test mode; the
# trace must hold one alloc_site note with the calling line, and every report must still reach
# libc10.so with its arguments intact.
set -u
LIB=$PWD/recorder/libgpumem_inject.so
FAKE=$PWD/recorder/testdata/fakec10
CSV=recorder/trace_csv
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
T=${TEST_TMPDIR:-/tmp}/injsites.$$
mkdir -p "$T"
asan=$(ldd "$LIB" 2>/dev/null | awk '/libasan/ { print $3 }')
[ -n "$asan" ] && export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
run() { # CALLSITES -> $out, $err, $csv
  rm -f "$T"/s*.zst
  out=$(GPUMEM_SELFTEST=0 GPUMEM_OUT="$T/s.zst" GPUMEM_CALLSITES=$1 $PY recorder/testdata/inject_sites.py "$LIB" "$FAKE" 2> "$T/err")
  err=$(cat "$T/err")
  csv=$("$CSV" "$T"/s.pid*.zst)
}
run user
site=$(sed -n 's/^SITE //p' <<< "$out")
check "hook: not before libc10_cuda.so is loaded, said once" '[[ $(grep ^before <<< "$out") == "before -1" && $err == "[gpurec] no callsites for PyTorch'"'"'s requests: libc10_cuda.so is not loaded" ]]'
check "hook: one GOT slot, then nothing left to change" '[[ $(grep ^hook <<< "$out") == "hook 1" && $(grep ^again <<< "$out") == "again 0" ]]'
check "every report reached libc10.so, the last one's arguments intact" '[[ $(grep ^reports <<< "$out") == "reports 3 last 20480,512,1000,2000,0" ]]'
check "off and on again: the slot restored, then hooked" '[[ $(grep ^off <<< "$out") == "off 1" && $(grep ^on <<< "$out") == "on 1" ]]'
check "hooked again: a note, none while off" '[[ $(grep -c ",alloc_site,.*,0x7f0000003000," <<< "$csv") == 1 && $(grep -c "0x7f0000002000" <<< "$csv") == 0 ]]'
notes=$(grep ",alloc_site,.*,0x7f0000001000," <<< "$csv")
sid=$(sed -n "s/^#string\.\([0-9]*\)=$(sed 's/[][\/.*^$]/\\&/g' <<< "$site")$/\1/p" <<< "$csv")
check "trace: the calling line is a string ($site)" '[[ -n $sid ]]'
check "trace: one note, the CUDA alloc (not its free, not the CPU tensor)" '[[ $(wc -l <<< "$notes") == 1 && $(grep -c ",alloc_site," <<< "$csv") == 2 ]]'
IFS=, read -r ts kind dev stream addr size memk flags corr cs ctx <<< "$notes"
check "trace: the note's device, address, size and callsite" '[[ $dev == 3 && $addr == 0x7f0000001000 && $size == 4096 && $cs == "$sid" ]]'
echo "note: $notes"
run none
check "callsites off: nothing hooked, nothing said" '[[ $(grep ^hook <<< "$out") == "hook -2" && -z $err && -z $(grep ",alloc_site," <<< "$csv") ]]'
check "callsites off: reports still reach libc10.so" '[[ $(grep ^reports <<< "$out") == "reports 3 last 20480,512,1000,2000,0" ]]'
rm -rf "$T"
[ $fails == 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
