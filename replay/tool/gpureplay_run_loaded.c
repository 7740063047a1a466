/* gpureplay_run_loaded.c: a trace decoded once, replayed many times (the tuner): held in
 * memory, or streamed batch by batch to every job's engine at once (traces too large to hold).
 * The jobs are gpureplay_run.c's (gpureplay_jobs.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/gpureplay.h"
#include "replay/tool/gpureplay_jobs.h"
#include "replay/engine/va_model.h"

/* Several replays of a trace too large to hold in memory, decoded once: batch after batch,
 * the calling thread decodes the next batch while cfg->jobs threads feed the current one to
 * every job's engine (a job past its first OOM stops when only that is asked, stop_at_oom). */
#define SHARED_BATCH (1u << 20)

typedef struct shared {
  job_t *jobs;
  rp_backend_t **b;
  rp_engine_t **e;
  int n;
  const gmt_event_t *evs;
  const uint32_t *ids; /* evs' address numbers (the engines set up with them), or NULL */
  size_t n_evs;
  atomic_int next;
} shared_t;

static void *shared_worker(void *arg) {
  shared_t *s = arg;
  for (;;) {
    int i = atomic_fetch_add(&s->next, 1);
    if (i >= s->n) break;
    job_t *j = &s->jobs[i];
    if (j->st != GM_OK || (j->cfg->stop_at_oom && rp_engine_ooms(s->e[i]))) continue;
    j->st = rp_engine_feed_ids(s->e[i], s->evs, s->ids, s->n_evs, &j->err);
  }
  return NULL;
}

/* The decoder's batch and, when the engines index arrays by address number (nb), its numbers
 * (the same rp_addr_ids_build gives the whole trace: numbered in the order read). */
static gm_status_t next_batch(gmt_reader_t *r, rp_addr_numbering_t *nb, gmt_event_t *buf, uint32_t *ids, size_t *n,
                              gm_err_t *err) {
  gm_status_t st = gmt_reader_next_batch(r, buf, SHARED_BATCH, n, err);
  if (st == GM_OK && nb && (st = rp_addr_numbering_next(nb, buf, *n, ids, err)) != GM_OK)
    gm_err_wrap(err, "numbering the addresses");
  return st;
}

static gm_status_t run_shared(const gr_config_t *cfg, shared_t *s, const char *path, int progress,
                              uint64_t total, uint32_t addrs, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, cfg->read_flags, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  gmt_event_t *buf[2] = {malloc(SHARED_BATCH * sizeof(gmt_event_t)), malloc(SHARED_BATCH * sizeof(gmt_event_t))};
  uint32_t *ids[2] = {NULL, NULL};
  rp_addr_numbering_t *nb = NULL;
  size_t n[2] = {0, 0};
  if (!buf[0] || !buf[1]) st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  if (st == GM_OK && addrs) { /* the numbers the engines were set up with (run_jobs), at most addrs */
    ids[0] = malloc(SHARED_BATCH * sizeof(uint32_t));
    ids[1] = malloc(SHARED_BATCH * sizeof(uint32_t));
    if (!ids[0] || !ids[1]) st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
    if (st == GM_OK) st = rp_addr_numbering_new(addrs, &nb, err);
  }
  int cur = 0, threads = cfg->jobs < 1 ? 1 : cfg->jobs > s->n ? s->n : cfg->jobs;
  uint64_t done = 0;
  if (st == GM_OK) st = next_batch(r, nb, buf[cur], ids[cur], &n[cur], err);
  while (st == GM_OK && n[cur]) {
    s->evs = buf[cur];
    s->ids = ids[cur];
    s->n_evs = n[cur];
    atomic_store(&s->next, 0);
    pthread_t tid[256];
    int started = 0;
    for (int t = 0; t < threads; t++)
      if (pthread_create(&tid[started], NULL, shared_worker, s) == 0) started++;
    if (started == 0) shared_worker(s);
    /* the next batch while the engines replay this one */
    gm_status_t rs = next_batch(r, nb, buf[1 - cur], ids[1 - cur], &n[1 - cur], err);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    done += n[cur];
    if (progress && total)
      fprintf(stderr, "\rgpureplay: %s: %d replays over the whole trace, %.0f%%   ", path, s->n,
              100.0 * (double)done / (double)total);
    if (rs == GM_END) n[1 - cur] = 0;
    else if (rs != GM_OK) st = gm_err_wrap(err, "cannot read '%s'", path);
    cur = 1 - cur;
  }
  if (st == GM_END) st = GM_OK;
  if (progress) fprintf(stderr, "\r%*s\r", 78, "");
  rp_addr_numbering_free(nb);
  free(ids[0]);
  free(ids[1]);
  free(buf[0]);
  free(buf[1]);
  gmt_reader_close(r);
  return st;
}

