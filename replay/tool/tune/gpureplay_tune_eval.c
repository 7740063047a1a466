/* gpureplay_tune_eval.c: what both searches of gpureplay --tune (gpureplay_tune.c: JAX, the
 * choice; gpureplay_tune_pt.c: PyTorch; gpureplay_tune_cap.c: capacities) stand on: the memo of
 * replayed settings (a setting is replayed once, keyed by its spec; the new ones of a step go to
 * gr_run_loaded together), the bisection, the capacities a replay's outcome holds for, the order
 * of points, what the replay cannot tell of a point (its worst and best case, replayed only for
 * points the choice may take), and the time-cost model (driver time from the measured per-call
 * latencies below). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/tune/gpureplay_tune.h"

/* Per-call driver latencies in microseconds, p50 and p99 of the call alone. Source:
 * bench/RESULTS.md, "Replay on a real GPU (cuda:0 backend)": NVIDIA H200, driver 580.159.04,
 * CUDA 13.0, 2026-11-21, `tests/gpu/replay_gpu.sh` on the 200 000-request synthetic trace.
 * The free of a segment and the unmap of pages were not measured there (PyTorch released no
 * segment in that run): cuMemFree's figures from `direct` stand in for both. */
static const struct {
  const char *what;
  double alloc_p50, alloc_p99, free_p50, free_p99;
} kLatency[GR_CALL_KINDS] = {
    [GR_CALL_SEGMENT] = {"cuMemAlloc of a segment (pytorch, bfc)", 41.0, 81.9, 3.3, 49.2},
    [GR_CALL_MAP] = {"cuMemCreate + cuMemMap + cuMemSetAccess (expandable)", 327.7, 1441.8, 3.3, 49.2},
    [GR_CALL_SMALL] = {"cuMemAlloc of one request (direct)", 4.1, 49.2, 3.3, 49.2},
    [GR_CALL_POOL] = {"cuMemAllocFromPoolAsync (async)", 0.6, 0.8, 0.6, 0.9},
};

void gr_tune_time(int kind, uint64_t alloc_calls, uint64_t free_calls, double *lo, double *mid, double *hi) {
  if (kind < 0 || kind >= GR_CALL_KINDS) kind = GR_CALL_SEGMENT;
  double a = (double)alloc_calls, f = (double)free_calls;
  *lo = 1e-6 * (a * kLatency[kind].alloc_p50 + f * kLatency[kind].free_p50);
  *mid = *lo;
  *hi = 1e-6 * (a * kLatency[kind].alloc_p99 + f * kLatency[kind].free_p99);
}

static int call_kind(const char *spec) {
  if (strstr(spec, "expandable_segments:True")) return GR_CALL_MAP;
  if (strncmp(spec, "async", 5) == 0 || strstr(spec, "cuda_async")) return GR_CALL_POOL;
  if (strcmp(spec, "direct") == 0 || strstr(spec, "ALLOCATOR=platform")) return GR_CALL_SMALL;
  return GR_CALL_SEGMENT;
}

int gr_tune_better(const gr_tune_point_t *a, const gr_tune_point_t *b) {
  if (a->ok != b->ok) return a->ok;
  if (a->peak_reserved != b->peak_reserved) return a->peak_reserved < b->peak_reserved;
  if (a->time_mid_s != b->time_mid_s) return a->time_mid_s < b->time_mid_s;
  return strlen(a->spec) < strlen(b->spec);
}

uint64_t gr_tune_worst(const gr_tune_point_t *p) {
  if (!p->spread) return p->peak_reserved;
  return p->worst_oom ? UINT64_MAX : p->worst_bytes;
}

int gr_tune_safer(const gr_tune_point_t *a, const gr_tune_point_t *b) {
  return gr_tune_safer_at(a, gr_tune_worst(a), b, gr_tune_worst(b));
}

int gr_tune_safer_at(const gr_tune_point_t *a, uint64_t wa, const gr_tune_point_t *b, uint64_t wb) {
  if (a->ok != b->ok) return a->ok;
  if (wa != wb) return wa < wb;
  if (a->peak_reserved != b->peak_reserved) return a->peak_reserved < b->peak_reserved;
  uint64_t ca = a->alloc_calls + a->free_calls, cb = b->alloc_calls + b->free_calls;
  if (ca != cb) return ca < cb;
  if (a->time_mid_s != b->time_mid_s) return a->time_mid_s < b->time_mid_s;
  return strlen(a->spec) < strlen(b->spec);
}

