/* ana_html_oom.c: "Why it ran out", the report's first section for a trace that ends in an
 * out-of-memory error (or that fails under `report --capacity`).
 *
 * The facts are `gpuanalyze oom`'s: gpureplay --explain-oom's object (the analyzer does not link
 * the replayer), which `report` runs and stores in the database (trace_oom) beside the trace,
 * read back here with ana_oom_read. The section shows the failing request, what was live (by
 * callsite), what was reserved but free and why none of it could serve the request, and the
 * smallest change that makes the same trace fit; below the cards, the same account in the words
 * `gpuanalyze oom` prints (ana_oom_print_text), so the page and the terminal never disagree. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_gpureplay.h"
#include "analyze/ana_report_internal.h"

gm_status_t ana_oom_store(ana_db_t *db, int64_t trace_id, const char *json, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(db, &st, "INSERT OR REPLACE INTO trace_oom VALUES(?, ?)", err);
  if (s < 0) return s;
  sqlite3_bind_int64(st, 1, trace_id);
  sqlite3_bind_text(st, 2, json, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? GM_OK : ana_sql_err(db->h, err, "trace_oom");
}

static const char *sz(uint64_t v, char *b) { return gm_format_size(v, b, 32); }

static void card(FILE *out, const char *cls, const char *title, const char *value, const char *sub) {
  fprintf(out, "<div class=\"card %s\"><div class=\"ct\">%s</div><div class=\"cv\">", cls, title);
  ana_html_escape(out, value);
  fputs("</div><div class=\"cs\">", out);
  ana_html_escape(out, sub);
  fputs("</div></div>\n", out);
}

int ana_html_oom(ana_db_t *db, FILE *out, int64_t trace_id, const char *path) {
  sqlite3_stmt *st = NULL;
  char *json = NULL;
  if (sqlite3_prepare_v2(db->h, "SELECT json FROM trace_oom WHERE trace_id=?", -1, &st, NULL) != SQLITE_OK) return 0;
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) json = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  if (!json) return 0;
  ana_oom_t o;
  gm_err_t err = {0};
  gm_status_t s = ana_oom_read(json, &o, &err);
  free(json);
  if (s < 0) {
    fputs("<p class=\"partial\">The out-of-memory account could not be read: ", out);
    ana_html_escape(out, err.msg);
    fputs("</p>\n", out);
    return 0;
  }
  if (!o.found) {
    ana_oom_free(&o);
    return 0;
  }
  char a[32], b[32], sub[1400], line[600];
  /* the exact figures in data- attributes, for scripts and tests (the cards are rounded) */
  fprintf(out, "<section class=\"oom\" id=\"oom-%" PRId64 "\" data-event=\"%" PRId64 "\" data-size=\"%" PRIu64
               "\" data-live=\"%" PRIu64 "\" data-free=\"%" PRIu64 "\" data-fits-capacity=\"%" PRIu64 "\" data-ooms=\"%" PRIu64
               "\"><h2 class=\"sub\">Why it ran out</h2>\n",
          trace_id, o.event, o.size, o.live_bytes, o.free_bytes, o.fits_capacity, o.ooms);
  fprintf(out, "<p class=\"oomline\">Replayed under <code>");
  ana_html_escape(out, o.policy);
  fprintf(out, "</code> on a device of %s", sz(o.capacity, a));
  if (o.capacity_note && *o.capacity_note) {
    fputs(" (", out);
    ana_html_escape(out, o.capacity_note);
    fputc(')', out);
  }
  fprintf(out, ", request %" PRId64 " of the trace failed at %.3f s (%" PRIu64 " out-of-memory error%s in all).</p>\n",
          o.event, (double)o.ts_ns / 1e9, o.ooms, o.ooms == 1 ? "" : "s");
  fputs("<div class=\"cards\">\n", out);
  char stream[40];
  if (o.has_stream) snprintf(stream, sizeof stream, "stream %" PRIu64, o.stream);
  else snprintf(stream, sizeof stream, "synchronous");
  snprintf(sub, sizeof sub, "%s; %.1000s", stream, o.callsite && *o.callsite ? o.callsite : "no callsite recorded");
  card(out, "oom", "failed request", sz(o.size, a), sub);
  snprintf(sub, sizeof sub, "in %" PRIu64 " allocations%s%s; the setting had reserved %s", o.live_allocs,
           o.external_bytes ? " + external " : "", o.external_bytes ? sz(o.external_bytes, b) : "",
           sz(o.reserved_bytes, (char[32]){0}));
  card(out, "", "live then", sz(o.live_bytes, a), sub);
  if (o.has_free) {
    snprintf(sub, sizeof sub, "in %" PRIu64 " blocks, the largest %s; the request rounded to %s", o.free_blocks,
             sz(o.largest_free, b), sz(o.rounded, (char[32]){0}));
    card(out, "", "reserved but free", sz(o.free_bytes, a), sub);
  }
  if (o.live_exceeds) {
    snprintf(sub, sizeof sub, "the live bytes alone exceed the device by %s (needs at least %s)", sz(o.live_excess, a),
             sz(o.needs, b));
    card(out, "oom", "smallest change", "no setting helps", sub);
  } else if (o.setting) {
    ana_policy_env_line(o.setting, o.device_memory, line, sizeof line);
    snprintf(sub, sizeof sub, "peak reserved %s (from %s)%s%s", sz(o.setting_peak, a), o.setting_from,
             o.fits_capacity ? "; or a device of " : "", o.fits_capacity ? sz(o.fits_capacity, b) : "");
    card(out, "best", "smallest change", line, sub);
  } else if (o.fits_capacity) {
    snprintf(sub, sizeof sub, "no setting of this framework fits %s", sz(o.capacity, a));
    card(out, "best", "smallest change: a device of", sz(o.fits_capacity, b), sub);
  }
  fputs("</div>\n", out);
  /* why the free bytes could not serve it, by rule */
  if (o.has_free) {
    fputs("<table class=\"waste\" id=\"oom-why-", out);
    fprintf(out, "%" PRId64 "\"><tr><th>reserved but free, and why it could not serve the request</th><th>bytes</th></tr>\n",
            trace_id);
    struct {
      uint64_t v;
      const char *why;
    } rows[] = {{o.too_small, "too small: each block smaller than the request"},
                {o.other_stream, "on another stream: a cached block serves only the stream that freed it"},
                {o.other_pool, "in the other size class (small blocks serve small requests only, and the reverse)"},
                {o.not_splittable, "not splittable for this request (max_split_size, max_non_split_rounding)"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
      if (rows[i].v) fprintf(out, "<tr><td class=\"t\">%s</td><td>%s</td></tr>\n", rows[i].why, sz(rows[i].v, a));
    if (o.limit)
      fprintf(out, "<tr><td class=\"t\">the setting's own limit%s</td><td>%s</td></tr>\n",
              o.at_limit ? " (the request failed against it, not the device)" : "", sz(o.limit, a));
    fputs("</table>\n", out);
  }
  /* live by callsite */
  if (o.n_top) {
    fprintf(out, "<table class=\"callsites\" id=\"oom-live-%" PRId64 "\"><tr><th>live when it failed, by callsite</th>"
                 "<th>allocations</th><th>bytes</th></tr>\n", trace_id);
    for (int i = 0; i < o.n_top; i++) {
      fputs("<tr><td class=\"t\">", out);
      ana_html_escape(out, o.top[i].text && *o.top[i].text ? o.top[i].text : "(no callsite)");
      fprintf(out, "</td><td>%" PRIu64 "</td><td>%s</td></tr>\n", o.top[i].allocs, sz(o.top[i].bytes, a));
    }
    if (o.other_sites)
      fprintf(out, "<tr><td class=\"t\">the other %" PRIu64 " callsites</td><td></td><td>%s</td></tr>\n", o.other_sites,
              sz(o.other_bytes, a));
    fputs("</table>\n", out);
  }
  /* the account in gpuanalyze oom's words */
  char *text = NULL;
  size_t tl = 0;
  FILE *m = open_memstream(&text, &tl);
  if (m) {
    ana_oom_print_text(m, path, &o);
    fclose(m);
    fprintf(out, "<details class=\"oomtext\"><summary>The same in <code>gpuanalyze oom</code>'s words</summary>"
                 "<div class=\"stack\">");
    for (char *p = text, *e; p && *p; p = e ? e + 1 : NULL) {
      e = strchr(p, '\n');
      if (e) *e = '\0';
      fputs("<div>", out);
      ana_html_escape(out, p);
      fputs("</div>", out);
    }
    fputs("</div></details>\n", out);
  }
  free(text);
  fputs("</section>\n", out);
  ana_oom_free(&o);
  return 1;
}
