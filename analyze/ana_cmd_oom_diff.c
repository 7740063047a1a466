/* ana_cmd_oom_diff.c: `gpuanalyze oom` and `diff`, which read what gpureplay prints (the
 * analyzer does not link the replayer: DESIGN.md). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/ana_cli.h"

/* gpureplay run for a command that reads its output (oom, diff): its stdout captured, its own
 * other lines (warnings) passed on to stderr, its error said in one line of ours. A usage error
 * about an option the user gave us to pass on (usage_ours: --policy, --capacity) is ours, exit
 * 2; its runtime error is its cause chain, exit 1, as if we had replayed ourselves. 0: it
 * succeeded and r holds what it printed (gm_tool_run_free); else the exit code, all said. */
int ana_cli_replay_run(char *const *argv, int usage_ours, const char *what, gm_tool_run_t *r) {
  gm_err_t err = {0};
  if (gm_tool_capture(argv, NULL, r, &err) < 0) {
    gm_err_wrap(&err, "cannot %s", what);
    return ana_cli_fail(&err);
  }
  if (r->exit_status == 0) {
    fputs(r->err, stderr);
    return 0;
  }
  char msg[GM_ERR_MSG_MAX], *rest = NULL;
  int named = gm_tool_message(r, "gpureplay", msg, sizeof msg, &rest);
  if (rest) fputs(rest, stderr);
  free(rest);
  int rc = 1;
  if (r->exit_status == 2 && named && usage_ours && (strstr(msg, "--policy") || strstr(msg, "--capacity")))
    rc = ana_cli_usage_error(msg);
  else if (r->exit_status == 1 && named) gm_log(GM_LOG_ERROR, "%s", msg);
  else if (r->exit_status == 2 && named)
    gm_log(GM_LOG_ERROR, "cannot %s: %s refused it: %s%s", what, argv[0], msg,
           strstr(msg, "unknown option") ? " (a gpureplay older than this gpuanalyze?)" : "");
  else gm_log(GM_LOG_ERROR, "cannot %s: %s", what, msg);
  gm_tool_run_free(r);
  return rc;
}

/* `oom`: gpureplay --explain-oom replays and searches; this says its answer. */
int ana_cmd_oom(const config_t *c, const char *path) {
  gm_err_t err = {0};
  if (ana_cli_wrong_kind(path, GM_WANT(GM_FILE_TRACE))) return 1;
  char replay[PATH_MAX], jobs[32], cap[48];
  if (!gm_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay, NULL)) {
    gm_log(GM_LOG_ERROR, "gpureplay not found (beside gpuanalyze, $GPUREPLAY, PATH): oom replays the trace "
           "with it (--gpureplay=PATH)");
    return 1;
  }
  uint64_t j = c->jobs ? c->jobs : ana_cli_default_jobs();
  snprintf(jobs, sizeof jobs, "--jobs=%" PRIu64, j > 256 ? 256 : j);
  snprintf(cap, sizeof cap, "--capacity=%" PRIu64, c->capacity);
  size_t pl = c->policy ? strlen(c->policy) + 16 : 1;
  char *pol = malloc(pl);
  if (!pol) return 1;
  snprintf(pol, pl, "--policy=%s", c->policy ? c->policy : "");
  char *argv[10];
  int n = 0;
  argv[n++] = replay;
  argv[n++] = "--explain-oom";
  argv[n++] = "--json";
  argv[n++] = jobs;
  if (c->capacity) argv[n++] = cap;
  if (c->policy) argv[n++] = pol;
  if (c->strict) argv[n++] = "--strict";
  argv[n++] = "--"; /* a trace named -x.zst is a trace */
  argv[n++] = (char *)path;
  argv[n] = NULL;
  char what[PATH_MAX + 64];
  snprintf(what, sizeof what, "explain why '%s' runs out of memory", path);
  gm_tool_run_t r;
  int rc = ana_cli_replay_run(argv, 1, what, &r);
  free(pol);
  if (rc) return rc;
  ana_oom_t o;
  gm_status_t s = ana_oom_read(r.out, &o, &err);
  gm_tool_run_free(&r);
  if (s < 0) return ana_cli_fail(&err);
  if (c->json) s = ana_oom_print_json(stdout, &o, &err);
  else ana_oom_print_text(stdout, path, &o);
  ana_oom_free(&o);
  return s < 0 ? ana_cli_fail(&err) : 0;
}

