/* pred_largest.c: `gpurec predict A.zst@4 B.zst@8 --fit=40GiB`: the largest value of the job
 * (batch, sequence length, image size) that fits a device, per allocator setting, and the
 * peak reserved against the value with the recordings as points.
 *
 * Method: the recordings are loaded and aligned once (pred_model_*); at each value the search
 * needs, the prediction is written to a private temporary trace and the gpureplay binary
 * replays it under every setting at once (pred_replay.c: the recorder links no replayer and
 * knows no policies; the settings themselves are gpureplay's answer to --list-policies). A setting fits at a value when its replay
 * completes without an out-of-memory within the capacity: the device minus the memory that is
 * not the framework's (--other: CUDA context, libraries), divided by 1 + the margin for the
 * prediction's own error (--margin). The replay is unconstrained first (the curve's peak); a
 * setting whose peak is above the capacity is replayed again within it, because an allocator
 * short of memory frees its cache and retries, as the real one does under a cap. At the
 * recorded values the recordings themselves are replayed. The search per setting: from the
 * largest recording, doubling while it fits, then bisection on the grid of --step; it assumes
 * that a value that does not fit is not followed by a larger one that does (peak reserved
 * grows with the value), so it may answer below the true largest, never above it under the
 * margin. A value where the prediction refuses (low confidence) ends the setting's search
 * with that refusal: the answer is then a lower bound, and gpurec exits 3. The answer printed
 * (text, CSV, JSON) is pred_largest_out.c. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/gm_base.h"
#include "recorder/predict/pred_settings.h"
#include "recorder/predict/pred_largest.h"
#include "recorder/predict/pred_largest_internal.h"
#include "recorder/predict/pred_replay.h"
#include "recorder/predict/pred.h"

static int recorded_index(const search_t *s, long k) {
  for (size_t j = 0; j < s->n_in; j++)
    if (fabs(s->in[j].value - value_of(s, k)) <= 1e-9 * s->in[j].value) return (int)j;
  return -1;
}

/* Replay every setting over the trace at path: unconstrained, then within the capacity where
 * the peak is above it. */
static gm_status_t replay_point(search_t *s, const char *path, const char *name, point_t *p, gm_err_t *err) {
  pred_rp_result_t res[PRED_LARGEST_MAX_POLICIES];
  pred_rp_opts_t o = s->ro;
  o.capacity = 0;
  gm_status_t st = pred_rp_replay(s->rp, path, name, &o, (const char *const *)s->specs, s->n_specs, res, err);
  s->replays += s->n_specs;
  const char *again[PRED_LARGEST_MAX_POLICIES];
  int idx[PRED_LARGEST_MAX_POLICIES], m = 0;
  for (int i = 0; st == GM_OK && i < s->n_specs; i++) {
    p->peak[i] = p->capped[i] = res[i].peak_reserved_bytes;
    p->retries[i] = 0;
    p->fits[i] = res[i].ooms == 0 && p->peak[i] <= s->capacity;
    if (!p->fits[i] && res[i].ooms == 0) {
      again[m] = s->specs[i];
      idx[m++] = i;
    }
  }
  if (st == GM_OK && m) {
    o.capacity = s->capacity;
    st = pred_rp_replay(s->rp, path, name, &o, again, m, res, err);
    s->replays += m;
    for (int i = 0; st == GM_OK && i < m; i++) {
      p->fits[idx[i]] = res[i].ooms == 0;
      p->capped[idx[i]] = res[i].peak_reserved_bytes;
      p->retries[idx[i]] = res[i].alloc_retries;
    }
  }
  return st;
}

/* A prediction whose uncertain sizes might matter (pred.h, checkable): the fitted sizes'
 * replay is the point; the two ends of the sizes' range are replayed as well (as
 * pred_settings.c does for --at). What --fit asks of a value is whether it fits: a setting is
 * refused at this value only when the three replays disagree on that; where they agree, the
 * uncertain sizes do not change the answer, however far they move the peak. */
