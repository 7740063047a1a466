/* pred_job.c: are two recordings' command lines one job at two values?
 *
 * Users write the value where their script wants it: a positional argument (`scale.py 8`), an
 * option (`--bs=8`, `--batch 8`), glued to a word (`b8`) or in an output folder (`runs/bs8/`,
 * `out/rb8`), often twice in one command. So the value is masked wherever it stands as a whole
 * number: a maximal run of digits (and decimal points) equal to the value's text, whatever
 * letters or punctuation surround it (`128` is not `8`, `0.8` is not `8`). Commands equal once
 * masked are one job. Commands that still differ (a seed, a log name, a flag) are not refused:
 * a different script or module is another job (an error), anything else is a warning and the
 * allocation alignment decides (`--same-job` silences it). */
#include <stdio.h>
#include <string.h>

#include "recorder/predict/pred_check.h"

/* A recording's value as the messages and command lines print it. */
void pred_value_text(double v, char *buf, size_t n) { snprintf(buf, n, "%.15g", v); }

static int numch(char c) { return (c >= '0' && c <= '9') || c == '.'; }

int pred_mask_command(const char *cmd, double value, char *out, size_t n) {
  char vt[64];
  pred_value_text(value, vt, sizeof vt);
  size_t vl = strlen(vt), o = 0;
  int masked = 0;
  if (n) out[0] = 0;
  for (const char *p = cmd; *p;) {
    if (!numch(*p)) {
      if (o + 1 < n) out[o++] = *p;
      p++;
      continue;
    }
    size_t l = 0;
    while (numch(p[l])) l++;
    size_t run = l;
    while (run > 0 && p[run - 1] == '.') run--; /* "8." ends a sentence or a path "rb8.log" */
    int hit = run == vl && memcmp(p, vt, vl) == 0;
    const char *put = hit ? "{}" : p;
    size_t pl = hit ? 2 : run;
    for (size_t i = 0; i < pl && o + 1 < n; i++) out[o++] = put[i];
    masked |= hit;
    p += run ? run : 1;
    if (!run && o + 1 < n) out[o++] = '.';
  }
  if (n) out[o < n ? o : n - 1] = 0;
  return masked;
}

/* One whitespace-separated token of s from *p into buf; 0 at the end. */
static int next_tok(const char **p, char *buf, size_t n) {
  const char *s = *p;
  while (*s == ' ' || *s == '\t') s++;
  if (!*s) return 0;
  size_t l = 0;
  while (s[l] && s[l] != ' ' && s[l] != '\t') l++;
  snprintf(buf, n, "%.*s", (int)l, s);
  *p = s + l;
  return 1;
}

static const char *base(const char *t) {
  const char *b = strrchr(t, '/');
  return b ? b + 1 : t;
}

void pred_job_identity(const char *cmd, char *out, size_t n) {
  char t[1024], prog[256];
  const char *p = cmd;
  if (!next_tok(&p, t, sizeof t)) {
    snprintf(out, n, "%s", "");
    return;
  }
  snprintf(prog, sizeof prog, "%.200s", base(t));
  /* python, python3, python3.11: one interpreter for this purpose */
  if (strncmp(prog, "python", 6) == 0) snprintf(prog, sizeof prog, "python");
  /* the script or module: after -m, or the first token that names a script; for a launcher
   * (torchrun, accelerate launch, deepspeed) its own script is what runs the job */
  int m = 0;
  while (next_tok(&p, t, sizeof t)) {
    if (m) {
      snprintf(out, n, "%s -m %s", prog, t);
      return;
    }
    if (strcmp(t, "-m") == 0) {
      m = 1;
      continue;
    }
    if (strcmp(t, "-c") == 0) {
      snprintf(out, n, "%s -c", prog);
      return;
    }
    size_t l = strlen(t);
    if ((l > 3 && strcmp(t + l - 3, ".py") == 0) || (l > 3 && strcmp(t + l - 3, ".sh") == 0)) {
      snprintf(out, n, "%s %s", prog, base(t));
      return;
    }
  }
  snprintf(out, n, "%s", prog);
}

gm_status_t pred_job_compare(const char *an, const char *ca, double va, const char *bn, const char *cb, double vb,
                             char *warn, size_t wn, gm_err_t *err) {
  char ma[2048], mb[2048], ia[512], ib[512];
  pred_mask_command(ca, va, ma, sizeof ma);
  pred_mask_command(cb, vb, mb, sizeof mb);
  if (strcmp(ma, mb) == 0) return GM_OK;
  pred_job_identity(ca, ia, sizeof ia);
  pred_job_identity(cb, ib, sizeof ib);
  if (strcmp(ia, ib) != 0)
    return gm_err_set(err, GM_ERR_INVAL, "different jobs: '%s' ran '%s' and '%s' ran '%s' (another script or module)", an, ca,
                      bn, cb);
  if (warn && wn && !*warn)
    snprintf(warn, wn,
             "'%s' ran '%.300s' and '%s' ran '%.300s': the commands differ beyond the value; taken as one job, the "
             "allocations decide (--same-job says so and silences this)",
             an, ca, bn, cb);
  return GM_OK;
}
