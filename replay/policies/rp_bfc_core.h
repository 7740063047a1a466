/* rp_bfc_core.h: TensorFlow/XLA's BFC ("best fit with coalescing") allocator core, shared by
 * the `bfc` policy (TensorFlow) and the `prealloc` policy (JAX/XLA, BFC inside one arena).
 *
 * It follows openxla/xla xla/tsl/framework/bfc_allocator.cc (the code TensorFlow >= 2.15 and
 * jaxlib use; older tensorflow/core/common_runtime/bfc_allocator.cc has the same rules) with
 * alignment 256 (kMinAllocationSize), no spatial partitioning and no timestamped ("freed_by")
 * chunks. The sub-allocator is TF's and XLA's DeviceMemAllocator (one cuMemAlloc per region,
 * bytes_received = bytes, SupportsCoalescing() false: regions never coalesce) unless
 * opts.sub_allocator says RP_BFC_SUB_VMM: TF's GpuVirtualMemAllocator (rp_bfc_vmm.h), whose
 * regions are padded to the VMM granularity, laid out back to back in one address
 * reservation, and coalesced by the BFC (coalesce_regions_). See rp_bfc_core.c for the rules,
 * constant by constant. */
#ifndef RP_BFC_CORE_H
#define RP_BFC_CORE_H

#include <stdint.h>

#include "base/gm_base.h"
#include "replay/policies/rp_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RP_BFC_MIN_ALLOC 256u               /* kMinAllocationSize = 1 << kMinAllocationBits(8) */
#define RP_BFC_NUM_BINS 21                  /* kNumBins */
#define RP_BFC_MAX_FRAG (128ull << 20)      /* default max_internal_fragmentation_bytes */
#define RP_BFC_GROWTH_START (2ull << 20)    /* allow_growth: first region 2 MiB */

enum {
  RP_BFC_SUB_DEVICE = 0, /* DeviceMemAllocator: what TF and XLA run */
  RP_BFC_SUB_VMM = 1     /* GpuVirtualMemAllocator: TF's compiled-out VMM path */
};

typedef struct rp_bfc_opts {
  uint64_t memory_limit;      /* BFCAllocator's total_memory / memory_limit_ */
  int allow_growth;           /* Options::allow_growth */
  int garbage_collection;     /* Options::garbage_collection */
  uint64_t max_internal_frag; /* 0: RP_BFC_MAX_FRAG */
  int sub_allocator;          /* RP_BFC_SUB_* */
  uint64_t vmm_va_bytes;      /* VMM: address space to reserve; 0: 2 * memory_limit, as TF's
                                 CreateSubAllocator (virtual_address_space_size) */
} rp_bfc_opts_t;

typedef struct rp_bfc rp_bfc_t; /* opaque */

/* Creates the allocator; takes no memory from the driver (TF and XLA extend on the first
 * request). With the VMM sub-allocator it reserves the address space, as TF does when it
 * creates the sub-allocator. GM_ERR_NOMEM if the host is out of memory; GM_ERR_INVAL for a
 * VMM sub-allocator on a driver without VMM calls or a granularity that is not a power of 2. */
gm_status_t rp_bfc_new(const rp_driver_t *drv, const rp_bfc_opts_t *opts, rp_bfc_t **out, gm_err_t *err);
void rp_bfc_delete(rp_bfc_t *b);
gm_status_t rp_bfc_alloc(rp_bfc_t *b, uint64_t size, uint64_t *addr, gm_err_t *err);
gm_status_t rp_bfc_free(rp_bfc_t *b, uint64_t addr, gm_err_t *err);
/* The handle API (rp_policy_ops_t alloc_h/free_h/handle_addr): the handle is the chunk, so a
 * free needs no address lookup. A chunk taken by alloc_h is freed by free_h only. */
gm_status_t rp_bfc_alloc_h(rp_bfc_t *b, uint64_t size, uint64_t *addr, uint64_t *handle, gm_err_t *err);
gm_status_t rp_bfc_free_h(rp_bfc_t *b, uint64_t handle, gm_err_t *err);
uint64_t rp_bfc_handle_addr(const rp_bfc_t *b, uint64_t handle);
/* Give every region back to the driver, live chunks included (end of replay). */
gm_status_t rp_bfc_release_all(rp_bfc_t *b, gm_err_t *err);
void rp_bfc_stats(const rp_bfc_t *b, rp_policy_stats_t *out);
/* Where the core counts its allocated bytes (rp_policy_ops_t.allocated_bytes). */
const uint64_t *rp_bfc_allocated_bytes(const rp_bfc_t *b);
gm_status_t rp_bfc_check(const rp_bfc_t *b, gm_err_t *err);
/* The policy's account of its free chunks after a failed request (rp_oom_report_t). */
void rp_bfc_oom_report(const rp_bfc_t *b, uint64_t size, rp_oom_report_t *o);
/* Bytes taken from the driver (stats_.pool_bytes) and the next region size
 * (curr_region_allocation_bytes_), for tests. */
uint64_t rp_bfc_pool_bytes(const rp_bfc_t *b);
uint64_t rp_bfc_next_region_bytes(const rp_bfc_t *b);
int rp_bfc_region_count(const rp_bfc_t *b);
/* VMM sub-allocator figures, for tests (0 without it): bytes mapped now (the BFC's pool plus
 * what refused frees left mapped), next_alloc_offset_, the reservation's size, Allocs refused
 * for address space, Frees refused by TF's size check. */
uint64_t rp_bfc_vmm_mapped_bytes(const rp_bfc_t *b);
uint64_t rp_bfc_vmm_next_offset(const rp_bfc_t *b);
uint64_t rp_bfc_vmm_va_size(const rp_bfc_t *b);
uint64_t rp_bfc_vmm_va_ooms(const rp_bfc_t *b);
uint64_t rp_bfc_vmm_refused_frees(const rp_bfc_t *b);
/* Bin of a (rounded) size: floor(log2(size / 256)) capped at 20. */
int rp_bfc_bin_for_size(uint64_t size);

#ifdef __cplusplus
}
#endif
#endif /* RP_BFC_CORE_H */
