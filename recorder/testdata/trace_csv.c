/* trace_csv.c: print a trace in its CSV text form plus one '#stats' line (the reader's
 * integrity counters) for the recorder's shell and GPU tests. */
#include <inttypes.h>
#include <stdio.h>

#include "formats/gmt.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: trace_csv TRACE.zst\n");
    return 2;
  }
  gmt_reader_t *r;
  gm_err_t err;
  gm_err_clear(&err);
  if (gmt_reader_open(&r, argv[1], &err) < 0) {
    fprintf(stderr, "trace_csv: error: %s\n", err.msg);
    return 1;
  }
  gm_status_t s = gmt_csv_export(r, stdout, &err);
  const gmt_reader_stats_t *st = gmt_reader_stats(r);
  printf("#stats events=%" PRIu64 " chunks=%" PRIu64 " truncated=%d has_index=%d dropped=%" PRIu64
         " seq_gaps=%" PRIu64 "\n",
         st->events, st->chunks, st->truncated, st->has_index, st->dropped, st->seq_gaps);
  gmt_reader_close(r);
  if (s < 0) {
    fprintf(stderr, "trace_csv: error: %s\n", err.msg);
    return 1;
  }
  return 0;
}
