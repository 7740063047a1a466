#!/bin/sh
# run_fuzz.sh TARGET [SECONDS]: builds tests/fuzz/TARGET.c with the library it fuzzes under clang's
# libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer and fuzzes it for a bounded
# time (SECONDS, else FUZZ_SECONDS, else 12), seeded from traces/valid and traces/invalid
# (trace targets) or tests/fuzz/corpus/TARGET (policy specs, CLI numbers, RMM logs). By hand, longer:
#   FUZZ_SECONDS=120 tests/fuzz/run_fuzz.sh fuzz_policy_spec   (from the repository root)
# Needs the Debian packages clang and libclang-rt-14-dev (tools/setup installs them).
set -eu
target=$1
clang=${CLANG:-clang}
if ! command -v "$clang" >/dev/null 2>&1; then
  echo "run_fuzz.sh: error: clang not found: apt-get install clang libclang-rt-14-dev" >&2
  exit 1
fi
work=${TEST_TMPDIR:-$(mktemp -d)}/$target
mkdir -p "$work/corpus"
base="base/gm_err.c base/gm_esc.c base/gm_input.c base/gm_log.c base/gm_opts.c base/gm_out.c base/gm_size.c"
case $target in
  fuzz_policy_spec) srcs="$base $(ls replay/policies/*.c replay/policies/pytorch/*.c) replay/policies/testing/fake_driver.c" ;;
  fuzz_cli_numbers) srcs="$base" ;;
  fuzz_rmm) srcs="recorder/rmm/rmm_import.c formats/gmt_codec.c formats/gmt_csv.c formats/gmt_decode.c
      formats/gmt_coverage.c formats/gmt_header_edit.c formats/gmt_frameworks.c formats/gmt_header.c formats/gmt_reader.c formats/gmt_salvage.c formats/gmt_writer.c $base" ;;
  *) srcs="formats/gmt_codec.c formats/gmt_coverage.c formats/gmt_header_edit.c formats/gmt_csv.c formats/gmt_decode.c formats/gmt_header.c formats/gmt_reader.c formats/gmt_salvage.c
      formats/gmt_writer.c $base" ;;
esac
# shellcheck disable=SC2086
if ! "$clang" -g -O1 -std=c11 -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -o "$work/$target" "tests/fuzz/$target.c" $srcs -lzstd -lm \
    2>"$work/build.log"; then
  cat "$work/build.log" >&2
  echo "run_fuzz.sh: error: cannot build $target (is libclang-rt-14-dev installed?)" >&2
  exit 1
fi
case $target in
  fuzz_reader) cp traces/valid/*.zst traces/invalid/*.zst "$work/corpus/" ;;
  fuzz_csv) cp traces/valid/*.csv "$work/corpus/" ;;
  fuzz_policy_spec | fuzz_cli_numbers | fuzz_rmm) cp "tests/fuzz/corpus/$target"/* "$work/corpus/" ;;
  fuzz_decode) # the payloads of the one-chunk vectors (zstd -d skips the other frames)
    for f in traces/valid/all-kinds.zst traces/valid/extremes.zst traces/valid/future-records.zst; do
      if command -v zstd >/dev/null 2>&1; then zstd -q -d -c "$f" >"$work/corpus/$(basename "$f").payload" || true; fi
    done ;;
esac
cd "$work"
# -detect_leaks stays on; the reader is given its whole memory budget of 2 GiB.
exec "./$target" -max_total_time="${2:-${FUZZ_SECONDS:-12}}" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 corpus
