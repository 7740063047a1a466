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
 * with that refusal: the answer is then a lower bound, and gpurec exits 3. */
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
#include "recorder/predict/pred_replay.h"
#include "recorder/predict/pred.h"

#define MAX_POINTS 256

typedef struct point {
  long k;                 /* value = k * step */
  int recorded;           /* the recording itself was replayed */
  int refused;
  double confidence;      /* of the prediction (1 for a recording) */
  uint64_t peak[PRED_LARGEST_MAX_POLICIES];   /* unconstrained */
  int fits[PRED_LARGEST_MAX_POLICIES];
  uint64_t capped[PRED_LARGEST_MAX_POLICIES];  /* where the peak is above the capacity: the replay within it */
  uint64_t retries[PRED_LARGEST_MAX_POLICIES]; /* ... and how often it freed its cache to fit (0: not capped) */
  int checked;                        /* the prediction's uncertain sizes were checked per setting */
  int set_refused[PRED_LARGEST_MAX_POLICIES];  /* ... and the ends of their range disagree on whether this setting fits */
  uint64_t lo[PRED_LARGEST_MAX_POLICIES], hi[PRED_LARGEST_MAX_POLICIES]; /* ... the peak's range */
  char reason[GM_ERR_MSG_MAX], advice[GM_ERR_MSG_MAX];
} point_t;

typedef enum { ANS_FITS = 0, ANS_NONE, ANS_REFUSED, ANS_AT_LEAST } ans_state_t;

typedef struct answer {
  ans_state_t state;
  long lo, hi;            /* largest k known to fit (0: none), smallest known not to (0: none) */
  int refused_at;         /* point index of the refusal, -1 */
} answer_t;

typedef struct search {
  const pred_largest_cfg_t *cfg;
  pred_model_t *model;
  const pred_input_t *in;
  size_t n_in;
  pred_rp_t *rp;           /* gpureplay, and the folder of the predicted traces */
  pred_rp_opts_t ro;       /* how every value is replayed (the capacity set per run) */
  char **specs;          /* the settings, in gpureplay's words (pred_rp_list) */
  int n_specs;
  uint64_t capacity;
  point_t *pts;
  int n_pts;
  int predictions, replays;
} search_t;

static double value_of(const search_t *s, long k) { return (double)k * s->cfg->step; }

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

/* ---- output ---------------------------------------------------------------------------------- */

static int by_value(const void *x, const void *y) {
  const point_t *a = x, *b = y;
  return (a->k > b->k) - (a->k < b->k);
}

static const point_t *find_point(const search_t *s, long k) {
  for (int i = 0; i < s->n_pts; i++)
    if (s->pts[i].k == k) return &s->pts[i];
  return NULL;
}

static void vtext(const search_t *s, long k, char *b, size_t n) { snprintf(b, n, "%.15g", value_of(s, k)); }

/* Why setting i was refused at point r: the prediction's own reason, or, where only this
 * setting was (the per-setting check), the range its uncertain sizes span. */
static const char *refusal_reason(const point_t *r, int i, char *buf, size_t n) {
  if (r->refused || !r->set_refused[i]) return r->reason;
  char b1[32], b2[32];
  snprintf(buf, n, "%s; replayed with those sizes at both ends of their plausible range, this setting's peak reserved "
                   "spans %s..%s, and the ends disagree on whether it fits", r->reason,
           gm_format_size(r->lo[i], b1, sizeof b1), gm_format_size(r->hi[i], b2, sizeof b2));
  return buf;
}

