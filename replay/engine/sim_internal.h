/* sim_internal.h: the simulated device (sim_backend.c), its stream-ordered pool (sim_pool.c),
 * and the memory and addresses both take (sim_memory.c). Internal to //replay/engine. */
#ifndef RP_SIM_INTERNAL_H
#define RP_SIM_INTERNAL_H

#include <stdint.h>

#include "replay/engine/rp_engine.h"
#include "replay/engine/va_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The chunk the driver's pool grows by (every recorded cudaMallocAsync reservation is a
 * multiple of it: sim_pool.c). */
#define SIM_POOL_CHUNK (32ull << 20)
/* The pool's own address range (apart from the simulator's segments). */
#define SIM_POOL_BASE 0x100000000000ull

typedef struct sim_pool sim_pool_t;

typedef struct sim {
  rp_backend_t b; /* first: the backend handle is the sim */
  uint64_t capacity, gran, used, next;
  /* the capacities that give the same outcomes (rp_backend_t.capacity_span): the most ever
   * used, the least a failed take needed (UINT64_MAX: none failed) */
  uint64_t used_peak, need_failed;
  int total_from_capacity; /* the policies see the capacity as the device: no span */
  uint64_t placed;         /* takes with an address past the capacity check (rp_backend_t.placed) */
  sim_pool_t *pool;
  rp_va_t *va; /* segment addresses under the driver model; NULL: from `next` */
} sim_t;

/* sim_memory.c. Physical memory: size rounded up to the granularity, against the capacity; *addr (if not
 * NULL) a fresh address range of that size. */
gm_status_t sim_take(sim_t *s, uint64_t size, uint64_t *addr);
void sim_give(sim_t *s, uint64_t size);
/* A fresh address range of size bytes (granule-aligned), no memory. */
uint64_t sim_bump(sim_t *s, uint64_t size);

sim_pool_t *sim_pool_new(int model, uint64_t chunk);
void sim_pool_free(sim_pool_t *p);
gm_status_t sim_pool_alloc(sim_pool_t *p, sim_t *s, uint64_t size, uint64_t stream, uint64_t *addr);
/* GM_ERR_INVAL: not a live pool block. */
gm_status_t sim_pool_release(sim_pool_t *p, uint64_t addr, uint64_t stream);
void sim_pool_trim(sim_pool_t *p, sim_t *s, uint64_t keep);
uint64_t sim_pool_reserved(const sim_pool_t *p);

#ifdef __cplusplus
}
#endif
#endif /* RP_SIM_INTERNAL_H */
