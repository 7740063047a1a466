/* gpureplay_tune_reduce.c: --tune over a long trace: the search on a reduced trace (the
 * warm-up, the distinct kinds of training step, a few periods: gpureplay_tune_period.c), its
 * finalists replayed on the whole trace, and every figure shown from those whole replays.
 *
 * Why it can: a setting's peak over a training run is set by the warm-up and by the kinds of
 * step and their order, not by how many times the same step repeats; the search only ranks
 * settings, and ranking holds on the reduced trace where the kinds of step are all there.
 * Why it stays exact: the finalists (the reduced search's memory-vs-time front up to one past its
 * chosen point, its best two, the grid's best two, the default) are replayed over the whole
 * trace, the choice is made again over those whole-trace figures, and each shown point's
 * capacity is confirmed on the whole trace (the capacity the reduced trace gave, and 2 MiB
 * below it: fits, does not).
 *
 * Without a period, a long trace (past GR_TUNE_FULL_EVENTS under --tune-reduce=auto) gets the
 * sweep's grid on the whole trace (what `gpuanalyze report` did before: the search on every
 * event costs minutes), without the capacity bisection (a dozen more passes over the trace). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/tool/tune/gpureplay_tune.h"

enum { MAX_FINALISTS = 12, TOP_BEST = 2, TOP_GRID = 2, MAX_PROBES = 4 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What gr_tune_run sets up before its search, for the whole trace, with no point yet. */
static void init_whole(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_tune_opts_t *o, uint64_t first_ts,
                       uint64_t last_ts, gr_tune_t *t) {
  gr_tune_init(t, cfg, lt, o, last_ts > first_ts ? last_ts - first_ts : 0);
  t->dflt = t->best = t->best_grid = t->chosen = -1;
}

static int in_list(const char *const *sp, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (strcmp(sp[i], s) == 0) return 1;
  return 0;
}

static void add_spec(const char **sp, int *n, const char *s) {
  if (*n < MAX_FINALISTS && !in_list(sp, *n, s)) sp[(*n)++] = s;
}

/* The reduced search's own family points, best first (gr_tune_better). */
static int ranked(const gr_tune_t *r, int grid_only, int *ord) {
  int m = 0;
  size_t l = strlen(r->policy_name);
  for (int i = 0; i < r->n; i++) {
    const gr_tune_point_t *p = &r->pts[i];
    int fam = strncmp(p->spec, r->policy_name, l) == 0 && (p->spec[l] == '\0' || p->spec[l] == ':');
    if (p->ok && !p->pool && fam && (!grid_only || p->from_grid)) ord[m++] = i;
  }
  for (int i = 1; i < m; i++) {
    int k = ord[i], j = i;
    while (j > 0 && gr_tune_better(&r->pts[k], &r->pts[ord[j - 1]])) {
      ord[j] = ord[j - 1];
      j--;
    }
    ord[j] = k;
  }
  return m;
}

/* A capacity tried on the whole trace beside the finalists: fits or not. */
typedef struct probe {
  const char *spec;
  uint64_t cap;
  int fits;
} probe_t;

/* Replays specs over the whole trace into t's points (t->pts[i] for specs[i]) and *res, and
 * the probes in the same pass (one decode of a streamed trace for all). */
static gm_status_t confirm(gr_tune_ctx_t *c, const char *const *specs, int n, const int *from_grid, probe_t *pr,
                           int np, rp_result_t ***res_out, gm_err_t *err) {
  gr_tune_t *t = c->t;
  const char *all[MAX_FINALISTS + 2 * MAX_PROBES];
  uint64_t caps[MAX_FINALISTS + 2 * MAX_PROBES];
  for (int i = 0; i < n; i++) {
    all[i] = specs[i];
    caps[i] = 0;
  }
  for (int i = 0; i < np; i++) {
    all[n + i] = pr[i].spec;
    caps[n + i] = pr[i].cap;
  }
  rp_result_t **res = NULL;
  gr_config_t cfg = c->cfg;
  cfg.device_memory = t->device_memory; /* fractions stay shares of the same device */
  gm_status_t st = gr_tune_alloc_results(n + np, &res, err);
  if (st == GM_OK) st = gr_run_loaded_caps(&cfg, c->lt, all, caps, n + np, res, err);
  t->replays += (uint64_t)(n + np);
  if (st == GM_OK && !(t->pts = calloc((size_t)n + 1, sizeof *t->pts)))
    st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  if (st == GM_OK && !(t->front = calloc((size_t)n + 1, sizeof *t->front)))
    st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  for (int i = 0; st == GM_OK && i < n; i++) {
    gr_tune_point_t *p = &t->pts[t->n++];
    snprintf(p->spec, sizeof p->spec, "%s", specs[i]);
    p->from_grid = from_grid[i];
    gr_tune_point_set(t, p, res[i]);
  }
  for (int i = 0; st == GM_OK && i < np; i++) pr[i].fits = res[n + i]->ooms == 0;
  t->cap = t->n;
  if (st != GM_OK) {
    gr_tune_free_results(res, n + np);
    return st;
  }
  *res_out = res;
  return GM_OK;
}

