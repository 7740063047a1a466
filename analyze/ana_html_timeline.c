/* ana_html_timeline.c: the active-memory timeline of one trace, stacked by callsite (the
 * callsites with the most bytes live at the peak, the rest grouped), with each replayed
 * setting's reserved line on top: the picture PyTorch's memory_viz users know.
 *
 * Level of detail is decided here, in C, before anything is written: one pass over the
 * trace's rows (rowid order is trace order; no join) keeps, per time bucket, the
 * per-callsite live bytes at the moment the total was highest in it, so every peak survives
 * and the page holds CHART_BUCKETS rows whatever the trace's length. The reserved lines are
 * gpureplay's timelines (already max per bucket) re-bucketed the same way. Stacks are written
 * as cumulative sums, largest first, so the page only fills each curve to the axis; the legend
 * shows each callsite's own bytes. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_report_internal.h"

enum { CHART_BUCKETS = 800, TOP_CLASSES = 8, MAX_RUN_LINES = 24 };

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

/* The live allocations of the pass: ev_id -> size << 4 | class (open addressing; removed
 * slots are tombstones until the table is rebuilt, sized from the live count). */
#define LM_NONE UINT64_MAX
typedef struct live_map {
  uint64_t *slot; /* pairs (key + 2, value); key 0: empty, 1: removed */
  size_t cap, used, live;
} live_map_t;

static size_t lm_hash(uint64_t k, size_t cap) { return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1); }

static int lm_put(live_map_t *m, uint64_t key, uint64_t val) {
  if (2 * (m->used + 1) > m->cap) {
    size_t cap = 1024;
    while (cap < 4 * (m->live + 1)) cap *= 2;
    uint64_t *n = calloc(cap * 2, sizeof *n);
    if (!n) return -1;
    for (size_t i = 0; i < m->cap; i++)
      if (m->slot[2 * i] >= 2) {
        size_t h = lm_hash(m->slot[2 * i] - 2, cap);
        while (n[2 * h]) h = (h + 1) & (cap - 1);
        n[2 * h] = m->slot[2 * i];
        n[2 * h + 1] = m->slot[2 * i + 1];
      }
    free(m->slot);
    m->slot = n;
    m->cap = cap;
    m->used = m->live;
  }
  size_t h = lm_hash(key, m->cap);
  while (m->slot[2 * h]) h = (h + 1) & (m->cap - 1);
  m->slot[2 * h] = key + 2;
  m->slot[2 * h + 1] = val;
  m->used++;
  m->live++;
  return 0;
}

static uint64_t lm_take(live_map_t *m, uint64_t key) {
  if (!m->cap) return LM_NONE;
  for (size_t h = lm_hash(key, m->cap); m->slot[2 * h]; h = (h + 1) & (m->cap - 1))
    if (m->slot[2 * h] == key + 2) {
      m->slot[2 * h] = 1;
      m->live--;
      return m->slot[2 * h + 1];
    }
  return LM_NONE;
}