/* The pool's jobs over lt: its events in memory (cfg->jobs threads take a job each), or the
 * file decoded once for all (run_shared). */
static gm_status_t run_jobs(const gr_config_t *cfg, const gr_loaded_t *lt, pool_t *p, int progress, gm_err_t *err) {
  if (lt->evs || (p->n == 1 && !p->jobs[0].cfg->stop_at_oom)) {
    grj_run_pool(cfg, p, lt->n_evs ? lt->n_evs : lt->info.events_in_index, lt->info.path, 0); /* the tuner says its own progress */
    return grj_pool_status(p, p->n, err);
  }
  gm_status_t st = GM_OK;
  shared_t s;
  memset(&s, 0, sizeof s);
  s.jobs = p->jobs;
  s.n = p->n;
  s.b = calloc((size_t)p->n, sizeof *s.b);
  s.e = calloc((size_t)p->n, sizeof *s.e);
  if (!s.b || !s.e) st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  /* the addresses numbered as the file is read, when their count is known (the period scan's):
   * the engines index arrays, as over events in memory, where they would probe a hash map */
  rp_addr_ids_t ids;
  memset(&ids, 0, sizeof ids);
  uint32_t addrs = lt->stream_addrs;
  if (st == GM_OK && addrs && rp_addr_ids_streamed(addrs, &ids, err) != GM_OK) addrs = 0; /* the hash map then */
  for (int i = 0; st == GM_OK && i < p->n; i++) {
    grj_start(&p->jobs[i], &s.b[i], &s.e[i]);
    if (addrs && p->jobs[i].st == GM_OK) p->jobs[i].st = rp_engine_use_ids(s.e[i], &ids, &p->jobs[i].err);
  }
  if (st == GM_OK) st = run_shared(cfg, &s, lt->info.path, progress, lt->info.events_in_index, addrs, err);
  for (int i = 0; s.b && s.e && i < p->n; i++)
    if (s.b[i]) grj_end(&p->jobs[i], s.b[i], s.e[i]);
  if (ids.spares) rp_addr_ids_free(&ids); /* after the engines gave their tables back */
  free(s.b);
  free(s.e);
  if (st == GM_OK) st = grj_pool_status(p, p->n, err);
  return st;
}

