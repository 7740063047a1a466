/* gpureplay_jobs.h: one replay of a trace under one policy (a job) and a pool of them, as
 * gpureplay_run.c runs them; gpureplay_run_loaded.c (the tuner's decode-once runs) uses them
 * too. Internal to replay/tool's runner. */
#ifndef GPUREPLAY_JOBS_H
#define GPUREPLAY_JOBS_H

#include <stdatomic.h>

#include "replay/tool/gpureplay.h"

typedef struct job {
  const gr_config_t *cfg;
  const char *path;
  const char *spec;
  const gmt_event_t *evs; /* preloaded events, or NULL: read the file */
  size_t n_evs;
  const rp_addr_ids_t *ids; /* evs' address numbers (replayed over them when ids->evs is evs), or NULL */
  uint64_t total_memory;
  int external_sync; /* rp_engine_set_external_sync for this trace */
  int vmm_requests;  /* rp_engine_opts_t.vmm_requests for this trace */
  int count_other;   /* rp_engine_opts_t.count_other for this trace */
  uint64_t context_bytes; /* taken out of the capacity (gpureplay_context.c) */
  int decode_ahead; /* read the file in a thread of its own (one job running alone) */
  int event_timing; /* RP_EVENTS_*: when frees that wait on stream events happen */
  int pool_model;   /* RP_POOL_*: the simulated stream-ordered pool's reuse */
  int bump;         /* 1: a bump pointer whatever --addresses says (the placement spread) */
  gmt_reader_stats_t reader_stats; /* what the reader found (streamed jobs) */
  char damage[GM_ERR_MSG_MAX];
  int has_reader_stats;
  /* dep >= 0: a follower of the point replay jobs[dep] of its pool (the timing range's variant
   * range_v, or the placement spread's, role): it waits for it, then is configured from its
   * result or skipped (grj_range_setup; the spread skips the async pool's) */
  int dep, role, range_v;
  int skipped; /* set by the pool: its point replay said not to run */
  /* lead > 0: jobs[lead - 1] may have replayed alike (gpureplay_same.c): the pool copies its
   * result when the policy's same_run proves it, else replays this one; 0: none */
  int lead;
  rp_result_t *res;
  gm_status_t st;
  gm_err_t err;
} job_t;

typedef struct pool {
  job_t *jobs;
  int n;
  const int *order; /* the order jobs are taken in (order[k]: the k-th), or NULL: jobs[0..n) in turn;
                       a follower after its point replay */
  atomic_int next;
  atomic_int done;
  atomic_int *fin; /* fin[i]: job i has finished (grj_run_pool's, for dep) */
  _Atomic uint64_t events; /* replayed so far, all jobs (progress) */
} pool_t;

/* A job over the trace at path (its events evs, or NULL: the file) under spec. */
void grj_init(job_t *j, const gr_config_t *cfg, const char *path, const char *spec, const gmt_event_t *evs,
              size_t n_evs, uint64_t total_memory, const gr_trace_info_t *info, rp_result_t *res);
/* A job's backend and engine, ready for events; j->st says whether. */
void grj_start(job_t *j, rp_backend_t **bp, rp_engine_t **ep);
/* The job's result, and its engine and backend gone. */
void grj_end(job_t *j, rp_backend_t *b, rp_engine_t *e);
/* Run the pool's jobs (on cfg->jobs threads, or the calling thread); progress on stderr. */
void grj_run_pool(const gr_config_t *cfg, pool_t *p, uint64_t events, const char *path, int progress);
/* The first failed job's status and cause chain among the first n, or GM_OK. */
gm_status_t grj_pool_status(const pool_t *p, int n, gm_err_t *err);

/* ---- the followers of the point replays (gpureplay_follow.c) ---- */

/* The addresses (RP_VA_*) a policy's replay uses under cfg. */
int grj_addresses_for(const gr_config_t *cfg, const char *spec);

enum { GRJ_POINT = 0, GRJ_RANGE = 1, GRJ_SPREAD = 2 };
/* Configures range follower j for its point result r: 0 when r has no such variant. */
int grj_range_setup(job_t *j, const rp_result_t *r);
/* Append the timing range's (room for 2n more) or the spread's (n more) followers of the point
 * jobs point[0..n) to p, results in out[], of[k] the point replay of follower k; the count.
 * known: the point results res[] are there and only the followers they call for are added;
 * otherwise each depends on its point replay, point[i] being p->jobs[i] (the same pool). */
int grj_range_add(pool_t *p, const job_t *point, int n, rp_result_t **res, int known, const gmt_event_t *evs,
                  size_t n_evs, rp_result_t *out, int *of);
int grj_spread_add(const gr_config_t *cfg, pool_t *p, const job_t *point, int n, rp_result_t **res, int known,
                   const gmt_event_t *evs, size_t n_evs, rp_result_t *out, int *of);
/* The m followers jobs[0..m) (run or skipped) folded into the point results. */
gm_status_t grj_range_fold(const gr_config_t *cfg, const job_t *jobs, int m, const int *of, int n, rp_result_t **res,
                           gm_err_t *err);
gm_status_t grj_spread_fold(const job_t *jobs, int m, const int *of, rp_result_t **res, gm_err_t *err);
/* The timing range and the placement spread of the pool's results, each in a pool of its own
 * after the point replays (the tuner's way, and a replay read from the file; gpureplay_run.c). */
gm_status_t grj_timing_range(const gr_config_t *cfg, const pool_t *rec, rp_result_t **res,
                             const gmt_event_t *evs, size_t n_evs, const gr_trace_info_t *info, gm_err_t *err);
gm_status_t grj_placement_spread(const gr_config_t *cfg, const pool_t *rec, rp_result_t **res,
                                 const gmt_event_t *evs, size_t n_evs, const gr_trace_info_t *info,
                                 gm_err_t *err);

/* ---- results copied between settings that replay alike (gpureplay_same.c) ---- */

/* Sets every job's lead (0: none): the n point jobs p->jobs[0..n) and their followers
 * p->jobs[n..p->n) (of[k]: the point job of follower n + k). */
void grj_same_leads(const gr_config_t *cfg, pool_t *p, int n, const int *of);
/* Job j (lead > 0), its lead finished: 1 when the lead's result is j's (under j's spec). */
int grj_same_proven(const pool_t *p, const job_t *j);

#endif
