/* sim_memory.c: the simulated device's memory and address space, what its driver calls
 * (sim_backend.c) and its stream-ordered pool (sim_pool.c) both take from.
 *
 * Physical memory is counted in whole granules against the capacity (cudaMalloc consumes whole
 * granules); addresses come from the driver's placement model (s->va) or from the bump pointer
 * `next`, which only grows, so the same calls always get the same addresses. */
#include "replay/engine/sim_internal.h"

static uint64_t round_up(uint64_t v, uint64_t g) { return (v + g - 1) / g * g; }

/* One allocation larger than the whole device fails on a real one, capacity or not (and its
 * rounding must not wrap around). */
static void failed(sim_t *s, uint64_t phys) {
  uint64_t need = phys > UINT64_MAX - s->used ? UINT64_MAX : s->used + phys;
  if (need < s->need_failed) s->need_failed = need;
}

/* With a capacity, a take fails exactly when used + phys is over it (the size check below is
 * then implied): what capacity_span stands on. */
gm_status_t sim_take(sim_t *s, uint64_t size, uint64_t *addr) {
  uint64_t phys = size ? size : 1;
  phys = phys > UINT64_MAX - s->gran ? UINT64_MAX / s->gran * s->gran : round_up(phys, s->gran);
  if (size > s->b.drv.total_memory && size > s->capacity) return failed(s, phys), GM_ERR_NOMEM;
  if (s->capacity && (phys > s->capacity || s->used > s->capacity - phys)) return failed(s, phys), GM_ERR_NOMEM;
  s->used += phys;
  if (s->used > s->used_peak) s->used_peak = s->used;
  if (addr) s->placed++;
  if (addr && s->va) {
    if (rp_va_alloc(s->va, phys, addr) != GM_OK) return GM_ERR_NOMEM;
  } else if (addr) {
    *addr = s->next;
    s->next += phys; /* granule-aligned, so every address is 512-byte aligned too */
  }
  return GM_OK;
}

uint64_t sim_bump(sim_t *s, uint64_t size) {
  uint64_t a = s->next;
  s->next += round_up(size ? size : 1, s->gran);
  return a;
}

void sim_give(sim_t *s, uint64_t size) {
  uint64_t phys = round_up(size ? size : 1, s->gran);
  s->used = phys > s->used ? 0 : s->used - phys;
}
