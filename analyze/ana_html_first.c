/* ana_html_first.c: the report's first screen for one trace (the answer before the evidence):
 * the headline (what the job needs, what it reserves under the setting it ran with, the best
 * setting, the saving, the line to paste with a copy button, how far to trust it), a bar
 * chart of every replayed setting's peak reserved against the lower bound, then where the
 * bytes go at the peak (the waste split and live bytes by callsite) and the segment map.
 *
 * The choice is ana_advise's, the same as `gpuanalyze recommend` prints: nothing here ranks.
 * The waste split and the segment map are gpureplay's (results key peak_snapshot, written by
 * replay/engine/engine_peak.c); older results files lack it and the page says so. Charts that need
 * no interaction are inline SVG written here; every string from a trace or a results file is
 * HTML-escaped. */
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_report_internal.h"

enum { BAR_LABEL_W = 380, BAR_W = 470, BAR_ROW = 22, TOP_CALLSITES = 10 };

static const char *sz(int64_t v, char *buf, size_t n) {
  if (v < 0) {
    buf[0] = '-';
    gm_format_size((uint64_t)-v, buf + 1, n - 1);
    return buf;
  }
  return gm_format_size((uint64_t)v, buf, n);
}

/* The run of the setting the job ran with: PyTorch's own record of its conf (torch mode), or
 * the environment of a capture that did not switch allocators; else the framework's default
 * run (the advice's). *label says which. -1: none replayed. */
static int64_t recorded_run(ana_db_t *db, int64_t trace_id, const ana_advice_t *a, char *label, size_t n) {
  char conf[512] = "", mode[64] = "", pol[600];
  const char *c = ana_trace_kv(db, trace_id, "torch.alloc_conf", conf, sizeof conf);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h, "SELECT COALESCE(capture_mode, '') FROM traces WHERE trace_id=?", -1, &st, NULL) ==
      SQLITE_OK) {
    sqlite3_bind_int64(st, 1, trace_id);
    if (sqlite3_step(st) == SQLITE_ROW) snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  /* `requests` mode switched the frameworks to cudaMallocAsync: its environment is gpurec's. */
  if ((!c || !*c) && strcmp(mode, "requests") != 0) {
    c = ana_trace_kv(db, trace_id, "PYTORCH_CUDA_ALLOC_CONF", conf, sizeof conf);
    if (!c || !*c) c = ana_trace_kv(db, trace_id, "PYTORCH_ALLOC_CONF", conf, sizeof conf);
  }
  int64_t id = -1;
  if (c && *c && strncmp(a->framework, "PyTorch", 7) == 0) {
    if (strstr(c, "backend:cudaMallocAsync")) snprintf(pol, sizeof pol, "async");
    else snprintf(pol, sizeof pol, "pytorch:%s", c);
    if (sqlite3_prepare_v2(db->h,
                           "SELECT run_id FROM v_runs WHERE trace_id=? AND policy=?"
                           " AND (?3 < 0 OR COALESCE(json_extract(summary_json, '$.device'), -1) = ?3)"
                           " ORDER BY run_id LIMIT 1",
                           -1, &st, NULL) == SQLITE_OK) {
      sqlite3_bind_int64(st, 1, trace_id);
      sqlite3_bind_text(st, 2, pol, -1, SQLITE_STATIC);
      sqlite3_bind_int64(st, 3, a->device);
      if (sqlite3_step(st) == SQLITE_ROW) id = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
    }
    if (id >= 0) {
      snprintf(label, n, "as the job ran (PYTORCH_CUDA_ALLOC_CONF=%s)", c);
      return id;
    }
    snprintf(label, n, "the default (%s): the job's own setting (%s) was not replayed", a->default_policy, c);
    return a->default_run_id;
  }
  if (strncmp(a->framework, "unknown", 7) == 0)
    snprintf(label, n, "under the default (%s): the trace does not record the job's own setting", a->default_policy);
  else
    snprintf(label, n, "as the job ran: %s's default (%s)", a->framework, a->default_policy);
  return a->default_run_id;
}

