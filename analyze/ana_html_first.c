/* ana_html_first.c: the report's first screen for one trace (the answer before the evidence):
 * the headline (what the job needs, what it reserves under the setting it ran with, the best
 * setting, the saving, the line to paste with a copy button, how far to trust it), a bar
 * chart of every replayed setting's peak reserved against the lower bound. Where the bytes go
 * at the peak (the waste split, live bytes by callsite, the segment map) follows it:
 * ana_html_peak.c.
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
#include "analyze/ana_run_fields.h"

enum { BAR_LABEL_W = 380, BAR_W = 470, BAR_ROW = 22 };

/* The run of the setting the job ran with (ana_own_run), for the advice's device. */
static int64_t recorded_run(ana_db_t *db, int64_t trace_id, const ana_advice_t *a, char *label, size_t n) {
  int as_run;
  return ana_own_run(db, trace_id, ana_trace_fw(db, trace_id), a->device, label, n, &as_run);
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
                         " COALESCE(" ANA_RF_TIMING_SENSITIVE("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_LOW_BYTES("summary_json") ", peak_reserved_bytes),"
                         " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES("summary_json") ", peak_reserved_bytes),"
                         " " ANA_RF_PREDICTED("summary_json") " IS NOT NULL,"
                         " COALESCE(" ANA_RF_PARTIAL("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_DEVICE_MEMORY_ASSUMED("summary_json") ", 0)"
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
static void trust_line(FILE *out, const ana_advice_t *a, const run_fig_t *best, const char *runs_check) {
  char b1[32], b2[32], pw[1200];
  const char *why = NULL;
  if (best->predicted && runs_check && *runs_check) { /* gpurec predict checked its recordings */
    snprintf(pw, sizeof pw, "the trace is predicted (gpurec predict), not recorded; the recordings it was predicted "
                            "from: %s", runs_check);
    why = pw;
  } else if (best->predicted) why = "the trace is predicted (gpurec predict), not recorded";
  else if (best->partial) why = "the trace is damaged: the figures cover the events that could be read";
  else if (strncmp(a->framework, "unknown", 7) == 0) why = "the trace does not say which framework ran";
  else if (best->assumed && (strncmp(best->policy, "prealloc", 8) == 0 || strncmp(best->policy, "bfc", 3) == 0 ||
                             strncmp(best->policy, "jax", 3) == 0 || strncmp(best->policy, "tf", 2) == 0))
    why = "the trace does not say its GPU's memory, and this setting takes a share of it";
  /* why may hold the trace's own text (a predicted trace's note): escaped */
  if (a->check == ANA_CHECK_OFF) {
    fprintf(out, "<p class=\"trust trust-unvalidated\" id=\"trust\"><b>Trust: off on this run</b> by %s: the "
                 "figures are a model that does not follow this run exactly (above).%s",
            ana_size_signed(a->check_off, b1, sizeof b1), why ? " Also: " : "");
    if (why) ana_html_escape(out, why);
    fputs("</p>\n", out);
  } else if (a->best_range) {
    fprintf(out, "<p class=\"trust trust-range\" id=\"trust\"><b>Trust: a range</b>, %s..%s: it depends on when "
                 "the GPU completes work the allocator waits for (stream events, the driver's pool); ranked by its "
                 "high end.%s",
            ana_size_signed(a->best_low, b1, sizeof b1), ana_size_signed(a->best_high, b2, sizeof b2), why ? " Also: " : "");
    if (why) ana_html_escape(out, why);
    fputs("</p>\n", out);
  } else if (why) {
    fputs("<p class=\"trust trust-unvalidated\" id=\"trust\"><b>Trust: unvalidated</b>: ", out);
    ana_html_escape(out, why);
    fputs(".</p>\n", out);
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

/* The replay against the run it replays (ana_run_check.c), when the trace holds the run's own
 * segments: the strongest evidence there is, or the warning that the figures miss this run. */
static void check_line(FILE *out, const ana_advice_t *a) {
  char b1[32], b2[32], b3[32];
  if (a->check == ANA_CHECK_EXACT) {
    fprintf(out, "<p class=\"check check-exact\" id=\"check\"><b>Checked against this run</b>: replayed under the "
                 "setting it ran with (<code>");
    ana_html_escape(out, a->check_policy);
    fprintf(out, "</code>), the trace reserves %s; the run reserved %s (its allocator's own segments, in the "
                 "trace).</p>\n",
            ana_size_signed(a->check_replay, b1, sizeof b1), ana_size_signed(a->check_recorded, b2, sizeof b2));
  } else if (a->check == ANA_CHECK_OFF) {
    fprintf(out, "<p class=\"check check-off\" id=\"check\"><b>The replay misses this run by %s (%.2f %%)</b>: "
                 "replayed under the setting it ran with (<code>",
            ana_size_signed(a->check_off, b1, sizeof b1), 100.0 * (double)a->check_off / (double)a->check_recorded);
    ana_html_escape(out, a->check_policy);
    fprintf(out, "</code>), the trace reserves %s; the run reserved %s (its allocator's own segments, in the "
                 "trace). Every figure here may be off by as much; the advice asks a saving past it.</p>\n",
            ana_size_signed(a->check_replay, b2, sizeof b2), ana_size_signed(a->check_recorded, b3, sizeof b3));
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
             ana_size_signed(a->need, b1, sizeof b1));
  gmt_coverage_t cov; /* a partial trace: a peak before its window cannot be seen */
  int partial = ana_trace_coverage(db, trace_id, &cov);
  if (partial) snprintf(need_sub, sizeof need_sub, "a lower bound: the trace covers only part of the run");
  card(out, "need", partial ? "The job needs at least" : "The job needs", ana_size_signed(a->lower, b2, sizeof b2), need_sub);
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
    else if (a->check == ANA_CHECK_OFF) /* the run's own figure is known, and the replay misses it */
      ana_size_signed(a->check_recorded, b3, sizeof b3);
    else
      ana_size_signed(rec.reserved, b3, sizeof b3);
    if (a->check == ANA_CHECK_OFF && !rec.ooms) {
      char b4[32];
      size_t l = strlen(label);
      snprintf(label + l, sizeof label - l, "; the run's own segments (the replay: %s)",
               ana_size_signed(a->check_replay, b4, sizeof b4));
    }
    card(out, rec.ooms ? "rec oom" : "rec", "It reserves", b3, label);
  } else {
    card(out, "rec", "It reserves", "not replayed", a->default_policy[0] ? label : "the trace holds nothing to replay");
  }
  int have_best = a->advised && run_figures(db, a->best_run_id, &best);
  if (have_best) {
    char val[96], sub[400];
    if (a->best_range) {
      /* a range: its high end is what an unlucky run reserves, and what it ranks by */
      snprintf(val, sizeof val, "\xe2\x89\xa4 %s", ana_size_signed(a->best_high, b1, sizeof b1));
      snprintf(sub, sizeof sub, "%s (range %s..%s)", a->best_policy, ana_size_signed(a->best_low, b1, sizeof b1),
               ana_size_signed(a->best_high, b2, sizeof b2));
    } else {
      ana_size_signed(a->best_reserved, val, sizeof val);
      snprintf(sub, sizeof sub, "%s", a->best_policy);
    }
    card(out, "best", "Best setting reserves", val, sub);
    if (rid >= 0 && rid == a->best_run_id) {
      card(out, "save none", "Saving", "none", "the job already runs with the best setting replayed");
    } else if (rid >= 0 && !rec.ooms) {
      int64_t save = rec.reserved - a->best_reserved;
      char pct[64];
      snprintf(pct, sizeof pct, "%.1f%% of what it reserves now", rec.reserved ? 100.0 * (double)save / (double)rec.reserved : 0.0);
      card(out, save > 0 ? "save" : "save none", "Saving", ana_size_signed(save, b1, sizeof b1), pct);
    } else if (rid >= 0) {
      card(out, "save", "Saving", "fits", "where the setting it ran with ran out of memory");
    }
  } else {
    card(out, "best none", "Best setting", "none advised", a->why_none[0] ? a->why_none : "every setting of the framework ran out of memory");
  }
  fputs("</div>\n", out);
  check_line(out, a);
  if (have_best) {
    fprintf(out, "<div class=\"paste\"><span>Paste before you start the job:</span> <code id=\"paste-%" PRId64 "\">", trace_id);
    ana_html_escape(out, a->paste);
    fprintf(out, "</code> <button type=\"button\" class=\"copy\" data-copy=\"paste-%" PRId64 "\">Copy</button></div>\n",
            trace_id);
    char rcheck[1024];
    trust_line(out, a, &best, ana_trace_kv(db, trace_id, "predicted.runs_check", rcheck, sizeof rcheck));
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
                         " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES("summary_json") ", peak_reserved_bytes),"
                         " lower_bound_bytes,"
                         " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_LOW_BYTES("summary_json") ", peak_reserved_bytes)"
                         " FROM v_runs WHERE trace_id=?1"
                         " AND (?2 < 0 OR COALESCE(" ANA_RF_DEVICE("summary_json") ", -1) = ?2)"
                         " ORDER BY ooms > 0, MAX(peak_reserved_bytes, COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES("summary_json") ", 0))"
                         ", run_id LIMIT 64",
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
    fprintf(out, ": %s%s</title>", ana_size_signed(bars[i].res, b1, sizeof b1), bars[i].ooms ? " (ran out of memory)" : "");
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
            cut ? "&#187; " : "", ana_size_signed(bars[i].res, b2, sizeof b2),
            bars[i].ooms ? " OOM" : "", is_best ? " \xe2\x98\x85 recommended" : is_rec ? " (as run)" : "");
  }
  int lx = BAR_LABEL_W + (int)((double)lower / max * BAR_W);
  fprintf(out, "<line class=\"lb\" x1=\"%d\" x2=\"%d\" y1=\"2\" y2=\"%d\"/><text class=\"lbt\" x=\"%d\" y=\"%d\" "
               "text-anchor=\"middle\">lower bound %s</text>\n</svg></div>\n",
          lx, lx, h - 22, lx, h - 8, ana_size_signed(lower, b1, sizeof b1));
  fputs("<p class=\"note\">Bars: peak reserved (a timing-dependent figure: its range as a whisker, low to high). "
        "The line: the lower bound, the peak of live requested bytes. Red: the setting ran out of memory. "
        "&#187;: far above the rest, cut at the edge.</p>\n",
        out);
}
