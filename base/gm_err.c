/* gm_err.c: status names and the cause chain (see gm_base.h). */
#include "base/gm_base.h"

#include <string.h>

const char *gm_status_str(gm_status_t s) {
  switch (s) {
    case GM_OK: return "ok";
    case GM_END: return "end";
    case GM_ERR_IO: return "i/o error";
    case GM_ERR_NOMEM: return "out of memory";
    case GM_ERR_FORMAT: return "bad format";
    case GM_ERR_CORRUPT: return "corrupt data";
    case GM_ERR_VERSION: return "unsupported version";
    case GM_ERR_INVAL: return "invalid argument";
    case GM_ERR_CUDA: return "CUDA error";
    case GM_ERR_TRUNCATED: return "truncated";
    case GM_ERR_UNSUPPORTED: return "unsupported";
  }
  return "unknown status";
}

gm_status_t gm_err_set(gm_err_t *err, gm_status_t st, const char *fmt, ...) {
  if (!err) return st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  err->status = st;
  return st;
}

gm_status_t gm_err_wrap(gm_err_t *err, const char *fmt, ...) {
  if (!err) return GM_ERR_INVAL;
  char ctx[GM_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n > sizeof ctx - 1) n = (int)(sizeof ctx - 1);
  size_t old = strnlen(err->msg, sizeof err->msg - 1);
  /* new = ctx + ": " + old, cut to fit; the innermost cause goes last, so cut there. */
  size_t keep = sizeof err->msg - 1;
  size_t pre = (size_t)n + (old ? 2 : 0);
  if (pre > keep) pre = keep;
  size_t tail = old < keep - pre ? old : keep - pre;
  memmove(err->msg + pre, err->msg, tail);
  memcpy(err->msg, ctx, pre < (size_t)n ? pre : (size_t)n);
  if (old && pre >= (size_t)n + 2) memcpy(err->msg + n, ": ", 2);
  err->msg[pre + tail] = '\0';
  if (err->status >= 0) err->status = GM_ERR_INVAL;
  return err->status;
}

void gm_err_clear(gm_err_t *err) {
  if (!err) return;
  err->status = GM_OK;
  err->msg[0] = '\0';
}
