/* rp_conf.c: parse a policy conf string ("growth,limit=8GiB") against a per-policy key
 * table. The table is the single list of what a policy accepts, so the error message for an
 * unknown key lists exactly the known ones. */
#include "replay/policies/rp_conf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITEM_MAX 256

static int all_numeric(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!isdigit((unsigned char)*s) && *s != '.') return 0;
  return 1;
}

gm_status_t rp_amount_parse(const char *s, rp_amount_t *out, gm_err_t *err) {
  memset(out, 0, sizeof *out);
  if (all_numeric(s)) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (*end != '\0') return gm_err_set(err, GM_ERR_INVAL, "not a number '%s'", s);
    if (v <= 0) return gm_err_set(err, GM_ERR_INVAL, "must be > 0, got '%s'", s);
    if (v <= 1.0) {
      out->set = 1;
      out->is_fraction = 1;
      out->fraction = v;
      return GM_OK;
    }
    if (strchr(s, '.')) return gm_err_set(err, GM_ERR_INVAL, "'%s' is neither a fraction in (0, 1] nor a size", s);
  }
  uint64_t b = 0;
  gm_status_t st = gm_parse_size(s, &b, err);
  if (st < 0) return st;
  if (b == 0) return gm_err_set(err, GM_ERR_INVAL, "must be > 0, got '%s'", s);
  out->set = 1;
  out->bytes = b;
  return GM_OK;
}

uint64_t rp_amount_bytes(const rp_amount_t *a, uint64_t total) {
  if (!a->is_fraction) return a->bytes;
  return (uint64_t)(a->fraction * (double)total);
}

static gm_status_t parse_bool(const char *v, int *out, gm_err_t *err) {
  static const char *const yes[] = {"1", "true", "True", "TRUE", "yes"};
  static const char *const no[] = {"0", "false", "False", "FALSE", "no"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcmp(v, yes[i]) == 0) return *out = 1, GM_OK;
    if (strcmp(v, no[i]) == 0) return *out = 0, GM_OK;
  }
  return gm_err_set(err, GM_ERR_INVAL, "expected true or false, got '%s'", v);
}

static gm_status_t set_value(const rp_conf_key_t *k, const char *v, void *cfg, gm_err_t *err) {
  char *field = (char *)cfg + k->offset;
  switch (k->kind) {
    case RP_CONF_FLAG:
      if (!v) return *(int *)field = 1, GM_OK;
      return parse_bool(v, (int *)field, err);
    case RP_CONF_BOOL:
      if (!v) return gm_err_set(err, GM_ERR_INVAL, "needs a value (true or false)");
      return parse_bool(v, (int *)field, err);
    case RP_CONF_SIZE:
      if (!v) return gm_err_set(err, GM_ERR_INVAL, "needs a size");
      return gm_parse_size(v, (uint64_t *)field, err);
    case RP_CONF_FRACTION: {
      if (!v) return gm_err_set(err, GM_ERR_INVAL, "needs a fraction");
      double d = 0;
      gm_status_t st = gm_parse_fraction(v, &d, err);
      if (st < 0) return st;
      if (d <= 0) return gm_err_set(err, GM_ERR_INVAL, "must be > 0, got '%s'", v);
      *(double *)field = d;
      return GM_OK;
    }
    case RP_CONF_AMOUNT:
      if (!v) return gm_err_set(err, GM_ERR_INVAL, "needs a size or a fraction");
      return rp_amount_parse(v, (rp_amount_t *)field, err);
    case RP_CONF_STRING:
      if (!v || !*v) return gm_err_set(err, GM_ERR_INVAL, "needs a value");
      if (strlen(v) >= RP_CONF_STR_MAX) return gm_err_set(err, GM_ERR_INVAL, "value too long: '%.40s...'", v);
      memcpy(field, v, strlen(v) + 1); /* fits: checked above */
      return GM_OK;
  }
  return gm_err_set(err, GM_ERR_INVAL, "internal: unknown kind");
}

static void known_list(const rp_conf_key_t *keys, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (const rp_conf_key_t *k = keys; k->name && used < n; k++) {
    int w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", k->name);
    if (w < 0) break;
    used += (size_t)w;
  }
  if (!keys[0].name) snprintf(buf, n, "none");
}

static void trim(char *s) {
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
  size_t lead = strspn(s, " \t\n");
  if (lead) memmove(s, s + lead, n - lead + 1);
}

gm_status_t rp_conf_parse(const char *policy, const char *conf, const rp_conf_key_t *keys,
                          const char *bare_key, void *cfg, gm_err_t *err) {
  const char *p = conf ? conf : "";
  while (*p) {
    size_t len = strcspn(p, ",");
    char item[ITEM_MAX];
    if (len >= sizeof item)
      return gm_err_set(err, GM_ERR_INVAL, "%s: conf item '%.40s...' has %zu bytes, more than %d (limit ITEM_MAX)",
                        policy, p, len, ITEM_MAX - 1);
    memcpy(item, p, len);
    item[len] = '\0';
    p += len;
    if (*p == ',') p++;
    trim(item);
    if (!item[0]) continue; /* "a,,b" and a trailing comma are harmless */
    char *sep = item + strcspn(item, "=:");
    const char *key = item, *val = NULL;
    if (*sep) {
      *sep = '\0';
      val = sep + 1;
      trim(item);
    } else if (bare_key && (isdigit((unsigned char)item[0]) || item[0] == '.')) {
      key = bare_key;
      val = item;
    }
    const rp_conf_key_t *k = keys;
    while (k->name && strcmp(k->name, key) != 0) k++;
    if (!k->name) {
      char known[256];
      known_list(keys, known, sizeof known);
      return gm_err_set(err, GM_ERR_INVAL, "%s: unknown key '%s' (known: %s)", policy, key, known);
    }
    char value[ITEM_MAX];
    if (val) {
      snprintf(value, sizeof value, "%s", val);
      trim(value);
    }
    gm_status_t st = set_value(k, val ? value : NULL, cfg, err);
    if (st < 0) return gm_err_wrap(err, "%s: bad value for '%s'", policy, k->name);
  }
  return GM_OK;
}
