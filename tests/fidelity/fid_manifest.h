/* fid_manifest.h: reads traces/snapshots/MANIFEST.tsv, the corpus's list of snapshots with the
 * settings each was taken under and torch's own peaks (the harness and the prediction table
 * both need the memory fraction and total memory, which the pickle does not hold). */
#ifndef FID_MANIFEST_H
#define FID_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fid_entry {
  char file[128];      /* "train_amp.default.pickle" */
  char workload[64];
  char setting[64];
  char alloc_conf[256]; /* "" for the default */
  char fraction[64];    /* "" when none was set */
  uint64_t total_memory;
  uint64_t max_allocated;
  uint64_t max_reserved;
} fid_entry_t;

/* Read the manifest; *out is malloc'ed (free it), *n entries. */
gm_status_t fid_manifest_read(const char *path, fid_entry_t **out, size_t *n, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* FID_MANIFEST_H */