/* The probes of a point's capacity: where the reduced trace needs it, and 2 MiB below. */
static gm_status_t plan_probes(gr_tune_ctx_t *rc, probe_t *pr, int *np, gm_err_t *err) {
  gr_tune_t *r = rc->t;
  int show[4] = {r->dflt, r->best, r->chosen, r->best_grid};
  for (int i = 0; i < 4; i++) {
    if (show[i] < 0) continue;
    gr_tune_point_t *q = &r->pts[show[i]];
    int dup = 0;
    for (int k = 0; k < *np; k++) dup |= strcmp(pr[k].spec, q->spec) == 0;
    if (dup || *np + 2 > 2 * MAX_PROBES) continue;
    gm_status_t st = gr_tune_point_needs(rc, q, err);
    if (st != GM_OK) return st;
    if (q->needs_above || q->needs_none || q->needs_bytes < (4u << 20)) continue;
    pr[(*np)++] = (probe_t){q->spec, q->needs_bytes, 0};
    pr[(*np)++] = (probe_t){q->spec, q->needs_bytes - (2u << 20), 0};
  }
  return GM_OK;
}

/* The points the report shows with a capacity: the default, the best, the chosen, the grid's.
 * A point whose probes bracket its capacity has it (the bisection, which assumes fitting is
 * monotone in the capacity, would end there); the others are bisected on the whole trace from
 * where the reduced trace needs them. */
static gm_status_t capacities(gr_tune_ctx_t *c, gr_tune_ctx_t *rc, const probe_t *pr, int np, gm_err_t *err) {
  gr_tune_t *t = c->t;
  int show[4] = {t->dflt, t->best, t->chosen, t->best_grid};
  gm_status_t st = GM_OK;
  for (int i = 0; st == GM_OK && i < 4; i++) {
    if (show[i] < 0) continue;
    gr_tune_point_t *p = &t->pts[show[i]];
    if (p->needs_bytes || p->needs_above || p->needs_none) continue;
    for (int k = 0; k + 1 < np && !(p->ok && p->peak_reserved == 0); k += 2)
      if (strcmp(pr[k].spec, p->spec) == 0 && pr[k].fits && !pr[k + 1].fits) p->needs_bytes = pr[k].cap;
    if (p->needs_bytes) continue;
    uint64_t hint = 0;
    int k = rc ? gr_tune_find(rc->t, p->spec) : -1;
    if (k >= 0) { /* where the reduced trace needs it: cheap to find, tried first */
      gr_tune_point_t *q = &rc->t->pts[k];
      st = gr_tune_point_needs(rc, q, err);
      if (st == GM_OK && !q->needs_above && !q->needs_none) hint = q->needs_bytes;
    }
    if (st == GM_OK) st = gr_tune_point_needs_hint(c, p, hint, err);
  }
  return st;
}

