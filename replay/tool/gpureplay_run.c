/* gpureplay_run.c: replaying one trace under many policies, in parallel.
 *
 * Each policy run is a job: its own backend, its own engine, the same events. Jobs run on
 * --jobs threads taking the next job from a shared counter (runs differ a lot in cost:
 * `direct` is cheap, an expandable pytorch run is not, so a static split would idle cores).
 *
 * Where the events come from: when several policies replay one trace and the decoded events
 * fit in memory (gr_trace_wants_preload, gpureplay_trace.c), the trace is decoded once and
 * every job reads the shared array; otherwise each job opens its own reader over the file
 * (decoding costs each job again, memory stays flat). bench/replay measures both.
 *
 * A replay whose figure has a range (the timing range, the placement spread:
 * gpureplay_follow.c) is, over events in memory, a follower queued behind the point replays in
 * the same pool: it waits for its point replay, whose result says whether and how it runs, so
 * no core idles between the kinds of replay. Read from the file, each kind has its pool in turn
 * (a lone replay then decodes on a thread of its own).
 *
 * The cuda backend runs one job at a time on the calling thread (the CUDA context is
 * current there, and latencies measured with other replays running beside are worthless). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/tool/gpureplay.h"
#include "replay/tool/gpureplay_trace.h"
#include "replay/tool/gpureplay_jobs.h"
#include "replay/cuda/rp_cuda.h"
#include "replay/engine/va_model.h"

#define BATCH 4096


static gm_status_t make_backend(const job_t *j, rp_backend_t **b, gm_err_t *err) {
  const gr_config_t *c = j->cfg;
  int addresses = j->bump ? RP_VA_BUMP : grj_addresses_for(c, j->spec);
  if (c->cuda_ordinal >= 0) {
    rp_cuda_opts_t o = {gr_capacity_left(c->capacity, j->context_bytes), j->total_memory, c->cuda_real_addresses,
                        addresses};
    gm_status_t st = rp_cuda_backend_create(c->cuda_ordinal, &o, b, err);
    if (st != GM_OK) return gm_err_wrap(err, "cuda:%d", c->cuda_ordinal);
    return GM_OK;
  }
  rp_sim_opts_t o = {gr_capacity_left(c->capacity, j->context_bytes), c->granularity, j->total_memory,
                     j->pool_model, 0, addresses};
  return rp_sim_backend_create(&o, b, err);
}

/* Decode-ahead: a reader thread fills a ring of batches while the engine replays the
 * previous ones, so a single replay from a file costs max(decode, replay), not the sum. Used
 * when one job runs alone (with several jobs the cores are already busy replaying). */
#define RING 4
#define RING_BATCH 16384

typedef struct ring {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  gmt_reader_t *r;
  gmt_event_t *buf[RING];
  size_t n[RING];
  int head, tail, count, done, stop; /* done: the reader reached the end or failed */
  gm_status_t st;
  gm_err_t err;
} ring_t;

