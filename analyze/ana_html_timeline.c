/* ana_html_timeline.c: the active-memory timeline of one trace, stacked by callsite (the
 * callsites with the most bytes live at the peak, the rest grouped), with each replayed
 * setting's reserved line on top: the picture PyTorch's memory_viz users know.
 *
 * Level of detail is decided in C before anything is written: the loader stores the stacked
 * timeline already downsampled (ana_load_peak.c: ANA_STACK_BUCKETS buckets, each the
 * per-callsite split at the moment its total was highest, so every peak survives), and this
 * file reads those few hundred rows, never the events. The reserved lines are gpureplay's
 * timelines (already max per bucket) re-bucketed onto the same grid. Stacks are written as
 * cumulative sums, largest first, so the page only fills each curve to the axis; the legend
 * shows each callsite's own bytes. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_report_internal.h"

enum { CHART_BUCKETS = ANA_STACK_BUCKETS, TOP_CLASSES = ANA_STACK_CLASSES - 1, MAX_RUN_LINES = 24 };

/* A short name for a callsite: its first frame of the user's own code, else its first. */
static void short_name(const char *cs, char *buf, size_t n) {
  static const char *const lib[] = {"site-packages/", "dist-packages/", "torch/", "/lib/python", "<frozen", NULL};
  const char *pick = NULL, *first = NULL;
  size_t pl = 0, fl = 0;
  for (const char *p = cs; p && *p;) {
    const char *e = strstr(p, " < ");
    size_t l = e ? (size_t)(e - p) : strlen(p);
    int is_lib = 0;
    for (const char *const *q = lib; *q && !is_lib; q++) {
      size_t ql = strlen(*q);
      for (size_t i = 0; i + ql <= l && !is_lib; i++) is_lib = memcmp(p + i, *q, ql) == 0;
    }
    if (!first) first = p, fl = l;
    if (!is_lib) {
      pick = p;
      pl = l;
      break;
    }
    p = e ? e + 3 : p + l;
  }
  if (!pick) pick = first, pl = fl;
  if (!pick) snprintf(buf, n, "(no callsite)");
  else {
    /* the tail of a long path: the file and line are what tell callsites apart */
    const char *s = pick;
    if (pl > 60) {
      s = pick + pl - 60;
      pl = 60;
    }
    snprintf(buf, n, "%s%.*s", s != pick ? "..." : "", (int)pl, s);
  }
}

