/* va_model.h: where the CUDA driver puts a cuMemAlloc (cudaMalloc) in the virtual address space,
 * as a model for the simulator (va_model.c has the rules and the evidence).
 *
 * Why it matters: PyTorch's best fit breaks ties between equal-size free blocks by address,
 * and its garbage collection and OOM retries free cached segments in (size, address) order,
 * so a replay decides like the real run only if its segments are ordered as the driver
 * ordered them. Two policies:
 *   RP_VA_BUMP    ascending addresses, never reused (the simulator's choice before the model);
 *   RP_VA_DRIVER  the driver's placement as measured on real runs (traces/snapshots).
 * Pure C, no CUDA, deterministic: the same calls give the same addresses. */
#ifndef RP_VA_MODEL_H
#define RP_VA_MODEL_H

#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rp_va_policy { RP_VA_BUMP = 0, RP_VA_DRIVER = 1 } rp_va_policy_t;

typedef struct rp_va_opts {
  rp_va_policy_t policy;
  uint64_t base;    /* DRIVER: the top of the first region; BUMP: the first address (0: default) */
  uint64_t granule; /* every allocation is a whole number of these (0: 2 MiB) */
  uint64_t region;  /* DRIVER: a new region is a multiple of this, aligned to it (0: 32 MiB) */
  uint64_t gap;     /* BUMP: unused bytes after each allocation (0: none) */
  uint64_t first;   /* DRIVER: the size of the first area, below base (0: 384 MiB; va_model.c R0) */
} rp_va_opts_t;

typedef struct rp_va rp_va_t;

/* "driver" or "bump" (the --addresses= values); -1 if neither. */
int rp_va_policy_parse(const char *s);
const char *rp_va_policy_name(rp_va_policy_t p);

/* NULL: out of host memory, or bad options (granule or region not a power of two, region not a
 * multiple of granule). */
rp_va_t *rp_va_new(const rp_va_opts_t *o);
void rp_va_free_all(rp_va_t *v);
/* A fresh address range of size bytes (rounded up to the granule; size 0 counts as 1).
 * GM_ERR_NOMEM: the address space (2^47 below base) is used up, or out of host memory. */
gm_status_t rp_va_alloc(rp_va_t *v, uint64_t size, uint64_t *addr);
/* Give back a range rp_va_alloc returned. GM_ERR_INVAL: not a live range's address. */
gm_status_t rp_va_release(rp_va_t *v, uint64_t addr);
/* Live ranges now. */
uint64_t rp_va_live(const rp_va_t *v);

#ifdef __cplusplus
}
#endif
#endif /* RP_VA_MODEL_H */
