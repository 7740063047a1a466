/* ana_html_fit.c: the report's "largest value that fits" section for a predicted trace: the
 * question users ask of a prediction ("what is the largest batch that fits on my GPU?"),
 * answered per replayed setting for the usual GPU sizes by `gpurec predict --fit` over the
 * prediction's own recordings, and the curve of the peak reserved against the value that the
 * search went through for the largest card.
 *
 * The analyzer links neither the predictor nor a replayer: the gpurec binary is run (found as
 * gpureplay is: --gpurec is not an option, $GPUREC, beside gpuanalyze, ../recorder/, PATH).
 * Device sizes are the memory as the framework sees it (torch.cuda.get_device_properties(0).
 * total_memory): 24 and 48 GiB cards at their nominal size, an H100 80GB and an H200 as this
 * project's recordings give them; gpurec's default --other (1 GiB outside the allocator) and
 * --margin apply. Workload: one gpurec run per size (seconds each: it loads the recordings and
 * replays a few dozen predictions). */
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_gpureplay.h"
#include "analyze/ana_report_internal.h"

static const struct {
  const char *label, *size;
} k_gpus[] = {{"24 GiB", "24GiB"}, {"48 GiB", "48GiB"}, {"H100 80GB", "85017493504"}, {"H200 141GB", "150109880320"}};
#define N_GPUS (sizeof k_gpus / sizeof *k_gpus)
#define MAX_SPECS 12

typedef struct cell {
  char text[160]; /* "48", "at least 16 (refused at 32)", "over 1024" */
  int refused;
  int answered;   /* fits (or still fits where the search stopped): largest is the answer */
  double largest;
} cell_t;

/* One `gpurec predict --fit` run; its JSON, or NULL with why. */
static json_t *run_fit(const char *tool, const char *const *inputs, int n, const char *const *specs, int n_specs,
                       const char *size, char *why, size_t wn) {
  char *argv[8 + 2 * MAX_SPECS + 16], fit[64];
  int a = 0;
  snprintf(fit, sizeof fit, "--fit=%s", size);
  argv[a++] = (char *)tool;
  argv[a++] = "predict";
  argv[a++] = "-q";
  argv[a++] = fit;
  argv[a++] = "--format=json";
  for (int i = 0; i < n_specs && i < MAX_SPECS; i++) {
    argv[a++] = "--policy";
    argv[a++] = (char *)specs[i];
  }
  for (int i = 0; i < n && i < 8; i++) argv[a++] = (char *)inputs[i];
  argv[a] = NULL;
  gm_tool_run_t r;
  gm_err_t err;
  gm_err_clear(&err);
  if (gm_tool_capture(argv, NULL, &r, &err) < 0) {
    snprintf(why, wn, "%.200s", err.msg);
    return NULL;
  }
  json_t *o = json_loads(r.out, 0, NULL);
  if (!o) { /* an error (exit 1) or a refusal of the whole structure (exit 3): its message */
    char msg[300];
    gm_tool_message(&r, "gpurec", msg, sizeof msg, NULL);
    snprintf(why, wn, "%s", msg);
  }
  gm_tool_run_free(&r);
  return o;
}

static void fill(json_t *o, const char *spec, cell_t *c) {
  json_t *s, *sets = json_object_get(o, "settings");
  size_t k;
  snprintf(c->text, sizeof c->text, "-");
  json_array_foreach(sets, k, s) {
    const char *pol = json_string_value(json_object_get(s, "policy")), *st = json_string_value(json_object_get(s, "state"));
    /* gpurec answers in gpureplay's words: "pytorch" for "pytorch:" */
    size_t pl = pol ? strlen(pol) : 0;
    if (!pol || !st || !(strcmp(pol, spec) == 0 || (strncmp(pol, spec, pl) == 0 && strcmp(spec + pl, ":") == 0))) continue;
    c->largest = json_number_value(json_object_get(s, "largest"));
    c->answered = strcmp(st, "fits") == 0 || strcmp(st, "at_least") == 0;
    if (strcmp(st, "fits") == 0)
      snprintf(c->text, sizeof c->text, "%.15g", json_number_value(json_object_get(s, "largest")));
    else if (strcmp(st, "refused") == 0) {
      snprintf(c->text, sizeof c->text, "at least %.15g (refused at %.15g)", json_number_value(json_object_get(s, "largest")),
               json_number_value(json_object_get(s, "refused_at")));
      c->refused = 1;
    } else if (strcmp(st, "at_least") == 0) /* still fits at the search's end (--max: 64 x the largest recording) */
      snprintf(c->text, sizeof c->text, "over %.15g", json_number_value(json_object_get(s, "largest")));
    else if (strcmp(st, "none") == 0)
      snprintf(c->text, sizeof c->text, "none (not even the recordings)");
    else
      snprintf(c->text, sizeof c->text, "%.100s", st);
    return;
  }
}

