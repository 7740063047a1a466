/* gmt_header_edit.c: a written trace's header changed in place, inside the room its writer left
 * (gmt_header_t.room, SPEC.md §3): the coverage marks of a recording that stopped (gmt_trace_mark)
 * and what a recorder learns after the trace began (gmt_trace_set_kv: a limit the job set
 * itself, its OOM's message). The header keeps its length, so the chunks and the index never
 * move: this works on a full disk and on a file cut short. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/gmt_internal.h"

gm_status_t gmt_trace_edit_header(const char *path, gmt_header_edit_fn edit, void *ctx, const char *what,
                                  gm_err_t *err) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return gm_err_set(err, GM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  uint8_t fh[GMT_FRAME_HDR];
  gm_status_t s = GM_OK;
  uint8_t *buf = NULL;
  size_t len = 0;
  if (pread(fd, fh, sizeof fh, 0) != (ssize_t)sizeof fh || gmt_get32(fh) != GMT_MAGIC_HEADER ||
      gmt_get32(fh + 4) > GMT_MAX_HEADER) {
    s = gm_err_set(err, GM_ERR_FORMAT, "'%s': not a gpumem trace", path);
  } else {
    len = GMT_FRAME_HDR + (size_t)gmt_get32(fh + 4);
    if (!(buf = malloc(len))) s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    else if (pread(fd, buf, len, 0) != (ssize_t)len)
      s = gm_err_set(err, GM_ERR_TRUNCATED, "'%s': file ends inside the header", path);
  }
  gmt_header_t h;
  gmt_header_init(&h);
  size_t used = 0;
  if (s == GM_OK) s = gmt_header_decode(buf, len, &h, &used, err);
  if (s == GM_OK) s = edit(&h, ctx, err);
  gmt_buf_t out = {0};
  if (s == GM_OK && gmt_header_encode_fit(&h, len, h.format_version, h.min_reader, &out))
    s = gm_err_set(err, GM_ERR_UNSUPPORTED, "'%s': no room in its header for %s", path, what);
  if (s == GM_OK && pwrite(fd, out.p, out.len, 0) != (ssize_t)out.len)
    s = gm_err_set(err, GM_ERR_IO, "'%s': rewriting its header: %s", path, strerror(errno));
  if (close(fd) != 0 && s == GM_OK) s = gm_err_set(err, GM_ERR_IO, "'%s': %s", path, strerror(errno));
  gmt_buf_free(&out);
  gmt_header_free(&h);
  free(buf);
  return s;
}

typedef struct kv_edit {
  const char *const *kv;
  size_t n;
} kv_edit_t;

static gm_status_t kv_edit(gmt_header_t *h, void *ctx, gm_err_t *err) {
  const kv_edit_t *e = ctx;
  gm_status_t s = GM_OK;
  for (size_t i = 0; i + 1 < 2 * e->n && s == GM_OK; i += 2) s = gmt_header_kv_set(h, e->kv[i], e->kv[i + 1], err);
  return s;
}

gm_status_t gmt_trace_set_kv(const char *path, const char *const *kv, size_t n, gm_err_t *err) {
  kv_edit_t e = {kv, n};
  return gmt_trace_edit_header(path, kv_edit, &e, "these settings", err);
}
