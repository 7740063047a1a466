/* engine_driver.c: the counting driver the engine puts between a policy and its backend.
 *
 * Every device call a policy makes passes here, so the engine knows reserved memory without
 * trusting the policy: reserved = bytes of successful mem_alloc + map - mem_free - unmap
 * (what torch.cuda.memory_reserved() counts for PyTorch). VA reservations are address
 * space, not memory, and are counted only as calls. For the driver's pool (`async`) the
 * reservation is the pool's own (the cuda backend reads it from the driver after every
 * pool call); a backend that cannot tell gets the live pool allocations (a lower bound).
 *
 * Failed calls count as calls (they cost the same round trip); out-of-memory failures are
 * counted apart. */
#include "replay/engine/engine_internal.h"

static void grow(rp_engine_t *e, uint64_t size) {
  e->reserved += size;
  if (e->reserved > e->peak_reserved) {
    e->peak_reserved = e->reserved;
    e->peak_dirty = 1;
  }
  if (e->reserved + e->ext_live > e->peak_total) e->peak_total = e->reserved + e->ext_live;
}

static void shrink(rp_engine_t *e, uint64_t size) {
  e->reserved = size > e->reserved ? 0 : e->reserved - size;
}

static void note(rp_engine_t *e, gm_status_t st) {
  if (st == GM_ERR_NOMEM) e->driver_nomem++;
}

/* opts.observer: a successful call that moved reserved memory. */
static void tell(rp_engine_t *e, int call, uint64_t addr, uint64_t size) {
  const rp_engine_observer_t *o = e->opts.observer;
  if (o && o->driver_call) o->driver_call(o->ctx, call, addr, size, e->events);
}

static gm_status_t w_mem_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  rp_engine_t *e = ctx;
  e->alloc_calls++;
  if (size > e->largest_alloc) e->largest_alloc = size;
  gm_status_t st = e->b->drv.mem_alloc(e->b->drv.ctx, size, addr);
  if (st == GM_OK) {
    rp_peak_seg_add(e, *addr, size, 0);
    grow(e, size);
    tell(e, RP_CALL_MEM_ALLOC, *addr, size);
  }
  note(e, st);
  return st;
}

static gm_status_t w_mem_free(void *ctx, uint64_t addr, uint64_t size) {
  rp_engine_t *e = ctx;
  e->free_calls++;
  gm_status_t st = e->b->drv.mem_free(e->b->drv.ctx, addr, size);
  if (st == GM_OK) {
    rp_peak_seg_remove(e, addr, size, 0);
    shrink(e, size);
    tell(e, RP_CALL_MEM_FREE, addr, size);
  }
  return st;
}

static gm_status_t w_va_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  rp_engine_t *e = ctx;
  e->va_calls++;
  return e->b->drv.va_reserve(e->b->drv.ctx, size, addr);
}

static gm_status_t w_va_release(void *ctx, uint64_t addr, uint64_t size) {
  rp_engine_t *e = ctx;
  e->va_calls++;
  return e->b->drv.va_release(e->b->drv.ctx, addr, size);
}

static gm_status_t w_map(void *ctx, uint64_t addr, uint64_t size) {
  rp_engine_t *e = ctx;
  e->alloc_calls++;
  if (size > e->largest_alloc) e->largest_alloc = size;
  gm_status_t st = e->b->drv.map(e->b->drv.ctx, addr, size);
  if (st == GM_OK) {
    rp_peak_seg_add(e, addr, size, 1);
    grow(e, size);
    tell(e, RP_CALL_MAP, addr, size);
  }
  note(e, st);
  return st;
}

static gm_status_t w_unmap(void *ctx, uint64_t addr, uint64_t size) {
  rp_engine_t *e = ctx;
  e->free_calls++;
  gm_status_t st = e->b->drv.unmap(e->b->drv.ctx, addr, size);
  if (st == GM_OK) {
    rp_peak_seg_remove(e, addr, size, 1);
    shrink(e, size);
    tell(e, RP_CALL_UNMAP, addr, size);
  }
  return st;
}

/* The pool's reservation changed (or may have): follow the driver's own figure when the
 * backend has one, else count live pool allocations (a lower bound). */
static void pool_sync(rp_engine_t *e) {
  uint64_t now = e->b->pool_reserved(e->b);
  if (now > e->pool_res) grow(e, now - e->pool_res);
  else shrink(e, e->pool_res - now);
  e->pool_res = now;
}

static gm_status_t w_alloc_async(void *ctx, uint64_t size, uint64_t stream, uint64_t *addr) {
  rp_engine_t *e = ctx;
  e->alloc_calls++;
  e->pool_allocs++;
  gm_status_t st = e->b->drv.alloc_async(e->b->drv.ctx, size, stream, addr);
  note(e, st);
  if (st != GM_OK) return st;
  if (e->b->pool_reserved) {
    pool_sync(e);
    return st;
  }
  if (rp_map_put(&e->async_sizes, *addr, size, 0) != 0) return GM_ERR_NOMEM;
  grow(e, size);
  return st;
}

static gm_status_t w_free_async(void *ctx, uint64_t addr, uint64_t stream) {
  rp_engine_t *e = ctx;
  e->free_calls++;
  gm_status_t st = e->b->drv.free_async(e->b->drv.ctx, addr, stream);
  if (st != GM_OK) return st;
  if (e->b->pool_reserved) {
    pool_sync(e);
    return st;
  }
  rp_map_entry_t *m = rp_map_get(&e->async_sizes, addr);
  if (m) {
    shrink(e, m->a);
    rp_map_remove(&e->async_sizes, m);
  }
  return st;
}

static gm_status_t w_pool_trim(void *ctx, uint64_t keep) {
  rp_engine_t *e = ctx;
  e->pool_trims++;
  gm_status_t st = e->b->drv.pool_trim(e->b->drv.ctx, keep);
  if (st == GM_OK && e->b->pool_reserved) pool_sync(e);
  return st;
}

void rp_engine_driver_init(rp_engine_t *e) {
  const rp_driver_t *d = &e->b->drv;
  rp_driver_t w = {0};
  w.ctx = e;
  w.mem_alloc = d->mem_alloc ? w_mem_alloc : NULL;
  w.mem_free = d->mem_free ? w_mem_free : NULL;
  w.va_reserve = d->va_reserve ? w_va_reserve : NULL;
  w.va_release = d->va_release ? w_va_release : NULL;
  w.map = d->map ? w_map : NULL;
  w.unmap = d->unmap ? w_unmap : NULL;
  w.alloc_async = d->alloc_async ? w_alloc_async : NULL;
  w.free_async = d->free_async ? w_free_async : NULL;
  w.pool_trim = d->pool_trim ? w_pool_trim : NULL;
  w.granularity = d->granularity;
  w.total_memory = d->total_memory;
  e->drv = w;
}
