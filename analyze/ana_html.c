/* ana_html.c: the HTML report: ONE self-contained file that opens offline. The charting
 * library (dygraphs, MIT, from Debian's libjs-dygraphs) is inlined; each trace gets an
 * interactive, zoomable timeline of reserved against allocated bytes per policy, next to the
 * trace's own live requested bytes, and the tables of ana_report.c.
 *
 * Size: timelines are downsampled in SQL onto CHART_POINTS buckets per trace (max per bucket,
 * so peaks survive) and tables are capped, so the file stays far below 5 MB whatever the
 * trace length. Safety: every string that comes from a trace or a results file (paths,
 * command lines, policy names, callsites) is HTML-escaped in the page and, inside <script>
 * JSON, has '<', '>', '&', U+2028 and U+2029 escaped so it can neither close the script
 * element nor break the JavaScript parser. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_report_internal.h"

enum { CHART_POINTS = 800, MAX_SERIES = 65 };

extern const unsigned char ana_dygraph_js[];
extern const unsigned long ana_dygraph_js_len;

void ana_html_escape(FILE *out, const char *s) {
  if (!s) return;
  for (; *s; s++) {
    switch (*s) {
      case '&': fputs("&amp;", out); break;
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '"': fputs("&quot;", out); break;
      case '\'': fputs("&#39;", out); break;
      default: fputc(*s, out);
    }
  }
}

/* Length of the valid UTF-8 sequence at s, 0 if invalid. */
static int utf8_len(const unsigned char *s) {
  if (s[0] < 0x80) return 1;
  int n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return n;
}

void ana_json_string(FILE *out, const char *str) {
  const unsigned char *s = (const unsigned char *)(str ? str : "");
  fputc('"', out);
  while (*s) {
    unsigned c = *s;
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc((int)c, out);
      s++;
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      fprintf(out, "\\u%04x", c);
      s++;
    } else if (c < 0x80) {
      fputc((int)c, out);
      s++;
    } else {
      int n = utf8_len(s);
      if (n == 0) {
        fputs("\\ufffd", out); /* not UTF-8: never pass raw bytes into the page */
        s++;
      } else if (n == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9)) {
        fprintf(out, "\\u%04x", s[2] == 0xa8 ? 0x2028 : 0x2029);
        s += 3;
      } else {
        fwrite(s, 1, (size_t)n, out);
        s += n;
      }
    }
  }
  fputc('"', out);
}

static const char css[] =
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
    "td.t,th{text-align:left}th{background:#f0f0f0}"
    ".chart{width:100%;height:380px;margin:1em 0}"
    "pre{background:#f7f7f7;padding:1em;white-space:pre-wrap}"
    "h2{border-bottom:2px solid #ddd;margin-top:2em}"
    ".note{color:#666;font-size:13px}.legend{font-size:13px;min-height:3em;margin-bottom:1em}"
    ".kv td:first-child{text-align:left;font-weight:bold}"
    ".partial{background:#fff3cd;border:1px solid #e0c060;padding:.5em 1em}";

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

/* The chart's data: x in seconds, then one column per series, carried forward over buckets
 * where a series has no point (the timelines are step functions). */
