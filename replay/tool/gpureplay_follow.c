/* gpureplay_follow.c: the replays that follow a point replay: the timing range (the same
 * policy under the other timings of frees that wait on stream events, or the simulated async
 * pool's other reuse models) and the placement spread (a driver-placed policy again under a bump
 * pointer). What each runs depends on its point replay's result: either they are queued behind
 * the point replays in the same pool, each waiting for its own (gr_run_trace over events in
 * memory; the pool configures or skips them: grj_range_setup), or they run in a pool of their
 * own once the point results are known (a replay read from the file, the tuner:
 * gpureplay_run.c's grj_timing_range and grj_placement_spread). Which placement a policy's
 * replay uses (grj_addresses_for) is here too: the spread is what it decides. */
#include <stdlib.h>
#include <string.h>

#include "replay/tool/gpureplay.h"
#include "replay/tool/gpureplay_jobs.h"
#include "replay/engine/va_model.h"

/* The driver's placement is what the framework really gets: cuMemAlloc segments as the model
 * (va_model.h) places them, for the policies whose decisions depend on where a segment is
 * (PyTorch's and CuPy's best fit break ties by address, TF's BFC). XLA's BFC (`jax`, and `bfc`
 * / `prealloc` which model it) takes its regions as VMM maps in one reserved range, in
 * ascending order: a bump pointer is that placement (traces/recorded/jax is exact with it and
 * not with the cuMemAlloc model). `direct` and `async` never look at addresses: a bump pointer
 * gives the same figures at a constant cost per allocation (the model is linear in what is
 * live: a million live direct allocations would take hours). */
int grj_addresses_for(const gr_config_t *c, const char *spec) {
  if (c->addresses != RP_VA_DRIVER) return c->addresses;
  size_t n = strcspn(spec, ":");
  static const char *const ascending[] = {"jax", "bfc", "prealloc", "direct", "async"};
  for (size_t i = 0; i < sizeof ascending / sizeof ascending[0]; i++)
    if (strlen(ascending[i]) == n && !strncmp(spec, ascending[i], n)) return RP_VA_BUMP;
  return RP_VA_DRIVER;
}

/* Which range a policy's figure has: one that took its memory from the stream-ordered pool
 * (`async`, JAX's cuda_async, ...) on the simulator, the pool model's; any other policy of a
 * trace whose frees wait on stream events, the events' (engine_events.c). */
static int range_kind(const gr_config_t *cfg, const rp_result_t *r) {
  if (r->pool_allocs) return cfg->cuda_ordinal < 0 ? RP_RANGE_POOL : RP_RANGE_NONE;
  return r->event_frees ? RP_RANGE_EVENTS : RP_RANGE_NONE;
}

/* The timing range: the two other replays of every policy whose figure depends on timing
 * (variant 0: events early, or the pool ideal; variant 1: late, or the chunked same-stream
 * pool), folded into res[i] as a range. A trace whose waiting frees are all requests-mode ones
 * recorded them early already: no variant 0.
 *
 * grj_range_setup configures variant j->range_v for the point result r: 0 when it has none. */
int grj_range_setup(job_t *j, const rp_result_t *r) {
  int kind = range_kind(j->cfg, r);
  int v0 = kind == RP_RANGE_EVENTS && r->event_frees_requested == 0 ? 1 : 0;
  if (kind == RP_RANGE_NONE || j->range_v < v0) return 0;
  if (kind == RP_RANGE_EVENTS) j->event_timing = j->range_v == 0 ? RP_EVENTS_EARLY : RP_EVENTS_LATE;
  else j->pool_model = j->range_v == 0 ? RP_POOL_IDEAL : RP_POOL_CHUNKS | RP_POOL_SAME_STREAM;
  return 1;
}

/* A copy of point job pt as a job of role (its result in *res), over evs. */
static void follow(job_t *j, const job_t *pt, int role, const gmt_event_t *evs, size_t n_evs, rp_result_t *res) {
  *j = *pt;
  memset(&j->err, 0, sizeof j->err);
  j->st = GM_OK;
  j->has_reader_stats = 0;
  j->evs = evs;
  j->n_evs = n_evs;
  j->role = role;
  j->dep = -1;
  j->lead = 0;
  j->range_v = 0;
  j->skipped = 0;
  j->res = res;
}