gm_status_t gr_tune_run_reduced(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_loaded_t *red,
                                const gr_period_t *per, const gr_tune_opts_t *o, gr_tune_t *t, gr_results_t *rs,
                                gm_err_t *err) {
  double t0 = now_s();
  /* 1. the search, on the reduced trace; capacities there only when asked for below */
  gr_tune_opts_t ro = *o;
  ro.capacity = 0;
  ro.trace_events = per->events; /* as many starts as the whole trace would get */
  gr_tune_t rt;
  if (cfg->progress)
    fprintf(stderr, "\rgpureplay: %s: searching on %zu of %" PRIu64 " events ...   ", lt->info.path, red->n_evs,
            per->events);
  gm_status_t st = gr_tune_run(cfg, red, &ro, &rt, err);
  if (st != GM_OK) {
    gr_tune_free(&rt);
    return st;
  }
  /* 2. the finalists */
  const char *sp[MAX_FINALISTS];
  int n = 0, grid[MAX_FINALISTS];
  int *ord = malloc(((size_t)rt.n + 1) * sizeof *ord);
  if (!ord) {
    gr_tune_free(&rt);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  if (rt.dflt >= 0) add_spec(sp, &n, rt.pts[rt.dflt].spec);
  if (rt.chosen >= 0) add_spec(sp, &n, rt.pts[rt.chosen].spec);
  if (rt.best >= 0) add_spec(sp, &n, rt.pts[rt.best].spec);
  int m = ranked(&rt, 1, ord);
  for (int i = 0; i < m && i < TOP_GRID; i++) add_spec(sp, &n, rt.pts[ord[i]].spec);
  m = ranked(&rt, 0, ord);
  for (int i = 0; i < m && i < TOP_BEST; i++) add_spec(sp, &n, rt.pts[ord[i]].spec);
  /* the front up to the chosen point and one past it: the whole trace's times may move the
   * choice along the front by one (a faster point past it only if the chosen one's time goes
   * over the budget); the rest of the front is shown by the reduced search only */
  for (int i = 0; i < rt.n_front; i++) {
    add_spec(sp, &n, rt.pts[rt.front[i]].spec);
    if (i > 0 && rt.front[i - 1] == rt.chosen) break;
  }
  free(ord);
  for (int i = 0; i < n; i++) {
    int k = gr_tune_find(&rt, sp[i]);
    grid[i] = k >= 0 && rt.pts[k].from_grid;
  }
  /* 3. the finalists over the whole trace, and the choice made again on those figures */
  init_whole(cfg, lt, o, per->first_ts, per->last_ts, t);
  t->events = per->events;
  t->search_events = red->n_evs;
  gr_tune_ctx_t c = {*cfg, lt, t, o, per->events};
  gr_tune_ctx_t rc = {*cfg, red, &rt, &ro, per->events};
  if (cfg->progress)
    fprintf(stderr, "\rgpureplay: %s: confirming %d finalists on the whole trace ...   ", lt->info.path, n);
  rp_result_t **res = NULL;
  probe_t pr[2 * MAX_PROBES];
  int np = 0;
  if (o->capacity) st = plan_probes(&rc, pr, &np, err);
  int n_conf = n + np;
  if (st == GM_OK) st = confirm(&c, sp, n, grid, pr, np, &res, err);
  if (st == GM_OK) {
    t->dflt = gr_tune_find(t, t->policy_name);
    st = gr_tune_choose(&c, err); /* worst cases spread on the whole trace */
    if (st == GM_OK && o->capacity) st = capacities(&c, &rc, pr, np, err);
  }
  if (st == GM_OK) {
    t->replays += rt.replays;
    t->rounds = rt.rounds;
    snprintf(t->method_buf, sizeof t->method_buf, "%s", rt.method ? rt.method : "the grid only");
    t->method = t->method_buf;
    snprintf(t->searched, sizeof t->searched,
             "searched on %zu of %" PRIu64 " events: period %" PRIu64 " events found at event %" PRIu64
             " (%" PRIu64 " steps, %d distinct; %" PRIu64 " kept); %d finalists confirmed on the whole trace",
             red->n_evs, per->events, per->period, per->warmup, per->steps, per->phases, per->kept_steps, n);
    t->seconds = now_s() - t0;
  }
  if (cfg->progress) fprintf(stderr, "\r%*s\r", 78, "");
  if (st == GM_OK && rs) st = gr_tune_results_have(cfg, lt, t, res, rs, err);
  gr_tune_free_results(res, n_conf);
  gr_tune_free(&rt);
  return st;
}

gm_status_t gr_tune_run_grid(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_period_t *per,
                             const gr_tune_opts_t *o, gr_tune_t *t, gr_results_t *rs, gm_err_t *err) {
  double t0 = now_s();
  init_whole(cfg, lt, o, per->first_ts, per->last_ts, t);
  t->events = per->events;
  t->search_events = t->events;
  const char *const *all = gr_sweep_grid_for(t->framework);
  const char *sp[64];
  int grid[64], n = 0;
  for (int i = 0; all[i] && n < 64; i++)
    if (gr_tune_runs_on_sim(all[i], t->device_memory)) {
      grid[n] = 1;
      sp[n++] = all[i];
    }
  gr_tune_ctx_t c = {*cfg, lt, t, o, t->events};
  rp_result_t **res = NULL;
  gm_status_t st = confirm(&c, sp, n, grid, NULL, 0, &res, err);
  if (st == GM_OK) {
    t->dflt = gr_tune_find(t, t->policy_name);
    st = gr_tune_choose(&c, err);
    /* no capacity bisection: a dozen passes over a trace this long (the sweep has none either) */
  }
  if (st == GM_OK) {
    t->method = "the grid only";
    snprintf(t->searched, sizeof t->searched,
             "no period found in %" PRIu64 " events (%.140s): the sweep's grid on the whole trace, not the search "
             "(--tune-reduce=never runs it on every event)",
             t->events, per->why[0] ? per->why : "no step repeats");
    t->seconds = now_s() - t0;
  }
  if (st == GM_OK && rs) st = gr_tune_results_have(cfg, lt, t, res, rs, err);
  gr_tune_free_results(res, n);
  return st;
}