gm_status_t ana_html_timeline(ana_db_t *db, FILE *out, int64_t trace_id, int64_t rec_run, int64_t best_run,
                              gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  char names[TOP_CLASSES + 1][96];
  int K = 0;
  /* The classes, as the loader chose them. */
  gm_status_t s = ana_prepare(db, &st,
                              "SELECT kind, COALESCE(callsite, '') FROM trace_stack_classes WHERE trace_id=?"
                              " ORDER BY class",
                              err);
  if (s < 0) return s;
  sqlite3_bind_int64(st, 1, trace_id);
  while (K <= TOP_CLASSES && sqlite3_step(st) == SQLITE_ROW) {
    const char *kind = (const char *)sqlite3_column_text(st, 0), *txt = (const char *)sqlite3_column_text(st, 1);
    if (strcmp(kind, "callsite") == 0 && txt && *txt) short_name(txt, names[K], sizeof names[K]);
    else if (strcmp(kind, "rest") == 0) snprintf(names[K], sizeof names[K], K ? "other callsites" : "live requested");
    else if (strcmp(kind, "all") == 0)
      snprintf(names[K], sizeof names[K], "live requested%s", K ? "" : " (the trace has no callsites)");
    else snprintf(names[K], sizeof names[K], "(no callsite)");
    K++;
  }
  sqlite3_finalize(st);
  if (K == 0) snprintf(names[K++], sizeof names[0], "live requested");
  /* Runs: the reserved lines. */
  int64_t run_ids[MAX_RUN_LINES];
  char run_pol[MAX_RUN_LINES][300];
  int R = 0;
  if ((s = ana_prepare(db, &st, "SELECT run_id, policy FROM v_runs WHERE trace_id=? ORDER BY run_id", err)) < 0) return s;
  sqlite3_bind_int64(st, 1, trace_id);
  while (R < MAX_RUN_LINES && sqlite3_step(st) == SQLITE_ROW) {
    run_ids[R] = sqlite3_column_int64(st, 0);
    snprintf(run_pol[R], sizeof run_pol[R], "%s", (const char *)sqlite3_column_text(st, 1));
    R++;
  }
  sqlite3_finalize(st);
  /* The grid: the loader's span, [0, the last event's ts]. */
  int64_t dur = 1;
  if ((s = ana_prepare(db, &st, "SELECT COALESCE(last_ts_ns, 0) FROM traces WHERE trace_id=?1", err)) < 0) return s;
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0) dur = sqlite3_column_int64(st, 0) + 1;
  sqlite3_finalize(st);
  size_t nb = CHART_BUCKETS + 1;
  double *stack = calloc(nb * (size_t)K, sizeof *stack), *tot = malloc(nb * sizeof *tot);
  double *res = malloc(nb * (size_t)(R ? R : 1) * sizeof *res);
  if (!stack || !tot || !res) {
    free(stack), free(tot), free(res);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  for (size_t i = 0; i < nb; i++) tot[i] = -1;
  for (size_t i = 0; i < nb * (size_t)(R ? R : 1); i++) res[i] = NAN;
  /* The stacked buckets: a few hundred rows. */
  s = ana_prepare(db, &st, "SELECT bucket, total_bytes, class_bytes FROM trace_stack_timeline WHERE trace_id=?1", err);
  if (s >= 0) {
    sqlite3_bind_int64(st, 1, trace_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
      int64_t b = sqlite3_column_int64(st, 0);
      if (b < 0 || b > CHART_BUCKETS) continue;
      tot[b] = (double)sqlite3_column_int64(st, 1);
      const char *p = (const char *)sqlite3_column_text(st, 2);
      for (int c = 0; c < K && p && *p; c++) {
        char *e = NULL;
        stack[(size_t)b * (size_t)K + (size_t)c] = strtod(p, &e);
        p = e && *e == ',' ? e + 1 : "";
      }
    }
    sqlite3_finalize(st);
  }
  /* Reserved lines, max per bucket. */
  if (s >= 0 && R > 0) {
    s = ana_prepare(db, &st,
                    "SELECT l.run_id, MIN(CAST(l.ts_ns * ?2 / ?3 AS INTEGER), ?2) AS b, MAX(l.reserved) FROM run_timeline l"
                    " JOIN v_runs r USING(run_id) WHERE r.trace_id=?1 GROUP BY l.run_id, b",
                    err);
    if (s >= 0) {
      sqlite3_bind_int64(st, 1, trace_id);
      sqlite3_bind_int64(st, 2, CHART_BUCKETS);
      sqlite3_bind_int64(st, 3, dur);
      while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0), b = sqlite3_column_int64(st, 1);
        if (b < 0 || b > CHART_BUCKETS) continue;
        for (int r = 0; r < R; r++)
          if (run_ids[r] == id) res[(size_t)b * (size_t)R + (size_t)r] = (double)sqlite3_column_int64(st, 2);
      }
      sqlite3_finalize(st);
    }
  }
  if (s < 0) {
    free(stack), free(tot), free(res);
    return s;
  }
  /* The page: labels (stack top first, as cumulative curves), then the reserved lines. */
  fprintf(out, "<h3>Active memory over time, by callsite</h3>\n<p>Reserved lines: <select id=\"chart-%" PRId64
               "-select\"></select> <span class=\"note\">drag to zoom, double-click to reset; stacked areas: live "
               "bytes of the callsites with the most live at the peak</span></p>\n"
               "<div class=\"chart\" id=\"chart-%" PRId64 "\"></div>\n<div class=\"legend\" id=\"chart-%" PRId64
               "-legend\"></div>\n<script type=\"application/json\" class=\"chart-data\" data-chart=\"chart-%" PRId64
               "\">{\"labels\":[\"seconds\"",
          trace_id, trace_id, trace_id, trace_id);
  for (int c = K - 1; c >= 0; c--) {
    char lab[128];
    snprintf(lab, sizeof lab, "%d. %s", c + 1, names[c]);
    fputc(',', out);
    ana_json_string(out, lab);
  }
  for (int r = 0; r < R; r++) {
    char lab[400];
    int dup = 0;
    for (int q = 0; q < R; q++) dup |= q != r && strcmp(run_pol[q], run_pol[r]) == 0;
    if (dup) snprintf(lab, sizeof lab, "reserved: %.300s (run %" PRId64 ")", run_pol[r], run_ids[r]);
    else snprintf(lab, sizeof lab, "reserved: %.300s", run_pol[r]);
    fputc(',', out);
    ana_json_string(out, lab);
  }
  fprintf(out, "],\"nstack\":%d,\"show\":[", K);
  int first = 1;
  for (int r = 0; r < R; r++)
    if (run_ids[r] == rec_run || run_ids[r] == best_run) {
      fprintf(out, "%s%d", first ? "" : ",", r);
      first = 0;
    }
  fputs("],\"rows\":[", out);
  first = 1;
  double *last_stack = calloc((size_t)K, sizeof *last_stack);
  for (size_t b = 0; b < nb; b++) {
    int has = tot[b] >= 0;
    for (int r = 0; r < R && !has; r++) has = !isnan(res[b * (size_t)R + (size_t)r]);
    if (b > 0)
      for (int r = 0; r < R; r++)
        if (isnan(res[b * (size_t)R + (size_t)r])) res[b * (size_t)R + (size_t)r] = res[(b - 1) * (size_t)R + (size_t)r];
    if (tot[b] >= 0 && last_stack) memcpy(last_stack, &stack[b * (size_t)K], sizeof *last_stack * (size_t)K);
    if (!has) continue;
    fprintf(out, "%s[%.9g", first ? "" : ",", (double)b * (double)dur / CHART_BUCKETS / 1e9);
    double cum = 0;
    double vals[TOP_CLASSES + 1];
    for (int c = 0; c < K; c++) {
      cum += last_stack ? last_stack[c] : 0;
      vals[c] = cum;
    }
    for (int c = K - 1; c >= 0; c--) fprintf(out, ",%.0f", vals[c]);
    for (int r = 0; r < R; r++) {
      double v = res[b * (size_t)R + (size_t)r];
      if (isnan(v)) fputs(",null", out);
      else fprintf(out, ",%.0f", v);
    }
    fputc(']', out);
    first = 0;
  }
  fputs("]}</script>\n", out);
  free(last_stack);
  free(stack), free(tot), free(res);
  return GM_OK;
}
