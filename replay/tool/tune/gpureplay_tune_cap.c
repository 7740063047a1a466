/* gpureplay_tune_cap.c: the capacity answers of gpureplay --tune: the smallest capacity (2 MiB
 * steps, the recorded context inside it) a point's setting replays in without an OOM, by
 * bisection between one that runs out of memory and one that fits (it takes fitting to be
 * monotone in the capacity; where it is not, the answer is the boundary the bisection's own
 * steps lead to).
 *
 * What a replay within one capacity tells of others: the simulator's capacity only decides
 * whether each of its memory-taking calls succeeds (used + size within it), so every capacity
 * from the most the replay used to one less than the least a refused call needed gives the
 * very same replay (rp_result_t.same_capacity_*), the same OOM or none. The bisection takes the
 * same steps as without that, but a step some replay already answered for (the point's own
 * unlimited replay answers for every capacity from what it used up) is not replayed: the
 * answer is the bisection's, whether fitting is monotone or not, with fewer replays.
 *
 * Workload: at 10^8 events a replay is seconds, and a streamed trace is decoded once per round
 * for all of the round's capacities (gr_run_loaded_caps); probes keep no per-request figures
 * (peak_only) and end at their first OOM (stop_at_oom). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/tune/gpureplay_tune.h"

enum { MAX_ROUND = 8 };

/* One capacity per replay (gr_run_loaded takes one capacity): a thread for each (one after
 * the other with --jobs=1). */
typedef struct cap_job {
  gr_tune_ctx_t *c;
  const char *spec;
  uint64_t cap;
  int fits;
  gr_tune_span_t same;
  gm_status_t st;
  gm_err_t err;
} cap_job_t;

static void *cap_worker(void *arg) {
  cap_job_t *j = arg;
  rp_result_t **res = NULL;
  const char *sp[1] = {j->spec};
  gr_tune_ctx_t c1 = *j->c;
  c1.cfg.jobs = 1;
  c1.cfg.stop_at_oom = 1; /* only `fits` is read */
  if ((j->st = gr_tune_alloc_results(1, &res, &j->err)) != GM_OK) return NULL;
  j->st = gr_tune_replay(&c1, j->cap, sp, 1, res, &j->err);
  if (j->st == GM_OK) {
    j->fits = res[0]->ooms == 0;
    j->same = gr_tune_span_of(j->c->t, res[0]);
  }
  gr_tune_free_results(res, 1);
  return NULL;
}

/* A trace read from its file (too large for memory): every capacity in one decode of it. */
static gm_status_t fits_streamed(gr_tune_ctx_t *c, const char *spec, const uint64_t *x, int n, int *fits,
                                 gr_tune_span_t *same, gm_err_t *err) {
  const char *sp[MAX_ROUND];
  uint64_t caps[MAX_ROUND];
  rp_result_t **res = NULL;
  for (int i = 0; i < n; i++) {
    sp[i] = spec;
    caps[i] = x[i] << 21;
  }
  gr_config_t cfg = c->cfg;
  cfg.stop_at_oom = 1; /* only `fits` is read */
  cfg.device_memory = c->t->device_memory;
  gm_status_t st = gr_tune_alloc_results(n, &res, err);
  if (st == GM_OK) st = gr_run_loaded_caps(&cfg, c->lt, sp, caps, n, res, err);
  for (int i = 0; st == GM_OK && i < n; i++) {
    fits[i] = res[i]->ooms == 0;
    same[i] = gr_tune_span_of(c->t, res[i]);
  }
  gr_tune_free_results(res, n);
  c->t->replays += (uint64_t)n;
  return st;
}

