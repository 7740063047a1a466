/* ana_coverage.c: a loaded trace's coverage (formats' gmt_coverage, SPEC.md §3.4), for the
 * report and `recommend`: their first line on a trace that covers only part of the run.
 *
 * The database keeps the header's kv pairs (trace_kv) and the reader's stats (traces), so the
 * verdict is rebuilt from both exactly as `gpuanalyze info` and gpureplay make it from the file. */
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_db_internal.h"
#include "analyze/ana_report_internal.h"

int ana_trace_coverage(ana_db_t *db, int64_t trace_id, gmt_coverage_t *c) {
  memset(c, 0, sizeof *c);
  gmt_header_t h;
  gmt_header_init(&h);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT key, value FROM trace_kv WHERE trace_id=? AND (key LIKE 'coverage%'"
                         " OR key IN ('torch.snapshot.synthetic_initial_events', 'torch_history.cupti_truncated'))",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, trace_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
      const char *k = (const char *)sqlite3_column_text(st, 0), *v = (const char *)sqlite3_column_text(st, 1);
      if (k && v && gmt_header_kv_set(&h, k, v, NULL) < 0) break;
    }
  }
  sqlite3_finalize(st);
  st = NULL;
  gmt_reader_stats_t rs;
  memset(&rs, 0, sizeof rs);
  if (sqlite3_prepare_v2(db->h, "SELECT truncated, seq_gaps, dropped, damaged_chunks FROM traces WHERE trace_id=?",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, trace_id);
    if (sqlite3_step(st) == SQLITE_ROW) {
      rs.truncated = sqlite3_column_int(st, 0);
      rs.seq_gaps = (uint64_t)sqlite3_column_int64(st, 1);
      rs.dropped = (uint64_t)sqlite3_column_int64(st, 2);
      rs.damaged_chunks = (uint64_t)sqlite3_column_int64(st, 3);
    }
  }
  sqlite3_finalize(st);
  gmt_coverage(&h, &rs, c);
  gmt_header_free(&h);
  return c->partial;
}

int ana_coverage_print(ana_db_t *db, FILE *out, int64_t trace_id, const char *indent) {
  gmt_coverage_t c;
  if (!ana_trace_coverage(db, trace_id, &c)) return 0;
  char t[1024];
  fprintf(out, "%s%s\n", indent, gmt_coverage_text(&c, t, sizeof t));
  return 1;
}

int ana_coverage_html(ana_db_t *db, FILE *out, int64_t trace_id) {
  gmt_coverage_t c;
  if (!ana_trace_coverage(db, trace_id, &c)) return 0;
  char t[1024];
  fputs("<p class=\"partial\" id=\"coverage\"><b>", out);
  gmt_coverage_text(&c, t, sizeof t);
  /* "PARTIAL trace:" in bold, the rest as text */
  const char *rest = strchr(t, ':');
  ana_html_escape(out, "PARTIAL trace");
  fputs("</b>", out);
  ana_html_escape(out, rest ? rest : t);
  fputs("</p>\n", out);
  return 1;
}
