/* ana_html_predict.c: the report's "peak against the value" section: for a trace that
 * `gpurec predict` wrote (its header names the recordings it came from and the value it is
 * at), or for any trace when the user names recordings (`gpuanalyze report --curve=A.zst@8
 * --curve=B.zst@16 TRACE`), the peak reserved of every replayed setting against the value
 * (batch, sequence length, ...), the recordings as real points on each setting's line and the
 * trace's own replay at its value, as an inline SVG chart and a table.
 *
 * The recordings are replayed here under the trace's settings (the policies of its runs in the
 * database) by the gpureplay binary (ana_gpureplay.h: the analyzer links no replayer), one
 * process for all settings of a recording. A recording that is not found (the header keeps the
 * paths as they were given to gpurec predict: relative to where it ran) is said, and its point
 * left out. Where the prediction's per-setting check (recorder/predict/pred_settings.c) refused a setting, the
 * header's predicted.settings says so and its point at the value is marked refused.
 *
 * Workload: a few recordings, up to ANA_CURVE_SETTINGS settings; one gpureplay run each. */
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/ana_gpureplay.h"
#include "analyze/ana_report_internal.h"
#include "analyze/ana_run_fields.h"

#define ANA_CURVE_INPUTS 8
#define ANA_CURVE_SETTINGS 12

static const char *const *g_curve; /* --curve=TRACE@VALUE, as given */
static int g_ncurve;
static const char *g_gpureplay; /* --gpureplay, or NULL: found as report finds it */

typedef struct point {
  char path[PATH_MAX];
  double value;
  int found;                            /* the recording was read and replayed */
  char why[256];                        /* else why not */
  int64_t peak[ANA_CURVE_SETTINGS];     /* -1: no figure */
} point_t;

typedef struct curve {
  char specs[ANA_CURVE_SETTINGS][256];
  int64_t self[ANA_CURVE_SETTINGS]; /* the trace's own replay */
  int refused[ANA_CURVE_SETTINGS];  /* the prediction's check refused this setting */
  int unchecked[ANA_CURVE_SETTINGS]; /* the prediction was checked per setting, not this one */
  int n_specs;
  point_t pts[ANA_CURVE_INPUTS];
  int n_pts;
  double at; /* the trace's value; 0: not known (recordings given, the trace is none of them) */
  int predicted;
} curve_t;

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* "path@value" into a point; 0 when it is not that shape. */
static int parse_input(const char *s, size_t len, point_t *p) {
  const char *at = NULL;
  for (size_t i = 0; i < len; i++)
    if (s[i] == '@') at = s + i;
  if (!at || at == s || (size_t)(at - s) >= sizeof p->path) return 0;
  char num[64];
  size_t nl = len - (size_t)(at + 1 - s);
  if (nl == 0 || nl >= sizeof num) return 0;
  memcpy(num, at + 1, nl);
  num[nl] = 0;
  char *end = NULL;
  double v = strtod(num, &end);
  if (*end || !(v > 0) || !isfinite(v)) return 0;
  memcpy(p->path, s, (size_t)(at - s));
  p->path[at - s] = 0;
  p->value = v;
  return 1;
}

int ana_html_predict_config(const char *const *curve, int n, const char *gpureplay) {
  g_curve = curve;
  g_ncurve = n;
  g_gpureplay = gpureplay;
  point_t *p = malloc(sizeof *p);
  if (!p) return -1; /* checked again when drawn */
  for (int i = 0; i < n; i++)
    if (!parse_input(curve[i], strlen(curve[i]), p)) {
      free(p);
      return i;
    }
  free(p);
  return -1;
}

