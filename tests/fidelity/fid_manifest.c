/* fid_manifest.c: MANIFEST.tsv (fid_manifest.h). Tab-separated, '#' starts a comment line, '-'
 * means an empty field. */
#include "tests/fidelity/fid_manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void field(char *dst, size_t n, const char *src) {
  snprintf(dst, n, "%s", strcmp(src, "-") == 0 ? "" : src);
}

gm_status_t fid_manifest_read(const char *path, fid_entry_t **out, size_t *n, gm_err_t *err) {
  *out = NULL;
  *n = 0;
  FILE *f = fopen(path, "r");
  if (!f) return gm_err_set(err, GM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  char line[2048];
  size_t cap = 0, lineno = 0;
  gm_status_t st = GM_OK;
  while (st == GM_OK && fgets(line, sizeof(line), f)) {
    lineno++;
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0] || line[0] == '#') continue;
    char *cols[8];
    int nc = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, "\t", &save); t && nc < 8; t = strtok_r(NULL, "\t", &save))
      cols[nc++] = t;
    if (nc != 8) {
      st = gm_err_set(err, GM_ERR_FORMAT, "%s:%zu: %d columns, want 8", path, lineno, nc);
      break;
    }
    if (*n == cap) {
      cap = cap ? cap * 2 : 32;
      fid_entry_t *ne = realloc(*out, cap * sizeof(*ne));
      if (!ne) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      *out = ne;
    }
    fid_entry_t *e = &(*out)[*n];
    memset(e, 0, sizeof(*e));
    field(e->file, sizeof(e->file), cols[0]);
    field(e->workload, sizeof(e->workload), cols[1]);
    field(e->setting, sizeof(e->setting), cols[2]);
    field(e->alloc_conf, sizeof(e->alloc_conf), cols[3]);
    field(e->fraction, sizeof(e->fraction), cols[4]);
    if (gm_parse_u64(cols[5], &e->total_memory, err) || gm_parse_u64(cols[6], &e->max_allocated, err) ||
        gm_parse_u64(cols[7], &e->max_reserved, err)) {
      st = gm_err_wrap(err, "%s:%zu", path, lineno);
      break;
    }
    (*n)++;
  }
  fclose(f);
  if (st != GM_OK) {
    free(*out);
    *out = NULL;
    *n = 0;
  }
  return st;
}
