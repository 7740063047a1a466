#!/bin/bash
# fuzz_snapshot.sh: libFuzzer + ASan/UBSan run of the snapshot importer (fuzz_snapshot.c), seeded
# with the corpus pickles. Usage: bash tests/fidelity/fuzz_snapshot.sh [SECONDS] (default 60).
# Builds with clang directly (Bazel's toolchain here is gcc); needs libzstd-dev for formats/.
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-60}
work=$(mktemp -d)
clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -I. \
  tests/fidelity/fuzz_snapshot.c formats/pkr.c recorder/snapshot/snap_state.c \
  recorder/snapshot/snap_import.c recorder/snapshot/snap_entry.c \
  formats/gmt_codec.c formats/gmt_csv.c formats/gmt_decode.c formats/gmt_header.c formats/gmt_reader.c \
  formats/gmt_salvage.c formats/gmt_writer.c base/*.c -lzstd -lm -pthread -o "$work/fuzz"
mkdir -p "$work/corpus"
cp traces/snapshots/two_streams.default.pickle "$work/corpus/"
"$work/fuzz" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 "$work/corpus"
