/* ana_cmd_report_tune.c: whether `gpuanalyze report` runs the tuner (gpureplay --tune) or the
 * sweep alone, and the key its replays are kept under for reuse (ana_replay_key.c).
 *
 * The tuner is the default, whatever the trace's length: its choice (smallest memory within the
 * time budget, the smallest GPU it fits) is the advice. A long trace (past 1 M events) is
 * searched on its steady state, the warm-up and the distinct training steps, and the finalists
 * replayed on the whole trace (gpureplay --tune-reduce=auto, replay/tool/tune/README.md); one
 * past 5 M events without a period gets the sweep's grid on the whole trace, said so. --tune is
 * the tuner's search wherever no period is found too (--tune-reduce=always: the whole trace
 * searched, minutes on 10 M events); --no-tune is the sweep always. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/ana_cli.h"

int ana_report_tune_plan(config_t *c, char **traces, int n) {
  (void)traces;
  (void)n;
  if (c->tune && c->no_tune) return ana_cli_usage_error("--tune and --no-tune: give one");
  c->tune_now = !c->no_tune;
  return 0;
}

void ana_report_key_want(const config_t *c, const char *gpureplay, ana_replay_key_t *k) {
  memset(k, 0, sizeof *k);
  /* "tune": the search with hard limits (--limits; what older databases hold), "tune:no-limits"
   * the report's default */
  snprintf(k->what, sizeof k->what, "%s%s", !c->tune_now ? "sweep" : c->limits ? "tune" : "tune:no-limits",
           c->tune_now && c->tune ? ":always" : "");
  /* --jobs is not here: results do not depend on it (bench/RESULTS.md) */
  snprintf(k->options, sizeof k->options, "--capacity=%" PRIu64 "%s", c->capacity, c->strict ? " --strict" : "");
  char *argv[] = {(char *)gpureplay, "--version", NULL};
  gm_tool_run_t r;
  gm_err_t err = {0};
  /* "": a gpureplay that cannot say its version (ana_replay_key_serves then trusts the note) */
  if (gm_tool_capture(argv, NULL, &r, &err) == GM_OK) {
    /* its version line, and the binary's size and time: a rebuilt or reinstalled gpureplay of
     * the same version number (a developer's, a fixed package) replays again */
    struct stat sb;
    if (r.exit_status == 0 && r.out[0] && stat(gpureplay, &sb) == 0)
      snprintf(k->tool, sizeof k->tool, "%.*s; %lld bytes, %lld.%09ld", (int)strcspn(r.out, "\n"), r.out,
               (long long)sb.st_size, (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
    gm_tool_run_free(&r);
  }
}
