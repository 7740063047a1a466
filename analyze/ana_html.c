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
 * command lines, policy names, callsites) is HTML-escaped in the page and, inside <script>
 * JSON, has '<', '>', '&', U+2028 and U+2029 escaped so it can neither close the script
 * element nor break the JavaScript parser. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_diff.h"
#include "analyze/ana_report_internal.h"

enum { ANA_HTML_RANK_SECTIONS = 8 }; /* a job of more ranks: a section for its largest only */

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
    "body{font-family:system-ui,sans-serif;margin:1.2em 2em;color:#222;max-width:1400px}"
    "h1{font-size:1.4em;margin:.2em 0}h2{border-bottom:2px solid #ddd;margin-top:1.6em;font-size:1.25em}"
    "h3{font-size:1.05em;margin:1.2em 0 .4em}h4{margin:.3em 0;font-size:.95em;word-break:break-all}"
    "table{border-collapse:collapse;margin:.3em 0 1.2em;font-size:13px}"
    ".scroll,.svgbox{max-width:100%;overflow-x:auto}"
    "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right;vertical-align:top}"
    "td.t,th{text-align:left}th{background:#f0f0f0}td.t{max-width:60em;overflow-wrap:anywhere}"
    ".chart{width:100%;height:380px;margin:.5em 0}"
    ".note{color:#666;font-size:13px}.legend{font-size:12px;min-height:3em;margin-bottom:1em}"
    ".kv td:first-child{text-align:left;font-weight:bold}"
    ".partial{background:#fff3cd;border:1px solid #e0c060;padding:.5em 1em}"
    ".oomline{background:#fde2e1;border:1px solid #d9534f;padding:.5em 1em}"
    ".cards{display:flex;flex-wrap:wrap;gap:12px;margin:.6em 0}"
    ".card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:180px;max-width:320px;background:#fafafa}"
    ".card .ct{font-size:12px;color:#555}.card .cv{font-size:26px;font-weight:600;margin:2px 0}"
    ".card .cs{font-size:12px;color:#555;overflow-wrap:anywhere}"
    ".card.best{border-color:#2b6cb0;background:#ebf4ff}.card.save{border-color:#2f855a;background:#f0fff4}"
    ".card.oom,.card.rec.oom{border-color:#c53030;background:#fff5f5}"
    ".paste{margin:.6em 0;font-size:14px}.paste code{background:#1e1e1e;color:#f5f5f5;padding:4px 8px;"
    "border-radius:4px;overflow-wrap:anywhere}"
    "button.copy{margin-left:6px;padding:3px 10px;cursor:pointer}"
    ".trust{font-size:14px;padding:4px 10px;border-left:4px solid #999}.trust-exact{border-color:#2f855a}"
    ".trust-range{border-color:#d69e2e}.trust-unvalidated{border-color:#c53030}"
    "ul.rec{font-size:13px;margin:.3em 0;padding-left:1.2em}ul.rec li{overflow-wrap:anywhere}"
    "ul.rec li.l2{margin-left:1.5em}ul.rec li.l3{margin-left:3em}"
    "svg text{font-size:12px;font-family:system-ui,sans-serif}"
    ".bar.other rect{fill:#a0aec0}.bar.best rect{fill:#2b6cb0}.bar.rec rect{fill:#dd6b20}"
    ".bar.oom rect{fill:#e53e3e}.bar line.range{stroke:#1a202c;stroke-width:2}.bar.best text.v{font-weight:bold}"
    ".lb{stroke:#000;stroke-width:1.5;stroke-dasharray:4 3}"
    ".split rect.live,rect.live,.key.live{fill:#38a169;background:#38a169}"
    ".split rect.round,.key.round{fill:#ecc94b;background:#ecc94b}"
    ".split rect.freein,.key.freein{fill:#ed8936;background:#ed8936}"
    ".split rect.cached,.key.cached{fill:#a0aec0;background:#a0aec0}"
    "rect.free,.key.free{fill:#e2e8f0;background:#e2e8f0;stroke:#a0aec0;stroke-width:.5}"
    ".key{display:inline-block;width:11px;height:11px;margin:0 3px 0 10px;vertical-align:middle}"
    ".side{display:flex;flex-wrap:wrap;gap:24px}.segmap{max-height:820px;overflow:auto}"
    "td.cs summary{cursor:pointer}.stack{font-family:monospace;font-size:12px;margin:4px 0}"
    ".diffup{color:#c53030}.diffdown{color:#2f855a}"
    ".stack .lib{color:#888}.norun{font-size:14px}select{max-width:40em}"
    "table.waste td.t{min-width:16em}table.callsites td.cs{min-width:30em}";

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

