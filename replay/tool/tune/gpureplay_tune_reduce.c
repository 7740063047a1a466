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
 * below it: fits, does not; else bisected there).
 * What it replays of the whole trace (each replay of 10^8 events is seconds): the finalists in
 * two rounds, the runners-up the reduced figures put clearly behind their leader only when the
 * first round's smallest point is over the time budget (finalists(), settled()); the default's
 * capacity bisection beside the choice's spreads (dflt_cap_start: both cores busy where a
 * round replays one probe).
 *
 * Without a period, a long trace (past GR_TUNE_FULL_EVENTS under --tune-reduce=auto) gets the
 * sweep's grid on the whole trace (what `gpuanalyze report` did before: the search on every
 * event costs minutes), without the capacity bisection (a dozen more passes over the trace). */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/tool/tune/gpureplay_tune.h"

enum { MAX_FINALISTS = 12, MAX_SPECS = 64, TOP_BEST = 2, TOP_GRID = 2, MAX_PROBES = 4 };

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

/* The finalists, in the order the whole trace's points are kept (the choice's ties go to the
 * earlier): each is confirmed in the first round, or only when the first round's choice is not
 * settled (first[i] == 0). */
typedef struct finals {
  const char *sp[MAX_SPECS]; /* MAX_FINALISTS of a reduced search; the grid's, without a period */
  int first[MAX_SPECS];
  int grid[MAX_SPECS];
  rp_result_t *res[MAX_SPECS]; /* its whole-trace replay, once confirmed */
  int n;
} finals_t;

static void add_spec(finals_t *f, const char *s, int first) {
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->sp[i], s) == 0) {
      f->first[i] |= first;
      return;
    }
  if (f->n < MAX_FINALISTS) {
    f->first[f->n] = first;
    f->sp[f->n++] = s;
  }
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

/* The reduced trace separates q from lead, which it ranks first: q's figure is above lead's
 * worst case by more than a difference the advice acts on (gm_advice_floor). Such a runner-up
 * is confirmed only when the first round leaves the choice open: the reduced ranking is what
 * picked the finalists in the first place (every point outside them is left on it), and the
 * runners-up are there for near ties, which the whole trace may reorder. */
static int separated(const gr_tune_point_t *lead, const gr_tune_point_t *q) {
  uint64_t w = gr_tune_worst(lead);
  return lead->ok && q->ok && w != UINT64_MAX && q->peak_reserved > w && q->peak_reserved - w > gm_advice_floor(w);
}

/* The finalists of the reduced search rt: its default, chosen and best, the best two of the
 * grid and of the search, its front up to the chosen point and one past it (the whole trace's
 * times may move the choice along the front by one: a faster point past it only if the chosen
 * one's time goes over the budget). In the first round all but the runners-up the reduced
 * figures separate from their leader (all of them with all). */
static gm_status_t finalists(const gr_tune_t *rt, int all, finals_t *f, gm_err_t *err) {
  int *ord = malloc(((size_t)rt->n + 1) * sizeof *ord);
  if (!ord) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  memset(f, 0, sizeof *f);
  if (rt->dflt >= 0) add_spec(f, rt->pts[rt->dflt].spec, 1);
  if (rt->chosen >= 0) add_spec(f, rt->pts[rt->chosen].spec, 1);
  if (rt->best >= 0) add_spec(f, rt->pts[rt->best].spec, 1);
  for (int g = 1; g >= 0; g--) { /* the grid's, then the search's */
    int m = ranked(rt, g, ord);
    for (int i = 0; i < m && i < (g ? TOP_GRID : TOP_BEST); i++)
      add_spec(f, rt->pts[ord[i]].spec, all || i == 0 || !separated(&rt->pts[ord[0]], &rt->pts[ord[i]]));
  }
  for (int i = 0; i < rt->n_front; i++) { /* by memory: front[0] is the least */
    const gr_tune_point_t *lead = &rt->pts[rt->front[0]];
    add_spec(f, rt->pts[rt->front[i]].spec, all || i == 0 || !separated(lead, &rt->pts[rt->front[i]]));
    if (i > 0 && rt->front[i - 1] == rt->chosen) break;
  }
  free(ord);
  for (int i = 0; i < f->n; i++) {
    int k = gr_tune_find(rt, f->sp[i]);
    f->grid[i] = k >= 0 && rt->pts[k].from_grid;
  }
  return GM_OK;
}

/* A capacity tried on the whole trace beside the finalists: fits or not. */
typedef struct probe {
  const char *spec;
  uint64_t cap;
  int fits;
  gr_tune_span_t same; /* the capacities that give the same replay */
} probe_t;

/* One round over the whole trace: the finalists of the round (f->first[i] == round == 1) not
 * yet confirmed replayed, and the probes, in one pass (one decode of a streamed trace for all);
 * then t's points are f's confirmed ones in f's order (a point confirmed before keeps what its
 * spread found). */
