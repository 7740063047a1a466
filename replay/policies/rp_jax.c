/* rp_jax.c: the `jax` policy: JAX's allocator settings in JAX's own words.
 *
 *   jax[:WORDS]   WORDS: XLA_PYTHON_CLIENT_PREALLOCATE=true|false|1|0,
 *                 XLA_PYTHON_CLIENT_MEM_FRACTION=F (or its newer name XLA_CLIENT_MEM_FRACTION),
 *                 XLA_PYTHON_CLIENT_ALLOCATOR=default|bfc|platform|cuda_async,
 *                 separated by commas or spaces, exactly as a user exports them.
 *
 * What each means, from jax's xla_bridge.py and XLA's pjrt/gpu (CreateBFCAllocator):
 * - default/bfc: tsl::BFCAllocator over the device with memory limit
 *   = (size_t)(total * fraction) rounded up to 2 MiB (measured: JAX 0.11's bytes_limit at four
 *   fractions; the stored XLA source multiplies without rounding), total being cuMemGetInfo's
 *   total (the trace's gpu_mem_info_total), fraction 0.75 unless set; allow_growth =
 *   !preallocate; the BFC
 *   options' other fields at their defaults (no garbage collection). That is the `prealloc`
 *   policy (rp_bfc.c, the BFC core) with size=F and growth.
 * - platform: every buffer straight from the driver (XLA maps each through the VMM API,
 *   rounded up to the 2 MiB granularity): the `direct` policy.
 * - cuda_async: cuMemAllocFromPoolAsync per buffer: the `async` policy (on the simulator the pool model's range).
 *   With preallocation XLA first takes and returns one pool of fraction * total, which the
 *   model does not do: refused, with the setting that is modelled.
 * The spec this policy reports is the user's words, so results and the report's paste line
 * read as JAX's documentation does. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "replay/policies/rp_policies.h"

#define JAX_GRANULARITY (2ull << 20) /* the VMM granularity XLA rounds its memory limit to */

typedef struct jax_conf {
  int preallocate;     /* XLA_PYTHON_CLIENT_PREALLOCATE, default true */
  double fraction;     /* 0: default 0.75 */
  char allocator[16];  /* default, bfc, platform, cuda_async */
} jax_conf_t;

static const char *const kKeys = "XLA_PYTHON_CLIENT_PREALLOCATE, XLA_PYTHON_CLIENT_MEM_FRACTION, "
                                 "XLA_CLIENT_MEM_FRACTION, XLA_PYTHON_CLIENT_ALLOCATOR";

static gm_status_t parse_item(const char *item, jax_conf_t *c, int *seen_fraction, gm_err_t *err) {
  const char *eq = strchr(item, '=');
  if (!eq)
    return gm_err_set(err, GM_ERR_INVAL, "jax: '%s' is not KEY=VALUE (keys: %s)", item, kKeys);
  size_t kl = (size_t)(eq - item);
  const char *v = eq + 1;
  if (kl == 29 && strncmp(item, "XLA_PYTHON_CLIENT_PREALLOCATE", kl) == 0) {
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) c->preallocate = 0;
    else if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) c->preallocate = 1;
    else
      return gm_err_set(err, GM_ERR_INVAL,
                        "jax: XLA_PYTHON_CLIENT_PREALLOCATE='%s' (accepted: true, false, 1, 0)", v);
    return GM_OK;
  }
  if ((kl == 30 && strncmp(item, "XLA_PYTHON_CLIENT_MEM_FRACTION", kl) == 0) ||
      (kl == 23 && strncmp(item, "XLA_CLIENT_MEM_FRACTION", kl) == 0)) {
    if ((*seen_fraction)++)
      return gm_err_set(err, GM_ERR_INVAL,
                        "jax: the memory fraction is set twice (XLA_PYTHON_CLIENT_MEM_FRACTION and "
                        "XLA_CLIENT_MEM_FRACTION are one setting; JAX refuses both)");
    char *end;
    double f = strtod(v, &end);
    if (end == v || *end || !(f > 0.0 && f <= 1.0))
      return gm_err_set(err, GM_ERR_INVAL, "jax: %.*s='%s' (accepted: a number in (0, 1])",
                        (int)kl, item, v);
    c->fraction = f;
    return GM_OK;
  }
  if (kl == 27 && strncmp(item, "XLA_PYTHON_CLIENT_ALLOCATOR", kl) == 0) {
    static const char *const ok[] = {"default", "bfc", "platform", "cuda_async"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
      if (strcasecmp(v, ok[i]) == 0) {
        snprintf(c->allocator, sizeof c->allocator, "%s", ok[i]);
        return GM_OK;
      }
    return gm_err_set(err, GM_ERR_INVAL,
                      "jax: XLA_PYTHON_CLIENT_ALLOCATOR='%s' (accepted: default, bfc, platform, "
                      "cuda_async)", v);
  }
  return gm_err_set(err, GM_ERR_INVAL, "jax: unknown key '%.*s' (known: %s)", (int)kl, item, kKeys);
}

