/* rec_torch_entry.c: one entry of PyTorch's allocator trace into the recorder's ring, on the
 * allocating thread, under PyTorch's per-device allocator lock (rec_torch_stream.c attaches it).
 *
 * Workload: a training step makes ~1,000-2,000 allocations, each three entries (alloc,
 * free_requested, free_completed), a few segment entries; from the Python thread and autograd's.
 * The cost that matters is the cache lines, data and code, touched per entry while the step's
 * own work evicts them (bench/RESULTS.md: ~550 ns per allocation in a step against ~250 ns in a
 * tight loop). So an entry's data is few lines: this file's state (one line, the kinds table
 * in it), its thread's block (one line: clock, last free), the core's flags with the ring's
 * address (one line), the ring's head with the slots' address (one line), its slot; and its code
 * is one stretch: the ring's push and the clock's common case inline, the rare paths (a full
 * ring, a calibration) out of line, the hot functions grouped by the linker (.text.hot). */
#include "recorder/rec_torch_entry.h"

#include <stdatomic.h>
#include <string.h>

#include "recorder/rec_tclock.h"

/* Read by every entry: one cache line (the kinds table in it). */
static _Alignas(64) struct {
  _Atomic(rec_core_t *) core;
  rec_callsites_t *cs; /* NULL: requests without callsites */
  uint64_t (*now)(void *);
  _Atomic int bench; /* REC_TS_BENCH_* */
  _Atomic int entry_ticks; /* 1: the entry's time_ is the counter (checked); 0: read it here */
  /* the history's action -> the event kind gpurec import makes of it (snap_import.c
   * action_kind); 0: not an event (a snapshot call) */
  uint8_t kind_of[REC_TE_ACTIONS];
  _Atomic uint64_t lost;
} S = {.entry_ticks = REC_TCLOCK_TICKS,
       .kind_of = {
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

/* Per thread, in one cache line (a thread-local access in a shared library is a call): its
 * clock and the address of its last free_requested, whose free_completed, when it is the
 * thread's next entry (no stream-event wait), takes the same time without reading the clock
 * again: the clock's last reading. */
typedef struct thread_block {
  rec_tclock_t clock;
  uint64_t freed_addr;
  uint32_t checks; /* entries since this thread last checked an entry's counter reading */
#if !REC_TCLOCK_TICKS
  uint64_t last; /* the last time read (the counter clock keeps its own) */
#endif
} thread_block_t;
static _Thread_local _Alignas(64) thread_block_t T;

void rec_ts_entry_start(rec_core_t *core, rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx)) {
  S.now = now_ns;
  S.cs = cs;
  atomic_store_explicit(&S.core, core, memory_order_release);
}

/* The counter reading an entry carries is PyTorch's own __rdtsc() of a moment before: the same
 * clock as ours, read once instead of twice (an rdtsc is ~25-40 cycles of the entry's ~100). Each
 * thread checks it against its own reading on its first entry and every 256th after: a reading
 * from the future, from more than ~5 s before, or 0 (a torch built without C10_RDTSC stores
 * nanoseconds since 1970 there; another layout, something else) turns it off for every thread
 * for good, and the entry takes the counter's own reading. */
#define CHECK_EVERY 256
#define CHECK_MAX_AGE (1ull << 34) /* ticks: ~5.7 s at 3 GHz */

static __attribute__((cold, noinline)) uint64_t check_tick(uint64_t tick) {
  uint64_t own = rec_tclock_ticks();
  if (tick == 0 || tick > own || own - tick > CHECK_MAX_AGE) {
    atomic_store_explicit(&S.entry_ticks, 0, memory_order_relaxed);
    return own;
  }
  return tick;
}

static uint64_t entry_time(thread_block_t *t, const unsigned char *te) {
  if (!S.now) return 0;
#if REC_TCLOCK_TICKS
  uint64_t tick;
  if (atomic_load_explicit(&S.entry_ticks, memory_order_relaxed)) {
    memcpy(&tick, te + REC_TE_OFF_TIME, sizeof tick);
    if (__builtin_expect(t->checks++ % CHECK_EVERY == 0, 0)) tick = check_tick(tick);
  } else {
    tick = rec_tclock_ticks();
  }
  return rec_tclock_read_inline(&t->clock, tick, S.now, NULL);
#else
  (void)te;
  return t->last = S.now(NULL);
#endif
}

/* The time entry_time() gave last on this thread. */
static uint64_t last_time(const thread_block_t *t) {
#if REC_TCLOCK_TICKS
  return t->clock.last;
#else
  return t->last;
#endif
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
  /* the thread's entry before was this block's free_requested: its time (any other entry in
   * between, and the free_completed reads the clock) */
  /* one look-up of the thread's block: in a shared library each is a call of __tls_get_addr,
   * which the compiler would otherwise repeat at every use rather than keep the address (4 calls
   * per entry seen); the empty asm makes the address a value it must keep */
  thread_block_t *t = &T;
  __asm__("" : "+r"(t));
  ev.ts_ns = action == REC_TE_FREE_COMPLETED && t->freed_addr == addr && addr ? last_time(t) : entry_time(t, te);
  t->freed_addr = action == REC_TE_FREE_REQUESTED ? addr : 0;
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

int rec_ts_entry_own_ticks(void) { return atomic_load(&S.entry_ticks); }

int rec_ts_entry_bench(int mode) {
  if (mode < REC_TS_BENCH_FULL || mode > REC_TS_BENCH_NO_SITES) return -1;
  return atomic_exchange(&S.bench, mode);
}
