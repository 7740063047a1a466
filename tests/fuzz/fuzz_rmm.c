/* fuzz_rmm.c: libFuzzer target over the RAPIDS RMM log importer (recorder/rmm): text in, trace
 * out; when the import succeeds the trace must read back with as many allocations and frees as
 * the importer counted, and when it fails the message must name a line (or say the log is
 * empty). Built and run by run_fuzz.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/rmm/rmm_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char out[256];
  if (!out[0]) {
    const char *d = getenv("TEST_TMPDIR");
    snprintf(out, sizeof out, "%s/fuzz_rmm_%d.zst", d ? d : "/tmp", (int)getpid());
  }
  FILE *in = fmemopen((void *)data, size, "r");
  if (!in) return 0;
  gm_err_t err;
  rmm_import_stats_t st;
  gm_status_t s = rmm_import(in, "fuzz.dev1.csv", out, 0, NULL, &st, &err);
  fclose(in);
  if (s != GM_OK) {
    if (strncmp(err.msg, "line ", 5) != 0 && strncmp(err.msg, "empty", 5) != 0) abort();
    return 0;
  }
  gmt_reader_t *r;
  if (gmt_reader_open(&r, out, &err) != GM_OK) abort(); /* we just wrote it */
  gmt_event_t ev;
  uint64_t allocs = 0, frees = 0, failed = 0, last = 0;
  while (gmt_reader_next(r, &ev, &err) == GM_OK) {
    if (ev.ts_ns < last || ev.device != 1) abort(); /* time never goes back; the file's device */
    last = ev.ts_ns;
    allocs += ev.kind == GMT_EV_ALLOC;
    frees += ev.kind == GMT_EV_FREE;
    failed += ev.kind == GMT_EV_ALLOC_FAILED;
  }
  gmt_reader_close(r);
  if (allocs != st.allocs || frees != st.frees || failed != st.failures || allocs - frees != st.live_at_end) abort();
  return 0;
}
