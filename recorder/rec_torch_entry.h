/* rec_torch_entry.h: one entry of PyTorch's allocator trace into the recorder's ring
 * (rec_torch_entry.c): the tracker's body, apart from the attach (rec_torch_stream.c) so that
 * tests and benchmarks call it with entries of their own. */
#ifndef REC_TORCH_ENTRY_H
#define REC_TORCH_ENTRY_H

#include <stdint.h>

#include "recorder/rec_callsite.h"
#include "recorder/rec_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TraceEntry, torch 2.11 (c10/core/CachingDeviceAllocator.h): int action_ at 0, int8 device_ at
 * 4, size_t addr_ at 8, a shared_ptr context_ at 16, void *stream_ at 32, size_t size_ at 40,
 * MempoolId_t (two u64) mempool_ at 48, trace_time_ time_ at 64: on x86-64 the CPU's time-stamp
 * counter that record_trace read just before calling the trackers (c10::getApproximateTime(),
 * __rdtsc() where C10_RDTSC, as on Linux x86-64; never converted before the history's snapshot). */
enum { REC_TE_ALLOC, REC_TE_FREE_REQUESTED, REC_TE_FREE_COMPLETED, REC_TE_SEGMENT_ALLOC,
       REC_TE_SEGMENT_FREE, REC_TE_SEGMENT_MAP, REC_TE_SEGMENT_UNMAP, REC_TE_SNAPSHOT, REC_TE_OOM,
       REC_TE_ACTIONS };
#define REC_TE_OFF_ACTION 0
#define REC_TE_OFF_DEVICE 4
#define REC_TE_OFF_ADDR 8
#define REC_TE_OFF_STREAM 32
#define REC_TE_OFF_SIZE 40
#define REC_TE_OFF_TIME 64
#define REC_TE_BYTES 72 /* what is read of an entry */

/* From now on rec_ts_entry() pushes into core (NULL: ignores entries), each alloc with its
 * callsite from cs (NULL: none). Times: on x86-64 the entry's counter reading, which the core
 * puts on its hooks.now_ns clock (REC_TS_TICKS); elsewhere now_ns read per entry. Once, before
 * the first entry. */
void rec_ts_entry_start(rec_core_t *core, rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx));

/* One entry (its bytes in torch 2.11's layout, time_ included), on the allocating thread: one
 * event flagged GMT_F_TORCH_STREAM, the alloc's with its callsite. The signature of a
 * std::function's invoker (functor unused). */
void rec_ts_entry(const void *functor, const void *entry);

/* Entries lost so far (the recorder's ring stayed full past the wait). */
uint64_t rec_ts_entry_lost(void);

/* For benchmarks and tests (tests/gpu/stream_cost.py, through gpumem_bench_stream): what the
 * tracker does with each entry, to price each part in one process. Returns the previous mode,
 * -1 for a mode unknown. */
enum { REC_TS_BENCH_FULL = 0, REC_TS_BENCH_IGNORE = 1, REC_TS_BENCH_NO_SITES = 2 };
int rec_ts_entry_bench(int mode);

#ifdef __cplusplus
}
#endif
#endif /* REC_TORCH_ENTRY_H */