static void *ring_reader(void *arg) {
  ring_t *q = arg;
  for (;;) {
    pthread_mutex_lock(&q->mu);
    while (q->count == RING && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
    int slot = q->tail, stop = q->stop;
    pthread_mutex_unlock(&q->mu);
    if (stop) break;
    size_t k = 0;
    gm_status_t st = gmt_reader_next_batch(q->r, q->buf[slot], RING_BATCH, &k, &q->err);
    pthread_mutex_lock(&q->mu);
    if (st != GM_OK) {
      q->st = st == GM_END ? GM_OK : st;
      q->done = 1;
      pthread_cond_broadcast(&q->cv);
      pthread_mutex_unlock(&q->mu);
      break;
    }
    q->n[slot] = k;
    q->tail = (q->tail + 1) % RING;
    q->count++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
  }
  return NULL;
}

static gm_status_t feed_ring(rp_engine_t *e, gmt_reader_t *r, const char *path, pool_t *p,
                             gm_err_t *err) {
  ring_t q;
  memset(&q, 0, sizeof q);
  q.r = r;
  gmt_event_t *mem = malloc((size_t)RING * RING_BATCH * sizeof *mem);
  if (!mem) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  for (int i = 0; i < RING; i++) q.buf[i] = mem + (size_t)i * RING_BATCH;
  pthread_mutex_init(&q.mu, NULL);
  pthread_cond_init(&q.cv, NULL);
  pthread_t t;
  if (pthread_create(&t, NULL, ring_reader, &q) != 0) {
    free(mem);
    return GM_ERR_UNSUPPORTED; /* the caller reads without the thread */
  }
  gm_status_t st = GM_OK;
  for (;;) {
    pthread_mutex_lock(&q.mu);
    while (q.count == 0 && !q.done) pthread_cond_wait(&q.cv, &q.mu);
    if (q.count == 0) { /* done and drained */
      pthread_mutex_unlock(&q.mu);
      if (q.st != GM_OK) {
        *err = q.err;
        st = gm_err_wrap(err, "cannot read '%s'", path);
      }
      break;
    }
    int slot = q.head;
    pthread_mutex_unlock(&q.mu);
    st = rp_engine_feed(e, q.buf[slot], q.n[slot], err);
    if (p) atomic_fetch_add(&p->events, q.n[slot]);
    pthread_mutex_lock(&q.mu);
    q.head = (q.head + 1) % RING;
    q.count--;
    if (st != GM_OK) q.stop = 1;
    pthread_cond_broadcast(&q.cv);
    pthread_mutex_unlock(&q.mu);
    if (st != GM_OK) break;
  }
  pthread_join(t, NULL);
  pthread_mutex_destroy(&q.mu);
  pthread_cond_destroy(&q.cv);
  free(mem);
  return st;
}

/* The reader's first damage (or "") into a job's buffer. */
static void keep_damage(const gmt_reader_t *r, char *damage) {
  const char *d = gmt_reader_damage(r);
  snprintf(damage, GM_ERR_MSG_MAX, "%s", d ? d : "");
}

static gm_status_t feed_file(rp_engine_t *e, const char *path, unsigned flags, pool_t *p, int ahead,
                             gmt_reader_stats_t *stats, char *damage, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  if (ahead) {
    st = feed_ring(e, r, path, p, err);
    if (st != GM_ERR_UNSUPPORTED) {
      *stats = *gmt_reader_stats(r);
      keep_damage(r, damage);
      gmt_reader_close(r);
      return st;
    }
  }
  gmt_event_t *buf = malloc(BATCH * sizeof *buf);
  if (!buf) {
    gmt_reader_close(r);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  for (;;) {
    size_t n = 0;
    st = gmt_reader_next_batch(r, buf, BATCH, &n, err);
    if (st == GM_END) {
      st = GM_OK;
      break;
    }
    if (st != GM_OK) {
      gm_err_wrap(err, "cannot read '%s'", path);
      break;
    }
    if ((st = rp_engine_feed(e, buf, n, err)) != GM_OK) break;
    if (p) atomic_fetch_add(&p->events, n);
  }
  free(buf);
  *stats = *gmt_reader_stats(r);
  keep_damage(r, damage);
  gmt_reader_close(r);
  return st;
}

/* A job's backend and engine, ready for events; j->st says whether. */
void grj_start(job_t *j, rp_backend_t **bp, rp_engine_t **ep) {
  rp_backend_t *b = NULL;
  rp_engine_t *e = NULL;
  gm_err_t *err = &j->err;
  char name[64];
  size_t n = strcspn(j->spec, ":");
  snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), j->spec);
  const char *conf = j->spec[n] == ':' ? j->spec + n + 1 : "";
  const rp_policy_ops_t *ops = rp_policy_find(name);
  *bp = NULL;
  *ep = NULL;
  if (!ops) {
    j->st = gm_err_set(err, GM_ERR_INVAL, "unknown policy '%s'", name);
    return;
  }
  j->st = make_backend(j, &b, err);
  if (j->st != GM_OK) return;
  rp_engine_opts_t eo = {j->cfg->device, j->cfg->check, j->cfg->capacity, j->cfg->serve_failed,
                         j->vmm_requests, j->event_timing, j->cfg->late_mallocs, j->count_other};
  /* a follower: its fold reads the peak, OOMs and event figures only; a capacity probe
   * (stop_at_oom) only the OOMs */
  eo.peak_only = j->role != GRJ_POINT || j->cfg->stop_at_oom;
  j->st = rp_engine_create(ops, conf, b, &eo, &e, err);
  if (j->st == GM_OK) j->st = rp_engine_set_external_sync(e, j->external_sync, err);
  *bp = b;
  *ep = e;
}

