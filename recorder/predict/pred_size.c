/* pred_size.c: one prediction sized (pred.c's model calls it at each target). Every reference
 * allocation takes the size fitted through its partners in the other recordings (pred_fit.c;
 * through the nearest of them alone where the farthest leaves their law: law_from_near), with
 * why (certain, carried from recordings that lack it, inconsistent) and, where uncertain, the
 * range of sizes it may plausibly take; then pass 1 over the reference's events: the size of
 * every output event, the predicted peak of live requested bytes and what it is made of (the
 * confidence). pred.c's opening paragraph says which allocations are carried and why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/predict/pred_internal.h"

/* ---- address map: (device, address) of a live allocation -> its index ----------------------- */

typedef struct amap {
  uint64_t *key; /* 0 = empty; key = addr ^ device << 56, + 1 */
  size_t *val;
  size_t cap, n;
} amap_t;

static uint64_t akey(const gmt_event_t *e) { return (e->addr ^ ((uint64_t)e->device << 56)) + 1; }
static size_t aslot(uint64_t k, size_t cap) { return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1); }

static int amap_put(amap_t *m, uint64_t k, size_t v) {
  if (2 * (m->n + 1) > m->cap) {
    size_t nc = m->cap ? 2 * m->cap : 4096;
    uint64_t *nk = calloc(nc, sizeof *nk);
    size_t *nv = malloc(nc * sizeof *nv);
    if (!nk || !nv) {
      free(nk);
      free(nv);
      return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->key[i]) continue;
      size_t s = aslot(m->key[i], nc);
      while (nk[s]) s = (s + 1) & (nc - 1);
      nk[s] = m->key[i];
      nv[s] = m->val[i];
    }
    free(m->key);
    free(m->val);
    m->key = nk;
    m->val = nv;
    m->cap = nc;
  }
  size_t s = aslot(k, m->cap);
  while (m->key[s] && m->key[s] != k) s = (s + 1) & (m->cap - 1);
  if (!m->key[s]) m->n++;
  m->key[s] = k;
  m->val[s] = v;
  return 0;
}

static size_t amap_find(const amap_t *m, uint64_t k) {
  if (!m->cap) return SIZE_MAX;
  for (size_t s = aslot(k, m->cap); m->key[s]; s = (s + 1) & (m->cap - 1))
    if (m->key[s] == k) return s;
  return SIZE_MAX;
}

static void amap_del(amap_t *m, size_t s) { /* backward-shift deletion (linear probing) */
  size_t mask = m->cap - 1, i = s;
  m->key[i] = 0;
  m->n--;
  for (size_t j = (i + 1) & mask; m->key[j]; j = (j + 1) & mask) {
    size_t h = aslot(m->key[j], m->cap);
    /* move j into the hole i unless its home h lies cyclically in (i, j] */
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      m->key[i] = m->key[j];
      m->val[i] = m->val[j];
      m->key[j] = 0;
      i = j;
    }
  }
}

/* The sizes an uncertain allocation may plausibly take at the target: from the smallest it
 * was at any recording (a workspace that stops growing, a buffer the job makes at every value
 * alike) to the largest of its recorded sizes, each scaled in proportion to the value (a size that
 * grows as fast as the value itself: faster than any affine law with a non-negative fixed
 * part, the mark of a tensor), or to its square where the job has sizes quadratic in the
 * value (the sequence length: attention scores), and never narrower than the fitted size. The per-setting check
 * (pred_settings.c) replays both ends: where they move a setting's peak reserved by no more
 * than its tolerance, the uncertain sizes do not matter to that setting. */
