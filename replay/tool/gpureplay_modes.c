/* gpureplay_modes.c: what a gpureplay run does once its command line is checked
 * (gpureplay_cli_check.c) and its policies are known (gpureplay_cli_policies.c): replay each
 * trace under the policies (--sweep: with its framework's grid; --list-policies: only say
 * which), --tune's search, --explain-oom's answer, --export-snapshot's pickle and
 * --export-perfetto's trace JSON. Each prints its result and returns the exit code: the
 * libraries they call (gpureplay.h, gpureplay_tune.h, ...) print nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/export/export_perfetto.h"
#include "replay/tool/gpureplay.h"
#include "replay/tool/gpureplay_cli.h"
#include "replay/tool/export/export_memviz.h"
#include "replay/tool/tune/gpureplay_tune.h"

/* The warning for a damaged trace (its good chunks are replayed unless --strict). */
static void warn_damaged(const char *path, const gr_trace_info_t *info) {
  if (!gmt_stats_damaged(&info->stats)) return;
  char what[256];
  gm_log(GM_LOG_WARN, "'%s' is damaged (%s): %s%s", path, info->damage,
         gmt_stats_damage_text(&info->stats, what, sizeof what),
         gmt_stats_partial(&info->stats) ? "; results marked partial (--strict refuses damaged traces)" : "");
}

/* -o: the results file written (and named: every file written is) where the run went well;
 * frees rs. Returns the exit code: rc, or 1 if the file could not be written. */
static int write_results(gr_results_t *rs, const char *path, int quiet, int rc) {
  gm_err_t err;
  gm_err_clear(&err);
  if (rc == 0 && rs) {
    if (gr_results_write(rs, path, &err) != GM_OK) {
      gm_log_err(&err);
      rc = 1;
    } else if (!quiet) {
      fprintf(stderr, "gpureplay: wrote %s\n", path);
    }
  }
  gr_results_free(rs);
  return rc;
}

/* --tune: each trace decoded once, searched, printed; -o writes the shown points' runs, so
 * that `gpuanalyze report` compares the tuned setting with the grid. Its refusals:
 * gr_cli_refuse. */
int gr_cli_tune(gr_config_t *cfg, const gr_cli_opts_t *o) {
  gr_tune_opts_t to = {gr_cli_tune_mode(o->tune_mode), o->budget > 0 ? o->budget : 0.01, !o->no_capacity,
                       o->no_limits, gr_cli_tune_reduce(o->tune_reduce), 0};
  cfg->serve_failed = 1;
  gm_err_t err;
  gm_err_clear(&err);
  if (gr_cli_check_inputs(cfg) != 0) return 1;
  if (o->output && gm_output_check(o->output, &err) != GM_OK) {
    gm_log_err(&err);
    return 1;
  }
  gr_results_t *rs = o->output ? gr_results_new() : NULL;
  int rc = 0;
  for (int i = 0; i < cfg->n_traces && rc == 0; i++) /* each device tuned alone: gpureplay_tune_trace.c */
    if (gr_tune_trace(cfg, &to, cfg->traces[i], i == 0, rs, &err) != GM_OK) {
      gm_log_err(&err);
      rc = 1;
    }
  rc = write_results(rs, o->output, o->quiet, rc);
  if (fflush(stdout) != 0 && rc == 0) rc = 1;
  return rc;
}

/* --explain-oom: gr_oom_explain over the one trace, printed as one JSON object. The recorded
 * timing of stream events only (--event-timing=early|late may pick another; a range would be
 * a second answer to the same question). */
int gr_cli_explain_oom(gr_config_t *cfg, const char *spec) {
  gm_err_t err;
  gm_err_clear(&err);
  cfg->timing_range = 0;
  cfg->preload = 1;
  gr_oom_t *x = malloc(sizeof *x);
  gm_status_t st = x ? gr_oom_explain(cfg, cfg->traces[0], spec, x, &err)
                     : gm_err_set(&err, GM_ERR_NOMEM, "out of memory");
  if (st == GM_OK) st = gr_oom_print_json(stdout, cfg->traces[0], x, &err);
  free(x);
  if (st != GM_OK) {
    gm_log_err(&err);
    return 1;
  }
  return 0;
}

/* --export-snapshot: gr_memviz_export, one line on stderr naming the file. */
int gr_cli_export_snapshot(gr_config_t *cfg, const char *spec, const char *out, int quiet) {
  gm_err_t err;
  gm_err_clear(&err);
  gr_memviz_stats_t st;
  char line[512];
  if (gr_memviz_export(cfg, cfg->traces[0], spec, out, &st, &err) != GM_OK) {
    gm_log_err(&err);
    return 1;
  }
  if (!quiet) fprintf(stderr, "gpureplay: %s\n", gr_memviz_describe(&st, out, line, sizeof line));
  return 0;
}

