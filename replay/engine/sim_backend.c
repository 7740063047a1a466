/* sim_backend.c: the simulated device behind rp_driver_t (backend `sim`).
 *
 * Model: a device with a capacity (or none) and the driver's allocation granularity (2 MiB
 * on current NVIDIA GPUs unless told otherwise). cudaMalloc consumes whole granules of
 * physical memory, so a segment counts against the capacity rounded up to the granularity;
 * VMM maps are granule multiples by contract. Segment addresses follow the CUDA driver's
 * placement (--addresses=driver, replay/engine/va_model.h: PyTorch breaks ties between equal-size free
 * blocks by address, so the order matters), or by default from a bump pointer; VA reservations
 * and pool blocks come from the bump pointer, which starts where the driver model's first
 * region ends and only grows. Either way the same policy on the same trace always sees the
 * same addresses (deterministic results). The stream-ordered pool (`async`) is a model of the driver's, with a
 * choice of how freed memory is reused (sim_pool.c); its reservation is the pool's chunks.
 *
 * One allocation (or map) larger than the device's total memory (and its capacity) fails
 * with out-of-memory even without a capacity: no device of that size could serve it, so a
 * request bigger than the GPU the trace came from is an OOM under every policy, as it was in
 * the real run.
 *
 * The simulator does not check that frees match allocs: the engine and the policies' own
 * invariant checks do that; here a free only returns its granules to the capacity. */
#include <stdlib.h>
#include <string.h>

#include "replay/engine/sim_internal.h"

#define SIM_BASE 0x7f0000000000ull

static gm_status_t sim_mem_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  return sim_take(ctx, size, addr);
}

static gm_status_t sim_mem_free(void *ctx, uint64_t addr, uint64_t size) {
  sim_t *s = ctx;
  if (s->va && rp_va_release(s->va, addr) != GM_OK) return GM_ERR_INVAL;
  sim_give(s, size);
  return GM_OK;
}

static gm_status_t sim_va_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  *addr = sim_bump(ctx, size);
  return GM_OK;
}

static gm_status_t sim_va_release(void *ctx, uint64_t addr, uint64_t size) { return GM_OK; }

static gm_status_t sim_map(void *ctx, uint64_t addr, uint64_t size) {
  sim_t *s = ctx;
  if (size % s->gran != 0 || addr % s->gran != 0) return GM_ERR_INVAL;
  return sim_take(s, size, NULL);
}

static gm_status_t sim_unmap(void *ctx, uint64_t addr, uint64_t size) {
  sim_give(ctx, size);
  return GM_OK;
}

static gm_status_t sim_alloc_async(void *ctx, uint64_t size, uint64_t stream, uint64_t *addr) {
  sim_t *s = ctx;
  return sim_pool_alloc(s->pool, s, size, stream, addr);
}

static gm_status_t sim_free_async(void *ctx, uint64_t addr, uint64_t stream) {
  sim_t *s = ctx;
  return sim_pool_release(s->pool, addr, stream);
}

static gm_status_t sim_pool_trim_to(void *ctx, uint64_t keep) {
  sim_t *s = ctx;
  sim_pool_trim(s->pool, s, keep);
  return GM_OK;
}

static uint64_t sim_pool_bytes(rp_backend_t *b) { return sim_pool_reserved(((sim_t *)b)->pool); }

/* sim_take's outcome with a capacity c is used + phys <= c: every take so far had the same
 * one under any c from the most used to one less than the least a failed take needed. Only
 * while the policies' device does not follow the capacity (total_memory given). */
static int sim_capacity_span(rp_backend_t *b, uint64_t *lo, uint64_t *hi) {
  const sim_t *s = (const sim_t *)b;
  if (s->total_from_capacity) return 0;
  *lo = s->used_peak ? s->used_peak : 1; /* 0 is no capacity at all */
  *hi = s->need_failed == UINT64_MAX ? UINT64_MAX : s->need_failed - 1;
  return *lo <= *hi;
}

static uint64_t sim_placed(rp_backend_t *b) { return ((const sim_t *)b)->placed; }

static void sim_destroy(rp_backend_t *b) {
  rp_va_free_all(((sim_t *)b)->va);
  sim_pool_free(((sim_t *)b)->pool);
  free(b);
}

gm_status_t rp_sim_backend_create(const rp_sim_opts_t *opts, rp_backend_t **out, gm_err_t *err) {
  *out = NULL;
  sim_t *s = calloc(1, sizeof *s);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  rp_sim_opts_t o = {0};
  if (opts) o = *opts;
  s->gran = o.granularity ? o.granularity : (2ull << 20);
  if (s->gran & (s->gran - 1)) {
    free(s);
    return gm_err_set(err, GM_ERR_INVAL, "granularity %llu is not a power of two",
                      (unsigned long long)o.granularity);
  }
  s->capacity = o.capacity;
  s->need_failed = UINT64_MAX;
  s->total_from_capacity = o.total_memory == 0;
  s->next = SIM_BASE;
  if (o.pool_model & ~(RP_POOL_CHUNKS | RP_POOL_SAME_STREAM | RP_POOL_IDEAL)) {
    free(s);
    return gm_err_set(err, GM_ERR_INVAL, "unknown pool model %d", o.pool_model);
  }
  if (o.addresses != RP_VA_DRIVER && o.addresses != RP_VA_BUMP) {
    free(s);
    return gm_err_set(err, GM_ERR_INVAL, "unknown address policy %d", o.addresses);
  }
  if (o.addresses == RP_VA_DRIVER) {
    rp_va_opts_t vo = {RP_VA_DRIVER, SIM_BASE, s->gran, 0, 0, 0};
    if (!(s->va = rp_va_new(&vo))) {
      free(s);
      return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
    }
  }
  if (!(s->pool = sim_pool_new(o.pool_model, o.pool_chunk))) {
    rp_va_free_all(s->va);
    free(s);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  rp_driver_t *d = &s->b.drv;
  d->ctx = s;
  d->mem_alloc = sim_mem_alloc;
  d->mem_free = sim_mem_free;
  d->va_reserve = sim_va_reserve;
  d->va_release = sim_va_release;
  d->map = sim_map;
  d->unmap = sim_unmap;
  d->alloc_async = sim_alloc_async;
  d->free_async = sim_free_async;
  d->pool_trim = sim_pool_trim_to;
  s->b.pool_reserved = sim_pool_bytes;
  s->b.capacity_span = sim_capacity_span;
  s->b.placed = sim_placed;
  d->granularity = s->gran;
  d->total_memory = o.total_memory ? o.total_memory : o.capacity ? o.capacity : (80ull << 30);
  snprintf(s->b.name, sizeof s->b.name, "sim");
  s->b.destroy = sim_destroy;
  *out = &s->b;
  return GM_OK;
}