static void print_text(const search_t *s, const answer_t *ans, uint64_t device, uint64_t largest_rec_k) {
  const pred_largest_cfg_t *c = s->cfg;
  char b1[32], b2[32], b3[32], v[64];
  printf("fit on a device of %s: %s kept for memory outside the framework (--other), %.2f %% margin for the "
         "prediction's error (--margin): a setting fits at a %s when its replay completes within %s (short of "
         "memory, an allocator frees its cache and retries: its unconstrained peak may be above that)\n",
         gm_format_size(device, b1, sizeof b1), gm_format_size(c->other, b2, sizeof b2), 100 * c->margin, c->name,
         gm_format_size(s->capacity, b3, sizeof b3));
  printf("\nlargest %s that fits, per setting:\n", c->name);
  printf("%3s  %10s  %13s  %-44s  %s\n", "#", "largest", "peak there", "the next", "setting");
  for (int i = 0; i < s->n_specs; i++) {
    const answer_t *a = &ans[i];
    char largest[64] = "none", peak[32] = "-", next[GM_ERR_MSG_MAX + 128] = "";
    const point_t *lo = a->lo ? find_point(s, a->lo) : NULL, *hi = a->hi ? find_point(s, a->hi) : NULL;
    if (lo) {
      vtext(s, a->lo, largest, sizeof largest);
      gm_format_size(lo->capped[i], peak, sizeof peak); /* what it holds on the device */
    }
    if (a->state == ANS_AT_LEAST) {
      snprintf(next, sizeof next, "not tried (--max)");
    } else if (a->state == ANS_REFUSED) {
      const point_t *r = &s->pts[a->refused_at];
      vtext(s, r->k, v, sizeof v);
      snprintf(next, sizeof next, "%s: the prediction refused", v);
      if (lo) {
        memmove(largest + 3, largest, strlen(largest) + 1);
        memcpy(largest, ">= ", 3);
      } else snprintf(largest, sizeof largest, "refused");
    } else if (hi) {
      vtext(s, a->hi, v, sizeof v);
      snprintf(next, sizeof next, "%s does not fit (%s unconstrained)", v, gm_format_size(hi->peak[i], b1, sizeof b1));
    }
    printf("%3d  %10s  %13s  %-44s  %s\n", i + 1, largest, peak, next, s->specs[i]);
  }
  /* A setting that fits only by freeing its cache: its unconstrained peak is above the
   * capacity, and within it the allocator empties its cache and retries (PyTorch does the
   * same under a cap, each time a device-wide synchronisation): it fits, slower. */
  for (int i = 0; i < s->n_specs; i++) {
    const point_t *lo = ans[i].lo ? find_point(s, ans[i].lo) : NULL;
    if (lo && lo->peak[i] > s->capacity) {
      char flushes[96] = "";
      vtext(s, ans[i].lo, v, sizeof v);
      if (lo->retries[i])
        snprintf(flushes, sizeof flushes, ", emptying it whole %llu time%s", (unsigned long long)lo->retries[i],
                 lo->retries[i] == 1 ? "" : "s");
      printf("#%d fits at %s only by freeing cached blocks%s: unconstrained it would hold %s, above the %s it may use; "
             "within that it holds %s (the real allocator does the same under a cap, each time a device "
             "synchronisation)\n",
             i + 1, v, flushes, gm_format_size(lo->peak[i], b1, sizeof b1), gm_format_size(s->capacity, b2, sizeof b2),
             gm_format_size(lo->capped[i], b3, sizeof b3));
    }
  }
  for (int i = 0; i < s->n_specs; i++)
    if (ans[i].state == ANS_REFUSED) {
      char why[2 * GM_ERR_MSG_MAX];
      printf("refused at %.15g for #%d: %s\nto answer: %s\n", value_of(s, s->pts[ans[i].refused_at].k), i + 1,
             refusal_reason(&s->pts[ans[i].refused_at], i, why, sizeof why), s->pts[ans[i].refused_at].advice);
    }
  long best = 0;
  for (int i = 0; i < s->n_specs; i++)
    if (ans[i].lo > best && ans[i].state != ANS_REFUSED) best = ans[i].lo;
  if (best && largest_rec_k)
    printf("(the largest answer is %.1fx the largest recording: the nearer the recordings, the surer the answer)\n",
           (double)best / (double)largest_rec_k);
  printf("\npeak reserved by %s, per setting # (unconstrained; recorded: the recording replayed; *: does not fit; ~: fits "
         "by freeing its cache; ?: the uncertain sizes' ends disagree):\n", c->name);
  printf("%10s  %-10s  %10s", c->name, "source", "confidence");
  for (int i = 0; i < s->n_specs; i++) printf("  %11d", i + 1);
  printf("\n");
  for (int j = 0; j < s->n_pts; j++) {
    const point_t *p = &s->pts[j];
    vtext(s, p->k, v, sizeof v);
    printf("%10s  %-10s  %9.1f%%", v, p->recorded ? "recorded" : p->refused ? "refused" : "predicted", 100 * p->confidence);
    for (int i = 0; i < s->n_specs; i++) {
      char cell[48];
      if (p->refused) snprintf(cell, sizeof cell, "-");
      else snprintf(cell, sizeof cell, "%s%s%s", p->set_refused[i] ? "?" : p->fits[i] ? "" : "*",
                    p->peak[i] > s->capacity && p->fits[i] ? "~" : "", gm_format_size(p->peak[i], b1, sizeof b1));
      printf("  %11s", cell);
    }
    printf("\n");
  }
}

static void print_csv(const search_t *s, const answer_t *ans) {
  printf("setting,value,source,confidence,peak_reserved_bytes,fits,answer\n");
  for (int i = 0; i < s->n_specs; i++)
    for (int j = 0; j < s->n_pts; j++) {
      const point_t *p = &s->pts[j];
      const char *answer = ans[i].lo == p->k && ans[i].state != ANS_REFUSED ? (ans[i].state == ANS_AT_LEAST ? "at_least" : "largest")
                           : ans[i].state == ANS_REFUSED && ans[i].refused_at == j ? "refused"
                                                                                  : "";
      /* a spec holds commas (pytorch:a:1,b:2): quoted */
      printf("\"%s\",%.15g,%s,%.4f,", s->specs[i], value_of(s, p->k),
             p->recorded ? "recorded" : p->refused ? "refused" : "predicted", p->confidence);
      if (p->refused) printf(",,%s\n", answer);
      else printf("%llu,%d,%s\n", (unsigned long long)p->peak[i], p->fits[i], answer);
    }
}

