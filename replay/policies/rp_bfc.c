/* rp_bfc.c: the `bfc` (TensorFlow) and `prealloc` (JAX/XLA) policies: conf parsing and the
 * rp_policy_ops_t glue around the BFC core (rp_bfc_core.c holds the allocator rules).
 *
 * bfc[:CONF]  keys: growth (TF allow_growth / TF_FORCE_GPU_ALLOW_GROWTH=true),
 *   prealloc=FRACTION (per_process_gpu_memory_fraction: one region of FRACTION * total),
 *   limit=SIZE|FRACTION (the memory limit, e.g. a logical device's memory_limit),
 *   garbage_collection=BOOL (TF_ENABLE_GPU_GARBAGE_COLLECTION, default true),
 *   fragmentation_fraction=FRACTION (Options::fragmentation_fraction; default 0 = 128 MiB),
 *   sub_allocator=device|vmm (device: DeviceMemAllocator, what TF and XLA run; vmm: TF's
 *   compiled-out GpuVirtualMemAllocator, rp_bfc_vmm.h, for what-if replays).
 *   Without growth, the whole limit is one region taken at the first request; the default
 *   limit is rp_bfc_tf_default_limit(total).
 * prealloc[:SIZE|FRACTION]  XLA's GPU client: BFC with memory_limit = FRACTION * total (or
 *   SIZE), default 0.75 (XLA_PYTHON_CLIENT_MEM_FRACTION), allow_growth = !preallocate, no
 *   garbage collection (XLA leaves Options::garbage_collection at false). Keys: size (the
 *   bare value), growth (XLA_PYTHON_CLIENT_PREALLOCATE=false).
 * Both take the region at the first request, as TF and XLA do (lazily, in Extend).
 * empty_cache is a no-op: neither framework has a call that returns BFC regions. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/policies/rp_bfc_core.h"
#include "replay/policies/rp_conf.h"
#include "replay/policies/rp_policies.h"

typedef struct bfc_policy {
  rp_bfc_t *core;
  char spec[256];
} bfc_policy_t;

typedef struct bfc_conf {
  int growth;
  double prealloc;
  rp_amount_t limit;
  int garbage_collection;
  double fragmentation_fraction;
  char sub_allocator[RP_CONF_STR_MAX];
} bfc_conf_t;

static const rp_conf_key_t bfc_keys[] = {
    {"growth", RP_CONF_FLAG, offsetof(bfc_conf_t, growth)},
    {"prealloc", RP_CONF_FRACTION, offsetof(bfc_conf_t, prealloc)},
    {"limit", RP_CONF_AMOUNT, offsetof(bfc_conf_t, limit)},
    {"garbage_collection", RP_CONF_BOOL, offsetof(bfc_conf_t, garbage_collection)},
    {"fragmentation_fraction", RP_CONF_FRACTION, offsetof(bfc_conf_t, fragmentation_fraction)},
    {"sub_allocator", RP_CONF_STRING, offsetof(bfc_conf_t, sub_allocator)},
    {NULL, RP_CONF_FLAG, 0},
};

typedef struct prealloc_conf {
  rp_amount_t size;
  int growth;
} prealloc_conf_t;

static const rp_conf_key_t prealloc_keys[] = {
    {"size", RP_CONF_AMOUNT, offsetof(prealloc_conf_t, size)},
    {"growth", RP_CONF_FLAG, offsetof(prealloc_conf_t, growth)},
    {NULL, RP_CONF_FLAG, 0},
};

uint64_t rp_bfc_tf_default_limit(uint64_t total) {
  uint64_t reserve = total < (2ull << 30) ? (225ull << 20) : (1800ull << 20);
  return total > reserve ? total - reserve : total;
}

static void make_spec(char *buf, size_t n, const char *name, const char *conf) {
  if (conf && *conf)
    snprintf(buf, n, "%s:%s", name, conf);
  else
    snprintf(buf, n, "%s", name);
}

static gm_status_t wrap_new(const char *name, const char *conf, const rp_driver_t *drv,
                            const rp_bfc_opts_t *o, rp_policy_t **out, gm_err_t *err) {
  if (o->memory_limit < RP_BFC_MIN_ALLOC)
    return gm_err_set(err, GM_ERR_INVAL, "%s: memory limit of %" PRIu64 " bytes is too small", name, o->memory_limit);
  bfc_policy_t *p = calloc(1, sizeof *p);
  if (!p) return gm_err_set(err, GM_ERR_NOMEM, "%s: out of host memory", name);
  gm_status_t st = rp_bfc_new(drv, o, &p->core, err);
  if (st < 0) {
    free(p);
    return st;
  }
  make_spec(p->spec, sizeof p->spec, name, conf);
  *out = (rp_policy_t *)p;
  return GM_OK;
}

gm_status_t rp_bfc_policy_new(const char *name, const char *conf, const rp_driver_t *drv, const rp_bfc_opts_t *opts,
                              rp_policy_t **out, gm_err_t *err) {
  return wrap_new(name, conf, drv, opts, out, err);
}

static gm_status_t bfc_create(const char *conf, const rp_driver_t *drv, rp_policy_t **out, gm_err_t *err) {
  bfc_conf_t c = {.garbage_collection = 1};
  gm_status_t st = rp_conf_parse("bfc", conf, bfc_keys, NULL, &c, err);
  if (st < 0) return st;
  if (c.growth && c.prealloc > 0)
    return gm_err_set(err, GM_ERR_INVAL, "bfc: 'growth' and 'prealloc' exclude each other");
  if (c.limit.set && c.prealloc > 0)
    return gm_err_set(err, GM_ERR_INVAL, "bfc: 'limit' and 'prealloc' exclude each other (prealloc=F is limit=F without growth)");
  rp_bfc_opts_t o = {0};
  o.allow_growth = c.growth;
  o.garbage_collection = c.garbage_collection;
  if (c.prealloc > 0)
    o.memory_limit = (uint64_t)(c.prealloc * (double)drv->total_memory);
  else if (c.limit.set)
    o.memory_limit = rp_amount_bytes(&c.limit, drv->total_memory);
  else
    o.memory_limit = rp_bfc_tf_default_limit(drv->total_memory);
  if (c.fragmentation_fraction > 0)
    o.max_internal_frag = (uint64_t)(c.fragmentation_fraction * (double)o.memory_limit);
  if (strcmp(c.sub_allocator, "vmm") == 0)
    o.sub_allocator = RP_BFC_SUB_VMM;
  else if (c.sub_allocator[0] && strcmp(c.sub_allocator, "device") != 0)
    return gm_err_set(err, GM_ERR_INVAL, "bfc: bad value for 'sub_allocator': '%s' (device or vmm)", c.sub_allocator);
  return wrap_new("bfc", conf, drv, &o, out, err);
}

static gm_status_t prealloc_create(const char *conf, const rp_driver_t *drv, rp_policy_t **out, gm_err_t *err) {
  prealloc_conf_t c = {.size = {.set = 1, .is_fraction = 1, .fraction = 0.75}};
  gm_status_t st = rp_conf_parse("prealloc", conf, prealloc_keys, "size", &c, err);
  if (st < 0) return st;
  rp_bfc_opts_t o = {0};
  o.allow_growth = c.growth;
  o.garbage_collection = 0;
  o.memory_limit = rp_amount_bytes(&c.size, drv->total_memory);
  return wrap_new("prealloc", conf, drv, &o, out, err);
}

static void pol_destroy(rp_policy_t *p) {
  bfc_policy_t *b = (bfc_policy_t *)p;
  if (!b) return;
  rp_bfc_delete(b->core);
  free(b);
}

static gm_status_t pol_alloc(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err) {
  (void)stream; /* TF's BFC is stream-agnostic */
  return rp_bfc_alloc(((bfc_policy_t *)p)->core, size, addr, err);
}

