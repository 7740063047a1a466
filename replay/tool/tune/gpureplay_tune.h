/* gpureplay_tune.h: gpureplay --tune, a search over a framework's whole setting space (the
 * search, the time-cost model, the capacity answers). Internal to //replay/tool:gpureplay_lib. */
#ifndef GPUREPLAY_TUNE_H
#define GPUREPLAY_TUNE_H

#include <stdint.h>
#include <stdio.h>

#include "replay/tool/gpureplay.h"

/* Points a bisection round tests at once (memory fraction, capacity): fixed, not --jobs, so
 * that what the search finds does not depend on the machine's cores (gpureplay and gpuanalyze
 * default to all of them); two keep two cores busy. */
#define GR_TUNE_BISECT_POINTS 2

#ifdef __cplusplus
extern "C" {
#endif

/* How the PyTorch space is searched. SEARCH: coordinate descent over the full space (values
 * drawn from the trace's own request sizes). BOUNDED: the same descent over a small space
 * that EXHAUSTIVE enumerates point by point (to measure how close the descent gets). */
typedef enum gr_tune_mode { GR_TUNE_SEARCH = 0, GR_TUNE_BOUNDED = 1, GR_TUNE_EXHAUSTIVE = 2 } gr_tune_mode_t;

/* Capacities in 2 MiB units, [lo, hi]; lo 0: none (gpureplay_tune_cap.c). */
typedef struct gr_tune_span {
  uint64_t lo, hi;
} gr_tune_span_t;

/* One evaluated setting. */
typedef struct gr_tune_point {
  char spec[512];          /* gpureplay's words: "pytorch:max_split_size_mb:200,..." */
  int from_grid;           /* also a point of the --sweep grid */
  int ok;                  /* replayed without an OOM */
  uint64_t peak_reserved;  /* the objective (as the sweep ranks) */
  uint64_t peak_allocated;
  double frag_at_peak;     /* 1 - allocated/reserved at the reserved peak */
  uint64_t alloc_calls, free_calls;
  int call_kind;           /* GR_CALL_*: which latency row its driver calls cost */
  int pool;                /* served by the simulated stream-ordered pool: shown, never chosen */
  double time_lo_s, time_mid_s, time_hi_s; /* estimated driver time over the job */
  uint64_t needs_bytes;    /* smallest capacity without OOM (bisection); 0: not computed */
  int needs_above;         /* did not fit even in the largest capacity tried */
  int needs_none;          /* fits a device of 1 byte: the job allocates no device memory */
  gr_tune_span_t same;     /* the capacities that give its replay's outcome (ok or not) again */
  uint64_t event_frees, event_frees_requested; /* what gr_spread_loaded reads of the replay */
  int placed_known;        /* ... and the segments its replay placed (rp_result_t.placed_*) */
  uint64_t placed;
  /* What the replay cannot tell (issue 25), replayed only for points that may be chosen
   * (gr_tune_spread): the worst and best case of peak reserved over the timing range, the
   * bump pointer's placement and a predicted trace's uncertain sizes. */
  int spread;              /* 1: worst_bytes, best_bytes, worst_oom known */
  uint64_t worst_bytes, best_bytes;
  int worst_oom;           /* another timing or placement ran out of memory: no worst case */
  /* gr_spread_loaded's figures, for the results file (gr_tune_spread_into) */
  int range_kind, placement_checked;
  uint64_t range_a, range_b, range_low, range_high, late_mallocs, placement_bump;
} gr_tune_point_t;

/* Driver call kinds, each with its measured latency (gpureplay_tune.c, kLatency). */
enum { GR_CALL_SEGMENT = 0, GR_CALL_MAP = 1, GR_CALL_SMALL = 2, GR_CALL_POOL = 3, GR_CALL_KINDS = 4 };

typedef struct gr_tune_opts {
  gr_tune_mode_t mode;
  double budget_fraction;  /* time budget as a share of the recorded duration (0.01) */
  int capacity;            /* bisection over --capacity for the points shown */
  int no_limits;           /* search no hard limits (memory fractions, CuPy's limit): --no-limits */
  int reduce;              /* gr_tune_reduce_t: --tune-reduce */
  uint64_t trace_events;   /* events of the whole trace when the search runs on a reduced one (0: lt's) */
  int confirm_all;         /* a reduced search: every finalist on the whole trace, even those the reduced
                            * figures rank clearly behind while the smallest is within the budget
                            * (gpureplay_tune_reduce.c; what the tests compare the shortcut with) */
} gr_tune_opts_t;

typedef struct gr_tune {
  unsigned framework;      /* GMT_FW_* of the trace (0: unknown, read as PyTorch) */
  const char *policy_name; /* "pytorch", "jax" */
  gr_tune_point_t *pts;    /* every setting evaluated, in evaluation order */
  int n, cap;
  int dflt;                /* the framework's default */
  /* The choice is on the worst case (gr_tune_safer; issue 25). */
  int best;                /* smallest worst case without OOM */
  int best_grid;           /* the same among the grid's points of this framework */
  int chosen;              /* smallest worst case whose time (mid) is within the budget */
  int keep_default;        /* chosen is not below the default's best case by more than gm_advice_floor */
  int *front;              /* Pareto front worst case vs time, by memory */
  int n_front;
  uint64_t replays;        /* replays run (memoized points count once), the spread's too */
  uint64_t spread_replays; /* ... of them, for what the replay cannot tell */
  double seconds;          /* wall time of the search */
  uint64_t duration_ns;    /* recorded duration (last event - first event) */
  double budget_s;
  uint64_t lower_bound;    /* peak live requested bytes */
  uint64_t device_memory;  /* what the policies saw as the device's total */
  uint64_t context_bytes;  /* the recorded CUDA context, inside every capacity tried (0: none) */
  uint64_t capacity;       /* the device the search ran within (a recorded OOM's); 0: none */
  const char *method;      /* "coordinate descent from 6 starts", "bisection", ... */
  int no_limits;           /* hard limits were left out of the search (--no-limits) */
  char method_buf[192];
  int rounds;
  uint64_t events;         /* of the whole trace */
  uint64_t search_events;  /* the search ran on these (events: the whole trace) */
  char searched[384];      /* how: "searched on N of M events: period P ...; finalists confirmed ..." ("": whole) */
} gr_tune_t;

/* t emptied and set up for a search of lt lasting duration_ns: framework, policy family,
 * device, context, capacity, budget (gr_tune_run's start; the reduced search's whole trace). */
void gr_tune_init(gr_tune_t *t, const gr_config_t *cfg, const gr_loaded_t *lt, const gr_tune_opts_t *o,
                  uint64_t duration_ns);
gm_status_t gr_tune_run(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_tune_opts_t *o,
                        gr_tune_t *t, gm_err_t *err);
void gr_tune_print(FILE *f, const gr_loaded_t *lt, const gr_tune_t *t);
/* --tune over one trace (gpureplay_tune_trace.c): each device it allocates on searched alone,
 * printed (first: the first trace, no blank line before it) and added to rs (NULL: none). */
gm_status_t gr_tune_trace(const gr_config_t *cfg, const gr_tune_opts_t *to, const char *path, int first,
                          gr_results_t *rs, gm_err_t *err);
void gr_tune_free(gr_tune_t *t);
/* gr_tune_results with the whole trace's results of every point already at hand: have[i] is
 * point i's (no replay). */
gm_status_t gr_tune_results_have(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_tune_t *t,
                                 rp_result_t *const *have, gr_results_t *rs, gm_err_t *err);
/* Replay the points worth keeping (the grid, the front, default, tuned, chosen) once more for
 * their full results and add them to the results file. */
gm_status_t gr_tune_results(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_tune_t *t, gr_results_t *rs,
                            gm_err_t *err);

/* The estimated driver time of calls of kind k: p50-based (mid), p50 (lo) .. p99 (hi). */
void gr_tune_time(int kind, uint64_t alloc_calls, uint64_t free_calls, double *lo, double *mid, double *hi);
/* The smallest common GPU (16, 24, 40, 48, 80, 94, 141 GiB, nominal) the point fits, in GiB;
 * 0 if none or not bisected. */
unsigned gr_tune_smallest_gpu(const gr_tune_point_t *p);
/* The latency row of kind k (what, p50/p99 of alloc and free, us); NULL past the kinds. */
const char *gr_tune_latency_source(int kind, double *a50, double *a99, double *f50, double *f99);
/* The spec of a PyTorch point in gpureplay's words ("pytorch" for the default). */
typedef struct gr_pt_point {
  int expandable;          /* 0/1 */
  int max_split_mb;        /* 0: unset */
  int roundup[3];          /* divisions for < 64 MiB, 64..512 MiB, >= 512 MiB (0: off) */
  int gc_pct;              /* garbage_collection_threshold in %, 0: unset */
  int fraction_ppm;        /* per_process_memory_fraction in millionths, 0: unset */
  int non_split_mb;        /* max_non_split_rounding_mb, 0: unset */
} gr_pt_point_t;
void gr_pt_spec(const gr_pt_point_t *p, char *out, size_t n);

/* ---- the steady state of a long trace (gpureplay_tune_period.c) ---- */

/* What the scan found: the step boundaries (the live set back to the same multiset), the
 * period, the distinct kinds of step, and the reduced trace that stands for the whole. */
typedef struct gr_period {
  int found;               /* a period, and a reduced trace worth searching on */
  char why[192];           /* found == 0: why not */
  uint64_t events;         /* events of the whole trace */
  uint64_t first_ts, last_ts;
  uint64_t warmup;         /* events up to the first step boundary */
  uint64_t steps;          /* steps after it */
  uint64_t period;         /* events of the most common step */
  int phases;              /* distinct kinds of step */
  uint64_t kept_steps;     /* steps in the reduced trace */
  uint64_t failures;       /* failed requests recorded (ALLOC_FAILED) */
  int devices;             /* devices allocated on */
  uint32_t addrs;          /* gr_period_scan_file: the addresses a replay numbers (rp_addr_numbering), 0: more
                              than GR_STREAM_ADDRS or not read whole (lt->stream_addrs) */
  gmt_event_t *evs;        /* the reduced trace (found) */
  size_t n_evs, cap;
} gr_period_t;
typedef struct gr_period_scan gr_period_scan_t;
gm_status_t gr_period_scan_events(const gmt_event_t *evs, size_t n, gr_period_t *p, gm_err_t *err);
/* The file streamed (memory: the learning window and the reduced trace); progress: stderr. */
gm_status_t gr_period_scan_file(const char *path, unsigned flags, int progress, gr_period_t *p, gm_err_t *err);
void gr_period_free(gr_period_t *p);

/* How --tune treats a long trace (--tune-reduce). AUTO: past GR_TUNE_REDUCE_EVENTS events the
 * search runs on the reduced trace when a period is found, else (past GR_TUNE_FULL_EVENTS) the
 * grid only; ALWAYS: the reduced search wherever a period is found, else the full search;
 * NEVER: the full search. */
typedef enum gr_tune_reduce { GR_REDUCE_AUTO = 0, GR_REDUCE_ALWAYS = 1, GR_REDUCE_NEVER = 2 } gr_tune_reduce_t;
/* A streamed trace's replays index arrays by address number (gr_loaded_t.stream_addrs) up to
 * this many distinct addresses (32 bytes each per replay); past it, the engine's hash map. */
#define GR_STREAM_ADDRS (1u << 20)
#define GR_TUNE_REDUCE_EVENTS 1000000ull
#define GR_TUNE_FULL_EVENTS 5000000ull

/* The search on the reduced trace red (its events), its finalists replayed on the whole
 * trace lt (events in memory, or lt->evs NULL: the file streamed) for every figure shown. */
gm_status_t gr_tune_run_reduced(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_loaded_t *red,
                                const gr_period_t *per, const gr_tune_opts_t *o, gr_tune_t *t, gr_results_t *rs,
                                gm_err_t *err);
/* The grid alone, on the whole trace (a long trace without a period, under AUTO). */
gm_status_t gr_tune_run_grid(const gr_config_t *cfg, const gr_loaded_t *lt, const gr_period_t *per,
                             const gr_tune_opts_t *o, gr_tune_t *t, gr_results_t *rs, gm_err_t *err);

/* ---- between the tuner's files ---- */

/* A search in progress: what it replays over, and the memo of points already replayed. */
typedef struct gr_tune_ctx {
  gr_config_t cfg;          /* the caller's, capacity as the search needs it */
  const gr_loaded_t *lt;
  gr_tune_t *t;
  const gr_tune_opts_t *o;
  uint64_t trace_events;    /* of the whole trace (a long one is searched from fewer starts); 0: lt's */
} gr_tune_ctx_t;

/* Replay the specs not yet in the memo (in parallel, cfg.jobs), then idx[i] = the point of
 * specs[i]. idx may be NULL. */
gm_status_t gr_tune_eval(gr_tune_ctx_t *c, const char *const *specs, int n, int *idx, gm_err_t *err);
/* a better than b for the search: without OOM first, then peak reserved, then time, then the
 * shorter spec (point figures: the search steps on them). */
int gr_tune_better(const gr_tune_point_t *a, const gr_tune_point_t *b);
/* a safer than b for the choice (both spread): without OOM first (in every timing and
 * placement), then the smaller worst case, then peak reserved, then fewer driver calls, then
 * less time, then the shorter spec. */
int gr_tune_safer(const gr_tune_point_t *a, const gr_tune_point_t *b);
/* The same with the worst cases given (wa, wb): what a and b would rank as. */
int gr_tune_safer_at(const gr_tune_point_t *a, uint64_t wa, const gr_tune_point_t *b, uint64_t wb);
/* The worst case the choice ranks p by: its peak reserved until spread, UINT64_MAX when
 * another timing or placement runs out of memory. */
uint64_t gr_tune_worst(const gr_tune_point_t *p);
/* Replay what the replay cannot tell for the points idx[0..n) not yet spread (gr_spread_loaded)
 * and fold a predicted trace's uncertain sizes in. */
gm_status_t gr_tune_spread(gr_tune_ctx_t *c, const int *idx, int n, gm_err_t *err);
/* A spread point's timing range and placement spread into r (a replay of its spec), as
 * gr_run_trace gives them; nothing when p is not spread. */
void gr_tune_spread_into(const gr_tune_point_t *p, rp_result_t *r);
/* How much a predicted trace's uncertain sizes move spec's peak reserved, as a share of it
 * (predicted.settings: spec's own check, or the largest of those checked when spec was not);
 * 0 without a check (a recording). */
double gr_tune_sizes_move(const char *note, const char *spec);
/* The memo's point of spec, or -1. */
int gr_tune_find(const gr_tune_t *t, const char *spec);
/* Replay specs at capacity `cap` (0: unlimited) into res[] (gr_tune_alloc_results'). */
gm_status_t gr_tune_replay(gr_tune_ctx_t *c, uint64_t cap, const char *const *specs, int n, rp_result_t **res,
                           gm_err_t *err);
gm_status_t gr_tune_alloc_results(int n, rp_result_t ***out, gm_err_t *err);
void gr_tune_free_results(rp_result_t **res, int n);
/* The point's figures from a replay's result (spec already set). */
void gr_tune_point_set(gr_tune_t *t, gr_tune_point_t *p, const rp_result_t *r);
/* The choice over c->t's points (worst cases spread over c's trace): best, best_grid, chosen,
 * the front (t->front allocated). */
gm_status_t gr_tune_choose(gr_tune_ctx_t *c, gm_err_t *err);
/* Settings the simulator can replay (a grid entry that needs a real GPU cannot). */
int gr_tune_runs_on_sim(const char *spec, uint64_t total);
/* The smallest x in (lo, hi] for which fits(x) holds, to within `tol`, assuming fits() is
 * monotone and fits(hi) (gpureplay_tune_eval.c). Each round tests GR_TUNE_BISECT_POINTS points
 * spread over the interval at once (the cores replay them together): round_points; narrow
 * keeps the smallest that fits and the largest below it that does not. */
typedef gm_status_t (*gr_tune_fits_fn)(gr_tune_ctx_t *c, const void *arg, const double *x, int n, int *fits,
                                       gm_err_t *err);
gm_status_t gr_tune_bisect(gr_tune_ctx_t *c, const void *arg, gr_tune_fits_fn fn, double lo, double hi, double tol,
                           double *out, gm_err_t *err);
void gr_tune_round_points(double lo, double hi, int k, double *x);
void gr_tune_narrow(const double *x, const int *fits, int k, double *lo, double *hi);
/* Whether spec fits at each capacity x[i] (in 2 MiB units, at most 8) over c's trace, and
 * same[i]: the capacities that give the same replay (gr_tune_span_of). */
gm_status_t gr_tune_cap_fits(gr_tune_ctx_t *c, const char *spec, const uint64_t *x, int n, int *fits,
                             gr_tune_span_t *same, gm_err_t *err);
/* The capacities (2 MiB units, the context inside) under which r's replay on c's trace would
 * be the same replay (rp_result_t.same_capacity_*; gpureplay_tune_eval.c); lo 0: none known. */
gr_tune_span_t gr_tune_span_of(const gr_tune_t *t, const rp_result_t *r);
/* The smallest capacity the point fits in (gpureplay_tune_cap.c). */
gm_status_t gr_tune_point_needs(gr_tune_ctx_t *c, gr_tune_point_t *p, gm_err_t *err);
/* The same, trying first where a search on a reduced trace found it (a multiple of 2 MiB). */
gm_status_t gr_tune_point_needs_hint(gr_tune_ctx_t *c, gr_tune_point_t *p, uint64_t hint_bytes, gm_err_t *err);
/* The same, with capacities already replayed (multiples of 2 MiB; 0: none): no_bytes ran out of
 * memory, yes_bytes did not (the search starts between them); *_same: the capacities that
 * give the same replay as each (gr_tune_span_of). */
gm_status_t gr_tune_point_needs_within(gr_tune_ctx_t *c, gr_tune_point_t *p, uint64_t no_bytes, gr_tune_span_t no_same,
                                       uint64_t yes_bytes, gr_tune_span_t yes_same, gm_err_t *err);
/* The PyTorch search (gpureplay_tune_pt.c): fills c->t's points, method and rounds. */
gm_status_t gr_tune_pytorch(gr_tune_ctx_t *c, gm_err_t *err);

/* Phase timings on stderr under GPUREPLAY_TUNE_TIMES (gpureplay_tune_times.c): mark prints the
 * wall and CPU seconds since the last mark (or start) and the replays run since (replays: the
 * running total). */
typedef struct gr_tune_times {
  int on;
  double wall, cpu;
  uint64_t replays;
} gr_tune_times_t;
void gr_tune_times_start(gr_tune_times_t *tt);
void gr_tune_times_mark(gr_tune_times_t *tt, const char *phase, uint64_t replays);

#ifdef __cplusplus
}
#endif
#endif /* GPUREPLAY_TUNE_H */
