/* pred.c: pred_run: load, check, align, fit, judge, write (pred.h says what and why).
 *
 * The output follows the reference recording (the input nearest the target) event for event:
 * its order, timing, streams, markers and frees; only the sizes change. Each of its
 * allocations takes the size fitted through its partners in the other recordings. One that
 * some recording lacks is carried by the recordings' own rule: the reference has it, so the
 * job makes it at values on the reference's side; it keeps the size fitted through the
 * recordings that have it (the reference's own when only it does); when every recording nearer
 * the target than each one lacking it makes it, that fit counts as certain (made_from_near).
 * Allocations only the other
 * recordings make are left out. Two passes over the reference: the first sizes every event
 * and finds the predicted peak of live requested bytes and what it is made of (confidence);
 * the second, only when the prediction stands, writes the trace (to a temporary file renamed
 * at the end, so a failure leaves nothing half-written under the output's name). Whether a
 * prediction stands (its refusals) is pred_judge.c.
 * This file: the model (recordings loaded, checked and aligned once; predicted at any target)
 * and pred_run; the sizing is pred_size.c, the writing pred_write.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/predict/pred_check.h"
#include "recorder/predict/pred_internal.h"

#define DEFAULT_MAX_D 1000

static void work_free(pred_work_t *w) {
  for (size_t j = 0; j < w->n; j++) {
    pred_rec_free(&w->rec[j]);
    free(w->match[j]);
  }
  pred_strings_free(w->strs);
  free(w->size);
  free(w->why);
  free(w->missing_in);
  free(w->ev_size);
  free(w->ev_alloc);
  free(w->lo);
  free(w->hi);
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}


/* ---- the model: recordings loaded, checked and aligned once; predicted at any target --------- */

struct pred_model {
  pred_work_t w;
  pred_input_t in[PRED_MAX_INPUTS];
  size_t n;
  uint64_t granule;
  size_t aligned_ref;     /* the reference match[] was computed for; SIZE_MAX: none */
  uint64_t dropped_other; /* of that alignment */
  size_t ref;             /* of the last pred_model_at */
  double target;
  int have_sizes;         /* pred_model_at succeeded and did not refuse */
  int checkable;          /* ... or refused, checkable (the trace may be written for the check) */
};

void pred_model_close(pred_model_t *m) {
  if (!m) return;
  work_free(&m->w);
  free(m);
}