static gm_status_t confirm(gr_tune_ctx_t *c, finals_t *f, int round, probe_t *pr, int np, gm_err_t *err) {
  gr_tune_t *t = c->t;
  const char *all[MAX_SPECS + 2 * MAX_PROBES];
  uint64_t caps[MAX_SPECS + 2 * MAX_PROBES];
  int of[MAX_SPECS], n = 0;
  for (int i = 0; i < f->n; i++)
    if (!f->res[i] && f->first[i] == (round == 1)) {
      of[n] = i;
      caps[n] = 0;
      all[n++] = f->sp[i];
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
  for (int i = 0; st == GM_OK && i < np; i++) {
    pr[i].fits = res[n + i]->ooms == 0;
    pr[i].same = gr_tune_span_of(t, res[n + i]);
  }
  for (int i = 0; st == GM_OK && i < n; i++) {
    f->res[of[i]] = res[i];
    res[i] = NULL;
  }
  gr_tune_free_results(res, n + np);
  gr_tune_point_t *pts = st == GM_OK ? calloc((size_t)f->n + 1, sizeof *pts) : NULL;
  int *fr = st == GM_OK ? calloc((size_t)f->n + 1, sizeof *fr) : NULL;
  if (st == GM_OK && (!pts || !fr)) st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  if (st != GM_OK) {
    free(pts);
    free(fr);
    return st;
  }
  int m = 0;
  for (int i = 0; i < f->n; i++) {
    if (!f->res[i]) continue;
    gr_tune_point_t *p = &pts[m++];
    int k = gr_tune_find(t, f->sp[i]);
    if (k >= 0) {
      *p = t->pts[k];
      continue;
    }
    snprintf(p->spec, sizeof p->spec, "%s", f->sp[i]);
    p->from_grid = f->grid[i];
    gr_tune_point_set(t, p, f->res[i]);
  }
  free(t->pts);
  free(t->front);
  t->pts = pts;
  t->front = fr;
  t->n = t->cap = m;
  t->n_front = 0;
  t->dflt = gr_tune_find(t, t->policy_name);
  return GM_OK;
}

/* The first round settles the choice when the safest point is within the time budget: a
 * faster point (the front past it, left for the second round) could be chosen only over a
 * point over budget. */
static int settled(const gr_tune_t *t) {
  return t->best >= 0 && t->chosen == t->best && t->pts[t->best].time_mid_s <= t->budget_s;
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
    pr[(*np)++] = (probe_t){q->spec, q->needs_bytes, 0, {0, 0}};
    pr[(*np)++] = (probe_t){q->spec, q->needs_bytes - (2u << 20), 0, {0, 0}};
  }
  return GM_OK;
}

/* One shown point's capacity: a point whose probes bracket it has it (the bisection, which
 * assumes fitting is monotone in the capacity, would end there); one whose probes both ran out
 * of memory (or both fit) is bisected on the whole trace above (below) them, as the bisection
 * from the hint would after replaying them again; the others from where the reduced trace needs
 * them. */
static gm_status_t capacity_of(gr_tune_ctx_t *c, gr_tune_ctx_t *rc, const probe_t *pr, int np, gr_tune_point_t *p,
                               gm_err_t *err) {
  if (p->needs_bytes || p->needs_above || p->needs_none) return GM_OK;
  uint64_t no = 0, yes = 0; /* what the probes found, where they do not bracket it */
  gr_tune_span_t no_same = {0, 0}, yes_same = {0, 0};
  for (int k = 0; k + 1 < np && !(p->ok && p->peak_reserved == 0); k += 2) {
    if (strcmp(pr[k].spec, p->spec) != 0) continue;
    if (pr[k].fits && !pr[k + 1].fits) p->needs_bytes = pr[k].cap;
    else if (!pr[k].fits && !pr[k + 1].fits) no = pr[k].cap, no_same = pr[k].same; /* it needs more on the whole trace */
    else if (pr[k].fits && pr[k + 1].fits) yes = pr[k + 1].cap, yes_same = pr[k + 1].same; /* ... or less */
  }
  if (p->needs_bytes) return GM_OK;
  if (no || yes) return gr_tune_point_needs_within(c, p, no, no_same, yes, yes_same, err);
  uint64_t hint = 0;
  int k = rc ? gr_tune_find(rc->t, p->spec) : -1;
  if (k >= 0) { /* where the reduced trace needs it: cheap to find, tried first */
    gr_tune_point_t *q = &rc->t->pts[k];
    gm_status_t st = gr_tune_point_needs(rc, q, err);
    if (st != GM_OK) return st;
    if (!q->needs_above && !q->needs_none) hint = q->needs_bytes;
  }
  return gr_tune_point_needs_hint(c, p, hint, err);
}

