/* rec_torch_entry.c: one entry of PyTorch's allocator trace into the recorder's ring, on the
 * allocating thread, under PyTorch's per-device allocator lock (rec_torch_stream.c attaches it).
 *
 * Workload: a training step makes ~1,000-2,000 allocations, each three entries (alloc,
 * free_requested, free_completed), a few segment entries; from the Python thread and autograd's.
 * The cost that matters is the cache lines, data and code, touched per entry while the step's
 * own work evicts them (bench/RESULTS.md: ~550 ns per allocation in a step against ~250 ns in a
 * tight loop). So an entry's data is few lines: this file's state (one line, the kinds table
 * in it), the core's flags with the ring's head on the next line, its slot; no thread-local
 * block (in a shared library each thread-local access is a call into the loader); and its code
 * is one stretch: the ring's push inline, the rare paths (a full ring) out of line, the hot
 * functions grouped by the linker (.text.hot).
 * Time: the entry carries PyTorch's own reading of the CPU's counter, taken just before the
 * trackers are called (TraceEntry.time_); it goes into the ring as it is (REC_TS_TICKS) and the
 * core's writer thread puts it on the recorder's clock: no clock read, no clock arithmetic and no
 * per-thread clock state here. A reading that is not the counter's (another torch build) is
 * found by the writer, and the core reads the counter itself from then on (rec_core.h). */
#include "recorder/rec_torch_entry.h"

#include <stdatomic.h>
#include <string.h>

/* Read by every entry: one cache line (the kinds table in it). */
static _Alignas(64) struct {
  _Atomic(rec_core_t *) core;
  rec_callsites_t *cs; /* NULL: requests without callsites */
  uint64_t (*now)(void *);
  _Atomic int bench; /* REC_TS_BENCH_* */
  /* the history's action -> the event kind gpurec import makes of it (snap_import.c
   * action_kind); 0: not an event (a snapshot call) */
  uint8_t kind_of[REC_TE_ACTIONS];
  _Atomic uint64_t lost;
} S = {.kind_of = {
           [REC_TE_ALLOC] = GMT_EV_ALLOC,
           [REC_TE_FREE_REQUESTED] = GMT_EV_FREE_REQUESTED,
           [REC_TE_FREE_COMPLETED] = GMT_EV_FREE,
           [REC_TE_SEGMENT_ALLOC] = GMT_EV_SEGMENT_ALLOC,
           [REC_TE_SEGMENT_FREE] = GMT_EV_SEGMENT_FREE,
           [REC_TE_SEGMENT_MAP] = GMT_EV_VMM_MAP,
           [REC_TE_SEGMENT_UNMAP] = GMT_EV_VMM_UNMAP,
           [REC_TE_SNAPSHOT] = 0,
           [REC_TE_OOM] = GMT_EV_ALLOC_FAILED,
       }};

/* How long an allocating thread waits for room in the recorder's ring before an entry is lost:
 * it holds PyTorch's allocator lock meanwhile, so a stall costs the job time, a loss the trace. */
#define REC_TS_MAX_WAIT_NS 100000000ull

void rec_ts_entry_start(rec_core_t *core, rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx)) {
  S.now = now_ns;
  S.cs = cs;
  atomic_store_explicit(&S.core, core, memory_order_release);
}

static void push(rec_core_t *core, const gmt_event_t *ev) {
  if (rec_core_push_entry(core, ev, REC_TS_MAX_WAIT_NS))
    atomic_fetch_add_explicit(&S.lost, 1, memory_order_relaxed);
}

/* hot: with the core's push and the callsite's lookup in one stretch of code (.text.hot), which a
 * step's own code evicts between allocations */
__attribute__((hot)) void rec_ts_entry(const void *functor, const void *entry) {
  (void)functor;
  rec_core_t *core = atomic_load_explicit(&S.core, memory_order_acquire);
  if (!core) return;
  int bench = atomic_load_explicit(&S.bench, memory_order_relaxed);
  if (bench == REC_TS_BENCH_IGNORE) return;
  const unsigned char *te = entry;
  int32_t action;
  int8_t device;
  uint64_t addr, size;
  void *stream;
  memcpy(&action, te + REC_TE_OFF_ACTION, sizeof action);
  memcpy(&device, te + REC_TE_OFF_DEVICE, sizeof device);
  memcpy(&addr, te + REC_TE_OFF_ADDR, sizeof addr);
  memcpy(&stream, te + REC_TE_OFF_STREAM, sizeof stream);
  memcpy(&size, te + REC_TE_OFF_SIZE, sizeof size);
  if (action < 0 || action >= REC_TE_ACTIONS || !S.kind_of[action] || device < 0) return;
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = S.kind_of[action];
#if REC_HAVE_TICKS
  /* PyTorch's counter reading, the writer puts it on the clock (rec_core.h, REC_TS_TICKS) */
  uint64_t tick;
  memcpy(&tick, te + REC_TE_OFF_TIME, sizeof tick);
  ev.ts_ns = (tick & ~REC_TS_TICKS) | REC_TS_TICKS;
#else
  ev.ts_ns = S.now ? S.now(NULL) : 0;
#endif
  ev.device = (uint16_t)device;
  ev.mem_kind = GMT_MEM_DEVICE;
  ev.flags = GMT_F_TORCH_STREAM;
  ev.size = size;
  ev.stream = (uint64_t)(uintptr_t)stream;
  ev.callsite = GMT_NO_STRING;
  /* the request's line of code, read here on the allocating thread (rec_callsite.c: a cache
   * lookup once the line has been seen): one event carries both, no second hook or note */
  if (action == REC_TE_ALLOC && S.cs && bench != REC_TS_BENCH_NO_SITES) ev.callsite = rec_callsites_capture(S.cs);
  if (action == REC_TE_OOM) {
    ev.corr_id = addr; /* an OOM's addr_ is the device's free bytes: the merge takes it from here */
  } else {
    ev.addr = addr;
  }
  push(core, &ev);
}

uint64_t rec_ts_entry_lost(void) { return atomic_load(&S.lost); }

int rec_ts_entry_bench(int mode) {
  if (mode < REC_TS_BENCH_FULL || mode > REC_TS_BENCH_NO_SITES) return -1;
  return atomic_exchange(&S.bench, mode);
}
