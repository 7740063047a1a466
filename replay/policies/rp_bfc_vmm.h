/* rp_bfc_vmm.h: TensorFlow's GpuVirtualMemAllocator, the VMM sub-allocator under the BFC
 * core when rp_bfc_opts_t.sub_allocator is RP_BFC_SUB_VMM (private to the policies package).
 *
 * Source: tensorflow/core/common_runtime/gpu/gpu_virtual_mem_allocator.cc (TF 2.4-2.15;
 * GpuVirtualMemAllocator::Create, ::Alloc, ::Free) and gpu_process_state.cc CreateSubAllocator,
 * which would reserve `virtual_address_space_size = total_bytes * 2`. In every stored TF
 * version that has it, that branch is compiled out (`#if 0 && ... CUDA_VERSION >= 10020`,
 * "FIXME(imintz): Observed OOM issues when using the virtual memory allocators"), and current
 * TF has dropped it: TF's GPU BFC runs on DeviceMemAllocator (cuMemAlloc, no coalescing).
 * This models the compiled-out path, for what-if replays; `tf` never selects it.
 *
 * Rules (each from the source):
 *  - Create: one VA reservation of AlignUp(va_bytes, granularity), granularity = the device's
 *    minimum VMM granularity (2 MiB on current GPUs).
 *  - Alloc(n): padded = n rounded up to the granularity. If next_offset + padded passes the
 *    end of the reservation: nullptr (LOG(ERROR) "OOM in GPU virtual memory allocator").
 *    Else create + map padded bytes at base + next_offset (either can fail: nullptr),
 *    next_offset += padded, bytes_received = padded. Mappings stay sorted by address.
 *  - Free(ptr, n): the mapping that starts at ptr and the ones after it, summed in an `int`
 *    (`int total_bytes`) while the sum, read as size_t, is < n. Unless that sum equals n,
 *    nothing is unmapped (LOG(ERROR) "Invalid size requested") - for a region of 2 GiB or
 *    more the int sum never equals n, so such a free is always refused and the memory stays
 *    mapped while BFC counts it as returned. Else every one of those mappings is unmapped,
 *    and if they were the last ones next_offset moves back to ptr (VA freed in the middle is
 *    never reused).
 *  - Destructor: unmap every mapping left, free the reservation. */
#ifndef RP_BFC_VMM_H
#define RP_BFC_VMM_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"
#include "replay/policies/rp_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rp_bfc_mapping {
  uint64_t va, size;
} rp_bfc_mapping_t;

typedef struct rp_bfc_vmm {
  uint64_t base, va_size, gran; /* the reservation and the padding unit */
  uint64_t next_off;            /* next_alloc_offset_ */
  rp_bfc_mapping_t *m;          /* mappings_, sorted by va */
  size_t n, cap;
  uint64_t mapped;              /* sum of mapping sizes */
  uint64_t va_ooms;             /* Alloc refused for lack of address space */
  uint64_t refused_frees;       /* Free refused by the size check (memory left mapped) */
  int reserved;
} rp_bfc_vmm_t;

/* Create: reserve AlignUp(va_bytes, drv->granularity). GM_ERR_INVAL if the driver has no VMM
 * calls or its granularity is not a power of two. */
gm_status_t rp_bfc_vmm_init(rp_bfc_vmm_t *v, const rp_driver_t *drv, uint64_t va_bytes, gm_err_t *err);
/* Alloc: GM_OK (*addr, *received = padded), GM_ERR_NOMEM (no address space, or the driver
 * refused the pages: TF's nullptr either way), another status: backend failure. */
gm_status_t rp_bfc_vmm_alloc(rp_bfc_vmm_t *v, const rp_driver_t *drv, uint64_t bytes, uint64_t *addr,
                             uint64_t *received, gm_err_t *err);
/* Free: GM_OK whether the mappings went or the size check kept them (TF only logs); another
 * status: the driver failed an unmap. */
gm_status_t rp_bfc_vmm_free(rp_bfc_vmm_t *v, const rp_driver_t *drv, uint64_t addr, uint64_t bytes, gm_err_t *err);
/* Destructor's driver part: unmap everything left, release the reservation. */
gm_status_t rp_bfc_vmm_release(rp_bfc_vmm_t *v, const rp_driver_t *drv, gm_err_t *err);
/* Host memory only. */
void rp_bfc_vmm_fini(rp_bfc_vmm_t *v);
/* Is [addr, addr + size) exactly a run of consecutive live mappings? */
int rp_bfc_vmm_tiles(const rp_bfc_vmm_t *v, uint64_t addr, uint64_t size);
/* Mappings sorted, disjoint, inside [base, base + next_off); `mapped` their sum. */
gm_status_t rp_bfc_vmm_check(const rp_bfc_vmm_t *v, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* RP_BFC_VMM_H */