gm_status_t gr_tune_cap_fits(gr_tune_ctx_t *c, const char *spec, const uint64_t *x, int n, int *fits,
                             gr_tune_span_t *same, gm_err_t *err) {
  if (n > MAX_ROUND) return gm_err_set(err, GM_ERR_INVAL, "%d capacities in one round (at most %d)", n, MAX_ROUND);
  if (!c->lt->evs && c->lt->n_evs == 0 && n > 1) return fits_streamed(c, spec, x, n, fits, same, err);
  cap_job_t jobs[MAX_ROUND];
  pthread_t tid[MAX_ROUND];
  int started[MAX_ROUND] = {0};
  for (int i = 0; i < n; i++) {
    jobs[i] = (cap_job_t){c, spec, x[i] << 21, 0, {0, 0}, GM_OK, {0}};
    if (i > 0 && c->cfg.jobs > 1) started[i] = pthread_create(&tid[i], NULL, cap_worker, &jobs[i]) == 0;
  }
  cap_worker(&jobs[0]);
  for (int i = 1; i < n; i++) {
    if (started[i]) pthread_join(tid[i], NULL);
    else cap_worker(&jobs[i]);
  }
  c->t->replays += (uint64_t)n;
  for (int i = 0; i < n; i++) {
    if (jobs[i].st != GM_OK) {
      *err = jobs[i].err;
      return jobs[i].st;
    }
    fits[i] = jobs[i].fits;
    same[i] = jobs[i].same;
  }
  return GM_OK;
}

/* What the replays so far said: each a span of capacities (2 MiB units) that fit, or that run
 * out of memory. */
enum { MAX_KNOWN = 96 };
typedef struct known {
  gr_tune_span_t s[MAX_KNOWN];
  int fits[MAX_KNOWN];
  int n;
} known_t;

static void remember(known_t *k, uint64_t x, int fits, gr_tune_span_t s) {
  if (!(s.lo && s.lo <= x && x <= s.hi)) s.lo = s.hi = x; /* only the capacity replayed */
  if (k->n == MAX_KNOWN) k->n--; /* the newest replaces the last */
  k->s[k->n] = s;
  k->fits[k->n++] = fits;
}

static int lookup(const known_t *k, uint64_t x, int *fits) {
  for (int i = 0; i < k->n; i++)
    if (k->s[i].lo <= x && x <= k->s[i].hi) return *fits = k->fits[i], 1;
  return 0;
}

/* The bisection's fits (gr_tune_fits_fn) over capacities x (2 MiB units, rounded up): what is
 * known is not replayed; the rest (each step once) replayed together, in one round. */
typedef struct cap_arg {
  const char *spec;
  known_t *k;
} cap_arg_t;

static gm_status_t cap_fits_known(gr_tune_ctx_t *c, const void *arg, const double *x, int n, int *fits,
                                  gm_err_t *err) {
  const cap_arg_t *a = arg;
  uint64_t todo[MAX_ROUND];
  int m = 0;
  for (int i = 0; i < n && i < MAX_ROUND; i++) {
    uint64_t u = (uint64_t)ceil(x[i]);
    int f, dup = lookup(a->k, u, &f);
    for (int j = 0; j < m && !dup; j++) dup = todo[j] == u;
    if (!dup) todo[m++] = u;
  }
  if (m) {
    int f[MAX_ROUND];
    gr_tune_span_t s[MAX_ROUND];
    gm_status_t st = gr_tune_cap_fits(c, a->spec, todo, m, f, s, err);
    if (st != GM_OK) return st;
    for (int j = 0; j < m; j++) remember(a->k, todo[j], f[j], s[j]);
  }
  for (int i = 0; i < n; i++) lookup(a->k, (uint64_t)ceil(x[i]), &fits[i]);
  return GM_OK;
}

/* The smallest capacity (2 MiB steps) the point's setting fits in: between the job's lower
 * bound and a capacity that fits (from its unlimited peak, doubled until it fits). hint (in
 * 2 MiB units, 0: none): where a search over a reduced trace found it; it and one step below
 * are tried first, and when they bracket it that is the answer (the bisection assumes fitting
 * is monotone in the capacity, so it would end there too). no/yes (units, 0: none): capacities
 * already replayed that ran out of memory / fit, *_same the capacities that give their
 * replays. The steps tried are the bisection's; those a replay before answered for (the
 * point's own included) are not replayed: the answer is the bisection's, always. */
