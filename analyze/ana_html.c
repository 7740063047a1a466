/* ana_html.c: the HTML report: ONE self-contained file that opens offline. The charting
 * library (dygraphs, MIT, from Debian's libjs-dygraphs) is inlined. Each trace's section opens
 * with the answer (ana_html_first.c: headline, the line to paste, how far to trust it, every
 * setting's peak against the lower bound), then where the bytes go at the peak (the waste
 * split, live bytes by callsite, the stacked active-memory timeline of ana_html_timeline.c, the
 * segment map), then the tables of ana_report.c, each scrolling inside the window.
 *
 * Size: the timeline is downsampled in C onto a fixed number of buckets (max per bucket, so
 * peaks survive), maps and tables are capped, so the file stays far below 5 MB whatever the
 * trace length. Safety: every string that comes from a trace or a results file (paths,
 * command lines, policy names, callsites) is escaped (ana_html_esc.c). The page's frame, style
 * and script, which every page of the report shares, are ana_html_page.c. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_diff.h"
#include "analyze/ana_report_internal.h"

enum { ANA_HTML_RANK_SECTIONS = 8 }; /* a job of more ranks: a section for its largest only */

static void cell_html(FILE *out, sqlite3_stmt *st, int c) {
  char cell[256];
  int text = sqlite3_column_type(st, c) == SQLITE_TEXT;
  fputs(text ? "<td class=\"t\">" : "<td>", out);
  if (text) {
    ana_html_escape(out, (const char *)sqlite3_column_text(st, c));
  } else {
    ana_cell_text(st, c, cell, sizeof cell);
    ana_html_escape(out, cell);
  }
  fputs("</td>", out);
}

/* One row (a trace's provenance) reads better as name/value lines. */
static void html_kv_table(ana_db_t *db, FILE *out, const ana_table_t *t, int64_t trace_id) {
  sqlite3_stmt *st = NULL;
  if (ana_table_query(db, t, trace_id, &st, NULL) < 0) return;
  if (sqlite3_step(st) == SQLITE_ROW) {
    fprintf(out, "<table class=\"kv\" id=\"%s-%" PRId64 "\">\n", t->name, trace_id);
    for (int c = 1; c < sqlite3_column_count(st); c++) {
      fputs("<tr><td>", out);
      ana_html_escape(out, sqlite3_column_name(st, c));
      fputs("</td>", out);
      cell_html(out, st, c);
      fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
  }
  sqlite3_finalize(st);
}

static void html_table(ana_db_t *db, FILE *out, const ana_table_t *t, int64_t trace_id) {
  if (strcmp(t->name, "traces") == 0 && trace_id >= 0) {
    html_kv_table(db, out, t, trace_id);
    return;
  }
  sqlite3_stmt *st = NULL;
  if (ana_table_query(db, t, trace_id, &st, NULL) < 0) return;
  int nc = sqlite3_column_count(st), rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (rows++ == 0) {
      fprintf(out, "<h3>");
      ana_html_escape(out, t->title);
      fprintf(out, "</h3>\n<table id=\"%s-%" PRId64 "\"><tr>", t->name, trace_id);
      for (int c = 1; c < nc; c++) {
        fputs("<th>", out);
        ana_html_escape(out, sqlite3_column_name(st, c));
        fputs("</th>", out);
      }
      fputs("</tr>\n", out);
    }
    fputs("<tr>", out);
    for (int c = 1; c < nc; c++) cell_html(out, st, c);
    fputs("</tr>\n", out);
  }
  if (rows) fputs("</table>\n", out);
  sqlite3_finalize(st);
}

/* A trace salvaged from damage: say so above its figures, not only in its table. */
static void partial_banner(ana_db_t *db, FILE *out, int64_t id) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT damaged_chunks, lost_events, uncounted_chunks, index_damaged, events"
                         " FROM traces WHERE trace_id=? AND (partial OR index_damaged)",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    gmt_reader_stats_t rs = {0};
    rs.damaged_chunks = (uint64_t)sqlite3_column_int64(st, 0);
    rs.lost_events = (uint64_t)sqlite3_column_int64(st, 1);
    rs.uncounted_chunks = (uint64_t)sqlite3_column_int64(st, 2);
    rs.index_damaged = sqlite3_column_int(st, 3);
    char what[256];
    fprintf(out, "<p class=\"partial\">%s: the trace is damaged: %s. %s</p>\n",
            gmt_stats_partial(&rs) ? "PARTIAL" : "Note", gmt_stats_damage_text(&rs, what, sizeof what),
            gmt_stats_partial(&rs) ? "The figures cover the events that could be read." : "No event was lost.");
  }
  sqlite3_finalize(st);
}