static void plausible_range(const double *v, const uint64_t *s, size_t np, double target, uint64_t granule,
                            int power, uint64_t fitted, uint64_t *lo, uint64_t *hi) {
  uint64_t l = fitted, h = fitted;
  /* a size that grew faster than the value between two recordings is scaled with its square:
   * a polynomial of degree two with no negative term grows no faster than that (a parabola seen
   * through two points, a workspace that grows with an image's area) */
  for (size_t j = 0; j < np && power < 2; j++)
    for (size_t k = 0; k < np; k++)
      if (v[k] > v[j] && s[j] && (double)s[k] > (double)s[j] * (v[k] / v[j]) * 1.001 + (double)granule) power = 2;
  for (size_t j = 0; j < np; j++) {
    if (s[j] < l) l = s[j];
    if (s[j] > h) h = s[j];
    double scaled = (double)s[j] * pow(target / v[j], power);
    if (scaled > 1.8e19) scaled = 1.8e19;
    uint64_t g = granule ? granule : 1, sc = (uint64_t)ceil(scaled / (double)g - 1e-6) * g;
    if (sc > h) h = sc;
    if (sc && sc < l) l = sc;
  }
  *lo = l;
  *hi = h;
}

/* Whether reference allocation i is made at every recording nearer the target than each
 * recording that lacks it: the job began making it at a value between those and the ones
 * nearer, and makes it towards the target (seen in the sequence length on two GPT-2 jobs:
 * 144 buffers proportional to the length at 256 and 384, none at 128; fitted through 256 and
 * 384 they give the real peak reserved at 768 to the byte). Its size is then known as well
 * as a prediction from the recordings that make it would know it (the caller asks for two of
 * them and a tensor's law through them). Where the recordings that lack it sit between the
 * ones that make it and the target, whether the job makes it at the target is not known. */
static int made_from_near(const pred_work_t *w, size_t ref, size_t i, double target) {
  double far_made = 0, near_lacking = INFINITY;
  for (size_t j = 0; j < w->n; j++) {
    double d = fabs(w->rec[j].value - target);
    int made = j == ref || w->match[j][i] >= 0;
    if (made && d > far_made) far_made = d;
    if (!made && d < near_lacking) near_lacking = d;
  }
  return far_made < near_lacking;
}

/* The law of reference allocation i through the recordings nearest the target alone, where
 * its points at every recording fit none (*f left inconsistent otherwise). The recordings are
 * taken by distance from the target, the farthest left out one at a time while two remain:
 * where the points of those nearer fit a tensor's law and the job makes the same allocations at
 * the two nearest (no drift: a law bent between them would look straight), the change lies
 * behind them, between the values the job has left (seen on the JAX job: XLA plans the step's
 * temporary buffer otherwise at batch 2048, 64 MiB where the line through 4096 and 8192, 192 and
 * 352 MiB, gives 112). Its size is then known as well as a prediction from the nearer
 * recordings alone would know it, and the recording that leaves the law stops counting
 * against it (as made_from_near does for one that lacks the allocation). */
static void law_from_near(const pred_work_t *w, size_t ref, size_t i, double target, uint64_t granule, int no_drift,
                          pred_fit_t *f) {
  f->consistent = 0;
  if (!no_drift || w->n < 3) return;
  size_t order[PRED_MAX_INPUTS];
  for (size_t j = 0; j < w->n; j++) order[j] = j;
  for (size_t a = 1; a < w->n; a++) /* insertion sort by distance from the target */
    for (size_t b = a; b > 0 && fabs(w->rec[order[b]].value - target) < fabs(w->rec[order[b - 1]].value - target); b--) {
      size_t t = order[b];
      order[b] = order[b - 1];
      order[b - 1] = t;
    }
  double v[PRED_MAX_INPUTS];
  uint64_t s[PRED_MAX_INPUTS];
  for (size_t k = 0; k < w->n; k++) {
    size_t j = order[k];
    int64_t m = j == ref ? (int64_t)i : w->match[j][i];
    v[k] = w->rec[j].value;
    s[k] = w->rec[j].ev[w->rec[j].alloc_ev[m]].size;
  }
  for (size_t keep = w->n - 1; keep >= 2; keep--) {
    /* the change must lie between the farthest kept recording and the nearest left out: no
     * tensor's law joins those two (where one does, the law may as well bend between the kept
     * ones: the GPT-2-like job's backward buffer, 36, 72, 132.75 MiB at batch 4, 8, 16, is
     * proportional from 4 to 8 and a line through 8 and 16 that overshoots the real run at 64) */
    pred_fit_t cut;
    pred_fit_points(v + keep - 1, s + keep - 1, 2, granule, target, &cut);
    if (cut.consistent) continue;
    pred_fit_points(v, s, keep, granule, target, f);
    if (f->consistent) return;
  }
}