gm_status_t pred_model_open(const pred_input_t *in, size_t n, pred_model_t **out, pred_result_t *res, gm_err_t *err) {
  *out = NULL;
  memset(res, 0, sizeof *res);
  if (n < 2) return gm_err_set(err, GM_ERR_INVAL, "a prediction needs at least two recordings of the job at different values");
  if (n > PRED_MAX_INPUTS) return gm_err_set(err, GM_ERR_INVAL, "at most %d recordings", PRED_MAX_INPUTS);
  for (size_t j = 0; j < n; j++)
    for (size_t k = j + 1; k < n; k++)
      if (in[j].value == in[k].value)
        return gm_err_set(err, GM_ERR_INVAL, "'%s' and '%s' are both at %.15g: the recordings must be at different values",
                          in[j].path, in[k].path, in[j].value);
  pred_model_t *m = calloc(1, sizeof *m);
  if (!m) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  memcpy(m->in, in, n * sizeof *in);
  m->n = n;
  m->aligned_ref = SIZE_MAX;
  pred_work_t *w = &m->w;
  w->strs = pred_strings_new();
  if (!w->strs) {
    free(m);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  gm_status_t s = pred_load_all(w->rec, in, n, w->strs, err);
  w->n = n;
  if (s == GM_OK) s = pred_check_same_job(w->rec, n, res->warning, sizeof res->warning, err);
  if (s == GM_OK && pred_check_structure(w->rec, n, w->strs, res->reason, sizeof res->reason)) {
    res->refused = 1;
    snprintf(res->advice, sizeof res->advice,
             "record every input the same way (the same steps, the same script), so that only the value differs");
  }
  uint64_t g = 0;
  for (size_t j = 0; j < n && s == GM_OK; j++) g = gcd64(g, w->rec[j].all_sizes_gcd);
  m->granule = res->granule = g && g % 512 == 0 ? 512 : 1;
  if (s < 0) {
    pred_model_close(m);
    return s;
  }
  *out = m;
  return GM_OK;
}

/* Align every other recording to the reference (kept while the reference stays). */
static gm_status_t align_to(pred_model_t *m, size_t ref, gm_err_t *err) {
  pred_work_t *w = &m->w;
  if (m->aligned_ref == ref) return GM_OK;
  for (size_t j = 0; j < w->n; j++) {
    free(w->match[j]);
    w->match[j] = NULL;
  }
  m->aligned_ref = SIZE_MAX;
  m->dropped_other = 0;
  for (size_t j = 0; j < w->n; j++) {
    if (j == ref) continue;
    w->match[j] = malloc((w->rec[ref].n_alloc ? w->rec[ref].n_alloc : 1) * sizeof *w->match[j]);
    if (!w->match[j]) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    uint64_t unaligned = 0;
    gm_status_t s = pred_align(&w->rec[ref], &w->rec[j], w->match[j], DEFAULT_MAX_D, &unaligned, err);
    if (s < 0) return s;
  }
  /* what a recording made in another order, paired by the law the others fix (pred_pair_law.c) */
  uint64_t by_law = 0;
  gm_status_t ls = pred_pair_by_law(w->rec, w->n, ref, w->match, m->granule, &by_law, err);
  if (ls < 0) return ls;
  for (size_t j = 0; j < w->n; j++) {
    if (j == ref) continue;
    uint64_t paired = 0;
    for (size_t i = 0; i < w->rec[ref].n_alloc; i++) paired += w->match[j][i] >= 0;
    m->dropped_other += w->rec[j].n_alloc - paired;
  }
  m->aligned_ref = ref;
  return GM_OK;
}

gm_status_t pred_model_at(pred_model_t *m, const pred_opts_t *o, pred_result_t *res, gm_err_t *err) {
  memset(res, 0, sizeof *res);
  m->have_sizes = m->checkable = 0;
  if (!(o->target > 0)) return gm_err_set(err, GM_ERR_INVAL, "the target value must be positive");
  double minc = o->min_confidence < 0 ? PRED_DEFAULT_MIN_CONFIDENCE : o->min_confidence;
  pred_work_t *w = &m->w;
  const pred_input_t *in = m->in;
  size_t n = m->n;
  /* the reference: nearest the target, the larger on a tie */
  size_t ref = 0;
  for (size_t j = 1; j < n; j++) {
    double dj = fabs(in[j].value - o->target), dr = fabs(in[ref].value - o->target);
    if (dj < dr || (dj == dr && in[j].value > in[ref].value)) ref = j;
  }
  res->reference = m->ref = ref;
  res->granule = m->granule;
  m->target = o->target;
  if (pred_check_structure(w->rec, n, w->strs, res->reason, sizeof res->reason)) {
    res->refused = 1;
    snprintf(res->advice, sizeof res->advice,
             "record every input the same way (the same steps, the same script), so that only the value differs");
    return GM_OK;
  }
  free(w->size);
  free(w->why);
  free(w->missing_in);
  free(w->ev_size);
  free(w->ev_alloc);
  free(w->lo);
  free(w->hi);
  w->ev_alloc = NULL;
  w->lo = w->hi = NULL;
  w->size = w->ev_size = NULL;
  w->why = w->missing_in = NULL;
  w->peak = w->peak_certain = w->peak_inconsistent = w->uncertain_max = 0;
  w->peak_ev = 0;
  memset(w->peak_unmatched, 0, sizeof w->peak_unmatched);
  gm_status_t s = align_to(m, ref, err);
  res->dropped_other = m->dropped_other;
  if (s == GM_OK) s = pred_size_fit(w, ref, o->target, res->granule, res, err);
  if (s == GM_OK) s = pred_size_events(w, ref, res, err);
  size_t near = ref == 0 ? 1 : 0; /* the recording nearest the target after the reference */
  for (size_t j = 0; j < n; j++)
    if (j != ref && fabs(in[j].value - o->target) < fabs(in[near].value - o->target)) near = j;
  if (s == GM_OK) res->drift_allocs = pred_drift_count(w, ref, near);
  /* a drift spanned by a third recording: its allocations are uncertain sizes (below) */
  res->drift_spanned = s == GM_OK && res->drift_allocs && pred_drift_spanned(w, ref, near);
  if (s == GM_OK && res->confidence < minc) pred_refuse_low_confidence(w, in, o->target, minc, ref, res);
  else if (s == GM_OK && minc >= PRED_DEFAULT_MIN_CONFIDENCE && res->drift_allocs && !res->drift_spanned)
    pred_refuse_drift(w, in, o->target, ref, near, res);
  else if (s == GM_OK && minc >= PRED_DEFAULT_MIN_CONFIDENCE && res->uncertain_share > PRED_MAX_UNCERTAIN_SHARE)
    pred_refuse_uncertain_off_peak(w, in, o->target, ref, res);
  if (s == GM_OK) res->events = w->rec[ref].n_ev;
  /* Checkable (issue 26: a refusal is a last resort): every uncertain byte is a size with a
   * range taken from the recordings, whose two ends can be replayed per setting (pred_settings.c
   * answers the settings they do not move beyond the tolerance), whatever the confidence: a fit
   * of no tensor's law (a library's workspace: from the smallest recorded to the largest scaled
   * with the value, or with its square where it grew faster than the value), an allocation some
   * recording lacks that the reference makes (made at the target as at the reference, its range
   * through the recordings that make it). With a third recording, each size the nearest two
   * share is fitted through three points (a bend shows as no law, an uncertain size) or, where
   * the third lacks it, is itself an uncertain size.
   * A drift between two recordings alone: a law bent past the reference is one straight line
   * through two points, certain and wrong (the GPT-2-like job from batch 4 and 8: the attention
   * gradient's buffer of 48 and 96 MiB is 132 MiB at 16, not 192; answered as fitted, -1.7 %
   * under max_split_size_mb:128). So every size the two share may stop at the reference's, as
   * that buffer did: each group of allocations of one size at the reference and one fitted size
   * with no member live at the predicted peak (scratch, a kernel's buffers) takes the range from
   * its size at the reference to the fitted one (pred_bend_ranges), replayed per setting like any
   * uncertain size (that buffer moves max_split_size_mb:128's peak by 2 %: refused there, the
   * default and expandable segments answered). Groups live at the peak stay as fitted (the
   * activations and states the peak is made of: were they to stop growing, the peak would drop
   * with them), and an allocation only the reference makes live at the peak stays a refusal
   * (whether the job makes it at the target is what is not known). */
  int unmatched_at_peak = 0;
  for (size_t j = 0; j < n; j++) unmatched_at_peak |= w->peak_unmatched[j] != 0;
  int two_drift = n < 3 && ((res->drift_allocs && !res->drift_spanned) || unmatched_at_peak);
  int drift_refusal = s == GM_OK && res->refused && minc >= PRED_DEFAULT_MIN_CONFIDENCE && res->confidence >= minc &&
                      res->drift_allocs && !res->drift_spanned;
  if (drift_refusal && n < 3 && !unmatched_at_peak) {
    s = pred_bend_ranges(w, ref, &res->bent, err);
    if (s == GM_OK) {
      two_drift = 0;
      size_t len = strlen(res->reason);
      char rv[64];
      pred_value_text(in[ref].value, rv, sizeof rv);
      snprintf(res->reason + len, sizeof res->reason - len,
               "; the %llu allocations the two share that are not live at the predicted peak may stop growing at "
               "their size at %s: each is an uncertain size from there to its fitted size",
               (unsigned long long)res->bent, rv);
    }
  }
  res->checkable = s == GM_OK && res->refused && !two_drift;
  m->have_sizes = s == GM_OK && !res->refused;
  m->checkable = s == GM_OK && res->checkable;
  return s;
}

gm_status_t pred_model_events(const pred_model_t *m, gmt_event_t **out, size_t *n, gm_err_t *err) {
  *out = NULL;
  *n = 0;
  if (!m->have_sizes) return gm_err_set(err, GM_ERR_INVAL, "no prediction made");
  const pred_rec_t *R = &m->w.rec[m->ref];
  gmt_event_t *e = malloc((R->n_ev ? R->n_ev : 1) * sizeof *e);
  if (!e) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < R->n_ev; i++) {
    e[i] = R->ev[i];
    e[i].size = m->w.ev_size[i];
  }
  *out = e;
  *n = R->n_ev;
  return GM_OK;
}