static const char *state_name(ans_state_t st) {
  static const char *const names[] = {"fits", "none", "refused", "at_least"};
  return names[st];
}

/* A JSON string (RFC 8259 escapes; bytes >= 0x80 pass as they are: the inputs are UTF-8). */
static void jstr(const char *s) {
  putchar('"');
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if (*c == '\n') fputs("\\n", stdout);
    else if (*c < 0x20) printf("\\u%04x", *c);
    else putchar(*c);
  }
  putchar('"');
}

/* One object: the inputs, the answer per setting, the curve (every point, every setting). */
static void print_json(const search_t *s, const answer_t *ans, uint64_t device) {
  const pred_largest_cfg_t *c = s->cfg;
  printf("{\"name\": ");
  jstr(c->name);
  printf(", \"device_bytes\": %llu, \"other_bytes\": %llu, \"margin\": %.6g, \"capacity_bytes\": %llu, \"step\": %.15g,\n",
         (unsigned long long)device, (unsigned long long)c->other, c->margin, (unsigned long long)s->capacity, c->step);
  printf(" \"inputs\": [");
  for (size_t j = 0; j < s->n_in; j++) {
    printf("%s{\"path\": ", j ? ", " : "");
    jstr(s->in[j].path);
    printf(", \"value\": %.15g}", s->in[j].value);
  }
  printf("],\n \"settings\": [\n");
  for (int i = 0; i < s->n_specs; i++) {
    const answer_t *a = &ans[i];
    const point_t *lo = a->lo ? find_point(s, a->lo) : NULL;
    printf("  {\"policy\": ");
    jstr(s->specs[i]);
    printf(", \"state\": \"%s\", \"largest\": ", state_name(a->state));
    if (lo)
      printf("%.15g, \"peak_reserved_at_largest\": %llu, \"peak_reserved_within_capacity_at_largest\": %llu, "
             "\"cache_flushes_at_largest\": %llu", value_of(s, a->lo), (unsigned long long)lo->peak[i],
             (unsigned long long)lo->capped[i], (unsigned long long)lo->retries[i]);
    else printf("null, \"peak_reserved_at_largest\": null");
    if (a->hi) printf(", \"first_not_fitting\": %.15g", value_of(s, a->hi));
    else printf(", \"first_not_fitting\": null");
    if (a->state == ANS_REFUSED) {
      const point_t *r = &s->pts[a->refused_at];
      char why[2 * GM_ERR_MSG_MAX];
      printf(", \"refused_at\": %.15g, \"reason\": ", value_of(s, r->k));
      jstr(refusal_reason(r, i, why, sizeof why));
      printf(", \"advice\": ");
      jstr(r->advice);
    }
    printf("}%s\n", i + 1 < s->n_specs ? "," : "");
  }
  printf(" ],\n \"points\": [\n");
  for (int j = 0; j < s->n_pts; j++) {
    const point_t *p = &s->pts[j];
    printf("  {\"value\": %.15g, \"source\": \"%s\", \"confidence\": %.4f", value_of(s, p->k),
           p->recorded ? "recorded" : p->refused ? "refused" : "predicted", p->confidence);
    if (!p->refused) {
      printf(", \"peak_reserved_bytes\": {");
      for (int i = 0; i < s->n_specs; i++) {
        printf("%s", i ? ", " : "");
        jstr(s->specs[i]);
        printf(": %llu", (unsigned long long)p->peak[i]);
      }
      printf("}, \"fits\": {");
      for (int i = 0; i < s->n_specs; i++) {
        printf("%s", i ? ", " : "");
        jstr(s->specs[i]);
        printf(": %s", p->fits[i] ? "true" : "false");
      }
      printf("}");
      if (p->checked) { /* the uncertain sizes' range, per setting; refused where its ends disagree */
        printf(", \"checked\": {");
        for (int i = 0; i < s->n_specs; i++) {
          printf("%s", i ? ", " : "");
          jstr(s->specs[i]);
          printf(": {\"low\": %llu, \"high\": %llu, \"refused\": %s}", (unsigned long long)p->lo[i],
                 (unsigned long long)p->hi[i], p->set_refused[i] ? "true" : "false");
        }
        printf("}");
      }
    }
    printf("}%s\n", j + 1 < s->n_pts ? "," : "");
  }
  printf(" ]}\n");
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
   * recording's framework */
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
  if (strcmp(c->format, "csv") == 0) print_csv(s, ans);
  else if (strcmp(c->format, "json") == 0) print_json(s, ans, device);
  else print_text(s, ans, device, (uint64_t)k0);
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
  uint64_t device = rc ? 0 : device_of(&s, c);
  if (!rc && !device) rc = 1;
  if (!rc) rc = search_and_print(&s, c, device, &t0, &err);
  free(s.pts);
  pred_model_close(s.model);
  pred_rp_free_list(s.specs, s.n_specs);
  pred_rp_close(s.rp); /* the folder goes, whatever happened */
  return rc;
}