/* The points the report shows with a capacity: the default, the best, the chosen, the grid's
 * (each on its own: what one finds does not change another's). */
static gm_status_t capacities(gr_tune_ctx_t *c, gr_tune_ctx_t *rc, const probe_t *pr, int np, gm_err_t *err) {
  gr_tune_t *t = c->t;
  int show[4] = {t->dflt, t->best, t->chosen, t->best_grid};
  gm_status_t st = GM_OK;
  for (int i = 0; st == GM_OK && i < 4; i++)
    if (show[i] >= 0) st = capacity_of(c, rc, pr, np, &t->pts[show[i]], err);
  return st;
}

/* The default's capacity beside the choice (issue 28 item 2): it needs only the first round's
 * replays and probes, and the choice's spreads need nothing of it, so on a streamed trace the
 * bisection's rounds (often one probe, one core replaying while another decodes) fill the core
 * the spread pass leaves. The thread works on a copy of the point and of the tuner's counters
 * (its replays added after), and on the reduced search's point, which the choice never reads;
 * the answer is written back into the whole trace's default after the join, before the other
 * shown points' capacities: the same answers and the same replays as one after the other. */
typedef struct dflt_cap {
  gr_tune_ctx_t c, rc;
  gr_tune_t t, rt; /* copies: their own replay counters */
  const probe_t *pr;
  int np;
  gr_tune_point_t p;
  gm_status_t st;
  gm_err_t err;
  pthread_t tid;
  int started;
} dflt_cap_t;

static void *dflt_cap_worker(void *arg) {
  dflt_cap_t *d = arg;
  d->st = capacity_of(&d->c, &d->rc, d->pr, d->np, &d->p, &d->err);
  return NULL;
}

static void dflt_cap_start(dflt_cap_t *d, const gr_tune_ctx_t *c, const gr_tune_ctx_t *rc, const probe_t *pr, int np) {
  memset(d, 0, sizeof *d);
  const gr_tune_t *t = c->t;
  if (t->dflt < 0 || c->cfg.jobs < 2) return;
  d->t = *t;
  d->t.pts = NULL; /* the copy reads none of the points, and counts its own replays */
  d->t.front = NULL;
  d->t.n = d->t.cap = d->t.n_front = 0;
  d->t.replays = 0;
  d->rt = *rc->t; /* its points shared: the choice reads none of them */
  d->rt.replays = 0;
  d->c = *c;
  d->c.t = &d->t;
  d->rc = *rc;
  d->rc.t = &d->rt;
  d->pr = pr;
  d->np = np;
  d->p = t->pts[t->dflt];
  d->started = pthread_create(&d->tid, NULL, dflt_cap_worker, d) == 0;
}

/* After the join: the default's answer in t (found by its spec: a second round rebuilds t's
 * points), the thread's replays counted. */
static gm_status_t dflt_cap_join(dflt_cap_t *d, gr_tune_t *t, gr_tune_t *rt, gm_status_t st, gm_err_t *err) {
  if (!d->started) return st;
  pthread_join(d->tid, NULL);
  d->started = 0;
  t->replays += d->t.replays;
  rt->replays += d->rt.replays;
  if (st != GM_OK) return st;
  if (d->st != GM_OK) return *err = d->err, d->st;
  int k = gr_tune_find(t, d->p.spec);
  /* a second round's points may raise the lower bound, where the bisection starts: then the
   * default is bisected again from there, as it would have been (not seen on any trace: the
   * bound is the peak live requested, the same for every setting that fits) */
  if (k >= 0 && d->t.lower_bound == t->lower_bound) {
    t->pts[k].needs_bytes = d->p.needs_bytes;
    t->pts[k].needs_above = d->p.needs_above;
    t->pts[k].needs_none = d->p.needs_none;
  }
  return GM_OK;
}

