/* pred_settings.c: whether a prediction's uncertain sizes matter to a setting.
 *
 * The prediction refuses (pred_judge.c) when allocations of unknown size hold more than 1 % of the
 * predicted peak at some moment: a wrong size can move the peak reserved by about itself. But
 * whether it does depends on the setting: under the default a 200 MiB buffer of the wrong size
 * usually lands in a segment that the other tensors shape anyway, under max_split_size_mb:128
 * it is a segment of its own. The check asks each setting: the predicted trace is written
 * three times (every uncertain size fitted, at the low end and at the high end of its
 * plausible range: pred.h, pred_model_write_variant), gpureplay replays the three under every
 * setting, and a setting is answered when the three peaks reserved lie within the tolerance
 * of the fitted one (the range is part of the answer), refused otherwise. Allocations made in
 * only some recordings at the peak are not checkable (whether the job makes them is what is
 * not known): pred.c does not offer those, but for a drift that a third recording spans
 * (pred_judge.c, pred_drift_spanned: the reference's own, made at the target as there).
 *
 * Workload: three replays of a trace per setting; the traces are written to gpureplay's
 * private folder (pred_replay.c) and replaced at the next check. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/predict/pred_settings.h"

gm_status_t pred_settings_check(pred_rp_t *rp, pred_model_t *m, const pred_opts_t *o, pred_result_t *res,
                           const char *const *specs, int n, const pred_rp_opts_t *ro, double tolerance,
                           pred_setting_t *out, gm_err_t *err) {
  static const pred_variant_t variants[3] = {PRED_SIZES_FITTED, PRED_SIZES_LOW, PRED_SIZES_HIGH};
  static const char *const files[3] = {"check.fitted.zst", "check.low.zst", "check.high.zst"};
  static const char *const names[3] = {"the prediction", "the prediction (uncertain sizes low)",
                                       "the prediction (uncertain sizes high)"};
  pred_rp_result_t r[3][PRED_RP_MAX_SPECS];
  if (n > PRED_RP_MAX_SPECS) return gm_err_set(err, GM_ERR_INVAL, "at most %d settings", PRED_RP_MAX_SPECS);
  pred_rp_opts_t u = *ro;
  u.capacity = 0;
  for (int v = 0; v < 3; v++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", pred_rp_path(rp, files[v]));
    gm_status_t st = pred_model_write_variant(m, o, variants[v], path, res, err);
    if (st == GM_OK) st = pred_rp_replay(rp, path, names[v], &u, specs, n, r[v], err);
    unlink(path);
    if (st < 0) return st;
  }
  for (int i = 0; i < n; i++) {
    pred_setting_t *c = &out[i];
    c->peak_fitted = r[0][i].peak_reserved_bytes;
    c->peak_low = r[1][i].peak_reserved_bytes;
    c->peak_high = r[2][i].peak_reserved_bytes;
    c->lo = c->hi = c->peak_fitted;
    for (int v = 1; v < 3; v++) {
      uint64_t p = r[v][i].peak_reserved_bytes;
      if (p < c->lo) c->lo = p;
      if (p > c->hi) c->hi = p;
    }
    uint64_t dlo = c->peak_fitted - c->lo, dhi = c->hi - c->peak_fitted, d = dlo > dhi ? dlo : dhi;
    c->move = c->peak_fitted ? (double)d / (double)c->peak_fitted : 0;
    /* under a cap (a preallocated pool, a memory fraction) the peak reserved is the cap whatever
     * the sizes: what the ends must agree on is that the job fits */
    c->answered = r[0][i].ooms == 0 && r[1][i].ooms == 0 && r[2][i].ooms == 0 && c->move <= tolerance;
  }
  return GM_OK;
}

void pred_settings_note(const char *const *specs, const pred_setting_t *cs, int n, double tolerance, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < n && o < len; i++) {
    char b1[32], b2[32];
    o += (size_t)snprintf(buf + o, len - o, "%s%s=%s %s..%s (uncertain sizes move it by %.2f %%%s)", i ? "; " : "",
                          specs[i], cs[i].answered ? "answered" : "refused", gm_format_size(cs[i].lo, b1, sizeof b1),
                          gm_format_size(cs[i].hi, b2, sizeof b2), 100 * cs[i].move,
                          cs[i].answered       ? ""
                          : cs[i].move <= tolerance ? ", but an end runs out of memory"
                          : tolerance < 0.1         ? ", over the tolerance"
                                                    : "");
  }
}

/* One line per setting: answered or not, the fitted peak reserved and the range the uncertain
 * sizes' ends give it (formatted, then to the byte: the range a refused setting's real peak is
 * expected in, which tests/gpu/predict_table.py holds against the real runs). */
