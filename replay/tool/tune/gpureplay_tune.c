/* gpureplay_tune.c: gpureplay --tune: the memo of replayed settings, the time-cost model, the
 * JAX search (bisection on the memory fraction) and the choice (Pareto front memory vs time,
 * the smallest memory within a time budget). The PyTorch search is gpureplay_tune_pt.c; the
 * memo and the time-cost model both searches use are gpureplay_tune_eval.c; the capacity
 * answers gpureplay_tune_cap.c.
 *
 * Every candidate is a replay of the events decoded once (gr_trace_load); candidates of one
 * step go to gr_run_loaded together, so --jobs cores replay them side by side. A setting is
 * replayed once: the memo is keyed by its spec.
 *
 * Objective: peak reserved without an OOM. The search steps on point figures (what the sweep
 * ranks by); the choice compares candidates on their worst case (issue 25: the timing range,
 * the bump pointer's placement, a predicted trace's uncertain sizes), replayed only for those
 * that may win. Time is the driver time the setting's calls would take on a real GPU, from the
 * latencies of gpureplay_tune_eval.c; it is a cost beside memory, never folded into it. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/tool/tune/gpureplay_tune.h"

/* The frameworks whose settings are a share of the device (JAX, TensorFlow) or a limit (CuPy):
 * a value x in (0, 1] fits when the setting template, with x written in, replays without an
 * OOM. CuPy's limit is in bytes: x times the device. */
typedef struct share_tmpl {
  const char *tmpl; /* one "%s" for the value */
  int bytes;        /* write x as bytes of the device, not as a fraction */
} share_tmpl_t;

typedef struct share_arg {
  const share_tmpl_t *st;
  uint64_t device;
} share_arg_t;

static void share_spec(const share_arg_t *a, double x, char *out, size_t n) {
  char v[32];
  if (a->st->bytes) snprintf(v, sizeof v, "%" PRIu64, (uint64_t)ceil(x * (double)a->device));
  else snprintf(v, sizeof v, "%.6f", x);
  snprintf(out, n, a->st->tmpl, v);
}

static gm_status_t share_fits(gr_tune_ctx_t *c, const void *arg, const double *x, int n, int *fits, gm_err_t *err) {
  char specs[8][512];
  const char *sp[8] = {NULL};
  int idx[8];
  for (int i = 0; i < n && i < 8; i++) {
    share_spec(arg, x[i], specs[i], sizeof specs[i]);
    sp[i] = specs[i];
  }
  gm_status_t st = gr_tune_eval(c, sp, n, idx, err);
  for (int i = 0; st == GM_OK && i < n; i++) fits[i] = c->t->pts[idx[i]].ok;
  return st;
}


static gm_status_t tune_shares(gr_tune_ctx_t *c, const share_tmpl_t *tmpl, int n, const char *method, gm_err_t *err) {
  if (c->o->no_limits) { /* every setting searched here is a hard limit */
    c->t->method = "the grid only (--no-limits: its settings to search are hard limits)";
    return GM_OK;
  }
  /* Within 2 MiB of the device (JAX rounds its limit up to 2 MiB anyway). */
  double tol = (double)(2ull << 20) / (double)c->t->device_memory;
  int any = 0;
  for (int i = 0; i < n; i++) {
    share_arg_t a = {&tmpl[i], c->t->device_memory};
    char top[512];
    const char *sp[1] = {top};
    int idx;
    share_spec(&a, 1.0, top, sizeof top);
    if (!gr_tune_runs_on_sim(top, c->t->device_memory)) continue; /* a key this build's policy lacks */
    any = 1;
    gm_status_t st = gr_tune_eval(c, sp, 1, &idx, err);
    if (st != GM_OK) return st;
    if (!c->t->pts[idx].ok) continue; /* not even the whole device: nothing to bisect */
    double f;
    st = gr_tune_bisect(c, &a, share_fits, 0.0, 1.0, tol, &f, err);
    if (st != GM_OK) return st;
  }
  c->t->method = any ? method : "the grid only (this build's policy takes none of the searched keys)";
  return GM_OK;
}