typedef struct run_fig {
  int64_t reserved, ooms, low, high;
  int range, predicted, partial, assumed;
  char policy[256];
} run_fig_t;

static int run_figures(ana_db_t *db, int64_t run_id, run_fig_t *f) {
  memset(f, 0, sizeof *f);
  sqlite3_stmt *st = NULL;
  int ok = 0;
  if (run_id < 0 ||
      sqlite3_prepare_v2(db->h,
                         "SELECT policy, peak_reserved_bytes, ooms,"
                         " COALESCE(json_extract(summary_json, '$.timing_sensitive'), 0),"
                         " COALESCE(json_extract(summary_json, '$.peak_reserved_range.low_bytes'), peak_reserved_bytes),"
                         " COALESCE(json_extract(summary_json, '$.peak_reserved_range.high_bytes'), peak_reserved_bytes),"
                         " json_extract(summary_json, '$.predicted') IS NOT NULL,"
                         " COALESCE(json_extract(summary_json, '$.partial'), 0),"
                         " COALESCE(json_extract(summary_json, '$.device_memory_assumed'), 0)"
                         " FROM v_runs WHERE run_id=?",
                         -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, run_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    snprintf(f->policy, sizeof f->policy, "%s", (const char *)sqlite3_column_text(st, 0));
    f->reserved = sqlite3_column_int64(st, 1);
    f->ooms = sqlite3_column_int64(st, 2);
    f->range = sqlite3_column_int(st, 3) != 0;
    f->low = sqlite3_column_int64(st, 4);
    f->high = sqlite3_column_int64(st, 5);
    f->predicted = sqlite3_column_int(st, 6);
    f->partial = sqlite3_column_int(st, 7);
    f->assumed = sqlite3_column_int(st, 8);
    ok = 1;
  }
  sqlite3_finalize(st);
  return ok;
}

/* What a table in the repository backs (issue 25): the framework, the settings, the runs.
 * Counts from the tables' own summaries; tests/tables and tests/gpu recompute them. */
static const char *backing_table(const char *policy) {
  static const char *const torch_keys[] = {"expandable_segments", "garbage_collection_threshold", "max_split_size_mb",
                                           "roundup_power2_divisions", "per_process_memory_fraction"};
  static const char *const jax_keys[] = {"XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION"};
  const char *const *keys = NULL;
  size_t nk = 0;
  const char *conf = NULL, *text = NULL;
  if (!strcmp(policy, "pytorch") || !strncmp(policy, "pytorch:", 8)) {
    keys = torch_keys, nk = sizeof torch_keys / sizeof torch_keys[0], conf = policy[7] ? policy + 8 : "";
    text = "PyTorch 2.11's caching allocator on an H200, the default and expandable_segments, "
           "garbage_collection_threshold, max_split_size_mb, roundup_power2_divisions: 22 of 24 real "
           "runs exact to the byte (traces/recorded/PREDICTION.md; the 2 others within 1.4 %), and the "
           "report's advice for 4 recorded PyTorch jobs run for real, exact (bench/RESULTS.md, issue 25)";
  } else if (!strcmp(policy, "jax") || !strncmp(policy, "jax:", 4)) {
    keys = jax_keys, nk = sizeof jax_keys / sizeof jax_keys[0], conf = policy[3] ? policy + 4 : "";
    text = "JAX 0.11's BFC on an H100, growth and preallocation with XLA_PYTHON_CLIENT_MEM_FRACTION: 36 "
           "real runs, 23 exact to the byte, 10 out of memory as the real run, 3 upper bounds where XLA "
           "recompiled (traces/recorded/jax/PREDICTION.md), and the advice for 5 recorded JAX jobs run for "
           "real on an H200, exact (bench/RESULTS.md)";
  } else {
    return NULL;
  }
  /* every key of the setting must be one the table ran */
  for (const char *p = conf; *p;) {
    while (*p == ',' || *p == ' ') p++;
    if (!*p) break;
    size_t n = strcspn(p, ",= :");
    int known = 0;
    for (size_t k = 0; k < nk; k++)
      if (strlen(keys[k]) == n && !strncmp(p, keys[k], n)) known = 1;
    if (!known) return NULL;
    int depth = 0; /* the next key: past this value, brackets ([32:16,>:0]) included */
    for (p += n; *p && (depth || (*p != ',' && *p != ' ')); p++) depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
  }
  return text;
}

/* How far to trust the best figure, from what its run says about itself. */
static void trust_line(FILE *out, const ana_advice_t *a, const run_fig_t *best) {
  char b1[32], b2[32];
  const char *why = NULL;
  if (best->predicted) why = "the trace is predicted (gpurec predict), not recorded";
  else if (best->partial) why = "the trace is damaged: the figures cover the events that could be read";
  else if (strncmp(a->framework, "unknown", 7) == 0) why = "the trace does not say which framework ran";
  else if (best->assumed && (strncmp(best->policy, "prealloc", 8) == 0 || strncmp(best->policy, "bfc", 3) == 0 ||
                             strncmp(best->policy, "jax", 3) == 0 || strncmp(best->policy, "tf", 2) == 0))
    why = "the trace does not say its GPU's memory, and this setting takes a share of it";
  if (a->best_range) {
    fprintf(out, "<p class=\"trust trust-range\" id=\"trust\"><b>Trust: a range</b>, %s..%s: it depends on when "
                 "the GPU completes work the allocator waits for (stream events, the driver's pool); ranked by its "
                 "high end.%s%s</p>\n",
            sz(a->best_low, b1, sizeof b1), sz(a->best_high, b2, sizeof b2), why ? " Also: " : "", why ? why : "");
  } else if (why) {
    fprintf(out, "<p class=\"trust trust-unvalidated\" id=\"trust\"><b>Trust: unvalidated</b>: %s.</p>\n", why);
  } else {
    const char *backed = backing_table(best->policy);
    if (backed)
      fprintf(out, "<p class=\"trust trust-exact\" id=\"trust\"><b>Trust: checked against real runs</b>: %s.</p>\n",
              backed);
    else
      fprintf(out, "<p class=\"trust trust-model\" id=\"trust\"><b>Trust: a model</b>: a replay of %s's allocator "
                   "as modelled (replay/policies/POLICIES.md); no table in the repository checks this setting "
                   "against real runs.</p>\n", a->framework);
  }
}

static void card(FILE *out, const char *cls, const char *title, const char *value, const char *sub) {
  fprintf(out, "<div class=\"card %s\"><div class=\"ct\">", cls);
  ana_html_escape(out, title);
  fputs("</div><div class=\"cv\">", out);
  ana_html_escape(out, value);
  fputs("</div><div class=\"cs\">", out);
  ana_html_escape(out, sub);
  fputs("</div></div>\n", out);
}

/* The recommendation's text lines, as a list (not a preformatted block). */
static void rec_list(FILE *out, const char *text) {
  fputs("<ul class=\"rec\" id=\"recommendation\">\n", out);
  const char *p = text;
  int first = 1;
  while (p && *p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    size_t ind = 0;
    while (ind < len && p[ind] == ' ') ind++;
    if (!first && len > ind) {
      char *line = strndup(p + ind, len - ind);
      if (line) {
        fprintf(out, "<li class=\"l%zu\">", ind / 2 < 4 ? ind / 2 : 3);
        ana_html_escape(out, line);
        fputs("</li>\n", out);
        free(line);
      }
    }
    first = 0; /* the first line is the trace's path, already the section's title */
    p = nl ? nl + 1 : NULL;
  }
  fputs("</ul>\n", out);
}

void ana_html_first_screen(ana_db_t *db, FILE *out, int64_t trace_id, const ana_advice_t *a, const char *rec_text,
                           int64_t *rec_run) {
  char b1[32], b2[32], b3[64], label[900];
  *rec_run = -1;
  fputs("<div class=\"first\">\n<div class=\"cards\">\n", out);
  char need_sub[128] = "live tensors at the peak: no setting reserves less";
  if (a->need > a->lower)
    snprintf(need_sub, sizeof need_sub, "live at the peak; %s with the libraries' memory beside it",
             sz(a->need, b1, sizeof b1));
  gmt_coverage_t cov; /* a partial trace: a peak before its window cannot be seen */
  int partial = ana_trace_coverage(db, trace_id, &cov);
  if (partial) snprintf(need_sub, sizeof need_sub, "a lower bound: the trace covers only part of the run");
  card(out, "need", partial ? "The job needs at least" : "The job needs", sz(a->lower, b2, sizeof b2), need_sub);
  if (a->runs == 0) {
    fputs("</div>\n<p class=\"norun\">No replay runs are loaded for this trace: <code>gpuanalyze report TRACE</code> "
          "replays the settings for you, or <code>gpureplay TRACE --sweep -o R.json</code> then "
          "<code>gpuanalyze load R.json</code>.</p>\n</div>\n",
          out);
    return;
  }
  run_fig_t rec, best;
  int64_t rid = recorded_run(db, trace_id, a, label, sizeof label);
  *rec_run = rid;
  if (run_figures(db, rid, &rec)) {
    if (rec.ooms)
      snprintf(b3, sizeof b3, "OUT OF MEMORY (%" PRId64 " failed)", rec.ooms);
    else
      sz(rec.reserved, b3, sizeof b3);
    card(out, rec.ooms ? "rec oom" : "rec", "It reserves", b3, label);
  } else {
    card(out, "rec", "It reserves", "not replayed", a->default_policy[0] ? label : "the trace holds nothing to replay");
  }
  int have_best = a->advised && run_figures(db, a->best_run_id, &best);
  if (have_best) {
    char val[96], sub[400];
    if (a->best_range) {
      /* a range: its high end is what an unlucky run reserves, and what it ranks by */
      snprintf(val, sizeof val, "\xe2\x89\xa4 %s", sz(a->best_high, b1, sizeof b1));
      snprintf(sub, sizeof sub, "%s (range %s..%s)", a->best_policy, sz(a->best_low, b1, sizeof b1),
               sz(a->best_high, b2, sizeof b2));
    } else {
      sz(a->best_reserved, val, sizeof val);
      snprintf(sub, sizeof sub, "%s", a->best_policy);
    }
    card(out, "best", "Best setting reserves", val, sub);
    if (rid >= 0 && rid == a->best_run_id) {
      card(out, "save none", "Saving", "none", "the job already runs with the best setting replayed");
    } else if (rid >= 0 && !rec.ooms) {
      int64_t save = rec.reserved - a->best_reserved;
      char pct[64];
      snprintf(pct, sizeof pct, "%.1f%% of what it reserves now", rec.reserved ? 100.0 * (double)save / (double)rec.reserved : 0.0);
      card(out, save > 0 ? "save" : "save none", "Saving", sz(save, b1, sizeof b1), pct);
    } else if (rid >= 0) {
      card(out, "save", "Saving", "fits", "where the setting it ran with ran out of memory");
    }
  } else {
    card(out, "best none", "Best setting", "none advised", a->why_none[0] ? a->why_none : "every setting of the framework ran out of memory");
  }
  fputs("</div>\n", out);
  if (have_best) {
    fprintf(out, "<div class=\"paste\"><span>Paste before you start the job:</span> <code id=\"paste-%" PRId64 "\">", trace_id);
    ana_html_escape(out, a->paste);
    fprintf(out, "</code> <button type=\"button\" class=\"copy\" data-copy=\"paste-%" PRId64 "\">Copy</button></div>\n",
            trace_id);
    trust_line(out, a, &best);
  }
  fputs("<details class=\"recfull\"><summary>Recommendation: every line of <code>gpuanalyze recommend</code></summary>\n",
        out);
  rec_list(out, rec_text);
  fputs("</details>\n</div>\n", out);
}

/* Every replayed setting's peak reserved against the lower bound: horizontal bars in the
 * ranking of the runs table; settings far above the rest (a preallocated arena) are cut at the
 * chart's edge with their figure written beside them. */
void ana_html_bars(ana_db_t *db, FILE *out, int64_t trace_id, const ana_advice_t *a, int64_t rec_run) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT run_id, policy, peak_reserved_bytes, ooms,"
                         " COALESCE(json_extract(summary_json, '$.peak_reserved_range.high_bytes'), peak_reserved_bytes),"
                         " lower_bound_bytes,"
                         " COALESCE(json_extract(summary_json, '$.peak_reserved_range.low_bytes'), peak_reserved_bytes)"
                         " FROM v_runs WHERE trace_id=?1"
                         " AND (?2 < 0 OR COALESCE(json_extract(summary_json, '$.device'), -1) = ?2)"
                         " ORDER BY ooms > 0, MAX(peak_reserved_bytes, COALESCE(json_extract(summary_json,"
                         " '$.peak_reserved_range.high_bytes'), 0)), run_id LIMIT 64",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, trace_id);
  sqlite3_bind_int64(st, 2, a->device);
  typedef struct {
    int64_t id, res, ooms, high, low;
    char pol[256];
  } bar_t;
  bar_t bars[64];
  int n = 0;
  int64_t lower = a->lower;
  while (n < 64 && sqlite3_step(st) == SQLITE_ROW) {
    bars[n].id = sqlite3_column_int64(st, 0);
    snprintf(bars[n].pol, sizeof bars[n].pol, "%s", (const char *)sqlite3_column_text(st, 1));
    bars[n].res = sqlite3_column_int64(st, 2);
    bars[n].ooms = sqlite3_column_int64(st, 3);
    bars[n].high = sqlite3_column_int64(st, 4);
    if (sqlite3_column_int64(st, 5) > 0) lower = sqlite3_column_int64(st, 5);
    bars[n].low = sqlite3_column_int64(st, 6);
    n++;
  }
  sqlite3_finalize(st);
  if (n == 0) return;
  /* Scale: up to the largest figure within 4x the lower bound (at least the lower bound). */
  double max = (double)(lower > 0 ? lower : 1);
  for (int i = 0; i < n; i++) {
    double v = (double)(bars[i].high > bars[i].res ? bars[i].high : bars[i].res);
    if (v > max && v <= 4.0 * (double)lower) max = v;
  }
  max *= 1.05;
  int h = n * BAR_ROW + 34;
  fprintf(out, "<h3>Peak reserved under every replayed setting</h3>\n<div class=\"svgbox\">"
               "<svg class=\"bars\" id=\"bars-%" PRId64 "\" viewBox=\"0 0 %d %d\" width=\"%d\" role=\"img\">\n",
          trace_id, BAR_LABEL_W + BAR_W + 110, h, BAR_LABEL_W + BAR_W + 110);
  char b1[32], b2[32];
  for (int i = 0; i < n; i++) {
    int y = 6 + i * BAR_ROW;
    double v = (double)bars[i].res;
    int cut = v > max;
    int w = (int)((cut ? max : v) / max * BAR_W);
    int is_best = bars[i].id == a->best_run_id, is_rec = bars[i].id == rec_run;
    const char *cls = bars[i].ooms ? "oom" : is_best ? "best" : is_rec ? "rec" : "other";
    fprintf(out, "<g class=\"bar %s\"><title>", cls);
    ana_html_escape(out, bars[i].pol);
    fprintf(out, ": %s%s</title>", sz(bars[i].res, b1, sizeof b1), bars[i].ooms ? " (ran out of memory)" : "");
    char lab[64];
    snprintf(lab, sizeof lab, "%.46s%s", bars[i].pol, strlen(bars[i].pol) > 46 ? "..." : "");
    fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", BAR_LABEL_W - 6, y + 14);
    ana_html_escape(out, lab);
    fprintf(out, "</text><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>", BAR_LABEL_W, y + 2, w > 1 ? w : 1,
            BAR_ROW - 6);
    if ((bars[i].high > bars[i].res || bars[i].low < bars[i].res) && !cut) {
      /* a timing-dependent figure: its range as a whisker over the bar */
      double hi = (double)bars[i].high > max ? max : (double)bars[i].high;
      int x1 = BAR_LABEL_W + (int)((double)bars[i].low / max * BAR_W), x2 = BAR_LABEL_W + (int)(hi / max * BAR_W);
      fprintf(out, "<line class=\"range\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>"
                   "<line class=\"range\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>",
              x1, x2, y + BAR_ROW / 2 - 1, y + BAR_ROW / 2 - 1, x1, x1, y + 4, y + BAR_ROW - 6);
      if (x2 > BAR_LABEL_W + w) w = x2 - BAR_LABEL_W;
    }
    fprintf(out, "<text class=\"v\" x=\"%d\" y=\"%d\">%s%s%s%s</text></g>\n", BAR_LABEL_W + w + 6, y + 14,
            cut ? "&#187; " : "", sz(bars[i].res, b2, sizeof b2),
            bars[i].ooms ? " OOM" : "", is_best ? " \xe2\x98\x85 recommended" : is_rec ? " (as run)" : "");
  }
  int lx = BAR_LABEL_W + (int)((double)lower / max * BAR_W);
  fprintf(out, "<line class=\"lb\" x1=\"%d\" x2=\"%d\" y1=\"2\" y2=\"%d\"/><text class=\"lbt\" x=\"%d\" y=\"%d\" "
               "text-anchor=\"middle\">lower bound %s</text>\n</svg></div>\n",
          lx, lx, h - 22, lx, h - 8, sz(lower, b1, sizeof b1));
  fputs("<p class=\"note\">Bars: peak reserved (a timing-dependent figure: its range as a whisker, low to high). "
        "The line: the lower bound, the peak of live requested bytes. Red: the setting ran out of memory. "
        "&#187;: far above the rest, cut at the edge.</p>\n",
        out);
}

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
                         "SELECT policy, json_extract(summary_json, '$.peak_snapshot.reserved_bytes'),"
                         " json_extract(summary_json, '$.peak_snapshot.requested_bytes'),"
                         " json_extract(summary_json, '$.peak_snapshot.rounding_bytes'),"
                         " json_extract(summary_json, '$.peak_snapshot.free_in_segments_bytes'),"
                         " json_extract(summary_json, '$.peak_snapshot.cached_segments_bytes'),"
                         " json_extract(summary_json, '$.peak_snapshot.segments'),"
                         " json_extract(summary_json, '$.peak_snapshot.segments_in_use'),"
                         " json_extract(summary_json, '$.peak_snapshot.ts_ns')"
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
            sz(s[i].reserved, b[0], 32), sz(s[i].requested, b[1], 32), sz(s[i].rounding, b[2], 32),
            sz(s[i].free_in, b[3], 32), sz(s[i].cached, b[4], 32), s[i].segments, s[i].in_use, (double)s[i].ts / 1e9);
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
            sz(b, b1, sizeof b1), tot > 0 ? 100.0 * (double)b / (double)tot : 0.0);
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
                                         "SELECT policy, json_extract(summary_json, '$.peak_snapshot.map'),"
                                         " json_extract(summary_json, '$.peak_snapshot.segments'),"
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
