/* rec_torch_stream.c: PyTorch's caching-allocator trace streamed into the recorder's trace, for
 * gpurec's default mode.
 *
 * Why: PyTorch's memory history is a ring of max_entries entries dumped at exit: it keeps only
 * the newest entries of a long job (nanoGPT's train.py fills a million in ~500 steps) and a
 * killed process dumps nothing. The allocator also calls its trace trackers for every entry it
 * would record, with the history off too (CUDACachingAllocator.cpp, record_trace: it returns
 * early only when there is neither a history nor a tracker), on the allocating thread under the
 * per-device allocator lock. A tracker sees every malloc, free_requested, free_completed (the
 * stream-event waits of record_stream), segment alloc/free/map/unmap and OOM, with address,
 * size, stream and device: exactly a history entry. Each becomes one event of the recorder's
 * trace (rec_core: buffered, flushed every 0.5 s, so a SIGKILL loses at most that), flagged
 * GMT_F_TORCH_STREAM; gpurec's merge (recorder/snapshot/snap_merge.c) turns them into the
 * requests of the final trace as it turns a history's entries.
 *
 * How, from C: the tracker is attached through a virtual method,
 *   CUDAAllocator::attachAllocatorTraceTracker(std::function<void(const TraceEntry&)>),
 * whose header-side wrapper is inline. So:
 *   - the allocator object is c10::cuda::CUDACachingAllocator::allocator (an exported
 *     std::atomic<CUDAAllocator*> in libc10_cuda.so);
 *   - the method's vtable slot is found, not assumed: libtorch_cuda.so exports
 *     CUDAPluggableAllocator's vtable and its override of the method, and a subclass keeps its
 *     base's slots, so the slot is where that vtable holds that override. The native
 *     allocator's entry in the slot must then point into libc10_cuda.so;
 *   - the std::function is built by hand in libstdc++'s layout (the Itanium C++ ABI that torch's
 *     wheels use): 16 bytes of stored functor, a manager, an invoker. Ours stores nothing; the
 *     manager clones and destroys nothing; the invoker is on_entry. Passed by value, a
 *     std::function goes as the address of a temporary the caller owns;
 *   - TraceEntry is read at the offsets of torch 2.11's layout (c10/core/CachingDeviceAllocator.h:
 *     int action_, int8 device_, size_t addr_ at 8, a shared_ptr context_ at 16, void *stream_ at
 *     32, size_t size_ at 40): rec_torch_stream_known() lists the releases checked.
 * Anything not as expected (a library not loaded, a symbol missing, no such slot, a torch not
 * listed) returns -1 with the reason, and gpurec's sitecustomize falls back to the history and
 * says so. Nothing here calls into PyTorch after the attach. */
#include "recorder/rec_torch_stream.h"

#include "recorder/rec_tclock.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---- TraceEntry (torch 2.11) ------------------------------------------------------------- */

enum { TE_ALLOC, TE_FREE_REQUESTED, TE_FREE_COMPLETED, TE_SEGMENT_ALLOC, TE_SEGMENT_FREE,
       TE_SEGMENT_MAP, TE_SEGMENT_UNMAP, TE_SNAPSHOT, TE_OOM, TE_ACTIONS };

#define TE_OFF_ACTION 0
#define TE_OFF_DEVICE 4
#define TE_OFF_ADDR 8
#define TE_OFF_STREAM 32
#define TE_OFF_SIZE 40

int rec_torch_stream_known(const char *v) {
  /* "2.11.0+cu130", "2.11.1", ...: the major.minor whose header was read */
  return v && strncmp(v, "2.11", 4) == 0 && (v[4] == 0 || v[4] == '.' || v[4] == '+');
}

/* The history's action -> the event kind gpurec import makes of it (snap_import.c action_kind);
 * 0: not an event (a snapshot call). */
static const uint8_t kind_of[TE_ACTIONS] = {
    [TE_ALLOC] = GMT_EV_ALLOC,
    [TE_FREE_REQUESTED] = GMT_EV_FREE_REQUESTED,
    [TE_FREE_COMPLETED] = GMT_EV_FREE,
    [TE_SEGMENT_ALLOC] = GMT_EV_SEGMENT_ALLOC,
    [TE_SEGMENT_FREE] = GMT_EV_SEGMENT_FREE,
    [TE_SEGMENT_MAP] = GMT_EV_VMM_MAP,
    [TE_SEGMENT_UNMAP] = GMT_EV_VMM_UNMAP,
    [TE_SNAPSHOT] = 0,
    [TE_OOM] = GMT_EV_ALLOC_FAILED,
};