static gm_status_t tune_jax(gr_tune_ctx_t *c, gm_err_t *err) {
  static const share_tmpl_t t[] = {
      {"jax:XLA_PYTHON_CLIENT_MEM_FRACTION=%s", 0},
      {"jax:XLA_PYTHON_CLIENT_PREALLOCATE=false,XLA_PYTHON_CLIENT_MEM_FRACTION=%s", 0},
  };
  return tune_shares(c, t, 2, "bisection on XLA_PYTHON_CLIENT_MEM_FRACTION (preallocated, and as growth's limit)", err);
}

static gm_status_t tune_tf(gr_tune_ctx_t *c, gm_err_t *err) {
  static const share_tmpl_t t[] = {
      {"tf:per_process_gpu_memory_fraction=%s", 0},
      {"tf:TF_FORCE_GPU_ALLOW_GROWTH=true,per_process_gpu_memory_fraction=%s", 0},
  };
  return tune_shares(c, t, 2, "bisection on per_process_gpu_memory_fraction (preallocated, and as growth's limit)", err);
}

static gm_status_t tune_cupy(gr_tune_ctx_t *c, gm_err_t *err) {
  static const share_tmpl_t t[] = {{"cupy:CUPY_GPU_MEMORY_LIMIT=%s", 1}};
  return tune_shares(c, t, 1, "bisection on CUPY_GPU_MEMORY_LIMIT", err);
}

/* ---- the choice ---------------------------------------------------------------------------- */

/* The framework's own settings; XLA's platform allocator (a driver call per buffer, the floor
 * like `direct`) is shown by the sweep, not advised (as gpuanalyze's recommendation); so is a
 * setting served by the driver's stream-ordered pool (choose(): pool), whose simulated figure
 * is a wide range (--sweep's async_pool range), measured only on a real GPU. */
static int family(const gr_tune_t *t, const char *spec) {
  size_t l = strlen(t->policy_name);
  if (strstr(spec, "ALLOCATOR=platform")) return 0;
  return strncmp(spec, t->policy_name, l) == 0 && (spec[l] == '\0' || spec[l] == ':');
}

/* Sort idx[0..m) by key: insertion sort, stable, no global context (m is a few hundred). */
static void sort_by(const gr_tune_t *t, int *idx, int m, int (*before)(const gr_tune_t *, int, int)) {
  for (int i = 1; i < m; i++) {
    int k = idx[i], j = i;
    while (j > 0 && before(t, k, idx[j - 1])) {
      idx[j] = idx[j - 1];
      j--;
    }
    idx[j] = k;
  }
}

/* The choice's order on point figures: gr_tune_safer's with every worst case at its point. */
static int point_before(const gr_tune_t *t, int a, int b) {
  return gr_tune_safer_at(&t->pts[a], t->pts[a].peak_reserved, &t->pts[b], t->pts[b].peak_reserved);
}

/* Can p be safer than q? Only if it would be with its worst case at its point figure (a worst
 * case is never below it). */
static int may_beat(const gr_tune_point_t *p, const gr_tune_point_t *q) {
  return gr_tune_safer_at(p, p->peak_reserved, q, gr_tune_worst(q));
}

static int time_before(const gr_tune_t *t, int a, int b) {
  if (t->pts[a].time_mid_s != t->pts[b].time_mid_s) return t->pts[a].time_mid_s < t->pts[b].time_mid_s;
  return point_before(t, a, b);
}

enum { PICK_ALL, PICK_GRID, PICK_BUDGET };

/* The safest of ord's points that pass `which` (ord: point_before). A point's worst case is
 * never below its point figure, so the walk stops at the first point that could not beat the
 * one it holds even with no spread at all: only the points that may win are spread (on a
 * trace where the replay can tell, the first). */
