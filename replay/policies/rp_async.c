/* rp_async.c: the `async` policy: the driver's stream-ordered pool (cudaMallocAsync).
 *
 * Model: what PyTorch's backend:cudaMallocAsync and TF's cuda_malloc_async allocator do:
 * alloc = alloc_async(exact size, the request's stream); free = free_async on the stream the
 * block was allocated on; empty_cache = pool_trim(0) (cudaMemPoolTrimTo(pool, 0)). The
 * pool itself (its reuse across streams, its growth, when it gives memory back) is the
 * driver's: measured on a real GPU, modelled by the simulator (replay/engine/sim_pool.c), where it
 * is timing-dependent and gpureplay reports a range.
 * release_threshold: both frameworks set the pool's threshold so that it never shrinks on
 * its own (PyTorch UINT64_MAX, TF the pool size): that is the default here. The driver
 * applies a threshold at synchronisation points, which a replay does not have; with
 * release_threshold=SIZE the policy calls pool_trim(SIZE) after every free, i.e. it treats
 * each free as a synchronisation point (an upper bound on how often the pool shrinks).
 * OOM: pool_trim(0) and one retry (PyTorch PR #188110's trim-and-retry; counted in
 * alloc_retries), then OOM. A 0-byte request asks for 1 byte (one address per live block).
 * Structure: live blocks (address -> size, stream) in the rp_live.h table. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "replay/policies/rp_conf.h"
#include "replay/policies/rp_live.h"
#include "replay/policies/rp_policies.h"

typedef struct async_conf {
  uint64_t release_threshold;
} async_conf_t;

static const rp_conf_key_t async_keys[] = {
    {"release_threshold", RP_CONF_SIZE, offsetof(async_conf_t, release_threshold)},
    {NULL, RP_CONF_FLAG, 0},
};

typedef struct async_policy {
  rp_driver_t drv;
  uint64_t release_threshold; /* UINT64_MAX: never trim on free */
  rp_live_t live;
  rp_policy_stats_t st; /* allocated_bytes lives in live.bytes */
  char spec[256];
} async_policy_t;

static gm_status_t async_create(const char *conf, const rp_driver_t *drv, rp_policy_t **out, gm_err_t *err) {
  async_conf_t c = {.release_threshold = UINT64_MAX};
  gm_status_t st = rp_conf_parse("async", conf, async_keys, NULL, &c, err);
  if (st < 0) return st;
  if (!drv->alloc_async || !drv->free_async || !drv->pool_trim)
    return gm_err_set(err, GM_ERR_UNSUPPORTED, "async policy needs a backend with a stream-ordered pool");
  async_policy_t *p = calloc(1, sizeof *p);
  if (!p) return gm_err_set(err, GM_ERR_NOMEM, "async: out of host memory");
  p->drv = *drv;
  p->release_threshold = c.release_threshold;
  rp_live_init(&p->live, "async");
  if (conf && *conf)
    snprintf(p->spec, sizeof p->spec, "async:%s", conf);
  else
    snprintf(p->spec, sizeof p->spec, "async");
  *out = (rp_policy_t *)p;
  return GM_OK;
}

static void async_destroy(rp_policy_t *pp) {
  async_policy_t *p = (async_policy_t *)pp;
  if (!p) return;
  rp_live_clear(&p->live);
  free(p);
}

static gm_status_t async_get(void *ctx, uint64_t ask, uint64_t stream, uint64_t *addr, gm_err_t *err) {
  async_policy_t *p = ctx;
  gm_status_t st = p->drv.alloc_async(p->drv.ctx, ask, stream, addr);
  if (st == GM_ERR_NOMEM) {
    p->st.alloc_retries++;
    st = p->drv.pool_trim(p->drv.ctx, 0);
    if (st >= 0) st = p->drv.alloc_async(p->drv.ctx, ask, stream, addr);
  }
  if (st == GM_ERR_NOMEM) {
    p->st.ooms++;
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory: the pool refused %" PRIu64 " bytes after a trim", ask);
  }
  if (st < 0) return gm_err_wrap(err, "async: pool allocation of %" PRIu64 " bytes", ask);
  return GM_OK;
}

/* free_async on the stream the block was allocated on */
static gm_status_t async_put(void *ctx, const rp_live_block_t *b, gm_err_t *err) {
  async_policy_t *p = ctx;
  gm_status_t st = p->drv.free_async(p->drv.ctx, b->addr, b->stream);
  if (st < 0) return gm_err_wrap(err, "async: pool free of 0x%" PRIx64, b->addr);
  return GM_OK;
}

static gm_status_t async_alloc(rp_policy_t *pp, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err) {
  async_policy_t *p = (async_policy_t *)pp;
  if (size > RP_REQUEST_MAX) { /* no device has it; and the pool's rounding must not wrap */
    p->st.ooms++;
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory: %" PRIu64 " bytes is more than any device has", size);
  }
  return rp_live_alloc(&p->live, size, stream, async_get, p, addr, err);
}

static gm_status_t async_free(rp_policy_t *pp, uint64_t addr, gm_err_t *err) {
  async_policy_t *p = (async_policy_t *)pp;
  gm_status_t st = rp_live_free(&p->live, addr, async_put, p, err);
  if (st < 0) return st;
  if (p->release_threshold != UINT64_MAX) {
    st = p->drv.pool_trim(p->drv.ctx, p->release_threshold);
    if (st < 0) return gm_err_wrap(err, "async: pool trim to %" PRIu64 " bytes", p->release_threshold);
  }
  return GM_OK;
}

static gm_status_t async_empty_cache(rp_policy_t *pp, gm_err_t *err) {
  async_policy_t *p = (async_policy_t *)pp;
  gm_status_t st = p->drv.pool_trim(p->drv.ctx, 0);
  if (st < 0) return gm_err_wrap(err, "async: pool trim to 0");
  return GM_OK;
}

/* every live block back (no threshold trim per block), then one trim to 0 */
static gm_status_t async_release_all(rp_policy_t *pp, gm_err_t *err) {
  async_policy_t *p = (async_policy_t *)pp;
  gm_status_t st = rp_live_free_all(&p->live, async_put, p, err);
  if (st < 0) return st;
  return async_empty_cache(pp, err);
}

static void async_stats(const rp_policy_t *pp, rp_policy_stats_t *out) {
  const async_policy_t *p = (const async_policy_t *)pp;
  *out = p->st;
  out->allocated_bytes = p->live.bytes;
  out->cached_bytes = 0; /* the pool's cache is the driver's: the backend measures it */
}

static const uint64_t *async_allocated_bytes(const rp_policy_t *pp) {
  return &((const async_policy_t *)pp)->live.bytes;
}

static gm_status_t async_check(const rp_policy_t *pp, gm_err_t *err) {
  return rp_live_check(&((const async_policy_t *)pp)->live, err);
}

static const char *async_spec(const rp_policy_t *p) { return ((const async_policy_t *)p)->spec; }

const rp_policy_ops_t rp_async_ops = {
    .name = "async",
    .description = "the driver's stream-ordered pool, cudaMallocAsync (async[:release_threshold=SIZE]; "
                   "simulated: a range)",
    .create = async_create,
    .destroy = async_destroy,
    .alloc = async_alloc,
    .free = async_free,
    .empty_cache = async_empty_cache,
    .release_all = async_release_all,
    .stats = async_stats,
    .allocated_bytes = async_allocated_bytes,
    .check = async_check,
    .spec = async_spec,
};
