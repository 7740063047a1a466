/* ana_cmd_report_tune.c: whether `gpuanalyze report` runs the tuner (gpureplay --tune) or the
 * sweep alone, and the key its replays are kept under for reuse (ana_replay_key.c).
 *
 * The tuner is the default: its choice (smallest memory within the time budget, the smallest
 * GPU it fits) is the advice. It costs about 8 s of CPU per million events (bench/RESULTS.md
 * "Speed of the replay for the search") against the sweep's ~1 s, so past ANA_TUNE_AUTO_EVENTS
 * events in all (the command's traces together) the report replays the sweep only and says
 * how to ask for the tuner (--tune); --no-tune is the sweep always. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/ana_cli.h"

/* ~40 s of CPU for the tuner, ~20-30 s on two cores; the sweep of as many events takes ~5 s. */
#define ANA_TUNE_AUTO_EVENTS 5000000ull

/* Events of a trace from its index, without decoding; without one (a truncated trace) by a
 * pass over its events. */
static gm_status_t trace_events(const char *path, unsigned flags, uint64_t *events, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  *events = 0;
  if (gmt_reader_open_flags(&r, path, flags, err) != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  uint64_t chunks = gmt_reader_chunk_count(r);
  gm_status_t s = GM_OK;
  for (uint64_t i = 0; i < chunks && s == GM_OK; i++) {
    uint64_t ts, n = 0;
    s = gmt_reader_chunk_info(r, i, &ts, &n, err);
    *events += n;
  }
  if (chunks == 0 || s != GM_OK) {
    *events = 0;
    s = GM_OK;
    const gmt_event_t *evs = NULL;
    size_t n = 0;
    while (gmt_reader_next_view(r, &evs, &n, err) == GM_OK && n) *events += n;
  }
  gmt_reader_close(r);
  return s;
}

int ana_report_tune_plan(config_t *c, char **traces, int n) {
  if (c->tune && c->no_tune) return ana_cli_usage_error("--tune and --no-tune: give one");
  if (c->no_tune) return c->tune_now = 0, 0;
  if (c->tune) return c->tune_now = 1, 0;
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    uint64_t e = 0;
    gm_err_t err = {0};
    if (trace_events(traces[i], ana_cli_read_flags(c), &e, &err) < 0) return ana_cli_fail(&err);
    total += e;
  }
  /* tests set a small limit rather than write a 5 M-event trace */
  const char *t = getenv("GPUANALYZE_TEST_TUNE_AUTO_EVENTS");
  uint64_t limit = t && *t ? strtoull(t, NULL, 10) : ANA_TUNE_AUTO_EVENTS;
  c->tune_now = total <= limit;
  if (!c->tune_now)
    ana_cli_say("%.1f M events%s: the sweep's grid only (the tuner runs by default up to %.0f M events, "
                "about 8 s of CPU per 1 M; `gpuanalyze report --tune` runs it)", (double)total / 1e6,
                n > 1 ? " in all" : "", (double)limit / 1e6);
  return 0;
}

void ana_report_key_want(const config_t *c, const char *gpureplay, ana_replay_key_t *k) {
  memset(k, 0, sizeof *k);
  /* "tune": the search with hard limits (--limits; what older databases hold), "tune:no-limits"
   * the report's default */
  snprintf(k->what, sizeof k->what, "%s", !c->tune_now ? "sweep" : c->limits ? "tune" : "tune:no-limits");
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