/* A recording's path as the header gives it: as it is, else beside the trace. */
static void resolve(point_t *p, const char *trace_path) {
  if (is_file(p->path) || p->path[0] == '/') return;
  const char *slash = trace_path ? strrchr(trace_path, '/') : NULL;
  if (!slash) return;
  char alt[PATH_MAX];
  const char *base = strrchr(p->path, '/');
  int n = snprintf(alt, sizeof alt, "%.*s/%s", (int)(slash - trace_path), trace_path, base ? base + 1 : p->path);
  if (n > 0 && (size_t)n < sizeof alt && is_file(alt)) snprintf(p->path, sizeof p->path, "%s", alt);
}

/* Replay one recording under every setting of the curve; its peaks into p. */
static void replay_point(const char *tool, curve_t *c, point_t *p) {
  for (int i = 0; i < c->n_specs; i++) p->peak[i] = -1;
  if (!is_file(p->path)) {
    snprintf(p->why, sizeof p->why, "not found");
    return;
  }
  char *argv[ANA_CURVE_SETTINGS * 2 + 8];
  int a = 0;
  argv[a++] = (char *)tool;
  argv[a++] = "--json";
  argv[a++] = "-q";
  for (int i = 0; i < c->n_specs; i++) {
    argv[a++] = "--policy";
    argv[a++] = c->specs[i];
  }
  argv[a++] = "--";
  argv[a++] = p->path;
  argv[a] = NULL;
  gm_tool_run_t r;
  gm_err_t err;
  gm_err_clear(&err);
  if (gm_tool_capture(argv, NULL, &r, &err) < 0) {
    snprintf(p->why, sizeof p->why, "%.200s", err.msg);
    return;
  }
  if (r.exit_status != 0) {
    char msg[200];
    gm_tool_message(&r, "gpureplay", msg, sizeof msg, NULL);
    snprintf(p->why, sizeof p->why, "gpureplay: %s", msg);
    gm_tool_run_free(&r);
    return;
  }
  /* one object per line, the settings in the order given, the first device's first */
  for (char *line = r.out, *nl; line && *line; line = nl ? nl + 1 : NULL) {
    nl = strchr(line, '\n');
    if (nl) *nl = 0;
    json_t *o = json_loads(line, 0, NULL);
    const char *pol = o ? json_string_value(json_object_get(o, "policy")) : NULL;
    json_t *pk = o ? json_object_get(o, "peak_reserved_bytes") : NULL;
    for (int i = 0; pol && json_is_integer(pk) && i < c->n_specs; i++)
      if (p->peak[i] < 0 && strcmp(pol, c->specs[i]) == 0) p->peak[i] = (int64_t)json_integer_value(pk);
    json_decref(o);
  }
  gm_tool_run_free(&r);
  p->found = 1;
}

/* The trace's settings (its runs on device dev, -1: any) that its job can run under, and its
 * own peak under each. */
static void read_settings(ana_db_t *db, int64_t trace_id, int64_t dev, curve_t *c) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT policy, MIN(peak_reserved_bytes) FROM v_runs WHERE trace_id=?1 AND ooms=0"
                         " AND (?2 < 0 OR COALESCE(" ANA_RF_DEVICE("summary_json") ", -1) = ?2)"
                         " GROUP BY policy ORDER BY MIN(run_id)",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, trace_id);
  sqlite3_bind_int64(st, 2, dev);
  ana_fw_t fw = ana_trace_fw(db, trace_id);
  while (c->n_specs < ANA_CURVE_SETTINGS && sqlite3_step(st) == SQLITE_ROW) {
    const char *pol = (const char *)sqlite3_column_text(st, 0);
    if (!pol || strlen(pol) >= sizeof c->specs[0] || !ana_fw_runs_setting(fw, pol)) continue;
    snprintf(c->specs[c->n_specs], sizeof c->specs[0], "%s", pol);
    c->self[c->n_specs++] = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
}

/* What predicted.settings ("SPEC=answered ...; SPEC=refused ...") says of spec: 1 refused,
 * 0 answered, -1 not named (not checked). */