/* The job's result, and its engine and backend gone. */
void grj_end(job_t *j, rp_backend_t *b, rp_engine_t *e) {
  if (j->st == GM_OK) j->st = rp_engine_finish(e, j->res, &j->err);
  if (j->st == GM_OK) j->res->context_bytes = j->context_bytes;
  if (j->st != GM_OK && e) gm_err_wrap(&j->err, "policy '%s'", j->spec);
  rp_engine_destroy(e);
  if (b) b->destroy(b);
}

static void run_job(job_t *j, pool_t *p) {
  rp_backend_t *b = NULL;
  rp_engine_t *e = NULL;
  gm_err_t *err = &j->err;
  grj_start(j, &b, &e);
  if (!b) return;
  if (j->st == GM_OK) {
    if (j->evs) {
      /* A capacity probe (stop_at_oom) needs only whether an OOM happens: it ends at the first. */
      size_t step = j->cfg->stop_at_oom ? 8192 : 65536;
      const rp_addr_ids_t *ids = j->ids && j->ids->evs == j->evs && j->ids->n == j->n_evs ? j->ids : NULL;
      if (ids) j->st = rp_engine_use_ids(e, ids, err);
      for (size_t i = 0; i < j->n_evs && j->st == GM_OK; i += step) {
        size_t k = j->n_evs - i < step ? j->n_evs - i : step;
        j->st = rp_engine_feed_ids(e, j->evs + i, ids ? ids->id + i : NULL, k, err);
        if (p) atomic_fetch_add(&p->events, k);
        if (j->cfg->stop_at_oom && rp_engine_ooms(e)) break;
      }
    } else {
      j->st = feed_file(e, j->path, j->cfg->read_flags, p, j->decode_ahead, &j->reader_stats, j->damage, err);
      j->has_reader_stats = 1;
    }
  }
  grj_end(j, b, e);
}

/* Job j's result is its finished lead l's (gpureplay_same.c): copied under j's own spec, which
 * (and a bad conf's error, as its replay would have failed) comes from j's engine, which
 * replays nothing. */
static void copy_lead(job_t *j, const job_t *l) {
  rp_backend_t *b = NULL;
  rp_engine_t *e = NULL;
  grj_start(j, &b, &e);
  if (!b) return;
  grj_end(j, b, e);
  if (j->st != GM_OK) return;
  char spec[sizeof j->res->policy];
  memcpy(spec, j->res->policy, sizeof spec);
  *j->res = *l->res;
  memcpy(j->res->policy, spec, sizeof spec);
}

/* A follower was put after its point replay (a copy after its lead), so that was taken first
 * (by this thread or another): waiting for it ends. Mostly it finished long before
 * (gr_run_trace's order). */
static void wait_for(pool_t *p, int i) {
  if (!p->fin) return; /* one thread, in order: done already */
  while (!atomic_load(&p->fin[i])) {
    struct timespec ts = {0, 100 * 1000};
    nanosleep(&ts, NULL);
  }
}

static void *worker(void *arg) {
  pool_t *p = arg;
  for (;;) {
    int k = atomic_fetch_add(&p->next, 1);
    if (k >= p->n) break;
    int i = p->order ? p->order[k] : k;
    job_t *j = &p->jobs[i];
    if (j->dep >= 0) {
      wait_for(p, j->dep);
      const job_t *d = &p->jobs[j->dep];
      if (d->st != GM_OK) j->skipped = 1;
      else if (j->role == GRJ_RANGE) j->skipped = !grj_range_setup(j, d->res);
      else j->skipped = d->res->pool_allocs != 0; /* the spread: not the async pool's */
    }
    if (!j->skipped) {
      if (j->lead > 0) wait_for(p, j->lead - 1); /* taken before j: mostly done long before */
      if (j->lead > 0 && grj_same_proven(p, j)) copy_lead(j, &p->jobs[j->lead - 1]);
      else run_job(j, p);
    }
    if (p->fin) atomic_store(&p->fin[i], 1);
    atomic_fetch_add(&p->done, 1);
  }
  return NULL;
}

