/* gm_opts.c: one option table per tool drives both the parser and --help, so the two
 * cannot disagree. */
#include "base/gm_base.h"

#include <string.h>

static const gm_opt_t *find_long(const gm_opt_t *opts, const char *name, size_t len) {
  for (const gm_opt_t *o = opts; o->name; o++)
    if (strlen(o->name) == len && memcmp(o->name, name, len) == 0) return o;
  return NULL;
}

static const gm_opt_t *find_short(const gm_opt_t *opts, char c) {
  for (const gm_opt_t *o = opts; o->name; o++)
    if (o->short_name && o->short_name == c) return o;
  return NULL;
}

/* "unknown option '--sweeep' (did you mean '--sweep'?)" */
static gm_status_t unknown_long(const gm_opt_t *opts, const char *name, size_t len, gm_err_t *err) {
  const char *names[GM_STRLIST_MAX];
  size_t n = 0;
  for (const gm_opt_t *o = opts; o->name && n < GM_STRLIST_MAX; o++) names[n++] = o->name;
  char word[64];
  snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), name);
  const char *near = gm_closest(word, names, n);
  if (near) return gm_err_set(err, GM_ERR_INVAL, "unknown option '--%.*s' (did you mean '--%s'?)", (int)len, name, near);
  return gm_err_set(err, GM_ERR_INVAL, "unknown option '--%.*s'", (int)len, name);
}

static gm_status_t store(const gm_opt_t *o, const char *val, void *cfg, gm_err_t *err) {
  char *field = (char *)cfg + o->offset;
  gm_status_t s = GM_OK;
  switch (o->kind) {
    case GM_OPT_FLAG: *(int *)field = 1; return GM_OK;
    case GM_OPT_STR: *(const char **)field = val; return GM_OK;
    case GM_OPT_SIZE: s = gm_parse_size(val, (uint64_t *)field, err); break;
    case GM_OPT_U64: s = gm_parse_u64(val, (uint64_t *)field, err); break;
    case GM_OPT_FRACTION: s = gm_parse_fraction(val, (double *)field, err); break;
    case GM_OPT_LIST: {
      gm_strlist_t *l = (gm_strlist_t *)field;
      if (l->n >= GM_STRLIST_MAX)
        return gm_err_set(err, GM_ERR_INVAL, "--%s given more than %d times", o->name, GM_STRLIST_MAX);
      l->v[l->n++] = val;
      return GM_OK;
    }
  }
  if (s < 0) return gm_err_wrap(err, "--%s", o->name);
  if (o->max && (o->kind == GM_OPT_SIZE || o->kind == GM_OPT_U64)) {
    uint64_t v = *(uint64_t *)field;
    if (v < o->min || v > o->max) {
      char lo[32], hi[32];
      if (o->kind == GM_OPT_SIZE) {
        gm_format_size(o->min, lo, sizeof lo);
        gm_format_size(o->max, hi, sizeof hi);
      } else {
        snprintf(lo, sizeof lo, "%llu", (unsigned long long)o->min);
        snprintf(hi, sizeof hi, "%llu", (unsigned long long)o->max);
      }
      return gm_err_set(err, GM_ERR_INVAL, "--%s=%s: out of range (accepted: %s to %s)", o->name, val, lo, hi);
    }
  }
  return s;
}

gm_status_t gm_opts_parse(const gm_opt_t *opts, int argc, char **argv, void *cfg, char **pos,
                          int *npos, int stop_at_positional, gm_err_t *err) {
  *npos = 0;
  for (int i = 1; i < argc; i++) {
    char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      while (++i < argc) pos[(*npos)++] = argv[i];
      break;
    }
    if (a[0] != '-' || a[1] == '\0') {
      pos[(*npos)++] = a;
      if (stop_at_positional) {
        while (++i < argc) pos[(*npos)++] = argv[i];
        break;
      }
      continue;
    }
    const gm_opt_t *o;
    const char *val = NULL;
    if (a[1] == '-') {
      const char *name = a + 2, *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      o = find_long(opts, name, len);
      if (!o) return unknown_long(opts, name, len, err);
      if (eq) {
        if (o->kind == GM_OPT_FLAG)
          return gm_err_set(err, GM_ERR_INVAL, "option '--%s' takes no value", o->name);
        val = eq + 1;
      }
    } else {
      o = find_short(opts, a[1]);
      if (!o) return gm_err_set(err, GM_ERR_INVAL, "unknown option '-%c'", a[1]);
      if (a[2]) {
        if (o->kind == GM_OPT_FLAG)
          return gm_err_set(err, GM_ERR_INVAL, "option '-%c' takes no value", a[1]);
        val = a + 2;
      }
    }
    if (o->kind != GM_OPT_FLAG && !val) {
      if (i + 1 >= argc) return gm_err_set(err, GM_ERR_INVAL, "option '--%s' needs a value", o->name);
      val = argv[++i];
    }
    gm_status_t s = store(o, val, cfg, err);
    if (s < 0) return s;
  }
  return GM_OK;
}

void gm_opts_help(FILE *f, const char *usage, const char *description, const gm_opt_t *opts) {
  fprintf(f, "usage: %s\n\n%s\n\noptions:\n", usage, description);
  for (const gm_opt_t *o = opts; o->name; o++) {
    char left[64];
    int n = o->short_name ? snprintf(left, sizeof left, "-%c, --%s", o->short_name, o->name)
                          : snprintf(left, sizeof left, "    --%s", o->name);
    if (o->kind != GM_OPT_FLAG && n > 0 && (size_t)n < sizeof left)
      snprintf(left + n, sizeof left - (size_t)n, "=%s", o->metavar ? o->metavar : "VALUE");
    fprintf(f, "  %-28s %s%s\n", left, o->help, o->kind == GM_OPT_LIST ? " (repeatable)" : "");
  }
}
