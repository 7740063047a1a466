/* rp_bfc_state.h: the BFC core's state (chunks, regions, the size-class trees), shared by
 * rp_bfc_core.c (the allocator's rules) and rp_bfc_inspect.c (its figures, OOM report and
 * invariant walker). Private to the policies library. */
#ifndef RP_BFC_STATE_H
#define RP_BFC_STATE_H

#include <stdint.h>
#include <uthash.h>

#include "replay/policies/rp_bfc_core.h"

/* libbsd's RB_GENERATE_STATIC marks its functions __unused, which libbsd leaves undefined
 * (a glibc struct has a member of that name); define it only for the tree macros, last. */
#ifndef __unused
#define __unused __attribute__((__unused__))
#ifdef __cplusplus
}
#endif

#endif
#include <bsd/sys/tree.h>

#include "replay/policies/rp_bfc_vmm.h"
#include "replay/policies/rp_sizeclass.h"

#ifdef __cplusplus
extern "C" {
#ifdef __cplusplus
}
#endif

#endif

typedef struct chunk chunk_t;
typedef struct region region_t;

struct chunk {
  uint64_t addr, size;
  chunk_t *prev, *next; /* address neighbours inside the region */
  region_t *region;
  int in_use;
  int in_hash; /* in use and found by address (taken by rp_bfc_alloc, not rp_bfc_alloc_h) */
  int bin; /* its size class (rp_sizeclass.h), -1 when not in a bin */
  RB_ENTRY(chunk) link;
  UT_hash_handle hh;
};

struct region {
  uint64_t addr, size;
  chunk_t *first;
  region_t *prev, *next; /* creation order; by address with the VMM sub-allocator, as TF's
                            region vector (the order only decides which region goes to
                            the driver first in garbage collection) */
};

static inline int chunk_cmp(const chunk_t *a, const chunk_t *b) {
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
  return 0;
}

RB_HEAD(bin_tree, chunk);
RB_GENERATE_STATIC(bin_tree, chunk, link, chunk_cmp)

struct rp_bfc {
  rp_driver_t drv;
  rp_bfc_opts_t opts;
  uint64_t max_frag;
  uint64_t curr_region_bytes; /* curr_region_allocation_bytes_ */
  uint64_t pool_bytes;        /* stats_.pool_bytes */
  struct bin_tree bins[RP_SC_N];  /* by size class: finer than TF's bins, same order */
  rp_sc_map_t bin_map;           /* which classes are non-empty */
  uint64_t nbinned;
  chunk_t *in_use; /* uthash by addr */
  region_t *regions, *regions_tail;
  int nregions;
  chunk_t *spare; /* recycled chunk records, linked by next */
  rp_policy_stats_t st;
  int vmm;         /* sub-allocator is GpuVirtualMemAllocator: coalescing regions */
  rp_bfc_vmm_t v;
};

/* TF's RoundedBytes: a multiple of 256 B. */
static inline uint64_t bfc_rounded_bytes(uint64_t n) {
  return (n + RP_BFC_MIN_ALLOC - 1) / RP_BFC_MIN_ALLOC * RP_BFC_MIN_ALLOC;
}

static inline uint32_t bfc_size_class(uint64_t size) { return rp_sc_class(size, 8); }

#ifdef __cplusplus
}
#endif

#endif