static struct {
  _Atomic(rec_core_t *) core;
  rec_callsites_t *cs; /* NULL: requests without callsites */
  uint64_t (*now)(void *);
  _Atomic uint64_t lost;
  _Atomic int bench; /* rec_torch_stream_bench: REC_TS_BENCH_* */
  int attached;
} S;

/* How long an allocating thread waits for room in the recorder's ring before an entry is lost:
 * it holds PyTorch's allocator lock meanwhile, so a stall costs the job time, a loss the trace. */
#define REC_TS_MAX_WAIT_NS 100000000ull

/* ---- the entries' clock: rec_tclock.c, one per thread ---------------------------------------- */

/* Per thread, in one block (a thread-local access in a shared library is a call): its clock and
 * its last free_requested, whose free_completed, when it is the thread's next entry (no
 * stream-event wait), takes the same time without reading the clock again. */
static _Thread_local struct {
  rec_tclock_t clock;
  uint64_t freed_addr, freed_ts;
} T;

static uint64_t entry_time(void) {
  if (!S.now) return 0;
  if (!REC_TCLOCK_TICKS) return S.now(NULL);
  return rec_tclock_read(&T.clock, rec_tclock_ticks(), S.now, NULL);
}

static void on_entry(const void *functor, const void *entry) {
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
  memcpy(&action, te + TE_OFF_ACTION, sizeof action);
  memcpy(&device, te + TE_OFF_DEVICE, sizeof device);
  memcpy(&addr, te + TE_OFF_ADDR, sizeof addr);
  memcpy(&stream, te + TE_OFF_STREAM, sizeof stream);
  memcpy(&size, te + TE_OFF_SIZE, sizeof size);
  if (action < 0 || action >= TE_ACTIONS || !kind_of[action] || device < 0) return;
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = kind_of[action];
  /* the thread's entry before was this block's free_requested: its time (any other entry in
   * between, and the free_completed reads the clock) */
  ev.ts_ns = action == TE_FREE_COMPLETED && T.freed_addr == addr && addr ? T.freed_ts : entry_time();
  T.freed_addr = action == TE_FREE_REQUESTED ? addr : 0;
  T.freed_ts = ev.ts_ns;
  ev.device = (uint16_t)device;
  ev.mem_kind = GMT_MEM_DEVICE;
  ev.flags = GMT_F_TORCH_STREAM;
  ev.size = size;
  ev.stream = (uint64_t)(uintptr_t)stream;
  ev.callsite = GMT_NO_STRING;
  /* the request's line of code, read here on the allocating thread (rec_callsite.c: a cache
   * lookup once the line has been seen): one event carries both, no second hook or note */
  if (action == TE_ALLOC && S.cs && bench != REC_TS_BENCH_NO_SITES) ev.callsite = rec_callsites_capture(S.cs);
  if (action == TE_OOM) {
    ev.corr_id = addr; /* an OOM's addr_ is the device's free bytes: the merge takes it from here */
  } else {
    ev.addr = addr;
  }
  if (rec_core_push_batch(core, &ev, 1, REC_TS_MAX_WAIT_NS))
    atomic_fetch_add_explicit(&S.lost, 1, memory_order_relaxed);
}

uint64_t rec_torch_stream_lost(void) { return atomic_load(&S.lost); }

int rec_torch_stream_bench(int mode) {
  if (!S.attached || mode < REC_TS_BENCH_FULL || mode > REC_TS_BENCH_NO_SITES) return -1;
  return atomic_exchange(&S.bench, mode);
}

/* ---- std::function<void(const TraceEntry&)>, libstdc++'s layout ---------------------------- */

enum { FN_GET_TYPE_INFO, FN_GET_FUNCTOR_PTR, FN_CLONE, FN_DESTROY };

typedef struct std_function {
  void *functor[2];                                 /* _Any_data: nothing stored */
  int (*manager)(void *dest, const void *src, int op); /* returns bool */
  void (*invoker)(const void *functor, const void *arg);
} std_function_t;

static int fn_manager(void *dest, const void *src, int op) {
  switch (op) {
    case FN_GET_TYPE_INFO: *(const void **)dest = NULL; break; /* no C++ type to name */
    case FN_GET_FUNCTOR_PTR: *(const void **)dest = src; break;
    case FN_CLONE: memcpy(dest, src, sizeof(((std_function_t *)0)->functor)); break;
    default: break; /* destroy: nothing owned */
  }
  return 0;
}

/* ---- finding the allocator and the slot -------------------------------------------------- */