int gr_tune_find(const gr_tune_t *t, const char *spec) {
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->pts[i].spec, spec) == 0) return i;
  return -1;
}

/* ---- bisection (the JAX fractions, gpureplay_tune.c; capacities, gpureplay_tune_cap.c) ---- */


void gr_tune_round_points(double lo, double hi, int k, double *x) {
  for (int i = 0; i < k; i++) x[i] = lo + (hi - lo) * (double)(i + 1) / (double)(k + 1);
}

void gr_tune_narrow(const double *x, const int *fits, int k, double *lo, double *hi) {
  double nlo = *lo, nhi = *hi;
  for (int i = k - 1; i >= 0; i--) /* the smallest that fits, the largest below it that does not */
    if (fits[i]) nhi = x[i];
  for (int i = 0; i < k; i++)
    if (!fits[i] && x[i] < nhi) nlo = x[i];
  *lo = nlo;
  *hi = nhi;
}

gm_status_t gr_tune_bisect(gr_tune_ctx_t *c, const void *arg, gr_tune_fits_fn fn, double lo, double hi, double tol,
                           double *out, gm_err_t *err) {
  int k = GR_TUNE_BISECT_POINTS;
  while (hi - lo > tol) {
    double x[8];
    int fits[8];
    gr_tune_round_points(lo, hi, k, x);
    gm_status_t st = fn(c, arg, x, k, fits, err);
    if (st != GM_OK) return st;
    gr_tune_narrow(x, fits, k, &lo, &hi);
  }
  *out = hi;
  return GM_OK;
}

/* What a replay within one capacity says of others (gpureplay_tune_cap.c). */
gr_tune_span_t gr_tune_span_of(const gr_tune_t *t, const rp_result_t *r) {
  gr_tune_span_t s = {0, 0};
  if (!r->same_capacity_known) return s;
  /* the backend saw capacity - context (gr_capacity_left): only capacities above the context */
  uint64_t ctx = t->context_bytes, unit = 2ull << 20;
  uint64_t lo = r->same_capacity_lo > UINT64_MAX - ctx ? UINT64_MAX : r->same_capacity_lo + ctx;
  uint64_t hi = r->same_capacity_hi > UINT64_MAX - ctx ? UINT64_MAX : r->same_capacity_hi + ctx;
  uint64_t xlo = lo / unit + (lo % unit != 0), xmin = ctx / unit + 1, xhi = hi / unit;
  if (xlo < xmin) xlo = xmin;
  if (xhi > (UINT64_MAX >> 22)) xhi = UINT64_MAX >> 22; /* x << 21 must not wrap */
  if (xlo <= xhi) s.lo = xlo, s.hi = xhi;
  return s;
}

/* Replay specs at capacity `cap` (0: unlimited) into res[]. */
gm_status_t gr_tune_replay(gr_tune_ctx_t *c, uint64_t cap, const char *const *specs, int n, rp_result_t **res,
                           gm_err_t *err) {
  gr_config_t cfg = c->cfg;
  cfg.capacity = cap;
  cfg.device_memory = c->t->device_memory; /* fractions stay shares of the same device */
  return gr_run_loaded(&cfg, c->lt, specs, n, res, err);
}

