/* gpureplay_tune_trace.c: `gpureplay --tune` over one trace: decoded once, then each device it
 * allocates on tuned alone (its own allocator state, as --sweep replays each device), within
 * what the recorded process had when its run ran out of memory. Prints each device's search
 * and adds its shown points to the results file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/gpureplay.h"
#include "replay/tool/tune/gpureplay_tune.h"

/* One device's search (cfg->device; -1: the trace's only one). */
static gm_status_t tune_device(const gr_config_t *cfg, const gr_tune_opts_t *to, const gr_loaded_t *loaded,
                               gr_results_t *rs, gm_err_t *err) {
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
  gm_status_t st = gr_run_loaded(cfg, &lt, dflt, 1, &r0, err);
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
  if (st == GM_OK) st = gr_tune_run(&run, &lt, to, &tn, err);
  if (cfg->progress) fprintf(stderr, "\r%*s\r", 78, "");
  if (st == GM_OK) gr_tune_print(stdout, &lt, &tn);
  if (st == GM_OK && rs) st = gr_tune_results(&run, &lt, &tn, rs, err);
  free(r0);
  gr_tune_free(&tn);
  return st;
}

gm_status_t gr_tune_trace(const gr_config_t *cfg, const gr_tune_opts_t *to, const char *path, int first,
                          gr_results_t *rs, gm_err_t *err) {
  if (cfg->progress) fprintf(stderr, "gpureplay: tuning %s ...\r", path);
  int devs[GR_MAX_DEVICES], nd = 0;
  gm_status_t st = gr_trace_devices(path, devs, GR_MAX_DEVICES, &nd, err);
  if (st != GM_OK) return st;
  if (nd > GR_MAX_DEVICES) {
    gm_log(GM_LOG_WARN, "%s: allocates on %d devices: tuning the first %d", path, nd, GR_MAX_DEVICES);
    nd = GR_MAX_DEVICES;
  }
  gr_loaded_t lt;
  st = gr_trace_load(cfg, path, &lt, err);
  if (st == GM_OK && gmt_stats_damaged(&lt.info.stats)) {
    char what[256];
    gm_log(GM_LOG_WARN, "'%s' is damaged (%s): %s%s", path, lt.info.damage,
           gmt_stats_damage_text(&lt.info.stats, what, sizeof what),
           gmt_stats_partial(&lt.info.stats) ? "; results marked partial (--strict refuses damaged traces)" : "");
  }
  for (int di = 0; st == GM_OK && di < (nd > 1 ? nd : 1); di++) {
    gr_config_t dc = *cfg;
    dc.device = nd > 1 ? devs[di] : -1;
    if (!first || di) fputc('\n', stdout);
    if (nd > 1) printf("device %d (of %d, each tuned alone):\n", devs[di], nd);
    st = tune_device(&dc, to, &lt, rs, err);
  }
  gr_loaded_free(&lt);
  return st;
}
