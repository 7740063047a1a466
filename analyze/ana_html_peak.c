/* ana_html_peak.c: the report's second screen for one trace, after the answer
 * (ana_html_first.c): where the bytes go at the peak (the waste split of the setting the job ran
 * with and of the best one, live bytes by callsite) and the segment map.
 *
 * The waste split and the segment map are gpureplay's (results key peak_snapshot, written by
 * replay/engine/engine_peak.c); older results files lack it and the page says so. Charts are
 * inline SVG written here; every string from a trace or a results file is HTML-escaped. */
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_report_internal.h"
#include "analyze/ana_run_fields.h"

enum { TOP_CALLSITES = 10 };

/* ---- where the bytes go ------------------------------------------------------------------ */

typedef struct snap {
  int ok;
  int64_t reserved, requested, rounding, free_in, cached, segments, in_use, ts;
  char policy[256];
} snap_t;

static int load_snap(ana_db_t *db, int64_t run_id, snap_t *s) {
  memset(s, 0, sizeof *s);
  sqlite3_stmt *st = NULL;
  if (run_id < 0 ||
      sqlite3_prepare_v2(db->h,
                         "SELECT policy, " ANA_RF_PEAK_SNAPSHOT_RESERVED_BYTES("summary_json") ","
                         " " ANA_RF_PEAK_SNAPSHOT_REQUESTED_BYTES("summary_json") ","
                         " " ANA_RF_PEAK_SNAPSHOT_ROUNDING_BYTES("summary_json") ","
                         " " ANA_RF_PEAK_SNAPSHOT_FREE_IN_SEGMENTS_BYTES("summary_json") ","
                         " " ANA_RF_PEAK_SNAPSHOT_CACHED_SEGMENTS_BYTES("summary_json") ","
                         " " ANA_RF_PEAK_SNAPSHOT_SEGMENTS("summary_json") ","
                         " " ANA_RF_PEAK_SNAPSHOT_SEGMENTS_IN_USE("summary_json") ","
                         " " ANA_RF_PEAK_SNAPSHOT_TS_NS("summary_json")
                         " FROM v_runs WHERE run_id=?",
                         -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, run_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    snprintf(s->policy, sizeof s->policy, "%s", (const char *)sqlite3_column_text(st, 0));
    s->ok = sqlite3_column_type(st, 1) == SQLITE_INTEGER;
    s->reserved = sqlite3_column_int64(st, 1);
    s->requested = sqlite3_column_int64(st, 2);
    s->rounding = sqlite3_column_int64(st, 3);
    s->free_in = sqlite3_column_int64(st, 4);
    s->cached = sqlite3_column_int64(st, 5);
    s->segments = sqlite3_column_int64(st, 6);
    s->in_use = sqlite3_column_int64(st, 7);
    s->ts = sqlite3_column_int64(st, 8);
    if (s->reserved < 0 || s->requested < 0 || s->rounding < 0 || s->free_in < 0 || s->cached < 0) s->ok = 0;
  }
  sqlite3_finalize(st);
  return s->ok;
}

static void split_bar(FILE *out, const snap_t *s, int64_t scale) {
  int64_t parts[4] = {s->requested, s->rounding, s->free_in, s->cached};
  static const char *const cls[4] = {"live", "round", "freein", "cached"};
  fputs("<svg class=\"split\" viewBox=\"0 0 400 14\" width=\"400\" height=\"14\">", out);
  double x = 0;
  for (int k = 0; k < 4; k++) {
    double w = scale > 0 ? (double)parts[k] / (double)scale * 400.0 : 0;
    fprintf(out, "<rect class=\"%s\" x=\"%.1f\" y=\"0\" width=\"%.1f\" height=\"14\"/>", cls[k], x, w);
    x += w;
  }
  fputs("</svg>", out);
}

void ana_html_waste(ana_db_t *db, FILE *out, int64_t trace_id, int64_t rec_run, int64_t best_run) {
  snap_t s[2];
  int64_t ids[2] = {rec_run, best_run};
  const char *who[2] = {"as the job ran", "recommended"};
  int n = 0;
  fprintf(out, "<h3>Reserved at the peak: live bytes and the waste, as run and recommended</h3>\n");
  for (int i = 0; i < 2; i++) {
    if (ids[i] < 0 || (i == 1 && ids[1] == ids[0])) continue;
    load_snap(db, ids[i], &s[i]);
    n++;
  }
  if (n == 0) {
    fputs("<p class=\"note\">No replay run to split.</p>\n", out);
    return;
  }
  int64_t scale = 0;
  for (int i = 0; i < 2; i++)
    if (ids[i] >= 0 && s[i].ok && s[i].reserved > scale) scale = s[i].reserved;
  char b[6][32];
  fprintf(out, "<div class=\"scroll\"><table class=\"waste\" id=\"waste-%" PRId64 "\"><tr><th>setting</th><th>reserved</th>"
               "<th>live (requested)</th><th>rounding</th><th>free inside segments</th><th>cached free segments</th>"
               "<th>segments (in use)</th><th>at</th><th></th></tr>\n",
          trace_id);
  for (int i = 0; i < 2; i++) {
    if (ids[i] < 0 || (i == 1 && ids[1] == ids[0])) continue;
    fprintf(out, "<tr><td class=\"t\">%s%s: ", who[i], i == 0 && ids[1] == ids[0] ? " (and recommended)" : "");
    ana_html_escape(out, s[i].policy);
    if (!s[i].ok) {
      fputs("</td><td colspan=\"8\" class=\"t\">not in these results (gpureplay older than the split; the driver's "
            "pool, whose segments the replay cannot see; or over 65536 segments at once)</td></tr>\n",
            out);
      continue;
    }
    fprintf(out, "</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%" PRId64 " (%" PRId64 ")</td>"
                 "<td>%.3f s</td><td>",
            ana_size_signed(s[i].reserved, b[0], 32), ana_size_signed(s[i].requested, b[1], 32), ana_size_signed(s[i].rounding, b[2], 32),
            ana_size_signed(s[i].free_in, b[3], 32), ana_size_signed(s[i].cached, b[4], 32), s[i].segments, s[i].in_use, (double)s[i].ts / 1e9);
    split_bar(out, &s[i], scale);
    fputs("</td></tr>\n", out);
  }
  fputs("</table></div>\n<p class=\"note\"><span class=\"key live\"></span>live requested "
        "<span class=\"key round\"></span>rounding: blocks larger than asked "
        "<span class=\"key freein\"></span>free space inside segments that hold live blocks (fragmentation) "
        "<span class=\"key cached\"></span>cached segments holding nothing live (empty_cache would return them). "
        "Each setting at its own reserved peak (column \"at\"), so the live bytes may differ.</p>\n",
        out);
}

/* A library or interpreter frame (not the user's own code). */
static int lib_frame(const char *f, size_t n) {
  static const char *const pats[] = {"site-packages/", "dist-packages/", "torch/", "/lib/python", "<frozen",
                                     "jax/_src", "tensorflow/", "cupy/", "??", NULL};
  for (const char *const *p = pats; *p; p++) {
    size_t l = strlen(*p);
    for (size_t i = 0; i + l <= n; i++)
      if (memcmp(f + i, *p, l) == 0) return 1;
  }
  return 0;
}

/* A callsite ("inner < outer < ..."): the user's own frames first, the whole stack on click. */
static void callsite_cell(FILE *out, const char *cs) {
  fputs("<td class=\"t cs\">", out);
  if (!cs || !*cs) {
    fputs("(no callsite recorded)</td>", out);
    return;
  }
  char user[600] = "";
  size_t used = 0;
  int frames = 0, shown = 0;
  for (const char *p = cs; *p && shown < 3;) {
    const char *e = strstr(p, " < ");
    size_t l = e ? (size_t)(e - p) : strlen(p);
    frames++;
    if (!lib_frame(p, l) && used + l + 4 < sizeof user) {
      used += (size_t)snprintf(user + used, sizeof user - used, "%s%.*s", used ? " < " : "", (int)l, p);
      shown++;
    }
    p = e ? e + 3 : p + l;
  }
  if (!used) snprintf(user, sizeof user, "%.*s", (int)strcspn(cs, "<"), cs);
  fputs("<details><summary>", out);
  ana_html_escape(out, user);
  fputs("</summary><div class=\"stack\">", out);
  for (const char *p = cs; *p;) {
    const char *e = strstr(p, " < ");
    size_t l = e ? (size_t)(e - p) : strlen(p);
    char *fr = strndup(p, l);
    if (fr) {
      fprintf(out, "<div class=\"%s\">", lib_frame(p, l) ? "lib" : "user");
      ana_html_escape(out, fr);
      fputs("</div>", out);
      free(fr);
    }
    p = e ? e + 3 : p + l;
  }
  fputs("</div></details></td>", out);
}

void ana_html_callsites(ana_db_t *db, FILE *out, int64_t trace_id) {
  sqlite3_stmt *st = NULL;
  /* the loader's summary of the peak (ana_load_peak.c): the top callsites, and the rest as what
   * they leave of the peak's totals */
  if (sqlite3_prepare_v2(db->h,
                         "WITH r AS (SELECT callsite, allocs n, bytes b, ROW_NUMBER() OVER (ORDER BY bytes DESC,"
                         " callsite) k FROM trace_peak_callsites WHERE trace_id=?1),"
                         " t AS (SELECT peak_live_bytes tb, COALESCE(peak_live_allocs, 0) ta,"
                         " COALESCE(peak_live_callsites, 0) tc FROM traces WHERE trace_id=?1)"
                         " SELECT CASE WHEN r.callsite = '(none)' THEN '' ELSE r.callsite END, n, b, 1, t.tb, k FROM r, t"
                         " WHERE k <= ?2"
                         " UNION ALL SELECT NULL, t.ta - SUM(n), t.tb - SUM(b), t.tc - COUNT(*), t.tb, ?2 + 1 FROM r, t"
                         " WHERE k <= ?2 GROUP BY t.tb HAVING t.tb > SUM(b) OR t.tc > COUNT(*) ORDER BY 6",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, trace_id);
  sqlite3_bind_int(st, 2, TOP_CALLSITES);
  int rows = 0;
  char b1[32];
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (rows++ == 0)
      fprintf(out, "<h3>Live at the peak, by callsite</h3>\n<div class=\"scroll\"><table class=\"callsites\" "
                   "id=\"callsites-%" PRId64 "\"><tr><th>callsite (your frames; click for the stack)</th>"
                   "<th>allocations</th><th>live bytes</th><th>share</th></tr>\n",
              trace_id);
    int64_t tot = sqlite3_column_int64(st, 4), b = sqlite3_column_int64(st, 2);
    fputs("<tr>", out);
    if (sqlite3_column_type(st, 0) == SQLITE_NULL)
      fprintf(out, "<td class=\"t\">the other %lld callsites</td>", (long long)sqlite3_column_int64(st, 3));
    else
      callsite_cell(out, (const char *)sqlite3_column_text(st, 0));
    fprintf(out, "<td>%lld</td><td>%s</td><td>%.1f%%</td></tr>\n", (long long)sqlite3_column_int64(st, 1),
            ana_size_signed(b, b1, sizeof b1), tot > 0 ? 100.0 * (double)b / (double)tot : 0.0);
  }
  sqlite3_finalize(st);
  if (rows) fputs("</table></div>\n", out);
  else fputs("<p class=\"note\">Nothing is live at the peak.</p>\n", out);
}

/* ---- the segment map --------------------------------------------------------------------- */

static void segmap_one(FILE *out, const char *title, const char *policy, const char *json, int64_t id) {
  char b1[32];
  fputs("<div class=\"segmap\"><h4>", out);
  ana_html_escape(out, title);
  fputs(": ", out);
  ana_html_escape(out, policy);
  fputs("</h4>\n", out);
  json_error_t je;
  json_t *map = json ? json_loads(json, 0, &je) : NULL;
  if (!json_is_array(map) || json_array_size(map) == 0) {
    fputs("<p class=\"note\">No segment map in these results (gpureplay older than the map, or the driver's pool).</p>"
          "</div>\n",
          out);
    json_decref(map);
    return;
  }
  size_t n = json_array_size(map);
  uint64_t scale = 1; /* each map to its own scale: its largest segment spans the width */
  for (size_t i = 0; i < n; i++) {
    json_int_t v = json_integer_value(json_object_get(json_array_get(map, i), "size"));
    if (v > 0 && (uint64_t)v > scale) scale = (uint64_t)v;
  }
  int h = (int)n * 16 + 4;
  fprintf(out, "<svg class=\"segs\" id=\"segs-%" PRId64 "\" viewBox=\"0 0 560 %d\" width=\"560\" height=\"%d\">\n", id, h,
          h);
  for (size_t i = 0; i < n; i++) {
    json_t *s = json_array_get(map, i);
    uint64_t size = (uint64_t)json_integer_value(json_object_get(s, "size"));
    uint64_t live = (uint64_t)json_integer_value(json_object_get(s, "live_bytes"));
    double w = scale ? (double)size / (double)scale * 440.0 : 0;
    int y = 2 + (int)i * 16;
    fprintf(out, "<g><title>segment of %s: %s live in %lld blocks</title>", gm_format_size(size, b1, sizeof b1),
            gm_format_size(live, (char[32]){0}, 32), (long long)json_integer_value(json_object_get(s, "blocks")));
    fprintf(out, "<text x=\"0\" y=\"%d\">%s</text><rect class=\"free\" x=\"70\" y=\"%d\" width=\"%.1f\" height=\"12\"/>",
            y + 10, gm_format_size(size, b1, sizeof b1), y, w < 1 ? 1 : w);
    json_t *sp = json_object_get(s, "spans");
    for (size_t k = 0; k < json_array_size(sp); k++) {
      json_t *pr = json_array_get(sp, k);
      double off = (double)json_integer_value(json_array_get(pr, 0)), len = (double)json_integer_value(json_array_get(pr, 1));
      if (off < 0 || len <= 0 || off + len > (double)size) continue;
      fprintf(out, "<rect class=\"live\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"12\"/>", 70 + off / (double)scale * 440.0,
              y, len / (double)scale * 440.0 < 0.5 ? 0.5 : len / (double)scale * 440.0);
    }
    fputs("</g>\n", out);
  }
  fputs("</svg></div>\n", out);
  json_decref(map);
}

void ana_html_segmap(ana_db_t *db, FILE *out, int64_t trace_id, int64_t rec_run, int64_t best_run) {
  int64_t ids[2] = {rec_run, best_run};
  char *js[2] = {NULL, NULL}, pol[2][256] = {"", ""};
  int64_t segs[2] = {0, 0}, shown[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    sqlite3_stmt *st = NULL;
    if (ids[i] < 0 || sqlite3_prepare_v2(db->h,
                                         "SELECT policy, " ANA_RF_PEAK_SNAPSHOT_MAP("summary_json") ","
                                         " " ANA_RF_PEAK_SNAPSHOT_SEGMENTS("summary_json") ","
                                         " json_array_length(summary_json, '$.peak_snapshot.map')"
                                         " FROM v_runs WHERE run_id=?",
                                         -1, &st, NULL) != SQLITE_OK)
      continue;
    sqlite3_bind_int64(st, 1, ids[i]);
    if (sqlite3_step(st) == SQLITE_ROW) {
      snprintf(pol[i], sizeof pol[i], "%s", (const char *)sqlite3_column_text(st, 0));
      if (sqlite3_column_text(st, 1)) js[i] = strdup((const char *)sqlite3_column_text(st, 1));
      segs[i] = sqlite3_column_int64(st, 2);
      shown[i] = sqlite3_column_int64(st, 3);
    }
    sqlite3_finalize(st);
  }
  if (ids[0] < 0 && ids[1] < 0) {
    free(js[0]);
    free(js[1]);
    return;
  }
  fprintf(out, "<h3>Segments at the peak</h3>\n<p class=\"note\">Each bar is a segment the allocator holds from the "
               "driver (each map to its own scale: its largest segment spans the width); <span class=\"key live\"></span>live blocks, "
               "<span class=\"key free\"></span>reserved but free. Many short free gaps between live blocks: "
               "fragmentation; whole grey bars: cached segments.");
  for (int i = 0; i < 2; i++)
    if (segs[i] > shown[i]) fprintf(out, " %s: the %" PRId64 " largest of %" PRId64 " segments.", i ? "Recommended" : "As run", shown[i], segs[i]);
  fprintf(out, "</p>\n<div class=\"side\">\n");
  segmap_one(out, "as the job ran", pol[0], js[0], trace_id * 2);
  if (ids[1] >= 0 && ids[1] != ids[0]) segmap_one(out, "recommended", pol[1], js[1], trace_id * 2 + 1);
  fputs("</div>\n", out);
  free(js[0]);
  free(js[1]);
}