static gm_status_t chart_json(ana_db_t *db, FILE *out, int64_t trace_id, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  int64_t run_ids[MAX_SERIES];
  int nruns = 0;
  fputs("{\"labels\":[\"seconds\",\"trace: live requested\"", out);
  gm_status_t s = ana_prepare(db, &st,
                              "SELECT run_id, policy, backend FROM v_runs WHERE trace_id=? ORDER BY run_id", err);
  if (s < 0) return s;
  sqlite3_bind_int64(st, 1, trace_id);
  while (sqlite3_step(st) == SQLITE_ROW && nruns < (MAX_SERIES - 1) / 2) {
    run_ids[nruns++] = sqlite3_column_int64(st, 0);
    for (int k = 0; k < 2; k++) {
      char label[600];
      snprintf(label, sizeof label, "%s %s", (const char *)sqlite3_column_text(st, 1),
               k ? "allocated" : "reserved");
      fputc(',', out);
      ana_json_string(out, label);
    }
  }
  sqlite3_finalize(st);
  int nser = 1 + 2 * nruns;
  /* Duration: the trace's and the runs' timelines may end at different points. */
  int64_t dur = 1;
  s = ana_prepare(db, &st,
                  "SELECT MAX(m) FROM (SELECT MAX(ts_ns) m FROM trace_timeline WHERE trace_id=?1"
                  " UNION ALL SELECT MAX(l.ts_ns) FROM run_timeline l JOIN v_runs r USING(run_id)"
                  " WHERE r.trace_id=?1)",
                  err);
  if (s < 0) return s;
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0) dur = sqlite3_column_int64(st, 0) + 1;
  sqlite3_finalize(st);
  /* Downsample in SQL: max per bucket per series. */
  s = ana_prepare(db, &st,
                  "SELECT -1, CAST(ts_ns * ?2 / ?3 AS INTEGER) AS b, MAX(live_bytes), 0 FROM trace_timeline"
                  " WHERE trace_id=?1 GROUP BY b"
                  " UNION ALL SELECT l.run_id, CAST(l.ts_ns * ?2 / ?3 AS INTEGER) AS b, MAX(l.reserved),"
                  " MAX(l.allocated) FROM run_timeline l JOIN v_runs r USING(run_id) WHERE r.trace_id=?1"
                  " GROUP BY l.run_id, b",
                  err);
  if (s < 0) return s;
  sqlite3_bind_int64(st, 1, trace_id);
  sqlite3_bind_int64(st, 2, CHART_POINTS);
  sqlite3_bind_int64(st, 3, dur);
  double *grid = malloc(sizeof(double) * (CHART_POINTS + 1) * (size_t)nser);
  if (!grid) {
    sqlite3_finalize(st);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  for (size_t i = 0; i < (size_t)(CHART_POINTS + 1) * (size_t)nser; i++) grid[i] = NAN;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0), b = sqlite3_column_int64(st, 1);
    if (b < 0 || b > CHART_POINTS) continue;
    int col = -1;
    if (id == -1) col = 0;
    for (int k = 0; k < nruns && col < 0; k++)
      if (run_ids[k] == id) col = 1 + 2 * k;
    if (col < 0) continue;
    grid[b * nser + col] = (double)sqlite3_column_int64(st, 2);
    if (col > 0) grid[b * nser + col + 1] = (double)sqlite3_column_int64(st, 3);
  }
  sqlite3_finalize(st);
  fputs("],\"rows\":[", out);
  /* Rows only where some series has a point; every series carried forward over the gaps. */
  char *has = calloc(CHART_POINTS + 1, 1);
  if (!has) {
    free(grid);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  for (int b = 0; b <= CHART_POINTS; b++)
    for (int c = 0; c < nser; c++) has[b] |= !isnan(grid[b * nser + c]);
  for (int b = 1; b <= CHART_POINTS; b++)
    for (int c = 0; c < nser; c++)
      if (isnan(grid[b * nser + c])) grid[b * nser + c] = grid[(b - 1) * nser + c];
  int first = 1;
  for (int b = 0; b <= CHART_POINTS; b++) {
    if (!has[b]) continue;
    fprintf(out, "%s[%.9g", first ? "" : ",", (double)b * (double)dur / CHART_POINTS / 1e9);
    for (int c = 0; c < nser; c++) {
      double v = grid[b * nser + c];
      if (isnan(v)) fputs(",null", out);
      else fprintf(out, ",%.0f", v);
    }
    fputc(']', out);
    first = 0;
  }
  free(has);
  fputs("]}", out);
  free(grid);
  return GM_OK;
}

/* One chart per trace. With a dozen policies, 2 lines each, one picture is unreadable, so a
 * <select> shows one policy's reserved and allocated against the trace's live bytes, or every
 * policy's reserved at once; the legend lives below the chart, not over it. */