/* Sizes of every reference allocation. */
gm_status_t pred_size_fit(pred_work_t *w, size_t ref, double target, uint64_t granule, pred_result_t *res, gm_err_t *err) {
  const pred_rec_t *R = &w->rec[ref];
  w->size = malloc((R->n_alloc ? R->n_alloc : 1) * sizeof *w->size);
  w->why = malloc(R->n_alloc ? R->n_alloc : 1);
  w->missing_in = malloc(R->n_alloc ? R->n_alloc : 1);
  w->lo = malloc((R->n_alloc ? R->n_alloc : 1) * sizeof *w->lo);
  w->hi = malloc((R->n_alloc ? R->n_alloc : 1) * sizeof *w->hi);
  if (!w->size || !w->why || !w->missing_in || !w->lo || !w->hi) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  double v[PRED_MAX_INPUTS];
  uint64_t s[PRED_MAX_INPUTS];
  int quadratic_law = 0; /* a size matched everywhere follows a quadratic law of the value */
  size_t near = ref == 0 ? 1 : 0; /* the recording nearest the target after the reference */
  for (size_t j = 0; j < w->n; j++)
    if (j != ref && fabs(w->rec[j].value - target) < fabs(w->rec[near].value - target)) near = j;
  int no_drift = pred_drift_count(w, ref, near) == 0;
  for (size_t i = 0; i < R->n_alloc; i++) {
    size_t np = 0, missing = SIZE_MAX;
    for (size_t j = 0; j < w->n; j++) {
      const pred_rec_t *r = &w->rec[j];
      int64_t m = j == ref ? (int64_t)i : w->match[j][i];
      if (m < 0) {
        if (missing == SIZE_MAX) missing = j;
        continue;
      }
      v[np] = r->value;
      s[np++] = r->ev[r->alloc_ev[m]].size;
    }
    pred_fit_t f;
    pred_fit_points(v, s, np, granule, target, &f);
    w->size[i] = f.degree ? pred_fit_eval(&f, target, granule) : R->ev[R->alloc_ev[i]].size;
    if (f.degree == 2) res->quadratic = 1;
    /* a square that matters: attention scores in the sequence length, not a bent line */
    if (f.degree == 2 && f.consistent && missing == SIZE_MAX && f.c2 > 0 && 4 * f.c2 * target * target >= (double)w->size[i])
      quadratic_law = 1;
    if (missing != SIZE_MAX && made_from_near(w, ref, i, target) && np >= 2 && f.consistent) {
      /* made at every recording from some value on towards the target, its size through them
       * a tensor's law: as certain as in a prediction from those recordings alone */
      w->why[i] = CERTAIN;
      res->carried++;
      res->consistent++;
    } else if (missing != SIZE_MAX) {
      w->why[i] = UNMATCHED;
      w->missing_in[i] = (uint8_t)missing;
      res->carried++;
      if (!f.consistent) w->size[i] = R->ev[R->alloc_ev[i]].size > w->size[i] ? R->ev[R->alloc_ev[i]].size : w->size[i];
    } else {
      res->matched_all++;
      if (!f.consistent) {
        pred_fit_t nf;
        law_from_near(w, ref, i, target, granule, no_drift, &nf);
        if (nf.consistent) {
          f = nf;
          w->size[i] = pred_fit_eval(&f, target, granule);
          res->near_law++;
        }
      }
      w->why[i] = f.consistent ? CERTAIN : INCONSISTENT;
      res->consistent += f.consistent;
      /* an inconsistent fit: never below what the reference itself asked for */
      if (!f.consistent && w->size[i] < R->ev[R->alloc_ev[i]].size) w->size[i] = R->ev[R->alloc_ev[i]].size;
    }
    w->lo[i] = w->hi[i] = w->size[i];
  }
  /* the ranges of the uncertain sizes, once it is known whether the value has quadratic terms
   * (a consistent quadratic fit of an allocation made in every recording) */
  for (size_t i = 0; i < R->n_alloc; i++) {
    if (w->why[i] == CERTAIN) continue;
    size_t np = 0;
    for (size_t j = 0; j < w->n; j++) {
      int64_t m = j == ref ? (int64_t)i : w->match[j][i];
      if (m < 0) continue;
      v[np] = w->rec[j].value;
      s[np++] = w->rec[j].ev[w->rec[j].alloc_ev[m]].size;
    }
    plausible_range(v, s, np, target, granule, quadratic_law ? 2 : 1, w->size[i], &w->lo[i], &w->hi[i]);
  }
  res->allocs = R->n_alloc;
  return GM_OK;
}