static gm_status_t pick(gr_tune_ctx_t *c, const int *ord, int m, int which, int *out, gm_err_t *err) {
  const gr_tune_t *t = c->t;
  *out = -1;
  for (int k = 0; k < m; k++) {
    const gr_tune_point_t *p = &t->pts[ord[k]];
    if ((which == PICK_GRID && !p->from_grid) || (which == PICK_BUDGET && p->time_mid_s > t->budget_s)) continue;
    if (*out >= 0 && !may_beat(p, &t->pts[*out])) break;
    gm_status_t st = gr_tune_spread(c, &ord[k], 1, err);
    if (st != GM_OK) return st;
    if (*out < 0 || gr_tune_safer(p, &t->pts[*out])) *out = ord[k];
  }
  return GM_OK;
}

/* The front of worst case against time: walked from the fastest, a point is on it when its
 * worst case is below every faster point's (one whose figure is not below that is not
 * spread). Stored by memory, the fastest last. */
static gm_status_t front(gr_tune_ctx_t *c, int *ord, int m, gm_err_t *err) {
  gr_tune_t *t = c->t;
  sort_by(t, ord, m, time_before);
  uint64_t least = UINT64_MAX;
  t->n_front = 0;
  for (int k = 0; k < m; k++) {
    const gr_tune_point_t *p = &t->pts[ord[k]];
    if (p->peak_reserved >= least) continue;
    gm_status_t st = gr_tune_spread(c, &ord[k], 1, err);
    if (st != GM_OK) return st;
    uint64_t w = gr_tune_worst(p);
    if (w < least) {
      least = w;
      t->front[t->n_front++] = ord[k];
    }
  }
  for (int i = 0, j = t->n_front - 1; i < j; i++, j--) { /* by memory */
    int x = t->front[i];
    t->front[i] = t->front[j];
    t->front[j] = x;
  }
  return GM_OK;
}

/* The points the choice below spreads whatever their spreads find, spread together (one pool:
 * the cores replay them side by side, not one point's few replays at a time): the first of
 * ord (point_before) that each pick takes, the default, and the front of point figures walked
 * from the fastest (a worst case is never below its point figure, so the front walk's bar is
 * never below this one's: each point under this bar is under that one too). The choice then
 * spreads what else it needs, one at a time, as before; what it finds is the same. */