static gm_status_t replay_checked(search_t *s, const pred_opts_t *po, pred_result_t *r, point_t *p, gm_err_t *err) {
  static const pred_variant_t variants[3] = {PRED_SIZES_FITTED, PRED_SIZES_LOW, PRED_SIZES_HIGH};
  static const char *const what[3] = {"", " (uncertain sizes low)", " (uncertain sizes high)"};
  point_t *q = calloc(1, sizeof *q);
  if (!q) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  gm_status_t st = GM_OK;
  p->checked = 1;
  for (int v = 0; v < 3 && st == GM_OK; v++) {
    const char *path = pred_rp_path(s->rp, "pred.zst");
    char name[96];
    snprintf(name, sizeof name, "the prediction at %.15g%s", po->target, what[v]);
    st = pred_model_write_variant(s->model, po, variants[v], path, r, err);
    if (st < 0) st = gm_err_wrap(err, "writing %s", name);
    if (st == GM_OK) st = replay_point(s, pred_rp_path(s->rp, "pred.zst"), name, v ? q : p, err);
    for (int i = 0; st == GM_OK && i < s->n_specs; i++) {
      if (!v) {
        p->lo[i] = p->hi[i] = p->peak[i];
        continue;
      }
      if (q->peak[i] < p->lo[i]) p->lo[i] = q->peak[i];
      if (q->peak[i] > p->hi[i]) p->hi[i] = q->peak[i];
      /* the answer here is whether it fits: refused only where the ends disagree */
      if (q->fits[i] != p->fits[i]) p->set_refused[i] = 1;
    }
  }
  free(q);
  return st;
}

/* The point at k (made once): the recording's replay, or the prediction's, or a refusal. */
static gm_status_t point_at(search_t *s, long k, int *out, gm_err_t *err) {
  for (int i = 0; i < s->n_pts; i++)
    if (s->pts[i].k == k) {
      *out = i;
      return GM_OK;
    }
  if (s->n_pts == MAX_POINTS) return gm_err_set(err, GM_ERR_INVAL, "the search needed more than %d values", MAX_POINTS);
  point_t *p = &s->pts[s->n_pts];
  memset(p, 0, sizeof *p);
  p->k = k;
  p->confidence = 1;
  gm_status_t st;
  const char *path, *name;
  char what[64];
  int rec = recorded_index(s, k);
  if (rec >= 0) {
    p->recorded = 1;
    path = name = s->in[rec].path;
  } else {
    pred_opts_t po = {value_of(s, k), s->cfg->min_confidence, NULL};
    pred_result_t r;
    st = pred_model_at(s->model, &po, &r, err);
    s->predictions++;
    if (st < 0) return st;
    p->confidence = r.confidence;
    if (r.refused && r.checkable) {
      snprintf(p->reason, sizeof p->reason, "%s", r.reason);
      snprintf(p->advice, sizeof p->advice, "%s", r.advice);
      st = replay_checked(s, &po, &r, p, err);
      if (st < 0) return st;
      *out = s->n_pts++;
      return GM_OK;
    }
    if (r.refused) {
      p->refused = 1;
      snprintf(p->reason, sizeof p->reason, "%s", r.reason);
      snprintf(p->advice, sizeof p->advice, "%s", r.advice);
      *out = s->n_pts++;
      return GM_OK;
    }
    /* one file for every value, replaced each time: the folder never holds more than one */
    path = pred_rp_path(s->rp, "pred.zst");
    snprintf(what, sizeof what, "the prediction at %.15g", value_of(s, k));
    name = what;
    st = pred_model_write(s->model, &po, path, &r, err);
    if (st < 0) return gm_err_wrap(err, "writing %s", what);
  }
  st = replay_point(s, path, name, p, err);
  if (st < 0) return st;
  *out = s->n_pts++;
  return GM_OK;
}

/* The largest k that fits for setting i (answer_t says how sure). */
static gm_status_t search_setting(search_t *s, int i, long k0, long kmax, answer_t *a, gm_err_t *err) {
  memset(a, 0, sizeof *a);
  a->refused_at = -1;
  long k = k0;
  int pi;
  for (;;) { /* doubling up from the largest recording while it fits */
    gm_status_t st = point_at(s, k, &pi, err);
    if (st < 0) return st;
    if (s->pts[pi].refused || s->pts[pi].set_refused[i]) {
      a->state = ANS_REFUSED;
      a->refused_at = pi;
      return GM_OK;
    }
    if (!s->pts[pi].fits[i]) {
      a->hi = k;
      break;
    }
    a->lo = k;
    if (k >= kmax) {
      a->state = ANS_AT_LEAST;
      return GM_OK;
    }
    k = 2 * k > kmax ? kmax : 2 * k;
  }
  while (a->hi - a->lo > 1) { /* bisection between what fits and what does not */
    long mid = a->lo + (a->hi - a->lo) / 2;
    gm_status_t st = point_at(s, mid, &pi, err);
    if (st < 0) return st;
    if (s->pts[pi].refused || s->pts[pi].set_refused[i]) {
      a->state = ANS_REFUSED;
      a->refused_at = pi;
      return GM_OK;
    }
    if (s->pts[pi].fits[i]) a->lo = mid;
    else a->hi = mid;
  }
  a->state = a->lo ? ANS_FITS : ANS_NONE;
  return GM_OK;
}