gm_status_t pred_model_header(const pred_model_t *m, const pred_opts_t *o, const pred_result_t *res, gmt_header_t *h,
                              gm_err_t *err) {
  gmt_header_init(h);
  if (!m->have_sizes) return gm_err_set(err, GM_ERR_INVAL, "no prediction made");
  return pred_write_header(&m->w, m->in, m->ref, o, res, h, err);
}

const gmt_header_t *pred_model_recording_header(const pred_model_t *m, size_t i) {
  return i < m->n ? &m->w.rec[i].header : NULL;
}

gm_status_t pred_model_write(pred_model_t *m, const pred_opts_t *o, const char *out_path, pred_result_t *res,
                             gm_err_t *err) {
  return pred_model_write_variant(m, o, PRED_SIZES_FITTED, out_path, res, err);
}

gm_status_t pred_model_write_variant(pred_model_t *m, const pred_opts_t *o, pred_variant_t v, const char *out_path,
                                     pred_result_t *res, gm_err_t *err) {
  if (!m->have_sizes && !m->checkable) return gm_err_set(err, GM_ERR_INVAL, "no prediction made");
  gmt_header_t h;
  gmt_header_init(&h);
  gm_status_t s = pred_write_header(&m->w, m->in, m->ref, o, res, &h, err);
  if (s == GM_OK && v != PRED_SIZES_FITTED)
    s = gmt_header_kv_set(&h, "predicted.sizes", v == PRED_SIZES_LOW ? "low end" : "high end", err);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.partial", out_path);
  if (s == GM_OK) s = pred_write_trace(&m->w, m->ref, &h, v, tmp, res, err);
  gmt_header_free(&h);
  if (s == GM_OK && rename(tmp, out_path) != 0)
    s = gm_err_set(err, GM_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, out_path, strerror(errno));
  if (s < 0) unlink(tmp);
  return s;
}

gm_status_t pred_run(const pred_input_t *in, size_t n, const pred_opts_t *o, const char *out_path, pred_result_t *res,
                     gm_err_t *err) {
  memset(res, 0, sizeof *res);
  if (!(o->target > 0)) return gm_err_set(err, GM_ERR_INVAL, "the target value must be positive");
  pred_model_t *m = NULL;
  gm_status_t s = pred_model_open(in, n, &m, res, err);
  if (s < 0 || res->refused) {
    /* the reference a refusal names: nearest the target, the larger on a tie */
    size_t ref = 0;
    for (size_t j = 1; j < n; j++) {
      double dj = fabs(in[j].value - o->target), dr = fabs(in[ref].value - o->target);
      if (dj < dr || (dj == dr && in[j].value > in[ref].value)) ref = j;
    }
    res->reference = ref;
    pred_model_close(m);
    return s;
  }
  char warning[sizeof res->warning];
  memcpy(warning, res->warning, sizeof warning);
  s = pred_model_at(m, o, res, err);
  memcpy(res->warning, warning, sizeof warning); /* pred_model_open's, kept for the caller */
  if (s == GM_OK && !res->refused) s = pred_model_write(m, o, out_path, res, err);
  pred_model_close(m);
  return s;
}