typedef struct found {
  const char *want; /* "libc10_cuda.so": a path whose last component starts with it */
  char path[4096];
  uintptr_t lo, hi; /* the object's loaded address range */
} found_t;

static int on_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  found_t *f = arg;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, f->want, strlen(f->want)) != 0) return 0;
  snprintf(f->path, sizeof f->path, "%s", name);
  f->lo = UINTPTR_MAX;
  f->hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    if (p->p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + p->p_vaddr;
    if (a < f->lo) f->lo = a;
    if (a + p->p_memsz > f->hi) f->hi = a + p->p_memsz;
  }
  return 1;
}

static void *open_loaded(const char *object, found_t *f, char *why, size_t nwhy) {
  memset(f, 0, sizeof *f);
  f->want = object;
  dl_iterate_phdr(on_object, f);
  if (!f->path[0]) {
    snprintf(why, nwhy, "%s is not loaded", object);
    return NULL;
  }
  void *h = dlopen(f->path, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) snprintf(why, nwhy, "cannot open the loaded %s: %s", f->path, dlerror());
  return h;
}

/* The vtable slot CUDAAllocator gives attachAllocatorTraceTracker: where the pluggable
 * allocator's vtable (past offset-to-top and typeinfo) holds its override. -1 if none. */
#define REC_TS_MAX_SLOTS 512
static int find_slot(void *const *vtable, void *method) {
  void *const *vt = vtable + 2;
  for (int i = 0; i < REC_TS_MAX_SLOTS; i++)
    if (vt[i] == method) return i;
  return -1;
}

int rec_torch_stream_attach(rec_core_t *core, rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx),
                            const char *torch_version, const char *c10_obj, const char *torch_obj, char *why, size_t nwhy) {
  if (S.attached) return 0;
  if (!core) {
    snprintf(why, nwhy, "nothing is recorded");
    return -1;
  }
  if (!rec_torch_stream_known(torch_version)) {
    snprintf(why, nwhy, "torch %s: its allocator trace's layout is not known to this gpurec (known: 2.11)",
             torch_version ? torch_version : "(unknown version)");
    return -1;
  }
  found_t fc, ft;
  void *hc = open_loaded(c10_obj, &fc, why, nwhy);
  if (!hc) return -1;
  void *ht = open_loaded(torch_obj, &ft, why, nwhy);
  if (!ht) {
    dlclose(hc);
    return -1;
  }
  int rc = -1;
  void **atomic_ptr = dlsym(hc, REC_TS_ALLOCATOR);
  void *const *vtable = dlsym(ht, REC_TS_PLUGGABLE_VTABLE);
  void *method = dlsym(ht, REC_TS_PLUGGABLE_ATTACH);
  void *obj = atomic_ptr ? __atomic_load_n(atomic_ptr, __ATOMIC_ACQUIRE) : NULL;
  int slot = vtable && method ? find_slot(vtable, method) : -1;
  if (!atomic_ptr || !vtable || !method) {
    snprintf(why, nwhy, "%s lacks %s", !atomic_ptr ? fc.path : ft.path,
             !atomic_ptr ? "the allocator" : !vtable ? "CUDAPluggableAllocator's vtable"
                                                     : "CUDAPluggableAllocator::attachAllocatorTraceTracker");
  } else if (slot < 0) {
    snprintf(why, nwhy, "attachAllocatorTraceTracker is not in CUDAPluggableAllocator's first %d slots",
             REC_TS_MAX_SLOTS);
  } else if (!obj) {
    snprintf(why, nwhy, "PyTorch's CUDA allocator is not set up");
  } else {
    void *const *native_vt = *(void *const *const *)obj;
    uintptr_t target = (uintptr_t)native_vt[slot];
    if (target < fc.lo || target >= fc.hi) {
      /* another allocator (a pluggable one, cudaMallocAsync's) or a layout we misread */
      snprintf(why, nwhy, "the allocator in use is not PyTorch's native caching allocator "
                          "(slot %d of its vtable is outside %s)", slot, fc.path);
    } else {
      S.now = now_ns;
      S.cs = cs;
      atomic_store_explicit(&S.core, core, memory_order_release);
      std_function_t fn = {{NULL, NULL}, fn_manager, on_entry};
      void (*attach)(void *self, std_function_t *tracker);
      memcpy(&attach, &target, sizeof attach); /* a code address read from a vtable */
      attach(obj, &fn);
      if (fn.manager) fn.manager(&fn, &fn, FN_DESTROY); /* the caller's temporary, moved from or not */
      S.attached = 1;
      rc = 0;
    }
  }
  dlclose(ht);
  dlclose(hc);
  return rc;
}