static gm_status_t pol_free(rp_policy_t *p, uint64_t addr, gm_err_t *err) {
  return rp_bfc_free(((bfc_policy_t *)p)->core, addr, err);
}

static gm_status_t pol_alloc_h(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, uint64_t *handle,
                               gm_err_t *err) {
  (void)stream;
  return rp_bfc_alloc_h(((bfc_policy_t *)p)->core, size, addr, handle, err);
}

static gm_status_t pol_free_h(rp_policy_t *p, uint64_t handle, gm_err_t *err) {
  return rp_bfc_free_h(((bfc_policy_t *)p)->core, handle, err);
}

static uint64_t pol_handle_addr(const rp_policy_t *p, uint64_t handle) {
  return rp_bfc_handle_addr(((const bfc_policy_t *)p)->core, handle);
}

static gm_status_t pol_empty_cache(rp_policy_t *p, gm_err_t *err) {
  (void)p;
  (void)err;
  return GM_OK;
}

static gm_status_t pol_release_all(rp_policy_t *p, gm_err_t *err) {
  return rp_bfc_release_all(((bfc_policy_t *)p)->core, err);
}

static void pol_stats(const rp_policy_t *p, rp_policy_stats_t *out) {
  rp_bfc_stats(((const bfc_policy_t *)p)->core, out);
}

static const uint64_t *pol_allocated_bytes(const rp_policy_t *p) {
  return rp_bfc_allocated_bytes(((const bfc_policy_t *)p)->core);
}

static gm_status_t pol_check(const rp_policy_t *p, gm_err_t *err) {
  return rp_bfc_check(((const bfc_policy_t *)p)->core, err);
}

static const char *pol_spec(const rp_policy_t *p) { return ((const bfc_policy_t *)p)->spec; }

static int pol_oom_report(const rp_policy_t *p, uint64_t size, uint64_t stream, rp_oom_report_t *o) {
  (void)stream;
  rp_bfc_oom_report(((const bfc_policy_t *)p)->core, size, o);
  return 1;
}

/* The two differ in their name and in how they start; every operation is the same core's. */
#define BFC_FAMILY_OPS(NAME, DESCRIPTION, CREATE)                                                 \
  {                                                                                               \
    .name = NAME, .description = DESCRIPTION, .create = CREATE, .destroy = pol_destroy,           \
    .alloc = pol_alloc, .free = pol_free, .empty_cache = pol_empty_cache,                         \
    .release_all = pol_release_all, .stats = pol_stats, .allocated_bytes = pol_allocated_bytes,   \
    .check = pol_check, .spec = pol_spec, .oom_report = pol_oom_report, .alloc_h = pol_alloc_h,   \
    .free_h = pol_free_h, .handle_addr = pol_handle_addr,                                         \
  }

const rp_policy_ops_t rp_bfc_ops = BFC_FAMILY_OPS(
    "bfc", "TensorFlow's best-fit-with-coalescing allocator in model words (bfc[:growth|:prealloc=FRACTION])",
    bfc_create);

const rp_policy_ops_t rp_prealloc_ops = BFC_FAMILY_OPS(
    "prealloc", "JAX/XLA: one arena up front, BFC inside (prealloc[:SIZE|FRACTION], default 0.75)", prealloc_create);
