/* ana_cmd_trace.c: `gpuanalyze info` and `dump`: one trace read straight from its file. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/ana_cli.h"

/* Progress of a long read on a terminal (stderr only), one \r line; the caller ends it. */
static void info_progress(void *ctx, uint64_t events, uint64_t chunks, uint64_t total) {
  int *shown = ctx;
  if (total)
    fprintf(stderr, "\rgpuanalyze: info: %" PRIu64 " M events read, chunk %" PRIu64 " of %" PRIu64 " (%.0f%%)",
            events / 1000000, chunks, total, 100.0 * (double)chunks / (double)total);
  else
    fprintf(stderr, "\rgpuanalyze: info: %" PRIu64 " M events read", events / 1000000);
  fflush(stderr);
  *shown = 1;
}

int ana_cmd_info(const config_t *c, const char *path) {
  gm_err_t err = {0};
  if (ana_cli_wrong_kind(path, GM_WANT(GM_FILE_TRACE))) return 1;
  gmt_header_t h;
  ana_summary_t s;
  gmt_reader_stats_t rs;
  char damage[GM_ERR_MSG_MAX];
  int shown = 0;
  gm_status_t st = ana_trace_summarize_progress(path, ana_cli_read_flags(c), &h, &s, &rs, damage, sizeof damage,
                                                isatty(STDERR_FILENO) ? info_progress : NULL, &shown, &err);
  if (shown) fputc('\n', stderr);
  if (st < 0) {
    gmt_header_free(&h);
    return ana_cli_fail(&err);
  }
  ana_info_print(stdout, path, &h, &s, &rs, damage);
  gmt_header_free(&h);
  return 0;
}

int ana_cmd_dump(const config_t *c, const char *path) {
  gm_err_t err = {0};
  if (ana_cli_wrong_kind(path, GM_WANT(GM_FILE_TRACE))) return 1;
  gmt_reader_t *r = NULL;
  if (gmt_reader_open_flags(&r, path, ana_cli_read_flags(c), &err) < 0) {
    gm_err_wrap(&err, "cannot open '%s'", path);
    return ana_cli_fail(&err);
  }
  gm_status_t st;
  if (c->csv) {
    st = gmt_csv_export(r, stdout, &err);
  } else {
    gmt_event_t ev;
    char line[1024];
    uint64_t n = 0;
    while ((!c->limit || n < c->limit) && (st = gmt_reader_next(r, &ev, &err)) == GM_OK) {
      gmt_event_format(&ev, r, line, sizeof line);
      printf("%s\n", line);
      n++;
    }
    if (st == GM_END) {
      const gmt_reader_stats_t *rs = gmt_reader_stats(r);
      if (rs->truncated) gm_log(GM_LOG_WARN, "'%s' is truncated: it ends after chunk %" PRIu64, path, rs->chunks);
      if (rs->seq_gaps) gm_log(GM_LOG_WARN, "'%s': %" PRIu64 " chunks missing by sequence number", path, rs->seq_gaps);
      if (rs->dropped) gm_log(GM_LOG_WARN, "'%s': the source dropped %" PRIu64 " records", path, rs->dropped);
    }
  }
  if (st >= 0 && gmt_stats_damaged(gmt_reader_stats(r))) {
    char what[256];
    gm_log(GM_LOG_WARN, "'%s' is damaged (%s): %s%s", path, gmt_reader_damage(r),
           gmt_stats_damage_text(gmt_reader_stats(r), what, sizeof what),
           gmt_stats_partial(gmt_reader_stats(r)) ? ": the dump is partial" : "");
  }
  gmt_reader_close(r);
  if (st < 0) {
    gm_err_wrap(&err, "cannot read '%s'", path);
    return ana_cli_fail(&err);
  }
  return 0; /* stdout is checked in main */
}