/* A job over the trace at path (its events evs, or NULL: the file) under spec. */
void grj_init(job_t *j, const gr_config_t *cfg, const char *path, const char *spec, const gmt_event_t *evs,
                     size_t n_evs, uint64_t total_memory, const gr_trace_info_t *info, rp_result_t *res) {
  j->cfg = cfg;
  j->path = path;
  j->spec = spec;
  j->evs = evs;
  j->n_evs = n_evs;
  j->total_memory = total_memory;
  j->external_sync = info->external_sync;
  j->vmm_requests = info->vmm_requests;
  j->count_other = gr_count_other(cfg, info);
  j->context_bytes = cfg->count_other == GR_OTHER_NO ? 0 : info->context_bytes;
  j->ids = NULL;
  j->dep = -1;
  j->lead = 0;
  j->res = res;
}

/* The first failed job's status and cause chain among the first n, or GM_OK. */
gm_status_t grj_pool_status(const pool_t *p, int n, gm_err_t *err) {
  for (int i = 0; i < n; i++)
    if (p->jobs[i].st != GM_OK) {
      *err = p->jobs[i].err;
      return p->jobs[i].st;
    }
  return GM_OK;
}

static void show_progress(pool_t *p, uint64_t total, const char *path) {
  uint64_t done = atomic_load(&p->events);
  double pct = total ? 100.0 * (double)done / (double)total : 0.0;
  if (pct > 100.0) pct = 100.0;
  fprintf(stderr, "\rgpureplay: %s: %d/%d policies done, %.0f%%   ", path, atomic_load(&p->done),
          p->n, pct);
}

/* Run the pool's jobs: on the calling thread (cuda, or one job without progress to show),
 * else on cfg->jobs threads; progress: show it on stderr (a terminal) while they run. */
