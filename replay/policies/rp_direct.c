/* rp_direct.c: the `direct` policy: every request straight to the driver.
 *
 * Model: alloc = mem_alloc(exact size), free = mem_free; nothing cached, nothing rounded
 * here (the driver rounds as it rounds: the sim backend to its granularity). This is what
 * PYTORCH_NO_CUDA_MEMORY_CACHING=1, XLA_PYTHON_CLIENT_ALLOCATOR=platform or
 * cupy.cuda.set_allocator(None) do, and the floor for reserved memory / ceiling for driver
 * calls among the policies. A 0-byte request asks the driver for 1 byte, so each live block
 * keeps an address of its own (cudaMalloc(0) returns NULL). OOM: the driver's NOMEM, no
 * retry (there is no cache to free). empty_cache has nothing to do. One conf key:
 * round=SIZE asks the driver for each request rounded up to a multiple of SIZE, as an
 * allocator that maps every buffer through the VMM API does (XLA's platform allocator: the
 * 2 MiB granularity), so the policy holds what such a program holds.
 * Structure: live blocks in the rp_live.h table by address (the free needs the size). */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "replay/policies/rp_conf.h"
#include "replay/policies/rp_live.h"
#include "replay/policies/rp_policies.h"

typedef struct direct_conf {
  uint64_t round;
} direct_conf_t;

typedef struct direct_policy {
  rp_driver_t drv;
  uint64_t round; /* 0: exact sizes */
  rp_live_t live;
  rp_policy_stats_t st; /* allocated_bytes lives in live.bytes */
} direct_policy_t;

static const rp_conf_key_t direct_keys[] = {
    {"round", RP_CONF_SIZE, offsetof(direct_conf_t, round)},
    {NULL, RP_CONF_FLAG, 0},
};

static gm_status_t direct_create(const char *conf, const rp_driver_t *drv, rp_policy_t **out, gm_err_t *err) {
  direct_conf_t c = {0};
  gm_status_t st = rp_conf_parse("direct", conf, direct_keys, NULL, &c, err);
  if (st < 0) return st;
  if (c.round & (c.round - 1))
    return gm_err_set(err, GM_ERR_INVAL, "direct: round=%" PRIu64 " is not a power of two", c.round);
  direct_policy_t *p = calloc(1, sizeof *p);
  if (!p) return gm_err_set(err, GM_ERR_NOMEM, "direct: out of host memory");
  p->drv = *drv;
  p->round = c.round;
  rp_live_init(&p->live, "direct");
  *out = (rp_policy_t *)p;
  return GM_OK;
}

static void direct_destroy(rp_policy_t *pp) {
  direct_policy_t *p = (direct_policy_t *)pp;
  if (!p) return;
  rp_live_clear(&p->live);
  free(p);
}

static gm_status_t direct_get(void *ctx, uint64_t ask, uint64_t stream, uint64_t *addr, gm_err_t *err) {
  (void)stream; /* cudaMalloc is not stream-ordered */
  direct_policy_t *p = ctx;
  gm_status_t st = p->drv.mem_alloc(p->drv.ctx, ask, addr);
  if (st == GM_ERR_NOMEM) {
    p->st.ooms++;
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory: the driver refused %" PRIu64 " bytes", ask);
  }
  if (st < 0) return gm_err_wrap(err, "direct: device allocation of %" PRIu64 " bytes", ask);
  return GM_OK;
}

static gm_status_t direct_put(void *ctx, const rp_live_block_t *b, gm_err_t *err) {
  direct_policy_t *p = ctx;
  gm_status_t st = p->drv.mem_free(p->drv.ctx, b->addr, b->size);
  if (st < 0) return gm_err_wrap(err, "direct: device free of 0x%" PRIx64, b->addr);
  return GM_OK;
}

static gm_status_t direct_alloc(rp_policy_t *pp, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err) {
  direct_policy_t *p = (direct_policy_t *)pp;
  if (size > RP_REQUEST_MAX) { /* no device has it; and the driver's rounding must not wrap */
    p->st.ooms++;
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory: %" PRIu64 " bytes is more than any device has", size);
  }
  if (p->round && size) {
    if (size > UINT64_MAX - (p->round - 1)) {
      p->st.ooms++;
      return gm_err_set(err, GM_ERR_NOMEM, "out of memory: %" PRIu64 " bytes", size);
    }
    size = (size + p->round - 1) & ~(p->round - 1);
  }
  return rp_live_alloc(&p->live, size, stream, direct_get, p, addr, err);
}

static gm_status_t direct_free(rp_policy_t *pp, uint64_t addr, gm_err_t *err) {
  direct_policy_t *p = (direct_policy_t *)pp;
  return rp_live_free(&p->live, addr, direct_put, p, err);
}

static gm_status_t direct_empty_cache(rp_policy_t *p, gm_err_t *err) {
  (void)p;
  (void)err;
  return GM_OK;
}

static gm_status_t direct_release_all(rp_policy_t *pp, gm_err_t *err) {
  direct_policy_t *p = (direct_policy_t *)pp;
  return rp_live_free_all(&p->live, direct_put, p, err);
}

static void direct_stats(const rp_policy_t *pp, rp_policy_stats_t *out) {
  const direct_policy_t *p = (const direct_policy_t *)pp;
  *out = p->st;
  out->allocated_bytes = p->live.bytes;
  out->cached_bytes = 0;
}

static const uint64_t *direct_allocated_bytes(const rp_policy_t *pp) {
  return &((const direct_policy_t *)pp)->live.bytes;
}

static gm_status_t direct_check(const rp_policy_t *pp, gm_err_t *err) {
  return rp_live_check(&((const direct_policy_t *)pp)->live, err);
}

static const char *direct_spec(const rp_policy_t *p) {
  (void)p;
  return "direct";
}

const rp_policy_ops_t rp_direct_ops = {
    .name = "direct",
    .description = "every request straight to the driver (cudaMalloc/cudaFree, exact size)",
    .create = direct_create,
    .destroy = direct_destroy,
    .alloc = direct_alloc,
    .free = direct_free,
    .empty_cache = direct_empty_cache,
    .release_all = direct_release_all,
    .stats = direct_stats,
    .allocated_bytes = direct_allocated_bytes,
    .check = direct_check,
    .spec = direct_spec,
};
