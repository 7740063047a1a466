/* gpureplay_tune_pt.c: the search over PyTorch's PYTORCH_CUDA_ALLOC_CONF.
 *
 * The space: expandable_segments; max_split_size_mb at any value (the values that can change a
 * replay are the request sizes themselves, so the candidates are the trace's large request
 * sizes, at quantiles, plus round values); roundup_power2_divisions in its list form over
 * three size bands (< 64 MiB, 64-512 MiB, >= 512 MiB), written in the scalar form when the
 * bands agree; garbage_collection_threshold with per_process_memory_fraction (one coordinate:
 * the threshold does nothing without a fraction) at fractions around the default's peak;
 * max_non_split_rounding_mb (only where max_split_size_mb is set: it does nothing otherwise).
 *
 * The method: coordinate descent. From a start, each coordinate in turn is set to each of its
 * values (the others held), all of them replayed together, and the best kept; rounds repeat
 * until one changes nothing. Starts: the default, expandable_segments:True (the one switch
 * that changes the allocator's whole structure), the best 2 single changes of the default
 * (screening) and the best 2 of 16 random points; a long trace only the first two. Then the
 * fraction of the best point is bisected down to the smallest that still serves every
 * request, and keys that buy nothing are dropped.
 *
 * BOUNDED mode searches a small space (few values per coordinate, the roundup bands tied) the
 * same way; EXHAUSTIVE replays every point of that space, so the two can be compared. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/tune/gpureplay_tune.h"

#define MIB (1ull << 20)
#define MAX_VALUES 96
static const size_t kLongTrace = 300000; /* events: above, fewer starts */

void gr_pt_spec(const gr_pt_point_t *p, char *out, size_t n) {
  size_t k = (size_t)snprintf(out, n, "pytorch");
  char sep = ':';
#define ADD(...)                                                              \
  do {                                                                        \
    if (k < n) k += (size_t)snprintf(out + k, n - k, "%c", sep);              \
    if (k < n) k += (size_t)snprintf(out + k, n - k, __VA_ARGS__);            \
    sep = ',';                                                                \
  } while (0)
  if (p->expandable) ADD("expandable_segments:True");
  if (p->max_split_mb) ADD("max_split_size_mb:%d", p->max_split_mb);
  if (p->max_split_mb && p->non_split_mb) ADD("max_non_split_rounding_mb:%d", p->non_split_mb);
  const int *r = p->roundup;
  if (r[0] == r[1] && r[1] == r[2]) {
    if (r[0] > 1) ADD("roundup_power2_divisions:%d", r[0]);
  } else if (r[0] || r[1] || r[2]) {
    /* "32:" fills the bands below 64 MiB, 64/128/256 the middle band, ">" the rest (from the
     * band after the last one named). */
    if (r[1] == r[2]) ADD("roundup_power2_divisions:[32:%d,>:%d]", r[0], r[1]);
    else ADD("roundup_power2_divisions:[32:%d,64:%d,128:%d,256:%d,>:%d]", r[0], r[1], r[1], r[1], r[2]);
  }
  if (p->fraction_ppm) {
    if (p->gc_pct) ADD("garbage_collection_threshold:%d.%02d", p->gc_pct / 100, p->gc_pct % 100);
    ADD("per_process_memory_fraction:%d.%06d", p->fraction_ppm / 1000000, p->fraction_ppm % 1000000);
  }
#undef ADD
}

/* Coordinates: each sets one field of a point to its v-th value. */
enum { C_EXPAND, C_SPLIT, C_ROUND0, C_ROUND1, C_ROUND2, C_ROUND_ALL, C_GCFRAC, C_NONSPLIT, C_N };

typedef struct space {
  int n[C_N];
  int v[C_N][MAX_VALUES];    /* C_GCFRAC: an index into gc[]/frac[] */
  int gc[MAX_VALUES], frac[MAX_VALUES];
  int coords[C_N], n_coords; /* the coordinates this space searches, in order */
  int no_limits;             /* --no-limits: no per_process_memory_fraction (and so no threshold) */
} space_t;