/* ---- the order of the curve ------------------------------------------------------------------ */

static int by_value(const void *x, const void *y) {
  const point_t *a = x, *b = y;
  return (a->k > b->k) - (a->k < b->k);
}

/* ---- the command --------------------------------------------------------------------------- */

/* A setting gpureplay rejects is a usage mistake, as gpurec's own options are. */
static int predict_fit_usage_error(const char *msg) {
  fprintf(stderr, "gpurec: error: %s\ntry 'gpurec predict --help'\n", msg);
  return 2;
}

/* gpureplay found, its folder made, the settings listed. Returns an exit code (0: go on). */
static int open_replayer(search_t *s, const pred_largest_cfg_t *c, gm_err_t *err) {
  char tool[PATH_MAX];
  const char *from = NULL;
  if (!pred_rp_find(tool, sizeof tool, &from)) {
    if (strcmp(from, "$GPUREPLAY") == 0)
      fprintf(stderr, "gpurec: error: --fit replays through gpureplay: $GPUREPLAY '%s' is not an executable file\n", tool);
    else
      fprintf(stderr, "gpurec: error: --fit replays through gpureplay, which was not found (beside gpurec, "
                      "../replay/, PATH): install it beside gpurec (tools/install) or set GPUREPLAY\n");
    return 1;
  }
  if (pred_rp_open(tool, &s->rp, err) < 0) {
    fprintf(stderr, "gpurec: error: --fit: %s\n", err->msg);
    return 1;
  }
  /* the user's settings in gpureplay's words (checked by it), or the grid of the first
   * recording's framework (less other frameworks' allocators: pred_settings_own, once the
   * recordings are read) */
  gm_status_t st = pred_rp_list(s->rp, s->in[0].path, c->policies, c->n_policies, c->device, &s->specs, &s->n_specs, err);
  if (st == GM_ERR_INVAL) return predict_fit_usage_error(err->msg);
  if (st < 0) {
    fprintf(stderr, "gpurec: error: cannot answer --fit: %s\n", err->msg);
    return 1;
  }
  if (s->n_specs > PRED_LARGEST_MAX_POLICIES) {
    fprintf(stderr, "gpurec: error: --fit: gpureplay lists %d settings, more than the %d --fit answers for\n",
            s->n_specs, PRED_LARGEST_MAX_POLICIES);
    return 1;
  }
  return 0;
}

