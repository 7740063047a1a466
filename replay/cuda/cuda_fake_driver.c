/* cuda_fake_driver.c: a stand-in libcuda.so.1 for testing the cuda backend without a GPU.
 *
 * Built as replay/cuda/cudafake/libcuda.so.1; a test that puts that folder on LD_LIBRARY_PATH
 * makes cuda_backend.c's dlopen("libcuda.so.1") find it, so the whole backend (symbol
 * loading, error conversion, segment/VMM/pool calls, address handling, capacity, leak
 * cleanup at destroy) runs in CI. Only the functions the backend resolves exist.
 *
 * Model: one device of 8 GiB, VMM granularity 2 MiB. Device addresses come from a
 * first-fit-from-the-top allocator over a 1 TiB window that reuses freed ranges, so, like
 * the real driver's (see the addresses in traces/snapshots), they are not increasing: a
 * policy that breaks ties by address can decide differently on real addresses than on the
 * simulator's. Physical memory is counted (cuMemAlloc, cuMemCreate, pool allocations) and
 * CUDA_ERROR_OUT_OF_MEMORY is returned past 8 GiB. Misuse (freeing an unknown address,
 * mapping outside a reservation, unmapping what is not mapped) returns
 * CUDA_ERROR_INVALID_VALUE, which the tests expect never to see. Not thread-safe.
 * The functions are those of cuda_driver.h, under their exported (`_v2`) names. */
#include "replay/cuda/cuda_driver.h"
#include <stdlib.h>
#include <string.h>

#define FAKE_TOTAL (8ull << 30)
#define FAKE_GRAN (2ull << 20)
#define VA_LO 0x7e0000000000ull
#define VA_HI (VA_LO + (1ull << 40))
#define MAX_RANGES 65536

typedef struct range {
  uint64_t lo, size;
  int kind; /* 1 cuMemAlloc, 2 reservation, 3 pool allocation */
} range_t;

static range_t ranges[MAX_RANGES]; /* live address ranges, sorted by lo */
static size_t n_ranges;
static uint64_t used;              /* physical bytes in use */
static int pool_made;
static uint64_t pool_bytes;

typedef struct mapping {
  uint64_t va, size, handle;
} mapping_t;
static mapping_t maps[MAX_RANGES];
static size_t n_maps;
static uint64_t handle_size[MAX_RANGES]; /* by handle id; 0 = free */
static uint64_t next_handle = 1;

/* The highest gap that fits size (aligned to FAKE_GRAN), placed at its top. */
static uint64_t va_take(uint64_t size, int kind) {
  size = (size + FAKE_GRAN - 1) / FAKE_GRAN * FAKE_GRAN;
  if (n_ranges == MAX_RANGES) return 0;
  uint64_t hi = VA_HI;
  for (size_t i = n_ranges + 1; i-- > 0;) {
    uint64_t lo = i ? ranges[i - 1].lo + ranges[i - 1].size : VA_LO;
    if (hi >= lo && hi - lo >= size) {
      uint64_t at = hi - size;
      memmove(&ranges[i + 1], &ranges[i], (n_ranges - i) * sizeof *ranges);
      ranges[i] = (range_t){at, size, kind};
      n_ranges++;
      return at;
    }
    if (i) hi = ranges[i - 1].lo;
  }
  return 0;
}

static int va_give(uint64_t lo, int kind, uint64_t *size) {
  for (size_t i = 0; i < n_ranges; i++)
    if (ranges[i].lo == lo && ranges[i].kind == kind) {
      *size = ranges[i].size;
      memmove(&ranges[i], &ranges[i + 1], (n_ranges - i - 1) * sizeof *ranges);
      n_ranges--;
      return 1;
    }
  return 0;
}

static int in_reservation(uint64_t va, uint64_t size) {
  for (size_t i = 0; i < n_ranges; i++)
    if (ranges[i].kind == 2 && va >= ranges[i].lo && va + size <= ranges[i].lo + ranges[i].size)
      return 1;
  return 0;
}