/* The curve: each point the search went through, its peak reserved per setting. */
static void curve_table(FILE *out, json_t *o, const char *const *specs, int n_specs) {
  char b1[32];
  json_t *pts = json_object_get(o, "points"), *p;
  size_t k;
  if (!json_array_size(pts)) return;
  fputs("<div class=\"scroll\"><table class=\"fitcurve\"><tr><th>value</th><th>from</th>", out);
  for (int i = 0; i < n_specs; i++) {
    fputs("<th>", out);
    ana_html_escape(out, specs[i]);
    fputs("</th>", out);
  }
  fputs("</tr>\n", out);
  json_array_foreach(pts, k, p) {
    json_t *pk = json_object_get(p, "peak_reserved_bytes"), *fits = json_object_get(p, "fits");
    fprintf(out, "<tr><td>%.15g</td><td>", json_number_value(json_object_get(p, "value")));
    ana_html_escape(out, json_string_value(json_object_get(p, "source")) ? json_string_value(json_object_get(p, "source")) : "");
    fputs("</td>", out);
    for (int i = 0; i < n_specs; i++) {
      json_t *v = json_object_get(pk, specs[i]), *f = json_object_get(fits, specs[i]);
      if (json_is_integer(v))
        fprintf(out, "<td>%s%s</td>", gm_format_size((uint64_t)json_integer_value(v), b1, sizeof b1),
                json_is_false(f) ? " (does not fit)" : "");
      else fputs("<td>-</td>", out);
    }
    fputs("</tr>\n", out);
  }
  fputs("</table></div>\n", out);
}

void ana_html_fit(FILE *out, const char *const *inputs, int n, const char *const *specs, int n_specs) {
  if (n < 2 || n_specs < 1) return;
  if (n_specs > MAX_SPECS) n_specs = MAX_SPECS;
  char tool[PATH_MAX], why[400] = "";
  fputs("<h2 class=\"sub\" id=\"fit\">The largest value that fits</h2>\n", out);
  if (!gm_tool_find(NULL, "GPUREC", "gpurec", "recorder", tool, sizeof tool, NULL)) {
    fputs("<p class=\"note\">gpurec not found (set GPUREC): the largest value that fits is not shown.</p>\n", out);
    return;
  }
  cell_t cells[N_GPUS][MAX_SPECS];
  memset(cells, 0, sizeof cells);
  json_t *last = NULL;
  for (size_t g = 0; g < N_GPUS; g++) {
    json_t *o = run_fit(tool, inputs, n, specs, n_specs, k_gpus[g].size, why, sizeof why);
    for (int i = 0; i < n_specs; i++) {
      if (o) fill(o, specs[i], &cells[g][i]);
      else snprintf(cells[g][i].text, sizeof cells[g][i].text, "-");
    }
    if (o) {
      json_decref(last);
      last = o;
    }
  }
  if (!last) {
    fputs("<p class=\"note\">gpurec predict --fit gave no answer: ", out);
    ana_html_escape(out, why);
    fputs("</p>\n", out);
    return;
  }
  fputs("<div class=\"scroll\"><table class=\"fit\"><tr><th>setting</th>", out);
  for (size_t g = 0; g < N_GPUS; g++) fprintf(out, "<th>%s</th>", k_gpus[g].label);
  fputs("</tr>\n", out);
  for (int i = 0; i < n_specs; i++) {
    fputs("<tr><td>", out);
    ana_html_escape(out, specs[i]);
    fputs("</td>", out);
    for (size_t g = 0; g < N_GPUS; g++) {
      fputs(cells[g][i].refused ? "<td class=\"refused\">" : "<td>", out);
      ana_html_escape(out, cells[g][i].text);
      fputs("</td>", out);
    }
    fputs("</tr>\n", out);
  }
  fputs("</table></div>\n", out);
  fputs("<p class=\"note\">The largest value at which the job fits each card, per setting: <code>gpurec predict "
        "RECORDINGS --fit=SIZE</code> over this prediction's recordings (1 GiB left for the CUDA context and libraries, "
        "a 0.5 % margin for the prediction's error; never above what the prediction says fits). \"At least N (refused "
        "at M)\": the prediction refused at M, so N is a lower bound; record nearer M to know more. \"Over N\": it still fits at N, 64 times the "
        "largest recording, where the search stops. Below: the peak "
        "reserved against the value as the search for the largest card went through it.</p>\n",
        out);
  curve_table(out, last, specs, n_specs);
  json_decref(last);
}