/* diff's peak reserved of one trace: gpureplay --json under the setting its job ran with. */
int ana_cli_diff_reserved(const config_t *c, const char *replay, const char *trace, ana_diff_side_t *side) {
  gm_err_t err = {0};
  char spec[1100], pol[1200], what[PATH_MAX + 64];
  if (ana_trace_ran_with(trace, ana_cli_read_flags(c), spec, sizeof spec, &err) < 0) return ana_cli_fail(&err);
  snprintf(pol, sizeof pol, "--policy=%s", spec);
  /* the recorded timing of stream events: one figure, not a range */
  char *argv[9];
  int n = 0;
  argv[n++] = (char *)replay;
  argv[n++] = "--json";
  argv[n++] = "-q";
  argv[n++] = "--event-timing=recorded";
  argv[n++] = pol;
  if (c->strict) argv[n++] = "--strict";
  argv[n++] = "--";
  argv[n++] = (char *)trace;
  argv[n] = NULL;
  snprintf(what, sizeof what, "replay '%s' for its peak reserved", trace);
  gm_tool_run_t r;
  int rc = ana_cli_replay_run(argv, 0, what, &r);
  if (rc) return rc;
  gm_status_t s = ana_replay_peak_read(r.out, &side->peak_reserved, side->policy, sizeof side->policy, &err);
  gm_tool_run_free(&r);
  if (s < 0) return ana_cli_fail(&err);
  side->has_reserved = 1;
  return 0;
}

int ana_cmd_diff(const config_t *c, char **pos) {
  gm_err_t err = {0};
  for (int i = 0; i < 2; i++)
    if (ana_cli_wrong_kind(pos[i], GM_WANT(GM_FILE_TRACE))) return 1;
  if (c->csv_dir && access(c->csv_dir, F_OK) != 0 && gm_output_check(c->csv_dir, &err) < 0) return ana_cli_fail(&err);
  if (c->html && gm_output_check(c->html, &err) < 0) return ana_cli_fail(&err);
  ana_diff_t *d = malloc(sizeof *d);
  if (!d) return 1;
  gm_status_t s = ana_diff_traces(pos[0], pos[1], ana_cli_read_flags(c), d, &err);
  if (s < 0) {
    free(d);
    return ana_cli_fail(&err);
  }
  char replay[PATH_MAX];
  int rc = 0;
  if (!c->no_replay && !gm_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay, NULL))
    gm_log(GM_LOG_WARN, "gpureplay not found (beside gpuanalyze, $GPUREPLAY, PATH): the diff goes without peak "
           "reserved (--gpureplay=PATH; --no-replay skips it)");
  else
    for (int i = 0; i < 2 && !c->no_replay && rc == 0; i++) rc = ana_cli_diff_reserved(c, replay, pos[i], &d->side[i]);
  if (rc == 0 && c->json) s = ana_diff_print_json(stdout, d, &err);
  else if (rc == 0) ana_diff_print_text(stdout, d, c->top ? (int)(c->top > 100000 ? 100000 : c->top) : 15);
  if (rc == 0 && s >= 0 && c->html) {
    s = ana_diff_write_html(d, c->html, &err);
    if (s >= 0) ana_cli_say("wrote %s (the two runs side by side)", c->html);
  }
  if (rc == 0 && s >= 0 && c->csv_dir) {
    s = ana_diff_write_csv(d, c->csv_dir, &err);
    if (s >= 0) ana_cli_say("wrote diff_summary.csv, diff_callsites.csv and diff_timeline.csv into %s/", c->csv_dir);
  }
  ana_diff_free(d);
  free(d);
  if (rc) return rc;
  return s < 0 ? ana_cli_fail(&err) : 0;
}