void grj_run_pool(const gr_config_t *cfg, pool_t *p, uint64_t events, const char *path, int progress) {
  int n = p->n;
  int threads = cfg->cuda_ordinal >= 0 ? 1 : cfg->jobs < 1 ? 1 : cfg->jobs > n ? n : cfg->jobs;
  for (int i = 0; i < n; i++) p->jobs[i].decode_ahead = threads == 1;
  uint64_t total = (uint64_t)n * events;
  if (cfg->cuda_ordinal >= 0 || (threads == 1 && !progress)) {
    worker(p);
    return;
  }
  pthread_t *tids = calloc((size_t)threads, sizeof *tids);
  p->fin = calloc((size_t)n, sizeof *p->fin);
  int started = 0;
  for (int t = 0; tids && p->fin && t < threads; t++)
    if (pthread_create(&tids[t], NULL, worker, p) == 0) started++;
  if (started == 0) worker(p);
  while (progress && atomic_load(&p->done) < n) {
    show_progress(p, total, path);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
  if (progress) fprintf(stderr, "\r%*s\r", 78, "");
  free(tids);
  free(p->fin);
  p->fin = NULL;
}

/* The range after the point replays rec, in a pool of its own (the tuner's way). */
gm_status_t grj_timing_range(const gr_config_t *cfg, const pool_t *rec, rp_result_t **res,
                                const gmt_event_t *evs, size_t n_evs, const gr_trace_info_t *info,
                                gm_err_t *err) {
  int n = rec->n;
  pool_t p;
  memset(&p, 0, sizeof p);
  p.jobs = calloc((size_t)2 * n, sizeof *p.jobs);
  rp_result_t *out = calloc((size_t)2 * n, sizeof *out);
  int *of = calloc((size_t)2 * n, sizeof *of);
  if (!p.jobs || !out || !of) {
    free(p.jobs);
    free(out);
    free(of);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  int m = grj_range_add(&p, rec->jobs, n, res, 1, evs, n_evs, out, of);
  if (m) grj_run_pool(cfg, &p, n_evs ? n_evs : info->events_in_index, info->path, cfg->progress);
  gm_status_t st = grj_range_fold(cfg, p.jobs, m, of, n, res, err);
  free(p.jobs);
  free(out);
  free(of);
  return st;
}

/* The spread after the point replays, in a pool of its own (the tuner's way). */
gm_status_t grj_placement_spread(const gr_config_t *cfg, const pool_t *rec, rp_result_t **res,
                                    const gmt_event_t *evs, size_t n_evs, const gr_trace_info_t *info,
                                    gm_err_t *err) {
  int n = rec->n;
  pool_t p;
  memset(&p, 0, sizeof p);
  p.jobs = calloc((size_t)n, sizeof *p.jobs);
  rp_result_t *out = calloc((size_t)n, sizeof *out);
  int *of = calloc((size_t)n, sizeof *of);
  if (!p.jobs || !out || !of) {
    free(p.jobs);
    free(out);
    free(of);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  int m = grj_spread_add(cfg, &p, rec->jobs, n, res, 1, evs, n_evs, out, of);
  if (m) grj_run_pool(cfg, &p, n_evs ? n_evs : info->events_in_index, info->path, cfg->progress);
  gm_status_t st = grj_spread_fold(p.jobs, m, of, res, err);
  free(p.jobs);
  free(out);
  free(of);
  return st;
}

/* The order a sweep's pool takes its n point replays and their ms spread followers in (then
 * the range's, as queued), so that the two cores finish together: the costly replays first,
 * the cheap ones last to fill the tail. What a replay costs follows its policy's placement:
 * a driver-placed one (PyTorch's settings: the placement model's work on top of the policy's)
 * and `direct` (a driver call per request) cost the most, their spread replays (a bump
 * pointer) less, the bump-placed policies (XLA's BFC and its models) least. A follower stays
 * after its point replay: spread followers follow driver-placed point replays only. */
static int costly(const gr_config_t *cfg, const char *spec) {
  return grj_addresses_for(cfg, spec) == RP_VA_DRIVER || (!strncmp(spec, "direct", 6) && (!spec[6] || spec[6] == ':'));
}

/* Appends to order[k..] the jobs [from, to) with a lead (led) or without, costly or not (cost:
 * 1, 0; -1: either), in turn; the new count. */
static int take(const gr_config_t *cfg, const pool_t *p, int from, int to, int led, int cost, int *order, int k) {
  for (int i = from; i < to; i++)
    if (!p->jobs[i].lead == !led && (cost < 0 || costly(cfg, p->jobs[i].spec) == cost)) order[k++] = i;
  return k;
}

/* Jobs with a lead (gpureplay_same.c) go after those of their kind without, leads among
 * them: when taken, their lead has finished (or is the last to finish) and most are copies. */
static const int *cost_order(const gr_config_t *cfg, const pool_t *p, int n, int ms, int *order) {
  int k = 0;
  for (int led = 0; led < 2; led++) k = take(cfg, p, 0, n, led, 1, order, k);
  for (int led = 0; led < 2; led++) k = take(cfg, p, n, n + ms, led, -1, order, k);
  for (int led = 0; led < 2; led++) k = take(cfg, p, 0, n, led, 0, order, k);
  for (int led = 0; led < 2; led++) k = take(cfg, p, n + ms, p->n, led, -1, order, k); /* the range's */
  return order;
}

gm_status_t gr_run_trace(const gr_config_t *cfg, const char *path, gr_trace_info_t *info,
                         rp_result_t **res, gm_err_t *err) {
  memset(info, 0, sizeof *info);
  gm_status_t st = gr_trace_probe(path, cfg->read_flags, cfg->sync_allocs, cfg->vmm_buffers, info, err);
  if (st != GM_OK) return st;
  uint64_t total_memory = gr_trace_device_memory(cfg, info);
  int n = cfg->n_policies;
  gmt_event_t *evs = NULL;
  size_t n_evs = 0;
  int want_preload = gr_trace_wants_preload(cfg, path, info), own_evs = 0;
  const gr_decoded_t *dec = cfg->decoded;
  /* Events in memory replayed more than once: their addresses numbered once for all the
   * replays, beside the decode (rp_addr_ids_t; none, host memory short: each replay hashes them
   * itself). */
  rp_addr_ids_t own_ids;
  memset(&own_ids, 0, sizeof own_ids);
  const rp_addr_ids_t *ids = NULL;
  if (want_preload && dec && dec->evs && dec->path && strcmp(dec->path, path) == 0) {
    evs = dec->evs; /* gr_trace_scan decoded it already */
    n_evs = dec->n_evs;
    ids = dec->ids.id ? &dec->ids : NULL;
    gr_trace_take_integrity(info, &dec->info.stats, dec->info.damage);
  } else if (want_preload) {
    st = gr_trace_preload(path, cfg->read_flags, info->events_in_index, &evs, &n_evs, info, &own_ids, err);
    if (st != GM_OK) return st;
    own_evs = 1;
    ids = own_ids.id ? &own_ids : NULL;
  }
  if (st == GM_OK && info->has_context) {
    if (evs) gr_context_from_events(evs, n_evs, cfg->device, info);
    else st = gr_context_from_file(path, cfg->read_flags, cfg->device, info, err);
    if (st != GM_OK) return st;
  }
  /* The timing range's and the placement spread's replays run in the same pool as the point
   * replays, queued after them, each waiting for its own point replay: no core waits for the
   * last point replay (or the last range replay) before the next kind starts. Only over events
   * in memory: a replay read from the file alone on its pool decodes on a thread of its own
   * (decode_ahead), which its followers, waiting for it, would only leave idle. */
  int range = n > 0 && cfg->timing_range;
  int spread = range && cfg->cuda_ordinal < 0 && cfg->addresses == RP_VA_DRIVER;
  int merge = evs != NULL;
  size_t more = merge ? (size_t)(range ? 2 * n : 0) + (size_t)(spread ? n : 0) : 0;
  pool_t p;
  memset(&p, 0, sizeof p);
  p.jobs = calloc((size_t)n + more, sizeof *p.jobs);
  rp_result_t *out = more ? calloc(more, sizeof *out) : NULL;
  int *of = more ? calloc(more, sizeof *of) : NULL;
  if (!p.jobs || (more && (!out || !of))) {
    free(p.jobs);
    free(out);
    free(of);
    if (own_ids.id) rp_addr_ids_free(&own_ids);
    if (own_evs) free(evs);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  p.n = n;
  for (int i = 0; i < n; i++) {
    grj_init(&p.jobs[i], cfg, path, cfg->policies[i], evs, n_evs, total_memory, info, res[i]);
    p.jobs[i].event_timing = cfg->event_timing;
    if ((size_t)n + more > 1) p.jobs[i].ids = ids;
  }
  /* the spread first: its replays wait for the first point replays (PyTorch's settings lead the
   * grids), the range's for every one, the last ones too (most are skipped at once) */
  int ms = merge && spread ? grj_spread_add(cfg, &p, p.jobs, n, res, 0, evs, n_evs, out, of) : 0;
  int mr = merge && range ? grj_range_add(&p, p.jobs, n, res, 0, evs, n_evs, out + ms, of + ms) : 0;
  /* settings that may replay as an earlier one does wait for it and copy its result */
  grj_same_leads(cfg, &p, n, of);
  int led = 0;
  for (int i = 0; i < p.n; i++) led |= p.jobs[i].lead != 0;
  int *order = ms || led ? malloc((size_t)p.n * sizeof *order) : NULL;
  if (order) p.order = cost_order(cfg, &p, n, ms, order);
  else if (led) grj_same_leads(cfg, &p, 0, NULL); /* no order: no copies */
  grj_run_pool(cfg, &p, n_evs ? n_evs : info->events_in_index, path, cfg->progress);
  free(order);
  p.order = NULL;
  p.n = n; /* the point replays; their followers come after them in p.jobs */
  /* The trace's integrity, from the decode-once pass or from a streamed job's reader. */
  for (int i = 0; !want_preload && i < n; i++)
    if (p.jobs[i].has_reader_stats) {
      gr_trace_take_integrity(info, &p.jobs[i].reader_stats, p.jobs[i].damage);
      break;
    }
  st = grj_pool_status(&p, n, err);
  /* Timing-dependent figures (frees that wait on stream events, the simulated async pool):
   * the same policies again under the other timings; the range goes beside the point. */
  if (st == GM_OK && range)
    st = merge ? grj_range_fold(cfg, p.jobs + n + ms, mr, of + ms, n, res, err)
               : grj_timing_range(cfg, &p, res, evs, n_evs, info, err);
  if (st == GM_OK && spread)
    st = merge ? grj_spread_fold(p.jobs + n, ms, of, res, err)
               : grj_placement_spread(cfg, &p, res, evs, n_evs, info, err);
  free(out);
  free(of);
  free(p.jobs);
  if (own_ids.id) rp_addr_ids_free(&own_ids);
  if (own_evs) free(evs);
  if (st == GM_OK && n > 0 && res[0]->recorded_failures && res[0]->first_failure_callsite)
    gr_trace_callsite(path, res[0]->first_failure_callsite, info->failure_callsite, sizeof info->failure_callsite);
  return st;
}
