/* rp_live.c: the live-allocation table shared by the direct and async policies (see
 * rp_live.h). The block is allocated on the host before the driver is asked, so that a
 * host-memory failure never leaves a device allocation nobody remembers. */
#include "replay/policies/rp_live.h"

#include <inttypes.h>
#include <stdlib.h>

void rp_live_init(rp_live_t *t, const char *policy) {
  t->policy = policy;
  t->map = NULL;
  t->bytes = 0;
}

void rp_live_clear(rp_live_t *t) {
  rp_live_block_t *b, *tmp;
  HASH_ITER(hh, t->map, b, tmp) {
    HASH_DEL(t->map, b);
    free(b);
  }
  t->bytes = 0;
}

gm_status_t rp_live_alloc(rp_live_t *t, uint64_t size, uint64_t stream, rp_live_get_fn get, void *ctx,
                          uint64_t *addr, gm_err_t *err) {
  uint64_t ask = size ? size : 1; /* cudaMalloc(0) gives NULL: keep one address per block */
  rp_live_block_t *b = malloc(sizeof *b);
  if (!b) return gm_err_set(err, GM_ERR_NOMEM, "%s: out of host memory", t->policy);
  gm_status_t st = get(ctx, ask, stream, &b->addr, err);
  if (st < 0) {
    free(b);
    return st;
  }
  b->size = ask;
  b->stream = stream;
  HASH_ADD(hh, t->map, addr, sizeof(uint64_t), b);
  t->bytes += ask;
  *addr = b->addr;
  return GM_OK;
}

static gm_status_t release(rp_live_t *t, rp_live_block_t *b, rp_live_put_fn put, void *ctx, gm_err_t *err) {
  gm_status_t st = put(ctx, b, err);
  if (st < 0) return st;
  HASH_DEL(t->map, b);
  t->bytes -= b->size;
  free(b);
  return GM_OK;
}

gm_status_t rp_live_free(rp_live_t *t, uint64_t addr, rp_live_put_fn put, void *ctx, gm_err_t *err) {
  rp_live_block_t *b = NULL;
  HASH_FIND(hh, t->map, &addr, sizeof(uint64_t), b);
  if (!b) return gm_err_set(err, GM_ERR_INVAL, "free of unknown address 0x%" PRIx64, addr);
  return release(t, b, put, ctx, err);
}

gm_status_t rp_live_free_all(rp_live_t *t, rp_live_put_fn put, void *ctx, gm_err_t *err) {
  rp_live_block_t *b, *tmp;
  HASH_ITER(hh, t->map, b, tmp) {
    gm_status_t st = release(t, b, put, ctx, err);
    if (st < 0) return st;
  }
  return GM_OK;
}

gm_status_t rp_live_check(const rp_live_t *t, gm_err_t *err) {
  uint64_t sum = 0;
  for (const rp_live_block_t *b = t->map; b; b = b->hh.next) sum += b->size;
  if (sum != t->bytes)
    return gm_err_set(err, GM_ERR_CORRUPT, "%s: allocated_bytes %" PRIu64 ", live blocks sum %" PRIu64, t->policy,
                      t->bytes, sum);
  return GM_OK;
}