CUresult CUDAAPI cuInit(unsigned int flags) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int *v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int *n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
  *bytes = FAKE_TOTAL;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  static int ctx_token;
  *c = (CUcontext)&ctx_token;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice d) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSynchronize(void) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_b, size_t *total) {
  *free_b = FAKE_TOTAL - used;
  *total = FAKE_TOTAL;
  return CUDA_SUCCESS;
}

static uint64_t phys(uint64_t size) { return (size + FAKE_GRAN - 1) / FAKE_GRAN * FAKE_GRAN; }

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *p, size_t size) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (used + phys(size) > FAKE_TOTAL) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t a = va_take(size, 1);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  used += phys(size);
  *p = (CUdeviceptr)a;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) {
  uint64_t size;
  if (!va_give((uint64_t)p, 1, &size)) return CUDA_ERROR_INVALID_VALUE;
  used -= size;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                     unsigned long long flags) {
  if (size == 0 || size % FAKE_GRAN) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a = va_take(size, 2);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)a;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr p, size_t size) {
  uint64_t s;
  for (size_t i = 0; i < n_maps; i++)
    if (maps[i].va >= (uint64_t)p && maps[i].va < (uint64_t)p + size) return CUDA_ERROR_INVALID_VALUE;
  return va_give((uint64_t)p, 2, &s) && s == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option) {
  *g = FAKE_GRAN;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags) {
  if (size == 0 || size % FAKE_GRAN || next_handle >= MAX_RANGES) return CUDA_ERROR_INVALID_VALUE;
  if (used + size > FAKE_TOTAL) return CUDA_ERROR_OUT_OF_MEMORY;
  used += size;
  handle_size[next_handle] = size;
  *h = next_handle++;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle h) {
  if (h == 0 || h >= MAX_RANGES || !handle_size[h]) return CUDA_ERROR_INVALID_VALUE;
  used -= handle_size[h];
  handle_size[h] = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                          unsigned long long flags) {
  if (!in_reservation((uint64_t)p, size) || h >= MAX_RANGES || handle_size[h] != size ||
      n_maps == MAX_RANGES)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n_maps; i++)
    if (maps[i].va < (uint64_t)p + size && (uint64_t)p < maps[i].va + maps[i].size)
      return CUDA_ERROR_INVALID_VALUE; /* already mapped */
  maps[n_maps++] = (mapping_t){(uint64_t)p, size, h};
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr p, size_t size) {
  for (size_t i = 0; i < n_maps; i++)
    if (maps[i].va == (uint64_t)p && maps[i].size == size) {
      maps[i] = maps[--n_maps];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count) {
  /* Every page of the range must be mapped. */
  for (uint64_t va = (uint64_t)p; va < (uint64_t)p + size; va += FAKE_GRAN) {
    size_t i = 0;
    while (i < n_maps && !(va >= maps[i].va && va < maps[i].va + maps[i].size)) i++;
    if (i == n_maps) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int flags) {
  static char streams[4096];
  static size_t n;
  if (n == sizeof streams) return CUDA_ERROR_OUT_OF_MEMORY;
  *s = (CUstream)&streams[n++];
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy_v2(CUstream s) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  static int pool_token;
  pool_made = 1;
  *pool = (CUmemoryPool)&pool_token;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  pool_made = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  if (attr != CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) return CUDA_ERROR_INVALID_VALUE;
  *(cuuint64_t *)value = pool_bytes;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) { return CUDA_SUCCESS; }

/* The pool keeps nothing cached: reservation = live allocations rounded to granules. */
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t size, CUmemoryPool pool,
                                         CUstream s) {
  if (!pool_made) return CUDA_ERROR_INVALID_VALUE;
  if (used + phys(size) > FAKE_TOTAL) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t a = va_take(size ? size : 1, 3);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  used += phys(size ? size : 1);
  pool_bytes += phys(size ? size : 1);
  *p = (CUdeviceptr)a;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  uint64_t size;
  if (!va_give((uint64_t)p, 3, &size)) return CUDA_ERROR_INVALID_VALUE;
  used -= size;
  pool_bytes -= size;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult r, const char **s) {
  switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}
