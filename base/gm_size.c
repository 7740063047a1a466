/* gm_size.c: sizes ("1.5GiB") and fractions ("0.75") as users write them on command lines
 * and in PYTORCH_CUDA_ALLOC_CONF-like specs. */
#include "base/gm_base.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
  const char *suffix;
  uint64_t mult;
} kSuffixes[] = {
    {"", 1},
    {"b", 1},
    {"k", 1ull << 10},   {"kib", 1ull << 10}, {"kb", 1000ull},
    {"m", 1ull << 20},   {"mib", 1ull << 20}, {"mb", 1000000ull},
    {"g", 1ull << 30},   {"gib", 1ull << 30}, {"gb", 1000000000ull},
    {"t", 1ull << 40},   {"tib", 1ull << 40}, {"tb", 1000000000000ull},
};

gm_status_t gm_parse_u64(const char *s, uint64_t *out, gm_err_t *err) {
  if (!s || !isdigit((unsigned char)s[0]))
    return gm_err_set(err, GM_ERR_INVAL, "'%s' is not a non-negative integer", s ? s : "");
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno == ERANGE) return gm_err_set(err, GM_ERR_INVAL, "'%s' is too large", s);
  if (*end) return gm_err_set(err, GM_ERR_INVAL, "'%s' is not a non-negative integer", s);
  *out = v;
  return GM_OK;
}

gm_status_t gm_parse_size(const char *s, uint64_t *out, gm_err_t *err) {
  if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '.' && isdigit((unsigned char)s[1]))))
    return gm_err_set(err, GM_ERR_INVAL, "'%s' is not a size (examples: 512, 20MiB, 1.5GiB)",
                      s ? s : "");
  const char *p = s;
  uint64_t whole = 0;
  while (isdigit((unsigned char)*p)) {
    if (whole > (UINT64_MAX - 9) / 10) return gm_err_set(err, GM_ERR_INVAL, "size '%s' is too large", s);
    whole = whole * 10 + (uint64_t)(*p++ - '0');
  }
  double frac = 0.0, scale = 0.1;
  int has_frac = 0;
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p)) {
      frac += (*p++ - '0') * scale;
      scale /= 10;
      has_frac = 1;
    }
  }
  while (*p == ' ') p++;
  for (size_t i = 0; i < sizeof kSuffixes / sizeof kSuffixes[0]; i++) {
    if (strcasecmp(p, kSuffixes[i].suffix) != 0) continue;
    uint64_t m = kSuffixes[i].mult;
    if (whole > UINT64_MAX / m) return gm_err_set(err, GM_ERR_INVAL, "size '%s' is too large", s);
    uint64_t v = whole * m;
    if (has_frac) {
      double f = frac * (double)m;
      if (m == 1 && f != 0.0)
        return gm_err_set(err, GM_ERR_INVAL, "size '%s' is not a whole number of bytes", s);
      v += (uint64_t)llround(f);
    }
    *out = v;
    return GM_OK;
  }
  return gm_err_set(err, GM_ERR_INVAL, "'%s' has an unknown unit (use B, KiB, MiB, GiB, TiB)", s);
}

gm_status_t gm_parse_fraction(const char *s, double *out, gm_err_t *err) {
  if (!s || !*s) return gm_err_set(err, GM_ERR_INVAL, "empty fraction");
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !(v >= 0.0 && v <= 1.0))
    return gm_err_set(err, GM_ERR_INVAL, "'%s' is not a fraction in [0, 1]", s);
  *out = v;
  return GM_OK;
}

char *gm_format_size(uint64_t bytes, char *buf, size_t n) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) {
    snprintf(buf, n, "%llu B", (unsigned long long)bytes);
    return buf;
  }
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, n, "%.2f %s", v, units[u]);
  return buf;
}

uint64_t gm_advice_floor(uint64_t default_reserved) {
  const uint64_t floor_bytes = 64ull << 20;
  uint64_t pct = (uint64_t)((double)default_reserved / 100.0);
  return pct > floor_bytes ? pct : floor_bytes;
}