/* ---- gpuanalyze recommend: the same answer in a line per card --------------------------------- */

/* The settings the trace was replayed under (its runs) that its job can run under, at most
 * MAX_SPECS. */
static int trace_specs(ana_db_t *db, int64_t trace_id, char specs[][256]) {
  sqlite3_stmt *st = NULL;
  int n = 0;
  if (sqlite3_prepare_v2(db->h, "SELECT DISTINCT policy FROM v_runs WHERE trace_id=?1 AND ooms=0 ORDER BY run_id", -1, &st,
                         NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, trace_id);
  ana_fw_t fw = ana_trace_fw(db, trace_id);
  while (n < MAX_SPECS && sqlite3_step(st) == SQLITE_ROW) {
    const char *pol = (const char *)sqlite3_column_text(st, 0);
    if (pol && strlen(pol) < 256 && ana_fw_runs_setting(fw, pol)) snprintf(specs[n++], 256, "%s", pol);
  }
  sqlite3_finalize(st);
  return n;
}

void ana_recommend_fit(ana_db_t *db, FILE *out) {
  sqlite3_stmt *st = NULL;
  char tool[PATH_MAX];
  if (sqlite3_prepare_v2(db->h, "SELECT trace_id, path FROM traces ORDER BY trace_id", -1, &st, NULL) != SQLITE_OK) return;
  int have_tool = -1;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(st, 0);
    const char *path = (const char *)sqlite3_column_text(st, 1);
    char buf[8192], ins[8][PATH_MAX + 64], specs[MAX_SPECS][256], why[400] = "";
    const char *inputs = ana_trace_kv(db, id, "predicted.inputs", buf, sizeof buf), *inp[8], *sp[MAX_SPECS];
    if (!inputs || !*inputs) continue;
    if (have_tool < 0) have_tool = gm_tool_find(NULL, "GPUREC", "gpurec", "recorder", tool, sizeof tool, NULL);
    if (!have_tool) {
      fprintf(out, "%s: the largest value that fits: gpurec not found (set GPUREC)\n", path ? path : "?");
      continue;
    }
    /* the inputs as the header names them, beside the trace when not found as they are */
    int n = 0;
    for (const char *p = inputs; *p && n < 8;) {
      while (*p == ' ') p++;
      size_t len = strcspn(p, " ");
      if (!len) break;
      snprintf(ins[n], sizeof ins[n], "%.*s", (int)len, p);
      const char *slash = path ? strrchr(path, '/') : NULL, *at = strrchr(ins[n], '@');
      FILE *f = at ? fopen((ins[n][at - ins[n]] = 0, ins[n]), "rb") : NULL;
      if (at) ins[n][at - ins[n]] = '@';
      if (f) fclose(f);
      else if (slash && at) {
        char alt[sizeof ins[0]];
        const char *b = strrchr(ins[n], '/');
        int dl = (int)(slash - path) < 2048 ? (int)(slash - path) : 2048;
        if (snprintf(alt, sizeof alt, "%.*s/%.1024s", dl, path, b ? b + 1 : ins[n]) < (int)sizeof alt)
          memcpy(ins[n], alt, sizeof alt);
      }
      inp[n] = ins[n];
      n++;
      p += len;
    }
    int ns = trace_specs(db, id, specs);
    for (int i = 0; i < ns; i++) sp[i] = specs[i];
    fprintf(out, "%s: the largest value that fits (gpurec predict --fit over its %d recordings; per card: as run, and "
                 "the setting that fits the most when another does):\n", path ? path : "?", n);
    for (size_t g = 0; g < N_GPUS; g++) {
      json_t *o = run_fit(tool, inp, n, sp, ns, k_gpus[g].size, why, sizeof why);
      fprintf(out, "  %-11s", k_gpus[g].label);
      if (!o) {
        fprintf(out, " no answer: %s\n", why);
        continue;
      }
      /* the job's own setting (the first replayed: as it ran), and the setting that fits most */
      cell_t c0, cb;
      int best = -1;
      memset(&c0, 0, sizeof c0);
      fill(o, specs[0], &c0);
      for (int i = 1; i < ns; i++) {
        cell_t c;
        memset(&c, 0, sizeof c);
        fill(o, specs[i], &c);
        if (c.answered && c.largest > c0.largest && (best < 0 || c.largest > cb.largest)) best = i, cb = c;
      }
      fprintf(out, " as run (%s): %s", specs[0], c0.text);
      if (best >= 0) fprintf(out, "; %s: %s", specs[best], cb.text);
      fputc('\n', out);
      json_decref(o);
    }
  }
  sqlite3_finalize(st);
}