static gm_status_t parse(const char *conf, jax_conf_t *c, gm_err_t *err) {
  memset(c, 0, sizeof *c);
  c->preallocate = 1;
  snprintf(c->allocator, sizeof c->allocator, "default");
  int seen_fraction = 0;
  const char *p = conf;
  while (*p) {
    while (*p == ',' || isspace((unsigned char)*p)) p++;
    if (!*p) break;
    size_t n = strcspn(p, ", \t\n");
    char item[128];
    if (n >= sizeof item)
      return gm_err_set(err, GM_ERR_INVAL, "jax: setting '%.40s...' is longer than %zu bytes", p,
                        sizeof item - 1);
    memcpy(item, p, n);
    item[n] = '\0';
    gm_status_t st = parse_item(item, c, &seen_fraction, err);
    if (st < 0) return st;
    p += n;
  }
  return GM_OK;
}

static gm_status_t jax_create(const char *conf, const rp_driver_t *drv, rp_policy_t **out, gm_err_t *err) {
  jax_conf_t c;
  gm_status_t st = parse(conf, &c, err);
  if (st < 0) return st;
  char inner[96];
  if (!strcmp(c.allocator, "platform")) {
    snprintf(inner, sizeof inner, "direct:round=2MiB");
  } else if (!strcmp(c.allocator, "cuda_async")) {
    if (c.preallocate)
      return gm_err_set(err, GM_ERR_INVAL,
                        "jax: XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async with preallocation (XLA's "
                        "first pool-sized block) is not modelled; add XLA_PYTHON_CLIENT_PREALLOCATE=false");
    snprintf(inner, sizeof inner, "async");
  } else {
    /* XLA's limit is total * fraction rounded up to the 2 MiB granularity: JAX's own
     * bytes_limit on an H100 (85017493504 bytes) was 63763906560 at 0.75, 42509271040 at 0.5
     * and 12752781312 at 0.15, each (size_t)(total * F) rounded up to 2 MiB. */
    double f = c.fraction > 0 ? c.fraction : 0.75;
    uint64_t limit = (uint64_t)(f * (double)drv->total_memory);
    limit = (limit + JAX_GRANULARITY - 1) / JAX_GRANULARITY * JAX_GRANULARITY;
    snprintf(inner, sizeof inner, "prealloc:size=%" PRIu64 "%s", limit, c.preallocate ? "" : ",growth");
  }
  const rp_policy_ops_t *ops;
  rp_policy_t *in;
  st = rp_policy_create(inner, drv, &ops, &in, err);
  if (st < 0) return gm_err_wrap(err, "jax");
  return rp_wrap_new("jax", conf, ops, in, out, err);
}

const rp_policy_ops_t rp_jax_ops = {
    .name = "jax",
    .description = "JAX/XLA in JAX's words (jax:XLA_PYTHON_CLIENT_PREALLOCATE=false,"
                   "XLA_PYTHON_CLIENT_MEM_FRACTION=.5,XLA_PYTHON_CLIENT_ALLOCATOR=platform)",
    .create = jax_create,
    RP_WRAP_FORWARD,
};