/* Pass 1: the size of every output event, the predicted peak and what it is made of. */
gm_status_t pred_size_events(pred_work_t *w, size_t ref, pred_result_t *res, gm_err_t *err) {
  const pred_rec_t *R = &w->rec[ref];
  w->ev_size = malloc((R->n_ev ? R->n_ev : 1) * sizeof *w->ev_size);
  w->ev_alloc = malloc((R->n_ev ? R->n_ev : 1) * sizeof *w->ev_alloc);
  if (!w->ev_size || !w->ev_alloc) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  if (R->n_alloc >= UINT32_MAX) return gm_err_set(err, GM_ERR_INVAL, "more than 2^32 allocations in one recording");
  amap_t m = {0};
  uint64_t live = 0, certain = 0, inconsistent = 0, unmatched[PRED_MAX_INPUTS] = {0}, rlive = 0;
  size_t ai = 0;
  gm_status_t st = GM_OK;
  for (size_t e = 0; e < R->n_ev; e++) {
    const gmt_event_t *ev = &R->ev[e];
    w->ev_size[e] = ev->size;
    w->ev_alloc[e] = UINT32_MAX;
    if (ev->kind == GMT_EV_ALLOC) {
      size_t i = ai++;
      uint64_t k = akey(ev);
      size_t old = amap_find(&m, k);
      if (old != SIZE_MAX) { /* an address given twice: the first one's free was lost; it ends here */
        size_t o = m.val[old];
        uint64_t osz = w->size[o];
        live -= osz;
        rlive -= R->ev[R->alloc_ev[o]].size;
        if (w->why[o] == CERTAIN) certain -= osz;
        else if (w->why[o] == INCONSISTENT) inconsistent -= osz;
        else unmatched[w->missing_in[o]] -= osz;
        amap_del(&m, old);
      }
      if (amap_put(&m, k, i) < 0) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      uint64_t sz = w->size[i];
      w->ev_size[e] = sz;
      w->ev_alloc[e] = (uint32_t)i;
      live += sz;
      rlive += ev->size;
      if (w->why[i] == CERTAIN) certain += sz;
      else if (w->why[i] == INCONSISTENT) inconsistent += sz;
      else unmatched[w->missing_in[i]] += sz;
      if (rlive > res->ref_peak_live) res->ref_peak_live = rlive;
      if (live - certain > w->uncertain_max) w->uncertain_max = live - certain;
      if (live > w->peak) {
        w->peak = live;
        w->peak_ev = e;
        w->peak_certain = certain;
        w->peak_inconsistent = inconsistent;
        memcpy(w->peak_unmatched, unmatched, sizeof unmatched);
      }
    } else if (ev->kind == GMT_EV_FREE || ev->kind == GMT_EV_FREE_REQUESTED) {
      size_t s = amap_find(&m, akey(ev));
      if (s == SIZE_MAX) continue; /* allocated before the recording began: kept as recorded */
      size_t i = m.val[s];
      uint64_t sz = w->size[i];
      w->ev_size[e] = sz;
      w->ev_alloc[e] = (uint32_t)i;
      if (ev->kind == GMT_EV_FREE_REQUESTED) continue;
      live -= sz;
      rlive -= R->ev[R->alloc_ev[i]].size;
      if (w->why[i] == CERTAIN) certain -= sz;
      else if (w->why[i] == INCONSISTENT) inconsistent -= sz;
      else unmatched[w->missing_in[i]] -= sz;
      amap_del(&m, s);
    }
  }
  free(m.key);
  free(m.val);
  res->peak_live = w->peak;
  res->confidence = w->peak ? (double)w->peak_certain / (double)w->peak : 1.0;
  res->uncertain_max = w->uncertain_max;
  res->uncertain_share = w->peak ? (double)w->uncertain_max / (double)w->peak : 0.0;
  return st;
}