/* The search and its answer on stdout. Returns the exit code. */
static int search_and_print(search_t *s, const pred_largest_cfg_t *c, uint64_t device, const struct timespec *t0, gm_err_t *err) {
  const pred_input_t *in = s->in;
  size_t n = s->n_in;
  struct timespec t1;
  s->capacity = (uint64_t)floor((double)(device - c->other) / (1.0 + c->margin));
  s->ro.device_memory = device; /* what fractions and thresholds are shares of */
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  s->ro.jobs = ncpu > 0 ? (int)ncpu : 1;
  gm_status_t st = GM_OK;
  s->pts = calloc(MAX_POINTS, sizeof *s->pts);
  answer_t ans[PRED_LARGEST_MAX_POLICIES];
  if (!s->pts) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  double vmax = 0;
  for (size_t j = 0; j < n; j++) vmax = in[j].value > vmax ? in[j].value : vmax;
  long k0 = (long)floor(vmax / c->step + 1e-9);
  if (k0 < 1) k0 = 1;
  long kmax = (long)floor(c->max / c->step + 1e-9);
  if (kmax < k0) kmax = k0;
  for (int i = 0; st == GM_OK && i < s->n_specs; i++) st = search_setting(s, i, k0, kmax, &ans[i], err);
  /* every recording is a point of the curve too */
  for (size_t j = 0; st == GM_OK && j < n; j++) {
    double k = in[j].value / c->step;
    int pi;
    if (fabs(k - floor(k + 0.5)) < 1e-9 && k >= 1) st = point_at(s, (long)floor(k + 0.5), &pi, err);
  }
  if (st < 0) {
    fprintf(stderr, "gpurec: error: cannot answer --fit: %s\n", err->msg);
    return 1;
  }
  /* sorted by value: answers refer to points by k */
  for (int i = 0; i < s->n_specs; i++) ans[i].refused_at = ans[i].refused_at >= 0 ? (int)s->pts[ans[i].refused_at].k : -1;
  if (s->n_pts) qsort(s->pts, (size_t)s->n_pts, sizeof *s->pts, by_value);
  for (int i = 0; i < s->n_specs; i++)
    if (ans[i].refused_at >= 0)
      for (int j = 0; j < s->n_pts; j++)
        if (s->pts[j].k == ans[i].refused_at) {
          ans[i].refused_at = j;
          break;
        }
  if (strcmp(c->format, "csv") == 0) pred_largest_print_csv(s, ans);
  else if (strcmp(c->format, "json") == 0) pred_largest_print_json(s, ans, device);
  else pred_largest_print_text(s, ans, device, (uint64_t)k0);
  int refused = 0;
  for (int i = 0; i < s->n_specs; i++) refused |= ans[i].state == ANS_REFUSED;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (!c->quiet)
    fprintf(stderr, "gpurec: --fit: %d values (%d predicted), %d replays, %.2f s%s\n", s->n_pts, s->predictions, s->replays,
            (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec),
            refused ? "; the prediction refused at a value a setting needed: its answer is a lower bound (exit 3)" : "");
  if (gm_stdout_close(err) < 0) {
    fprintf(stderr, "gpurec: error: %s\n", err->msg);
    return 1;
  }
  return refused ? 3 : 0;
}

/* The device's memory the answer is for (--fit=SIZE, or the recordings' own); 0 after an error line. */
static uint64_t device_of(const search_t *s, const pred_largest_cfg_t *c) {
  uint64_t device = c->device;
  if (!device) { /* --fit=recorded: the recordings' own GPU, as the frameworks see it */
    const gmt_header_t *h = pred_model_recording_header(s->model, 0);
    const char *mi = gmt_header_kv_get(h, "gpu_mem_info_total");
    if (!mi || gm_parse_u64(mi, &device, NULL) < 0) device = h->gpu_total_mem;
    if (!device) {
      fprintf(stderr, "gpurec: error: --fit=recorded: the recordings do not say how much memory their GPU had; "
                      "give the size, e.g. --fit=79GiB\n");
      return 0;
    }
  }
  if (c->other >= device) {
    char b1[32], b2[32];
    fprintf(stderr, "gpurec: error: --other=%s leaves nothing of the device's %s to the framework\n",
            gm_format_size(c->other, b1, sizeof b1), gm_format_size(device, b2, sizeof b2));
    return 0;
  }
  return device;
}

int pred_largest(const pred_largest_cfg_t *c, const pred_input_t *in, size_t n) {
  gm_err_t err;
  gm_err_clear(&err);
  struct timespec t0; /* what --fit cost, the recordings' loading included */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  search_t s;
  memset(&s, 0, sizeof s);
  s.cfg = c;
  s.in = in;
  s.n_in = n;
  int rc = open_replayer(&s, c, &err); /* before the recordings are read: a bad setting is said at once */
  pred_result_t res;
  if (!rc && pred_model_open(in, n, &s.model, &res, &err) < 0) {
    fprintf(stderr, "gpurec: error: cannot predict: %s\n", err.msg);
    rc = 1;
  } else if (!rc && res.refused) {
    fprintf(stderr, "gpurec: cannot predict: %s\ngpurec: %s\n", res.reason, res.advice);
    rc = 3;
  }
  if (!rc && res.warning[0] && !c->same_job && !c->quiet) fprintf(stderr, "gpurec: warning: %s\n", res.warning);
  if (!rc && !c->n_policies) pred_settings_own(s.specs, &s.n_specs, pred_model_recording_header(s.model, 0));
  if (!rc) pred_runs_check(s.rp, s.model, in, n, c->quiet, NULL, 0);
  uint64_t device = rc ? 0 : device_of(&s, c);
  if (!rc && !device) rc = 1;
  if (!rc) rc = search_and_print(&s, c, device, &t0, &err);
  free(s.pts);
  pred_model_close(s.model);
  pred_rp_free_list(s.specs, s.n_specs);
  pred_rp_close(s.rp); /* the folder goes, whatever happened */
  return rc;
}