static int check_outcome(const char *note, const char *spec) {
  size_t n = strlen(spec);
  for (const char *p = note; p && *p;) {
    if (strncmp(p, spec, n) == 0 && strncmp(p + n, "=refused", 8) == 0) return 1;
    if (strncmp(p, spec, n) == 0 && strncmp(p + n, "=answered", 9) == 0) return 0;
    p = strstr(p, "; ");
    if (p) p += 2;
  }
  return -1;
}

/* ---- drawing ------------------------------------------------------------------------------ */

enum { W = 700, H = 360, L = 90, R = 20, T = 16, B = 44, LEGEND = 330 };
static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                                      "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"};

static double xpos(double v, double vmax) { return L + (W - L - R) * (v / vmax); }
static double ypos(double b, double bmax) { return H - B - (H - B - T) * (b > bmax ? 1 : b / bmax); }

static void draw(FILE *out, int64_t trace_id, const curve_t *c) {
  double vmax = c->at, bmax = 1;
  for (int j = 0; j < c->n_pts; j++) vmax = c->pts[j].value > vmax ? c->pts[j].value : vmax;
  /* the scale: every figure within 4x the smallest at the same value (a preallocated arena far
   * above the rest is drawn at the top edge, its figure in the table) */
  for (int j = 0; j <= c->n_pts; j++) {
    double lo = 0, hi = 0;
    for (int pass = 0; pass < 2; pass++)
      for (int i = 0; i < c->n_specs; i++) {
        double b = j < c->n_pts ? (double)c->pts[j].peak[i] : c->at > 0 ? (double)c->self[i] : -1;
        if (b <= 0) continue;
        if (pass == 0 && (lo == 0 || b < lo)) lo = b;
        if (pass == 1 && b <= 4 * lo && b > hi) hi = b;
      }
    if (hi > bmax) bmax = hi;
  }
  vmax *= 1.08;
  bmax *= 1.08;
  char b1[32];
  fprintf(out, "<div class=\"svgbox\"><svg class=\"curve\" id=\"curve-%" PRId64 "\" viewBox=\"0 0 %d %d\" width=\"%d\" "
               "role=\"img\" data-drawn=\"1\">\n",
          trace_id, W + LEGEND, H, W + LEGEND);
  fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/><line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
               "y2=\"%d\" stroke=\"#888\"/>\n",
          L, H - B, W - R, H - B, L, T, L, H - B);
  for (int k = 0; k <= 4; k++) { /* axes: five ticks each */
    double b = bmax / 1.08 * k / 4, v = vmax / 1.08 * k / 4;
    fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>", L - 6, ypos(b, bmax) + 4,
            gm_format_size((uint64_t)b, b1, sizeof b1));
    fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.4g</text>\n", xpos(v, vmax), H - B + 16, v);
  }
  fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">value (the size the recordings differ in)</text>\n",
          (L + W - R) / 2, H - 8);
  for (int i = 0; i < c->n_specs; i++) {
    const char *col = palette[i % (sizeof palette / sizeof *palette)];
    /* the line through every point in value order: recordings and the trace itself */
    double xs[ANA_CURVE_INPUTS + 1], ys[ANA_CURVE_INPUTS + 1];
    int n = 0;
    for (int j = 0; j < c->n_pts; j++)
      if (c->pts[j].peak[i] >= 0) {
        xs[n] = c->pts[j].value;
        ys[n++] = (double)c->pts[j].peak[i];
      }
    if (c->at > 0 && !c->refused[i]) {
      xs[n] = c->at;
      ys[n++] = (double)c->self[i];
    }
    for (int a = 1; a < n; a++) /* insertion sort: a handful of points */
      for (int b = a; b > 0 && xs[b - 1] > xs[b]; b--) {
        double t = xs[b];
        xs[b] = xs[b - 1];
        xs[b - 1] = t;
        t = ys[b];
        ys[b] = ys[b - 1];
        ys[b - 1] = t;
      }
    fprintf(out, "<g class=\"setting\"><title>");
    ana_html_escape(out, c->specs[i]);
    fprintf(out, "</title><polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", col);
    for (int a = 0; a < n; a++) fprintf(out, "%.1f,%.1f ", xpos(xs[a], vmax), ypos(ys[a], bmax));
    fputs("\"/>", out);
    for (int j = 0; j < c->n_pts; j++)
      if (c->pts[j].peak[i] >= 0)
        fprintf(out, "<circle class=\"recorded\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>",
                xpos(c->pts[j].value, vmax), ypos((double)c->pts[j].peak[i], bmax), col);
    if (c->at > 0) {
      double x = xpos(c->at, vmax), y = ypos((double)c->self[i], bmax);
      if (c->refused[i]) /* the check refused it: a cross, not on the line */
        fprintf(out, "<path class=\"refused\" d=\"M%.1f %.1fl8 8m0 -8l-8 8\" stroke=\"%s\" stroke-width=\"2\"/>", x - 4,
                y - 4, col);
      else
        fprintf(out, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"white\" stroke=\"%s\" "
                     "stroke-width=\"2\" transform=\"rotate(45 %.1f %.1f)\"/>",
                c->predicted ? "predicted" : "this", x - 4, y - 4, col, x, y);
    }
    fputs("</g>\n", out);
  }
  /* legend, right of the plot */
  for (int i = 0; i < c->n_specs; i++) {
    int y = T + 6 + 16 * i;
    fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"3\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">", W + 4, y,
            palette[i % (sizeof palette / sizeof *palette)], W + 20, y + 5);
    char lab[64];
    snprintf(lab, sizeof lab, "%.46s%s", c->specs[i], strlen(c->specs[i]) > 46 ? "..." : "");
    ana_html_escape(out, lab);
    fputs("</text>\n", out);
  }
  fputs("</svg></div>\n", out);
}

