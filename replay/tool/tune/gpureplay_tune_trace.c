/* gpureplay_tune_trace.c: `gpureplay --tune` over one trace: decoded once, then each device it
 * allocates on tuned alone (its own allocator state, as --sweep replays each device), within
 * what the recorded process had when its run ran out of memory. Prints each device's search
 * and adds its shown points to the results file.
 *
 * A long trace (--tune-reduce, gpureplay_tune.h) is first scanned for its training step
 * (gpureplay_tune_period.c): with one, the search runs on the reduced trace and its finalists
 * on the whole (gpureplay_tune_reduce.c); a trace too large to hold in memory is streamed for
 * both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/gpureplay.h"
#include "replay/tool/tune/gpureplay_tune.h"

/* Events held in memory for the whole trace's replays at most (a 10^8-event trace is 5.6 GB
 * decoded: streamed instead, each replay reading the file). */
static const uint64_t kLoadBytes = 768ull << 20;

enum { HOW_FULL = 0, HOW_REDUCED = 1, HOW_GRID = 2 };

/* One device's search (cfg->device; -1: the trace's only one). */
static gm_status_t tune_device(const gr_config_t *cfg, const gr_tune_opts_t *to, const gr_loaded_t *loaded,
                               int how, const gr_period_t *per, gr_results_t *rs, gm_err_t *err) {
  gr_loaded_t lt = *loaded; /* the events shared; what a recorded OOM changes is this device's */
  gr_config_t run = *cfg;
  gr_tune_t tn;
  memset(&tn, 0, sizeof tn);
  rp_result_t *r0 = malloc(sizeof *r0);
  if (!r0) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  /* A recorded OOM: the search runs within what the recorded process had, as --sweep does, so
   * a setting without OOMs is one that would have served the request. */
  unsigned fw = gmt_framework_single(lt.info.frameworks);
  const char *dflt[1] = {fw == GMT_FW_JAX ? "jax" : fw == GMT_FW_TENSORFLOW ? "tf" : "pytorch"};
  /* a reduced search's trace recorded no failure (gpureplay_tune_period.c): no run needed to tell */
  int failures = how == HOW_FULL || per->failures;
  gm_status_t st = GM_OK;
  if (failures) st = gr_run_loaded(cfg, &lt, dflt, 1, &r0, err);
  else memset(r0, 0, sizeof *r0);
  char note[512];
  uint64_t cap = st == GM_OK && !cfg->capacity ? gr_failure_capacity(&lt.info, r0, note, sizeof note) : 0;
  if (st == GM_OK) gr_loaded_note_failure(&lt, r0);
  if (cap) {
    run.capacity = cap;
    if (!run.device_memory) run.device_memory = lt.info.gpu_total_mem ? lt.info.gpu_total_mem : cap;
    lt.total_memory = lt.info.device_memory = run.device_memory;
    snprintf(lt.info.capacity_note, sizeof lt.info.capacity_note, "%s", note);
  }
  r0->capacity_bytes = run.capacity;
  if (st == GM_OK) gr_print_failure(stdout, "", &lt.info, r0);
  if (st == GM_OK && how == HOW_REDUCED) {
    gr_loaded_t red = lt;
    red.evs = per->evs;
    red.n_evs = per->n_evs;
    st = gr_tune_run_reduced(&run, &lt, &red, per, to, &tn, rs, err);
  } else if (st == GM_OK && how == HOW_GRID) {
    st = gr_tune_run_grid(&run, &lt, per, to, &tn, rs, err);
  } else if (st == GM_OK) {
    st = gr_tune_run(&run, &lt, to, &tn, err);
  }
  if (cfg->progress) fprintf(stderr, "\r%*s\r", 78, "");
  if (st == GM_OK) gr_tune_print(stdout, &lt, &tn);
  if (st == GM_OK && rs && how == HOW_FULL) st = gr_tune_results(&run, &lt, &tn, rs, err);
  free(r0);
  gr_tune_free(&tn);
  return st;
}

static void warn_damaged(const char *path, const gr_loaded_t *lt) {
  if (!gmt_stats_damaged(&lt->info.stats)) return;
  char what[256];
  gm_log(GM_LOG_WARN, "'%s' is damaged (%s): %s%s", path, lt->info.damage,
         gmt_stats_damage_text(&lt->info.stats, what, sizeof what),
         gmt_stats_partial(&lt->info.stats) ? "; results marked partial (--strict refuses damaged traces)" : "");
}