static const char chart_js[] =
    "document.querySelectorAll('script.chart-data').forEach(function(el){"
    "var d=JSON.parse(el.textContent);var id=el.dataset.chart;var div=document.getElementById(id);"
    "if(!d.rows.length){div.textContent='no timeline';return;}"
    "var g=new Dygraph(div,d.rows,{labels:d.labels,stepPlot:true,axes:{y:{labelsKMG2:true}},"
    "connectSeparatedPoints:true,xlabel:'seconds since the trace started',ylabel:'bytes',"
    "legend:'always',labelsDiv:document.getElementById(id+'-legend'),labelsSeparateLines:false,"
    "showRangeSelector:true,highlightSeriesOpts:{strokeWidth:2},"
    "series:{'trace: live requested':{strokeWidth:2,color:'#000'}}});"
    "var sel=document.getElementById(id+'-select');var n=d.labels.length-1;"
    "function show(v){var vis=[];for(var i=0;i<n;i++){var run=Math.floor((i-1)/2);"
    "vis.push(i===0||(v==='all'?(i%2===1):run===+v));}g.setVisibility(vis);}"
    "var all=document.createElement('option');all.value='all';all.textContent='every policy: reserved';"
    "sel.appendChild(all);"
    "for(var r=0;2*r+1<n;r++){var o=document.createElement('option');o.value=String(r);"
    "o.textContent=d.labels[2+2*r].replace(/ reserved$/,'')+': reserved and allocated';sel.appendChild(o);}"
    "sel.onchange=function(){show(sel.value);};sel.value=n>1?'0':'all';show(sel.value);});";

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

gm_status_t ana_report_html(ana_db_t *db, const char *path, gm_err_t *err) {
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
  fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<title>gpumem report</title>\n<style>%s</style>\n"
               "<script>/* dygraphs 2.2.1, MIT licence, from Debian's libjs-dygraphs */\n",
          css);
  fwrite(ana_dygraph_js, 1, ana_dygraph_js_len, out);
  fprintf(out, "\n</script>\n</head><body>\n<h1>gpumem report</h1>\n"
               "<p class=\"note\">gpuanalyze %s, database schema %d. Sizes in binary units. The lower "
               "bound is the peak of live requested bytes: no allocator can reserve less.</p>\n",
          ANA_VERSION, ANA_SCHEMA_VERSION);
  /* The recommendation first: it is what the reader came for. */
  char *rec = NULL;
  size_t reclen = 0;
  FILE *mem = open_memstream(&rec, &reclen);
  if (mem) {
    s = ana_recommend(db, mem, err);
    fclose(mem);
    fputs("<h2>Recommendation</h2>\n<pre id=\"recommendation\">", out);
    ana_html_escape(out, rec);
    fputs("</pre>\n", out);
    free(rec);
  }
  sqlite3_stmt *st = NULL;
  if (s >= 0) s = ana_prepare(db, &st, "SELECT trace_id, path FROM traces ORDER BY rank, trace_id", err);
  while (s >= 0 && sqlite3_step(st) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    fprintf(out, "<section id=\"trace-%" PRId64 "\"><h2>Trace %" PRId64 ": ", id, id);
    ana_html_escape(out, (const char *)sqlite3_column_text(st, 1));
    fprintf(out, "</h2>\n<p>Timeline: <select id=\"chart-%" PRId64 "-select\"></select> "
                 "<span class=\"note\">drag to zoom, double-click to reset</span></p>\n"
                 "<div class=\"chart\" id=\"chart-%" PRId64 "\"></div>\n"
                 "<div class=\"legend\" id=\"chart-%" PRId64 "-legend\"></div>\n"
                 "<script type=\"application/json\" class=\"chart-data\" data-chart=\"chart-%" PRId64 "\">",
            id, id, id, id);
    s = chart_json(db, out, id, err);
    fputs("</script>\n", out);
    partial_banner(db, out, id);
    for (const ana_table_t *t = ana_tables; t->name && s >= 0; t++)
      if (strcmp(t->name, "ranks") != 0) html_table(db, out, t, id);
    fputs("</section>\n", out);
  }
  sqlite3_finalize(st);
  if (s >= 0) {
    for (const ana_table_t *t = ana_tables; t->name; t++)
      if (strcmp(t->name, "ranks") == 0) html_table(db, out, t, -1);
    fprintf(out, "<script>%s</script>\n</body></html>\n", chart_js);
  }
  if (s < 0) {
    gm_out_abort(o);
    return gm_err_wrap(err, "cannot write the HTML report '%s'", path);
  }
  return gm_out_commit(o, err) < 0 ? gm_err_wrap(err, "cannot write the HTML report") : GM_OK;
}
