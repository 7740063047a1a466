/* fuzz_snapshot.c: libFuzzer target for the snapshot importer's untrusted-input path: the
 * plain-data pickle reader and the snapshot planner (shape checks, merge, initial state).
 * Any input must end in GM_OK or a clean error; nothing may crash, leak or read out of bounds.
 *
 * With libFuzzer (clang): bash tests/fidelity/fuzz_snapshot.sh [SECONDS]
 * Without it, //tests/fidelity:fuzz_snapshot_smoke runs this target over mutations of the
 * corpus pickles in CI (fuzz_snapshot_main.c). */
#include <stddef.h>
#include <stdint.h>

#include "recorder/snapshot/snap_internal.h"
#include "formats/pkr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pkr_doc_t *doc = NULL;
  gm_err_t err;
  if (pkr_parse(data, size, &doc, &err) != GM_OK) return 0;
  snap_pass_t ps;
  if (snap_plan(pkr_doc_root(doc), &ps, &err) == GM_OK) snap_plan_free(&ps);
  pkr_doc_free(doc);
  return 0;
}
