/* pred_pair_law.c: allocations one recording makes in another order, paired by their size law.
 *
 * The alignment (pred_align.c) pairs each recording with the reference by position: allocations
 * of one token made in another order stay unpaired on both sides, or pair only within a few
 * positions. Seen on a JAX job recorded cold at batch 2048, 4096 and 8192: XLA's autotuner makes
 * 167 scratch allocations without a callsite; at 2048 they have exactly the sizes that the line
 * through 4096 and 8192 gives, but 62 of them come in another order, so the prediction from the
 * three said the job "did not make" them at 2048 and refused.
 *
 * Where the other recordings fix a reference allocation's law (paired with it in every recording
 * but this one, a consistent fit through them), its size at this recording's value is known.
 * Within one group (a token, between the same markers) the unpaired allocations of both sides are
 * then sorted by that size and by their own, and paired rank for rank, each of equal size in the
 * order they were made; a group is paired only when this is exact: as many on each side, every
 * one of the reference's with a law, every pair's size on that law within the granularity (what
 * pred_fit.c allows a point). Otherwise the group stays as the alignment left it (unpaired, and
 * the prediction says so or refuses). The pairing decides sizes only: the predicted trace keeps
 * the reference's order of events. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/predict/pred_internal.h"

typedef struct item {
  size_t seg;
  uint64_t tok;
  double size; /* the law's size (reference side) or the recorded one */
  size_t idx;  /* allocation index in its own recording */
  int lawless; /* reference side: no consistent law at this value */
} item_t;

