/* fuzz_reader.c: libFuzzer target over the trace reader (open from memory, iterate, seek,
 * export). Any input must end in a status, never a crash, leak or undefined behaviour.
 * Built and run by run_fuzz.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stdio.h>
#include <stdlib.h>

#include "formats/gmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  gmt_reader_t *r;
  gm_err_t err;
  if (gmt_reader_open_mem(&r, data, size, &err) != GM_OK) return 0;
  gmt_event_t evs[256];
  size_t n;
  char line[512];
  while (gmt_reader_next_batch(r, evs, 256, &n, &err) == GM_OK)
    for (size_t i = 0; i < n; i++) gmt_event_format(&evs[i], r, line, sizeof line);
  uint64_t chunks = gmt_reader_chunk_count(r);
  if (chunks && gmt_reader_seek_chunk(r, chunks - 1, &err) == GM_OK) {
    uint64_t ts, ne;
    gmt_reader_chunk_info(r, chunks - 1, &ts, &ne, &err);
    while (gmt_reader_next(r, evs, &err) == GM_OK) {
    }
  }
  if (chunks) gmt_reader_seek_chunk(r, 0, &err);
  if (sink) gmt_csv_export(r, sink, &err);
  gmt_reader_close(r);
  return 0;
}