gm_status_t gr_tune_alloc_results(int n, rp_result_t ***out, gm_err_t *err) {
  rp_result_t **res = calloc((size_t)n, sizeof *res);
  int got = res != NULL;
  for (int i = 0; got && i < n; i++)
    if (!(res[i] = malloc(sizeof **res))) got = 0;
  if (!got) {
    for (int i = 0; res && i < n; i++) free(res[i]);
    free(res);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  *out = res;
  return GM_OK;
}

void gr_tune_free_results(rp_result_t **res, int n) {
  for (int i = 0; res && i < n; i++) free(res[i]);
  free(res);
}

void gr_tune_point_set(gr_tune_t *t, gr_tune_point_t *p, const rp_result_t *r) {
  p->ok = r->ooms == 0;
  p->peak_reserved = r->peak_reserved_bytes;
  p->peak_allocated = r->peak_allocated_bytes;
  p->frag_at_peak = r->fragmentation_at_peak;
  p->alloc_calls = r->device_alloc_calls;
  p->free_calls = r->device_free_calls;
  p->pool = r->pool_allocs > 0;
  p->event_frees = r->event_frees;
  p->event_frees_requested = r->event_frees_requested;
  p->placed_known = r->placed_known;
  p->placed = r->placed_segments;
  p->call_kind = p->pool ? GR_CALL_POOL : call_kind(p->spec);
  gr_tune_time(p->call_kind, p->alloc_calls, p->free_calls, &p->time_lo_s, &p->time_mid_s, &p->time_hi_s);
  if (t->lower_bound < r->lower_bound_bytes) t->lower_bound = r->lower_bound_bytes;
  p->same = gr_tune_span_of(t, r);
}

gm_status_t gr_tune_eval(gr_tune_ctx_t *c, const char *const *specs, int n, int *idx, gm_err_t *err) {
  gr_tune_t *t = c->t;
  const char **todo = calloc((size_t)n + 1, sizeof *todo);
  if (!todo) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  int m = 0;
  for (int i = 0; i < n; i++) {
    int dup = gr_tune_find(t, specs[i]) >= 0;
    for (int k = 0; k < m && !dup; k++) dup = strcmp(todo[k], specs[i]) == 0;
    if (!dup) todo[m++] = specs[i];
  }
  gm_status_t st = GM_OK;
  rp_result_t **res = NULL;
  if (m > 0 && (st = gr_tune_alloc_results(m, &res, err)) == GM_OK) st = gr_tune_replay(c, c->cfg.capacity, todo, m, res, err);
  t->replays += (uint64_t)m;
  if (st == GM_OK && t->n + m > t->cap) {
    int nc = (t->n + m) * 2;
    gr_tune_point_t *g = realloc(t->pts, (size_t)nc * sizeof *g);
    if (!g) st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
    else {
      t->pts = g;
      t->cap = nc;
    }
  }
  for (int k = 0; st == GM_OK && k < m; k++) {
    gr_tune_point_t *p = &t->pts[t->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->spec, sizeof p->spec, "%s", todo[k]);
    gr_tune_point_set(t, p, res[k]);
  }
  gr_tune_free_results(res, m);
  free(todo);
  for (int i = 0; st == GM_OK && idx && i < n; i++) idx[i] = gr_tune_find(t, specs[i]);
  return st;
}

const char *gr_tune_latency_source(int kind, double *a50, double *a99, double *f50, double *f99) {
  if (kind < 0 || kind >= GR_CALL_KINDS) return NULL;
  *a50 = kLatency[kind].alloc_p50;
  *a99 = kLatency[kind].alloc_p99;
  *f50 = kLatency[kind].free_p50;
  *f99 = kLatency[kind].free_p99;
  return kLatency[kind].what;
}

double gr_tune_sizes_move(const char *note, const char *spec) {
  double own = -1.0, most = 0.0;
  size_t sl = strlen(spec);
  /* "SPEC=answered LOW..HIGH (uncertain sizes move it by X %...); SPEC=refused ..." (a spec may
   * hold '=' itself: JAX's) */
  for (const char *e = note; e && *e;) {
    const char *end = strstr(e, "; ");
    const char *by = strstr(e, "move it by ");
    if (by && (!end || by < end)) {
      double m = atof(by + 11) / 100.0;
      if (m > most) most = m;
      const char *eq = strstr(e, "=answered ");
      const char *rf = strstr(e, "=refused ");
      if (!eq || (rf && rf < eq)) eq = rf;
      if (eq && (size_t)(eq - e) == sl && strncmp(e, spec, sl) == 0) own = m;
    }
    e = end ? end + 2 : NULL;
  }
  return own >= 0.0 ? own : most;
}

/* The replays gr_spread_loaded made for r: the other timings and the bump pointer's. */
static uint64_t spread_replays(const rp_result_t *r) {
  uint64_t n = r->placement_checked ? 1 : 0;
  if (r->range_kind == RP_RANGE_POOL) n += 2;
  else if (r->range_kind == RP_RANGE_EVENTS) n += r->event_frees_requested ? 2 : 1;
  return n;
}

gm_status_t gr_tune_spread(gr_tune_ctx_t *c, const int *idx, int n, gm_err_t *err) {
  gr_tune_t *t = c->t;
  int *todo = malloc((size_t)(n > 0 ? n : 1) * sizeof *todo);
  const char **sp = malloc((size_t)(n > 0 ? n : 1) * sizeof *sp);
  if (!todo || !sp) {
    free(todo);
    free(sp);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  int m = 0;
  for (int i = 0; i < n; i++) {
    int dup = t->pts[idx[i]].spread;
    for (int k = 0; k < m && !dup; k++) dup = todo[k] == idx[i];
    if (!dup) todo[m++] = idx[i];
  }
  rp_result_t **res = NULL;
  gm_status_t st = m ? gr_tune_alloc_results(m, &res, err) : GM_OK;
  for (int k = 0; st == GM_OK && k < m; k++) { /* what gr_spread_loaded reads of each replay */
    const gr_tune_point_t *p = &t->pts[todo[k]];
    memset(res[k], 0, sizeof *res[k]);
    res[k]->peak_reserved_bytes = p->peak_reserved;
    res[k]->pool_allocs = p->pool;
    res[k]->event_frees = p->event_frees;
    res[k]->event_frees_requested = p->event_frees_requested;
    res[k]->placed_known = p->placed_known;
    res[k]->placed_segments = p->placed;
    sp[k] = p->spec;
  }
  if (st == GM_OK && m) {
    gr_config_t cfg = c->cfg;
    cfg.device_memory = t->device_memory; /* as the point's replay (gr_tune_replay) */
    st = gr_spread_loaded(&cfg, c->lt, sp, m, res, err);
  }
  for (int k = 0; st == GM_OK && k < m; k++) {
    gr_tune_point_t *p = &t->pts[todo[k]];
    const rp_result_t *r = res[k];
    uint64_t hi = p->peak_reserved, lo = p->peak_reserved;
    if (r->range_kind != RP_RANGE_NONE) {
      if (r->range_high_bytes > hi) hi = r->range_high_bytes;
      if (r->range_low_bytes < lo) lo = r->range_low_bytes;
    }
    if (r->placement_checked) {
      if (r->placement_bump_bytes > hi) hi = r->placement_bump_bytes;
      if (r->placement_bump_bytes < lo) lo = r->placement_bump_bytes;
    }
    /* A predicted trace's uncertain sizes move the peak by up to its share, on top of the rest. */
    uint64_t sizes = (uint64_t)ceil(gr_tune_sizes_move(c->lt->info.predicted_settings, p->spec) * (double)p->peak_reserved);
    p->worst_bytes = hi + sizes;
    p->best_bytes = lo > sizes ? lo - sizes : 0;
    p->worst_oom = r->spread_ooms > 0;
    p->spread = 1;
    p->range_kind = r->range_kind;
    p->range_a = r->range_a_bytes;
    p->range_b = r->range_b_bytes;
    p->range_low = r->range_low_bytes;
    p->range_high = r->range_high_bytes;
    p->late_mallocs = r->late_mallocs;
    p->placement_checked = r->placement_checked;
    p->placement_bump = r->placement_bump_bytes;
    uint64_t k2 = spread_replays(r);
    t->replays += k2;
    t->spread_replays += k2;
  }
  gr_tune_free_results(res, m);
  free(todo);
  free(sp);
  return st;
}

void gr_tune_spread_into(const gr_tune_point_t *p, rp_result_t *r) {
  if (!p->spread) return;
  r->range_kind = p->range_kind;
  r->range_a_bytes = p->range_a;
  r->range_b_bytes = p->range_b;
  r->range_low_bytes = p->range_low;
  r->range_high_bytes = p->range_high;
  if (p->range_kind == RP_RANGE_EVENTS) r->late_mallocs = p->late_mallocs;
  r->placement_checked = p->placement_checked;
  r->placement_bump_bytes = p->placement_bump;
  r->spread_ooms = p->worst_oom;
}
