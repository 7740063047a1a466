/* rec_torch_stream.h: PyTorch's caching-allocator trace, streamed into the recorder's trace as it
 * happens (rec_torch_stream.c), for gpurec's default mode. */
#ifndef REC_TORCH_STREAM_H
#define REC_TORCH_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "recorder/rec_callsite.h"
#include "recorder/rec_core.h"
#include "recorder/rec_torch_entry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where PyTorch keeps what the attach needs (torch 2.11, mangled names; test stand-ins use the
 * same names). The allocator is c10::cuda::CUDACachingAllocator::allocator, an
 * std::atomic<CUDAAllocator*>; the slot of attachAllocatorTraceTracker in CUDAAllocator's vtable
 * is read off CUDAPluggableAllocator's vtable, the one CUDAAllocator subclass whose override
 * libtorch_cuda.so exports. */
#define REC_TS_C10_OBJECT "libc10_cuda.so"
#define REC_TS_TORCH_OBJECT "libtorch_cuda.so"
#define REC_TS_ALLOCATOR "_ZN3c104cuda20CUDACachingAllocator9allocatorE"
#define REC_TS_PLUGGABLE_VTABLE "_ZTVN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocatorE"
#define REC_TS_PLUGGABLE_ATTACH                                                               \
  "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator27attachAllocatorTraceTracker" \
  "ESt8functionIFvRKN3c1022CachingDeviceAllocator10TraceEntryEEE"

/* torch releases whose TraceEntry layout this file reads (checked against their headers). */
int rec_torch_stream_known(const char *torch_version);

/* Attach a tracker to PyTorch's allocator: from then on every entry of its trace (alloc,
 * free_requested, free_completed, segment alloc/free/map/unmap, oom) is pushed into core as an
 * event flagged GMT_F_TORCH_STREAM, on now_ns's clock, each alloc with its callsite from cs
 * (NULL: none), on the allocating thread under PyTorch's
 * per-device allocator lock (no GIL, no PyTorch call). c10_obj and torch_obj name the loaded
 * libraries (REC_TS_*_OBJECT). Returns 0, or -1 with why (not loaded, a symbol missing, the
 * slot not found, an unknown torch): the caller then falls back to PyTorch's memory history. */
int rec_torch_stream_attach(rec_core_t *core, rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx),
                            const char *torch_version, const char *c10_obj, const char *torch_obj,
                            char *why, size_t nwhy);

/* Entries lost so far (the recorder's ring stayed full past the wait). */
uint64_t rec_torch_stream_lost(void);

/* For benchmarks only (tests/gpu/stream_cost.py, through gpumem_bench_stream): rec_ts_entry_bench
 * (REC_TS_BENCH_*), -1 if not attached. */
int rec_torch_stream_bench(int mode);

#ifdef __cplusplus
}
#endif
#endif /* REC_TORCH_STREAM_H */
