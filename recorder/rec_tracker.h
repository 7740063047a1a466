/* rec_tracker.h: PyTorch's caching-allocator requests streamed into a trace as they happen
 * (rec_tracker.c), gpurec's default source for PyTorch. CUDA-free and C: the C++ object it
 * talks to is reached through its symbol table and vtable, and checked before it is used. */
#ifndef REC_TRACKER_H
#define REC_TRACKER_H

#include <stddef.h>
#include <stdint.h>

#include "recorder/rec_callsite.h"
#include "recorder/rec_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library that holds PyTorch's CUDA allocator. */
#define REC_TRACKER_OBJECT "libc10_cuda.so"
/* c10::cuda::CUDACachingAllocator::allocator (std::atomic<CUDAAllocator*>, exported). */
#define REC_TRACKER_ALLOCATOR "_ZN3c104cuda20CUDACachingAllocator9allocatorE"
/* NativeCachingAllocator::attachAllocatorTraceTracker(
 *     std::function<void(const c10::CachingDeviceAllocator::TraceEntry&)>)
 * (a local symbol of libc10_cuda.so's .symtab): the mangled name pins the argument's type. */
#define REC_TRACKER_ATTACH                                                                    \
  "_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator27attachAllocatorTraceTrac" \
  "kerESt8functionIFvRKNS_22CachingDeviceAllocator10TraceEntryEEE"

/* Attach a tracker to the allocator of object (REC_TRACKER_OBJECT, or a test's stand-in) for
 * torch version `version` ("2.11.0+cu130"): each trace entry becomes one event pushed into core,
 * stamped with now_ns, allocations with the calling thread's callsite from cs (may be NULL).
 * Returns 1 when attached; -1 with why when not (a torch whose layout this recorder does not
 * know, a library without its symbol table, an allocator that is not the native one: the caller
 * falls back to the memory history); 0 when already attached. Never crashes on an unknown torch:
 * nothing is called before the version, the symbol and the vtable slot all check out. */
int rec_tracker_attach(const char *object, const char *version, rec_core_t *core,
                       rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx), char *why, size_t nwhy);

/* Stop pushing (a fork()ed child; the end of the recording): entries pass unrecorded. */
void rec_tracker_detach(void);

typedef struct rec_tracker_stats {
  uint64_t entries;  /* trace entries seen */
  uint64_t pushed;   /* events pushed into the core */
  uint64_t dropped;  /* events the core's ring refused (full) */
  uint64_t unknown;  /* entries of an action this recorder does not know (left out) */
  int slot;          /* the vtable slot of attachAllocatorTraceTracker; -1 before attaching */
} rec_tracker_stats_t;
void rec_tracker_stats(rec_tracker_stats_t *st);

/* 1 when version's TraceEntry layout is known (torch 2.11). */
int rec_tracker_version_known(const char *version);

#ifdef __cplusplus
}
#endif
#endif /* REC_TRACKER_H */
