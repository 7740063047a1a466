/* pred_write.c: the predicted trace written (pass 2, only when the prediction stands): the
 * reference recording event for event with the predicted sizes (or one end of the uncertain
 * sizes' range), under the reference's header marked as predicted with its inputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/predict/pred_check.h"
#include "recorder/predict/pred_internal.h"

/* The output's header: the reference's, marked as predicted with its inputs. */
gm_status_t pred_write_header(const pred_work_t *w, const pred_input_t *in, size_t ref, const pred_opts_t *o,
                              const pred_result_t *res, gmt_header_t *h, gm_err_t *err) {
  gm_status_t s = gmt_header_copy(h, &w->rec[ref].header, err);
  if (s < 0) return s;
  char buf[4096], t[64];
  size_t off = 0;
  for (size_t j = 0; j < w->n && off < sizeof buf; j++) {
    pred_value_text(in[j].value, t, sizeof t);
    off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s@%s", j ? " " : "", in[j].path, t);
  }
  s = gmt_header_set(&h->tool, "gpurec " GM_VERSION " predict", err);
  if (s == GM_OK) s = gmt_header_kv_set(h, "predicted.inputs", buf, err);
  pred_value_text(o->target, t, sizeof t);
  if (s == GM_OK) s = gmt_header_kv_set(h, "predicted.at", t, err);
  pred_value_text(in[ref].value, t, sizeof t);
  if (s == GM_OK) s = gmt_header_kv_set(h, "predicted.reference", t, err);
  snprintf(buf, sizeof buf, "%.4f", res->confidence);
  if (s == GM_OK) s = gmt_header_kv_set(h, "predicted.confidence", buf, err);
  if (s == GM_OK) s = gmt_header_kv_set(h, "predicted.fit", res->quadratic ? "quadratic" : "affine", err);
  if (s == GM_OK && o->command) s = gmt_header_kv_set(h, "predicted.command", o->command, err);
  if (s == GM_OK && o->settings_note) s = gmt_header_kv_set(h, "predicted.settings", o->settings_note, err);
  if (s == GM_OK && o->runs_note && *o->runs_note) s = gmt_header_kv_set(h, "predicted.runs_check", o->runs_note, err);
  const char *cmd = w->rec[ref].header.command_line;
  if (s == GM_OK && cmd && *cmd) {
    /* the job's command at the target value, where the value is written in it */
    char masked[2048], out[2048];
    if (pred_mask_command(cmd, w->rec[ref].value, masked, sizeof masked)) {
      pred_value_text(o->target, t, sizeof t);
      size_t p = 0;
      for (const char *c = masked; *c && p + 64 < sizeof out; c++) {
        if (c[0] == '{' && c[1] == '}') {
          p += (size_t)snprintf(out + p, sizeof out - p, "%s", t);
          c++;
        } else out[p++] = *c;
      }
      out[p] = 0;
      s = gmt_header_set(&h->command_line, out, err);
    }
  }
  h->pid = 0;
  return s;
}

static uint64_t variant_size(const pred_work_t *w, size_t e, pred_variant_t v) {
  uint32_t i = w->ev_alloc[e];
  if (v == PRED_SIZES_FITTED || i == UINT32_MAX) return w->ev_size[e];
  return v == PRED_SIZES_LOW ? w->lo[i] : w->hi[i];
}

gm_status_t pred_write_trace(const pred_work_t *w, size_t ref, const gmt_header_t *h, pred_variant_t variant,
                             const char *path, pred_result_t *res, gm_err_t *err) {
  const pred_rec_t *R = &w->rec[ref];
  gmt_writer_t *wr;
  gm_status_t s = gmt_writer_open(&wr, path, h, NULL, err);
  if (s < 0) return s;
  uint32_t ns = pred_strings_count(w->strs);
  uint32_t *wid = calloc((size_t)ns + 1, sizeof *wid); /* shared id -> writer id */
  if (!wid) {
    gmt_writer_abandon(wr);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  enum { BATCH = 4096 };
  gmt_event_t buf[BATCH];
  size_t nb = 0;
  for (size_t e = 0; e < R->n_ev && s == GM_OK; e++) {
    gmt_event_t ev = R->ev[e];
    ev.size = variant_size(w, e, variant);
    if (ev.callsite) {
      if (!wid[ev.callsite]) s = gmt_writer_intern(wr, pred_strings_get(w->strs, ev.callsite), &wid[ev.callsite], err);
      ev.callsite = wid[ev.callsite];
    }
    buf[nb++] = ev;
    if (nb == BATCH || e + 1 == R->n_ev) {
      /* the writer puts each string into every chunk whose events use it */
      if (s == GM_OK) s = gmt_writer_append_n(wr, buf, nb, err);
      nb = 0;
    }
  }
  free(wid);
  if (s < 0) {
    gmt_writer_abandon(wr);
    return s;
  }
  res->events = R->n_ev;
  return gmt_writer_close(wr, err);
}
