/* fuzz_reader.c: libFuzzer target over the trace reader (open from memory, iterate, seek,
 * export), strict and salvaging (formats/SPEC.md "Salvage"). Any input must end in a status,
 * never a crash, leak or undefined behaviour; a salvaging read never fails on damage inside a
 * trace whose header is good, and counts what it skipped.
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
  gmt_event_t evs[256];
  size_t n;
  /* Salvage: damage inside the trace is skipped and counted, never an error (only running out
   * of memory is); what it cannot open, a strict reader cannot either. */
  int salvage_opened = gmt_reader_open_mem_flags(&r, data, size, GMT_READ_SALVAGE, &err) == GM_OK;
  if (salvage_opened) {
    gm_status_t st;
    uint64_t got = 0;
    while ((st = gmt_reader_next_batch(r, evs, 256, &n, &err)) == GM_OK) got += n;
    if (st != GM_END && st != GM_ERR_NOMEM) abort();
    const gmt_reader_stats_t *s = gmt_reader_stats(r);
    char what[256];
    gmt_stats_damage_text(s, what, sizeof what);
    if (s->events != got || (gmt_stats_damaged(s) && !gmt_reader_damage(r))) abort();
    gmt_reader_close(r);
  }
  if (gmt_reader_open_mem(&r, data, size, &err) != GM_OK) return 0;
  if (!salvage_opened) abort();
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
