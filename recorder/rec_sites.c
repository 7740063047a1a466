/* rec_sites.c: the callsite of each request PyTorch's caching allocator serves, without
 * changing the allocator, for gpurec's default mode.
 *
 * In that mode the requests come from PyTorch's memory history, recorded without stacks (its
 * cheapest setting: with Python stacks PyTorch takes the GIL and walks every frame per entry,
 * ~800 ns); the CUPTI trace sees only the allocator's segments, since a cached block costs no
 * driver call. So the request's line of code must be read on the allocating thread while it
 * allocates. PyTorch's allocator calls c10::reportMemoryUsageToProfiler (libc10.so) on that
 * thread for every allocation and free, under its own mutex, with the block's address and size
 * (the profiler's memory events; a no-op unless a profiler listens): libc10_cuda.so calls it
 * through its GOT, whose slot rec_gothook.c points here. For each allocation of a CUDA device
 * the hook reads the innermost program frame without the GIL (rec_callsite.c, rec_pyframe.c:
 * a cache lookup per frame once the line has been seen) and pushes one ALLOC_SITE note (address,
 * block size, device, callsite id) into the recorder's ring; frees pass straight on. The merge
 * with the history (snapshot/snap_sites.c) gives each history alloc the callsite of its note.
 * The allocator, its settings and its decisions are untouched: the hook then calls the original
 * with the same arguments.
 * c10::Device is {int8 type; int8 index}, passed in one register: type in the low byte. */
#include "recorder/rec_sites.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "recorder/rec_gothook.h"

#define C10_CUDA_DEVICE 1 /* c10::DeviceType::CUDA */

/* device: the register that carries c10::Device, taken and passed on whole (only its low two
 * bytes are the struct; what else the caller left there reaches the original unchanged) */
typedef void (*report_fn)(void *ptr, int64_t size, size_t total_allocated, size_t total_reserved,
                          uint64_t device);

static struct {
  _Atomic(rec_core_t *) core;
  rec_callsites_t *cs;
  uint64_t (*now)(void *);
  report_fn orig;
  _Atomic uint64_t notes;
} S;

void rec_sites_attach(rec_core_t *core, rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx)) {
  S.cs = cs;
  S.now = now_ns;
  atomic_store_explicit(&S.core, cs ? core : NULL, memory_order_release);
}

uint64_t rec_sites_notes(void) { return atomic_load(&S.notes); }

static void note(void *ptr, int64_t size, uint64_t device) {
  rec_core_t *core = atomic_load_explicit(&S.core, memory_order_acquire);
  if (!core) return;
  /* a thread without Python frames (autograd's device threads) still gets its note, with no
   * callsite: the notes are then the history's allocations one for one, which the merge relies on */
  uint32_t id = rec_callsites_capture(S.cs);
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = GMT_EV_ALLOC_SITE;
  ev.ts_ns = S.now ? S.now(NULL) : 0;
  ev.addr = (uint64_t)(uintptr_t)ptr;
  ev.size = (uint64_t)size;
  ev.stream = GMT_STREAM_NONE;
  ev.device = (uint16_t)(uint8_t)(device >> 8);
  ev.mem_kind = GMT_MEM_DEVICE;
  ev.callsite = id;
  if (rec_core_push(core, &ev) == 0) atomic_fetch_add_explicit(&S.notes, 1, memory_order_relaxed);
}

static void on_report(void *ptr, int64_t size, size_t total_allocated, size_t total_reserved,
                      uint64_t device) {
  if (size > 0 && (device & 0xff) == C10_CUDA_DEVICE) note(ptr, size, device);
  report_fn orig = __atomic_load_n(&S.orig, __ATOMIC_ACQUIRE);
  if (orig) orig(ptr, size, total_allocated, total_reserved, device);
}

int rec_sites_unhook(const char *object, const char *symbol, char *why, size_t nwhy) {
  report_fn orig = __atomic_load_n(&S.orig, __ATOMIC_ACQUIRE);
  if (!orig) {
    snprintf(why, nwhy, "not hooked");
    return -1;
  }
  void *was = NULL; /* the hook itself: S.orig stays the original */
  return rec_got_hook(object, symbol, (void *)orig, &was, why, nwhy);
}

int rec_sites_hook(const char *object, const char *symbol, char *why, size_t nwhy) {
  if (!atomic_load(&S.core)) {
    snprintf(why, nwhy, "not recording callsites");
    return -2;
  }
  /* S.orig is set inside rec_got_hook before the first slot points here */
  return rec_got_hook(object, symbol, (void *)on_report, (void **)&S.orig, why, nwhy);
}