/* Traces that hold nothing to chart: said at the top of their section. */
static void empty_note(ana_db_t *db, FILE *out, int64_t id) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT events, (SELECT COALESCE(SUM(count), 0) FROM trace_kinds k WHERE k.trace_id = t.trace_id"
                         " AND k.kind = 'alloc'), (SELECT COALESCE(SUM(count), 0) FROM trace_kinds k WHERE"
                         " k.trace_id = t.trace_id AND k.kind = 'free'), peak_live_bytes FROM traces t WHERE trace_id=?",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    long long ev = sqlite3_column_int64(st, 0), al = sqlite3_column_int64(st, 1), fr = sqlite3_column_int64(st, 2);
    if (ev == 0)
      fputs("<p class=\"partial\" id=\"empty\">This trace holds no events: nothing was recorded, so there is nothing "
            "to report.</p>\n",
            out);
    else if (al == 0 && fr > 0)
      fprintf(out, "<p class=\"partial\" id=\"empty\">This trace holds only frees (%lld of them) of memory allocated "
                   "before recording began, and no allocation: nothing is live in it, so there is no peak to "
                   "explain. Start recording before the job allocates.</p>\n",
              fr);
    else if (al == 0)
      fprintf(out, "<p class=\"partial\" id=\"empty\">This trace holds %lld events and no GPU allocation: nothing "
                   "to replay or explain.</p>\n",
              ev);
    else if (sqlite3_column_int64(st, 3) == 0)
      fputs("<p class=\"partial\" id=\"empty\">No GPU device memory is live at any moment of this trace (its "
            "allocations are of other memory kinds).</p>\n",
            out);
  }
  sqlite3_finalize(st);
}

/* The recorded run's own out-of-memory, first thing in its section. */
static void oom_banner(FILE *out, const char *rec_text) {
  const char *p = rec_text ? strstr(rec_text, "OUT OF MEMORY") : NULL;
  if (!p) return;
  size_t l = strcspn(p, "\n");
  char *line = strndup(p, l);
  if (!line) return;
  fputs("<p class=\"oomline\">", out);
  ana_html_escape(out, line);
  fputs("</p>\n", out);
  free(line);
}

/* Jobs of more ranks than get a section each: which rank has one, and where the others are. */
static void ranks_note(ana_db_t *db, FILE *out) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT COUNT(*), command_line, (SELECT rank FROM traces u WHERE u.command_line IS t.command_line"
                         " AND u.world_size IS t.world_size AND u.rank IS NOT NULL ORDER BY peak_live_bytes DESC, trace_id"
                         " LIMIT 1), MAX(peak_live_bytes), MIN(peak_live_bytes) FROM traces t WHERE rank IS NOT NULL"
                         " GROUP BY command_line, world_size HAVING COUNT(*) > ?1",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int(st, 1, ANA_HTML_RANK_SECTIONS);
  while (sqlite3_step(st) == SQLITE_ROW) {
    char b1[32], b2[32];
    fprintf(out, "<p class=\"partial\" id=\"ranks-note\">%lld ranks of one job (<code>", (long long)sqlite3_column_int64(st, 0));
    ana_html_escape(out, (const char *)sqlite3_column_text(st, 1));
    fprintf(out, "</code>): the section below is of rank %lld, the one with the largest peak live (%s; the "
                 "smallest is %s); every rank is a row of <a href=\"#ranks--1\">Ranks side by side</a> at the end. "
                 "<code>gpuanalyze report RANK.zst</code> reports one rank alone.</p>\n",
            (long long)sqlite3_column_int64(st, 2), gm_format_size((uint64_t)sqlite3_column_int64(st, 3), b1, sizeof b1),
            gm_format_size((uint64_t)sqlite3_column_int64(st, 4), b2, sizeof b2));
  }
  sqlite3_finalize(st);
}

gm_status_t ana_report_html(ana_db_t *db, const char *path, gm_err_t *err) {
  return ana_report_html_diff(db, path, NULL, err);
}