static void print_settings(const char *const *list, const pred_setting_t *cs, int n) {
  for (int i = 0; i < n; i++) {
    char b1[32], b2[32], b3[32];
    fprintf(stderr,
            "gpurec:   %-8s %s: peak reserved %s (%s..%s with the uncertain sizes at their ends, %.2f %%; %llu in "
            "%llu..%llu bytes)\n",
            cs[i].answered ? "answered" : "REFUSED", list[i], gm_format_size(cs[i].peak_fitted, b1, sizeof b1),
            gm_format_size(cs[i].lo, b2, sizeof b2), gm_format_size(cs[i].hi, b3, sizeof b3), 100 * cs[i].move,
            (unsigned long long)cs[i].peak_fitted, (unsigned long long)cs[i].lo, (unsigned long long)cs[i].hi);
  }
}

void pred_settings_own(char **list, int *n, const gmt_header_t *h) {
  unsigned fw = gmt_framework_single(gmt_header_frameworks(h));
  if (fw != GMT_FW_PYTORCH) return; /* the other frameworks' grids are their own settings */
  const char *key = gmt_framework_key(fw);
  size_t kl = strlen(key);
  int m = 0;
  for (int i = 0; i < *n; i++) {
    if (strncmp(list[i], key, kl) == 0 && (list[i][kl] == 0 || list[i][kl] == ':')) list[m++] = list[i];
    else free(list[i]);
  }
  *n = m;
}

int pred_settings_write(pred_model_t *m, const pred_input_t *in, pred_opts_t *o, pred_result_t *res,
                    const char *const *specs, int n_specs, double tolerance, const char *out_path, int quiet) {
  gm_err_t err;
  gm_err_clear(&err);
  char tool[PATH_MAX];
  const char *from = NULL;
  if (!pred_rp_find(tool, sizeof tool, &from)) {
    fprintf(stderr, "gpurec: cannot predict at %.15g: %s\ngpurec: %s\n", o->target, res->reason, res->advice);
    fprintf(stderr, "gpurec: (gpureplay, which would check per setting whether these sizes matter, was not found: "
                    "install it beside gpurec or set GPUREPLAY)\n");
    return 3;
  }
  pred_rp_t *rp = NULL;
  char **list = NULL;
  int n = 0, rc = 0;
  gm_status_t st = pred_rp_open(tool, &rp, &err);
  if (st == GM_OK) st = pred_rp_list(rp, in[0].path, specs, n_specs, 0, &list, &n, &err);
  if (st == GM_OK && !n_specs) pred_settings_own(list, &n, pred_model_recording_header(m, 0));
  if (st == GM_ERR_INVAL) {
    fprintf(stderr, "gpurec: error: %s\ntry 'gpurec predict --help'\n", err.msg);
    rc = 2;
  } else if (st == GM_OK && n > PRED_RP_MAX_SPECS) {
    st = gm_err_set(&err, GM_ERR_INVAL, "gpureplay lists %d settings, more than the %d the check takes", n, PRED_RP_MAX_SPECS);
  }
  pred_setting_t cs[PRED_RP_MAX_SPECS];
  pred_rp_opts_t ro = {0, 0, 1};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  ro.jobs = ncpu > 0 ? (int)ncpu : 1;
  if (!rc && st == GM_OK) st = pred_settings_check(rp, m, o, res, (const char *const *)list, n, &ro, tolerance, cs, &err);
  if (!rc && st < 0) {
    fprintf(stderr, "gpurec: error: cannot check the prediction per setting: %s\n", err.msg);
    rc = 1;
  }
  int answered = 0;
  for (int i = 0; !rc && i < n; i++) answered += cs[i].answered;
  char note[8192];
  if (!rc) pred_settings_note((const char *const *)list, cs, n, tolerance, note, sizeof note);
  if (!rc && !answered) {
    fprintf(stderr, "gpurec: cannot predict at %.15g: %s\ngpurec: %s\n", o->target, res->reason, res->advice);
    fprintf(stderr, "gpurec: checked per setting, the uncertain sizes move every setting's peak reserved by more than "
                    "%.2g %% or make it run out of memory: %s\n", 100 * tolerance, note);
    print_settings((const char *const *)list, cs, n); /* each refused setting's range, to the byte */
    rc = 3;
  }
  if (!rc) {
    o->settings_note = note;
    st = pred_model_write(m, o, out_path, res, &err);
    o->settings_note = NULL;
    if (st < 0) {
      fprintf(stderr, "gpurec: error: cannot predict: %s\n", err.msg);
      rc = 1;
    }
  }
  if (!rc && !quiet) {
    fprintf(stderr, "gpurec: predicted %s at %.15g, answered for %d of %d settings: %s; replayed with those sizes at "
                    "both ends of their plausible range, per setting (answered: within %.2g %%):\n",
            out_path, o->target, answered, n, res->reason, 100 * tolerance);
    print_settings((const char *const *)list, cs, n);
    fprintf(stderr, "gpurec: replay it only under the answered settings (the header's predicted.settings says which)\n");
    if (answered < n && res->advice[0]) /* a refusal names the recording to add */
      fprintf(stderr, "gpurec: to answer the refused settings too: %s\n", res->advice);
  }
  pred_rp_free_list(list, n);
  pred_rp_close(rp);
  return rc;
}
