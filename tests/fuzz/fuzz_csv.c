/* fuzz_csv.c: libFuzzer target over the CSV importer: text in, trace out; when the import
 * succeeds the trace must read back, and export -> import -> export must be stable.
 * Built and run by run_fuzz.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/gmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *export_text(const char *path, size_t *len) {
  gmt_reader_t *r;
  gm_err_t err;
  if (gmt_reader_open(&r, path, &err) != GM_OK) abort(); /* we just wrote it */
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (gmt_csv_export(r, f, &err) != GM_OK) abort();
  fclose(f);
  gmt_reader_close(r);
  return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char p1[256], p2[256];
  if (!p1[0]) {
    const char *d = getenv("TEST_TMPDIR");
    snprintf(p1, sizeof p1, "%s/fuzz_csv_%d_a.zst", d ? d : "/tmp", (int)getpid());
    snprintf(p2, sizeof p2, "%s/fuzz_csv_%d_b.zst", d ? d : "/tmp", (int)getpid());
  }
  FILE *in = fmemopen((void *)data, size, "r");
  if (!in) return 0;
  gm_err_t err;
  gm_status_t s = gmt_csv_import(in, "fuzz.csv", p1, NULL, &err);
  fclose(in);
  if (s != GM_OK) return 0;
  size_t l1, l2;
  char *t1 = export_text(p1, &l1);
  FILE *in2 = fmemopen(t1, l1, "r");
  if (gmt_csv_import(in2, "t1.csv", p2, NULL, &err) != GM_OK) abort(); /* our own export must import */
  fclose(in2);
  char *t2 = export_text(p2, &l2);
  if (l1 != l2 || memcmp(t1, t2, l1) != 0) abort(); /* and round-trip exactly */
  free(t1);
  free(t2);
  return 0;
}