gm_status_t ana_report_html_diff(ana_db_t *db, const char *path, const ana_diff_t *diff, gm_err_t *err) {
  gm_status_t s = ana_report_prepare(db, err);
  if (s < 0) return s;
  /* Written whole or not at all: a temporary file renamed over path (gm_out). */
  gm_out_t *o = NULL;
  if ((s = gm_out_open(&o, path, err)) < 0) return gm_err_wrap(err, "cannot write the HTML report");
  FILE *out = gm_out_file(o);
  if (!out) {
    gm_out_abort(o);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  ana_html_page_begin(out, "gpumem report");
  if (diff) ana_html_diff(out, diff);
  sqlite3_stmt *st = NULL;
  int ntraces = 0;
  ranks_note(db, out);
  int jobs = 0;
  if ((s = ana_ranks(db, out, ANA_RANKS_HTML, &jobs, err)) < 0) {
    gm_out_abort(o);
    return gm_err_wrap(err, "cannot write the HTML report '%s'", path);
  }
  /* One section per trace, but for a job of many ranks only its rank with the largest peak: the
   * rest are rows of the ranks table (256 ranks made 75 MB of HTML). */
  s = ana_prepare(db, &st,
                  "WITH j AS (SELECT trace_id, ROW_NUMBER() OVER (PARTITION BY command_line, world_size"
                  " ORDER BY peak_live_bytes DESC, trace_id) k, COUNT(*) OVER (PARTITION BY command_line, world_size) n"
                  " FROM traces WHERE rank IS NOT NULL)"
                  " SELECT t.trace_id, t.path FROM traces t LEFT JOIN j USING(trace_id)"
                  " WHERE j.trace_id IS NULL OR j.n <= ?1 OR j.k = 1 ORDER BY t.rank, t.trace_id",
                  err);
  if (s >= 0) sqlite3_bind_int(st, 1, ANA_HTML_RANK_SECTIONS);
  while (s >= 0 && sqlite3_step(st) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    ntraces++;
    fprintf(out, "<section id=\"trace-%" PRId64 "\"><h2>Trace %" PRId64 ": ", id, id);
    ana_html_escape(out, (const char *)sqlite3_column_text(st, 1));
    fputs("</h2>\n", out);
    /* The answer first: the advice as data (the same choice `recommend` prints) and its text. */
    ana_advice_t adv;
    char *rec = NULL;
    size_t reclen = 0;
    FILE *mem = open_memstream(&rec, &reclen);
    if (!mem) {
      s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      break;
    }
    s = ana_advise(db, id, mem, &adv, err);
    fclose(mem);
    /* the answer to "why did it run out" comes before everything else */
    int oom = ana_html_oom(db, out, id, (const char *)sqlite3_column_text(st, 1));
    ana_coverage_html(db, out, id); /* then, before any figure: a trace of part of the run */
    partial_banner(db, out, id);
    empty_note(db, out, id);
    if (!oom) oom_banner(out, rec);
    int64_t rec_run = -1;
    if (s >= 0) {
      ana_html_first_screen(db, out, id, &adv, rec, &rec_run);
      ana_html_bars(db, out, id, &adv, rec_run);
      ana_html_predict(db, out, id, adv.device);
      fputs("<h2 class=\"sub\">Where the bytes go at the peak</h2>\n", out);
      ana_html_waste(db, out, id, rec_run, adv.best_run_id);
      ana_html_callsites(db, out, id);
      s = ana_html_timeline(db, out, id, rec_run, adv.best_run_id, err);
    }
    free(rec);
    if (s >= 0) ana_html_segmap(db, out, id, rec_run, adv.best_run_id);
    fputs("<h2 class=\"sub\">Details</h2>\n", out);
    for (const ana_table_t *t = ana_tables; t->name && s >= 0; t++)
      if (strcmp(t->name, "ranks") != 0) {
        fputs("<div class=\"scroll\">", out);
        html_table(db, out, t, id);
        fputs("</div>\n", out);
      }
    fputs("</section>\n", out);
  }
  sqlite3_finalize(st);
  if (s >= 0 && ntraces == 0)
    fputs("<p class=\"partial\" id=\"empty\">No traces in the database: load some with "
          "<code>gpuanalyze load TRACE.zst R.json</code>.</p>\n",
          out);
  if (s >= 0) {
    for (const ana_table_t *t = ana_tables; t->name; t++)
      if (strcmp(t->name, "ranks") == 0) {
        fputs("<div class=\"scroll\">", out);
        html_table(db, out, t, -1);
        fputs("</div>\n", out);
      }
    fprintf(out, "<p class=\"note\">gpuanalyze %s, database schema %d. Sizes in binary units. The lower bound is "
                 "the peak of live requested bytes: no allocator can reserve less.</p>\n",
            ANA_VERSION, ANA_SCHEMA_VERSION);
    ana_html_page_end(out);
  }
  if (s < 0) {
    gm_out_abort(o);
    return gm_err_wrap(err, "cannot write the HTML report '%s'", path);
  }
  return gm_out_commit(o, err) < 0 ? gm_err_wrap(err, "cannot write the HTML report") : GM_OK;
}
