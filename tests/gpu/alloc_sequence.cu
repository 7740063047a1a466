// alloc_sequence.cu: a known sequence of CUDA allocations whose gpurec trace must contain
// exactly these events, sizes and streams (tests/gpu/check_alloc_sequence.py compares).
// Prints one "EXPECT kind addr size stream_tag" line per event it makes; stream_tag is
// "-" (no stream) or s1/s2 (the checker requires two distinct trace stream ids for them).
// Build (no GPU needed): nvcc -O2 -o alloc_sequence tests/gpu/alloc_sequence.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CD(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { \
  fprintf(stderr, "%s: %d\n", #x, (int)e_); exit(1); } } while (0)

static void expect(const char *kind, const void *addr, size_t size, const char *stream) {
  printf("EXPECT %s 0x%llx %zu %s\n", kind, (unsigned long long)(uintptr_t)addr, size, stream);
}

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(0));  // context
  void *a, *b, *c, *d, *e;
  const size_t sa = 1 << 20, sb = (3 << 20) + 123, sc = 3 * 4096, sd = 5 << 20;
  CK(cudaMalloc(&a, sa)); expect("alloc", a, sa, "-");
  CK(cudaMalloc(&b, sb)); expect("alloc", b, sb, "-");
  CK(cudaFree(a)); expect("free", a, sa, "-");
  CK(cudaFree(b)); expect("free", b, sb, "-");

  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CK(cudaMallocAsync(&c, sc, s1)); expect("alloc", c, sc, "s1");
  CK(cudaMallocAsync(&d, sd, s2)); expect("alloc", d, sd, "s2");
  CK(cudaFreeAsync(c, s1)); expect("free", c, sc, "s1");
  CK(cudaFreeAsync(d, s2)); expect("free", d, sd, "s2");
  CK(cudaDeviceSynchronize());

  const size_t huge = (size_t)1 << 50;  // 1 PiB: must fail
  if (cudaMalloc(&e, huge) == cudaSuccess) { fprintf(stderr, "1 PiB cudaMalloc succeeded?\n"); return 1; }
  cudaGetLastError();
  expect("alloc_failed", 0, huge, "-");
  if (cudaMallocAsync(&e, huge, s1) == cudaSuccess) { fprintf(stderr, "1 PiB async succeeded?\n"); return 1; }
  cudaGetLastError();
  expect("alloc_failed", 0, huge, "s1");

  // VMM, as expandable segments use it
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  CD(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUdeviceptr va;
  CD(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0)); expect("vmm_reserve", (void *)va, 4 * gran, "-");
  CUmemGenericAllocationHandle h;
  CD(cuMemCreate(&h, 2 * gran, &prop, 0));
  CD(cuMemMap(va, 2 * gran, 0, h, 0)); expect("vmm_map", (void *)va, 2 * gran, "-");
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CD(cuMemSetAccess(va, 2 * gran, &acc, 1));
  CD(cuMemUnmap(va, 2 * gran)); expect("vmm_unmap", (void *)va, 2 * gran, "-");
  CD(cuMemRelease(h));
  CD(cuMemAddressFree(va, 4 * gran)); expect("vmm_release", (void *)va, 4 * gran, "-");

  // a too-large physical allocation fails: the OOM of expandable segments
  CUmemGenericAllocationHandle h2;
  const size_t hugep = ((size_t)1 << 50) / gran * gran;
  if (cuMemCreate(&h2, hugep, &prop, 0) == CUDA_SUCCESS) { fprintf(stderr, "1 PiB cuMemCreate succeeded?\n"); return 1; }
  expect("alloc_failed", 0, hugep, "-");

  cudaMemPool_t pool;
  CK(cudaDeviceGetDefaultMemPool(&pool, 0));
  CK(cudaMemPoolTrimTo(pool, 0)); expect("empty_cache", 0, 0, "-");
  CK(cudaStreamDestroy(s1));
  CK(cudaStreamDestroy(s2));
  printf("DONE\n");
  return 0;
}
