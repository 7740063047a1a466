/* c10_cuda.c: stands in for PyTorch's libc10_cuda.so in inject_sites_test: reports a request the
 * way its caching allocator does, through its GOT into libc10.so (loaded first, RTLD_GLOBAL).
 * type: c10::DeviceType (1: CUDA), index: the device. */
#include <stddef.h>
#include <stdint.h>

void _ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE(void *ptr, int64_t size, size_t total_allocated,
                                                          size_t total_reserved, uint16_t device);
void fake_c10_cuda_report(uint64_t ptr, int64_t size, int type, int index);

void fake_c10_cuda_report(uint64_t ptr, int64_t size, int type, int index) {
  _ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE((void *)(uintptr_t)ptr, size, 1000, 2000,
                                                       (uint16_t)((uint8_t)type | (uint8_t)index << 8));
}