/* A long trace: scanned for its period, then searched reduced, by the grid, or in full (*how). */
static gm_status_t plan_long(const gr_config_t *cfg, const gr_tune_opts_t *to, const char *path, uint64_t events,
                             gr_loaded_t *lt, gr_period_t *per, int *how, gm_err_t *err) {
  /* tests stream a small trace rather than write a 14 M-event one */
  const char *lb = getenv("GPUREPLAY_TEST_TUNE_LOAD_BYTES");
  int load = events * sizeof(gmt_event_t) <= (lb && *lb ? strtoull(lb, NULL, 10) : kLoadBytes);
  gm_status_t st;
  gr_tune_times_t tt;
  gr_tune_times_start(&tt);
  if (load) {
    if (cfg->progress) fprintf(stderr, "\rgpureplay: %s: decoding ...   ", path);
    st = gr_trace_load(cfg, path, lt, err);
    gr_tune_times_mark(&tt, "decode", 0);
    if (st == GM_OK) st = gr_period_scan_events(lt->evs, lt->n_evs, per, err);
  } else {
    st = gr_trace_open_streamed(cfg, path, lt, err);
    if (st == GM_OK) st = gr_period_scan_file(path, cfg->read_flags, cfg->progress, per, err);
    if (st == GM_OK) lt->stream_addrs = per->addrs; /* counted as it read the file */
  }
  gr_tune_times_mark(&tt, "period scan", 0);
  if (st != GM_OK) return st;
  if (per->found) *how = HOW_REDUCED;
  else if (to->reduce == GR_REDUCE_AUTO && per->events > GR_TUNE_FULL_EVENTS) *how = HOW_GRID;
  else if (!load) st = gr_trace_load(cfg, path, lt, err); /* the full search, as asked: every event in memory */
  return st;
}

gm_status_t gr_tune_trace(const gr_config_t *cfg, const gr_tune_opts_t *to, const char *path, int first,
                          gr_results_t *rs, gm_err_t *err) {
  if (cfg->progress) fprintf(stderr, "gpureplay: tuning %s ...\r", path);
  uint64_t events = 0;
  gm_status_t st = GM_OK;
  if (to->reduce != GR_REDUCE_NEVER) {
    gmt_reader_t *r = NULL;
    if (gmt_reader_open_flags(&r, path, cfg->read_flags, err) != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
    for (uint64_t i = 0, nc = gmt_reader_chunk_count(r); i < nc; i++) {
      uint64_t ts, k = 0;
      if (gmt_reader_chunk_info(r, i, &ts, &k, NULL) == GM_OK) events += k;
    }
    gmt_reader_close(r);
  }
  gr_period_t per;
  memset(&per, 0, sizeof per);
  gr_loaded_t lt;
  memset(&lt, 0, sizeof lt);
  int how = HOW_FULL;
  if (to->reduce == GR_REDUCE_ALWAYS || (to->reduce == GR_REDUCE_AUTO && events > GR_TUNE_REDUCE_EVENTS)) {
    st = plan_long(cfg, to, path, events, &lt, &per, &how, err);
    if (st == GM_OK && how != HOW_REDUCED && cfg->progress)
      fprintf(stderr, "\rgpureplay: %s: no training step found (%s)\n", path, per.why);
    if (st == GM_OK) warn_damaged(path, &lt);
    if (st == GM_OK && how != HOW_FULL) {
      if (!first) fputc('\n', stdout);
      st = tune_device(cfg, to, &lt, how, &per, rs, err);
      gr_period_free(&per);
      gr_loaded_free(&lt);
      return st;
    }
    gr_period_free(&per);
  }
  int devs[GR_MAX_DEVICES], nd = 0;
  if (st == GM_OK) st = gr_trace_devices(path, devs, GR_MAX_DEVICES, &nd, err);
  if (st != GM_OK) {
    gr_loaded_free(&lt);
    return st;
  }
  if (nd > GR_MAX_DEVICES) {
    gm_log(GM_LOG_WARN, "%s: allocates on %d devices: tuning the first %d", path, nd, GR_MAX_DEVICES);
    nd = GR_MAX_DEVICES;
  }
  if (!lt.evs) {
    st = gr_trace_load(cfg, path, &lt, err);
    if (st == GM_OK) warn_damaged(path, &lt);
  }
  for (int di = 0; st == GM_OK && di < (nd > 1 ? nd : 1); di++) {
    gr_config_t dc = *cfg;
    dc.device = nd > 1 ? devs[di] : -1;
    if (!first || di) fputc('\n', stdout);
    if (nd > 1) printf("device %d (of %d, each tuned alone):\n", devs[di], nd);
    st = tune_device(&dc, to, &lt, HOW_FULL, &per, rs, err);
  }
  gr_loaded_free(&lt);
  return st;
}
