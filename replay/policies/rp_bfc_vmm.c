/* rp_bfc_vmm.c: TensorFlow's GpuVirtualMemAllocator, rule by rule (see rp_bfc_vmm.h). */
#include "replay/policies/rp_bfc_vmm.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

gm_status_t rp_bfc_vmm_init(rp_bfc_vmm_t *v, const rp_driver_t *drv, uint64_t va_bytes, gm_err_t *err) {
  memset(v, 0, sizeof *v);
  uint64_t g = drv->granularity;
  if (!drv->va_reserve || !drv->va_release || !drv->map || !drv->unmap)
    return gm_err_set(err, GM_ERR_INVAL, "the VMM sub-allocator needs a driver with VMM calls");
  if (g == 0 || (g & (g - 1)))
    return gm_err_set(err, GM_ERR_INVAL, "VMM granularity %" PRIu64 " is not a power of two", g);
  if (va_bytes == 0 || va_bytes > UINT64_MAX - g)
    return gm_err_set(err, GM_ERR_INVAL, "VMM reservation of %" PRIu64 " bytes", va_bytes);
  v->gran = g;
  v->va_size = (va_bytes + g - 1) & ~(g - 1); /* AlignUp(virtual_address_space_size, granularity) */
  gm_status_t st = drv->va_reserve(drv->ctx, v->va_size, &v->base);
  if (st < 0) return gm_err_set(err, st, "cannot reserve %" PRIu64 " bytes of address space", v->va_size);
  v->reserved = 1;
  return GM_OK;
}

gm_status_t rp_bfc_vmm_alloc(rp_bfc_vmm_t *v, const rp_driver_t *drv, uint64_t bytes, uint64_t *addr,
                             uint64_t *received, gm_err_t *err) {
  if (bytes == 0) return GM_ERR_NOMEM; /* Alloc(0) returns nullptr */
  uint64_t room = v->va_size - v->next_off;
  /* next_va + padded > base + size, written so that a huge request cannot wrap around */
  if (bytes > room) {
    v->va_ooms++;
    return GM_ERR_NOMEM;
  }
  uint64_t padded = (bytes + v->gran - 1) & ~(v->gran - 1);
  if (padded > room) {
    v->va_ooms++;
    return GM_ERR_NOMEM;
  }
  if (v->n == v->cap) {
    size_t nc = v->cap ? 2 * v->cap : 16;
    rp_bfc_mapping_t *nm = realloc(v->m, nc * sizeof *nm);
    if (!nm) return gm_err_set(err, GM_ERR_NOMEM, "bfc: out of host memory");
    v->m = nm;
    v->cap = nc;
  }
  uint64_t va = v->base + v->next_off;
  gm_status_t st = drv->map(drv->ctx, va, padded); /* CreateMemoryHandle + MapMemory */
  if (st == GM_ERR_NOMEM) return GM_ERR_NOMEM;
  if (st < 0) return gm_err_set(err, st, "bfc: mapping %" PRIu64 " bytes at 0x%" PRIx64, padded, va);
  v->next_off += padded;
  v->m[v->n++] = (rp_bfc_mapping_t){va, padded};
  v->mapped += padded;
  *addr = va;
  *received = padded;
  return GM_OK;
}

static size_t lower_bound(const rp_bfc_vmm_t *v, uint64_t va) {
  size_t lo = 0, hi = v->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v->m[mid].va < va)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

gm_status_t rp_bfc_vmm_free(rp_bfc_vmm_t *v, const rp_driver_t *drv, uint64_t addr, uint64_t bytes, gm_err_t *err) {
  size_t first = lower_bound(v, addr);
  if (first == v->n || v->m[first].va != addr) { /* "Could not find GPU vmem mapping": nothing done */
    v->refused_frees++;
    return GM_OK;
  }
  /* TF's loop, with its types: `int total_bytes` compared with and added to size_t/uint64
   * values. On the compilers TF is built with, the sum wraps modulo 2^32 into the int, and
   * the comparisons read the int sign-extended to 64 bits. */
  int32_t total = 0;
  size_t k = first;
  while (k < v->n && (uint64_t)(int64_t)total < bytes) {
    total = (int32_t)(uint32_t)((uint64_t)(int64_t)total + v->m[k].size);
    k++;
  }
  if ((uint64_t)(int64_t)total != bytes) { /* "Invalid size requested for freeing": kept */
    v->refused_frees++;
    return GM_OK;
  }
  for (size_t i = first; i < k; i++) {
    gm_status_t st = drv->unmap(drv->ctx, v->m[i].va, v->m[i].size);
    if (st < 0) return gm_err_set(err, st, "bfc: unmapping 0x%" PRIx64, v->m[i].va);
    v->mapped -= v->m[i].size;
  }
  if (k == v->n) v->next_off = addr - v->base; /* the free reached the end */
  memmove(v->m + first, v->m + k, (v->n - k) * sizeof *v->m);
  v->n -= k - first;
  return GM_OK;
}

gm_status_t rp_bfc_vmm_release(rp_bfc_vmm_t *v, const rp_driver_t *drv, gm_err_t *err) {
  while (v->n > 0) {
    rp_bfc_mapping_t mp = v->m[v->n - 1];
    gm_status_t st = drv->unmap(drv->ctx, mp.va, mp.size);
    if (st < 0) return gm_err_set(err, st, "bfc: unmapping 0x%" PRIx64, mp.va);
    v->mapped -= mp.size;
    v->n--;
  }
  v->next_off = 0;
  if (v->reserved) {
    gm_status_t st = drv->va_release(drv->ctx, v->base, v->va_size);
    if (st < 0) return gm_err_set(err, st, "bfc: releasing the address reservation");
    v->reserved = 0;
  }
  return GM_OK;
}

void rp_bfc_vmm_fini(rp_bfc_vmm_t *v) {
  free(v->m);
  v->m = NULL;
  v->n = v->cap = 0;
}

int rp_bfc_vmm_tiles(const rp_bfc_vmm_t *v, uint64_t addr, uint64_t size) {
  size_t i = lower_bound(v, addr);
  uint64_t at = addr, end = addr + size;
  while (at < end) {
    if (i == v->n || v->m[i].va != at) return 0;
    at += v->m[i++].size;
  }
  return at == end;
}

gm_status_t rp_bfc_vmm_check(const rp_bfc_vmm_t *v, gm_err_t *err) {
  uint64_t sum = 0, prev_end = v->base;
  for (size_t i = 0; i < v->n; i++) {
    if (v->m[i].va < prev_end) return gm_err_set(err, GM_ERR_CORRUPT, "bfc: mapping 0x%" PRIx64 " out of order", v->m[i].va);
    if (v->m[i].size == 0 || v->m[i].size % v->gran || (v->m[i].va - v->base) % v->gran)
      return gm_err_set(err, GM_ERR_CORRUPT, "bfc: mapping 0x%" PRIx64 " not granule-aligned", v->m[i].va);
    prev_end = v->m[i].va + v->m[i].size;
    sum += v->m[i].size;
  }
  if (prev_end > v->base + v->next_off)
    return gm_err_set(err, GM_ERR_CORRUPT, "bfc: mappings end past the next offset %" PRIu64, v->next_off);
  if (v->next_off > v->va_size) return gm_err_set(err, GM_ERR_CORRUPT, "bfc: next offset past the reservation");
  if (sum != v->mapped) return gm_err_set(err, GM_ERR_CORRUPT, "bfc: mapped %" PRIu64 ", mappings sum %" PRIu64, v->mapped, sum);
  return GM_OK;
}