static void set(gr_pt_point_t *p, const space_t *s, int c, int k) {
  int v = s->v[c][k];
  switch (c) {
    case C_EXPAND: p->expandable = v; break;
    case C_SPLIT: p->max_split_mb = v; break;
    case C_ROUND0: case C_ROUND1: case C_ROUND2: p->roundup[c - C_ROUND0] = v; break;
    case C_ROUND_ALL: p->roundup[0] = p->roundup[1] = p->roundup[2] = v; break;
    case C_GCFRAC: p->gc_pct = s->gc[v]; p->fraction_ppm = s->frac[v]; break;
    case C_NONSPLIT: p->non_split_mb = v; break;
  }
}

static void add(space_t *s, int c, int v) {
  for (int i = 0; i < s->n[c]; i++)
    if (s->v[c][i] == v) return;
  if (s->n[c] < MAX_VALUES) s->v[c][s->n[c]++] = v;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* max_split_size_mb candidates from the trace: request sizes of 20 MiB and more (the floor),
 * in MiB rounded up (the block of that size becomes "oversize" at or above the value) and one
 * more (it stays splittable), at up to 10 quantiles of the distinct sizes. */
static void split_values(space_t *s, const gr_loaded_t *lt) {
  size_t n = 0, cap = 4096;
  uint64_t *mb = malloc(cap * sizeof *mb);
  for (size_t i = 0; mb && i < lt->n_evs; i++) {
    const gmt_event_t *e = &lt->evs[i];
    if (e->kind != GMT_EV_ALLOC || e->size < 20 * MIB) continue;
    if (n == cap) {
      uint64_t *g = realloc(mb, 2 * cap * sizeof *g);
      if (!g) break;
      mb = g;
      cap *= 2;
    }
    mb[n++] = (e->size + MIB - 1) / MIB;
  }
  if (!mb) return;
  qsort(mb, n, sizeof *mb, cmp_u64);
  size_t d = 0;
  for (size_t i = 0; i < n; i++)
    if (d == 0 || mb[d - 1] != mb[i]) mb[d++] = mb[i];
  int q = d < 10 ? (int)d : 10;
  for (int k = 0; k < q; k++) {
    uint64_t v = mb[(size_t)k * (d - 1) / (q > 1 ? (size_t)q - 1 : 1)];
    if (v < 1000000) {
      add(s, C_SPLIT, (int)v);
      add(s, C_SPLIT, (int)v + 1);
    }
  }
  free(mb);
}

static void gcfrac(space_t *s, int gc, int frac) {
  if (s->no_limits && frac) return; /* a hard limit, not searched */
  int k = s->n[C_GCFRAC];
  for (int i = 0; i < k; i++)
    if (s->gc[i] == gc && s->frac[i] == frac) return;
  if (k >= MAX_VALUES) return;
  s->gc[k] = gc;
  s->frac[k] = frac;
  s->v[C_GCFRAC][k] = k;
  s->n[C_GCFRAC]++;
}

/* A fraction of the device as k times the default's peak, rounded up to a millionth. */
static int frac_of(double k, uint64_t peak, uint64_t total) {
  double f = k * (double)peak / (double)total;
  if (f >= 1.0) return 0; /* no fraction: the whole device */
  return (int)ceil(f * 1e6);
}

/* The full space's threshold-and-fraction values around a peak: the fraction makes the
 * allocator give cached segments back before it grows past it, so only fractions at and below
 * the current point's own peak can change it (the best one is bisected to the edge after). */
static void gcfrac_around(space_t *s, uint64_t peak, uint64_t total) {
  static const double ks[] = {0.8, 0.9, 0.95, 1.0};
  static const int gcs[] = {0, 50, 60, 80, 95};
  s->n[C_GCFRAC] = 0;
  gcfrac(s, 0, 0);
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    for (size_t g = 0; g < sizeof gcs / sizeof gcs[0]; g++) {
      int f = frac_of(ks[i], peak, total);
      if (f) gcfrac(s, gcs[g], f);
    }
}

static void build(space_t *s, int bounded, int no_limits, const gr_loaded_t *lt, uint64_t dflt_peak,
                  uint64_t total) {
  memset(s, 0, sizeof *s);
  s->no_limits = no_limits;
  add(s, C_EXPAND, 0);
  add(s, C_EXPAND, 1);
  static const int split_round[] = {0, 64, 128, 256, 512};
  for (size_t i = 0; i < sizeof split_round / sizeof split_round[0]; i++) add(s, C_SPLIT, split_round[i]);
  static const int nonsplit_bounded[] = {0, 256};
  static const int nonsplit_full[] = {0, 20, 64, 128, 256, 512, 1024, 4096};
  static const int div_bounded[] = {0, 2, 4, 8};
  static const int div_full[] = {0, 2, 4, 8, 16};
  if (bounded) {
    for (size_t i = 0; i < 2; i++) add(s, C_NONSPLIT, nonsplit_bounded[i]);
    for (size_t i = 0; i < 4; i++) add(s, C_ROUND_ALL, div_bounded[i]);
    gcfrac(s, 0, 0);
    gcfrac(s, 60, frac_of(1.0, dflt_peak, total));
    gcfrac(s, 80, frac_of(1.0, dflt_peak, total));
    gcfrac(s, 80, frac_of(0.9, dflt_peak, total));
    int c[] = {C_EXPAND, C_SPLIT, C_ROUND_ALL, C_GCFRAC, C_NONSPLIT};
    memcpy(s->coords, c, sizeof c);
    s->n_coords = 5;
    return;
  }
  add(s, C_SPLIT, 20);
  add(s, C_SPLIT, 32);
  add(s, C_SPLIT, 1024);
  split_values(s, lt);
  for (size_t i = 0; i < sizeof nonsplit_full / sizeof nonsplit_full[0]; i++) add(s, C_NONSPLIT, nonsplit_full[i]);
  for (int b = 0; b < 3; b++)
    for (size_t i = 0; i < sizeof div_full / sizeof div_full[0]; i++) add(s, C_ROUND0 + b, div_full[i]);
  gcfrac_around(s, dflt_peak, total);
  int c[] = {C_EXPAND, C_SPLIT, C_ROUND0, C_ROUND1, C_ROUND2, C_GCFRAC, C_NONSPLIT};
  memcpy(s->coords, c, sizeof c);
  s->n_coords = 7;
}

/* Does coordinate c matter at point p? max_non_split_rounding_mb only with max_split_size_mb. */
static int matters(const gr_pt_point_t *p, int c) { return c != C_NONSPLIT || p->max_split_mb != 0; }

/* Every single change of *p (each coordinate set to each of its values, the others held;
 * only `only` when >= 0), replayed in one batch: cand[k] with its point idx[k]. */
static gm_status_t neighbours(gr_tune_ctx_t *c, space_t *s, const gr_pt_point_t *p, int cur, int only,
                              gr_pt_point_t **cand_out, int **idx_out, int *n_out, gm_err_t *err) {
  if (c->o->mode == GR_TUNE_SEARCH && (only < 0 || only == C_GCFRAC)) {
    gcfrac_around(s, c->t->pts[cur].peak_reserved, c->t->device_memory);
    if (p->fraction_ppm) gcfrac(s, p->gc_pct, p->fraction_ppm); /* staying is a choice */
  }
  int max = 0;
  for (int ci = 0; ci < s->n_coords; ci++) max += s->n[s->coords[ci]];
  gr_pt_point_t *cand = malloc((size_t)max * sizeof *cand);
  char (*specs)[512] = malloc((size_t)max * sizeof *specs);
  const char **sp = malloc((size_t)max * sizeof *sp);
  int *idx = malloc((size_t)max * sizeof *idx);
  gm_status_t st = GM_OK;
  if (!cand || !specs || !sp || !idx) st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  int n = 0;
  for (int ci = 0; st == GM_OK && ci < s->n_coords; ci++) {
    int co = s->coords[ci];
    if ((only >= 0 && co != only) || !matters(p, co)) continue;
    for (int k = 0; k < s->n[co]; k++) {
      cand[n] = *p;
      set(&cand[n], s, co, k);
      if (memcmp(&cand[n], p, sizeof *p) == 0) continue;
      gr_pt_spec(&cand[n], specs[n], sizeof specs[n]);
      sp[n] = specs[n];
      n++;
    }
  }
  if (st == GM_OK) st = gr_tune_eval(c, sp, n, idx, err);
  free(specs);
  free(sp);
  if (st != GM_OK) {
    free(cand);
    free(idx);
    return st;
  }
  *cand_out = cand;
  *idx_out = idx;
  *n_out = n;
  return GM_OK;
}

/* One round of coordinate descent from *p: each coordinate in turn, its values replayed
 * together, the best kept. *moved: whether *p changed. */
static gm_status_t round_once(gr_tune_ctx_t *c, space_t *s, gr_pt_point_t *p, int *cur, int *moved,
                              gm_err_t *err) {
  *moved = 0;
  for (int ci = 0; ci < s->n_coords; ci++) {
    gr_pt_point_t *cand = NULL;
    int *idx = NULL, n = 0;
    gm_status_t st = neighbours(c, s, p, *cur, s->coords[ci], &cand, &idx, &n, err);
    if (st != GM_OK) return st;
    int best = -1;
    for (int k = 0; k < n; k++)
      if (gr_tune_better(&c->t->pts[idx[k]], &c->t->pts[best >= 0 ? idx[best] : *cur])) best = k;
    if (best >= 0) {
      *p = cand[best];
      *cur = idx[best];
      *moved = 1;
    }
    free(cand);
    free(idx);
  }
  return GM_OK;
}

/* Screening: every single change of the default at once; the best `want` that serve every
 * request become starts (the first coordinate that improves is not always the way down:
 * expandable segments may beat the default, and a memory fraction alone beat both). */
static gm_status_t screen(gr_tune_ctx_t *c, space_t *s, int dflt, gr_pt_point_t *starts, int want, int *got,
                          gm_err_t *err) {
  gr_pt_point_t zero;
  memset(&zero, 0, sizeof zero);
  gr_pt_point_t *cand = NULL;
  int *idx = NULL, n = 0;
  gm_status_t st = neighbours(c, s, &zero, dflt, -1, &cand, &idx, &n, err);
  if (st != GM_OK) return st;
  *got = 0;
  for (int w = 0; w < want; w++) {
    int bi = -1;
    for (int k = 0; k < n; k++) {
      int used = 0;
      for (int j = 0; j < *got; j++) used |= memcmp(&starts[j], &cand[k], sizeof cand[k]) == 0;
      if (!used && c->t->pts[idx[k]].ok && (bi < 0 || gr_tune_better(&c->t->pts[idx[k]], &c->t->pts[idx[bi]])))
        bi = k;
    }
    if (bi >= 0) starts[(*got)++] = cand[bi];
  }
  free(cand);
  free(idx);
  return GM_OK;
}

static gm_status_t descend(gr_tune_ctx_t *c, space_t *s, gr_pt_point_t start, gr_pt_point_t *out, int *out_idx,
                           gm_err_t *err) {
  char spec[512];
  const char *sp[1] = {spec};
  gr_pt_spec(&start, spec, sizeof spec);
  int cur;
  gm_status_t st = gr_tune_eval(c, sp, 1, &cur, err);
  int moved = 1;
  for (int r = 0; st == GM_OK && moved && r < 8; r++) {
    st = round_once(c, s, &start, &cur, &moved, err);
    c->t->rounds++;
  }
  *out = start;
  *out_idx = cur;
  return st;
}

/* The smallest fraction (in millionths) for the point's threshold that still serves every
 * request, by bisection between the job's lower bound and the point's own fraction. */
static gm_status_t refine_fraction(gr_tune_ctx_t *c, gr_pt_point_t *p, int *cur, gm_err_t *err) {
  uint64_t total = c->t->device_memory;
  int hi = p->fraction_ppm;
  /* the bound as a fraction, in double first: a bound past the device (a trace of extreme
   * sizes, a reduced trace's device) is no int */
  double lo_ppm = total ? floor(1e6 * (double)c->t->lower_bound / (double)total) : (double)hi;
  if (hi == 0 || !(lo_ppm < (double)hi)) return GM_OK;
  int lo = lo_ppm < 0 ? 0 : (int)lo_ppm;
  int step_ppm = (int)ceil(1e6 * (double)(2 * MIB) / (double)total); /* 2 MiB of the device */
  if (step_ppm < 1) step_ppm = 1;
  int k = GR_TUNE_BISECT_POINTS;
  while (hi - lo > step_ppm) {
    char specs[8][512];
    const char *sp[8];
    int idx[8], x[8];
    gr_pt_point_t q[8];
    for (int i = 0; i < k; i++) {
      x[i] = lo + (int)((int64_t)(hi - lo) * (i + 1) / (k + 1));
      q[i] = *p;
      q[i].fraction_ppm = x[i];
      gr_pt_spec(&q[i], specs[i], sizeof specs[i]);
      sp[i] = specs[i];
    }
    gm_status_t st = gr_tune_eval(c, sp, k, idx, err);
    if (st != GM_OK) return st;
    int nhi = hi, nlo = lo;
    for (int i = k - 1; i >= 0; i--)
      if (c->t->pts[idx[i]].ok) nhi = x[i];
    for (int i = 0; i < k; i++)
      if (!c->t->pts[idx[i]].ok && x[i] < nhi) nlo = x[i];
    if (nhi == hi && nlo == lo) break;
    hi = nhi;
    lo = nlo;
  }
  gr_pt_point_t q = *p;
  q.fraction_ppm = hi;
  char spec[512];
  const char *sp[1] = {spec};
  int idx;
  gr_pt_spec(&q, spec, sizeof spec);
  gm_status_t st = gr_tune_eval(c, sp, 1, &idx, err);
  if (st == GM_OK && gr_tune_better(&c->t->pts[idx], &c->t->pts[*cur])) {
    *p = q;
    *cur = idx;
  }
  return st;
}

/* The point with every key that buys nothing taken out: a key goes back to its default when
 * that keeps every request served at no more peak reserved. Users paste fewer words, and a
 * key left in says it matters. */
static gm_status_t simplify(gr_tune_ctx_t *c, gr_pt_point_t *p, int *cur, gm_err_t *err) {
  for (int pass = 0; pass < 2; pass++)
    for (int co = 0; co < C_N; co++) {
      gr_pt_point_t q = *p;
      switch (co) {
        case C_EXPAND: q.expandable = 0; break;
        case C_SPLIT: q.max_split_mb = 0; break;
        case C_ROUND0: case C_ROUND1: case C_ROUND2: q.roundup[co - C_ROUND0] = 0; break;
        case C_ROUND_ALL: q.roundup[0] = q.roundup[1] = q.roundup[2] = 0; break;
        case C_GCFRAC: q.gc_pct = 0; break; /* the threshold alone; the fraction is a limit */
        case C_NONSPLIT: q.non_split_mb = 0; break;
      }
      if (memcmp(&q, p, sizeof q) == 0) continue;
      char spec[512];
      const char *sp[1] = {spec};
      int idx;
      gr_pt_spec(&q, spec, sizeof spec);
      gm_status_t st = gr_tune_eval(c, sp, 1, &idx, err);
      if (st != GM_OK) return st;
      const gr_tune_point_t *a = &c->t->pts[idx], *b = &c->t->pts[*cur];
      if (a->ok && a->peak_reserved <= b->peak_reserved) {
        *p = q;
        *cur = idx;
      }
    }
  return GM_OK;
}

static gm_status_t exhaustive(gr_tune_ctx_t *c, const space_t *s, gm_err_t *err) {
  char (*specs)[512] = malloc(64 * sizeof *specs);
  const char *sp[64];
  if (!specs) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  int n = 0;
  gm_status_t st = GM_OK;
  int kk[C_N] = {0};
  for (;;) {
    gr_pt_point_t p;
    memset(&p, 0, sizeof p);
    int skip = 0;
    for (int ci = 0; ci < s->n_coords; ci++) {
      int co = s->coords[ci];
      set(&p, s, co, kk[co]);
      if (co == C_NONSPLIT && !p.max_split_mb && kk[co]) skip = 1; /* the same point again */
    }
    if (!skip) {
      gr_pt_spec(&p, specs[n], sizeof specs[n]);
      sp[n] = specs[n];
      if (++n == 64) {
        if ((st = gr_tune_eval(c, sp, n, NULL, err)) != GM_OK) {
          free(specs);
          return st;
        }
        n = 0;
      }
    }
    int ci = 0;
    for (; ci < s->n_coords; ci++) {
      int co = s->coords[ci];
      if (++kk[co] < s->n[co]) break;
      kk[co] = 0;
    }
    if (ci == s->n_coords) break;
  }
  if (n) st = gr_tune_eval(c, sp, n, NULL, err);
  free(specs);
  return st;
}

gm_status_t gr_tune_pytorch(gr_tune_ctx_t *c, gm_err_t *err) {
  gr_tune_t *t = c->t;
  const char *sp[1] = {"pytorch"};
  int d;
  gm_status_t st = gr_tune_eval(c, sp, 1, &d, err);
  if (st != GM_OK) return st;
  uint64_t total = t->device_memory;
  space_t *s = malloc(sizeof *s);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  int bounded = c->o->mode != GR_TUNE_SEARCH;
  build(s, bounded, c->o->no_limits, c->lt, t->pts[d].peak_reserved, total);
  if (c->o->mode == GR_TUNE_EXHAUSTIVE) {
    st = exhaustive(c, s, err);
    t->method = "exhaustive over the bounded space";
    free(s);
    return st;
  }
  /* Starts: the default, expandable segments, the best 2 single changes of the default and
   * the best 2 of 16 random points (fixed seed: the same trace gives the same answer), so that
   * the descent does not stay in the first valley it finds. */
  enum { SAMPLE = 16 };
  gr_pt_point_t starts[6], sample[SAMPLE];
  int n_starts = 2, got = 0;
  memset(starts, 0, sizeof starts);
  starts[1].expandable = 1;
  /* A long trace (each replay costs ~0.1 s per million events on a core) starts from the
   * first two only. */
  int long_trace = (c->trace_events ? c->trace_events : c->lt->n_evs) > kLongTrace;
  if (!long_trace) st = screen(c, s, d, starts + 2, 2, &got, err);
  n_starts += got;
  if (st == GM_OK && !long_trace) {
    char specs[SAMPLE][512];
    const char *sp2[SAMPLE];
    int idx[SAMPLE];
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < SAMPLE; i++) {
      memset(&sample[i], 0, sizeof sample[i]);
      for (int ci = 0; ci < s->n_coords; ci++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int co = s->coords[ci];
        set(&sample[i], s, co, (int)(x % (uint64_t)s->n[co]));
      }
      gr_pt_spec(&sample[i], specs[i], sizeof specs[i]);
      sp2[i] = specs[i];
    }
    st = gr_tune_eval(c, sp2, SAMPLE, idx, err);
    for (int k = 0; st == GM_OK && k < 2; k++) {
      int bi = -1;
      for (int i = 0; i < SAMPLE; i++) {
        int used = 0;
        for (int j = 0; j < n_starts; j++) used |= memcmp(&starts[j], &sample[i], sizeof sample[i]) == 0;
        if (!used && t->pts[idx[i]].ok && (bi < 0 || gr_tune_better(&t->pts[idx[i]], &t->pts[idx[bi]]))) bi = i;
      }
      if (bi >= 0) starts[n_starts++] = sample[bi];
    }
  }
  gr_pt_point_t best;
  int best_idx = -1;
  for (int i = 0; i < n_starts && st == GM_OK; i++) {
    gr_pt_point_t p;
    int idx;
    st = descend(c, s, starts[i], &p, &idx, err);
    if (st == GM_OK && (best_idx < 0 || gr_tune_better(&t->pts[idx], &t->pts[best_idx]))) {
      best = p;
      best_idx = idx;
    }
  }
  if (st == GM_OK && !bounded && best_idx >= 0) st = refine_fraction(c, &best, &best_idx, err);
  if (st == GM_OK && !bounded && best_idx >= 0) st = simplify(c, &best, &best_idx, err);
  snprintf(t->method_buf, sizeof t->method_buf, "coordinate descent from %d starts%s%s", n_starts,
           long_trace ? " (a long trace: the default and expandable segments)" : "",
           bounded              ? " over the bounded space"
           : c->o->no_limits    ? ", keys that buy nothing dropped"
                                : ", bisection of the memory fraction, keys that buy nothing dropped");
  t->method = t->method_buf;
  free(s);
  return st;
}