/* Appends the range's jobs to p (room for 2n more), results in out[k], of[k] the point replay.
 * known: the point results res[] are there, and only the variants they call for are added;
 * otherwise both variants of every point replay, point[i] being p->jobs[i] (the same pool:
 * each waits for its point replay and is configured or skipped then). */
int grj_range_add(pool_t *p, const job_t *point, int n, rp_result_t **res, int known, const gmt_event_t *evs,
                     size_t n_evs, rp_result_t *out, int *of) {
  int m = 0;
  for (int i = 0; i < n; i++)
    for (int v = 0; v < 2; v++) {
      job_t *j = &p->jobs[p->n];
      follow(j, &point[i], GRJ_RANGE, evs, n_evs, &out[m]);
      j->range_v = v;
      if (known ? !grj_range_setup(j, res[i]) : 0) continue;
      if (!known) j->dep = i;
      p->n++;
      of[m++] = i;
    }
  return m;
}

/* The range's m jobs (run or skipped) into the point results. */
gm_status_t grj_range_fold(const gr_config_t *cfg, const job_t *jobs, int m, const int *of, int n,
                              rp_result_t **res, gm_err_t *err) {
  for (int i = 0; i < n; i++) {
    res[i]->range_kind = range_kind(cfg, res[i]);
    res[i]->range_a_bytes = res[i]->range_b_bytes = res[i]->peak_reserved_bytes;
  }
  for (int k = 0; k < m; k++) {
    if (jobs[k].skipped) continue;
    rp_result_t *r = res[of[k]];
    if (jobs[k].st != GM_OK) {
      *err = jobs[k].err;
      return gm_err_wrap(err, "%s", r->range_kind == RP_RANGE_POOL ? "pool model" : "stream events");
    }
    r->spread_ooms += jobs[k].res->ooms;
    if (jobs[k].range_v == 0) r->range_a_bytes = jobs[k].res->peak_reserved_bytes;
    else {
      r->range_b_bytes = jobs[k].res->peak_reserved_bytes;
      r->late_mallocs = jobs[k].res->late_mallocs;
    }
  }
  for (int i = 0; i < n; i++) {
    rp_result_t *r = res[i];
    if (r->range_kind == RP_RANGE_NONE) continue;
    uint64_t a = r->range_a_bytes, b = r->range_b_bytes, c = r->peak_reserved_bytes;
    r->range_low_bytes = a < b ? (a < c ? a : c) : (b < c ? b : c);
    r->range_high_bytes = a > b ? (a > c ? a : c) : (b > c ? b : c);
  }
  return GM_OK;
}

/* The placement spread (issue 25): every policy the driver's placement model places again
 * under a bump pointer; what the peak moves by is part of what the replay cannot tell (the
 * model's known misses: replay/RESULTS.md), and the advice must exceed it.
 *
 * placement_add appends those jobs to p (room for n more), results in out[], of[k] the point
 * replay of out[k]. known: the point replays have finished, and one that took its memory from
 * the async pool gets no job; otherwise each job depends on its point replay, point[i] being
 * p->jobs[i] (the same pool: they run beside the point replays, and the pool skips a job whose
 * point replay failed or used the pool). */
int grj_spread_add(const gr_config_t *cfg, pool_t *p, const job_t *point, int n, rp_result_t **res,
                         int known, const gmt_event_t *evs, size_t n_evs, rp_result_t *out, int *of) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (grj_addresses_for(cfg, point[i].spec) != RP_VA_DRIVER || (known && res[i]->pool_allocs)) continue;
    job_t *j = &p->jobs[p->n++];
    follow(j, &point[i], GRJ_SPREAD, evs, n_evs, &out[m]);
    j->bump = 1;
    if (!known) j->dep = i;
    of[m++] = i;
  }
  return m;
}

/* The spread's m jobs (run) into the point results. */
gm_status_t grj_spread_fold(const job_t *jobs, int m, const int *of, rp_result_t **res, gm_err_t *err) {
  for (int k = 0; k < m; k++) {
    if (jobs[k].skipped) continue;
    if (jobs[k].st != GM_OK) {
      *err = jobs[k].err;
      return gm_err_wrap(err, "placement spread (--addresses=bump)");
    }
    res[of[k]]->placement_bump_bytes = jobs[k].res->peak_reserved_bytes;
    res[of[k]]->placement_checked = 1;
    res[of[k]]->spread_ooms += jobs[k].res->ooms;
  }
  return GM_OK;
}