static void table(FILE *out, const curve_t *c) {
  char b1[32];
  fputs("<div class=\"scroll\"><table class=\"curve\"><tr><th>setting</th>", out);
  for (int j = 0; j < c->n_pts; j++) fprintf(out, "<th>%.15g (recorded)</th>", c->pts[j].value);
  if (c->at > 0) fprintf(out, "<th>%.15g (%s)</th>", c->at, c->predicted ? "predicted: this trace" : "this trace");
  fputs("</tr>\n", out);
  for (int i = 0; i < c->n_specs; i++) {
    fputs("<tr><td>", out);
    ana_html_escape(out, c->specs[i]);
    fputs("</td>", out);
    for (int j = 0; j < c->n_pts; j++)
      fprintf(out, "<td>%s</td>", c->pts[j].peak[i] >= 0 ? gm_format_size((uint64_t)c->pts[j].peak[i], b1, sizeof b1) : "-");
    if (c->at > 0)
      fprintf(out, "<td>%s%s</td>", gm_format_size((uint64_t)c->self[i], b1, sizeof b1),
              c->refused[i] ? " (refused by the check: not an answer)" : c->unchecked[i] ? " (not checked)" : "");
    fputs("</tr>\n", out);
  }
  fputs("</table></div>\n", out);
}