static gm_status_t prespread(gr_tune_ctx_t *c, const int *ord, int m, gm_err_t *err) {
  const gr_tune_t *t = c->t;
  int *idx = malloc((size_t)(m + 2) * sizeof *idx), *byt = malloc((size_t)(m + 1) * sizeof *byt), n = 0;
  if (!idx || !byt) {
    free(idx);
    free(byt);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  int got[3] = {0, 0, 0};
  for (int k = 0; k < m; k++) {
    const gr_tune_point_t *p = &t->pts[ord[k]];
    int take = !got[PICK_ALL] || (!got[PICK_GRID] && p->from_grid) || (!got[PICK_BUDGET] && p->time_mid_s <= t->budget_s);
    got[PICK_ALL] = 1;
    got[PICK_GRID] |= p->from_grid;
    got[PICK_BUDGET] |= p->time_mid_s <= t->budget_s;
    if (take) idx[n++] = ord[k];
  }
  memcpy(byt, ord, (size_t)m * sizeof *byt);
  sort_by(t, byt, m, time_before);
  uint64_t least = UINT64_MAX;
  for (int k = 0; k < m; k++)
    if (t->pts[byt[k]].peak_reserved < least) {
      least = t->pts[byt[k]].peak_reserved;
      idx[n++] = byt[k];
    }
  if (t->dflt >= 0 && t->pts[t->dflt].ok) idx[n++] = t->dflt;
  gm_status_t st = gr_tune_spread(c, idx, n, err); /* a point twice is spread once */
  free(idx);
  free(byt);
  return st;
}

/* The choice (issue 25): candidates are compared on their worst case (timing range, placement
 * spread, a predicted trace's uncertain sizes), then their point figure, then driver calls;
 * the search before stepped on point figures. The chosen point is advised over the default
 * only when its worst case is below the default's best case by more than gm_advice_floor. */
static gm_status_t choose(gr_tune_ctx_t *c, gm_err_t *err) {
  gr_tune_t *t = c->t;
  t->best = t->best_grid = t->chosen = -1;
  t->keep_default = 0;
  int *ord = malloc((size_t)(t->n + 1) * sizeof *ord), m = 0;
  if (!ord) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  for (int i = 0; i < t->n; i++)
    if (t->pts[i].ok && !t->pts[i].pool && family(t, t->pts[i].spec)) ord[m++] = i;
  sort_by(t, ord, m, point_before);
  gm_status_t st = prespread(c, ord, m, err);
  if (st == GM_OK) st = pick(c, ord, m, PICK_ALL, &t->best, err);
  if (st == GM_OK) st = pick(c, ord, m, PICK_GRID, &t->best_grid, err);
  if (st == GM_OK) st = pick(c, ord, m, PICK_BUDGET, &t->chosen, err);
  if (st == GM_OK) st = front(c, ord, m, err);
  if (st == GM_OK && t->chosen < 0 && t->n_front > 0) t->chosen = t->front[t->n_front - 1]; /* the fastest */
  if (st == GM_OK && t->chosen < 0) t->chosen = t->best;
  if (st == GM_OK && t->dflt >= 0 && t->pts[t->dflt].ok) st = gr_tune_spread(c, &t->dflt, 1, err);
  if (st == GM_OK && t->chosen >= 0 && t->dflt >= 0 && t->chosen != t->dflt && t->pts[t->dflt].ok) {
    const gr_tune_point_t *z = &t->pts[t->chosen], *d = &t->pts[t->dflt];
    uint64_t w = gr_tune_worst(z);
    t->keep_default = !(w < d->best_bytes && d->best_bytes - w > gm_advice_floor(d->peak_reserved));
  }
  free(ord);
  return st;
}

gm_status_t gr_tune_choose(gr_tune_ctx_t *c, gm_err_t *err) { return choose(c, err); }

/* Grid entries that need a real GPU (the driver's pool) are left out, as --sweep does. */
int gr_tune_runs_on_sim(const char *spec, uint64_t total) {
  rp_backend_t *b = NULL;
  rp_sim_opts_t so = {0, 0, total, RP_POOL_HEAP, 0};
  if (rp_sim_backend_create(&so, &b, NULL) != GM_OK) return 0;
  const rp_policy_ops_t *ops = NULL;
  rp_policy_t *p = NULL;
  int ok = rp_policy_create(spec, &b->drv, &ops, &p, NULL) == GM_OK;
  if (ok) ops->destroy(p);
  b->destroy(b);
  return ok;
}

void gr_tune_init(gr_tune_t *t, const gr_config_t *cfg, const gr_loaded_t *lt, const gr_tune_opts_t *o,
                  uint64_t duration_ns) {
  memset(t, 0, sizeof *t);
  /* cfg->capacity: the device the search assumes (a recorded OOM's, or --capacity); 0: none. */
  t->framework = gmt_framework_single(lt->info.frameworks);
  t->policy_name = t->framework == GMT_FW_JAX          ? "jax"
                    : t->framework == GMT_FW_TENSORFLOW ? "tf"
                    : t->framework == GMT_FW_CUPY       ? "cupy"
                                                        : "pytorch";
  t->device_memory = lt->info.device_memory;
  t->context_bytes = cfg->count_other == GR_OTHER_NO ? 0 : lt->info.context_bytes;
  t->capacity = cfg->capacity;
  t->duration_ns = duration_ns;
  t->budget_s = o->budget_fraction * (double)t->duration_ns * 1e-9;
  t->no_limits = o->no_limits;
}

gm_status_t gr_tune_run(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_tune_opts_t *o, gr_tune_t *t,
                        gm_err_t *err) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  gr_tune_init(t, cfg, lt, o, lt->n_evs > 1 ? lt->evs[lt->n_evs - 1].ts_ns - lt->evs[0].ts_ns : 0);
  gr_tune_ctx_t c = {*cfg, lt, t, o, o->trace_events};
  /* The grid first: the search must beat it, and the report says by how much. */
  const char *const *all = gr_sweep_grid_for(t->framework);
  const char *grid[64] = {NULL};
  int ng = 0;
  for (int i = 0; all[i] && ng < 64; i++)
    if (gr_tune_runs_on_sim(all[i], t->device_memory)) grid[ng++] = all[i];
  int *gi = calloc((size_t)ng + 1, sizeof *gi);
  if (!gi) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  gm_status_t st = gr_tune_eval(&c, grid, ng, gi, err);
  for (int i = 0; st == GM_OK && i < ng; i++) t->pts[gi[i]].from_grid = 1;
  free(gi);
  if (st == GM_OK) {
    if (t->framework == GMT_FW_JAX) st = tune_jax(&c, err);
    else if (t->framework == GMT_FW_TENSORFLOW) st = tune_tf(&c, err);
    else if (t->framework == GMT_FW_CUPY) st = tune_cupy(&c, err);
    else st = gr_tune_pytorch(&c, err);
  }
  if (st != GM_OK) return st;
  t->dflt = gr_tune_find(t, t->policy_name);
  if (!(t->front = calloc((size_t)t->n + 1, sizeof *t->front))) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  st = choose(&c, err);
  /* Capacity answers for the points shown: the default, the best, the chosen, the grid's
   * best and the front. */
  if (o->capacity) {
    int show[4] = {t->dflt, t->best, t->chosen, t->best_grid};
    for (int i = 0; st == GM_OK && i < 4; i++)
      if (show[i] >= 0) st = gr_tune_point_needs(&c, &t->pts[show[i]], err);
    for (int i = 0; st == GM_OK && i < t->n_front; i++) st = gr_tune_point_needs(&c, &t->pts[t->front[i]], err);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  t->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return st;
}

void gr_tune_free(gr_tune_t *t) {
  free(t->pts);
  free(t->front);
  memset(t, 0, sizeof *t);
}

gm_status_t gr_tune_results(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_tune_t *t, gr_results_t *rs,
                            gm_err_t *err) {
  return gr_tune_results_have(cfg, lt, t, NULL, rs, err);
}

gm_status_t gr_tune_results_have(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_tune_t *t,
                                 rp_result_t *const *have, gr_results_t *rs, gm_err_t *err) {
  const char **sp = calloc((size_t)t->n + 1, sizeof *sp);
  int *which = calloc((size_t)t->n + 1, sizeof *which);
  if (!sp || !which) {
    free(sp);
    free(which);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  int n = 0;
  for (int i = 0; i < t->n; i++) {
    int keep = t->pts[i].from_grid || i == t->dflt || i == t->best || i == t->chosen;
    for (int k = 0; k < t->n_front && !keep; k++) keep = t->front[k] == i;
    if (keep) {
      which[n] = i;
      sp[n++] = t->pts[i].spec;
    }
  }
  rp_result_t **res = NULL;
  gr_config_t c = *cfg;
  c.device_memory = t->device_memory; /* c.capacity: the search's own */
  gm_status_t st = have ? GM_OK : gr_tune_alloc_results(n, &res, err);
  if (st == GM_OK && !have) st = gr_run_loaded(&c, lt, sp, n, res, err);
  for (int i = 0; st == GM_OK && i < n; i++) {
    const gr_tune_point_t *p = &t->pts[which[i]];
    int w = which[i];
    gr_tune_note_t note = {w == t->chosen ? "chosen" : w == t->best ? "tuned" : w == t->dflt ? "default"
                           : p->from_grid ? "grid" : "front",
                           p->from_grid, p->needs_above ? 0 : p->needs_bytes, p->time_mid_s, p->time_hi_s,
                           t->budget_s, gr_tune_smallest_gpu(p), p->pool,
                           p->spread && !p->worst_oom ? p->worst_bytes : 0, p->spread ? p->best_bytes : 0,
                           p->spread && p->worst_oom, t->searched};
    rp_result_t *r = have ? have[w] : res[i];
    gr_tune_spread_into(p, r); /* what the choice counted, as gpureplay --json says it */
    st = gr_results_add(rs, &lt->info, r, err);
    if (st == GM_OK) st = gr_results_note_tune(rs, &note, err);
  }
  gr_tune_free_results(res, n);
  free(sp);
  free(which);
  return st;
}
