#!/usr/bin/env bash
# stream_entry_ab.sh OLD_REV [stream_entry_bench args]: the streamed tracker's entry
# (recorder/rec_torch_entry.c and the core, clock and callsite code under it) of the working tree
# against OLD_REV's, in ONE process, blocks of both rotated within each round, so the difference
# is paired and this loaded machine's swings between processes (2x seen) drop out. OLD_REV's
# recorder files are compiled here with Bazel's optimized flags and their symbols renamed old_*
# (objcopy); formats/ and base/ are shared (the same in both, or the comparison is refused).
# OLD_REV must have rec_torch_entry.c (the tracker body as a library). Example (bench/RESULTS.md):
#   bash bench/recorder/stream_entry_ab.sh 81c8ee3 --rounds 40 --block 500 --evict 32768 \
#        --touch 2048 --code 2048 --inside --sites
# AB_SHARED=1: each build's recorder code linked as a shared library (-fPIC), as in
# libgpumem_inject.so, where each thread-local access is a call of __tls_get_addr.
# AB_PY=1: both builds and the bench in one shared library that python3 loads
# (stream_entry_py.py): the callsites read from real CPython frames (--python), one thread.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: stream_entry_ab.sh OLD_REV [bench args]" >&2; exit 2; }
OLD=$1
shift
cd "$(git rev-parse --show-toplevel)"
git cat-file -e "$OLD:recorder/rec_torch_entry.c" 2>/dev/null ||
  { echo "stream_entry_ab: error: $OLD has no recorder/rec_torch_entry.c" >&2; exit 2; }
git diff --quiet "$OLD" -- formats base ||
  { echo "stream_entry_ab: error: formats/ or base/ differ from $OLD: not comparable" >&2; exit 2; }
W=$(mktemp -d /tmp/stream_ab.XXXXXX)
trap 'rm -rf "$W"' EXIT
bazel build -c opt //bench/recorder:stream_entry_bench >"$W/build.log" 2>&1 || { tail -20 "$W/build.log" >&2; exit 1; }
BIN=bazel-out/k8-opt/bin
CFLAGS="-O2 -DNDEBUG -g0 -std=c11 -D_GNU_SOURCE -fno-strict-aliasing -fno-omit-frame-pointer -ffunction-sections -fdata-sections -fstack-protector"
mkdir -p "$W/old"
git archive "$OLD" recorder base formats | tar -x -C "$W/old"
PIC=
[ "${AB_SHARED:-0}" = 1 ] || [ "${AB_PY:-0}" = 1 ] && PIC=-fPIC
build() { # SRCROOT OUT.o: the recorder files of one build, relocatable
  local objs=() f
  for f in rec_core rec_devmem rec_find rec_frameworks rec_prov rec_ring rec_callsite rec_owner rec_pyframe rec_tclock rec_torch_entry; do
    [ -f "$1/recorder/$f.c" ] || continue # rec_tclock.c: before stream7
    gcc $CFLAGS $PIC -iquote "$1" -c "$1/recorder/$f.c" -o "$2.$f.o"
    objs+=("$2.$f.o")
  done
  ld -r -o "$2" "${objs[@]}"
}
build "$W/old" "$W/old.o"
nm -g --defined-only "$W/old.o" | awk '{print $3" old_"$3}' >"$W/syms"
objcopy --redefine-syms="$W/syms" "$W/old.o"
gcc $CFLAGS $PIC -DSTREAM_AB ${AB_PY:+-DSTREAM_LIB} -iquote . -c bench/recorder/stream_entry_bench.c -o "$W/ab.o"
shared=()
for o in "$BIN"/base/_objs/base/*.o "$BIN"/formats/_objs/gmt/*.o; do [[ $o == *.pic.o ]] || shared+=("$o"); done
if [ "${AB_PY:-0}" = 1 ]; then
  build . "$W/new.o"
  pics=()
  for o in "$BIN"/base/_objs/base/*.pic.o "$BIN"/formats/_objs/gmt/*.pic.o; do pics+=("$o"); done
  gcc -shared -o "$W/libab.so" "$W/ab.o" "$W/old.o" "$W/new.o" "${pics[@]}" -lzstd -lm -ldl -lpthread
  echo "stream_entry_ab: new = the working tree, old = $(git rev-parse --short "$OLD"), in python3"
  python3 bench/recorder/stream_entry_py.py "$W/libab.so" --out "$W/trace.gmt" "$@"
  exit
elif [ -n "$PIC" ]; then
  build . "$W/new.o"
  gcc -shared -o "$W/libold.so" "$W/old.o" -lpthread -ldl
  gcc -shared -o "$W/libnew.so" "$W/new.o" -lpthread -ldl
  gcc -o "$W/ab" "$W/ab.o" -L"$W" -Wl,-rpath,"$W" -lnew -lold -Wl,--no-as-needed "${shared[@]}" -rdynamic -lzstd -lm -ldl -lpthread
else
  new=()
  for lib in rec_core rec_callsite rec_torch_entry; do
    for o in "$BIN/recorder/_objs/$lib"/*.o; do [[ $o == *.pic.o ]] || new+=("$o"); done
  done
  gcc -o "$W/ab" "$W/ab.o" "$W/old.o" "${new[@]}" "${shared[@]}" -lzstd -lm -ldl -lpthread
fi
echo "stream_entry_ab: new = the working tree, old = $(git rev-parse --short "$OLD")"
"$W/ab" --out "$W/trace.gmt" "$@"
