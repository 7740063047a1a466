/* fuzz_decode.c: libFuzzer target over the chunk payload decoder alone (formats/gmt_decode.c).
 * The reader checks a CRC before it decodes, so fuzzing whole files rarely reaches the column
 * decoder; this target feeds it payloads directly, as a crafted file with a valid CRC would.
 * Built and run by run_fuzz.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stdlib.h>

#include "formats/gmt_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static gm_status_t on_string(void *ctx, uint32_t id, const char *s, uint32_t len, gm_err_t *err) {
  (void)ctx, (void)id, (void)s, (void)len, (void)err;
  return GM_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static gmt_addr_model_t model;
  const uint8_t *p = data;
  uint64_t nev;
  if (!gmt_get_varint(&p, data + size, &nev) || nev > GMT_MAX_CHUNK_EVENTS) return 0;
  gmt_event_t *evs = NULL;
  size_t cap = 0, n = 0;
  uint64_t unknown = 0;
  gm_err_t err;
  gm_status_t s = gmt_dec_payload(data, size, (uint32_t)nev, &evs, &cap, &n, &unknown, &model, on_string, NULL, &err);
  if (s == GM_OK && n + unknown != nev) abort();
  free(evs);
  return 0;
}