gm_status_t gr_run_loaded_caps(const gr_config_t *cfg, const gr_loaded_t *lt, const char *const *specs,
                               const uint64_t *caps, int n, rp_result_t **res, gm_err_t *err) {
  pool_t p;
  memset(&p, 0, sizeof p);
  if (n <= 0) return GM_OK;
  p.jobs = calloc((size_t)n, sizeof *p.jobs);
  gr_config_t *cfgs = calloc((size_t)n, sizeof *cfgs);
  if (!p.jobs || !cfgs) {
    free(p.jobs);
    free(cfgs);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  p.n = n;
  for (int i = 0; i < n; i++) {
    cfgs[i] = *cfg;
    if (caps && caps[i]) { /* a capacity probe: only whether it fits */
      cfgs[i].capacity = caps[i];
      cfgs[i].stop_at_oom = 1;
    }
    grj_init(&p.jobs[i], &cfgs[i], lt->info.path, specs[i], lt->evs, lt->n_evs,
             cfg->device_memory ? cfg->device_memory : lt->total_memory, &lt->info, res[i]);
    if (lt->ids.id) p.jobs[i].ids = &lt->ids;
  }
  gm_status_t st = run_jobs(cfg, lt, &p, cfg->progress, err);
  free(p.jobs);
  free(cfgs);
  return st;
}

gm_status_t gr_run_loaded(const gr_config_t *cfg, const gr_loaded_t *lt, const char *const *specs,
                          int n, rp_result_t **res, gm_err_t *err) {
  return gr_run_loaded_caps(cfg, lt, specs, NULL, n, res, err);
}

gm_status_t gr_spread_loaded(const gr_config_t *cfg, const gr_loaded_t *lt, const char *const *specs, int n,
                             rp_result_t **res, gm_err_t *err) {
  /* as gr_run_trace: a timing the user fixed (--event-timing=early|late|recorded) is no range */
  if (n <= 0 || !cfg->timing_range) return GM_OK;
  gr_config_t c = *cfg;
  c.progress = 0; /* the tuner says its own progress */
  pool_t rec, p;
  memset(&rec, 0, sizeof rec);
  memset(&p, 0, sizeof p);
  rec.jobs = calloc((size_t)n, sizeof *rec.jobs);
  p.jobs = calloc((size_t)3 * n, sizeof *p.jobs);
  rp_result_t *out = calloc((size_t)3 * n, sizeof *out);
  int *of = calloc((size_t)3 * n, sizeof *of);
  job_t *brec = calloc((size_t)n, sizeof *brec);
  rp_result_t **bres = calloc((size_t)n, sizeof *bres);
  gm_status_t st = rec.jobs && p.jobs && out && of && brec && bres ? GM_OK : gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  rec.n = n;
  for (int i = 0; st == GM_OK && i < n; i++) { /* the point replays' jobs, as gr_run_loaded made them: not run again */
    grj_init(&rec.jobs[i], &c, lt->info.path, specs[i], lt->evs, lt->n_evs,
             c.device_memory ? c.device_memory : lt->total_memory, &lt->info, res[i]);
    if (lt->ids.id) rec.jobs[i].ids = &lt->ids; /* the followers copy it */
    res[i]->spread_ooms = 0;
  }
  /* the timing range's replays and the placement spread's in one pool (one decode of a
   * streamed trace for all; in memory, the cores take them side by side) */
  int m1 = 0, m2 = 0, nb = 0;
  if (st == GM_OK) m1 = grj_range_add(&p, rec.jobs, n, res, 1, lt->evs, lt->n_evs, out, of);
  if (st == GM_OK && c.cuda_ordinal < 0 && c.addresses == RP_VA_DRIVER) {
    /* A point replay that placed no segment (expandable segments: VMM maps only) had nothing
     * for the driver's placement model to place: its bump pointer's replay is the same replay,
     * its figure the point's. The others replayed (bres: their results). */
    for (int i = 0; i < n; i++) {
      if (grj_addresses_for(&c, specs[i]) == RP_VA_DRIVER && !res[i]->pool_allocs && res[i]->placed_known &&
          res[i]->placed_segments == 0) {
        res[i]->placement_checked = 1;
        res[i]->placement_bump_bytes = res[i]->peak_reserved_bytes;
        res[i]->spread_ooms += res[i]->ooms;
        continue;
      }
      brec[nb] = rec.jobs[i];
      bres[nb++] = res[i];
    }
    m2 = grj_spread_add(&c, &p, brec, nb, bres, 1, lt->evs, lt->n_evs, out + m1, of + m1);
  }
  if (st == GM_OK && p.n) {
    gm_err_t je;
    gm_status_t rs = run_jobs(&c, lt, &p, cfg->progress, err); /* a streamed pass says how far it is */
    if (rs != GM_OK && grj_pool_status(&p, p.n, &je) == GM_OK) st = rs; /* the file's; a job's: its fold says */
  }
  if (st == GM_OK) st = grj_range_fold(&c, p.jobs, m1, of, n, res, err);
  if (st == GM_OK) st = grj_spread_fold(p.jobs + m1, m2, of + m1, bres, err);
  free(rec.jobs);
  free(brec);
  free(bres);
  free(p.jobs);
  free(out);
  free(of);
  return st;
}