static int item_cmp(const void *pa, const void *pb) {
  const item_t *a = pa, *b = pb;
  if (a->seg != b->seg) return a->seg < b->seg ? -1 : 1;
  if (a->tok != b->tok) return a->tok < b->tok ? -1 : 1;
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Segment of every allocation of r: the markers before it, when the recordings share their
 * marker sequence (as pred_align.c segments them); else 0. */
static void segments(const pred_rec_t *r, int by_marks, size_t *seg) {
  size_t s = 0;
  for (size_t i = 0; i < r->n_alloc; i++) {
    while (by_marks && s < r->n_mark && r->mark_alloc[s] <= i) s++;
    seg[i] = s;
  }
}

/* Whether the points lie on f within what pred_fit.c allows a point. Not whether f is a
 * tensor's law: an autotuner's scratch (80, 48 MiB at 8192, 4096: a fixed part of 16 MiB) is
 * none, but its size at a third value is still known when the other two fix a line, and the
 * fit (pred.c) then judges the three points as it judges any. */
static int on_law(const pred_fit_t *f, const double *v, const uint64_t *s, size_t n, uint64_t granule) {
  double smax = 0;
  for (size_t k = 0; k < n; k++)
    if ((double)s[k] > smax) smax = (double)s[k];
  const double tol = (double)(granule ? granule : 1) + 1e-9 * smax;
  for (size_t k = 0; k < n; k++)
    if (fabs(f->c0 + f->c1 * v[k] + f->c2 * v[k] * v[k] - (double)s[k]) > tol) return 0;
  return 1;
}

/* Pairs in match[j] for recording j; returns how many were added, or SIZE_MAX when out of memory. */
static size_t pair_one(const pred_rec_t *rec, size_t n, size_t ref, size_t j, int64_t *const *match, uint64_t granule) {
  const pred_rec_t *R = &rec[ref], *J = &rec[j];
  int by_marks = R->n_mark == J->n_mark &&
                 (R->n_mark == 0 || memcmp(R->mark_name, J->mark_name, R->n_mark * sizeof *R->mark_name) == 0);
  size_t *rseg = malloc((R->n_alloc ? R->n_alloc : 1) * sizeof *rseg), *jseg = malloc((J->n_alloc ? J->n_alloc : 1) * sizeof *jseg);
  uint8_t *jused = calloc(J->n_alloc ? J->n_alloc : 1, 1);
  item_t *ri = malloc((R->n_alloc ? R->n_alloc : 1) * sizeof *ri), *ji = malloc((J->n_alloc ? J->n_alloc : 1) * sizeof *ji);
  size_t added = SIZE_MAX;
  if (!rseg || !jseg || !jused || !ri || !ji) goto out;
  segments(R, by_marks, rseg);
  segments(J, by_marks, jseg);
  size_t nr = 0, nj = 0;
  for (size_t i = 0; i < R->n_alloc; i++) {
    if (match[j][i] >= 0) {
      jused[match[j][i]] = 1;
      continue;
    }
    double v[PRED_MAX_INPUTS];
    uint64_t s[PRED_MAX_INPUTS];
    size_t np = 0;
    int all = 1;
    for (size_t k = 0; k < n && all; k++) {
      if (k == j) continue;
      int64_t m = k == ref ? (int64_t)i : match[k][i];
      if (m < 0) {
        all = 0;
        continue;
      }
      v[np] = rec[k].value;
      s[np++] = rec[k].ev[rec[k].alloc_ev[m]].size;
    }
    pred_fit_t f = {0};
    if (all && np >= 2) pred_fit_points(v, s, np, granule, J->value, &f);
    int law = f.degree >= 1 && on_law(&f, v, s, np, granule);
    double x = J->value;
    ri[nr++] = (item_t){rseg[i], R->tok[i], law ? f.c0 + f.c1 * x + f.c2 * x * x : 0, i, !law};
  }
  for (size_t t = 0; t < J->n_alloc; t++)
    if (!jused[t]) ji[nj++] = (item_t){jseg[t], J->tok[t], (double)J->ev[J->alloc_ev[t]].size, t, 0};
  qsort(ri, nr, sizeof *ri, item_cmp);
  qsort(ji, nj, sizeof *ji, item_cmp);
  added = 0;
  /* walk the groups (seg, tok) of both sides together */
  size_t a = 0, b = 0;
  while (a < nr && b < nj) {
    if (ri[a].seg != ji[b].seg || ri[a].tok != ji[b].tok) {
      if (ri[a].seg < ji[b].seg || (ri[a].seg == ji[b].seg && ri[a].tok < ji[b].tok)) a++;
      else b++;
      continue;
    }
    size_t a1 = a, b1 = b;
    while (a1 < nr && ri[a1].seg == ri[a].seg && ri[a1].tok == ri[a].tok) a1++;
    while (b1 < nj && ji[b1].seg == ji[b].seg && ji[b1].tok == ji[b].tok) b1++;
    int exact = a1 - a == b1 - b;
    for (size_t t = 0; exact && t < a1 - a; t++) {
      const item_t *p = &ri[a + t], *q = &ji[b + t];
      /* within what pred_fit.c allows a point: a granule (rounded sizes) */
      double tol = (double)(granule ? granule : 1) + 1e-9 * q->size;
      if (p->lawless || fabs(p->size - q->size) > tol) exact = 0;
    }
    if (exact) {
      for (size_t t = 0; t < a1 - a; t++) match[j][ri[a + t].idx] = (int64_t)ji[b + t].idx;
      added += a1 - a;
    }
    a = a1;
    b = b1;
  }
out:
  free(rseg);
  free(jseg);
  free(jused);
  free(ri);
  free(ji);
  return added;
}

gm_status_t pred_pair_by_law(const pred_rec_t *rec, size_t n, size_t ref, int64_t *const *match, uint64_t granule,
                             uint64_t *paired, gm_err_t *err) {
  *paired = 0;
  if (n < 3) return GM_OK; /* a law needs two recordings besides the one paired */
  for (size_t j = 0; j < n; j++) {
    if (j == ref) continue;
    size_t got = pair_one(rec, n, ref, j, match, granule);
    if (got == SIZE_MAX) return gm_err_set(err, GM_ERR_NOMEM, "out of memory pairing allocations by their size law");
    *paired += got;
  }
  return GM_OK;
}