gm_status_t ana_html_timeline(ana_db_t *db, FILE *out, int64_t trace_id, int64_t rec_run, int64_t best_run,
                              gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  int64_t cls_id[TOP_CLASSES];
  int cls_null[TOP_CLASSES];
  char names[TOP_CLASSES + 1][96];
  int k = 0, have_rest = 0;
  /* The classes: the callsites with the most bytes live at the peak. */
  gm_status_t s = ana_prepare(db, &st,
                              "SELECT p.callsite, SUM(p.size) b, COALESCE(t.text, '') FROM live_peak p"
                              " LEFT JOIN strings t ON t.trace_id = p.trace_id AND t.string_id = p.callsite"
                              " WHERE p.trace_id=? GROUP BY p.callsite ORDER BY b DESC, p.callsite",
                              err);
  if (s < 0) return s;
  sqlite3_bind_int64(st, 1, trace_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (k == TOP_CLASSES) {
      have_rest = 1;
      break;
    }
    cls_null[k] = sqlite3_column_type(st, 0) == SQLITE_NULL;
    cls_id[k] = sqlite3_column_int64(st, 0);
    const char *txt = (const char *)sqlite3_column_text(st, 2);
    if (cls_null[k] || !txt || !*txt) snprintf(names[k], sizeof names[k], "(no callsite)");
    else short_name(txt, names[k], sizeof names[k]);
    k++;
  }
  sqlite3_finalize(st);
  /* Everything not in a class is "other" (callsites not live at the peak too). */
  have_rest = 1;
  int K = k + have_rest;
  snprintf(names[k], sizeof names[k], k ? "other callsites" : "live requested");
  if (k == 1 && cls_null[0]) {
    /* No callsites in the trace: one class is the whole. */
    K = 1;
    snprintf(names[0], sizeof names[0], "live requested (the trace has no callsites)");
  }
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
  /* Duration: the trace's events and the runs' timelines. */
  int64_t dur = 1;
  if ((s = ana_prepare(db, &st,
                       "SELECT MAX(m) FROM (SELECT MAX(ts_ns) m FROM trace_timeline WHERE trace_id=?1"
                       " UNION ALL SELECT MAX(l.ts_ns) FROM run_timeline l JOIN v_runs r USING(run_id)"
                       " WHERE r.trace_id=?1 UNION ALL SELECT MAX(e.ts_ns) FROM traces t JOIN events e"
                       " ON e.ev_id = t.last_ev_id WHERE t.trace_id=?1)",
                       err)) < 0)
    return s;
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0) dur = sqlite3_column_int64(st, 0) + 1;
  sqlite3_finalize(st);
  size_t nb = CHART_BUCKETS + 1;
  double *stack = calloc(nb * (size_t)K, sizeof *stack), *tot = malloc(nb * sizeof *tot);
  double *res = malloc(nb * (size_t)(R ? R : 1) * sizeof *res), *live = calloc((size_t)K, sizeof *live);
  if (!stack || !tot || !res || !live) {
    free(stack), free(tot), free(res), free(live);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  for (size_t i = 0; i < nb; i++) tot[i] = -1;
  for (size_t i = 0; i < nb * (size_t)(R ? R : 1); i++) res[i] = NAN;
  /* One pass over the trace's rows in order (a rowid range scan, no join): each GPU
   * allocation adds to its class and is remembered by its ev_id while live; each end (a free,
   * an alloc over a live address: ends_ev_id) takes the remembered bytes from their class. */
  live_map_t lm = {0};
  s = ana_prepare(db, &st,
                  "SELECT e.ev_id, e.ts_ns, e.kind, e.mem_kind, e.size, e.callsite, e.ends_ev_id"
                  " FROM traces t JOIN events e ON e.ev_id BETWEEN t.first_ev_id AND t.last_ev_id"
                  " WHERE t.trace_id = ?1",
                  err);
  if (s >= 0) {
    sqlite3_bind_int64(st, 1, trace_id);
    int64_t cur = -1;
    double total = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      int is_alloc = sqlite3_column_int(st, 2) == GMT_EV_ALLOC && sqlite3_column_int(st, 3) <= 1;
      int ends = sqlite3_column_type(st, 6) != SQLITE_NULL;
      if (!is_alloc && !ends) continue;
      int64_t b = (int64_t)((double)sqlite3_column_int64(st, 1) * CHART_BUCKETS / (double)dur);
      if (b < 0) b = 0;
      if (b > CHART_BUCKETS) b = CHART_BUCKETS;
      /* Buckets entered since: the state held over them is a value in each. */
      for (int64_t x = cur + 1; cur >= 0 && x <= b; x++)
        if (total > tot[x]) {
          tot[x] = total;
          memcpy(&stack[(size_t)x * (size_t)K], live, sizeof *live * (size_t)K);
        }
      if (b > cur) cur = b;
      if (ends) {
        uint64_t v = lm_take(&lm, (uint64_t)sqlite3_column_int64(st, 6));
        if (v != LM_NONE) {
          int c = (int)(v & 15);
          double sz = (double)(v >> 4);
          live[c] -= sz;
          total -= sz;
          if (live[c] < 0) live[c] = 0;
          if (total < 0) total = 0;
        }
      }
      if (is_alloc) {
        int isnull = sqlite3_column_type(st, 5) == SQLITE_NULL;
        int64_t id = sqlite3_column_int64(st, 5);
        int c = K - 1;
        for (int j = 0; j < k && j < K; j++)
          if (cls_null[j] ? isnull : (!isnull && cls_id[j] == id)) {
            c = j;
            break;
          }
        uint64_t size = (uint64_t)sqlite3_column_int64(st, 4);
        if (lm_put(&lm, (uint64_t)sqlite3_column_int64(st, 0), (size << 4) | (uint64_t)c) < 0) {
          rc = SQLITE_NOMEM;
          break;
        }
        live[c] += (double)size;
        total += (double)size;
      }
      if (total > tot[cur]) {
        tot[cur] = total;
        memcpy(&stack[(size_t)cur * (size_t)K], live, sizeof *live * (size_t)K);
      }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) s = gm_err_set(err, GM_ERR_NOMEM, "the timeline by callsite: out of memory");
  }
  free(lm.slot);
  /* Reserved lines, max per bucket. */
  if (s >= 0 && R > 0) {
    s = ana_prepare(db, &st,
                    "SELECT l.run_id, CAST(l.ts_ns * ?2 / ?3 AS INTEGER) AS b, MAX(l.reserved) FROM run_timeline l"
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
    free(stack), free(tot), free(res), free(live);
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
  free(stack), free(tot), free(res), free(live);
  return GM_OK;
}
