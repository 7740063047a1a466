/* c10.c: stands in for PyTorch's libc10.so in inject_sites_test: defines the function the
 * caching allocator reports each request to, c10::reportMemoryUsageToProfiler(void*, int64_t,
 * size_t, size_t, c10::Device) under its mangled name, and remembers what reached it. */
#include <stddef.h>
#include <stdint.h>

void _ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE(void *ptr, int64_t size, size_t total_allocated,
                                                          size_t total_reserved, uint16_t device);

int fake_c10_reports;
uint64_t fake_c10_last[5];

void _ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE(void *ptr, int64_t size, size_t total_allocated,
                                                          size_t total_reserved, uint16_t device) {
  fake_c10_reports++;
  fake_c10_last[0] = (uint64_t)(uintptr_t)ptr;
  fake_c10_last[1] = (uint64_t)size;
  fake_c10_last[2] = total_allocated;
  fake_c10_last[3] = total_reserved;
  fake_c10_last[4] = device;
}