/* The page's script: the stacked timelines (dygraphs; each callsite's own bytes in the legend,
 * a select for the reserved lines) and the copy buttons. Every chart marks itself drawn
 * (data-drawn) once dygraphs has painted it, for the browser test. */
static const char page_js[] =
    "function gmFmt(v){var u=['B','KiB','MiB','GiB','TiB'],i=0;v=Math.max(0,v);"
    "while(v>=1024&&i<4){v/=1024;i++;}return (i?v.toFixed(2):v.toFixed(0))+' '+u[i];}"
    "function gmEsc(s){return String(s).replace(/[&<>\"']/g,function(c){return '&#'+c.charCodeAt(0)+';';});}"
    "document.querySelectorAll('script.chart-data').forEach(function(el){"
    "var d=JSON.parse(el.textContent),id=el.dataset.chart,div=document.getElementById(id);"
    "if(!d.rows.length){div.textContent='No timeline: the trace has no allocations.';div.style.height='auto';"
    "div.setAttribute('data-drawn','empty');return;}"
    "var K=d.nstack,n=d.labels.length-1,R=n-K,series={};"
    "var pal=['#4e79a7','#f28e2b','#59a14f','#b07aa1','#edc948','#76b7b2','#ff9da7','#9c755f','#bab0ac'];"
    "var rc=['#c53030','#2b6cb0','#2f855a','#6b46c1','#975a16','#b83280','#4a5568','#0987a0'];"
    "for(var j=0;j<K;j++)series[d.labels[1+j]]={fillGraph:true,strokeWidth:0.6,color:pal[(K-1-j)%9]};"
    "for(var r=0;r<R;r++)series[d.labels[1+K+r]]={strokeWidth:2,color:rc[r%8]};"
    "var g=new Dygraph(div,d.rows,{labels:d.labels,stepPlot:true,fillAlpha:0.9,axes:{y:{labelsKMG2:true}},"
    "xlabel:d.xlabel||'seconds since the trace started',ylabel:'bytes',legend:'always',"
    "labelsDiv:document.getElementById(id+'-legend'),showRangeSelector:true,series:series,"
    "legendFormatter:function(a){if(a.x==null)return '';var h=gmEsc(a.xHTML)+' s:';"
    "a.series.forEach(function(s,i){if(!s.isVisible||s.y==null)return;var v=s.y;"
    "if(i<K)v=s.y-(i+1<K?a.series[i+1].y:0);"
    "h+=' <span style=\"color:'+s.color+'\">'+gmEsc(s.label)+': '+gmFmt(v)+'</span>';});return h;},"
    "drawCallback:function(gr,initial){if(initial)div.setAttribute('data-drawn','1');}});"
    "var sel=document.getElementById(id+'-select');"
    "function show(v){var vis=[];for(var i=0;i<n;i++){var r=i-K;"
    "vis.push(i<K||(v==='main'?d.show.indexOf(r)>=0:v==='all'?true:r===+v));}g.setVisibility(vis);}"
    "[['main','as run and recommended'],['all','every setting']].forEach(function(o){"
    "var e=document.createElement('option');e.value=o[0];e.textContent=o[1];sel.appendChild(e);});"
    "for(var q=0;q<R;q++){var o=document.createElement('option');o.value=String(q);"
    "o.textContent=d.labels[1+K+q];sel.appendChild(o);}"
    "sel.onchange=function(){show(sel.value);};sel.value=d.show.length?'main':'all';show(sel.value);});"
    "document.querySelectorAll('button.copy').forEach(function(b){b.onclick=function(){"
    "var el=document.getElementById(b.dataset.copy),t=el.textContent;"
    "function done(){b.textContent='Copied';}"
    "function fallback(){var rg=document.createRange();rg.selectNodeContents(el);var s=window.getSelection();"
    "s.removeAllRanges();s.addRange(rg);try{document.execCommand('copy');done();}catch(e){b.textContent='Press Ctrl+C';}}"
    "if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(t).then(done,fallback);}"
    "else fallback();};});";

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

void ana_html_page_begin(FILE *out, const char *title) {
  fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
               "<title>%s</title>\n<style>%s</style>\n"
               "<script>/* dygraphs 2.2.1, MIT licence, from Debian's libjs-dygraphs */\n",
          title, css);
  fwrite(ana_dygraph_js, 1, ana_dygraph_js_len, out);
  fprintf(out, "\n</script>\n</head><body>\n<h1>%s</h1>\n", title);
}

void ana_html_page_end(FILE *out) { fprintf(out, "<script>%s</script>\n</body></html>\n", page_js); }

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