static gm_status_t needs(gr_tune_ctx_t *c, gr_tune_point_t *p, uint64_t hint, uint64_t no, gr_tune_span_t no_same,
                         uint64_t yes, gr_tune_span_t yes_same, gm_err_t *err) {
  if (p->needs_bytes || p->needs_above || p->needs_none) return GM_OK;
  if (p->ok && p->peak_reserved == 0) {
    /* Nothing reserved: not "needs 2 MiB" (the bisection's lowest step) when nothing is needed
     * (no request, no external memory): a device of one byte tells. */
    cap_job_t j = {c, p->spec, 1, 0, {0, 0}, GM_OK, {0}};
    cap_worker(&j);
    c->t->replays++;
    if (j.st != GM_OK) return *err = j.err, j.st;
    if (j.fits) return p->needs_none = 1, GM_OK;
  }
  known_t *k = calloc(1, sizeof *k);
  if (!k) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  cap_arg_t arg = {p->spec, k};
  if (p->same.lo) remember(k, p->same.lo, p->ok, p->same); /* the point's own replay */
  /* A point that ran out of memory within the search's device starts above that device. */
  uint64_t top = p->ok ? p->peak_reserved : c->t->capacity > p->peak_reserved ? c->t->capacity : p->peak_reserved;
  top += c->t->context_bytes; /* every capacity tried holds the recorded context too */
  double lo = (double)(c->t->lower_bound >> 21), hi = (double)((top + (2u << 20) - 1) >> 21) + 1;
  if (lo >= 1) lo -= 1;
  int fits = 0;
  /* capacities already replayed (2 MiB units, 0: none): `no` ran out of memory, `yes` did not */
  if (no && (double)no > lo && (double)no < hi) lo = (double)no;
  if (yes && (double)yes > lo && (double)yes <= hi) hi = (double)yes, fits = 1;
  if (no) remember(k, no, 0, no_same);
  if (yes) remember(k, yes, 1, yes_same);
  gm_status_t st = GM_OK;
  if (hint > 1 && (double)hint > lo && (double)hint <= hi) {
    double x[2] = {(double)(hint - 1), (double)hint};
    int f[2];
    if ((st = cap_fits_known(c, &arg, x, 2, f, err)) != GM_OK) goto out;
    if (f[1] && !f[0]) {
      p->needs_bytes = hint << 21;
      goto out;
    }
    if (f[0]) hi = x[0], fits = 1;
    else if (f[1]) hi = x[1], fits = 1;
    else lo = x[1];
  }
  for (int tries = 0; tries < 6 && !fits; tries++) {
    /* hi, and the bisection's first round below it, together: when hi fits (its unlimited peak
     * does), that round is the bisection's own (the same points, one round sooner) */
    double x[1 + GR_TUNE_BISECT_POINTS];
    int f[1 + GR_TUNE_BISECT_POINTS], n = hi - lo > 1.0 ? GR_TUNE_BISECT_POINTS : 0;
    x[0] = hi;
    gr_tune_round_points(lo, hi, n, x + 1);
    if ((st = cap_fits_known(c, &arg, x, 1 + n, f, err)) != GM_OK) goto out;
    if (!f[0]) {
      lo = hi;
      hi *= 2;
      continue;
    }
    fits = 1;
    gr_tune_narrow(x + 1, f + 1, n, &lo, &hi);
  }
  if (!fits) {
    p->needs_above = 1;
    p->needs_bytes = (uint64_t)lo << 21;
    goto out;
  }
  double x;
  st = gr_tune_bisect(c, &arg, cap_fits_known, lo, hi, 1.0, &x, err);
  if (st == GM_OK) p->needs_bytes = (uint64_t)ceil(x) << 21;
out:
  free(k);
  return st;
}

static const gr_tune_span_t kNone = {0, 0};

gm_status_t gr_tune_point_needs(gr_tune_ctx_t *c, gr_tune_point_t *p, gm_err_t *err) {
  return needs(c, p, 0, 0, kNone, 0, kNone, err);
}

gm_status_t gr_tune_point_needs_hint(gr_tune_ctx_t *c, gr_tune_point_t *p, uint64_t hint_bytes, gm_err_t *err) {
  return needs(c, p, hint_bytes >> 21, 0, kNone, 0, kNone, err);
}

gm_status_t gr_tune_point_needs_within(gr_tune_ctx_t *c, gr_tune_point_t *p, uint64_t no_bytes, gr_tune_span_t no_same,
                                       uint64_t yes_bytes, gr_tune_span_t yes_same, gm_err_t *err) {
  return needs(c, p, 0, no_bytes >> 21, no_same, yes_bytes >> 21, yes_same, err);
}