/* A drift between two recordings alone (pred.c says why): the allocations the two share that
 * are not live at the predicted peak may stop growing at the reference's size. */
typedef struct bend_cand {
  uint64_t at_ref, fitted; /* the group: one size at the reference, one fitted size */
  size_t i;
} bend_cand_t;

static int by_group(const void *pa, const void *pb) {
  const bend_cand_t *a = pa, *b = pb;
  if (a->at_ref != b->at_ref) return a->at_ref < b->at_ref ? -1 : 1;
  if (a->fitted != b->fitted) return a->fitted < b->fitted ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

/* live[i]: reference allocation i is live at the predicted peak (after event w->peak_ev). */
static gm_status_t live_at_peak(const pred_work_t *w, const pred_rec_t *R, uint8_t *live, gm_err_t *err) {
  amap_t m = {0};
  size_t ai = 0;
  gm_status_t st = GM_OK;
  for (size_t e = 0; e <= w->peak_ev && e < R->n_ev; e++) {
    const gmt_event_t *ev = &R->ev[e];
    if (ev->kind == GMT_EV_ALLOC) {
      size_t old = amap_find(&m, akey(ev));
      if (old != SIZE_MAX) { /* an address given twice: the first one's free was lost */
        live[m.val[old]] = 0;
        amap_del(&m, old);
      }
      if (amap_put(&m, akey(ev), ai) < 0) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      live[ai++] = 1;
    } else if (ev->kind == GMT_EV_FREE) {
      size_t s = amap_find(&m, akey(ev));
      if (s == SIZE_MAX) continue;
      live[m.val[s]] = 0;
      amap_del(&m, s);
    }
  }
  free(m.key);
  free(m.val);
  return st;
}

gm_status_t pred_bend_ranges(pred_work_t *w, size_t ref, uint64_t *n, gm_err_t *err) {
  const pred_rec_t *R = &w->rec[ref];
  *n = 0;
  uint8_t *live = calloc(R->n_alloc ? R->n_alloc : 1, 1);
  bend_cand_t *c = malloc((R->n_alloc ? R->n_alloc : 1) * sizeof *c);
  gm_status_t st = live && c ? live_at_peak(w, R, live, err) : gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  size_t nc = 0;
  for (size_t i = 0; st == GM_OK && i < R->n_alloc; i++) {
    uint64_t at_ref = R->ev[R->alloc_ev[i]].size;
    int both = 1;
    for (size_t j = 0; j < w->n; j++) both &= j == ref || w->match[j][i] >= 0;
    if (w->why[i] == CERTAIN && both && w->size[i] != at_ref) c[nc++] = (bend_cand_t){at_ref, w->size[i], i};
  }
  if (st == GM_OK) qsort(c, nc, sizeof *c, by_group);
  for (size_t a = 0, b; st == GM_OK && a < nc; a = b) {
    int any_live = 0;
    for (b = a; b < nc && c[b].at_ref == c[a].at_ref && c[b].fitted == c[a].fitted; b++) any_live |= live[c[b].i];
    if (any_live) continue; /* a group at the peak stays as fitted */
    for (size_t k = a; k < b; k++) {
      w->lo[c[k].i] = c[k].at_ref < c[k].fitted ? c[k].at_ref : c[k].fitted;
      w->hi[c[k].i] = c[k].at_ref > c[k].fitted ? c[k].at_ref : c[k].fitted;
      (*n)++;
    }
  }
  free(c);
  free(live);
  return st;
}