gm_status_t gr_tune_run_reduced(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_loaded_t *red,
                                const gr_period_t *per, const gr_tune_opts_t *o, gr_tune_t *t, gr_results_t *rs,
                                gm_err_t *err) {
  double t0 = now_s();
  gr_tune_times_t tt;
  gr_tune_times_start(&tt);
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
  gr_tune_times_mark(&tt, "search on the reduced trace", rt.replays);
  /* 2. the finalists */
  finals_t f;
  st = finalists(&rt, o->confirm_all, &f, err);
  if (st != GM_OK) {
    gr_tune_free(&rt);
    return st;
  }
  /* 3. the finalists over the whole trace, and the choice made again on those figures: those
   * the reduced figures leave in the race first, the rest only if that choice is not settled */
  init_whole(cfg, lt, o, per->first_ts, per->last_ts, t);
  t->events = per->events;
  t->search_events = red->n_evs;
  gr_tune_ctx_t c = {*cfg, lt, t, o, per->events};
  gr_tune_ctx_t rc = {*cfg, red, &rt, &ro, per->events};
  int n1 = 0;
  for (int i = 0; i < f.n; i++) n1 += f.first[i];
  if (cfg->progress)
    fprintf(stderr, "\rgpureplay: %s: confirming %d finalists on the whole trace ...   ", lt->info.path, n1);
  probe_t pr[2 * MAX_PROBES];
  int np = 0, rounds = 1;
  if (o->capacity) st = plan_probes(&rc, pr, &np, err);
  gr_tune_times_mark(&tt, "capacities on the reduced", rt.replays);
  if (st == GM_OK) st = confirm(&c, &f, 1, pr, np, err);
  gr_tune_times_mark(&tt, "confirm on the whole", rt.replays + t->replays);
  dflt_cap_t dc; /* the default's capacity, beside the choice's spreads (and a second round) */
  if (st == GM_OK && o->capacity) dflt_cap_start(&dc, &c, &rc, pr, np);
  else memset(&dc, 0, sizeof dc);
  if (st == GM_OK) st = gr_tune_choose(&c, err); /* worst cases spread on the whole trace */
  gr_tune_times_mark(&tt, "choice (spread) on the whole", rt.replays + t->replays);
  if (st == GM_OK && n1 < f.n && !settled(t)) {
    rounds = 2;
    if (cfg->progress)
      fprintf(stderr, "\rgpureplay: %s: confirming %d more finalists on the whole trace ...   ", lt->info.path,
              f.n - n1);
    st = confirm(&c, &f, 2, NULL, 0, err);
    if (st == GM_OK) st = gr_tune_choose(&c, err);
    gr_tune_times_mark(&tt, "second round on the whole", rt.replays + t->replays);
  }
  st = dflt_cap_join(&dc, t, &rt, st, err);
  gr_tune_times_mark(&tt, "default's capacity (beside)", rt.replays + t->replays);
  if (st == GM_OK && o->capacity) st = capacities(&c, &rc, pr, np, err);
  gr_tune_times_mark(&tt, "capacities on the whole", rt.replays + t->replays);
  if (st == GM_OK) {
    t->replays += rt.replays;
    t->rounds = rt.rounds;
    snprintf(t->method_buf, sizeof t->method_buf, "%s", rt.method ? rt.method : "the grid only");
    t->method = t->method_buf;
    int w = snprintf(t->searched, sizeof t->searched,
                     "searched on %zu of %" PRIu64 " events: period %" PRIu64 " events found at event %" PRIu64
                     " (%" PRIu64 " steps, %d distinct; %" PRIu64 " kept); %d finalists confirmed on the whole trace",
                     red->n_evs, per->events, per->period, per->warmup, per->steps, per->phases, per->kept_steps,
                     t->n);
    if (w > 0 && (size_t)w < sizeof t->searched && t->n < f.n)
      snprintf(t->searched + w, sizeof t->searched - (size_t)w,
               " (%d more ranked clearly behind on the steady state, not needed: the smallest is within the budget)",
               f.n - t->n);
    else if (w > 0 && (size_t)w < sizeof t->searched && rounds == 2)
      snprintf(t->searched + w, sizeof t->searched - (size_t)w, " (in two rounds)");
    t->seconds = now_s() - t0;
  }
  if (cfg->progress) fprintf(stderr, "\r%*s\r", 78, "");
  rp_result_t *have[MAX_SPECS];
  for (int i = 0, k = 0; i < f.n; i++)
    if (f.res[i]) have[k++] = f.res[i];
  if (st == GM_OK && rs) st = gr_tune_results_have(cfg, lt, t, have, rs, err);
  gr_tune_times_mark(&tt, "results", rt.replays + t->replays);
  for (int i = 0; i < f.n; i++) free(f.res[i]);
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
  finals_t f;
  memset(&f, 0, sizeof f);
  for (int i = 0; all[i] && f.n < MAX_SPECS; i++)
    if (gr_tune_runs_on_sim(all[i], t->device_memory)) {
      f.grid[f.n] = f.first[f.n] = 1;
      f.sp[f.n++] = all[i];
    }
  gr_tune_ctx_t c = {*cfg, lt, t, o, t->events};
  gm_status_t st = confirm(&c, &f, 1, NULL, 0, err);
  if (st == GM_OK) {
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
  rp_result_t *have[MAX_SPECS];
  for (int i = 0; i < f.n; i++) have[i] = f.res[i];
  if (st == GM_OK && rs) st = gr_tune_results_have(cfg, lt, t, have, rs, err);
  for (int i = 0; i < f.n; i++) free(f.res[i]);
  return st;
}
