/* ana_cmd_load.c: `gpuanalyze load`, and the load options every command that loads shares
 * (progress on a terminal, warnings, the test hooks). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyze/ana_cli.h"

static int progress_shown; /* a \r progress line is on stderr and needs its newline */

/* Test hooks: GPUANALYZE_FAULT_AFTER_EVENTS=N makes a load fail after N events (to prove an
 * interrupted load leaves the database as it was); GPUANALYZE_TEST_HOLD_MS=N makes it hold its
 * write transaction N ms after its first batch of events, saying so on stderr (to run a
 * second process against a database that a load holds). */
static void hold_transaction(void *ctx, uint64_t events) {
  static int held;
  const char *ms = getenv("GPUANALYZE_TEST_HOLD_MS");
  if (held++ || !ms) return;
  fprintf(stderr, "gpuanalyze: test hook: holding the load's transaction for %s ms after %" PRIu64 " events\n", ms, events);
  fflush(stderr);
  long v = strtol(ms, NULL, 10);
  struct timespec ts = {v / 1000, (v % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void show_progress(void *ctx, const char *input, uint64_t events) {
  (void)ctx;
  char e[512];
  fprintf(stderr, "\rgpuanalyze: loading %s: %.1f M events", gm_escape(input, e, sizeof e), (double)events / 1e6);
  fflush(stderr);
  progress_shown = 1;
}

void ana_cli_end_progress(void) {
  if (progress_shown) fputc('\n', stderr);
  progress_shown = 0;
}

static void show_warning(void *ctx, const char *msg) {
  (void)ctx;
  ana_cli_end_progress();
  gm_log(GM_LOG_WARN, "%s", msg);
}

ana_load_opts_t ana_cli_load_opts(const config_t *c) {
  ana_load_opts_t o = {0};
  o.read_flags = ana_cli_read_flags(c);
  o.warn = show_warning;
  /* Progress only for a person watching: never into a log or a pipe. */
  if (isatty(STDERR_FILENO) && gm_log_level() >= GM_LOG_INFO) o.progress = show_progress;
  const char *f = getenv("GPUANALYZE_FAULT_AFTER_EVENTS");
  if (f) o.fault_after_events = strtoull(f, NULL, 10);
  if (getenv("GPUANALYZE_TEST_HOLD_MS")) o.batch_done = hold_transaction;
  return o;
}

int ana_cmd_load(const config_t *c, char **pos, int npos) {
  gm_err_t err = {0};
  for (int i = 0; i < npos; i++)
    if (ana_cli_wrong_kind(pos[i], GM_WANT(GM_FILE_TRACE) | GM_WANT(GM_FILE_RESULTS))) return 1;
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) return ana_cli_fail(&err);
  ana_load_opts_t o = ana_cli_load_opts(c);
  ana_load_stats_t st = {0};
  gm_status_t s = ana_db_load(db, (const char *const *)pos, npos, &o, &st, &err);
  ana_cli_end_progress();
  ana_db_close(db);
  if (s < 0) return ana_cli_fail(&err);
  gm_log(GM_LOG_INFO,
         "loaded %" PRIu64 " traces (%" PRIu64 " already there), %" PRIu64 " results files (%" PRIu64
         " already there): %" PRIu64 " events, %" PRIu64 " runs in %.2f s (%.2f M events/s) into '%s'",
         st.traces_loaded, st.traces_skipped, st.results_loaded, st.results_skipped, st.events, st.runs,
         st.seconds, st.seconds > 0 ? (double)st.events / st.seconds / 1e6 : 0.0, c->db);
  return 0;
}