void ana_html_predict(ana_db_t *db, FILE *out, int64_t trace_id, int64_t device) {
  char buf[8192], atb[64], note[8192], path[PATH_MAX] = "";
  const char *inputs = ana_trace_kv(db, trace_id, "predicted.inputs", buf, sizeof buf);
  curve_t *c = calloc(1, sizeof *c);
  if (!c) return;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h, "SELECT path FROM traces WHERE trace_id=?1", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, trace_id);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
      snprintf(path, sizeof path, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  if (inputs && *inputs) { /* a predicted trace: its inputs, space-separated PATH@VALUE */
    c->predicted = 1;
    const char *at = ana_trace_kv(db, trace_id, "predicted.at", atb, sizeof atb);
    c->at = at ? strtod(at, NULL) : 0;
    for (const char *p = inputs; *p && c->n_pts < ANA_CURVE_INPUTS;) {
      while (*p == ' ') p++;
      size_t len = strcspn(p, " ");
      if (len && parse_input(p, len, &c->pts[c->n_pts])) c->n_pts++;
      p += len;
    }
  } else if (g_ncurve) { /* recordings the user named */
    for (int j = 0; j < g_ncurve && c->n_pts < ANA_CURVE_INPUTS; j++)
      if (parse_input(g_curve[j], strlen(g_curve[j]), &c->pts[c->n_pts])) c->n_pts++;
  }
  if (c->n_pts == 0) {
    free(c);
    return;
  }
  read_settings(db, trace_id, device, c);
  const char *chk = ana_trace_kv(db, trace_id, "predicted.settings", note, sizeof note);
  for (int i = 0; chk && *chk && i < c->n_specs; i++) {
    int o = check_outcome(chk, c->specs[i]);
    c->refused[i] = o == 1;
    c->unchecked[i] = o < 0;
  }
  fputs("<h2 class=\"sub\" id=\"curve\">Peak reserved against the value</h2>\n", out);
  char tool[PATH_MAX];
  int have_tool = c->n_specs && gm_tool_find(g_gpureplay, "GPUREPLAY", "gpureplay", "replay", tool, sizeof tool, NULL);
  for (int j = 0; j < c->n_pts; j++) {
    resolve(&c->pts[j], path);
    if (have_tool) replay_point(tool, c, &c->pts[j]);
    else snprintf(c->pts[j].why, sizeof c->pts[j].why, "gpureplay not found");
  }
  if (!c->n_specs) {
    fputs("<p class=\"note\">No replayed setting to draw (the trace has no runs).</p>\n", out);
    free(c);
    return;
  }
  int drawn = 0;
  for (int j = 0; j < c->n_pts; j++) drawn += c->pts[j].found;
  if (drawn || c->at > 0) {
    draw(out, trace_id, c);
    table(out, c);
  }
  fputs("<p class=\"note\">Circles: the recordings, replayed here under each setting (a replay of a recording is its "
        "real run's peak on the jobs of traces/predicted: exact or within 0.05 %).",
        out);
  if (c->at > 0 && c->predicted)
    fprintf(out, " Diamonds: this trace, the job at %.15g predicted by <code>gpurec predict</code>; a cross: a setting "
                 "whose peak the prediction's uncertain sizes move beyond its tolerance (refused: not an answer); "
                 "not checked: a setting the prediction's per-setting check did not replay (gpurec predict -p names "
                 "them; its default is the framework's grid). A figure far above the rest is drawn at the top edge.",
            c->at);
  for (int j = 0; j < c->n_pts; j++)
    if (!c->pts[j].found) {
      fputs(" Recording <code>", out);
      ana_html_escape(out, c->pts[j].path);
      fputs("</code>: ", out);
      ana_html_escape(out, c->pts[j].why);
      fputs(" (its point is missing).", out);
    }
  fputs("</p>\n", out);
  if (c->predicted) { /* the question users ask of it: the largest value that fits (ana_html_fit.c) */
    char ins[ANA_CURVE_INPUTS][PATH_MAX + 64];
    const char *inp[ANA_CURVE_INPUTS], *specs[ANA_CURVE_SETTINGS];
    int ni = 0;
    for (int j = 0; j < c->n_pts; j++)
      if (c->pts[j].found) {
        snprintf(ins[ni], sizeof ins[ni], "%s@%.15g", c->pts[j].path, c->pts[j].value);
        inp[ni] = ins[ni];
        ni++;
      }
    for (int i = 0; i < c->n_specs; i++) specs[i] = c->specs[i];
    ana_html_fit(out, inp, ni, specs, c->n_specs);
  }
  free(c);
}