/* --export-perfetto: the first device's replay as trace JSON (replay/tool/export/export_perfetto.h). */
static int export_perfetto(const gr_config_t *cfg, const gr_cli_opts_t *o, const gr_trace_info_t *info,
                           rp_result_t *const *res, int n) {
  gm_err_t err;
  gm_err_clear(&err);
  gr_perfetto_stats_t ps;
  if (gr_export_perfetto(o->export_perfetto, cfg, cfg->traces[0], info, res, n, &ps, &err) != GM_OK) {
    gm_log_err(&err);
    return 1;
  }
  if (!o->quiet)
    fprintf(stderr, "gpureplay: wrote %s (%llu bytes): %llu of %llu allocations as slices (%llu alive at the peak), "
            "%llu counter points, in %.2f s\n", o->export_perfetto, (unsigned long long)ps.bytes, (unsigned long long)ps.slices,
            (unsigned long long)ps.allocations, (unsigned long long)ps.slices_at_peak, (unsigned long long)ps.counter_points, ps.seconds);
  return 0;
}

/* Replay (and --sweep): every trace, each device it allocates on, under the policies; the
 * table or the JSON lines on stdout, -o's results file. --list-policies prints the specs
 * instead of replaying them. */
int gr_cli_replay(gr_config_t *cfg, const gr_cli_opts_t *o, gr_cli_policies_t *ps) {
  gm_err_t err;
  gm_err_clear(&err);
  gr_results_t *rs = o->output ? gr_results_new() : NULL;
  int n_max = ps->n_user + ps->max_grid;
  rp_result_t **res = calloc((size_t)n_max, sizeof *res);
  int *order = calloc((size_t)n_max, sizeof *order);
  int rc = 0, got = 1;
  for (int i = 0; res && i < n_max; i++)
    if (!(res[i] = malloc(sizeof(rp_result_t)))) got = 0;
  if (!res || !got || !order || (o->output && !rs)) {
    gm_log(GM_LOG_ERROR, "out of memory");
    rc = 1;
  }
  gr_decoded_t decoded; /* each trace decoded once for its device scan and its replays */
  memset(&decoded, 0, sizeof decoded);
  cfg->decoded = &decoded;
  for (int t = 0; t < cfg->n_traces && rc == 0; t++) {
    gr_trace_info_t info;
    /* The user's policies, then this trace's framework's grid. */
    int n = ps->n_user;
    if (o->sweep) {
      unsigned fw = 0;
      if (gr_trace_frameworks(cfg->traces[t], &fw, &err) != GM_OK) {
        gm_log_err(&err);
        rc = 1;
        break;
      }
      n = gr_cli_sweep_specs(ps, fw);
      if (n == 0) {
        gm_log(GM_LOG_ERROR, "sweep: no policy of the grid is available in this build");
        rc = 1;
        break;
      }
    }
    cfg->policies = ps->specs;
    cfg->n_policies = n;
    if (o->list_policies) {
      for (int i = 0; i < n; i++) puts(ps->specs[i]);
      continue;
    }
    /* Every device the trace allocates on is replayed with its own allocator state. */
    int devs[GR_MAX_DEVICES], nd = 0;
    if (gr_trace_scan(cfg, cfg->traces[t], &decoded, devs, GR_MAX_DEVICES, &nd, &err) != GM_OK) {
      gm_log_err(&err);
      rc = 1;
      break;
    }
    if (nd > GR_MAX_DEVICES) {
      gm_log(GM_LOG_WARN, "%s: allocates on %d devices: replaying the first %d", cfg->traces[t], nd,
             GR_MAX_DEVICES);
      nd = GR_MAX_DEVICES;
    }
    for (int di = 0; di < (nd > 1 ? nd : 1) && rc == 0; di++) {
      cfg->device = nd > 1 ? devs[di] : -1;
      gm_status_t st = gr_run_trace(cfg, cfg->traces[t], &info, res, &err);
      info.n_devices = nd;
      char note[512];
      uint64_t cap = st == GM_OK && !o->capacity ? gr_failure_capacity(&info, res[0], note, sizeof note) : 0;
      if (cap) {
        /* The recorded run ran out of memory: replay again within what it had, so each
         * policy's OOMs say whether it would have served the request that failed. */
        gr_config_t again = *cfg;
        again.capacity = cap;
        if (!again.device_memory) again.device_memory = info.gpu_total_mem;
        st = gr_run_trace(&again, cfg->traces[t], &info, res, &err);
        info.n_devices = nd;
        snprintf(info.capacity_note, sizeof info.capacity_note, "%s", note);
      }
      if (st != GM_OK) {
        gm_log_err(&err);
        rc = 1;
        break;
      }
      if (di == 0) warn_damaged(cfg->traces[t], &info); /* once per trace, not per device */
      if (o->json) {
        if (!o->quiet) gr_print_failure(stderr, "gpureplay: ", &info, res[0]);
        for (int i = 0; i < n; i++) gr_print_json(stdout, &info, res[i]);
      } else {
        gr_rank(res, n, order);
        if (t || di) fputc('\n', stdout);
        gr_print_table(stdout, &info, res, n, order);
      }
      if (o->export_perfetto && di == 0 && (rc = export_perfetto(cfg, o, &info, res, n)) != 0) break;
      for (int i = 0; rs && i < n && rc == 0; i++)
        if (gr_results_add(rs, &info, res[i], &err) != GM_OK) {
          gm_log_err(&err);
          rc = 1;
        }
    }
  }
  gr_decoded_free(&decoded);
  cfg->decoded = NULL;
  rc = write_results(rs, o->output, o->quiet, rc);
  for (int i = 0; res && i < n_max; i++) free(res[i]);
  free(res);
  free(order);
  return rc;
}
